//! GatherND (ONNX 11, 12, 13).
//!
//! `indices` (rank `q >= 1`) is a tensor of k-tuples along its last dim; each
//! tuple selects the slice `data[b.., i_0, .., i_{k-1}, ..]` within its batch.

use std::mem::MaybeUninit;

use crate::display::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{
    resolve_tensor_tuples, resolve_tuples, takes_small_path, IndexElement, TupleRule,
};
use crate::mem::knobs::{self, Stores};
use crate::mem::measured_stores::{Sizes, StoreChoice, Writer, MEASURED_MIN_BYTES};
use crate::mem::parallel;
use crate::mem::prefetch::{prefetch_item, PREFETCH_TARGETS_ABOVE};
use crate::mem::uninit::{self, Slot};
use crate::ops::blocks::{fill_blocks, new_vec_of_blocks};
use crate::ops::{alloc_output, check_output_shape, typed_output};
use crate::profile::{self, Profile};
use crate::shape::{checked_product, join_parts, require_rank_at_least_1, SmallDims};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView};
use crate::{TensorViewMut, TypedViewMut};

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

fn execute<T: Element>(
    data: TypedView<'_, T>,
    offsets: &[usize],
    plan: NdPlan,
) -> Result<TypedTensor<T>> {
    if takes_small_path(plan.output_len, offsets.len()) {
        let mut out = Vec::with_capacity(plan.output_len);
        if for_each_small_slice(data.data(), offsets, &plan, |slice| {
            out.extend_from_slice(slice)
        }) {
            return Ok(TypedTensor::from_parts_unchecked(plan.output_shape, out));
        }
    }
    let writing = SliceWriting::choose(data.data(), offsets, &plan);
    let out = match writing.streamed {
        Some((src, block_bytes)) => {
            let time_order = !writing.stores.is_timed();
            match fresh_streamed::<T>((src, block_bytes, time_order), offsets, &plan) {
                Some(out) => {
                    writing.stores.done(std::mem::size_of_val(&out[..]));
                    out
                }
                // No memory for the streamed path's table: the copy below
                // is not the strategy being timed.
                None => fresh_copied(data, offsets, &plan)?,
            }
        }
        None => {
            let out = fresh_copied(data, offsets, &plan)?;
            writing.stores.done(std::mem::size_of_val(&out[..]));
            out
        }
    };
    Ok(TypedTensor::from_parts_unchecked(plan.output_shape, out))
}

/// Small calls (see [`takes_small_path`]): `f` gets each data slice the
/// output copies, in output order, on the calling thread, without the
/// store choice and the task split of [`copy_slices`], which cost such a
/// call more than its copy (4 pairs of indices into an 8x8 float32: 1586
/// -> 1440 instructions a call). Whether every slice was found (a plan
/// always has an offset for each).
fn for_each_small_slice<T>(
    data: &[T],
    offsets: &[usize],
    plan: &NdPlan,
    mut f: impl FnMut(&[T]),
) -> bool {
    let blocks = plan.output_len.checked_div(plan.block).unwrap_or(0);
    let per_batch = offsets.len().checked_div(plan.batches).unwrap_or(0);
    if blocks == 0 || per_batch == 0 {
        return plan.output_len == 0;
    }
    let Some(offsets) = offsets.get(..blocks) else {
        return false;
    };
    let mut bases = SlabBases::new(0, per_batch, plan.slab);
    for &off in offsets {
        let base = bases.next() + off;
        let Some(slice) = data.get(base..base + plan.block) else {
            return false;
        };
        f(slice);
    }
    true
}

/// A new output written by [`copy_slices`], not zeroed first when `T`
/// allows it (see `uninit`). The plan is borrowed: a small call's plan,
/// moved in and out of here by value, cost it about 100 instructions.
fn fresh_copied<T: Element>(
    data: TypedView<'_, T>,
    offsets: &[usize],
    plan: &NdPlan,
) -> Result<Vec<T>> {
    let write = |out: &mut [MaybeUninit<T::Word>]| {
        copy_slices(T::as_words(data.data()), offsets, plan, out)
    };
    // SAFETY: `copy_slices` returns `Ok` only for an output of whole blocks
    // with an offset for each, and then writes every block.
    #[allow(unsafe_code)]
    match unsafe { uninit::new_vec_written::<T, Incomplete>(plan.output_len, write) } {
        Some(Ok(out)) => Ok(out),
        Some(Err(Incomplete)) | None => {
            let mut out = alloc_output::<T>(plan.output_len)?;
            fill(data, offsets, plan, &mut out);
            Ok(out)
        }
    }
}

