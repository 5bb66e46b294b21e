//! Gather (ONNX 1, 11, 13; MindSpore `Tensor.gather(input_indices, axis, batch_dims)`).
//!
//! `out[b.., a.., i.., j..] = data[b.., a.., idx(indices[b.., i..]), j..]`:
//! numpy `take` along `axis`, with `batch_dims` leading dimensions shared by
//! data and indices (TensorFlow / MindSpore form).

mod copy;
mod measured_elements;
mod windows;

use self::copy::{execute, fill};
pub(crate) use self::measured_elements::timings as measured_element_loops;
use crate::display::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{resolve_along_axis, resolve_tensor_along_axis, AxisRule, IndexElement};
use crate::ops::{check_output_shape, typed_buffer};
use crate::profile::{self, Profile};
use crate::shape::{
    checked_product_of_parts, join_parts, normalize_axis, require_rank_at_least_1, SmallDims,
};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView};
use crate::{TensorViewMut, TypedViewMut};

/// The Gather operator: its attributes and the contract it is checked against.
///
/// Output shape: `data.shape[:axis] + indices.shape[batch_dims:] + data.shape[axis+1:]`.
///
/// - `axis` is in `[-r, r-1]`; `indices` may have any rank, 0 included (a
///   scalar index drops the axis).
/// - Index values are in `[-s, s-1]` for an axis of size `s`; a negative value
///   counts from the end. Every index is checked before any output is written;
///   the first bad one is reported with its position.
/// - With `batch_dims = b`, the first `b` dimensions of data and indices must
///   be equal, `b <= rank(indices)` and `b <= axis`.
///
/// ```
/// use gatherscatter::{Gather, Tensor};
///
/// let data = Tensor::new(vec![3, 2], vec![1.0f32, 1.2, 2.3, 3.4, 4.5, 5.7])?;
/// let indices = Tensor::new(vec![2, 2], vec![0i64, 1, 1, 2])?;
/// let out = Gather::new(0).run(&data, &indices)?;
/// assert_eq!(out.shape(), &[2, 2, 2]);
/// assert_eq!(out.data::<f32>().unwrap(), &[1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gather {
    /// Axis of `data` to gather along, in `[-r, r-1]`.
    pub axis: i64,
    /// Number of leading batch dimensions shared by data and indices.
    pub batch_dims: usize,
    /// Contract the call is validated against.
    pub profile: Profile,
}

/// Everything the kernel needs, computed once from the shapes and attributes.
#[derive(Debug, Clone)]
struct GatherPlan<'s> {
    /// Product of the data dimensions between the batch dims and the axis.
    outer: usize,
    /// Size of the gathered axis.
    axis_size: usize,
    /// Product of the data dimensions after the axis: the copied block length.
    inner: usize,
    /// Indices per batch.
    indices_per_batch: usize,
    /// The output shape in its three parts (data's dims before the axis,
    /// indices' dims after the batch dims, data's dims after the axis),
    /// joined only for a fresh output: a caller's buffer is checked part by
    /// part, so a small call into a buffer allocates nothing for it.
    output_parts: [&'s [usize]; 3],
    output_len: usize,
    rule: AxisRule,
}

impl GatherPlan<'_> {
    fn output_shape(&self) -> SmallDims {
        join_parts(self.output_parts)
    }

    /// Whether a caller's buffer of shape `given` has the output shape.
    fn check_output(&self, given: &[usize]) -> Result<()> {
        let mut rest = given.iter();
        let fits = self
            .output_parts
            .iter()
            .all(|part| part.iter().all(|d| rest.next() == Some(d)))
            && rest.next().is_none();
        if fits {
            Ok(())
        } else {
            check_output_shape("Gather", given, &self.output_shape())
        }
    }
}

impl Gather {
    /// Gather along `axis` with no batch dims, under the permissive profile.
    pub fn new(axis: i64) -> Gather {
        Gather {
            axis,
            ..Gather::default()
        }
    }

