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

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use super::{expect_grad_shape, require_differentiable, reserve};
use crate::aggregate::Aggregate;
use crate::error::{Error, Result};
use crate::index::{with_index_view, IndexElement};
use crate::ops::op::Op;
use crate::policy::IndexPolicy;
use crate::reduction::Reduction;
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

/// What a scatter does with the values aimed at one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Replace,
    Sum,
    Mean,
    Prod,
    Extreme,
}

impl IndexPolicy {
    /// The gradients of the scatter `op` (ScatterElements, ScatterND or
    /// ScatterReduce) run under this policy (`raise`, `clip`, `wrap` or
    /// `drop`) on `data`, `indices` and `updates`, given `grad_out` (of
    /// `data`'s shape and dtype): see the table of the module.
    ///
    /// The forward runs first: its checks and errors are the gradient's,
    /// and its output names the winners of max and min.
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
        require_differentiable("data", data.dtype(), op)?;
        let out = self.run(op, &[data, indices, updates])?;
        expect_grad_shape(&grad_out, data.shape(), op.name())?;
        crate::ops::require_same_dtype(
            "grad_out",
            grad_out.dtype(),
            data.dtype(),
            "the gradient of a scatter on {} data",
        )?;
        let targets = targets(self, op, data.shape(), indices, updates.len())?;
        let shapes = (data.shape(), updates.shape());
        let out = TensorView::from(&out);
        match (data, updates, out, grad_out) {
            (TensorView::F32(d), TensorView::F32(u), TensorView::F32(o), TensorView::F32(g)) => {
                finish(
                    shapes,
                    vjp(
                        kind,
                        include_self,
                        d.data(),
                        u.data(),
                        o.data(),
                        g.data(),
                        &targets,
                    )?,
                )
            }
            (TensorView::F64(d), TensorView::F64(u), TensorView::F64(o), TensorView::F64(g)) => {
                finish(
                    shapes,
                    vjp(
                        kind,
                        include_self,
                        d.data(),
                        u.data(),
                        o.data(),
                        g.data(),
                        &targets,
                    )?,
                )
            }
            (
                TensorView::Complex64(d),
                TensorView::Complex64(u),
                TensorView::Complex64(o),
                TensorView::Complex64(g),
            ) => finish(
                shapes,
                vjp(
                    kind,
                    include_self,
                    d.data(),
                    u.data(),
                    o.data(),
                    g.data(),
                    &targets,
                )?,
            ),
            (
                TensorView::Complex128(d),
                TensorView::Complex128(u),
                TensorView::Complex128(o),
                TensorView::Complex128(g),
            ) => finish(
                shapes,
                vjp(
                    kind,
                    include_self,
                    d.data(),
                    u.data(),
                    o.data(),
                    g.data(),
                    &targets,
                )?,
            ),
            (TensorView::F16(d), TensorView::F16(u), TensorView::F16(o), TensorView::F16(g)) => {
                let (a, b) = vjp(
                    kind,
                    include_self,
                    &wide(d),
                    &wide(u),
                    &wide(o),
                    &wide(g),
                    &targets,
                )?;
                finish(shapes, (narrow(a, f16::from_f32), narrow(b, f16::from_f32)))
            }
            (
                TensorView::BF16(d),
                TensorView::BF16(u),
                TensorView::BF16(o),
                TensorView::BF16(g),
            ) => {
                let (a, b) = vjp(
                    kind,
                    include_self,
                    &wide(d),
                    &wide(u),
                    &wide(o),
                    &wide(g),
                    &targets,
                )?;
                finish(
                    shapes,
                    (narrow(a, bf16::from_f32), narrow(b, bf16::from_f32)),
                )
            }
            _ => Err(Error::shape(
                "the scatter's inputs and output differ in dtype",
            )),
        }
    }
}

fn finish<T: crate::Element>(
    (data_shape, updates_shape): (&[usize], &[usize]),
    (data, updates): (Vec<T>, Vec<T>),
) -> Result<ScatterGrads> {
    Ok(ScatterGrads {
        data: Tensor::new(data_shape.to_vec(), data)?,
        updates: Tensor::new(updates_shape.to_vec(), updates)?,
    })
}

impl From<Reduction> for Kind {
    fn from(reduction: Reduction) -> Kind {
        match reduction {
            Reduction::None => Kind::Replace,
            Reduction::Add => Kind::Sum,
            Reduction::Mul => Kind::Prod,
            Reduction::Max | Reduction::Min => Kind::Extreme,
        }
    }
}

impl From<Aggregate> for Kind {
    fn from(aggregate: Aggregate) -> Kind {
        match aggregate {
            Aggregate::Sum => Kind::Sum,
            Aggregate::Prod => Kind::Prod,
            Aggregate::Mean => Kind::Mean,
            Aggregate::Amax | Aggregate::Amin => Kind::Extreme,
        }
    }
}

/// The element type the gradients are computed in.
trait Scalar: Copy + PartialEq + std::ops::Mul<Output = Self> {
    const ZERO: Self;
    const ONE: Self;
    fn conj(self) -> Self;
    fn over(self, count: usize) -> Self;
    /// Equal as a max or min's result: NaN equals NaN.
    fn ties(self, result: Self) -> bool;
}

macro_rules! real {
    ($t:ty) => {
        impl Scalar for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            fn conj(self) -> $t {
                self
            }
            fn over(self, count: usize) -> $t {
                self / count as $t
            }
            fn ties(self, result: $t) -> bool {
                self == result || (self.is_nan() && result.is_nan())
            }
        }
    };
}
real!(f32);
real!(f64);

