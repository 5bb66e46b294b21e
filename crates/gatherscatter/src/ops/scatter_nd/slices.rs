//! ScatterND's kernels: every tuple's slice combined into the output in
//! row-major order of the tuples, and, for large overwrites, the output
//! written once in its own order from whichever of data and the updates
//! holds each slice.

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

impl LastWriters {
    /// The writers of an overwrite of `out_bytes` in slices of `block`
    /// elements of `word_bytes`, when its stores stream (see [`streams`])
    /// and its slices are at least [`MIN_SLICE_BYTES`] (the `stores` knob
    /// forces either path at any size); `None` when they do not, when
    /// there are more than `u32::MAX - 1` tuples, or when the table cannot
    /// be allocated.
    pub(super) fn plan(
        out_bytes: usize,
        word_bytes: usize,
        offsets: &[usize],
        block: usize,
    ) -> Option<LastWriters> {
        let stores = knobs::in_force().stores;
        let block_bytes = block.checked_mul(word_bytes)?;
        let long_enough = stores != Stores::Auto || block_bytes >= MIN_SLICE_BYTES;
        if block == 0
            || offsets.is_empty()
            || !streams(stores, out_bytes, block_bytes)
            || !long_enough
        {
            return None;
        }
        let slices = out_bytes / block_bytes;
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
