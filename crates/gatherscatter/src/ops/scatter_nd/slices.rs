//! ScatterND's kernels: every tuple's slice combined into the output in
//! row-major order of the tuples, and, for large overwrites, the output
//! written once in its own order from whichever of data and the updates
//! holds each slice.

use crate::dtype::Element;
use crate::mem::knobs::{self, Stores};
use crate::mem::parallel;
use crate::mem::prefetch::prefetch_items_to_l2;
use crate::mem::stream::{copy_nontemporal_16s, store_fence, streams, Avx, OutByte};
use crate::mem::uninit::Slot;
use crate::ops::{copy_into, copy_then};
use crate::reduction::Combine;

/// Every tuple's slice of `updates` combined into `out` at its offset, in
/// row-major order, on the calling thread.
pub(super) fn combine_slices<W, C: Combine<W>>(
    out: &mut [W],
    offsets: &[usize],
    updates: &[W],
    block: usize,
) {
    if block == 0 {
        return;
    }
    for (&off, upd) in offsets.iter().zip(updates.chunks_exact(block)) {
        for (o, u) in out[off..off + block].iter_mut().zip(upd) {
            C::combine(o, u);
        }
    }
}

/// `out = data`, then every tuple's slice combined in row-major order, so
/// duplicates resolve deterministically. Each task owns a contiguous range
/// of whole output slices (tuple offsets are multiples of `block`): it
/// copies its range of `data`, then walks all tuples in order and applies
/// those that land in it. The result is the serial one for any thread
/// count; a split by tuple would race on duplicates (onnxruntime's
/// ScatterND does).
pub(super) fn scatter_slices<W: Clone + Send + Sync, O: Slot<W>, C: Combine<W>>(
    data: &[W],
    out: &mut [O],
    offsets: &[usize],
    updates: &[W],
    block: usize,
) {
    if block == 0 || offsets.is_empty() {
        copy_into(data, out);
        return;
    }
    let slices = out.len() / block;
    let bytes = std::mem::size_of_val(out) + std::mem::size_of_val(updates);
    // Every task walks every tuple, so more tasks than threads only repeats
    // that walk (element tuples at 2 threads: 37 ms with 8 tasks, 26 with 2).
    let per_task = slices.div_ceil(parallel::one_task_per_thread(bytes, slices)) * block;
    copy_then(data, out, per_task, |start, owned| {
        let owned_range = start..start + owned.len();
        for (&off, upd) in offsets.iter().zip(updates.chunks_exact(block)) {
            if owned_range.contains(&off) {
                let target = &mut owned[off - start..off - start + block];
                for (o, u) in target.iter_mut().zip(upd) {
                    C::combine(o, u);
                }
            }
        }
    });
}

/// For each output slice, which tuple writes it last (`k + 1`), or 0 where
/// none does: an overwrite's output is then a gather of whole slices from
/// data or the updates, written once, in order, with streaming stores.
///
/// Why: [`scatter_slices`] streams data into a large output, then stores
/// each tuple's slice with ordinary stores, which read every line of it
/// back from memory first. ScatterND of 16k distinct 1 KiB rows into
/// 64 MiB moved 176 MiB that way, 128 MiB as a gather.
pub(super) struct LastWriters(Vec<u32>);

/// Slices shorter than this keep [`scatter_slices`] under `auto`: each
/// slice is a copy call of its own here. 64 MiB of float32, a quarter of
/// its slices overwritten, AMD EPYC family 25 model 1, medians of 9,
/// [`scatter_slices`] against this (one thread / two): 64 B slices 15-17
/// against 22-27 ms / 11-12 against 13-14; 256 B 15-17 against 13-14 /
/// 10-11 against 9-10; 1 KiB 13-14 against 10-12 / 9-10 against 6.5;
/// 4 KiB 12-14 against 8-11 / 8-9 against 6-6.5.
const MIN_SLICE_BYTES: usize = 256;

