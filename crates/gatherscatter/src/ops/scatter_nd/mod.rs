//! ScatterND (ONNX 11, 13, 16, 18).
//!
//! Output = copy of `data`; then for each k-tuple of `indices` in row-major
//! order, the slice `out[i_0, .., i_{k-1}, ..]` is combined with the matching
//! slice of `updates`.

use std::convert::Infallible;
use std::mem::MaybeUninit;

use crate::display::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{
    resolve_tensor_tuples, resolve_tuples, takes_small_path, IndexElement, TupleRule,
};
use crate::mem::measured_stores::{StoreChoice, Writer};
use crate::mem::uninit;
use crate::profile::{self, Profile};
use crate::reduction::{self, Overwrite, Reduction};
use crate::shape::{checked_product, require_rank_at_least_1, same_dims};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, with_view_mut, TensorView};
use crate::{TensorViewMut, TypedViewMut};

mod execute;
mod slices;

use execute::{apply_in_place, overwrite_streamed, ApplySlices};
use slices::{scatter_slices, SliceTuples};

/// The ScatterND operator.
///
/// - `k = indices.shape[-1] <= rank(data)`; `updates.shape ==
///   indices.shape[:-1] + data.shape[k:]`.
/// - Every tuple component is checked against its own dimension (`[-s, s-1]`)
///   before the output exists; `data` is only read.
/// - Duplicate tuples: with [`Reduction::None`] the last in row-major order
///   wins; reductions apply in ascending row-major order (bit-identical to a
///   serial loop). Per-dtype rules as in [`Reduction`].
///
/// ```
/// use gatherscatter::{ScatterND, Tensor};
///
/// // ONNX ScatterND Example 1.
/// let data = Tensor::new(vec![8], (1..=8).collect::<Vec<i64>>())?;
/// let indices = Tensor::new(vec![4, 1], vec![4i64, 3, 1, 7])?;
/// let updates = Tensor::new(vec![4], vec![9i64, 10, 11, 12])?;
/// let out = ScatterND::new().run(&data, &indices, &updates)?;
/// assert_eq!(out.data::<i64>().unwrap(), &[1, 11, 3, 10, 9, 6, 7, 12]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScatterND {
    /// How updates combine with the output.
    pub reduction: Reduction,
    /// Contract the call is validated against.
    pub profile: Profile,
}

impl ScatterND {
    /// ScatterND with reduction `none`, permissive profile.
    pub fn new() -> ScatterND {
        ScatterND::default()
    }

    /// Set the reduction.
    pub fn reduction(mut self, reduction: Reduction) -> ScatterND {
        self.reduction = reduction;
        self
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> ScatterND {
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
        let rule = self.checked_plan(data.shape(), data.dtype(), &indices, &updates)?;
        let offsets = resolve_tensor_tuples(indices, &rule, "ScatterND")?;
        with_view!(data, t => self.execute(t, &offsets, updates.typed()?, rule.block).map(Tensor::from))
    }

    /// Run on typed views.
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
    ) -> Result<TypedTensor<T>> {
        let rule = self.plan(
            data.shape(),
            T::DTYPE,
            indices.shape(),
            I::DTYPE,
            updates.shape(),
        )?;
        let offsets = resolve_tuples(indices, &rule)?;
        self.execute(data, &offsets, updates, rule.block)
    }

