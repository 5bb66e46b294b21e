//! Gather's kernels: the resolved indices turned into copies of whole
//! blocks (the `inner` elements after the axis) from data to the output.

use super::measured_elements::Elements;
use super::windows::WindowPermute;
use super::GatherPlan;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::index::takes_small_path;
use crate::mem::measured_stores::{stores_in_force, Sizes, StoreChoice, Writer};
use crate::mem::parallel;
use crate::mem::prefetch;
use crate::mem::uninit::{self, Slot};
use crate::ops::alloc_output;
use crate::ops::blocks;
use crate::ops::gather_elements::word_gather::any_vector_row;
use crate::tensor::{TypedTensor, TypedView};
use std::mem::MaybeUninit;

pub(super) fn execute<T: Element>(
    data: TypedView<'_, T>,
    resolved: &[usize],
    plan: &GatherPlan,
) -> Result<TypedTensor<T>> {
    if takes_small_path(plan.output_len, resolved.len()) {
        let mut out = Vec::with_capacity(plan.output_len);
        for_each_small_block(data.data(), resolved, plan, |block| {
            out.extend_from_slice(block)
        });
        return Ok(TypedTensor::from_parts_unchecked(plan.output_shape(), out));
    }
    let writing = Writing::choose(data, plan);
    let out = match (writing.streamed_block_bytes, T::as_bytes(data.data())) {
        (Some(block_bytes), Some(src)) => {
            blocks::new_vec_of_blocks(plan.output_len, src, block_bytes, |first| {
                source_blocks(resolved, plan, first)
            })
            .ok_or(Error::Allocation {
                elements: plan.output_len,
                dtype: T::DTYPE,
            })?
        }
        _ => {
            let elements = Elements::choose::<T>(resolved, plan);
            let out = match elements.windows() {
                Some(table) => fresh_windows(data, resolved, plan, table)?,
                None => fresh_blocks(data, resolved, plan, elements.gathers())?,
            };
            elements.chosen.done(std::mem::size_of_val(&out[..]));
            out
        }
    };
    writing.stores.done(std::mem::size_of_val(&out[..]));
    Ok(TypedTensor::from_parts_unchecked(plan.output_shape(), out))
}

/// A new output written by [`copy_blocks`], not zeroed first when `T`
/// allows it (see `uninit`).
fn fresh_blocks<T: Element>(
    data: TypedView<'_, T>,
    resolved: &[usize],
    plan: &GatherPlan,
    offsets: Option<&[i32]>,
) -> Result<Vec<T>> {
    if plan.output_len == 0 {
        return Ok(Vec::new());
    }
    let words = T::as_words(data.data());
    let write = |out: &mut [MaybeUninit<T::Word>]| {
        copy_blocks(words, resolved, plan, offsets, out)
            .then_some(())
            .ok_or(())
    };
    // SAFETY: `copy_blocks` returns `true` only when every task's walk
    // reached the end of its range, each output block written on the way.
    #[allow(unsafe_code)]
    match unsafe { uninit::new_vec_written::<T, ()>(plan.output_len, write) } {
        Some(Ok(out)) => Ok(out),
        // Declined, or (never, as the plan sizes the output from the
        // indices) a walk that stopped short: the zeroed path is always safe.
        Some(Err(())) | None => {
            let mut out = alloc_output::<T>(plan.output_len)?;
            copy_blocks(words, resolved, plan, offsets, T::as_words_mut(&mut out));
            Ok(out)
        }
    }
}

/// A new output written by the byte permutes of `table` (one-element
/// blocks of plain elements), not zeroed first.
fn fresh_windows<T: Element>(
    data: TypedView<'_, T>,
    resolved: &[usize],
    plan: &GatherPlan,
    table: &WindowPermute,
) -> Result<Vec<T>> {
    let src = T::as_bytes(data.data());
    let write = |slots: &mut [MaybeUninit<T>]| {
        let written = src
            .zip(uninit::slot_bytes(slots))
            .is_some_and(|(src, dst)| table.fill(dst, src));
        written.then_some(()).ok_or(())
    };
    // SAFETY: `fill` returns `true` only when it wrote every byte of the
    // slots, hence every slot.
    #[allow(unsafe_code)]
    match unsafe { uninit::new_vec_of::<T, ()>(plan.output_len, write) } {
        Some(Ok(out)) => Ok(out),
        // Declined, or (never: the table was built for plain elements and
        // this plan's slabs) refused: the scalar loop into zeroed memory.
        Some(Err(())) | None => {
            let mut out = alloc_output::<T>(plan.output_len)?;
            let words = T::as_words(data.data());
            copy_blocks(words, resolved, plan, None, T::as_words_mut(&mut out));
            Ok(out)
        }
    }
}

