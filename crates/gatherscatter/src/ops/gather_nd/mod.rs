//! GatherND (ONNX 11, 12, 13).
//!
//! `indices` (rank `q >= 1`) is a tensor of k-tuples along its last dim; each
//! tuple selects the slice `data[b.., i_0, .., i_{k-1}, ..]` within its batch.

use crate::display::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{resolve_tensor_tuples, resolve_tuples, IndexElement, TupleRule};
use crate::ops::{check_output_shape, typed_output};
use crate::profile::{self, Profile};
use crate::shape::{checked_product, join_parts, require_rank_at_least_1, SmallDims};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView};
use crate::{TensorViewMut, TypedViewMut};

mod copy;

use self::copy::{execute, fill};

/// The GatherND operator.
///
/// - `k = indices.shape[-1]` with `1 <= k <= rank(data) - batch_dims`;
///   the first `batch_dims` dims of data and indices are equal.
/// - Output shape: `indices.shape[:-1] + data.shape[batch_dims + k:]`.
/// - Each tuple component is checked against its own dimension (`[-s, s-1]`),
///   before any output is written; the error names the component's position.
///
/// ```
/// use gatherscatter::{GatherND, Tensor};
///
/// // ONNX GatherND Example 5 (batch_dims = 1).
/// let data = Tensor::new(vec![2, 2, 2], (0..8).collect::<Vec<i32>>())?;
/// let indices = Tensor::new(vec![2, 1], vec![1i64, 0])?;
/// let out = GatherND::new().batch_dims(1).run(&data, &indices)?;
/// assert_eq!(out.shape(), &[2, 2]);
/// assert_eq!(out.data::<i32>().unwrap(), &[2, 3, 4, 5]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GatherND {
    /// Number of leading batch dimensions shared by data and indices.
    pub batch_dims: usize,
    /// Contract the call is validated against.
    pub profile: Profile,
}

struct NdPlan<'s> {
    rule: TupleRule<'s>,
    batches: usize,
    /// Elements of data per batch.
    slab: usize,
    /// Elements per gathered slice.
    block: usize,
    output_shape: SmallDims,
    output_len: usize,
}

impl GatherND {
    /// GatherND with no batch dims, permissive profile.
    pub fn new() -> GatherND {
        GatherND::default()
    }

    /// Set the number of batch dimensions.
    pub fn batch_dims(mut self, batch_dims: usize) -> GatherND {
        self.batch_dims = batch_dims;
        self
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> GatherND {
        self.profile = profile;
        self
    }

    /// Run on dynamic tensors.
    pub fn run<'d, 'i>(
        &self,
        data: impl Into<TensorView<'d>>,
        indices: impl Into<TensorView<'i>>,
    ) -> Result<Tensor> {
        let (data, indices) = (data.into(), indices.into());
        let plan = self.plan(data.shape(), data.dtype(), indices.shape(), indices.dtype())?;
        let offsets = resolve_tensor_tuples(indices, &plan.rule, "GatherND")?;
        with_view!(data, t => execute(t, &offsets, plan).map(Tensor::from))
    }

    /// Run on typed views.
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
    ) -> Result<TypedTensor<T>> {
        let plan = self.plan(data.shape(), T::DTYPE, indices.shape(), I::DTYPE)?;
        let offsets = resolve_tuples(indices, &plan.rule)?;
        execute(data, &offsets, plan)
    }

