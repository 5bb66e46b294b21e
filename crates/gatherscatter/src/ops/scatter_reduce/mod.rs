//! ScatterReduce: PyTorch's `scatter_reduce` (`sum`, `prod`, `mean`,
//! `amax`, `amin`, with or without `self`).
//!
//! Output = copy of `data`; for each target `t` that some position `p` of
//! `indices` names (`t = p with p[axis] := idx(indices[p])`), with
//! `U(t)` the updates `updates[p]` aimed at it in row-major order of `p`:
//! `out[t] = agg(data[t], U(t)...)` when `include_self`, else
//! `out[t] = agg(U(t)...)`; targets no update names keep `data[t]`.
//! `mean` is the sum divided by the number of values aggregated.

mod kernel;

use self::kernel::{scatter_reduce as apply, Start, Stop};
use crate::ops::scatter_elements::Geometry;

use crate::display::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{
    canonical_indices, first_bad_index, takes_small_path, with_index_view, AxisRule, IndexElement,
};
use crate::ops::{alloc_output, check_indices_shape, copy_of, require_same_dtype, typed_output};
use crate::profile::Profile;
use crate::reduction::{Aggregate, Combine, CombineKernel};
use crate::shape::{normalize_axis, require_rank_at_least_1, same_dims};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView, TensorViewMut};

/// PyTorch's `scatter_reduce`: every update aggregated into its target
/// along `axis`, deterministically.
///
/// - Shapes as ScatterElements: `data`, `indices`, `updates` of one rank
///   `r >= 1`; `updates.shape == indices.shape`; off the axis
///   `indices.shape[d] <= data.shape[d]`.
/// - Indices in `[-s, s)` for an axis of size `s` (negatives count from the
///   end, as numpy and ONNX; PyTorch refuses them). Every index is checked;
///   an out-of-range one is an error and no output is produced.
/// - `include_self = false`: a target's old value takes no part (the first
///   update replaces it, so the sum of `-0.0` alone is `-0.0`); targets no
///   update reaches keep `data`'s value under every aggregate.
/// - `mean` counts `data`'s value among the values when `include_self`;
///   integers round the quotient down (floor division, as PyTorch), from
///   the exact count (PyTorch counts in the data's dtype, which wraps).
/// - Duplicates apply in ascending row-major order of `indices` for any
///   thread count, so results are bit-identical run after run.
/// - Per-dtype rules: [`Aggregate`].
///
/// ```
/// use gatherscatter::{Aggregate, ScatterReduce, Tensor};
///
/// let data = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
/// let indices = Tensor::from_vec(vec![0i64, 1, 0, 1, 2, 1]);
/// let updates = Tensor::from_vec(vec![2.0f32, 3.0, 4.0, 5.0, 6.0, 7.0]);
/// let mean = ScatterReduce::new(0, Aggregate::Mean);
/// let out = mean.run(&data, &indices, &updates)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[7.0 / 3.0, 17.0 / 4.0, 9.0 / 2.0, 4.0]);
/// let out = mean.include_self(false).run(&data, &indices, &updates)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[3.0, 5.0, 6.0, 4.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScatterReduce {
    /// Axis of `data` to scatter along, in `[-r, r-1]`.
    pub axis: i64,
    /// How the values aimed at one target are aggregated.
    pub reduce: Aggregate,
    /// Whether `data`'s value at a target is one of them (default true).
    pub include_self: bool,
    /// Contract the call is validated against: only the permissive one
    /// defines this operator (ONNX, DirectML and MindSpore have none).
    pub profile: Profile,
}

struct Plan {
    rule: AxisRule,
}

impl ScatterReduce {
    /// Aggregate along `axis` with `reduce`, `data`'s values included.
    pub fn new(axis: i64, reduce: Aggregate) -> ScatterReduce {
        ScatterReduce {
            axis,
            reduce,
            include_self: true,
            profile: Profile::Permissive,
        }
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> ScatterReduce {
        self.profile = profile;
        self
    }

    /// Set whether `data`'s value at a target is aggregated with the updates.
    pub fn include_self(mut self, include_self: bool) -> ScatterReduce {
        self.include_self = include_self;
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
        require_same_dtype(
            "updates",
            updates.dtype(),
            data.dtype(),
            "ScatterReduce on {} data",
        )?;
        with_index_view!(indices, "ScatterReduce", idx => {
            with_view!(data, t => self.run_typed(t, idx, updates.typed()?).map(Tensor::from))
        })
    }

    /// Run on typed views; the same checks and kernel as [`ScatterReduce::run`].
    ///
    /// ```
    /// use gatherscatter::{Aggregate, ScatterReduce, TypedTensor};
    ///
    /// // Integer means round down: (-7 + 0) / 2 = -3.5 -> -4.
    /// let data = TypedTensor::new(vec![2], vec![-7i32, 5])?;
    /// let indices = TypedTensor::new(vec![1], vec![0u8])?;
    /// let updates = TypedTensor::new(vec![1], vec![0i32])?;
    /// let out = ScatterReduce::new(0, Aggregate::Mean)
    ///     .run_typed(data.view(), indices.view(), updates.view())?;
    /// assert_eq!(out.data(), &[-4, 5]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
    ) -> Result<TypedTensor<T>> {
        let plan = self.plan(data.shape(), T::DTYPE, indices.shape(), updates.shape())?;
        // A small call's output starts as a copy of data, where a zeroed
        // allocation, then the kernel's copy, cost 8x4 updates into 8x8
        // (mean) about 300 instructions more (callgrind). A large one is
        // zeroed, which costs no pass over memory, and copied by the tasks.
        let mut out;
        let start = if takes_small_path(data.len(), indices.len()) {
            out = copy_of(data.data())?;
            Start::Copied
        } else {
            out = alloc_output(data.len())?;
            Start::Blank
        };
        self.fill(data, indices, updates, &plan, &mut out, start)?;
        Ok(TypedTensor::from_parts_unchecked(data.shape(), out))
    }