    /// Like [`ScatterND::run`], but writes into `out`, a caller's buffer of
    /// the data's dtype and shape; `data` is only read. Every tuple is
    /// checked before anything is written: on error `out` is untouched.
    ///
    /// ```
    /// use gatherscatter::{Reduction, ScatterND, Tensor};
    ///
    /// let data = Tensor::new(vec![4], vec![1.0f32, 2.0, 3.0, 4.0])?;
    /// let indices = Tensor::new(vec![3, 1], vec![2i64, -1, 2])?;
    /// let updates = Tensor::new(vec![3], vec![10.0f32, 20.0, 30.0])?;
    /// let mut out = Tensor::new(vec![4], vec![0.0f32; 4])?;
    /// ScatterND::new()
    ///     .reduction(Reduction::Add)
    ///     .run_into(&data, &indices, &updates, &mut out)?;
    /// assert_eq!(out.data::<f32>().unwrap(), &[1.0, 2.0, 43.0, 24.0]);
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
        let rule = self.checked_plan(data.shape(), data.dtype(), &indices, &updates)?;
        let offsets = resolve_tensor_tuples(indices, &rule, "ScatterND")?;
        with_view!(data, t => {
            let updates = updates.typed()?;
            let out = super::typed_output("ScatterND", out, t.shape())?;
            self.fill(t, &offsets, updates, rule.block, out)
        })
    }

    /// Typed form of [`ScatterND::run_into`].
    pub fn run_typed_into<'o, T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
        out: impl Into<TypedViewMut<'o, T>>,
    ) -> Result<()> {
        let mut out = out.into();
        let rule = self.plan(
            data.shape(),
            T::DTYPE,
            indices.shape(),
            I::DTYPE,
            updates.shape(),
        )?;
        super::check_output_shape("ScatterND", out.shape(), data.shape())?;
        let offsets = resolve_tuples(indices, &rule)?;
        self.fill(data, &offsets, updates, rule.block, out.data_mut())
    }

    /// Apply the updates to `data` where it is, as numpy's `np.add.at` does:
    /// `data` ends as [`ScatterND::run`] would return it, without a copy of
    /// `data` (a large accumulator that few updates touch costs only the
    /// updates). Every tuple is checked first: on an error `data` is
    /// unchanged. The updates are applied on the calling thread, in
    /// row-major order, so duplicates resolve as in [`ScatterND::run`].
    ///
    /// ```
    /// use gatherscatter::{Reduction, ScatterND, Tensor};
    ///
    /// let mut counts = Tensor::new(vec![3], vec![0u32; 3])?;
    /// let indices = Tensor::new(vec![4, 1], vec![2i64, 0, 2, -1])?;
    /// let ones = Tensor::from_vec(vec![1u32; 4]);
    /// ScatterND::new()
    ///     .reduction(Reduction::Add)
    ///     .run_in_place(&mut counts, &indices, &ones)?;
    /// assert_eq!(counts.data::<u32>().unwrap(), &[1, 0, 3]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_in_place<'d, 'i, 'u>(
        &self,
        data: impl Into<TensorViewMut<'d>>,
        indices: impl Into<TensorView<'i>>,
        updates: impl Into<TensorView<'u>>,
    ) -> Result<()> {
        let (data, indices, updates) = (data.into(), indices.into(), updates.into());
        let rule = self.checked_plan(data.shape(), data.dtype(), &indices, &updates)?;
        let offsets = resolve_tensor_tuples(indices, &rule, "ScatterND")?;
        with_view_mut!(data, t => {
            let updates = updates.typed()?;
            apply_in_place(self.reduction, t.into_data_mut(), &offsets, updates.data(), rule.block)
        })
    }

    /// What the dynamic forms check before their tuples: the updates'
    /// dtype, then the shapes and profile (the plan). Each form resolves
    /// the tuples itself: passed back together, plan and offsets (both
    /// with inline lists) were copied by `memcpy` on each move (callgrind,
    /// a small call).
    fn checked_plan<'s>(
        &self,
        data_shape: &'s [usize],
        data_dtype: DType,
        indices: &TensorView<'_>,
        updates: &TensorView<'_>,
    ) -> Result<TupleRule<'s>> {
        super::require_same_dtype(
            "updates",
            updates.dtype(),
            data_dtype,
            "ScatterND on {} data",
        )?;
        self.plan(
            data_shape,
            data_dtype,
            indices.shape(),
            indices.dtype(),
            updates.shape(),
        )
    }

    /// The shape and profile rules; the plan is the tuple rule itself, its
    /// `block` the elements of each updated slice.
    fn plan<'s>(
        &self,
        data_shape: &'s [usize],
        data_dtype: DType,
        indices_shape: &[usize],
        index_dtype: DType,
        updates_shape: &[usize],
    ) -> Result<TupleRule<'s>> {
        let r = data_shape.len();
        require_rank_at_least_1("data", r)?;
        require_rank_at_least_1("indices", indices_shape.len())?;
        self.check_profile(data_dtype, index_dtype)?;
        self.reduction.check_dtype(data_dtype)?;
        if !index_dtype.is_index_type() {
            return Err(crate::index::not_an_index_type(index_dtype, "ScatterND"));
        }
        let q = indices_shape.len();
        let k = indices_shape[q - 1];
        if k > r {
            return Err(Error::shape(format!(
                "indices.shape[-1] is {k}, larger than the rank {r} of data"
            )));
        }
        let (lead, tail) = (&indices_shape[..q - 1], &data_shape[k..]);
        // Compared in place, part by part: a small call allocates nothing
        // for the check, and calls no iterator chain's `eq_by` (47
        // instructions of a small call's 1467 when it was not inlined).
        let matching = updates_shape.len() == lead.len() + tail.len()
            && same_dims(&updates_shape[..lead.len()], lead)
            && same_dims(&updates_shape[lead.len()..], tail);
        if !matching {
            let expected: Vec<usize> = lead.iter().chain(tail).copied().collect();
            return Err(Error::shape(format!(
                "updates shape {updates_shape_dims} must be indices.shape[:-1] + data.shape[{k}:] = {expected_dims}", updates_shape_dims = Dims(updates_shape), expected_dims = Dims(&expected)
)));
        }
        Ok(TupleRule {
            dims: &data_shape[..k],
            block: checked_product(&data_shape[k..]).unwrap_or(0),
            first_axis: 0,
            negative_allowed: true,
        })
    }

    fn check_profile(&self, data_dtype: DType, index_dtype: DType) -> Result<()> {
        match self.profile {
            Profile::Permissive => Ok(()),
            Profile::Onnx { opset } => {
                let version = profile::onnx_since_version("ScatterND", opset, &[11, 13, 16, 18])?;
                let context = || format!("ONNX ScatterND-{version} (opset {opset})");
                reduction::check_onnx_reduction(self.reduction, version, &context())?;
                profile::require_dtype(
                    "data",
                    data_dtype,
                    profile::onnx_data_types(version),
                    context,
                )?;
                profile::require_dtype("indices", index_dtype, &[DType::I64], context)
            }
            other => Err(Error::unsupported(format!(
                "ScatterND is not part of the {other} profile"
            ))),
        }
    }

    fn execute<T: Element>(
        &self,
        data: TypedView<'_, T>,
        offsets: &[usize],
        updates: TypedView<'_, T>,
        block: usize,
    ) -> Result<TypedTensor<T>> {
        let len = data.len();
        if self.reduction == Reduction::None && takes_small_path(len, offsets.len()) {
            let mut out = super::copy_of(data.data())?;
            overwrite_small(&mut out, offsets, updates.data(), block);
            return Ok(TypedTensor::from_parts_unchecked(data.shape(), out));
        }
        let bytes = std::mem::size_of_val(data.data());
        // The stores of an overwrite written by `scatter_slices` below
        // (reductions choose theirs in `ApplySlices`).
        let mut copied_stores = StoreChoice::ORDINARY;
        if self.reduction == Reduction::None {
            let (tuples, stores) =
                SliceTuples::plan::<T>(Writer::NdOverwrites, bytes, offsets, block);
            match tuples {
                Some(tuples) => {
                    let streamed = overwrite_streamed(&tuples, data.data(), updates.data(), block);
                    if let Some(out) = streamed {
                        stores.done(bytes);
                        return Ok(TypedTensor::from_parts_unchecked(data.shape(), out));
                    }
                    // No memory for the output as bytes: the path below
                    // is not the strategy being timed.
                }
                None => copied_stores = stores,
            }
        }
        let (source, upd) = (T::as_words(data.data()), T::as_words(updates.data()));
        let overwrite = |out: &mut [MaybeUninit<T::Word>]| {
            scatter_slices::<_, _, Overwrite>(source, out, offsets, upd, block);
            Ok::<(), Infallible>(())
        };
        // Reductions write into the fresh memory as well, through the
        // kernel that serves caller's buffers (see `fill`), never zeroed
        // first.
        let reduce = |out: &mut [MaybeUninit<T>]| self.reduce(data, offsets, updates, block, out);
        // SAFETY: `scatter_slices` writes every slot before it returns: its
        // tasks' chunks cover the output and each stores data's values into
        // all of its chunk first (`super::copy_then`). `reduce` returns `Ok`
        // only after `scatter_slices` ran.
        #[allow(unsafe_code)]
        let written = match self.reduction {
            Reduction::None => unsafe { uninit::new_vec_written::<T, Infallible>(len, overwrite) }
                .map(|written| written.map_err(|never| match never {})),
            _ => unsafe { uninit::new_vec_of::<T, Error>(len, reduce) },
        };
        let out = match written {
            Some(out) => {
                let out = out?;
                copied_stores.done(bytes);
                out
            }
            // The fallback makes its own choice of stores.
            None => {
                let mut out = super::alloc_output::<T>(len)?;
                self.fill(data, offsets, updates, block, &mut out)?;
                out
            }
        };
        Ok(TypedTensor::from_parts_unchecked(data.shape(), out))
    }

    /// `out` (data's length) = data with the updates applied; an error when
    /// the dtype does not define the reduction.
    fn fill<T: Element>(
        &self,
        data: TypedView<'_, T>,
        offsets: &[usize],
        updates: TypedView<'_, T>,
        block: usize,
        out: &mut [T],
    ) -> Result<()> {
        let upd = updates.data();
        let source = data.data();
        match self.reduction {
            Reduction::None if takes_small_path(out.len(), offsets.len()) => {
                out.clone_from_slice(source);
                overwrite_small(out, offsets, upd, block);
                Ok(())
            }
            Reduction::None => {
                let bytes = std::mem::size_of_val(out);
                let (tuples, stores) =
                    SliceTuples::plan::<T>(Writer::NdOverwrites, bytes, offsets, block);
                // The plan is only made for plain elements, whose bytes
                // the buffer has.
                let streamed = tuples.and_then(|tuples| {
                    tuples.overwrite(T::as_bytes_mut(out)?, source, upd, block);
                    Some(())
                });
                if streamed.is_none() {
                    scatter_slices::<T::Word, T::Word, Overwrite>(
                        T::as_words(source),
                        T::as_words_mut(out),
                        offsets,
                        T::as_words(upd),
                        block,
                    );
                }
                stores.done(bytes);
                Ok(())
            }
            _ => {
                // SAFETY: the reduction kernel stores through `Slot` only.
                #[allow(unsafe_code)]
                let slots = unsafe { uninit::as_slots(out) };
                self.reduce(data, offsets, updates, block, slots)
            }
        }
    }

    /// The reduction kernel into `out`, every slot of which it writes; an
    /// error when the dtype does not define the reduction.
    fn reduce<T: Element>(
        &self,
        data: TypedView<'_, T>,
        offsets: &[usize],
        updates: TypedView<'_, T>,
        block: usize,
        out: &mut [MaybeUninit<T>],
    ) -> Result<()> {
        T::with_combine(
            self.reduction,
            ApplySlices {
                source: data.data(),
                out,
                offsets,
                upd: updates.data(),
                block,
            },
        )
    }
}

