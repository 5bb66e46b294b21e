//! The scatters' gradients, with respect to `data` and to `updates`, per
//! reduction. With `t(p)` the data element update `p` lands on, the group
//! of `t` the updates landing on it (ascending `p`), and `g = grad_out[t]`:
//!
//! | reduction | `grad_data[t]` (t in a group) | `grad_updates[p]` |
//! |---|---|---|
//! | none | 0 | `g` for the last of the group (the one the forward kept), else 0 |
//! | add / sum | `g` (0 without self) | `g` |
//! | mean | `g / c` (0 without self), `c` the values averaged | `g / c` |
//! | mul / prod | `g · conj(Π updates)` (0 without self) | `g · conj(Π of the others)` |
//! | max / min / amax / amin | `g / n` if self is a winner (0 without self) | `g / n` for a winner, else 0 |
//!
//! A data element no update lands on gets `g`. Products of the others are
//! prefix times suffix products, never a division: right with zeros among
//! the factors. Winners are the values equal to the result (NaN equal to
//! NaN, -0.0 to 0.0), and share the gradient evenly, as PyTorch does. An
//! update the policy `drop` skipped gets 0. Complex gradients follow
//! PyTorch's convention (the conjugate of the derivative).

use super::scalar::{on_scalars, OnScalars, Scalar};
use super::{expect_grad_shape, require_differentiable, Kind};
use crate::error::{Error, Result};
use crate::index::{with_index_view, AxisRule, IndexElement};
use crate::mem::parallel;
use crate::ops::op::Op;
use crate::policy::IndexPolicy;
use crate::shape::{normalize_axis, strides};
use crate::tensor::{Tensor, TypedView};
use crate::tensor_view::TensorView;

/// The gradients of a scatter with respect to its two float inputs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ScatterGrads {
    /// With respect to `data`: `data`'s shape.
    pub data: Tensor,
    /// With respect to `updates`: `updates`' shape.
    pub updates: Tensor,
}

impl IndexPolicy {
    /// The gradients of the scatter `op` (ScatterElements, ScatterND or
    /// ScatterReduce) run under this policy (`raise`, `clip`, `wrap` or
    /// `drop`) on `data`, `indices` and `updates`, given `grad_out` (of
    /// `data`'s shape and dtype): see the table of the module.
    ///
    /// The call is checked as the forward checks it, and fails with the
    /// forward's error; max and min run the forward, whose result names
    /// their winners.
    ///
    /// ```
    /// use gatherscatter::{Aggregate, IndexPolicy, Op, ScatterReduce, Tensor, TensorView};
    ///
    /// // out = [2 * 3 * 0, 5]: the zero factor gets 2 * 3, the others 0.
    /// let data = Tensor::from_vec(vec![2.0f64, 5.0]);
    /// let indices = Tensor::from_vec(vec![0i64, 0]);
    /// let updates = Tensor::from_vec(vec![3.0f64, 0.0]);
    /// let grad_out = Tensor::from_vec(vec![1.0f64, 1.0]);
    /// let op = Op::from(ScatterReduce::new(0, Aggregate::Prod));
    /// let views = [&data, &indices, &updates, &grad_out].map(TensorView::from);
    /// let grads = IndexPolicy::Raise.scatter_grad(&op, views[0], views[1], views[2], views[3])?;
    /// assert_eq!(grads.data.data::<f64>().unwrap(), &[0.0, 1.0]);
    /// assert_eq!(grads.updates.data::<f64>().unwrap(), &[0.0, 6.0]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn scatter_grad(
        &self,
        op: &Op,
        data: TensorView<'_>,
        indices: TensorView<'_>,
        updates: TensorView<'_>,
        grad_out: TensorView<'_>,
    ) -> Result<ScatterGrads> {
        let (kind, include_self) = match op {
            Op::ScatterElements(s) => (Kind::from(s.reduction), true),
            Op::ScatterND(s) => (Kind::from(s.reduction), true),
            Op::ScatterReduce(s) => (Kind::from(s.reduce), s.include_self),
            other => {
                return Err(Error::unsupported(format!(
                    "the scatter gradient of {} is not defined (scatters: ScatterElements, ScatterND, ScatterReduce)",
                    other.name()
                )))
            }
        };
        require_differentiable("data", data.dtype(), op.name())?;
        let inputs = [data, indices, updates];
        // max and min need the forward's result; the others only its checks,
        // made here without the work, the forward's own errors given when
        // they fail.
        let out = if kind == Kind::Extreme {
            Some(self.run(op, &inputs)?)
        } else {
            if let Err(error) = checked(op, &inputs) {
                self.run(op, &inputs)?;
                return Err(error);
            }
            None
        };
        expect_grad_shape(&grad_out, data.shape(), op.name())?;
        crate::ops::require_same_dtype(
            "grad_out",
            grad_out.dtype(),
            data.dtype(),
            "the gradient of a scatter on {} data",
        )?;
        let targets = targets(self, op, data.shape(), indices, updates.len())?;
        if *self != IndexPolicy::Drop && targets.contains(&DROPPED) {
            // An index out of range: the forward names the first one.
            self.run(op, &inputs)?;
            return Err(Error::unsupported(
                "an index the forward accepted did not resolve",
            ));
        }
        // Without the forward's result, grad_out stands in: only max and min read it.
        let out = out.as_ref().map_or(grad_out, TensorView::from);
        let pass = Pass {
            kind,
            include_self,
            targets: &targets,
        };
        let inputs = [data, updates, out, grad_out];
        let grads = on_scalars(&inputs, &[data.shape(), updates.shape()], &pass)?;
        let [data, updates] = <[Tensor; 2]>::try_from(grads)
            .map_err(|_| Error::unsupported("a scatter's gradient has two parts"))?;
        Ok(ScatterGrads { data, updates })
    }
}

