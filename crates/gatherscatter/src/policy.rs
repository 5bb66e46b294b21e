//! Index policies: what an out-of-range index means, numpy's `mode=` and
//! JAX's `mode=` for the gathers and scatters.
//!
//! A policy is a layer over the operators, not a change to their kernels:
//! `clip` and `wrap` turn every index into an in-range one first; `fill`
//! gathers from a stand-in index and then writes the fill value where the
//! index was out of range; `drop` runs the scatter on the in-range updates
//! only (in their row-major order, so duplicates still combine as they
//! would).

use std::fmt;
use std::str::FromStr;

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::with_index_view;
use crate::ops::op::Op;
use crate::ops::scatter_nd::ScatterND;
use crate::ops::scatter_reduce::ScatterReduce;
use crate::profile::Profile;
use crate::shape::{normalize_axis, strides};
use crate::tensor::{Tensor, TypedView};
use crate::tensor_view::{with_view, TensorView};
use crate::{bf16, f16, Complex32, Complex64};

/// What an index outside `[-s, s)` (for an axis of size `s`) does.
///
/// | policy | gathers | scatters | an index `v` |
/// |---|---|---|---|
/// | `Raise` | yes | yes | out of range is an `out_of_bounds` error (the default, and the operators' own rule) |
/// | `Clip` | yes | yes | negatives in `[-s, 0)` count from the end, then `v` is clamped to `[0, s - 1]` (JAX's rule; numpy's `take(mode="clip")` clamps negatives to 0 instead) |
/// | `Wrap` | yes | yes | `v` modulo `s`, the remainder in `[0, s)` (numpy's `wrap`) |
/// | `Fill` | yes | no | negatives in `[-s, 0)` count from the end; a position still out of range reads the fill value (JAX's `fill`): the whole slice for Gather and GatherND |
/// | `Drop` | no | yes | negatives in `[-s, 0)` count from the end; an update whose index is still out of range is skipped (JAX's `drop`) |
///
/// An axis of size 0 has nothing to clip or wrap to: `Clip` and `Wrap` then
/// raise as `Raise` does; `Fill` fills everything. The fill value is the
/// caller's (one value of the data's dtype) or JAX's default: NaN for
/// floating and complex types, the most negative value for signed
/// integers, the largest for unsigned ones, `true` for bool, `""` for strings.
///
/// ```
/// use gatherscatter::{Gather, IndexPolicy, Op, Tensor, TensorView};
///
/// let data = Tensor::from_vec(vec![10i32, 20, 30]);
/// let indices = Tensor::from_vec(vec![-4i64, 1, 3]);
/// let gather = Op::from(Gather::new(0));
/// let inputs = [TensorView::from(&data), TensorView::from(&indices)];
/// let clip = IndexPolicy::Clip.run(&gather, &inputs)?;
/// assert_eq!(clip.data::<i32>().unwrap(), &[10, 20, 30]);
/// let wrap = IndexPolicy::Wrap.run(&gather, &inputs)?;
/// assert_eq!(wrap.data::<i32>().unwrap(), &[30, 20, 10]);
/// let fill = IndexPolicy::Fill(Some(Tensor::scalar(-1i32))).run(&gather, &inputs)?;
/// assert_eq!(fill.data::<i32>().unwrap(), &[-1, 20, -1]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum IndexPolicy {
    /// An out-of-range index is an error.
    #[default]
    Raise,
    /// Clamp to the axis (after negatives count from the end).
    Clip,
    /// Modulo the axis size.
    Wrap,
    /// Out-of-range positions read this value (`None`: JAX's default).
    Fill(Option<Tensor>),
    /// Out-of-range updates are skipped.
    Drop,
}

