//! GatherElements (ONNX 11, 13; DirectML `DML_GATHER_ELEMENTS_OPERATOR_DESC`;
//! MindSpore `Tensor.gather(dim, index)`).
//!
//! `out[p] = data[p with p[axis] := idx(indices[p])]`, output shape = indices shape.

mod avx2;
mod kernels;
mod last_axis;
mod measured_fetch;
mod measured_indices;
mod measured_planes;
mod measured_words;
mod outer_axis;
pub(crate) mod word_gather;

use self::kernels::{execute, fill};
pub(crate) use self::measured_fetch::timings as measured_fetches;
pub(crate) use self::measured_indices::timings as measured_index_fetches;
pub(crate) use self::measured_planes::timings as measured_plane_reads;
pub(crate) use self::measured_words::timings as measured_word_loops;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{with_index_view, AxisRule, IndexElement};
use crate::ops::{check_indices_shape, check_output_shape, typed_output};
use crate::profile::{self, Profile};
use crate::shape::{checked_element_count, normalize_axis, require_rank_at_least_1};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView};
use crate::{TensorViewMut, TypedViewMut};

/// The GatherElements operator: its axis and the contract it is checked against.
///
/// - `data` and `indices` have the same rank `r >= 1`; the output has the
///   shape of `indices`.
/// - Off the axis, `indices.shape[d] <= data.shape[d]` (spec §2.5; the DirectML
///   profile demands equality). Along the axis, `indices` may be any size.
/// - Index values are in `[-s, s-1]` for an axis of size `s`. Each is checked
///   as it is used and the call returns no output on an error; the error
///   names the first bad index in row-major order with its position.
///
/// ```
/// use gatherscatter::{GatherElements, Tensor};
///
/// // ONNX GatherElements Example 1.
/// let data = Tensor::new(vec![2, 2], vec![1i32, 2, 3, 4])?;
/// let indices = Tensor::new(vec![2, 2], vec![0i64, 0, 1, 0])?;
/// let out = GatherElements::new(1).run(&data, &indices)?;
/// assert_eq!(out.data::<i32>().unwrap(), &[1, 1, 4, 3]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GatherElements {
    /// Axis of `data` to gather along, in `[-r, r-1]`.
    pub axis: i64,
    /// Contract the call is validated against.
    pub profile: Profile,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ElementsPlan {
    axis: usize,
    output_len: usize,
    rule: AxisRule,
}

impl GatherElements {
    /// GatherElements along `axis`, under the permissive profile.
    pub fn new(axis: i64) -> GatherElements {
        GatherElements {
            axis,
            ..GatherElements::default()
        }
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> GatherElements {
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
        with_index_view!(indices, "GatherElements", idx => {
            with_view!(data, t => execute(t, idx, &plan).map(Tensor::from))
        })
    }

    /// Like [`GatherElements::run`], but writes into `out`, a caller's buffer
    /// of the data's dtype and the indices' shape. Indices are checked while
    /// the output is written, so on an error `out` may be partly overwritten.
    ///
    /// ```
    /// use gatherscatter::{GatherElements, Tensor};
    ///
    /// let data = Tensor::new(vec![2, 2], vec![1u8, 2, 3, 4])?;
    /// let indices = Tensor::new(vec![2, 2], vec![1i32, 1, 0, 1])?;
    /// let mut out = Tensor::new(vec![2, 2], vec![0u8; 4])?;
    /// GatherElements::new(1).run_into(&data, &indices, &mut out)?;
    /// assert_eq!(out.data::<u8>().unwrap(), &[2, 2, 3, 4]);
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
        with_index_view!(indices, "GatherElements", idx => {
            with_view!(data, t => {
                fill(t, idx, &plan, typed_output("GatherElements", out, idx.shape())?)
            })
        })
    }