/// ScatterND with `reduction`, permissive profile.
///
/// ```
/// use gatherscatter::{scatter_nd, Reduction, Tensor};
///
/// let data = Tensor::new(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0])?;
/// let indices = Tensor::new(vec![2, 1], vec![1i64, 1])?;
/// let updates = Tensor::new(vec![2, 2], vec![10.0f32, 20.0, 30.0, 40.0])?;
/// let out = scatter_nd(&data, &indices, &updates, Reduction::Add)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[1.0, 2.0, 43.0, 64.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn scatter_nd<'d, 'i, 'u>(
    data: impl Into<TensorView<'d>>,
    indices: impl Into<TensorView<'i>>,
    updates: impl Into<TensorView<'u>>,
    reduction: Reduction,
) -> Result<Tensor> {
    ScatterND::new()
        .reduction(reduction)
        .run(data, indices, updates)
}

/// A small overwrite into `out`, which holds data: each tuple's slice of
/// `updates` stored in row-major order on the calling thread, so the last
/// duplicate wins. On a call this size the slice plan, the store choice and
/// the task split cost more than the stores (4 element tuples into 8x8:
/// 1523 -> 1234 instructions a call).
fn overwrite_small<T: Clone>(out: &mut [T], offsets: &[usize], updates: &[T], block: usize) {
    if block == 0 {
        return;
    }
    for (&off, update) in offsets.iter().zip(updates.chunks_exact(block)) {
        out[off..off + block].clone_from_slice(update);
    }
}

#[cfg(test)]
mod tests;