/// Small calls (see [`takes_small_path`]): `f` gets each data block the
/// output copies, in output order, from one walk over the slabs and their
/// indices. The write strategy, the task split and the per-size block
/// loops of the general path cost more than such a copy (a 16x16 float32
/// gather of 4 rows, W9).
fn for_each_small_block<T>(
    data: &[T],
    resolved: &[usize],
    plan: &GatherPlan,
    mut f: impl FnMut(&[T]),
) {
    let (inner, ipb) = (plan.inner, plan.indices_per_batch);
    let slab_len = plan.axis_size * inner;
    // An empty output's parts may be zero (see `Gather::plan`).
    if plan.output_len == 0 || slab_len == 0 {
        return;
    }
    let slabs = plan.output_len / (ipb * inner);
    for (slab, from) in data.chunks_exact(slab_len).take(slabs).enumerate() {
        let batch = slab / plan.outer;
        for &position in &resolved[batch * ipb..(batch + 1) * ipb] {
            f(&from[position * inner..(position + 1) * inner]);
        }
    }
}

/// How one call writes its output, and the measurement its time joins.
struct Writing {
    /// The block size in bytes when the output takes the streaming path.
    streamed_block_bytes: Option<usize>,
    /// The stores chosen, and the call's place in their measurement.
    stores: StoreChoice,
}

impl Writing {
    /// Streaming stores for rows of a plain type when the stores in force
    /// choose them for this call's sizes ([`StoreChoice`]: under `auto`,
    /// measured per class of call between small outputs and the size
    /// rule's threshold).
    fn choose<T: Element>(data: TypedView<'_, T>, plan: &GatherPlan) -> Writing {
        let bytes = |n: usize| n.checked_mul(std::mem::size_of::<T>());
        let (Some(block_bytes), Some(out_bytes)) = (bytes(plan.inner), bytes(plan.output_len))
        else {
            return Writing {
                streamed_block_bytes: None,
                stores: StoreChoice::ORDINARY,
            };
        };
        let plain = T::as_bytes(&[]).is_some();
        if !plain || out_bytes == 0 {
            return Writing {
                streamed_block_bytes: None,
                stores: StoreChoice::ORDINARY,
            };
        }
        let sizes = Sizes {
            out_bytes,
            run_bytes: block_bytes,
            src_bytes: std::mem::size_of_val(data.data()),
        };
        let tasks = || parallel::tasks(out_bytes, plan.output_len / plan.inner);
        let stores = stores_in_force(out_bytes);
        let stores = StoreChoice::choose(Writer::Blocks, stores, sizes, tasks, true);
        Writing {
            streamed_block_bytes: stores.streaming().then_some(block_bytes),
            stores,
        }
    }
}

/// Write the whole output into `out`, of `plan.output_len` elements.
pub(super) fn fill<T: Element>(
    data: TypedView<'_, T>,
    resolved: &[usize],
    plan: &GatherPlan,
    out: &mut [T],
) {
    if plan.output_len == 0 {
        return;
    }
    if takes_small_path(plan.output_len, resolved.len()) {
        let mut blocks = out.chunks_exact_mut(plan.inner);
        for_each_small_block(data.data(), resolved, plan, |block| {
            if let Some(dst) = blocks.next() {
                dst.clone_from_slice(block);
            }
        });
        return;
    }
    let writing = Writing::choose(data, plan);
    let out_bytes = std::mem::size_of_val(out);
    let streamed = writing.streamed_block_bytes.and_then(|block_bytes| {
        let (src, dst) = (T::as_bytes(data.data())?, T::as_bytes_mut(out)?);
        blocks::fill_blocks(dst, src, block_bytes, |first| {
            source_blocks(resolved, plan, first)
        });
        Some(())
    });
    if streamed.is_none() {
        // Copy-only: the kernel moves same-width words, so f32/i32/u32 share
        // code. (A caller's buffer is initialised whether or not the walk ends.)
        let elements = Elements::choose::<T>(resolved, plan);
        let by_windows = match (elements.windows(), T::as_bytes(data.data())) {
            (Some(table), Some(src)) => {
                T::as_bytes_mut(out).is_some_and(|dst| table.fill(dst, src))
            }
            _ => false,
        };
        if !by_windows {
            copy_blocks(
                T::as_words(data.data()),
                resolved,
                plan,
                elements.gathers(),
                T::as_words_mut(out),
            );
        }
        elements.chosen.done(out_bytes);
    }
    writing.stores.done(out_bytes);
}

