//! ScatterElements (ONNX 11, 13, 16, 18) and its deprecated alias Scatter (ONNX 9, 11).
//!
//! Output = copy of `data`; then for each position `p` of `indices` in
//! row-major order, `out[t] = f(out[t], updates[p])` with
//! `t = p with p[axis] := idx(indices[p])`.

mod columns;
mod execute;
mod last_axis;
mod measured_streams;
mod rows;
mod split;

pub(crate) use measured_streams::timings as measured_stream_fetches;

pub(crate) use self::rows::{scatter, Geometry};
pub(crate) use self::split::split_tasks;

use crate::display::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{with_index_view, AxisRule, IndexElement};
use crate::ops::check_indices_shape;
use crate::ops::{check_output_shape, typed_output};
use crate::profile::{self, Profile};
use crate::reduction::{self, Reduction};
use crate::shape::{normalize_axis, require_rank_at_least_1, same_dims};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView};
use crate::{TensorViewMut, TypedViewMut};

/// For the kernels' unit tests: a new output that `write` fills from
/// uninitialised memory (under Miri, reading a slot it did not write is an
/// error).
#[cfg(test)]
fn fresh_output(
    len: usize,
    write: impl FnOnce(&mut [std::mem::MaybeUninit<i64>]) -> Result<(), usize>,
) -> Result<Vec<i64>, usize> {
    // SAFETY: the kernels under test return `Ok` only after writing
    // every slot, which is what the tests calling this check.
    #[allow(unsafe_code)]
    let written = unsafe { crate::mem::uninit::new_vec_of::<i64, usize>(len, write) };
    written.expect("a small vector of i64 can be made")
}

/// The ScatterElements operator: axis, reduction, and the contract it is checked against.
///
/// - `data`, `indices` and `updates` have the same rank `r >= 1`;
///   `updates.shape == indices.shape`; off the axis `indices.shape[d] <=
///   data.shape[d]` (spec §2.5); along the axis any size.
/// - Every index is checked before the output exists: an out-of-range value
///   is an error and no partial result is produced. `data` is only read.
/// - Duplicates: with [`Reduction::None`] the update that comes last in
///   row-major order of `indices` wins; other reductions are applied in
///   ascending row-major order, so results are bit-identical to a serial loop.
/// - Per-dtype rules: see [`Reduction`] (bool OR/AND, f16/bf16 in f32 per
///   step, complex add/mul only, string add = concatenation, integers wrap,
///   NaN propagates under max/min).
///
/// ```
/// use gatherscatter::{Reduction, ScatterElements, Tensor};
///
/// // ONNX scatter_elements_with_duplicate_indices.
/// let data = Tensor::new(vec![1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])?;
/// let indices = Tensor::new(vec![1, 2], vec![1i64, 1])?;
/// let updates = Tensor::new(vec![1, 2], vec![1.1f32, 2.1])?;
/// let out = ScatterElements::new(1).reduction(Reduction::Add).run(&data, &indices, &updates)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[1.0, 2.0 + 1.1 + 2.1, 3.0, 4.0, 5.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScatterElements {
    /// Axis of `data` to scatter along, in `[-r, r-1]`.
    pub axis: i64,
    /// How updates combine with the output.
    pub reduction: Reduction,
    /// Contract the call is validated against.
    pub profile: Profile,
}

/// The deprecated ONNX Scatter (opsets 9 and 11): ScatterElements without a
/// reduction, validated against Scatter's own opset history.
///
/// ```
/// use gatherscatter::{Profile, Scatter, Tensor};
///
/// let data = Tensor::new(vec![1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])?;
/// let indices = Tensor::new(vec![1, 2], vec![1i64, 3])?;
/// let updates = Tensor::new(vec![1, 2], vec![1.1f32, 2.1])?;
/// let out = Scatter::new(1).profile(Profile::Onnx { opset: 9 }).run(&data, &indices, &updates)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[1.0, 1.1, 3.0, 2.1, 5.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scatter {
    /// Axis of `data` to scatter along, in `[-r, r-1]`.
    pub axis: i64,
    /// Contract the call is validated against.
    pub profile: Profile,
}

impl Scatter {
    /// Scatter along `axis` under the permissive profile.
    pub fn new(axis: i64) -> Scatter {
        Scatter {
            axis,
            ..Scatter::default()
        }
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> Scatter {
        self.profile = profile;
        self
    }

    /// Run on dynamic tensors.
    pub fn run<'d, 'i, 'u>(
        &self,
        data: impl Into<TensorView<'d>>,
        indices: impl Into<TensorView<'i>>,
        updates: impl Into<TensorView<'u>>,
    ) -> Result<Tensor> {
        let (data, indices, updates) = (data.into(), indices.into(), updates.into());
        self.as_scatter_elements(data.dtype(), indices.dtype())?
            .run(data, indices, updates)
    }