    /// Like [`GatherND::run`], but writes into `out`, a caller's buffer of
    /// the data's dtype and exactly the output shape (so a runtime can reuse
    /// its buffers). Every tuple is checked before anything is written: on
    /// error `out` is untouched.
    ///
    /// ```
    /// use gatherscatter::{GatherND, Tensor};
    ///
    /// // ONNX GatherND Example 2: whole rows.
    /// let data = Tensor::new(vec![2, 2], vec![0i32, 1, 2, 3])?;
    /// let indices = Tensor::new(vec![2, 1], vec![1i64, 0])?;
    /// let mut out = Tensor::new(vec![2, 2], vec![0i32; 4])?;
    /// GatherND::new().run_into(&data, &indices, &mut out)?;
    /// assert_eq!(out.data::<i32>().unwrap(), &[2, 3, 0, 1]);
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
        let offsets = resolve_tensor_tuples(indices, &plan.rule, "GatherND")?;
        with_view!(data, t => {
            fill(t, &offsets, &plan, typed_output("GatherND", out, &plan.output_shape)?);
            Ok(())
        })
    }

    /// Typed form of [`GatherND::run_into`].
    pub fn run_typed_into<'o, T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        out: impl Into<TypedViewMut<'o, T>>,
    ) -> Result<()> {
        let mut out = out.into();
        let plan = self.plan(data.shape(), T::DTYPE, indices.shape(), I::DTYPE)?;
        check_output_shape("GatherND", out.shape(), &plan.output_shape)?;
        let offsets = resolve_tuples(indices, &plan.rule)?;
        fill(data, &offsets, &plan, out.data_mut());
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
        let permissive = GatherND {
            profile: Profile::Permissive,
            ..*self
        };
        Ok(permissive
            .plan(data_shape, data_dtype, indices_shape, index_dtype)?
            .output_shape
            .into_vec())
    }

    fn plan<'s>(
        &self,
        data_shape: &'s [usize],
        data_dtype: DType,
        indices_shape: &[usize],
        index_dtype: DType,
    ) -> Result<NdPlan<'s>> {
        let r = data_shape.len();
        require_rank_at_least_1("data", r)?;
        require_rank_at_least_1("indices", indices_shape.len())?;
        self.check_profile(data_dtype, index_dtype)?;
        if !index_dtype.is_index_type() {
            return Err(crate::index::not_an_index_type(index_dtype, "GatherND"));
        }
        let b = self.batch_dims;
        let q = indices_shape.len();
        if b >= q.min(r) {
            return Err(Error::attribute(format!(
                "batch_dims {b} must be less than both the rank {q} of indices and the rank {r} of data"
            )));
        }
        let k = indices_shape[q - 1];
        if k < 1 || k > r - b {
            return Err(Error::shape(format!(
                "indices.shape[-1] is {k}, but it must be in [1, {}] (rank {r} of data minus batch_dims {b})",
                r - b
            )));
        }
        check_batch_dims(data_shape, indices_shape, b)?;
        let output_shape = join_parts([&indices_shape[..q - 1], &data_shape[b + k..], &[]]);
        let output_len = checked_product(&output_shape).ok_or_else(|| Error::SizeOverflow {
            what: "GatherND output",
            shape: output_shape.to_vec(),
        })?;
        let nonempty = |dims: &[usize]| {
            if output_len == 0 {
                0
            } else {
                checked_product(dims).unwrap_or(0)
            }
        };
        Ok(NdPlan {
            rule: TupleRule {
                dims: &data_shape[b..b + k],
                block: checked_product(&data_shape[b + k..]).unwrap_or(0),
                first_axis: b,
                negative_allowed: true,
            },
            batches: nonempty(&data_shape[..b]),
            slab: nonempty(&data_shape[b..]),
            block: nonempty(&data_shape[b + k..]),
            output_shape,
            output_len,
        })
    }

    fn check_profile(&self, data_dtype: DType, index_dtype: DType) -> Result<()> {
        match self.profile {
            Profile::Permissive => Ok(()),
            Profile::Onnx { opset } => {
                let version = profile::onnx_since_version("GatherND", opset, &[11, 12, 13])?;
                let context = || format!("ONNX GatherND-{version} (opset {opset})");
                if version < 12 && self.batch_dims != 0 {
                    return Err(Error::attribute(format!(
                        "batch_dims is not an attribute of {} (it arrived in opset 12); got batch_dims {}",
                        context(),
                        self.batch_dims
                    )));
                }
                profile::require_dtype(
                    "data",
                    data_dtype,
                    profile::onnx_data_types(version),
                    context,
                )?;
                profile::require_dtype("indices", index_dtype, &[DType::I64], context)
            }
            other => Err(Error::unsupported(format!(
                "GatherND is not part of the {other} profile"
            ))),
        }
    }
}