/// Output `[batch, outer, indices_per_batch, inner]` from data
/// `[batch, outer, axis_size, inner]`: the output is a run of blocks of
/// `inner` elements, split into contiguous ranges, one task each.
/// Requires a non-empty output, hence every count non-zero, and indices
/// already resolved into `[0, axis_size)`.
/// Returns whether every block was written (always, for a consistent plan).
fn copy_blocks<W: Clone + Send + Sync + 'static, O: Slot<W> + 'static>(
    data: &[W],
    resolved: &[usize],
    plan: &GatherPlan,
    offsets: Option<&[i32]>,
    out: &mut [O],
) -> bool {
    let blocks = out.len() / plan.inner;
    let per_task = blocks.div_ceil(parallel::tasks(std::mem::size_of_val(out), blocks));
    let walked = parallel::try_for_each_chunk(out, per_task * plan.inner, |task, dst| {
        copy_block_range(data, resolved, plan, offsets, task * per_task, dst)
            .then_some(())
            .ok_or(())
    });
    walked.is_ok()
}

/// Fill `dst` with the output blocks starting at block `first`; whether
/// all of `dst` was reached.
fn copy_block_range<W: Clone + 'static, O: Slot<W> + 'static>(
    data: &[W],
    resolved: &[usize],
    plan: &GatherPlan,
    offsets: Option<&[i32]>,
    first: usize,
    dst: &mut [O],
) -> bool {
    // Small blocks are where a general slice copy (a memcpy call per
    // block) costs most: copy them with loops of a constant length, which
    // the compiler turns into a few moves.
    match plan.inner {
        1 => copy_elements(data, resolved, plan, offsets, first, dst),
        2 => copy_fixed_blocks::<W, O, 2>(data, resolved, plan, first, dst),
        3 => copy_fixed_blocks::<W, O, 3>(data, resolved, plan, first, dst),
        4 => copy_fixed_blocks::<W, O, 4>(data, resolved, plan, first, dst),
        8 => copy_fixed_blocks::<W, O, 8>(data, resolved, plan, first, dst),
        16 => copy_fixed_blocks::<W, O, 16>(data, resolved, plan, first, dst),
        _ => copy_slice_blocks(data, resolved, plan, first, dst),
    }
}

/// Block `b` of the output is index `j = b % ipb` of output slab
/// `s = b / ipb`, which reads data slab `s` with the indices of batch
/// `s / outer`. Yields, for each output block from `first` on, the data
/// block it copies, counted in blocks of `inner` elements.
fn source_blocks<'a>(
    resolved: &'a [usize],
    plan: &'a GatherPlan,
    first: usize,
) -> impl Iterator<Item = usize> + Clone + 'a {
    let ipb = plan.indices_per_batch;
    let indices_of = move |slab: usize| {
        let batch = slab / plan.outer;
        // Past the last slab there are no indices, and nothing asks for them.
        resolved.get(batch * ipb..(batch + 1) * ipb).unwrap_or(&[])
    };
    let (mut slab, mut j) = (first / ipb, first % ipb);
    let mut idx = indices_of(slab);
    std::iter::from_fn(move || {
        let block = slab * plan.axis_size + *idx.get(j)?;
        j += 1;
        if j == ipb {
            j = 0;
            slab += 1;
            idx = indices_of(slab);
        }
        Some(block)
    })
}

/// One data slab's share of a task's output: `out` takes the blocks of
/// `slab` (each `plan.inner` long) that `indices` name, in order; `next` is
/// the data slab the following output blocks read (empty at the end).
struct SlabRun<'a, 'd, W, O> {
    out: &'a mut [O],
    indices: &'a [usize],
    /// Where `indices` start in the call's resolved indices.
    at: usize,
    slab: &'d [W],
    next: &'d [W],
}

