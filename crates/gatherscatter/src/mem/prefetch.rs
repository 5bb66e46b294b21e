//! Prefetch hints: ask the cache for lines a kernel reads next. A hint
//! never faults and changes no values; Miri does not model it, so it is
//! nothing there.
#![allow(unsafe_code)]

/// Ask the cache to start loading the line holding `item` (a hint).
pub(crate) fn prefetch_item<T>(item: &T) {
    prefetch_line::<{ CacheLevel::L1 as u8 }>((item as *const T).cast());
}

/// Like [`prefetch_item`], but into the second-level cache only (see
/// [`prefetch_items_to_l2`]).
pub(crate) fn prefetch_item_to_l2<T>(item: &T) {
    prefetch_line::<{ CacheLevel::L2 as u8 }>((item as *const T).cast());
}

/// Ask the cache to start loading `items` (a hint: it never faults and
/// changes no values). Miri does not model the hint, so it is skipped there.
pub(crate) fn prefetch_items<T>(items: &[T]) {
    prefetch_lines::<T, { CacheLevel::L1 as u8 }>(items);
}

/// Like [`prefetch_items`], but into the second-level cache only. The
/// streaming row copy asks for 8 KiB ahead into L1 (32 KiB into L2), over a
/// hundred lines; as L1
/// prefetches they compete with the copy's own loads for the core's few
/// first-level miss slots (the likely cause), while L2 has room for them
/// and the copy's loads hit there. (Measured on W1 and W10, 1 KiB rows
/// from a 64 MiB source, into a buffer on one thread: 1.28-1.39x faster.
/// W8's 512-byte rows from a 32 MiB source, mostly in L3, were about as
/// fast in the median and 5-15% slower in the best runs.)
pub(crate) fn prefetch_items_to_l2<T>(items: &[T]) {
    prefetch_lines::<T, { CacheLevel::L2 as u8 }>(items);
}

/// Which cache a prefetch fills.
#[repr(u8)]
pub(crate) enum CacheLevel {
    L1,
    L2,
}

/// One prefetch per 64-byte line that `items` touches, each at an address
/// inside `items`: its first byte, then each later line's first byte. (Steps
/// of 64 from the first byte missed the last line of every block that does
/// not start on a line: W8, 512-byte rows, ran 1.4-1.7x slower when its
/// source happened to start 16 or 32 bytes past a line, as the heap placed
/// it in some runs and not others.)
fn prefetch_lines<T, const LEVEL: u8>(items: &[T]) {
    let first = items.as_ptr().cast::<i8>();
    for_each_line(
        first.addr() % LINE,
        std::mem::size_of_val(items),
        |offset| {
            prefetch_line::<LEVEL>(first.wrapping_add(offset));
        },
    );
}

/// Read one item of each 64-byte line of `items` now (real loads, not
/// hints), first to last, so the whole block is in L1/L2 before random
/// reads of it start. Sequential demand loads are what the hardware
/// prefetchers follow best. For plain words: each read is a `clone`.
pub(crate) fn load_lines<T: Clone>(items: &[T]) {
    let size = std::mem::size_of::<T>().max(1);
    for_each_line(
        items.as_ptr().addr() % LINE,
        std::mem::size_of_val(items),
        |offset| {
            if let Some(item) = items.get(offset / size) {
                std::hint::black_box(item.clone());
            }
        },
    );
}

/// Ask for the lines holding every 64th byte of `items` from its first: for
/// callers that split a region into consecutive slices of whole lines'
/// length and prefetch one slice at a time, which between them ask for
/// each line of the region once (but its last, when the region does not
/// start on a line). (W2 splits each next slab into 512-byte slices: asking
/// for every line each slice touches, or only the lines starting inside
/// it, ran W2 1.07x and 1.25x slower.)
pub(crate) fn prefetch_slice_of_region<T>(items: &[T]) {
    let first = items.as_ptr().cast::<i8>();
    for offset in every_64th_byte(std::mem::size_of_val(items)) {
        prefetch_line::<{ CacheLevel::L1 as u8 }>(first.wrapping_add(offset));
    }
}

/// Offsets `0, 64, 128, ...` below `bytes`. (Inlined: as a call inside
/// W2's copy loop it ran W2 and W3 1.1x slower.)
#[inline(always)]
fn every_64th_byte(bytes: usize) -> std::iter::StepBy<std::ops::Range<usize>> {
    (0..bytes).step_by(LINE)
}

/// Cache line bytes on the machines measured.
pub(crate) const LINE: usize = 64;

/// The most of one block that a block copy asks for ahead of it: its first
/// 4 KiB. The hardware's stream prefetchers follow a block once its copy
/// has started, and every line of a large block asked for blocks ahead is
/// evicted from L1 before its turn: Gather of 64 KiB blocks (16 MiB from
/// cache, Intel Xeon family 6 model 167) spent 37% of its samples in that
/// prefetch loop; capped at 4 KiB, one thread went 1.31-1.36 -> 1.22-1.28
/// ms, two 0.71-0.76 -> 0.61-0.71 (old and new wheels in alternating
/// processes; a 1 KiB head cost 4 KiB blocks 0-3%).
pub(crate) const BLOCK_HEAD_BYTES: usize = 4 << 10;