/// Whether a call writes its output as a gather of slices
/// ([`LastWriters`], [`SliceTuples`]): its stores stream (see [`streams`])
/// and its slices are at least [`MIN_SLICE_BYTES`] (the `stores` knob
/// forces either path at any size), and it has tuples.
fn takes_gather_of_slices(
    out_bytes: usize,
    word_bytes: usize,
    offsets: &[usize],
    block: usize,
) -> bool {
    let stores = knobs::in_force().stores;
    let Some(block_bytes) = block.checked_mul(word_bytes) else {
        return false;
    };
    let long_enough = stores != Stores::Auto || block_bytes >= MIN_SLICE_BYTES;
    block_bytes > 0 && !offsets.is_empty() && streams(stores, out_bytes, block_bytes) && long_enough
}

impl LastWriters {
    /// The writers of an overwrite of `out_bytes` in slices of `block`
    /// elements of `word_bytes`, when it [takes a gather of
    /// slices](takes_gather_of_slices); `None` when it does not, when there
    /// are more than `u32::MAX - 1` tuples, or when the table cannot be
    /// allocated.
    pub(super) fn plan(
        out_bytes: usize,
        word_bytes: usize,
        offsets: &[usize],
        block: usize,
    ) -> Option<LastWriters> {
        if !takes_gather_of_slices(out_bytes, word_bytes, offsets, block) {
            return None;
        }
        let slices = out_bytes / (block * word_bytes);
        if u32::try_from(offsets.len()).ok()? == u32::MAX {
            return None;
        }
        let mut writers: Vec<u32> = Vec::new();
        writers.try_reserve_exact(slices).ok()?;
        writers.resize(slices, 0);
        for (k, &off) in (1..).zip(offsets) {
            writers[off / block] = k;
        }
        Some(LastWriters(writers))
    }

    /// Write `dst`, the output's bytes, slice by slice: runs of slices no
    /// tuple writes from `data`, the others from their last tuple's slice
    /// of `updates` (all three in bytes, slices of `block_bytes`). Tasks
    /// own ranges of slices; every byte of `dst` is written once.
    pub(super) fn write<B: OutByte>(
        &self,
        dst: &mut [B],
        data: &[u8],
        updates: &[u8],
        block_bytes: usize,
    ) {
        let writers = &self.0[..];
        assert!(dst.len() == data.len() && dst.len() == writers.len() * block_bytes);
        let per_task = writers
            .len()
            .div_ceil(parallel::tasks(dst.len(), writers.len()));
        parallel::for_each_chunk(dst, per_task * block_bytes, |task, chunk| {
            let first = task * per_task;
            let owned = &writers[first..first + chunk.len() / block_bytes];
            match Avx::detect() {
                Some(avx) => write_slices(
                    chunk,
                    owned,
                    first,
                    (data, updates, block_bytes),
                    |to, from| avx.copy_nontemporal(to, from),
                ),
                None => write_slices(
                    chunk,
                    owned,
                    first,
                    (data, updates, block_bytes),
                    copy_nontemporal_16s,
                ),
            }
            store_fence();
        });
    }
}

/// How far ahead of the slice being written its update is asked for.
const PREFETCH_BYTES_AHEAD: usize = 8 << 10;