    /// Run on typed views.
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
    ) -> Result<TypedTensor<T>> {
        self.as_scatter_elements(T::DTYPE, I::DTYPE)?
            .run_typed(data, indices, updates)
    }

    /// Checks Scatter's own profile, then hands over to the permissive
    /// ScatterElements (Scatter-9 and -11 compute exactly ScatterElements-11).
    fn as_scatter_elements(
        &self,
        data_dtype: DType,
        index_dtype: DType,
    ) -> Result<ScatterElements> {
        match self.profile {
            Profile::Permissive => {}
            Profile::Onnx { opset } => {
                let version = profile::onnx_since_version("Scatter", opset, &[9, 11])?;
                let context = || format!("ONNX Scatter-{version} (opset {opset})");
                // Scatter never gained bfloat16: it was deprecated before opset 13.
                profile::require_dtype("data", data_dtype, profile::onnx_data_types(11), context)?;
                profile::require_dtype(
                    "indices",
                    index_dtype,
                    &profile::ONNX_INDEX_TYPES,
                    context,
                )?;
            }
            other => {
                return Err(Error::unsupported(format!(
                    "Scatter is an ONNX operator; profile {other} does not define it"
                )))
            }
        }
        Ok(ScatterElements::new(self.axis))
    }
}

struct ScatterPlan {
    rule: AxisRule,
}

impl ScatterElements {
    /// ScatterElements along `axis`, reduction `none`, permissive profile.
    pub fn new(axis: i64) -> ScatterElements {
        ScatterElements {
            axis,
            ..ScatterElements::default()
        }
    }

    /// Set the reduction.
    pub fn reduction(mut self, reduction: Reduction) -> ScatterElements {
        self.reduction = reduction;
        self
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> ScatterElements {
        self.profile = profile;
        self
    }

    /// Run on dynamic tensors. `data` is only read; the result is a new tensor.
    pub fn run<'d, 'i, 'u>(
        &self,
        data: impl Into<TensorView<'d>>,
        indices: impl Into<TensorView<'i>>,
        updates: impl Into<TensorView<'u>>,
    ) -> Result<Tensor> {
        let (data, indices, updates) = (data.into(), indices.into(), updates.into());
        let plan = self.plan_views(&data, &indices, &updates)?;
        with_index_view!(indices, "ScatterElements", idx => {
            with_view!(data, t => {
                let out = self.fresh(t, idx, updates.typed()?, &plan)?;
                Ok(TypedTensor::from_parts_unchecked(t.shape(), out).into())
            })
        })
    }

    /// Like [`ScatterElements::run`], but writes the result into `out`, a
    /// caller's buffer of the data's dtype and shape (`data` is copied into
    /// it, then updated). Indices are checked as they are applied, so on an
    /// error `out` may be partly written; `data` is never written.
    ///
    /// ```
    /// use gatherscatter::{Reduction, ScatterElements, Tensor};
    ///
    /// let data = Tensor::from_vec(vec![1i64, 2, 3]);
    /// let indices = Tensor::from_vec(vec![2u8, 2]);
    /// let updates = Tensor::from_vec(vec![10i64, 20]);
    /// let mut out = Tensor::from_vec(vec![0i64; 3]);
    /// ScatterElements::new(0)
    ///     .reduction(Reduction::Add)
    ///     .run_into(&data, &indices, &updates, &mut out)?;
    /// assert_eq!(out.data::<i64>().unwrap(), &[1, 2, 33]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_into<'d, 'i, 'u, 'o>(
        &self,
        data: impl Into<TensorView<'d>>,
        indices: impl Into<TensorView<'i>>,
        updates: impl Into<TensorView<'u>>,
        out: impl Into<TensorViewMut<'o>>,
    ) -> Result<()> {
        let out = out.into();
        let (data, indices, updates) = (data.into(), indices.into(), updates.into());
        let plan = self.plan_views(&data, &indices, &updates)?;
        with_index_view!(indices, "ScatterElements", idx => {
            with_view!(data, t => {
                let out = typed_output("ScatterElements", out, t.shape())?;
                self.fill(t, idx, updates.typed()?, &plan, out)
            })
        })
    }

    /// Typed form of [`ScatterElements::run_into`].
    pub fn run_typed_into<'o, T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
        out: impl Into<TypedViewMut<'o, T>>,
    ) -> Result<()> {
        let mut out = out.into();
        let plan = self.plan(
            data.shape(),
            T::DTYPE,
            indices.shape(),
            I::DTYPE,
            updates.shape(),
        )?;
        check_output_shape("ScatterElements", out.shape(), data.shape())?;
        self.fill(data, indices, updates, &plan, out.data_mut())
    }

    /// Run on typed views; the same checks and kernel as [`ScatterElements::run`].
    ///
    /// ```
    /// use gatherscatter::{Reduction, ScatterElements, TypedTensor};
    ///
    /// let data = TypedTensor::new(vec![3], vec![1i8, 2, 3])?;
    /// let indices = TypedTensor::new(vec![3], vec![0u8, 0, 2])?;
    /// let updates = TypedTensor::new(vec![3], vec![100i8, 100, 5])?;
    /// let out = ScatterElements::new(0)
    ///     .reduction(Reduction::Add)
    ///     .run_typed(data.view(), indices.view(), updates.view())?;
    /// assert_eq!(out.data(), &[-55, 2, 8]); // 1 + 100 + 100 wraps to -55
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
    ) -> Result<TypedTensor<T>> {
        let plan = self.plan(
            data.shape(),
            T::DTYPE,
            indices.shape(),
            I::DTYPE,
            updates.shape(),
        )?;
        let out = self.fresh(data, indices, updates, &plan)?;
        Ok(TypedTensor::from_parts_unchecked(data.shape(), out))
    }

    /// The checks shared by the dynamic entry points.
    fn plan_views(
        &self,
        data: &TensorView<'_>,
        indices: &TensorView<'_>,
        updates: &TensorView<'_>,
    ) -> Result<ScatterPlan> {
        super::require_same_dtype(
            "updates",
            updates.dtype(),
            data.dtype(),
            "ScatterElements on {} data",
        )?;
        self.plan(
            data.shape(),
            data.dtype(),
            indices.shape(),
            indices.dtype(),
            updates.shape(),
        )
    }

    fn plan(
        &self,
        data_shape: &[usize],
        data_dtype: DType,
        indices_shape: &[usize],
        index_dtype: DType,
        updates_shape: &[usize],
    ) -> Result<ScatterPlan> {
        require_rank_at_least_1("data", data_shape.len())?;
        let axis = normalize_axis(self.axis, data_shape.len(), "data")?;
        self.check_profile(data_dtype, index_dtype)?;
        self.reduction.check_dtype(data_dtype)?;
        if !index_dtype.is_index_type() {
            return Err(crate::index::not_an_index_type(
                index_dtype,
                "ScatterElements",
            ));
        }
        check_indices_shape(data_shape, indices_shape, axis, false)?;
        if !same_dims(updates_shape, indices_shape) {
            return Err(Error::shape(format!(
                "updates shape {updates_shape_dims} differs from indices shape {indices_shape_dims}; they must be equal", updates_shape_dims = Dims(updates_shape), indices_shape_dims = Dims(indices_shape)
)));
        }
        Ok(ScatterPlan {
            rule: AxisRule {
                axis,
                size: data_shape[axis],
                negative_allowed: true,
            },
        })
    }

    fn check_profile(&self, data_dtype: DType, index_dtype: DType) -> Result<()> {
        match self.profile {
            Profile::Permissive => Ok(()),
            Profile::Onnx { opset } => {
                let version =
                    profile::onnx_since_version("ScatterElements", opset, &[11, 13, 16, 18])?;
                let context = || format!("ONNX ScatterElements-{version} (opset {opset})");
                reduction::check_onnx_reduction(self.reduction, version, &context())?;
                profile::require_dtype(
                    "data",
                    data_dtype,
                    profile::onnx_data_types(version),
                    context,
                )?;
                profile::require_dtype("indices", index_dtype, &profile::ONNX_INDEX_TYPES, context)
            }
            other => Err(Error::unsupported(format!(
                "ScatterElements is not part of the {other} profile"
            ))),
        }
    }
}