/// The first [`BLOCK_HEAD_BYTES`] of `block` (all of a shorter one).
pub(crate) fn block_head<T>(block: &[T]) -> &[T] {
    let items = BLOCK_HEAD_BYTES / std::mem::size_of::<T>().max(1);
    &block[..block.len().min(items.max(1))]
}

/// Visit one offset inside a block of `bytes` bytes, starting `misalign`
/// bytes past a line, for each line the block touches: the block's first
/// byte, then each later line's first byte. A plain loop: an iterator chain
/// here made W2 1.3x slower.
#[inline(always)]
fn for_each_line(misalign: usize, bytes: usize, mut visit: impl FnMut(usize)) {
    let next_line = (LINE - misalign % LINE) % LINE;
    if next_line != 0 && bytes > 0 {
        visit(0);
    }
    let mut offset = next_line;
    while offset < bytes {
        visit(offset);
        offset += LINE;
    }
}

/// The one prefetch instruction, into the cache `LEVEL` names. `line` may
/// be any address, inside a live value or not: nothing is read.
#[inline(always)]
pub(crate) fn prefetch_line<const LEVEL: u8>(line: *const i8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
        // SAFETY: a prefetch reads nothing architecturally and cannot fault,
        // whatever the address. SSE is part of the x86-64 baseline.
        unsafe {
            if LEVEL == CacheLevel::L1 as u8 {
                _mm_prefetch::<_MM_HINT_T0>(line);
            } else {
                _mm_prefetch::<_MM_HINT_T1>(line);
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = line;
}

/// How far past the group being gathered, in bytes, GatherElements'
/// loops along an outer axis ask for their indices into L1: 256 `i64`s,
/// 32 lines. Those loops wait on the plane's lines (in L2, picked at
/// random), and the index stream's lines queued behind them: without it,
/// a third of the vector loop's samples sat on the index load. Zen 4,
/// 16 MiB outputs, one thread, medians of calls in process, old and new
/// wheels alternating: along the middle axis of 256 (whole rows read in
/// place), int8 20.9 -> 14.9 ms (1 KiB ahead 16.1, 4 KiB 15.2), float16
/// 10.9 -> 7.7, float32 5.7 -> 4.3; by int32 and uint16 indices 3-5%
/// faster; the scalar loop (`word_gather=scalar`) 20-25% faster. In
/// packed tiles only inside each piece ([`asked_until`]): int8 along the
/// first axis 27 -> 25 ms, in 4096 B blocks 27 -> 24.5. Along the last
/// axis, where the loops ask for the next data row instead, it measured
/// no faster. On a Zen 3 it cost more than it saved, so whether the loops
/// ask at all is the `stream_fetch` knob's choice, timed per class under
/// `auto` (`ops::gather_elements::measured_indices`).
pub(crate) const INDEX_AHEAD_BYTES: usize = 2048;

/// Ask for the line of indices [`INDEX_AHEAD_BYTES`] past `at` into L1.
/// Past the end of a row piece the line is the next piece's, or nothing's:
/// a prefetch cannot fault.
#[inline(always)]
pub(crate) fn prefetch_indices_ahead<X>(at: *const X) {
    prefetch_line::<{ CacheLevel::L1 as u8 }>(at.cast::<i8>().wrapping_add(INDEX_AHEAD_BYTES));
}

/// The first position of a piece of `len` indices `X` whose loop no
/// longer asks for the line [`INDEX_AHEAD_BYTES`] on: the loops ask while
/// that line is inside the piece, and past it only when `then_next` (the
/// indices after the piece are the next ones read). A tile's next piece of
/// indices is a whole row further on: asked for, those lines left L1
/// before their turn, and W5 (GatherElements along axis 0 of 4096x4096
/// float32, tiles of 64 columns, 512 B of indices a piece) ran 42 -> 57 ms
/// on one thread. Worked out once a piece, so that a loop's test is one
/// compare (a test a step, `j + ahead < len || then_next`, cost the scalar
/// loop 1.2-1.4x on a Zen 3 even where it asked for nothing).
#[inline(always)]
pub(crate) fn asked_until<X>(len: usize, then_next: bool) -> usize {
    match then_next {
        true => len,
        false => len.saturating_sub(INDEX_AHEAD_BYTES / std::mem::size_of::<X>().max(1)),
    }
}

/// Index and update elements between two prefetches of the streams ahead
/// in the scatter kernels: 16 indices are two cache lines.
pub(crate) const STREAM_CHUNK: usize = 16;

/// How far ahead of the update being applied the index and update streams
/// are prefetched into L2: 1024 elements, 8 KiB of `i64` indices. With two
/// or three streams read at once (indices, updates, and data copied into
/// the output), the hardware prefetchers alone left the update loop
/// waiting on each index line. (Measured on W6, a 4096 x 4096 f32 scatter
/// along the last axis, into a buffer and fresh: 1.3-1.4x faster on one
/// and two threads; 512 to 8192 elements ahead were all within noise of
/// each other.)
pub(crate) const STREAM_AHEAD: usize = 1024;

/// Above this many bytes of targets per index row, a scatter's row loop
/// asks for each target a few updates ahead: the targets are then mostly outside L2,
/// and an update's read of its target no longer waits in the queue of the
/// core's out-of-order window (16M updates into 1M f32, max: 1.2x faster).
pub(crate) const PREFETCH_TARGETS_ABOVE: usize = 1 << 20;

/// How many updates ahead a scatter's row loop asks for a target.
pub(crate) const TARGET_AHEAD: usize = 16;

/// Prefetch into L2 the lines of the [`STREAM_CHUNK`] indices and updates
/// from element `at` on (those that exist): one or two lines of indices
/// (`i32` or `i64`), one or two of updates. Each line is asked for by one element, in straight-line code.
/// (Two variants that asked for the same lines through a loop, over a slice
/// or over `step_by` positions, measured no faster on W6 than no prefetch
/// at all, although their prefetch instructions were in the binary.)
pub(crate) fn prefetch_streams<X, W>(indices: &[X], updates: &[W], at: usize) {
    const { assert!(STREAM_CHUNK == 2 * per_line::<i64>()) };
    // `at` is an element position plus `STREAM_AHEAD`: no overflow.
    if let Some(line) = indices.get(at) {
        prefetch_item_to_l2(line);
    }
    if per_line::<X>() < STREAM_CHUNK {
        if let Some(line) = indices.get(at + per_line::<X>()) {
            prefetch_item_to_l2(line);
        }
    }
    if let Some(line) = updates.get(at) {
        prefetch_item_to_l2(line);
    }
    if per_line::<W>() < STREAM_CHUNK {
        if let Some(line) = updates.get(at + per_line::<W>()) {
            prefetch_item_to_l2(line);
        }
    }
}

/// Elements of `T` per cache line (at least 1).
pub(crate) const fn per_line<T>() -> usize {
    let size = std::mem::size_of::<T>();
    if size == 0 || size >= LINE {
        1
    } else {
        LINE / size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_head_is_the_whole_of_a_short_block_and_4_kib_of_a_long_one() {
        let words = vec![0u32; 3000];
        assert_eq!(block_head(&words[..1024]).len(), 1024);
        assert_eq!(block_head(&words[..1025]).len(), 1024);
        assert_eq!(block_head(&words).len(), 1024);
        assert_eq!(block_head(&[0u8; 5]).len(), 5);
        assert_eq!(block_head::<u8>(&[]).len(), 0);
    }

    /// Every line a block touches is asked for once, from inside the block,
    /// wherever the block starts (a block 16 bytes past a line touches one
    /// more line than its length in lines). Slices of whole lines' length
    /// that split a region ask, between them, for each of the region's
    /// lines once, but the last when the region starts past a line.
    #[test]
    fn prefetches_cover_every_line_a_block_touches() {
        for misalign in 0..LINE {
            for bytes in [0, 1, 15, 48, 63, 64, 65, 512, 1000, 1024] {
                let mut lines = Vec::new();
                for_each_line(misalign, bytes, |o| {
                    assert!(o < bytes);
                    lines.push((misalign + o) / LINE);
                });
                let touched: Vec<usize> = match bytes {
                    0 => vec![],
                    _ => (0..=(misalign + bytes - 1) / LINE).collect(),
                };
                assert_eq!(lines, touched, "{bytes} bytes, {misalign} past a line");
            }
            let slice = 512;
            let mut asked = Vec::new();
            for k in 0..3 {
                let start = misalign + k * slice;
                asked.extend(every_64th_byte(slice).map(|o| (start + o) / LINE));
            }
            let whole_region: Vec<usize> = (0..(misalign + 3 * slice).div_ceil(LINE)).collect();
            let but_last = whole_region.len() - usize::from(misalign != 0);
            assert_eq!(asked, whole_region[..but_last], "{misalign} past a line");
        }
        let count = |misalign| {
            let mut lines = 0;
            for_each_line(misalign, 512, |_| lines += 1);
            lines
        };
        assert_eq!((count(16), count(0)), (9, 8));
    }

    #[test]
    fn prefetch_accepts_any_slice() {
        let data = vec![1u8; 1000];
        prefetch_items(&data);
        prefetch_items(&data[999..]);
        prefetch_items::<u64>(&[]);
        prefetch_items_to_l2(&data[1..]);
        prefetch_items_to_l2::<u64>(&[]);
        prefetch_item(&data[3]);
    }
}