    /// Set the number of leading batch dimensions.
    pub fn batch_dims(mut self, batch_dims: usize) -> Gather {
        self.batch_dims = batch_dims;
        self
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> Gather {
        self.profile = profile;
        self
    }

    /// Run on dynamic tensors: any data dtype, any integer index dtype.
    pub fn run<'d, 'i>(
        &self,
        data: impl Into<TensorView<'d>>,
        indices: impl Into<TensorView<'i>>,
    ) -> Result<Tensor> {
        let (data, indices) = (data.into(), indices.into());
        let plan = self.plan(data.shape(), data.dtype(), indices.shape(), indices.dtype())?;
        let resolved = resolve_tensor_along_axis(indices, plan.rule, "Gather")?;
        with_view!(data, t => execute(t, &resolved, &plan).map(Tensor::from))
    }

    /// Run on typed views; the same checks and kernel as [`Gather::run`].
    ///
    /// ```
    /// use gatherscatter::{Gather, TypedTensor};
    ///
    /// let data = TypedTensor::new(vec![2, 3], vec![1u8, 2, 3, 4, 5, 6])?;
    /// let indices = TypedTensor::new(vec![2], vec![-1i32, 0])?;
    /// let out = Gather::new(1).run_typed(data.view(), indices.view())?;
    /// assert_eq!(out.shape(), &[2, 2]);
    /// assert_eq!(out.data(), &[3, 1, 6, 4]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
    ) -> Result<TypedTensor<T>> {
        let plan = self.plan(data.shape(), T::DTYPE, indices.shape(), I::DTYPE)?;
        let resolved = resolve_along_axis(indices, plan.rule)?;
        execute(data, &resolved, &plan)
    }

