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

use std::sync::atomic::{AtomicU64, Ordering};

use super::scalar::{on_scalars, OnScalars, Scalar};
use super::targets::{fits_u32, targets, Target};
use super::{expect_grad_shape, require_differentiable, Kind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::mem::parallel;
use crate::ops::op::Op;
use crate::policy::IndexPolicy;
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
        // Without the forward's result, grad_out stands in: only max and min read it.
        let out = out.as_ref().map_or(grad_out, TensorView::from);
        let grads = if fits_u32(data.len()) {
            self.vjp_with::<u32>(op, &inputs, (kind, include_self), [out, grad_out])?
        } else {
            self.vjp_with::<usize>(op, &inputs, (kind, include_self), [out, grad_out])?
        };
        let [data, updates] = <[Tensor; 2]>::try_from(grads)
            .map_err(|_| Error::unsupported("a scatter's gradient has two parts"))?;
        Ok(ScatterGrads { data, updates })
    }
}

impl IndexPolicy {
    /// The gradients of the checked scatter `op` on `inputs` (data,
    /// indices, updates), given the forward's result and `grad_out`, with
    /// targets of type `X`.
    fn vjp_with<X: Target>(
        &self,
        op: &Op,
        inputs: &[TensorView<'_>; 3],
        (kind, include_self): (Kind, bool),
        [out, grad_out]: [TensorView<'_>; 2],
    ) -> Result<Vec<Tensor>> {
        let [data, indices, updates] = *inputs;
        let targets = targets::<X>(self, op, data.shape(), indices, updates.len())?;
        if *self != IndexPolicy::Drop && targets.contains(&X::DROPPED) {
            // An index out of range: the forward names the first one.
            self.run(op, inputs)?;
            return Err(Error::unsupported(
                "an index the forward accepted did not resolve",
            ));
        }
        let pass = Pass {
            kind,
            include_self,
            targets: &targets,
        };
        let views = [data, updates, out, grad_out];
        on_scalars(&views, &[data.shape(), updates.shape()], &pass)
    }
}

/// One gradient computation: what the scatter did, and where each update went.
struct Pass<'t, X> {
    kind: Kind,
    include_self: bool,
    targets: &'t [X],
}

impl<X: Target> OnScalars for Pass<'_, X> {
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

/// For each data element: how many updates land on it (the low 32 bits)
/// and how many of those `wins(p, t)` (the high 32 bits). Counted with
/// atomic adds from every task at once: integers, so the counts are the
/// same in any order and on any thread count. One task, or 2^32 updates or
/// more (a count could carry into its neighbour), counts serially,
/// saturating.
fn counts<X: Target>(
    targets: &[X],
    len: usize,
    wins: impl Fn(usize, usize) -> bool + Sync,
) -> Result<Vec<AtomicU64>> {
    let mut counts = Vec::new();
    counts
        .try_reserve_exact(len)
        .map_err(|_| Error::Allocation {
            elements: len,
            dtype: DType::U64,
        })?;
    counts.resize_with(len, || AtomicU64::new(0));
    let tasks = parallel::tasks(targets.len() * 8, targets.len());
    if tasks == 1 || u32::try_from(targets.len()).is_err() {
        // One task needs no atomics.
        for (p, t) in landed(targets) {
            let c = counts[t].get_mut();
            let (hits, won) = ((*c as u32).saturating_add(1), (*c >> 32) as u32);
            let won = won.saturating_add(u32::from(wins(p, t)));
            *c = u64::from(hits) | u64::from(won) << 32;
        }
        return Ok(counts);
    }
    let per_task = targets.len().div_ceil(tasks).max(1);
    let Ok(()) = parallel::try_for_each_list(targets.chunks(per_task).collect(), |task, chunk| {
        for (k, &t) in chunk.iter().enumerate() {
            if t != X::DROPPED {
                let won = u64::from(wins(task * per_task + k, t.get()));
                counts[t.get()].fetch_add(1 | won << 32, Ordering::Relaxed);
            }
        }
        Ok::<(), std::convert::Infallible>(())
    });
    Ok(counts)
}

/// The updates that `win(p, t)` on their target, in ascending order: one
/// read of each update's target in parallel, each task keeping its own list.
fn winners<X: Target>(
    targets: &[X],
    win: impl Fn(usize, usize) -> bool + Sync,
) -> Result<Vec<usize>> {
    let tasks = parallel::tasks(targets.len() * 8, targets.len());
    let per_task = targets.len().div_ceil(tasks).max(1);
    let mut lists: Vec<Vec<usize>> = (0..tasks).map(|_| Vec::new()).collect();
    let work: Vec<_> = lists.iter_mut().zip(targets.chunks(per_task)).collect();
    parallel::try_for_each_list(work, |task, (list, chunk)| {
        for (k, &t) in chunk.iter().enumerate() {
            let p = task * per_task + k;
            if t != X::DROPPED && win(p, t.get()) {
                if list.len() == list.capacity() {
                    list.try_reserve(list.len().max(1024))
                        .map_err(|_| Error::Allocation {
                            elements: list.len() * 2,
                            dtype: DType::U64,
                        })?;
                }
                list.push(p);
            }
        }
        Ok(())
    })?;
    Ok(lists.concat())
}

/// The updates landing on an element, and how many of them win, from [`counts`].
fn hits_and_wins(count: &AtomicU64) -> (usize, usize) {
    let c = count.load(Ordering::Relaxed);
    ((c as u32) as usize, (c >> 32) as usize)
}

/// The passes of the table above, over the updates in ascending order
/// where order matters (the last of `none`, the prefix and suffix products
/// of `prod`) and in parallel where it does not.
fn vjp<T: Scalar, X: Target>(
    kind: Kind,
    include_self: bool,
    data: &[T],
    updates: &[T],
    out: &[T],
    grad_out: &[T],
    targets: &[X],
) -> Result<(Vec<T>, Vec<T>)> {
    let n = data.len();
    let own = usize::from(include_self);
    let mut grad_data = super::zeroed(n)?;
    let mut grad_updates = super::zeroed(updates.len())?;
    let target = |p: usize| Some(targets[p]).filter(|&t| t != X::DROPPED).map(X::get);
    let g = |p: usize| target(p).map(|t| grad_out[t]);
    match kind {
        Kind::Replace => {
            const NONE: usize = usize::MAX;
            let mut last = super::filled(n, NONE)?;
            for (p, t) in landed(targets) {
                last[t] = p;
            }
            fill_each(&mut grad_updates, |p| match target(p) {
                Some(t) if last[t] == p => grad_out[t],
                _ => T::ZERO,
            });
            fill_each(&mut grad_data, |t| {
                if last[t] == NONE {
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
            let counts = counts(targets, n, |_, _| false)?;
            // One division per target, then a gather of the shares.
            let mut share = super::zeroed(n)?;
            fill_each(&mut share, |t| {
                if kind == Kind::Mean {
                    grad_out[t].over(hits_and_wins(&counts[t]).0 + own)
                } else {
                    grad_out[t]
                }
            });
            fill_each(&mut grad_updates, |p| {
                target(p).map_or(T::ZERO, |t| share[t])
            });
            fill_each(&mut grad_data, |t| {
                match (hits_and_wins(&counts[t]).0, include_self) {
                    (0, _) => grad_out[t],
                    (_, true) => share[t],
                    (_, false) => T::ZERO,
                }
            });
        }
        Kind::Extreme => {
            // Only the winners matter, and they are few: find them in one
            // parallel read of the result, then count per element over them.
            let winners = winners(targets, |p, t| updates[p].ties(out[t]))?;
            let mut won: Vec<u32> = super::zeroed(n)?;
            for &p in &winners {
                let t = targets[p].get();
                won[t] = won[t].saturating_add(1);
            }
            let self_wins = |t: usize| include_self && data[t].ties(out[t]);
            let mut share = super::zeroed(n)?;
            fill_each(&mut share, |t| {
                grad_out[t].over(won[t] as usize + usize::from(self_wins(t)))
            });
            for &p in &winners {
                grad_updates[p] = share[targets[p].get()];
            }
            // With self, an element no update reached has self as its one
            // winner (its result is data's); without, an element some
            // update reached has a winning update (its result is one).
            fill_each(&mut grad_data, |t| match (include_self, won[t]) {
                (true, _) if self_wins(t) => share[t],
                (false, 0) => grad_out[t],
                _ => T::ZERO,
            });
        }
        Kind::Prod => {
            // prefix[p]: self (when included) times the updates before p on
            // its target; then, walking back, times those after p.
            let mut running = super::filled(n, T::ONE)?;
            if include_self {
                running.copy_from_slice(data);
            }
            let mut prefix = super::filled(updates.len(), T::ONE)?;
            for (p, t) in landed(targets) {
                prefix[p] = running[t];
                running[t] = running[t] * updates[p];
            }
            let mut after = super::filled(n, T::ONE)?;
            let mut hit = super::zeroed(n)?;
            for (p, t) in landed(targets).rev() {
                grad_updates[p] = grad_out[t] * (prefix[p] * after[t]).conj();
                after[t] = after[t] * updates[p];
                hit[t] = true;
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

/// The updates that land, each with its target, in order.
fn landed<X: Target>(targets: &[X]) -> impl DoubleEndedIterator<Item = (usize, usize)> + '_ {
    targets
        .iter()
        .enumerate()
        .filter(|(_, &t)| t != X::DROPPED)
        .map(|(p, &t)| (p, t.get()))
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