/// ScatterElements along `axis` with `reduction`, permissive profile.
///
/// ```
/// use gatherscatter::{scatter_elements, Reduction, Tensor};
///
/// let data = Tensor::new(vec![3, 3], vec![0.0f32; 9])?;
/// let indices = Tensor::new(vec![2, 3], vec![1i64, 0, 2, 0, 2, 1])?;
/// let updates = Tensor::new(vec![2, 3], vec![1.0f32, 1.1, 1.2, 2.0, 2.1, 2.2])?;
/// let out = scatter_elements(&data, &indices, &updates, 0, Reduction::None)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn scatter_elements<'d, 'i, 'u>(
    data: impl Into<TensorView<'d>>,
    indices: impl Into<TensorView<'i>>,
    updates: impl Into<TensorView<'u>>,
    axis: i64,
    reduction: Reduction,
) -> Result<Tensor> {
    ScatterElements::new(axis)
        .reduction(reduction)
        .run(data, indices, updates)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reductions write fresh outputs into uninitialised memory and
    /// caller's buffers through the same kernel (run under Miri in CI).
    #[test]
    fn fresh_and_caller_outputs_of_a_reduction_agree_and_a_bad_index_returns_none() {
        let data = Tensor::new(vec![2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let indices = Tensor::new(vec![2, 2], vec![2i32, 2, -3, 1]).unwrap();
        let updates = Tensor::new(vec![2, 2], vec![10.0f32, 20.0, 30.0, 40.0]).unwrap();
        let op = ScatterElements::new(1).reduction(Reduction::Add);
        let fresh = op.run(&data, &indices, &updates).unwrap();
        assert_eq!(
            fresh.data::<f32>().unwrap(),
            &[1.0, 2.0, 33.0, 34.0, 45.0, 6.0]
        );
        let mut into = Tensor::new(vec![2, 3], vec![0.0f32; 6]).unwrap();
        op.run_into(&data, &indices, &updates, &mut into).unwrap();
        assert_eq!(into, fresh);
        let bad = Tensor::new(vec![2, 2], vec![0i32, 3, 0, 0]).unwrap();
        let error = op.run(&data, &bad, &updates).unwrap_err();
        assert_eq!(error.kind(), crate::ErrorKind::OutOfBounds);
    }
}