    /// Typed form of [`GatherElements::run_into`].
    pub fn run_typed_into<'o, T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        out: impl Into<TypedViewMut<'o, T>>,
    ) -> Result<()> {
        let mut out = out.into();
        let plan = self.plan(data.shape(), T::DTYPE, indices.shape(), I::DTYPE)?;
        check_output_shape("GatherElements", out.shape(), indices.shape())?;
        fill(data, indices, &plan, out.data_mut())
    }

    /// Run on typed views; the same checks and kernel as [`GatherElements::run`].
    ///
    /// ```
    /// use gatherscatter::{GatherElements, TypedTensor};
    ///
    /// // ONNX GatherElements Example 2: rows picked per column.
    /// let data = TypedTensor::new(vec![3, 3], (1..=9).collect::<Vec<u16>>())?;
    /// let indices = TypedTensor::new(vec![2, 3], vec![1u32, 2, 0, 2, 0, 0])?;
    /// let out = GatherElements::new(0).run_typed(data.view(), indices.view())?;
    /// assert_eq!(out.data(), &[4, 8, 3, 7, 2, 3]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
    ) -> Result<TypedTensor<T>> {
        let plan = self.plan(data.shape(), T::DTYPE, indices.shape(), I::DTYPE)?;
        execute(data, indices, &plan)
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
        let permissive = GatherElements {
            profile: Profile::Permissive,
            ..*self
        };
        permissive.plan(data_shape, data_dtype, indices_shape, index_dtype)?;
        Ok(indices_shape.to_vec())
    }

    fn plan(
        &self,
        data_shape: &[usize],
        data_dtype: DType,
        indices_shape: &[usize],
        index_dtype: DType,
    ) -> Result<ElementsPlan> {
        let rank = data_shape.len();
        require_rank_at_least_1("data", rank)?;
        let axis = normalize_axis(self.axis, rank, "data")?;
        let rules = self.check_profile(rank, data_dtype, index_dtype)?;
        if !index_dtype.is_index_type() {
            return Err(crate::index::not_an_index_type(
                index_dtype,
                "GatherElements",
            ));
        }
        check_indices_shape(data_shape, indices_shape, axis, rules.off_axis_equal)?;
        let output_len = checked_element_count("GatherElements output", indices_shape)?;
        Ok(ElementsPlan {
            axis,
            output_len,
            rule: AxisRule {
                axis,
                size: data_shape[axis],
                negative_allowed: rules.negative_allowed(index_dtype),
            },
        })
    }

    fn check_profile(
        &self,
        rank: usize,
        data_dtype: DType,
        index_dtype: DType,
    ) -> Result<ProfileRules> {
        match self.profile {
            Profile::Permissive => Ok(ProfileRules::PERMISSIVE),
            Profile::Onnx { opset } => {
                let version = profile::onnx_since_version("GatherElements", opset, &[11, 13])?;
                let context = || format!("ONNX GatherElements-{version} (opset {opset})");
                profile::require_dtype(
                    "data",
                    data_dtype,
                    profile::onnx_data_types(version),
                    context,
                )?;
                profile::require_dtype(
                    "indices",
                    index_dtype,
                    &profile::ONNX_INDEX_TYPES,
                    context,
                )?;
                Ok(ProfileRules::PERMISSIVE)
            }
            Profile::MindSpore => {
                let context = || "MindSpore Tensor.gather(dim, index)".to_string();
                profile::require_dtype(
                    "data",
                    data_dtype,
                    profile::mindspore_data_types(),
                    context,
                )?;
                profile::require_dtype(
                    "indices",
                    index_dtype,
                    &profile::MINDSPORE_INDEX_TYPES,
                    context,
                )?;
                Ok(ProfileRules::PERMISSIVE)
            }
            Profile::DirectMl { level } => {
                if level < profile::DML_2_1 {
                    return Err(Error::unsupported(format!(
                        "DirectML GatherElements was introduced in feature level {}; feature level {level} does not have it",
                        profile::DML_2_1
                    )));
                }
                if self.axis < 0 {
                    return Err(Error::attribute(format!(
                        "DirectML GatherElements takes an unsigned Axis in [0, {rank}); got {}",
                        self.axis
                    )));
                }
                let ranks_ok = if level < profile::DML_3_0 {
                    rank == 4
                } else {
                    (1..=8).contains(&rank)
                };
                if !ranks_ok {
                    let expected = if level < profile::DML_3_0 {
                        "exactly 4"
                    } else {
                        "1 to 8"
                    };
                    return Err(Error::RankMismatch {
                        what: "data",
                        actual: rank,
                        expected: format!(
                            "DirectML feature level {level} supports {expected} dimensions"
                        ),
                    });
                }
                let context = || format!("DirectML GatherElements at feature level {level}");
                profile::require_dtype(
                    "data",
                    data_dtype,
                    &profile::directml_gather_elements_data_types(level),
                    context,
                )?;
                profile::require_dtype(
                    "indices",
                    index_dtype,
                    &profile::directml_gather_elements_index_types(level),
                    context,
                )?;
                Ok(ProfileRules {
                    negatives: if level >= profile::DML_3_0 {
                        Negatives::SignedTypesOnly
                    } else {
                        Negatives::Never
                    },
                    off_axis_equal: true,
                })
            }
        }
    }
}

/// GatherElements along `axis` under the permissive profile.
///
/// ```
/// use gatherscatter::{gather_elements, Tensor};
///
/// let data = Tensor::new(vec![2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// let indices = Tensor::new(vec![2, 1], vec![-1i64, 0])?;
/// let out = gather_elements(&data, &indices, 1)?;
/// assert_eq!(out.data::<f64>().unwrap(), &[3.0, 4.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn gather_elements<'d, 'i>(
    data: impl Into<TensorView<'d>>,
    indices: impl Into<TensorView<'i>>,
    axis: i64,
) -> Result<Tensor> {
    GatherElements::new(axis).run(data, indices)
}

/// Which negative indices a profile accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Negatives {
    Always,
    SignedTypesOnly,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProfileRules {
    negatives: Negatives,
    off_axis_equal: bool,
}

impl ProfileRules {
    const PERMISSIVE: ProfileRules = ProfileRules {
        negatives: Negatives::Always,
        off_axis_equal: false,
    };

    fn negative_allowed(self, index_dtype: DType) -> bool {
        match self.negatives {
            Negatives::Always => true,
            Negatives::SignedTypesOnly => index_dtype.is_signed_integer(),
            Negatives::Never => false,
        }
    }
}