/// Write the gathered slices into `out` (the output's length).
fn fill<T: Element>(data: TypedView<'_, T>, offsets: &[usize], plan: &NdPlan, out: &mut [T]) {
    if takes_small_path(plan.output_len, offsets.len()) {
        let mut slots = out.chunks_exact_mut(plan.block.max(1));
        let copied = for_each_small_slice(data.data(), offsets, plan, |slice| {
            if let Some(slot) = slots.next() {
                slot.clone_from_slice(slice);
            }
        });
        if copied {
            return;
        }
    }
    let writing = SliceWriting::choose(data.data(), offsets, plan);
    let out_bytes = std::mem::size_of_val(out);
    if let Some((src, block_bytes)) = writing.streamed {
        if let Some(dst) = T::as_bytes_mut(out) {
            let time_order = !writing.stores.is_timed();
            fill_blocks(dst, src, block_bytes, time_order, |first| {
                source_blocks(offsets, plan, first)
            });
            writing.stores.done(out_bytes);
            return;
        }
    }
    // A plan always has an offset per block (the fresh path falls back
    // here on `Incomplete`, so this check covers it too).
    let copied = copy_slices(
        T::as_words(data.data()),
        offsets,
        plan,
        T::as_words_mut(out),
    );
    debug_assert!(copied.is_ok(), "GatherND plan without an offset per block");
    writing.stores.done(out_bytes);
}

/// How one call writes its slices, and the measurement its time joins.
struct SliceWriting<'d> {
    /// Data's bytes and the slice size in bytes when the output is written
    /// by Gather's streamed block copy (prefetched source rows, streaming
    /// stores, source order from a source past the cache).
    streamed: Option<(&'d [u8], usize)>,
    stores: StoreChoice,
}

impl<'d> SliceWriting<'d> {
    /// Gather's streamed block copy for plain elements when the stores in
    /// force stream for this call's sizes (see [`StoreChoice`]: under
    /// `auto`, measured per class of call between small outputs and the
    /// size rule's threshold) and the plan has an offset for every output
    /// slice; [`copy_slices`], whose `memcpy` per slice leaves the output
    /// in cache, otherwise. From Python on AMD EPYC family 25 model 1,
    /// `stores=cached` (the `memcpy` per slice) against the streamed copy,
    /// medians of five interleaved rounds: 64k slices of 1 KiB from
    /// 64 MiB 11.0 -> 8.5 ms on one thread, 7.1 -> 4.95 on two;
    /// `batch_dims=1`, [64, 1024, 256], 11.1 -> 8.3 and 6.8 -> 4.8.
    fn choose<T: Element>(data: &'d [T], offsets: &[usize], plan: &NdPlan) -> SliceWriting<'d> {
        let copied = SliceWriting {
            streamed: None,
            stores: StoreChoice::ORDINARY,
        };
        let Some(src) = T::as_bytes(data) else {
            return copied;
        };
        let word = std::mem::size_of::<T>();
        let (Some(block_bytes), Some(out_bytes)) = (
            plan.block.checked_mul(word),
            plan.output_len.checked_mul(word),
        ) else {
            return copied;
        };
        // The store rule's cheap part first: a small call stops there,
        // before the divisions.
        let stores = knobs::in_force().stores;
        let small = stores == Stores::Auto && out_bytes < MEASURED_MIN_BYTES;
        if small || out_bytes == 0 {
            return copied;
        }
        let Some(blocks) = plan.output_len.checked_div(plan.block) else {
            return copied;
        };
        let whole = blocks * plan.block == plan.output_len
            && offsets.len() >= blocks
            && plan.batches > 0
            && offsets.len() / plan.batches > 0;
        let sizes = Sizes {
            out_bytes,
            run_bytes: block_bytes,
            src_bytes: src.len(),
        };
        let tasks = || parallel::tasks(out_bytes, blocks);
        // Without whole slices the stores change nothing: not timed.
        let stores = StoreChoice::choose(Writer::NdSlices, stores, sizes, tasks, whole);
        SliceWriting {
            streamed: (stores.streaming && whole).then_some((src, block_bytes)),
            stores,
        }
    }
}

/// A fresh output written by Gather's streamed block copy (see
/// [`streamed`]); `None` when it cannot be allocated. Out of line: the
/// copy's code inlined into [`execute`] cost small calls, which never
/// take it, more instructions.
#[inline(never)]
fn fresh_streamed<T: Element>(
    (src, block_bytes, time_order): (&[u8], usize, bool),
    offsets: &[usize],
    plan: &NdPlan,
) -> Option<Vec<T>> {
    let source = |first| source_blocks(offsets, plan, first);
    new_vec_of_blocks::<T, _>(plan.output_len, src, block_bytes, time_order, source)
}

/// The source slice (in slices of `plan.block` from data's start) of each
/// output slice from `first` on; see [`SliceWriting::choose`] for the plan's checks.
fn source_blocks<'a>(
    offsets: &'a [usize],
    plan: &'a NdPlan,
    first: usize,
) -> impl Iterator<Item = usize> + Clone + 'a {
    let mut bases = SlabBases::new(first, offsets.len() / plan.batches, plan.slab);
    offsets
        .get(first..)
        .unwrap_or(&[])
        .iter()
        .map(move |&off| (bases.next() + off) / plan.block)
}