/// Walk the output blocks from block `first` on (filling `dst`) one data
/// slab at a time, so the copy loops index a slab directly instead of
/// recomputing each block's slab. `run` must fill each run's `out`.
/// Whether all of `dst` was reached: a plan whose indices or data fell
/// short would stop the walk there.
fn for_each_slab_run<'d, W, O>(
    data: &'d [W],
    resolved: &[usize],
    plan: &GatherPlan,
    first: usize,
    dst: &mut [O],
    mut run: impl FnMut(SlabRun<'_, 'd, W, O>),
) -> bool {
    let ipb = plan.indices_per_batch;
    let slab_len = plan.axis_size * plan.inner;
    let slab_data = |slab: usize| data.get(slab * slab_len..(slab + 1) * slab_len);
    let mut rest = dst;
    let mut block = first;
    while !rest.is_empty() {
        let (slab, j) = (block / ipb, block % ipb);
        let batch = slab / plan.outer;
        // Resolved indices and the output length come from the same plan.
        let Some(indices) = resolved.get(batch * ipb + j..(batch + 1) * ipb) else {
            return false;
        };
        let take = indices.len().min(rest.len() / plan.inner);
        let (out, tail) = std::mem::take(&mut rest).split_at_mut(take * plan.inner);
        let Some(slab_data_now) = slab_data(slab) else {
            return false;
        };
        run(SlabRun {
            out,
            indices: &indices[..take],
            at: batch * ipb + j,
            slab: slab_data_now,
            next: slab_data(slab + 1).unwrap_or(&[]),
        });
        rest = tail;
        block += take;
    }
    true
}

/// How the copy loops prefetch: random blocks of data that is not in cache
/// are latency-bound, so ask for them early.
#[derive(Clone, Copy)]
enum Lookahead {
    /// Small outputs: nothing to gain.
    None,
    /// Sparse or large slabs: the block `n` positions ahead in the index
    /// list (about 1 KiB of blocks ahead; W2-like blocks about 2x faster).
    Blocks(usize),
    /// Small slabs read densely (W3: 1024 of 4096 elements of each 16 KiB
    /// row): most of the next slab's lines will be needed, so each chunk
    /// of this slab's copy asks for its share of them.
    NextSlab,
}

impl Lookahead {
    fn for_plan<W>(plan: &GatherPlan, out_len: usize) -> Lookahead {
        const MIN_OUTPUT_BYTES: usize = 64 << 10;
        const AHEAD_BYTES: usize = 1 << 10;
        const MAX_SLAB_BYTES: usize = 256 << 10;
        let word = std::mem::size_of::<W>().max(1);
        let block_bytes = plan.inner * word;
        let slab_bytes = plan.axis_size * block_bytes;
        let read_bytes = plan.indices_per_batch * block_bytes;
        if out_len * word < MIN_OUTPUT_BYTES {
            Lookahead::None
        } else if slab_bytes <= MAX_SLAB_BYTES && read_bytes >= slab_bytes / 4 {
            Lookahead::NextSlab
        } else {
            Lookahead::Blocks((AHEAD_BYTES / block_bytes.max(1)).clamp(4, 128))
        }
    }
}

/// Blocks copied between two prefetch steps of [`Lookahead::NextSlab`]:
/// a few lines at a time, spread through the copy. (Asking for a whole
/// share at once, 64+ lines, stalled on the cache's miss slots: W2 and W3
/// ran 2x slower with chunks of 256 blocks; 8 to 32 were close.)
const COPY_CHUNK: usize = 16;

/// The part of `next` that chunk `c` of `chunks` prefetches.
fn next_slab_share<W>(next: &[W], c: usize, chunks: usize) -> &[W] {
    let share = next.len().div_ceil(chunks.max(1));
    next.get(c * share..((c + 1) * share).min(next.len()))
        .unwrap_or(&[])
}

fn copy_fixed_blocks<W: Clone, O: Slot<W>, const N: usize>(
    data: &[W],
    resolved: &[usize],
    plan: &GatherPlan,
    first: usize,
    dst: &mut [O],
) -> bool {
    // N is a constant here, so each copy compiles to a few moves. (This loop
    // and copy_slice_blocks' are kept apart on purpose: one generic body
    // taking the length as an argument ran W3 3x slower, the length no
    // longer constant inside the slab closure.)
    let lookahead = Lookahead::for_plan::<W>(plan, dst.len());
    for_each_slab_run(data, resolved, plan, first, dst, |run| {
        let chunks = run.indices.len().div_ceil(COPY_CHUNK);
        let pairs = run
            .out
            .chunks_mut(COPY_CHUNK * N)
            .zip(run.indices.chunks(COPY_CHUNK));
        for (c, (out, indices)) in pairs.enumerate() {
            if let Lookahead::NextSlab = lookahead {
                prefetch::prefetch_slice_of_region(next_slab_share(run.next, c, chunks));
            }
            for (k, (d, &i)) in out.chunks_exact_mut(N).zip(indices).enumerate() {
                if let Lookahead::Blocks(ahead) = lookahead {
                    if let Some(&n) = run.indices.get(c * COPY_CHUNK + k + ahead) {
                        run.slab.get(n * N).map(prefetch::prefetch_item);
                    }
                }
                // Each slot kind copies a block of the constant length N
                // its own fastest way (measured; see `Slot::copy_block`).
                O::copy_block::<N>(d, &run.slab[i * N..]);
            }
        }
    })
}