    /// Like [`Gather::run`], but writes into `out`, a caller's buffer of the
    /// data's dtype and exactly the output shape (so a runtime can reuse its
    /// buffers and skip allocating and page-faulting a fresh output).
    /// Indices are checked before anything is written: on error `out` is
    /// untouched.
    ///
    /// ```
    /// use gatherscatter::{Gather, Tensor};
    ///
    /// let data = Tensor::new(vec![3, 2], vec![1i32, 2, 3, 4, 5, 6])?;
    /// let indices = Tensor::from_vec(vec![2i64, 0]);
    /// let mut out = Tensor::new(vec![2, 2], vec![0i32; 4])?;
    /// Gather::new(0).run_into(&data, &indices, &mut out)?;
    /// assert_eq!(out.data::<i32>().unwrap(), &[5, 6, 1, 2]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_into<'d, 'i, 'o>(
        &self,
        data: impl Into<TensorView<'d>>,
        indices: impl Into<TensorView<'i>>,
        out: impl Into<TensorViewMut<'o>>,
    ) -> Result<()> {
        let out = out.into();
        let (data, indices) = (data.into(), indices.into());
        let plan = self.plan(data.shape(), data.dtype(), indices.shape(), indices.dtype())?;
        let resolved = resolve_tensor_along_axis(indices, plan.rule, "Gather")?;
        with_view!(data, t => {
            let mut out = typed_buffer("Gather", out)?;
            plan.check_output(out.shape())?;
            fill(t, &resolved, &plan, out.data_mut());
            Ok(())
        })
    }

    /// Typed form of [`Gather::run_into`].
    pub fn run_typed_into<'o, T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        out: impl Into<TypedViewMut<'o, T>>,
    ) -> Result<()> {
        let mut out = out.into();
        let plan = self.plan(data.shape(), T::DTYPE, indices.shape(), I::DTYPE)?;
        plan.check_output(out.shape())?;
        let resolved = resolve_along_axis(indices, plan.rule)?;
        fill(data, &resolved, &plan, out.data_mut());
        Ok(())
    }

    /// The output shape on inputs of these shapes and dtypes (under the
    /// permissive profile), or the error the call would give.
    pub(crate) fn checked_output_shape(
        &self,
        data_shape: &[usize],
        data_dtype: DType,
        indices_shape: &[usize],
        index_dtype: DType,
    ) -> Result<Vec<usize>> {
        let permissive = Gather {
            profile: Profile::Permissive,
            ..*self
        };
        Ok(permissive
            .plan(data_shape, data_dtype, indices_shape, index_dtype)?
            .output_shape()
            .into_vec())
    }

    fn plan<'s>(
        &self,
        data_shape: &'s [usize],
        data_dtype: DType,
        indices_shape: &'s [usize],
        index_dtype: DType,
    ) -> Result<GatherPlan<'s>> {
        require_rank_at_least_1("data", data_shape.len())?;
        let axis = normalize_axis(self.axis, data_shape.len(), "data")?;
        let negative_allowed = self.check_profile(axis, data_dtype, index_dtype)?;
        if !index_dtype.is_index_type() {
            return Err(crate::index::not_an_index_type(index_dtype, "Gather"));
        }
        let b = self.batch_dims;
        if b > indices_shape.len() {
            return Err(Error::attribute(format!(
                "batch_dims {b} exceeds the rank {} of indices",
                indices_shape.len()
            )));
        }
        if b > axis {
            return Err(Error::attribute(format!(
                "batch_dims {b} exceeds axis {axis}: the gathered axis cannot be a batch dimension"
            )));
        }
        if data_shape[..b] != indices_shape[..b] {
            let d = (0..b)
                .find(|&d| data_shape[d] != indices_shape[d])
                .unwrap_or(0);
            return Err(Error::shape(format!(
                "batch dimension {d} differs: data has {} (shape {data_shape_dims}), indices have {} (shape {indices_shape_dims})",
                data_shape[d], indices_shape[d], data_shape_dims = Dims(data_shape), indices_shape_dims = Dims(indices_shape)
)));
        }

        let output_parts = [
            &data_shape[..axis],
            &indices_shape[b..],
            &data_shape[axis + 1..],
        ];
        let output_len =
            checked_product_of_parts(&output_parts).ok_or_else(|| Error::SizeOverflow {
                what: "Gather output",
                shape: join_parts(output_parts).into_vec(),
            })?;
        let rule = AxisRule {
            axis,
            size: data_shape[axis],
            negative_allowed,
        };
        // Each part below is a product of output dims, so it cannot
        // overflow when the output's does not. Parts of an empty output may
        // overflow; the kernel never needs them then, so they are zero.
        let part = |dims: &[usize]| {
            if output_len == 0 {
                0
            } else {
                dims.iter().product()
            }
        };
        Ok(GatherPlan {
            outer: part(&data_shape[b..axis]),
            axis_size: data_shape[axis],
            inner: part(&data_shape[axis + 1..]),
            indices_per_batch: part(&indices_shape[b..]),
            output_parts,
            output_len,
            rule,
        })
    }

    /// Profile rules; returns whether negative indices are allowed.
    fn check_profile(&self, axis: usize, data_dtype: DType, index_dtype: DType) -> Result<bool> {
        match self.profile {
            Profile::Permissive => Ok(true),
            Profile::Onnx { opset } => {
                let version = profile::onnx_since_version("Gather", opset, &[1, 11, 13])?;
                let context = || format!("ONNX Gather-{version} (opset {opset})");
                if self.batch_dims != 0 {
                    return Err(Error::attribute(format!(
                        "batch_dims is not an attribute of {}; got batch_dims {}",
                        context(),
                        self.batch_dims
                    )));
                }
                profile::require_dtype("data", data_dtype, profile::onnx_data_types(version), context)?;
                profile::require_dtype("indices", index_dtype, &profile::ONNX_INDEX_TYPES, context)?;
                Ok(true)
            }
            Profile::MindSpore => {
                let context = || "MindSpore Tensor.gather(input_indices, axis, batch_dims)".to_string();
                profile::require_dtype("data", data_dtype, profile::mindspore_data_types(), context)?;
                profile::require_dtype("indices", index_dtype, &profile::MINDSPORE_INDEX_TYPES, context)?;
                if axis < self.batch_dims {
                    return Err(Error::attribute(format!(
                        "axis {axis} must be >= batch_dims {} in {}",
                        self.batch_dims,
                        context()
                    )));
                }
                Ok(false)
            }
            Profile::DirectMl { level } => Err(Error::unsupported(format!(
                "the DirectML profile (feature level {level}) covers GatherElements only, not Gather"
            ))),
        }
    }
}

/// Gather along `axis` under the permissive profile: `numpy.take(data, indices, axis)`.
///
/// ```
/// use gatherscatter::{gather, Tensor};
///
/// let data = Tensor::from_vec((0..10).map(|v| v as f32).collect());
/// let indices = Tensor::from_vec(vec![0i64, -9, -10]);
/// let out = gather(&data, &indices, 0)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[0.0, 1.0, 0.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn gather<'d, 'i>(
    data: impl Into<TensorView<'d>>,
    indices: impl Into<TensorView<'i>>,
    axis: i64,
) -> Result<Tensor> {
    Gather::new(axis).run(data, indices)
}