    /// Like [`ScatterReduce::run`], but writes the result into `out`, a
    /// caller's buffer of the data's dtype and shape (`data` is copied into
    /// it, then the updates aggregated). Indices are checked as they are
    /// applied, so on an error `out` may be partly written; `data` is never
    /// written.
    ///
    /// ```
    /// use gatherscatter::{Aggregate, ScatterReduce, Tensor};
    ///
    /// let data = Tensor::from_vec(vec![5u16, 5, 5]);
    /// let indices = Tensor::from_vec(vec![2i32, 2, 0]);
    /// let updates = Tensor::from_vec(vec![1u16, 9, 3]);
    /// let mut out = Tensor::from_vec(vec![0u16; 3]);
    /// ScatterReduce::new(0, Aggregate::Amin)
    ///     .include_self(false)
    ///     .run_into(&data, &indices, &updates, &mut out)?;
    /// assert_eq!(out.data::<u16>().unwrap(), &[3, 5, 1]);
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
        require_same_dtype(
            "updates",
            updates.dtype(),
            data.dtype(),
            "ScatterReduce on {} data",
        )?;
        let data_dtype = data.dtype();
        with_index_view!(indices, "ScatterReduce", idx => {
            with_view!(data, t => {
                let updates = updates.typed()?;
                let plan = self.plan(t.shape(), data_dtype, idx.shape(), updates.shape())?;
                let out = typed_output("ScatterReduce", out, t.shape())?;
                self.fill(t, idx, updates, &plan, out, Start::Blank)
            })
        })
    }

    /// `out = data` with every update aggregated; `out` has data's length
    /// and, when `start` says so, holds data's values already.
    fn fill<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
        plan: &Plan,
        out: &mut [T],
        start: Start,
    ) -> Result<()> {
        let idx = canonical_indices(indices.data())?;
        let g = Geometry::new(data.shape(), indices.shape(), &plan.rule);
        let kernel = Reduce {
            data: data.data(),
            out,
            geometry: &g,
            idx: &idx,
            upd: updates.data(),
            include_self: self.include_self,
            start,
        };
        match T::with_aggregate(self.reduce, kernel)? {
            Ok(()) => Ok(()),
            Err(Stop::BadIndex(found)) => Err(first_bad_index(indices, plan.rule, found)),
            Err(Stop::NoMemory(elements, dtype)) => Err(Error::Allocation { elements, dtype }),
        }
    }

    fn plan(
        &self,
        data_shape: &[usize],
        data_dtype: DType,
        indices_shape: &[usize],
        updates_shape: &[usize],
    ) -> Result<Plan> {
        if self.profile != Profile::Permissive {
            return Err(Error::unsupported(format!(
                "ScatterReduce is PyTorch's operator; profile {} does not define it",
                self.profile
            )));
        }
        require_rank_at_least_1("data", data_shape.len())?;
        let axis = normalize_axis(self.axis, data_shape.len(), "data")?;
        self.reduce.check_dtype(data_dtype)?;
        check_indices_shape(data_shape, indices_shape, axis, false)?;
        if !same_dims(updates_shape, indices_shape) {
            return Err(Error::shape(format!(
                "updates shape {} differs from indices shape {}; they must be equal",
                Dims(updates_shape),
                Dims(indices_shape)
            )));
        }
        Ok(Plan {
            rule: AxisRule {
                axis,
                size: data_shape[axis],
                negative_allowed: true,
            },
        })
    }
}

/// The kernel, for [`crate::reduction::Reduce::with_aggregate`] to run with
/// the dtype's rule.
struct Reduce<'a, T> {
    data: &'a [T],
    out: &'a mut [T],
    geometry: &'a Geometry<'a>,
    idx: &'a [i64],
    upd: &'a [T],
    include_self: bool,
    start: Start,
}

impl<T: Element> CombineKernel<T> for Reduce<'_, T> {
    type Output = std::result::Result<(), Stop>;

    fn run<C: Combine<T>>(self) -> Self::Output {
        apply::<T, C>(
            self.data,
            self.out,
            self.geometry,
            self.idx,
            self.upd,
            self.include_self,
            self.start,
        )
    }
}

/// ScatterReduce along `axis` with `reduce`, `data`'s values included.
///
/// ```
/// use gatherscatter::{scatter_reduce, Aggregate, Tensor};
///
/// let data = Tensor::new(vec![2, 2], vec![0i64, 9, 0, 9])?;
/// let indices = Tensor::new(vec![2, 2], vec![1i64, 1, 1, 0])?;
/// let updates = Tensor::new(vec![2, 2], vec![5i64, 6, 7, 8])?;
/// let out = scatter_reduce(&data, &indices, &updates, 0, Aggregate::Amax)?;
/// assert_eq!(out.data::<i64>().unwrap(), &[0, 9, 7, 9]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn scatter_reduce<'d, 'i, 'u>(
    data: impl Into<TensorView<'d>>,
    indices: impl Into<TensorView<'i>>,
    updates: impl Into<TensorView<'u>>,
    axis: i64,
    reduce: Aggregate,
) -> Result<Tensor> {
    ScatterReduce::new(axis, reduce).run(data, indices, updates)
}