/// One gradient computation: what the scatter did, and where each update went.
struct Pass<'t> {
    kind: Kind,
    include_self: bool,
    targets: &'t [usize],
}

impl OnScalars for Pass<'_> {
    fn run<T: Scalar>(&self, inputs: &[&[T]]) -> Result<Vec<Vec<T>>> {
        let [data, updates, out, grad_out] = inputs else {
            return Err(Error::unsupported("a scatter's gradient takes four inputs"));
        };
        let (grad_data, grad_updates) = vjp(
            self.kind,
            self.include_self,
            data,
            updates,
            out,
            grad_out,
            self.targets,
        )?;
        Ok(vec![grad_data, grad_updates])
    }
}

/// The forward's shape, dtype and rank rules, without running it.
fn checked(op: &Op, inputs: &[TensorView<'_>; 3]) -> Result<()> {
    let [data, indices, updates] = *inputs;
    if !indices.dtype().is_index_type() {
        return Err(Error::shape("indices of a dtype that holds no indices"));
    }
    crate::policy::check_scatter(op, data, indices, updates)?;
    if let Op::ScatterND(_) = op {
        let k = indices.shape().last().copied().unwrap_or(0);
        if indices.rank() == 0 || k > data.rank() {
            return Err(Error::shape(
                "ScatterND's index tuples are longer than data's rank",
            ));
        }
    }
    Ok(())
}

/// A dropped update's target.
const DROPPED: usize = usize::MAX;

/// For each update element (row-major), the flat data offset it lands on
/// under `policy`, or [`DROPPED`]. The forward has run, so every index
/// resolves.
fn targets(
    policy: &IndexPolicy,
    op: &Op,
    data_shape: &[usize],
    indices: TensorView<'_>,
    updates_len: usize,
) -> Result<Vec<usize>> {
    let data_strides = strides(data_shape);
    // Zeroed (lazily, by the kernel) and then written in full.
    let mut targets = vec![0usize; updates_len];
    let per_task = updates_len
        .div_ceil(parallel::tasks(updates_len * 8, updates_len).max(1))
        .max(1);
    match op {
        Op::ScatterND(_) => {
            let k = indices.shape().last().copied().unwrap_or(0);
            let slice: usize = data_shape[k.min(data_shape.len())..].iter().product();
            with_index_view!(indices, "a scatter's gradient", v => {
                let values = v.data();
                parallel::for_each_chunk(&mut targets, per_task, |task, chunk| {
                    for (i, slot) in chunk.iter_mut().enumerate() {
                        let flat = task * per_task + i;
                        let t = flat / slice.max(1);
                        let tuple = &values[t * k..t * k + k];
                        let base = tuple.iter().enumerate().try_fold(0, |acc, (j, x)| {
                            Some(acc + policy.resolve(x.to_i128(), data_shape[j])? * data_strides[j])
                        });
                        *slot = base.map_or(DROPPED, |b| b + flat % slice.max(1));
                    }
                })
            });
        }
        _ => {
            let axis = match op {
                Op::ScatterElements(s) => s.axis,
                Op::ScatterReduce(s) => s.axis,
                _ => 0,
            };
            let axis = normalize_axis(axis, data_shape.len(), "data")?;
            let shape = indices.shape();
            let index_strides = strides(shape);
            let size = data_shape[axis];
            with_index_view!(indices, "a scatter's gradient", v => {
                let values = v.data();
                parallel::for_each_chunk(&mut targets, per_task, |task, chunk| {
                    if shape.len() == 1 && *policy == IndexPolicy::Raise {
                        // One dim, no policy: the index is the target.
                        let rule = AxisRule { axis, size, negative_allowed: true };
                        let start = task * per_task;
                        for (slot, x) in chunk.iter_mut().zip(&values[start..]) {
                            let wide = i64::try_from(x.to_i128()).unwrap_or(i64::MAX);
                            let position = rule.position(wide);
                            *slot = if position < size { position } else { DROPPED };
                        }
                        return;
                    }
                    for (i, slot) in chunk.iter_mut().enumerate() {
                        let flat = task * per_task + i;
                        let Some(position) = policy.resolve(values[flat].to_i128(), size) else {
                            *slot = DROPPED;
                            continue;
                        };
                        *slot = (0..shape.len())
                            .map(|d| {
                                let coord = if d == axis {
                                    position
                                } else {
                                    flat / index_strides[d] % shape[d]
                                };
                                coord * data_strides[d]
                            })
                            .sum();
                    }
                })
            });
        }
    }
    Ok(targets)
}

/// `out[i] = f(i)` for every element, on the pool when it is large.
fn fill_each<T: Send>(out: &mut [T], f: impl Fn(usize) -> T + Sync + Send) {
    let len = out.len();
    let per_task = len
        .div_ceil(parallel::tasks(std::mem::size_of_val(out), len).max(1))
        .max(1);
    parallel::for_each_chunk(out, per_task, |task, chunk| {
        for (i, slot) in chunk.iter_mut().enumerate() {
            *slot = f(task * per_task + i);
        }
    });
}

/// How many updates land on each data element.
fn hits(targets: &[usize], len: usize) -> Vec<u32> {
    let mut hits = vec![0u32; len];
    for &t in targets {
        if t != DROPPED {
            hits[t] = hits[t].saturating_add(1);
        }
    }
    hits
}

/// The passes of the table above, over the updates in ascending order
/// where order matters (the last of `none`, the prefix and suffix products
/// of `prod`) and in parallel where it does not.
fn vjp<T: Scalar>(
    kind: Kind,
    include_self: bool,
    data: &[T],
    updates: &[T],
    out: &[T],
    grad_out: &[T],
    targets: &[usize],
) -> Result<(Vec<T>, Vec<T>)> {
    let n = data.len();
    let own = usize::from(include_self);
    let mut grad_data = vec![T::ZERO; n];
    let mut grad_updates = vec![T::ZERO; updates.len()];
    let g = |p: usize| {
        if targets[p] == DROPPED {
            None
        } else {
            Some(grad_out[targets[p]])
        }
    };
    match kind {
        Kind::Replace => {
            let mut last = vec![DROPPED; n];
            for (p, &t) in targets.iter().enumerate() {
                if t != DROPPED {
                    last[t] = p;
                }
            }
            fill_each(&mut grad_updates, |p| match g(p) {
                Some(g) if last[targets[p]] == p => g,
                _ => T::ZERO,
            });
            fill_each(&mut grad_data, |t| {
                if last[t] == DROPPED {
                    grad_out[t]
                } else {
                    T::ZERO
                }
            });
        }
        Kind::Sum if include_self => {
            // Every value passes g on, self included: no counts needed.
            fill_each(&mut grad_updates, |p| g(p).unwrap_or(T::ZERO));
            grad_data.copy_from_slice(grad_out);
        }
        Kind::Sum | Kind::Mean => {
            let hits = hits(targets, n);
            // One division per target, then a gather of the shares.
            let mut share = vec![T::ZERO; n];
            fill_each(&mut share, |t| {
                if kind == Kind::Mean {
                    grad_out[t].over(hits[t] as usize + own)
                } else {
                    grad_out[t]
                }
            });
            fill_each(&mut grad_updates, |p| {
                g(p).map_or(T::ZERO, |_| share[targets[p]])
            });
            fill_each(&mut grad_data, |t| match (hits[t], include_self) {
                (0, _) => grad_out[t],
                (_, true) => share[t],
                (_, false) => T::ZERO,
            });
        }
        Kind::Extreme => {
            // One pass: how many updates land on each element, and how many of them win.
            let mut counts = vec![[0u32; 2]; n];
            for (p, &t) in targets.iter().enumerate() {
                if t != DROPPED {
                    let wins = u32::from(updates[p].ties(out[t]));
                    counts[t][0] = counts[t][0].saturating_add(1);
                    counts[t][1] += wins;
                }
            }
            let hits: Vec<u32> = counts.iter().map(|c| c[0]).collect();
            let winners: Vec<u32> = counts.iter().map(|c| c[1]).collect();
            let self_wins = |t: usize| include_self && data[t].ties(out[t]);
            let mut share = vec![T::ZERO; n];
            fill_each(&mut share, |t| {
                grad_out[t].over(winners[t] as usize + usize::from(self_wins(t)))
            });
            fill_each(&mut grad_updates, |p| match g(p) {
                Some(_) if updates[p].ties(out[targets[p]]) => share[targets[p]],
                _ => T::ZERO,
            });
            fill_each(&mut grad_data, |t| {
                if hits[t] == 0 {
                    grad_out[t]
                } else if self_wins(t) {
                    share[t]
                } else {
                    T::ZERO
                }
            });
        }
        Kind::Prod => {
            // prefix[p]: self (when included) times the updates before p on
            // its target; then, walking back, times those after p.
            let mut running: Vec<T> = (0..n)
                .map(|t| if include_self { data[t] } else { T::ONE })
                .collect();
            let mut prefix = vec![T::ONE; updates.len()];
            for (p, &t) in targets.iter().enumerate() {
                if t != DROPPED {
                    prefix[p] = running[t];
                    running[t] = running[t] * updates[p];
                }
            }
            let mut after = vec![T::ONE; n];
            let mut hit = vec![false; n];
            for (p, &t) in targets.iter().enumerate().rev() {
                if t != DROPPED {
                    grad_updates[p] = grad_out[t] * (prefix[p] * after[t]).conj();
                    after[t] = after[t] * updates[p];
                    hit[t] = true;
                }
            }
            fill_each(&mut grad_data, |t| match (hit[t], include_self) {
                (false, _) => grad_out[t],
                (true, true) => grad_out[t] * after[t].conj(),
                (true, false) => T::ZERO,
            });
        }
    }
    Ok((grad_data, grad_updates))
}

impl crate::TensorScatter {
    /// The gradients of this TensorScatter with respect to `past_cache` and
    /// `update`, given `grad_out` (the cache's shape): the cache gets
    /// `grad_out` outside the written window, the update gets the window.
    ///
    /// ```
    /// use gatherscatter::{TensorScatter, Tensor, TensorView};
    ///
    /// let cache = Tensor::new(vec![1, 4, 1], vec![0.0f32; 4])?;
    /// let update = Tensor::new(vec![1, 2, 1], vec![5.0f32, 6.0])?;
    /// let grad_out = Tensor::new(vec![1, 4, 1], vec![1.0f32, 2.0, 3.0, 4.0])?;
    /// let at = Tensor::from_vec(vec![1i64]);
    /// let grads = TensorScatter::new()
    ///     .grad((&cache).into(), (&update).into(), Some((&at).into()), (&grad_out).into())?;
    /// assert_eq!(grads.data.data::<f32>().unwrap(), &[1.0, 0.0, 0.0, 4.0]);
    /// assert_eq!(grads.updates.data::<f32>().unwrap(), &[2.0, 3.0]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad(
        &self,
        past_cache: TensorView<'_>,
        update: TensorView<'_>,
        write_indices: Option<TensorView<'_>>,
        grad_out: TensorView<'_>,
    ) -> Result<ScatterGrads> {
        let op = Op::from(*self);
        require_differentiable("past_cache", past_cache.dtype(), op.name())?;
        let offsets = self.written_offsets(&past_cache, &update, write_indices)?;
        expect_grad_shape(&grad_out, past_cache.shape(), "TensorScatter")?;
        crate::ops::require_same_dtype(
            "grad_out",
            grad_out.dtype(),
            past_cache.dtype(),
            "the gradient of TensorScatter on a {} cache",
        )?;
        let shapes = (past_cache.shape(), update.shape());
        crate::tensor_view::with_view!(grad_out, g => cut_window(g, &offsets, shapes))
    }
}

/// `grad_out` with the written window cut out: the cache's gradient (zeros
/// in the window) and the update's (the window).
fn cut_window<T: crate::Element>(
    grad_out: TypedView<'_, T>,
    offsets: &[usize],
    (cache_shape, update_shape): (&[usize], &[usize]),
) -> Result<ScatterGrads> {
    let zero = crate::ops::alloc_output::<T>(1)?.swap_remove(0);
    let mut cache = grad_out.data().to_vec();
    let window: Vec<T> = offsets
        .iter()
        .map(|&o| std::mem::replace(&mut cache[o], zero.clone()))
        .collect();
    Ok(ScatterGrads {
        data: Tensor::new(cache_shape.to_vec(), cache)?,
        updates: Tensor::new(update_shape.to_vec(), window)?,
    })
}