/// [`copy_slices`] was given an output that is not whole blocks, or fewer
/// offsets than blocks, and wrote nothing.
struct Incomplete;

/// Requires offsets resolved within a batch slab. Output blocks are
/// independent: contiguous ranges of them go to separate tasks (see
/// `parallel`). `out` may be uninitialised: on `Ok` every slot is written.
fn copy_slices<W: Clone + Send + Sync, O: Slot<W>>(
    data: &[W],
    offsets: &[usize],
    plan: &NdPlan,
    out: &mut [O],
) -> Result<(), Incomplete> {
    if out.is_empty() {
        return Ok(());
    }
    let blocks = out.len().checked_div(plan.block).ok_or(Incomplete)?;
    if blocks * plan.block != out.len() || offsets.len() < blocks || plan.batches == 0 {
        return Err(Incomplete);
    }
    let per_batch = offsets.len() / plan.batches;
    if per_batch == 0 {
        return Err(Incomplete);
    }
    let per_task = blocks.div_ceil(parallel::tasks(std::mem::size_of_val(out), blocks));
    let prefetch = std::mem::size_of_val(data) > PREFETCH_TARGETS_ABOVE;
    parallel::for_each_chunk(out, per_task * plan.block, |task, chunk| {
        let first = task * per_task;
        let tasks_offsets = offsets.get(first..).unwrap_or(&[]);
        let mut bases = SlabBases::new(first, per_batch, plan.slab);
        // Single elements one `put` each: as a slice copy, each was a
        // `memcpy` call, and the 4M-pair element gather took 2.2x as long.
        if plan.block == 1 {
            for (k, (dst, &off)) in chunk.iter_mut().zip(tasks_offsets).enumerate() {
                let base = bases.next();
                if prefetch {
                    let ahead = tasks_offsets.get(k + ELEMENT_AHEAD);
                    if let Some(item) = ahead.and_then(|&a| data.get(base + a)) {
                        prefetch_item(item);
                    }
                }
                dst.put(data[base + off].clone());
            }
            return;
        }
        for (dst, &off) in chunk.chunks_exact_mut(plan.block).zip(tasks_offsets) {
            let base = bases.next() + off;
            O::copy_from(dst, &data[base..base + plan.block]);
        }
    });
    Ok(())
}

/// How many elements ahead the element gather asks for its source line,
/// from data past `PREFETCH_TARGETS_ABOVE` (1 MiB): the random reads then
/// overlap (4M elements from 64 MiB, in a stand-alone loop on AMD EPYC
/// family 25 model 1: 16 ahead 10% faster, 32 ahead 16%, 64 ahead 11%;
/// from 256 KiB, no change).
const ELEMENT_AHEAD: usize = 32;

/// The first element of the batch slab of each block in turn, from block
/// `first` on, by a running count rather than a division per block.
#[derive(Clone)]
struct SlabBases {
    left_in_batch: usize,
    base: usize,
    per_batch: usize,
    slab: usize,
}

impl SlabBases {
    /// `per_batch` (at least 1) blocks to a batch, `slab` elements apart.
    fn new(first: usize, per_batch: usize, slab: usize) -> SlabBases {
        SlabBases {
            left_in_batch: per_batch - first % per_batch,
            base: first / per_batch * slab,
            per_batch,
            slab,
        }
    }

    /// The next block's slab base.
    #[inline]
    fn next(&mut self) -> usize {
        if self.left_in_batch == 0 {
            self.left_in_batch = self.per_batch;
            self.base += self.slab;
        }
        self.left_in_batch -= 1;
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::SlabBases;
    use crate::{GatherND, Tensor};

    /// The running count gives each block the base the division gives,
    /// from any first block (tasks start mid-batch).
    #[test]
    fn slab_bases_are_the_divisions_from_any_first_block() {
        for per_batch in 1..5 {
            for first in 0..12 {
                let mut bases = SlabBases::new(first, per_batch, 100);
                for block in first..first + 12 {
                    assert_eq!(bases.next(), block / per_batch * 100, "{first} {per_batch}");
                }
            }
        }
    }

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
    /// skipped would be read uninitialised by the comparison.
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
        for (batch_dims, shape, indices, expected) in cases {
            let indices = Tensor::new(shape, indices).unwrap();
            let out = GatherND::new()
                .batch_dims(batch_dims)
                .run(&data, &indices)
                .unwrap();
            assert_eq!(out.data::<i32>().unwrap(), &expected[..], "{indices:?}");
        }
    }
}