macro_rules! complex {
    ($t:ty, $f:ty) => {
        impl Scalar for $t {
            const ZERO: $t = <$t>::new(0.0, 0.0);
            const ONE: $t = <$t>::new(1.0, 0.0);
            fn conj(self) -> $t {
                <$t>::conj(&self)
            }
            fn over(self, count: usize) -> $t {
                self / count as $f
            }
            fn ties(self, result: $t) -> bool {
                self == result
            }
        }
    };
}
complex!(Complex32, f32);
complex!(Complex64, f64);

/// f16 and bf16 are computed in f32 and rounded once.
fn wide<T: Copy + Into<f32>>(v: TypedView<'_, T>) -> Vec<f32> {
    v.data().iter().map(|&x| x.into()).collect()
}

fn narrow<T>(values: Vec<f32>, round: fn(f32) -> T) -> Vec<T> {
    values.into_iter().map(round).collect()
}

/// For each update element (row-major), the flat data offset it lands on
/// under `policy`, or `None` when `drop` skips it. The forward has run, so
/// every index resolves.
fn targets(
    policy: &IndexPolicy,
    op: &Op,
    data_shape: &[usize],
    indices: TensorView<'_>,
    updates_len: usize,
) -> Result<Vec<Option<usize>>> {
    let values: Vec<i128> = with_index_view!(indices, "a scatter's gradient", v => {
        v.data().iter().map(|x| x.to_i128()).collect()
    });
    let data_strides = strides(data_shape);
    let mut targets = reserve(updates_len)?;
    match op {
        Op::ScatterND(_) => {
            let k = indices.shape().last().copied().unwrap_or(0);
            let slice: usize = data_shape[k.min(data_shape.len())..].iter().product();
            let tuples = updates_len.checked_div(slice).unwrap_or(0);
            for t in 0..tuples {
                let tuple = &values[t * k..t * k + k];
                let base: Option<usize> = tuple.iter().enumerate().try_fold(0, |acc, (j, &v)| {
                    Some(acc + policy.resolve(v, data_shape[j])? * data_strides[j])
                });
                targets.extend((0..slice).map(|e| base.map(|b| b + e)));
            }
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
            for (flat, &v) in values.iter().enumerate() {
                let target = policy.resolve(v, data_shape[axis]).map(|position| {
                    (0..shape.len())
                        .map(|d| {
                            let coord = if d == axis {
                                position
                            } else {
                                flat / index_strides[d] % shape[d]
                            };
                            coord * data_strides[d]
                        })
                        .sum()
                });
                targets.push(target);
            }
        }
    }
    Ok(targets)
}

/// Each data element's updates, in ascending order: `members[starts[t]..starts[t + 1]]`.
fn groups(targets: &[Option<usize>], len: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    let mut starts = vec![0usize; len + 1];
    for t in targets.iter().flatten() {
        starts[t + 1] += 1;
    }
    for t in 0..len {
        starts[t + 1] += starts[t];
    }
    let mut next = starts.clone();
    let mut members = vec![0usize; starts[len]];
    for (p, t) in targets.iter().enumerate() {
        if let Some(t) = t {
            members[next[*t]] = p;
            next[*t] += 1;
        }
    }
    Ok((starts, members))
}

fn vjp<T: Scalar>(
    kind: Kind,
    include_self: bool,
    data: &[T],
    updates: &[T],
    out: &[T],
    grad_out: &[T],
    targets: &[Option<usize>],
) -> Result<(Vec<T>, Vec<T>)> {
    let (starts, members) = groups(targets, data.len())?;
    let mut grad_data = grad_out.to_vec();
    let mut grad_updates = vec![T::ZERO; updates.len()];
    let mut suffix: Vec<T> = Vec::new();
    for t in 0..data.len() {
        let group = &members[starts[t]..starts[t + 1]];
        let Some(&last) = group.last() else { continue };
        let g = grad_out[t];
        let own = if include_self { 1 } else { 0 };
        match kind {
            Kind::Replace => {
                grad_data[t] = T::ZERO;
                grad_updates[last] = g;
            }
            Kind::Sum | Kind::Mean => {
                let share = if kind == Kind::Mean {
                    g.over(group.len() + own)
                } else {
                    g
                };
                grad_data[t] = if include_self { share } else { T::ZERO };
                for &p in group {
                    grad_updates[p] = share;
                }
            }
            Kind::Prod => {
                // The factors in order: self (when included), then the group's updates.
                let factor = |i: usize| {
                    if include_self && i == 0 {
                        data[t]
                    } else {
                        updates[group[i - own]]
                    }
                };
                let n = group.len() + own;
                suffix.clear();
                suffix.resize(n + 1, T::ONE);
                for i in (0..n).rev() {
                    suffix[i] = suffix[i + 1] * factor(i);
                }
                let mut prefix = T::ONE;
                grad_data[t] = T::ZERO;
                for i in 0..n {
                    let others = g * (prefix * suffix[i + 1]).conj();
                    if include_self && i == 0 {
                        grad_data[t] = others;
                    } else {
                        grad_updates[group[i - own]] = others;
                    }
                    prefix = prefix * factor(i);
                }
            }
            Kind::Extreme => {
                let result = out[t];
                let self_wins = include_self && data[t].ties(result);
                let winners = group.iter().filter(|&&p| updates[p].ties(result)).count()
                    + usize::from(self_wins);
                let share = g.over(winners.max(1));
                grad_data[t] = if self_wins { share } else { T::ZERO };
                for &p in group {
                    grad_updates[p] = if updates[p].ties(result) {
                        share
                    } else {
                        T::ZERO
                    };
                }
            }
        }
    }
    Ok((grad_data, grad_updates))
}