/// One task's part of [`LastWriters::write`]: `chunk` holds slices
/// `first..first + writers.len()`; `copy` is the streaming copy, chosen
/// once per task.
#[inline(always)]
fn write_slices<B: OutByte>(
    chunk: &mut [B],
    writers: &[u32],
    first: usize,
    (data, updates, block_bytes): (&[u8], &[u8], usize),
    copy: impl Fn(&mut [B], &[u8]),
) {
    let ahead = (PREFETCH_BYTES_AHEAD / block_bytes.max(1)).max(1);
    let mut fetched = 0;
    let mut s = 0;
    while s < writers.len() {
        // The updates' slices come in no order: each is asked for a few
        // KiB of output ahead, where data's runs are read forward.
        while fetched < writers.len().min(s + ahead) {
            if let Some(k) = writers[fetched].checked_sub(1) {
                let from = k as usize * block_bytes;
                prefetch_items_to_l2(&updates[from..from + block_bytes]);
            }
            fetched += 1;
        }
        let at = s * block_bytes;
        match writers[s] {
            0 => {
                // Consecutive slices from data: one copy.
                let run = writers[s..]
                    .iter()
                    .position(|&w| w != 0)
                    .unwrap_or(writers.len() - s);
                let end = at + run * block_bytes;
                let from = (first + s) * block_bytes;
                copy(&mut chunk[at..end], &data[from..from + run * block_bytes]);
                s += run;
            }
            k => {
                let from = (k as usize - 1) * block_bytes;
                copy(
                    &mut chunk[at..at + block_bytes],
                    &updates[from..from + block_bytes],
                );
                s += 1;
            }
        }
    }
}

/// For each output slice, the tuples that land in it, in row-major order:
/// a reduction's output is then written once, slice by slice, each slice
/// folded in a small buffer from data and its updates in that order (the
/// serial loop's, so bit-identical) and stored with streaming stores.
///
/// Why: as for [`LastWriters`], [`scatter_slices`] reads every updated
/// slice back from memory after streaming data into the output; 64k
/// random 1 KiB slices added into 64 MiB moved about 270 MiB that way,
/// 192 MiB folded. From Python on AMD EPYC family 25 model 1, float32,
/// `stores=cached` against this, medians of five interleaved rounds:
/// 23.6 -> 17.3 ms on one thread, 16.7 -> 12.9 on two.
pub(super) struct SliceTuples {
    /// Slice `s`'s tuples are `tuples[starts[s]..starts[s + 1]]`.
    starts: Vec<u32>,
    tuples: Vec<u32>,
}

/// Each slice is folded in pieces of at most this many bytes, so the
/// buffer stays in L1 however long the slices are.
const FOLD_PIECE_BYTES: usize = 4 << 10;

impl SliceTuples {
    /// The tuples of each slice of an output of `out_bytes` of plain `T`,
    /// under the rule of [`LastWriters::plan`]; `None` also when `T` is
    /// not plain bytes or there are `u32::MAX` tuples or more.
    pub(super) fn plan<T: Element>(
        out_bytes: usize,
        offsets: &[usize],
        block: usize,
    ) -> Option<SliceTuples> {
        T::as_bytes(&[])?;
        let word_bytes = std::mem::size_of::<T>();
        if !takes_gather_of_slices(out_bytes, word_bytes, offsets, block) {
            return None;
        }
        let slices = out_bytes / (block * word_bytes);
        let count = u32::try_from(offsets.len()).ok()?;
        let mut starts: Vec<u32> = Vec::new();
        starts.try_reserve_exact(slices + 1).ok()?;
        starts.resize(slices + 1, 0);
        let mut tuples: Vec<u32> = Vec::new();
        tuples.try_reserve_exact(offsets.len()).ok()?;
        tuples.resize(offsets.len(), 0);
        // A counting sort, stable: counts, their running sums, then each
        // tuple placed at its slice's next free place.
        for &off in offsets {
            starts[off / block + 1] += 1;
        }
        for s in 0..slices {
            starts[s + 1] += starts[s];
        }
        let mut next = starts[..slices].to_vec();
        for (k, &off) in (0..count).zip(offsets) {
            let at = &mut next[off / block];
            tuples[*at as usize] = k;
            *at += 1;
        }
        Some(SliceTuples { starts, tuples })
    }

