//! ScatterND's kernels: every tuple's slice combined into the output in
//! row-major order of the tuples, and, for large outputs, the output
//! written once in its own order from data and the updates of each slice.

use crate::dtype::Element;
use crate::mem::knobs::Stores;
use crate::mem::measured_stores::{stores_in_force, Sizes, StoreChoice, Writer};
use crate::mem::parallel;
use crate::mem::prefetch::prefetch_items_to_l2;
use crate::mem::stream::{copy_nontemporal, store_fence, Avx, OutByte};
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

/// For each output slice, the tuples that land in it, in row-major order:
/// a large output is then written once, slice by slice, with streaming
/// stores, runs of slices no tuple lands in from data, an overwritten
/// slice from its last tuple's update, a reduced one folded from data's
/// slice and its updates in order in a small buffer (the serial loop's
/// order, so bit-identical).
///
/// Why: [`scatter_slices`] streams data into a large output, then stores
/// each tuple's slice with ordinary stores, which read every line of it
/// back from memory first. ScatterND of 16k distinct 1 KiB rows into
/// 64 MiB moved 176 MiB that way, 128 MiB as a gather; 64k random 1 KiB
/// slices added into it about 270 MiB, 192 MiB folded. From Python on
/// AMD EPYC family 25 model 1, float32, `stores=cached` against this,
/// medians of five interleaved rounds, one thread / two: the overwrite
/// 10.4 -> 7.4 ms / 8.7 -> 6.0, the add 23.6 -> 17.3 / 16.7 -> 12.9.
pub(super) struct SliceTuples {
    /// Slice `s`'s tuples are `tuples[starts[s]..starts[s + 1]]`.
    starts: Vec<u32>,
    tuples: Vec<u32>,
}

/// Slices shorter than this keep [`scatter_slices`] under `auto`: each
/// slice is a copy call of its own here. 64 MiB of float32, a quarter of
/// its slices overwritten, AMD EPYC family 25 model 1, medians of 9,
/// [`scatter_slices`] against this (one thread / two): 64 B slices 15-17
/// against 22-27 ms / 11-12 against 13-14; 256 B 15-17 against 13-14 /
/// 10-11 against 9-10; 1 KiB 13-14 against 10-12 / 9-10 against 6.5;
/// 4 KiB 12-14 against 8-11 / 8-9 against 6-6.5.
const MIN_SLICE_BYTES: usize = 256;

/// A reduced slice is folded in pieces of at most this many bytes, so the
/// buffer stays in L1 however long the slices are.
const FOLD_PIECE_BYTES: usize = 4 << 10;

/// How far ahead of the slice being written its updates are asked for.
const PREFETCH_BYTES_AHEAD: usize = 8 << 10;

/// What a write through [`SliceTuples::write`] reads for a covered slice.
#[derive(Clone, Copy)]
struct Reads {
    /// The tuples whose slices of `updates` it reads.
    updates: fn(&[u32]) -> &[u32],
    /// Whether it reads data's slice too (a reduction folds into it).
    data_of_covered: bool,
}

impl SliceTuples {
    /// How a call of `writer` (an overwrite or a reduction) writes an
    /// output of `out_bytes` of plain `T` in slices of `block` elements:
    /// the tuples of each slice when its stores stream (see
    /// [`StoreChoice`]: under `auto`, streaming for outputs past a quarter
    /// of the last-level cache, measured per class of call from 1 MiB
    /// up) and its slices are at least [`MIN_SLICE_BYTES`] (the `stores`
    /// knob forces either path at any size); `None` when they do not, when
    /// `T` is not plain bytes, when there are no tuples or `u32::MAX` or
    /// more, or when the table cannot be allocated. The choice comes
    /// back beside it: [`StoreChoice::done`] once the output is written
    /// (by these tuples or, without them, [`scatter_slices`]).
    pub(super) fn plan<T: Element>(
        writer: Writer,
        out_bytes: usize,
        offsets: &[usize],
        block: usize,
    ) -> (Option<SliceTuples>, StoreChoice) {
        let unmeasured = (None, StoreChoice::ORDINARY);
        let Some(block_bytes) = block.checked_mul(std::mem::size_of::<T>()) else {
            return unmeasured;
        };
        let stores = stores_in_force(out_bytes);
        let long_enough = stores != Stores::Auto || block_bytes >= MIN_SLICE_BYTES;
        if T::as_bytes(&[]).is_none()
            || block_bytes == 0
            || out_bytes == 0
            || offsets.is_empty()
            || !long_enough
        {
            return unmeasured;
        }
        let slices = out_bytes / block_bytes;
        let sizes = Sizes {
            out_bytes,
            run_bytes: block_bytes,
            src_bytes: out_bytes,
        };
        let tasks = || parallel::tasks(out_bytes, slices);
        let stores = StoreChoice::choose(writer, stores, sizes, tasks, true);
        if !stores.streaming() {
            return (None, stores);
        }
        match SliceTuples::table(slices, offsets, block) {
            Some(tuples) => (Some(tuples), stores),
            // No memory for the table: the copy the caller falls back on
            // is not the strategy being timed.
            None => unmeasured,
        }
    }

