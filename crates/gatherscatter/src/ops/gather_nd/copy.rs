//! GatherND's kernels: each output slice copied from the data slice its
//! tuple names, on the calling thread for small calls, by Gather's
//! streamed block copy or a copy per slice otherwise.

use std::mem::MaybeUninit;

use super::NdPlan;
use crate::dtype::Element;
use crate::error::Result;
use crate::index::takes_small_path;
use crate::mem::measured_stores::{stores_in_force, Sizes, StoreChoice, Writer};
use crate::mem::parallel;
use crate::mem::prefetch::{prefetch_item, PREFETCH_TARGETS_ABOVE};
use crate::mem::uninit::{self, Slot};
use crate::ops::alloc_output;
use crate::ops::blocks::{fill_blocks, new_vec_of_blocks};
use crate::tensor::{TypedTensor, TypedView};

pub(super) fn execute<T: Element>(
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
            match fresh_streamed::<T>((src, block_bytes), offsets, &plan) {
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
pub(super) fn fill<T: Element>(
    data: TypedView<'_, T>,
    offsets: &[usize],
    plan: &NdPlan,
    out: &mut [T],
) {
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
            fill_blocks(dst, src, block_bytes, |first| {
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
        if out_bytes == 0 {
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
        let stores = stores_in_force(out_bytes);
        // Without whole slices the stores change nothing: not timed.
        let stores = StoreChoice::choose(Writer::NdSlices, stores, sizes, tasks, whole);
        SliceWriting {
            streamed: (stores.streaming() && whole).then_some((src, block_bytes)),
            stores,
        }
    }
}

/// A fresh output written by Gather's streamed block copy (see
/// [`SliceWriting`]); `None` when it cannot be allocated. Out of line: the
/// copy's code inlined into [`execute`] cost small calls, which never
/// take it, more instructions.
#[inline(never)]
fn fresh_streamed<T: Element>(
    (src, block_bytes): (&[u8], usize),
    offsets: &[usize],
    plan: &NdPlan,
) -> Option<Vec<T>> {
    let source = |first| source_blocks(offsets, plan, first);
    new_vec_of_blocks::<T, _>(plan.output_len, src, block_bytes, source)
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
}