/// GatherND with `batch_dims`, permissive profile.
///
/// ```
/// use gatherscatter::{gather_nd, Tensor};
///
/// // ONNX GatherND Example 1.
/// let data = Tensor::new(vec![2, 2], vec![0i32, 1, 2, 3])?;
/// let indices = Tensor::new(vec![2, 2], vec![0i64, 0, 1, 1])?;
/// assert_eq!(gather_nd(&data, &indices, 0)?.data::<i32>().unwrap(), &[0, 3]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn gather_nd<'d, 'i>(
    data: impl Into<TensorView<'d>>,
    indices: impl Into<TensorView<'i>>,
    batch_dims: usize,
) -> Result<Tensor> {
    GatherND::new().batch_dims(batch_dims).run(data, indices)
}

/// The first `b` dims of data and indices must be equal. Shared with ScatterND's shape rules.
pub(crate) fn check_batch_dims(
    data_shape: &[usize],
    indices_shape: &[usize],
    b: usize,
) -> Result<()> {
    match (0..b).find(|&d| data_shape[d] != indices_shape[d]) {
        None => Ok(()),
        Some(d) => Err(Error::shape(format!(
            "batch dimension {d} differs: data has {} (shape {data_shape_dims}), indices have {} (shape {indices_shape_dims})",
            data_shape[d], indices_shape[d], data_shape_dims = Dims(data_shape), indices_shape_dims = Dims(indices_shape)
))),
    }
}

#[cfg(test)]
mod tests {
    use crate::tuning::{self, Tuning};
    use crate::{GatherND, Tensor};

    /// Single elements from several batches, as the element path takes
    /// them: each pair resolved within its own batch's slab.
    #[test]
    fn batched_element_tuples_read_their_own_batch() {
        let data = Tensor::new(vec![3, 2, 2], (0..12).collect::<Vec<i32>>()).unwrap();
        let indices =
            Tensor::new(vec![3, 2, 2], vec![0i64, 1, 1, 0, 1, 1, 0, 0, -1, -1, 0, 1]).unwrap();
        let out = GatherND::new().batch_dims(1).run(&data, &indices).unwrap();
        assert_eq!(out.shape(), &[3, 2]);
        assert_eq!(out.data::<i32>().unwrap(), &[1, 2, 7, 4, 11, 9]);
    }

    /// Fresh outputs are not zeroed first: under Miri, a slot the copy
    /// skipped would be read uninitialised by the comparison. Under `auto`
    /// these calls take the small path, which appends to its output; a
    /// forced `stores` sends them to the copy into uninitialised memory.
    #[test]
    fn fresh_outputs_hold_every_gathered_slice() {
        let data = Tensor::new(vec![2, 2, 2], (0..8).collect::<Vec<i32>>()).unwrap();
        let cases = [
            // Rows by pairs, whole planes, rows within each batch, nothing.
            (0, vec![2, 2], vec![0i64, 0, 1, 1], vec![0, 1, 6, 7]),
            (0, vec![2, 1], vec![1, 0], vec![4, 5, 6, 7, 0, 1, 2, 3]),
            (1, vec![2, 1], vec![1, 0], vec![2, 3, 4, 5]),
            (0, vec![0, 1], vec![], vec![]),
        ];
        for tuning in ["stores=auto", "stores=cached"] {
            let tuning = Tuning::parse(tuning).unwrap();
            for (batch_dims, shape, indices, expected) in cases.clone() {
                let indices = Tensor::new(shape, indices).unwrap();
                let op = GatherND::new().batch_dims(batch_dims);
                let out = tuning::scoped(tuning, || op.run(&data, &indices)).unwrap();
                assert_eq!(
                    out.data::<i32>().unwrap(),
                    &expected[..],
                    "{tuning:?} {indices:?}"
                );
            }
        }
    }
}