/// One-element blocks (a Gather along the last axis): an indexed loop per
/// slab ([`Slot::gather_each`], which stores short words a group at a
/// time), asking for the next slab's lines as it goes. The block loop's
/// chunking and per-block lookahead cost more than the copy here: 16 MiB
/// outputs on one thread ran 1.7-2.7x slower with them (int8 32 -> 12 ms,
/// float64 5.8 -> 3.5 ms), and 1.4x slower without the next-slab prefetch
/// (4- and 8-byte elements), on AMD EPYC family 25 model 1.
fn copy_elements<W: Clone + 'static, O: Slot<W> + 'static>(
    data: &[W],
    resolved: &[usize],
    plan: &GatherPlan,
    offsets: Option<&[i32]>,
    first: usize,
    dst: &mut [O],
) -> bool {
    // The AVX2 gathers, where the call chose them: each slab's run in
    // groups, its next slab asked for as they go; the scalar loop below
    // takes the tail.
    let vector = offsets.zip(any_vector_row::<W, O, i32>());
    let per_line = prefetch::per_line::<W>();
    for_each_slab_run(data, resolved, plan, first, dst, |run| {
        if let Some((offsets, kernel)) = vector {
            let at = offsets
                .get(run.at..run.at + run.indices.len())
                .unwrap_or(&[]);
            let written = kernel(run.slab, run.next, at, 0, run.out, false);
            O::gather_each(&mut run.out[written..], run.slab, &run.indices[written..]);
            return;
        }
        // One line of the next slab every `step` elements, not all its
        // lines in one burst before the loop: a burst fills the core's
        // miss slots and the rest of it is lost. W3 (1,024 of each 16 KiB
        // row), one thread, AMD EPYC family 26 model 2: 8.1-8.7 ms with the
        // burst, 2.0-2.3 ms spread (a loop outside the library, the same
        // data). A slab with fewer elements to copy than lines asks for
        // the lines left over after its loop.
        let lines = run.next.len().div_ceil(per_line);
        let step = (run.out.len() / lines.max(1)).max(1);
        let mut asked = 0;
        for (out, indices) in run.out.chunks_mut(step).zip(run.indices.chunks(step)) {
            if let Some(line) = run.next.get(asked * per_line..) {
                prefetch::prefetch_slice_of_region(&line[..line.len().min(per_line)]);
                asked += 1;
            }
            O::gather_each(out, run.slab, indices);
        }
        if let Some(rest) = run.next.get(asked * per_line..) {
            prefetch::prefetch_slice_of_region(rest);
        }
    })
}

fn copy_slice_blocks<W: Clone, O: Slot<W>>(
    data: &[W],
    resolved: &[usize],
    plan: &GatherPlan,
    first: usize,
    dst: &mut [O],
) -> bool {
    let inner = plan.inner;
    let lookahead = Lookahead::for_plan::<W>(plan, dst.len());
    for_each_slab_run(data, resolved, plan, first, dst, |run| {
        let chunks = run.indices.len().div_ceil(COPY_CHUNK);
        let pairs = run
            .out
            .chunks_mut(COPY_CHUNK * inner)
            .zip(run.indices.chunks(COPY_CHUNK));
        for (c, (out, indices)) in pairs.enumerate() {
            if let Lookahead::NextSlab = lookahead {
                prefetch::prefetch_slice_of_region(next_slab_share(run.next, c, chunks));
            }
            for (k, (d, &i)) in out.chunks_exact_mut(inner).zip(indices).enumerate() {
                if let Lookahead::Blocks(ahead) = lookahead {
                    if let Some(&n) = run.indices.get(c * COPY_CHUNK + k + ahead) {
                        let next = run.slab.get(n * inner..(n + 1) * inner).unwrap_or(&[]);
                        prefetch::prefetch_items(prefetch::block_head(next));
                    }
                }
                O::copy_from(d, &run.slab[i * inner..(i + 1) * inner]);
            }
        }
    })
}

#[cfg(test)]
mod tests;