    /// Write `dst`, the output's bytes: runs of slices no tuple lands in
    /// from `data`, each other slice folded from data's with its tuples'
    /// slices of `updates` (slices of `block` elements) by `C`, in order.
    /// Tasks own ranges of slices; every byte of `dst` is written once.
    pub(super) fn write<T: Element, C: Combine<T>, B: OutByte>(
        &self,
        dst: &mut [B],
        data: &[T],
        updates: &[T],
        block: usize,
    ) {
        let slices = self.starts.len() - 1;
        let block_bytes = block * std::mem::size_of::<T>();
        assert!(dst.len() == std::mem::size_of_val(data) && dst.len() == slices * block_bytes);
        let per_task = slices.div_ceil(parallel::tasks(dst.len(), slices));
        parallel::for_each_chunk(dst, per_task * block_bytes, |task, chunk| {
            let first = task * per_task;
            let task = FoldTask {
                starts: &self.starts[first..first + chunk.len() / block_bytes + 1],
                tuples: &self.tuples,
                first,
                block,
            };
            match Avx::detect() {
                Some(avx) => task.write::<T, C, B>(chunk, data, updates, |to, from| {
                    avx.copy_nontemporal(to, from)
                }),
                None => task.write::<T, C, B>(chunk, data, updates, copy_nontemporal_16s),
            }
            store_fence();
        });
    }
}

/// One task's slices of [`SliceTuples::write`]: slices `first..` (as many
/// as `starts` has entries, less one), whose tuples' ranges `starts` holds.
struct FoldTask<'a> {
    starts: &'a [u32],
    tuples: &'a [u32],
    first: usize,
    block: usize,
}

impl FoldTask<'_> {
    #[inline(always)]
    fn write<T: Element, C: Combine<T>, B: OutByte>(
        &self,
        chunk: &mut [B],
        data: &[T],
        updates: &[T],
        copy: impl Fn(&mut [B], &[u8]),
    ) {
        fn as_bytes<T: Element>(values: &[T]) -> &[u8] {
            T::as_bytes(values).expect("SliceTuples::plan is only made for plain elements")
        }
        let (block, word) = (self.block, std::mem::size_of::<T>());
        let piece = (FOLD_PIECE_BYTES / word.max(1)).clamp(1, block.max(1));
        let mut folded: Vec<T> = Vec::with_capacity(piece);
        let slices = self.starts.len() - 1;
        let ahead = (PREFETCH_BYTES_AHEAD / (block * word).max(1)).max(1);
        let mut fetched = 0;
        let mut s = 0;
        while s < slices {
            // Each slice's updates asked for a few KiB of output ahead.
            while fetched < slices.min(s + ahead) {
                for &k in self.tuples_of(fetched) {
                    let from = k as usize * block;
                    prefetch_items_to_l2(&updates[from..from + block]);
                }
                fetched += 1;
            }
            let at = (self.first + s) * block;
            let tuples = self.tuples_of(s);
            if tuples.is_empty() {
                let run = (s..slices)
                    .position(|r| self.starts[r + 1] > self.starts[r])
                    .unwrap_or(slices - s);
                let (from, to) = (s * block * word, (s + run) * block * word);
                copy(
                    &mut chunk[from..to],
                    as_bytes::<T>(&data[at..at + run * block]),
                );
                s += run;
                continue;
            }
            for start in (0..block).step_by(piece) {
                let len = piece.min(block - start);
                folded.clear();
                folded.extend_from_slice(&data[at + start..at + start + len]);
                for &k in tuples {
                    let from = k as usize * block + start;
                    for (acc, u) in folded.iter_mut().zip(&updates[from..from + len]) {
                        C::combine(acc, u);
                    }
                }
                let to = (s * block + start) * word;
                copy(&mut chunk[to..to + len * word], as_bytes::<T>(&folded));
            }
            s += 1;
        }
    }

    /// The tuples of the task's slice `s`, in row-major order.
    #[inline(always)]
    fn tuples_of(&self, s: usize) -> &[u32] {
        &self.tuples[self.starts[s] as usize..self.starts[s + 1] as usize]
    }
}