impl IndexPolicy {
    /// The name: `raise`, `clip`, `wrap`, `fill` or `drop`.
    pub fn name(&self) -> &'static str {
        match self {
            IndexPolicy::Raise => "raise",
            IndexPolicy::Clip => "clip",
            IndexPolicy::Wrap => "wrap",
            IndexPolicy::Fill(_) => "fill",
            IndexPolicy::Drop => "drop",
        }
    }

    /// Run `op` on `inputs` (in [`Op::inputs`] order) under this policy.
    /// Gather, GatherElements and GatherND take `raise`, `clip`, `wrap` and
    /// `fill`; ScatterElements, ScatterND and ScatterReduce take `raise`,
    /// `clip`, `wrap` and `drop`; other operators only `raise`. Anything
    /// else is a `bad_attribute` error.
    pub fn run(&self, op: &Op, inputs: &[TensorView<'_>]) -> Result<Tensor> {
        if *self == IndexPolicy::Raise {
            return op.run(inputs);
        }
        let gather = matches!(op, Op::Gather(_) | Op::GatherElements(_) | Op::GatherND(_));
        let scatter = matches!(
            op,
            Op::ScatterElements(_) | Op::ScatterND(_) | Op::ScatterReduce(_)
        );
        let allowed = match self {
            IndexPolicy::Fill(_) => gather,
            IndexPolicy::Drop => scatter,
            _ => gather || scatter,
        };
        if !allowed {
            return Err(Error::attribute(format!(
                "mode {} is not defined for {} (gathers take raise, clip, wrap, fill; scatters raise, clip, wrap, drop)",
                self.name(),
                op.name()
            )));
        }
        if profile_of(op) != Profile::Permissive {
            return Err(Error::unsupported(format!(
                "mode {} is this library's, not part of profile {}",
                self.name(),
                profile_of(op)
            )));
        }
        if inputs.len() < 2 {
            return op.run(inputs);
        }
        let (data, indices) = (inputs[0], inputs[1]);
        let sizes = axis_sizes(op, data.shape(), indices.shape())?;
        let values = index_values(indices)?;
        let resolved: Vec<Option<usize>> = values
            .iter()
            .enumerate()
            .map(|(flat, &v)| self.resolve(v, sizes.of(flat)))
            .collect();
        match self {
            IndexPolicy::Clip | IndexPolicy::Wrap => {
                // In range now, or left as given (an empty axis) for the op to refuse.
                let fixed = resolved
                    .iter()
                    .zip(&values)
                    .map(|(r, &v)| r.map_or(clamp_i64(v), |p| p as i64))
                    .collect();
                run_with_indices(op, inputs, fixed)
            }
            IndexPolicy::Fill(value) => {
                let fill = match value {
                    Some(v) => {
                        crate::ops::check_fill(v, data.dtype(), "mode fill on {} data")?;
                        v.clone()
                    }
                    None => default_fill(data.dtype()),
                };
                self.run_filled(op, inputs, &sizes, &resolved, &fill)
            }
            _ => run_dropped(op, inputs, &sizes, &resolved),
        }
    }

    /// The position `v` names on an axis of size `s` under this policy, or
    /// `None` when it names none.
    pub(crate) fn resolve(&self, v: i128, s: usize) -> Option<usize> {
        let s_wide = s as i128;
        if s == 0 {
            return None;
        }
        let from_end = if (-s_wide..0).contains(&v) {
            v + s_wide
        } else {
            v
        };
        match self {
            IndexPolicy::Clip => Some(from_end.clamp(0, s_wide - 1) as usize),
            IndexPolicy::Wrap => Some(v.rem_euclid(s_wide) as usize),
            _ => (0..s_wide).contains(&from_end).then_some(from_end as usize),
        }
    }

    /// Gather from stand-in indices (0 where out of range; data with that
    /// axis widened to 1 when it is empty), then write `fill` over what an
    /// out-of-range index produced.
    fn run_filled(
        &self,
        op: &Op,
        inputs: &[TensorView<'_>],
        sizes: &AxisSizes,
        resolved: &[Option<usize>],
        fill: &Tensor,
    ) -> Result<Tensor> {
        let (data, indices) = (inputs[0], inputs[1]);
        let stand_in: Vec<i64> = resolved.iter().map(|r| r.unwrap_or(0) as i64).collect();
        let stand_in = Tensor::new(indices.shape().to_vec(), stand_in)?;
        let widened = sizes.widened(data)?;
        let data_view = widened.as_ref().map_or(data, TensorView::from);
        let mut with = inputs.to_vec();
        with[0] = data_view;
        with[1] = TensorView::from(&stand_in);
        let out = op.run(&with)?;
        let regions = fill_regions(op, data.shape(), indices.shape(), resolved)?;
        write_regions(out, &regions, fill)
    }
}

impl fmt::Display for IndexPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IndexPolicy {
    type Err = Error;
    /// `raise`, `clip`, `wrap`, `fill` (with JAX's default value) or `drop`.
    fn from_str(s: &str) -> Result<IndexPolicy> {
        Ok(match s {
            "raise" => IndexPolicy::Raise,
            "clip" => IndexPolicy::Clip,
            "wrap" => IndexPolicy::Wrap,
            "fill" => IndexPolicy::Fill(None),
            "drop" => IndexPolicy::Drop,
            other => {
                return Err(Error::attribute(format!(
                    "unknown mode {other:?}; expected one of raise, clip, wrap, fill, drop"
                )))
            }
        })
    }
}

/// The axis size each index value is checked against: one for Gather and
/// the element ops, one per tuple component for GatherND / ScatterND.
struct AxisSizes {
    /// Data dims addressed: `[axis]`, or `[b, b + k)` for tuples.
    dims: Vec<usize>,
    sizes: Vec<usize>,
}

impl AxisSizes {
    fn of(&self, flat: usize) -> usize {
        self.sizes[flat % self.sizes.len()]
    }

    /// `data` with its addressed dims of size 0 widened to 1 (zeros), so a
    /// stand-in index 0 can be read; `None` when none is empty.
    fn widened(&self, data: TensorView<'_>) -> Result<Option<Tensor>> {
        if self.sizes.iter().all(|&s| s > 0) {
            return Ok(None);
        }
        let mut shape = data.shape().to_vec();
        for &d in &self.dims {
            shape[d] = shape[d].max(1);
        }
        crate::shape::checked_product(&shape).ok_or_else(|| Error::SizeOverflow {
            what: "the widened data",
            shape: shape.clone(),
        })?;
        Ok(Some(crate::ops::zeros_like(data, shape)?))
    }
}

fn axis_sizes(op: &Op, data_shape: &[usize], indices_shape: &[usize]) -> Result<AxisSizes> {
    let rank = data_shape.len();
    let one = |axis: i64| -> Result<AxisSizes> {
        let a = normalize_axis(axis, rank, "data")?;
        Ok(AxisSizes {
            dims: vec![a],
            sizes: vec![data_shape[a]],
        })
    };
    let tuples = |batch: usize| -> Result<AxisSizes> {
        let k = indices_shape.last().copied().unwrap_or(0);
        let dims: Vec<usize> = (batch..batch + k).filter(|&d| d < rank).collect();
        if k == 0 || dims.len() != k {
            // Nothing to resolve, or a shape the op itself refuses.
            return Ok(AxisSizes {
                dims: vec![],
                sizes: vec![usize::MAX],
            });
        }
        let sizes = dims.iter().map(|&d| data_shape[d]).collect();
        Ok(AxisSizes { dims, sizes })
    };
    match op {
        Op::Gather(g) => one(g.axis),
        Op::GatherElements(g) => one(g.axis),
        Op::ScatterElements(s) => one(s.axis),
        Op::ScatterReduce(s) => one(s.axis),
        Op::GatherND(g) => tuples(g.batch_dims),
        Op::ScatterND(_) => tuples(0),
        other => Err(Error::attribute(format!(
            "{} has no index policy",
            other.name()
        ))),
    }
}

fn index_values(indices: TensorView<'_>) -> Result<Vec<i128>> {
    Ok(with_index_view!(indices, "an index policy", v => {
        v.data().iter().map(|x| crate::IndexElement::to_i128(*x)).collect()
    }))
}

/// `op` on `inputs` with the indices (input 1) replaced by `indices`, of
/// the same shape.
fn run_with_indices(op: &Op, inputs: &[TensorView<'_>], indices: Vec<i64>) -> Result<Tensor> {
    let indices = Tensor::new(inputs[1].shape().to_vec(), indices)?;
    let mut with = inputs.to_vec();
    with[1] = TensorView::from(&indices);
    op.run(&with)
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// JAX's default fill value for `dtype`.
pub(crate) fn default_fill(dtype: DType) -> Tensor {
    match dtype {
        DType::Bool => Tensor::scalar(true),
        DType::I8 => Tensor::scalar(i8::MIN),
        DType::I16 => Tensor::scalar(i16::MIN),
        DType::I32 => Tensor::scalar(i32::MIN),
        DType::I64 => Tensor::scalar(i64::MIN),
        DType::U8 => Tensor::scalar(u8::MAX),
        DType::U16 => Tensor::scalar(u16::MAX),
        DType::U32 => Tensor::scalar(u32::MAX),
        DType::U64 => Tensor::scalar(u64::MAX),
        DType::F16 => Tensor::scalar(f16::NAN),
        DType::BF16 => Tensor::scalar(bf16::NAN),
        DType::F32 => Tensor::scalar(f32::NAN),
        DType::F64 => Tensor::scalar(f64::NAN),
        DType::Complex64 => Tensor::scalar(Complex32::new(f32::NAN, f32::NAN)),
        DType::Complex128 => Tensor::scalar(Complex64::new(f64::NAN, f64::NAN)),
        _ => Tensor::scalar(String::new()),
    }
}

/// The output ranges `(start, len)` an out-of-range index produced.
fn fill_regions(
    op: &Op,
    data_shape: &[usize],
    indices_shape: &[usize],
    resolved: &[Option<usize>],
) -> Result<Vec<(usize, usize)>> {
    let bad = resolved.iter().enumerate().filter(|(_, r)| r.is_none());
    Ok(match op {
        // out[n.., a.., i.., c..]: index (n, i) fills every a, C elements each.
        Op::Gather(g) => {
            let axis = normalize_axis(g.axis, data_shape.len(), "data")?;
            let b = g.batch_dims.min(axis);
            let outer: usize = data_shape[b..axis].iter().product();
            let per_batch: usize = indices_shape[b.min(indices_shape.len())..].iter().product();
            let inner: usize = data_shape[axis + 1..].iter().product();
            let mut regions = Vec::new();
            for (f, _) in bad {
                let (n, i) = (f / per_batch.max(1), f % per_batch.max(1));
                for a in 0..outer {
                    regions.push((((n * outer + a) * per_batch + i) * inner, inner));
                }
            }
            regions
        }
        Op::GatherElements(_) => bad.map(|(f, _)| (f, 1)).collect(),
        // A tuple with any component out of range fills its whole slice.
        Op::GatherND(g) => {
            let k = indices_shape.last().copied().unwrap_or(1).max(1);
            let slice: usize = data_shape[(g.batch_dims + k).min(data_shape.len())..]
                .iter()
                .product();
            let mut tuples: Vec<usize> = bad.map(|(f, _)| f / k).collect();
            tuples.dedup();
            tuples.into_iter().map(|t| (t * slice, slice)).collect()
        }
        _ => Vec::new(),
    })
}

fn write_regions(out: Tensor, regions: &[(usize, usize)], fill: &Tensor) -> Result<Tensor> {
    with_view!(TensorView::from(fill), f => write_typed(f, out, regions))
}

fn write_typed<T: Element>(
    fill: TypedView<'_, T>,
    out: Tensor,
    regions: &[(usize, usize)],
) -> Result<Tensor> {
    let mut typed = out
        .into_typed::<T>()
        .map_err(|_| Error::shape("the output's dtype differs from the fill value's"))?;
    let data = typed.data_mut();
    for &(start, len) in regions {
        data[start..start + len].fill(fill.data()[0].clone());
    }
    Ok(Tensor::from(typed))
}

/// The elements of `values` at the positions `kept`, as a 1-D tensor.
fn pick<T: Element>(values: TypedView<'_, T>, kept: &[usize]) -> Result<Tensor> {
    let picked: Vec<T> = kept.iter().map(|&k| values.data()[k].clone()).collect();
    Tensor::new(vec![picked.len()], picked)
}

/// A scatter with its out-of-range updates left out: unchanged when there
/// are none; else, on `data` seen flat, ScatterND (for ScatterElements and
/// ScatterND) or ScatterReduce along the one axis, with the in-range
/// updates in their row-major order.
fn run_dropped(
    op: &Op,
    inputs: &[TensorView<'_>],
    sizes: &AxisSizes,
    resolved: &[Option<usize>],
) -> Result<Tensor> {
    if resolved.iter().all(Option::is_some) {
        let fixed = resolved.iter().map(|r| r.unwrap_or(0) as i64).collect();
        return run_with_indices(op, inputs, fixed);
    }
    let (data, indices, updates) = (inputs[0], inputs[1], inputs[2]);
    check_scatter(op, data, indices, updates)?;
    let data_strides = strides(data.shape());
    let (targets, kept): (Vec<i64>, Vec<usize>) = match op {
        Op::ScatterND(_) => {
            // Whole tuples: kept when every component is in range.
            let k = indices.shape().last().copied().unwrap_or(1).max(1);
            let slice: usize = data.shape()[k.min(data.shape().len())..].iter().product();
            let mut targets = Vec::new();
            let mut kept = Vec::new();
            for (t, tuple) in resolved.chunks(k).enumerate() {
                if tuple.iter().all(Option::is_some) {
                    let base: usize = tuple
                        .iter()
                        .zip(&data_strides)
                        .map(|(p, s)| p.unwrap_or(0) * s)
                        .sum();
                    for e in 0..slice {
                        targets.push((base + e) as i64);
                        kept.push(t * slice + e);
                    }
                }
            }
            (targets, kept)
        }
        _ => {
            // Element p targets p with p[axis] := its position.
            let axis = sizes.dims[0];
            let shape = indices.shape();
            let index_strides = strides(shape);
            let mut targets = Vec::new();
            let mut kept = Vec::new();
            for (flat, r) in resolved.iter().enumerate() {
                let Some(position) = r else { continue };
                let mut offset = 0;
                for (d, (&st, &size)) in index_strides.iter().zip(shape).enumerate() {
                    let coord = if d == axis {
                        *position
                    } else {
                        flat / st % size.max(1)
                    };
                    offset += coord * data_strides[d];
                }
                targets.push(offset as i64);
                kept.push(flat);
            }
            (targets, kept)
        }
    };
    let flat_shape = [data.len()];
    let kept_updates = with_view!(updates, v => pick(v, &kept))?;
    with_view!(data, d => {
        let flat = TypedView::new(&flat_shape, d.data())?;
        let m = targets.len();
        let out = match op {
            Op::ScatterReduce(s) => {
                let targets = Tensor::new(vec![m], targets)?;
                ScatterReduce::new(0, s.reduce)
                    .include_self(s.include_self)
                    .profile(s.profile)
                    .run(flat, &targets, &kept_updates)?
            }
            Op::ScatterElements(s) => {
                let targets = Tensor::new(vec![m, 1], targets)?;
                ScatterND::new().reduction(s.reduction).run(flat, &targets, &kept_updates)?
            }
            Op::ScatterND(s) => {
                let targets = Tensor::new(vec![m, 1], targets)?;
                ScatterND::new().reduction(s.reduction).profile(s.profile).run(flat, &targets, &kept_updates)?
            }
            other => return Err(Error::attribute(format!("{} has no drop mode", other.name()))),
        };
        out.reshaped(data.shape().to_vec())
    })
}

/// The shape and dtype rules of the scatter, checked before the flat form
/// (which would not see them) runs.
pub(crate) fn check_scatter(
    op: &Op,
    data: TensorView<'_>,
    indices: TensorView<'_>,
    updates: TensorView<'_>,
) -> Result<()> {
    crate::ops::require_same_dtype(
        "updates",
        updates.dtype(),
        data.dtype(),
        "a scatter on {} data",
    )?;
    let expected: Vec<usize> = match op {
        Op::ScatterND(_) => {
            let k = indices.shape().last().copied().unwrap_or(0);
            let mut shape = indices.shape()[..indices.rank().saturating_sub(1)].to_vec();
            shape.extend_from_slice(&data.shape()[k.min(data.rank())..]);
            shape
        }
        _ => {
            let axis = match op {
                Op::ScatterElements(s) => s.axis,
                Op::ScatterReduce(s) => s.axis,
                _ => 0,
            };
            let axis = normalize_axis(axis, data.rank(), "data")?;
            crate::ops::check_indices_shape(data.shape(), indices.shape(), axis, false)?;
            indices.shape().to_vec()
        }
    };
    if updates.shape() != expected {
        return Err(Error::shape(format!(
            "updates has shape {}, but {} needs {}",
            crate::Dims(updates.shape()),
            op.name(),
            crate::Dims(&expected)
        )));
    }
    Ok(())
}

fn profile_of(op: &Op) -> Profile {
    match op {
        Op::Gather(o) => o.profile,
        Op::GatherElements(o) => o.profile,
        Op::GatherND(o) => o.profile,
        Op::ScatterElements(o) => o.profile,
        Op::ScatterND(o) => o.profile,
        Op::ScatterReduce(o) => o.profile,
        _ => Profile::Permissive,
    }
}