    /// The counting sort of `offsets` (multiples of `block`) by the slice
    /// of the `slices` they land in.
    fn table(slices: usize, offsets: &[usize], block: usize) -> Option<SliceTuples> {
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

    /// Write `dst`, the output's bytes, as an overwrite: each slice some
    /// tuple lands in from the last such tuple's slice of `updates`.
    pub(super) fn overwrite<T: Element, B: OutByte>(
        &self,
        dst: &mut [B],
        data: &[T],
        updates: &[T],
        block: usize,
    ) {
        // Only the last tuple's update is read, so only it is fetched.
        self.write(
            dst,
            (data, updates, block),
            Reads {
                updates: last,
                data_of_covered: false,
            },
            |to, _, tuples, _, avx| {
                // A covered slice has at least one tuple.
                let from = tuples[tuples.len() - 1] as usize * block;
                copy_nontemporal(avx, to, bytes(&updates[from..from + block]));
            },
        );
    }

    /// Write `dst`, the output's bytes, as a reduction by `C`: each slice
    /// some tuple lands in folded from data's slice and its tuples' slices
    /// of `updates`, in order, [`FOLD_PIECE_BYTES`] at a time.
    pub(super) fn fold<T: Element, C: Combine<T>, B: OutByte>(
        &self,
        dst: &mut [B],
        data: &[T],
        updates: &[T],
        block: usize,
    ) {
        let word = std::mem::size_of::<T>();
        let piece = (FOLD_PIECE_BYTES / word.max(1)).clamp(1, block.max(1));
        self.write(
            dst,
            (data, updates, block),
            Reads {
                updates: every,
                data_of_covered: true,
            },
            |to, from, tuples, folded, avx| {
                for start in (0..block).step_by(piece) {
                    let len = piece.min(block - start);
                    folded.clear();
                    folded.extend_from_slice(&from[start..start + len]);
                    for &k in tuples {
                        let at = k as usize * block + start;
                        for (acc, u) in folded.iter_mut().zip(&updates[at..at + len]) {
                            C::combine(acc, u);
                        }
                    }
                    copy_nontemporal(
                        avx,
                        &mut to[start * word..(start + len) * word],
                        bytes(folded),
                    );
                }
            },
        );
    }

    /// The walk both writes share: tasks own ranges of slices and write
    /// each byte of `dst` once, in order, runs of slices no tuple lands in
    /// from `data`, each other slice by `covered(its bytes of dst, data's
    /// slice, its tuples, the task's buffer, the copy's AVX proof)`. What
    /// each slice will read ([`Reads`]) is asked for into L2 a few KiB of
    /// output ahead: the updates come in no order, and data's slices,
    /// though read forward, in runs broken by the covered slices an
    /// overwrite skips. (Data asked for as well, 4M-element float32 data
    /// by 1 KiB slices from Python, one thread: an overwrite of 16k
    /// distinct slices 7.8-8.3 -> 6.8-7.3 ms; a sum of 64k slices, data
    /// read for every covered slice too, 16.1-16.3 -> 14.4-15.2, two
    /// threads 7.9-8.0 -> 7.2-7.4; asked for only where no tuple lands,
    /// the sum gained half as much.)
    fn write<T: Element, B: OutByte>(
        &self,
        dst: &mut [B],
        (data, updates, block): (&[T], &[T], usize),
        reads: Reads,
        covered: impl Fn(&mut [B], &[T], &[u32], &mut Vec<T>, Option<Avx>) + Sync,
    ) {
        let slices = self.starts.len() - 1;
        let block_bytes = block * std::mem::size_of::<T>();
        assert!(dst.len() == std::mem::size_of_val(data) && dst.len() == slices * block_bytes);
        let ahead = (PREFETCH_BYTES_AHEAD / block_bytes.max(1)).max(1);
        let per_task = slices.div_ceil(parallel::tasks(dst.len(), slices));
        parallel::for_each_chunk(dst, per_task * block_bytes, |task, chunk| {
            let first = task * per_task;
            let end = first + chunk.len() / block_bytes;
            let avx = Avx::detect();
            let mut buffer = Vec::new();
            let mut fetched = first;
            let mut s = first;
            while s < end {
                while fetched < end.min(s + ahead) {
                    let tuples = self.tuples_of(fetched);
                    if tuples.is_empty() || reads.data_of_covered {
                        prefetch_items_to_l2(&data[fetched * block..(fetched + 1) * block]);
                    }
                    for &k in (reads.updates)(tuples) {
                        let from = k as usize * block;
                        prefetch_items_to_l2(&updates[from..from + block]);
                    }
                    fetched += 1;
                }
                let to = &mut chunk[(s - first) * block_bytes..];
                let tuples = self.tuples_of(s);
                if tuples.is_empty() {
                    // Consecutive slices from data: one copy.
                    let run = (s..end)
                        .position(|r| !self.tuples_of(r).is_empty())
                        .unwrap_or(end - s);
                    let from = &data[s * block..(s + run) * block];
                    copy_nontemporal(avx, &mut to[..run * block_bytes], bytes(from));
                    s += run;
                } else {
                    let from = &data[s * block..(s + 1) * block];
                    covered(&mut to[..block_bytes], from, tuples, &mut buffer, avx);
                    s += 1;
                }
            }
            store_fence();
        });
    }

    /// The tuples of slice `s`, in row-major order.
    #[inline(always)]
    fn tuples_of(&self, s: usize) -> &[u32] {
        &self.tuples[self.starts[s] as usize..self.starts[s + 1] as usize]
    }
}

/// The last of a slice's tuples (the one an overwrite reads).
fn last(tuples: &[u32]) -> &[u32] {
    &tuples[tuples.len().saturating_sub(1)..]
}

/// All of a slice's tuples (a reduction reads each).
fn every(tuples: &[u32]) -> &[u32] {
    tuples
}

/// The bytes of plain elements ([`SliceTuples::plan`] is only made for
/// those).
fn bytes<T: Element>(values: &[T]) -> &[u8] {
    T::as_bytes(values).expect("SliceTuples::plan is only made for plain elements")
}
