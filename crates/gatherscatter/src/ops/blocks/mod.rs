//! Gather's copy of whole blocks for outputs too large to stay in cache.
//!
//! A row gather whose output does not fit in cache is bound by memory
//! traffic and latency. Three things pay (measured with `gsx-bench` on the
//! peers' W1/W8/W10 workloads, see docs/performance.md):
//! - Non-temporal stores ([`crate::mem::stream`]) write the output in one
//!   pass over memory instead of two.
//! - Prefetching the rows a few blocks ahead keeps several random rows in
//!   flight instead of waiting for each one when its copy starts; into L1
//!   or L2 (see [`prefetch_items_to_l2`]) by what the calls measured
//!   ([`measured_prefetch`]).
//! - From a source larger than the cache, copying rows in the order they
//!   sit in the source turns random reads into a forward stream.
#![allow(unsafe_code)]

mod measured_order;
mod measured_prefetch;

pub(crate) use self::measured_order::timings as measured_orders;
pub(crate) use self::measured_prefetch::timings as measured_prefetches;

use std::mem::MaybeUninit;
use std::time::Instant;

use self::measured_order::Class;
use crate::dtype::{DType, Element};
use crate::mem::cpu::{last_level_cache_bytes, MEASURED_LAST_LEVEL_CACHE};
use crate::mem::knobs::{self, BlockOrder, BlockPrefetch};
use crate::mem::parallel;
use crate::mem::prefetch::{
    block_head, prefetch_items, prefetch_items_to_l2, prefetch_line, CacheLevel, BLOCK_HEAD_BYTES,
    LINE,
};
use crate::mem::scratch::{scratch, Scratch};
#[cfg(target_arch = "x86_64")]
use crate::mem::stream::stream_row;
use crate::mem::stream::{copy_nontemporal_16s, store_fence, zero, Avx, OutByte};

/// How far ahead of the copy source blocks are prefetched into L1: about
/// 8 KiB, enough to cover memory latency at this copy rate (measured on
/// W1, W8); L1's few miss slots gain nothing from asking earlier.
const PREFETCH_BYTES_AHEAD: usize = 8 << 10;

/// How far ahead prefetches into L2 ask: about 32 KiB. At 8 KiB, L2
/// prefetches of rows of 256 B to 1 KiB in output order lost to L1's on an
/// Intel Xeon family 6 model 167 (2 vCPUs, 480 MiB L3); from about 32 KiB
/// on they win (into a buffer, streaming stores, medians of rounds
/// alternating in one process, ms, L1 / L2 at 8 KiB / L2 at 32 KiB, one
/// thread): W8 (float16 rows of 512 B, 32 MiB) 4.03 / 4.89 / 2.92, W1
/// (float32 rows of 1 KiB, 64 MiB) 7.44 / 7.56 / 6.45, rows of 256 B from
/// 32 MiB 3.12 / 4.95 / 3.05, rows of 1 KiB from 256 MiB 40.3 / 34.3 /
/// 30.7; on two threads W8 1.53 / 1.70 / 1.29. 64 KiB was as fast, rows of
/// 4 KiB and source order alike at every distance. Short rows (64 B) are
/// capped at 256 blocks, which a loop outside the library found as fast.
const L2_PREFETCH_BYTES_AHEAD: usize = 32 << 10;

/// A new vector of `len` plain elements (every bit pattern valid) whose
/// bytes are the blocks of `block_len` bytes of `src` that `source(first)`
/// lists from output block `first` on; see [`fill_blocks`]. `None` when
/// `T` is not plain or the memory cannot be allocated.
///
/// The memory is not zeroed first: the copy writes every byte once, so a
/// reused allocation costs no extra pass.
pub(crate) fn new_vec_of_blocks<T: Element, I: Iterator<Item = usize> + Clone>(
    len: usize,
    src: &[u8],
    block_len: usize,
    source: impl Fn(usize) -> I + Sync,
) -> Option<Vec<T>> {
    T::as_bytes(&[])?;
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(len).ok()?;
    let spare = &mut out.spare_capacity_mut()[..len];
    let bytes = std::mem::size_of_val(spare);
    // SAFETY: the `len` spare elements are `bytes` bytes of allocated memory
    // that nothing else references while `spare` is borrowed; every byte
    // may be viewed as `MaybeUninit<u8>` (alignment 1, no validity rule).
    let spare_bytes: &mut [MaybeUninit<u8>] =
        unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast(), bytes) };
    fill_blocks(spare_bytes, src, block_len, source);
    // SAFETY: `fill_blocks` wrote every byte of the first `len` elements
    // (each block slot is copied or zeroed, the trailing bytes zeroed), the
    // stores are fenced, and `T` is plain (`as_bytes` is `Some` exactly for
    // types where every bit pattern is a valid value).
    unsafe { out.set_len(len) };
    Some(out)
}

/// Write every byte of `dst` as consecutive blocks of `block_len` bytes:
/// slot `k` gets block `b` of `src` (bytes `b * block_len..`) for the `k`-th
/// value `b` of the source blocks, listed by `source(first)` from slot
/// `first` on. Slots with no source (past the listing's end, or a block
/// outside `src`) and trailing bytes are zeroed. Large outputs are split
/// across the rayon pool; each task prefetches its source blocks ahead and
/// writes with streaming stores, in source order when that pays (see
/// [`reads_in_source_order`]) or as measured for its class
/// ([`measured_order`]), prefetching into the level measured
/// ([`measured_prefetch`]). A call that times the order or the level
/// times both, and may be one that times the caller's stores too: its
/// time then joins each measurement under the strategy it ran, so the
/// three settle within fewer calls.
pub(crate) fn fill_blocks<B: OutByte, I: Iterator<Item = usize> + Clone>(
    dst: &mut [B],
    src: &[u8],
    block_len: usize,
    source: impl Fn(usize) -> I + Sync,
) {
    let block_len = block_len.max(1);
    let blocks = dst.len().div_ceil(block_len);
    // In source order each task's reads are the denser the fewer tasks
    // share the output, so that order takes one task per thread.
    let per_thread = parallel::one_task_per_thread(dst.len(), blocks);
    let in_output_order = parallel::tasks(dst.len(), blocks);
    let knobs = knobs::in_force();
    let order = knobs.block_order;
    let rows_on_lines = rows_on_line_boundaries(dst, block_len);
    let order_class = measured_class(
        order,
        (src.len(), dst.len(), block_len, per_thread),
        rows_on_lines,
    );
    // Output order is timed at the prefetch level measured for it: an open
    // order stays in output order until that level is settled, each call
    // timing both (the order keeps each way's best time, which is then
    // output order's at its better level). Timed at the rule's L1 alone,
    // output order had lost W8 on one thread to source order (120 against
    // 105 ps a byte on an Intel Xeon family 6 model 167) where with L2 it
    // runs at 85-88. The calls that then time source order time its rule
    // level too, so the whole measurement takes no more calls than
    // before: three each for L1 and L2 in output order, for source order,
    // and for its other level.
    let output_sizes = (src.len(), dst.len(), block_len, in_output_order);
    let output_level_open = || {
        measured_level_class(knobs.block_prefetch, output_sizes, false)
            .is_some_and(|class| !measured_prefetch::settled(class))
    };
    let by_source = match order_class {
        Some(class) if measured_order::settled(class) || !output_level_open() => {
            measured_order::source_order(class)
        }
        Some(_) => false,
        None => reads_in_source_order(order, src.len(), block_len, per_thread),
    };
    let tasks = if by_source {
        per_thread
    } else {
        in_output_order
    };
    let per_task = blocks.div_ceil(tasks);
    let sizes = (src.len(), dst.len(), block_len, tasks);
    let (level, level_timed) = prefetch_level(knobs.block_prefetch, sizes, by_source);
    let started = order_class.map(|class| (class, Instant::now()));
    let level_started = level_timed.map(|class| (class, Instant::now()));
    let bytes = dst.len();
    parallel::for_each_chunk(dst, per_task * block_len, |task, chunk| {
        let listed = source(task * per_task);
        let order = by_source
            .then(|| {
                source_order(
                    listed.clone(),
                    chunk.len(),
                    src.len() / block_len,
                    block_len,
                )
            })
            .flatten();
        let order = order.as_ref().map(|order| order.as_slice());
        let ahead = Lookahead::new(src.len(), block_len, order.is_some(), level);
        match Avx::detect() {
            Some(avx) => {
                let whole_rows = order.is_none()
                    && copy_rows_in_slot_order(avx, chunk, src, block_len, listed.clone(), ahead);
                if !whole_rows {
                    copy_task(chunk, src, block_len, order, listed, ahead, |to, from| {
                        avx.copy_nontemporal(to, from)
                    });
                }
            }
            None => copy_task(
                chunk,
                src,
                block_len,
                order,
                listed,
                ahead,
                copy_nontemporal_16s,
            ),
        }
        store_fence();
    });
    if let Some((class, started)) = started {
        measured_order::record(class, by_source, bytes, started.elapsed());
    }
    if let (Some((class, started)), Some(to_l2)) = (level_started, level) {
        measured_prefetch::record(class, to_l2, bytes, started.elapsed());
    }
}

/// Where a copy of `(source, output, row, task)` sizes asks for its rows:
/// `Some(to_l2)` when `prefetch` forces it or its class has measured it
/// (or is measuring it on this call), `None` for [`Lookahead::new`]'s
/// rule; and the class this call's time joins. Small
/// copies, and any under Miri (which cannot time), take the rule.
fn prefetch_level(
    prefetch: BlockPrefetch,
    sizes: (usize, usize, usize, usize),
    in_source_order: bool,
) -> (Option<bool>, Option<measured_prefetch::Class>) {
    match prefetch {
        BlockPrefetch::L1 => return (Some(false), None),
        BlockPrefetch::L2 => return (Some(true), None),
        BlockPrefetch::Auto => {}
    }
    let Some(class) = measured_level_class(prefetch, sizes, in_source_order) else {
        return (None, None);
    };
    // Settled classes too: their calls place the re-checks.
    (Some(measured_prefetch::to_l2(class)), Some(class))
}

/// The class whose measurements choose the prefetch level of a copy of
/// `(source, output, row, task)` sizes, or `None` where the level is
/// forced or taken by rule: small copies, and any under Miri (which cannot
/// time).
fn measured_level_class(
    prefetch: BlockPrefetch,
    (src_len, dst_len, block_len, tasks): (usize, usize, usize, usize),
    in_source_order: bool,
) -> Option<measured_prefetch::Class> {
    let measured = prefetch == BlockPrefetch::Auto
        && !cfg!(miri)
        && src_len >= MEASURED_MIN_SOURCE
        && dst_len >= MEASURED_MIN_OUTPUT;
    measured.then(|| measured_prefetch::Class::of(src_len, block_len, tasks, in_source_order))
}

/// One task's copy, in source order when there is one, with `copy` for
/// each block, chosen once per task. (Asking for the CPU's features per
/// block, through two calls and two empty `memcpy`s around the 32-byte
/// stores, cost W8 on one thread 1.05-1.07x in A/B runs: 1.51 against 1.44
/// ms into a buffer, 1.49 against 1.39 fresh.)
fn copy_task<B: OutByte>(
    chunk: &mut [B],
    src: &[u8],
    block_len: usize,
    order: Option<&[u64]>,
    listed: impl Iterator<Item = usize> + Clone,
    ahead: Lookahead,
    copy: impl Fn(&mut [B], &[u8]),
) {
    match order {
        Some(order) => copy_in_source_order(chunk, src, block_len, order, ahead, copy),
        None => copy_in_slot_order(chunk, src, block_len, listed, ahead, copy),
    }
}

/// How the row copies prefetch: `blocks` source blocks ahead, into L1 or
/// L2: as measured or forced ([`prefetch_level`]), else into L2 only in
/// output order from sources beyond [`L2_PREFETCH_MIN_SOURCE_BYTES`].
#[derive(Clone, Copy)]
struct Lookahead {
    blocks: usize,
    to_l2: bool,
}

impl Lookahead {
    /// In source order the reads ascend through the source, and L1
    /// prefetches served them better than L2 ones: W1-shaped rows into a
    /// buffer on one thread, interleaved, 4 runs each, 256 MiB source
    /// 13.6-14.4 ms against 15.1-16.3, 1 GiB 51-57 against 65-82; on two
    /// threads within noise (1 GiB 34-60 against 41-63).
    fn new(
        src_len: usize,
        block_len: usize,
        in_source_order: bool,
        level: Option<bool>,
    ) -> Lookahead {
        let by_rule =
            || !in_source_order && src_len > beyond_last_level_cache(L2_PREFETCH_MIN_SOURCE_BYTES);
        let to_l2 = level.unwrap_or_else(by_rule);
        let blocks = if to_l2 {
            (L2_PREFETCH_BYTES_AHEAD / block_len.max(1)).clamp(2, 256)
        } else {
            (PREFETCH_BYTES_AHEAD / block_len.max(1)).clamp(2, 16)
        };
        Lookahead { blocks, to_l2 }
    }

    /// Ask for `block`'s head ([`block_head`]).
    #[inline]
    fn prefetch(self, block: &[u8]) {
        let block = block_head(block);
        if self.to_l2 {
            prefetch_items_to_l2(block);
        } else {
            prefetch_items(block);
        }
    }

    /// Ask for the `len` bytes from `first`, at most a block's head
    /// ([`BLOCK_HEAD_BYTES`]), with one prefetch per 64 bytes from `first`
    /// and one at the last byte, which between them touch every line the
    /// span does. A prefetch never faults, so `first` may be
    /// any address. (In the whole-row loop, W8 into a buffer ran in 1.51
    /// ms with this against 1.68 with [`Lookahead::prefetch`]'s walk over
    /// the lines on one thread, 0.83 against 0.97 on two, interleaved. W1's
    /// source-order loop was as fast with either.)
    #[inline]
    fn prefetch_span(self, first: *const u8, len: usize) {
        let len = len.min(BLOCK_HEAD_BYTES);
        let first = first.cast::<i8>();
        let mut offset = 0;
        while offset < len {
            self.prefetch_line(first.wrapping_add(offset));
            offset += LINE;
        }
        if len > 0 {
            self.prefetch_line(first.wrapping_add(len - 1));
        }
    }

    #[inline(always)]
    fn prefetch_line(self, line: *const i8) {
        if self.to_l2 {
            prefetch_line::<{ CacheLevel::L2 as u8 }>(line);
        } else {
            prefetch_line::<{ CacheLevel::L1 as u8 }>(line);
        }
    }
}

/// In output order, sources larger than this, beyond the 32 MiB L3 of the
/// machine measured, are prefetched into L2 (see [`prefetch_items_to_l2`]);
/// smaller ones, whose rows mostly come from L3 with a short wait, into L1.
/// (Source order prefetches into L1; see [`Lookahead::new`].) Scaled to the
/// running CPU's last-level cache. The rule for copies too small to time
/// ([`prefetch_level`]).
const L2_PREFETCH_MIN_SOURCE_BYTES: usize = 48 << 20;

/// Source order pays for sources at least this large, beyond the 32 MiB
/// L3 of the machine measured, with its prefetches into L1 (see
/// [`Lookahead::new`]). Against slot order, W1-shaped rows of 1 KiB,
/// interleaved over heap layouts:
/// - 64 MiB (W1, W10), one thread: into a buffer 2.34-2.53 ms against
///   2.54-3.02 (W10 2.46-2.54 against 2.62-2.78), fresh 2.64-2.76 against
///   2.86-3.04; for two threads see [`SOURCE_ORDER_MIN_BYTES_PER_TASK`];
/// - 256 MiB: 1.16-1.36x faster on one and two threads;
/// - 1 GiB, into a buffer on one thread: 51-57 ms against 67-74.
///
/// With L2 prefetches instead, source order on W1 ran 1.8x slower in some
/// heap layouts (4.6-5.7 ms against 2.4-2.7 into a buffer on one thread),
/// which had for a while kept it to sources of 128 MiB and more.
///
/// Scaled to the running CPU's last-level cache (see
/// [`beyond_last_level_cache`]); [`BlockOrder`] forces either order.
const SOURCE_ORDER_MIN_SOURCE_BYTES: usize = 48 << 20;

/// Each task's share of the source (its size over the task count) must be
/// above this (scaled to the running CPU's last-level cache) for source
/// order to pay. W1's 64 MiB source split between
/// two threads is not: against slot order, within noise in one state of
/// the machine (into a buffer 2.21-2.50 ms against 2.18-2.59, fresh
/// 1.33-1.41 against 1.42-1.57) and 1.05x slower fresh in 5 of 6 runs in
/// another (2.54-3.31 against 2.38-3.18).
const SOURCE_ORDER_MIN_BYTES_PER_TASK: usize = 32 << 20;

/// Blocks at least this long keep the order table (8 bytes per block)
/// within 3% of the output.
const SOURCE_ORDER_MIN_BLOCK: usize = 256;

/// Source-order buckets per task: 2^12 (a 16 KiB table of counts, which
/// stays in L1). Blocks inside a bucket are read in slot order; with as few
/// as 2^8 buckets W1 was as fast as with an exact sort.
const SOURCE_ORDER_BUCKET_BITS: u32 = 12;

/// Whether a task copies its blocks grouped by where they sit in `src`
/// rather than in output order. Random reads of a source larger than the
/// cache wait on memory; in ascending address order they become a forward
/// stream that the hardware prefetchers and the memory's open rows serve,
/// while the output, written with streaming stores, does not wait for
/// anything. (Measured: see [`SOURCE_ORDER_MIN_SOURCE_BYTES`].)
fn reads_in_source_order(
    order: BlockOrder,
    src_len: usize,
    block_len: usize,
    tasks: usize,
) -> bool {
    match order {
        BlockOrder::Output => false,
        BlockOrder::Source => true,
        BlockOrder::Auto => {
            src_len >= source_order_min_source_bytes()
                && src_len / tasks.max(1) > beyond_last_level_cache(SOURCE_ORDER_MIN_BYTES_PER_TASK)
                && block_len >= SOURCE_ORDER_MIN_BLOCK
        }
    }
}

/// Sources from this size on (and outputs from [`MEASURED_MIN_OUTPUT`])
/// that the fixed rule of [`reads_in_source_order`] leaves to output
/// order are copied in the order measured faster on this CPU for their
/// class ([`measured_order`]): below it a source sits within the private
/// caches and L3 of any current x86-64 core, where output order's
/// prefetches serve it.
const MEASURED_MIN_SOURCE: usize = 2 << 20;

/// Outputs from this size on take a measured order (see
/// [`MEASURED_MIN_SOURCE`]): a copy of at least 50 us on the CPUs
/// measured, long enough to time with two clock reads, and enough blocks
/// to repay source order's table.
const MEASURED_MIN_OUTPUT: usize = 1 << 20;

/// Whether every block of `block_len` bytes of `dst` starts on a cache
/// line boundary: what source order's random writes cost depends on it
/// (see [`measured_order`]).
fn rows_on_line_boundaries<B>(dst: &[B], block_len: usize) -> bool {
    block_len.is_multiple_of(LINE) && dst.as_ptr().addr().is_multiple_of(LINE)
}

/// The class whose measurements choose the order of a copy of `dst_len`
/// bytes from `src_len` in blocks of `block_len` on `tasks` tasks, into
/// rows on line boundaries or not, or `None` where the order is fixed:
/// forced by `order`, taken by [`reads_in_source_order`]'s rule (source
/// order past the cache), or output order (short blocks, small sources
/// and outputs, and under Miri, which cannot time).
fn measured_class(
    order: BlockOrder,
    (src_len, dst_len, block_len, tasks): (usize, usize, usize, usize),
    rows_on_lines: bool,
) -> Option<Class> {
    let uncertain = order == BlockOrder::Auto
        && !cfg!(miri)
        && block_len >= SOURCE_ORDER_MIN_BLOCK
        && src_len >= MEASURED_MIN_SOURCE
        && dst_len >= MEASURED_MIN_OUTPUT
        && !reads_in_source_order(order, src_len, block_len, tasks);
    uncertain.then(|| Class::of(src_len, block_len, tasks, rows_on_lines))
}

/// The smallest source [`BlockOrder::Auto`] reads in source order, on
/// this CPU.
pub(crate) fn source_order_min_source_bytes() -> usize {
    beyond_last_level_cache(SOURCE_ORDER_MIN_SOURCE_BYTES)
}

/// A size `measured` past the 32 MiB L3 where it was measured, scaled to
/// this CPU's last-level cache.
fn beyond_last_level_cache(measured: usize) -> usize {
    let scaled = measured as u128 * last_level_cache_bytes() as u128;
    usize::try_from(scaled / MEASURED_LAST_LEVEL_CACHE as u128).unwrap_or(usize::MAX)
}

/// The slots of a chunk of `chunk_len` bytes (whole blocks of `block_len`),
/// ordered by the bucket of `src` block they read, each entry
/// `source_block << 32 | slot`; within a bucket, slots keep their order.
/// `None` when that order cannot be built: a partial or unlisted slot, a
/// block outside the `src_blocks` of the source, counts beyond 32 bits, or
/// no memory for the table. The caller then copies in slot order, which
/// handles every case.
fn source_order(
    listed: impl Iterator<Item = usize> + Clone,
    chunk_len: usize,
    src_blocks: usize,
    block_len: usize,
) -> Option<Scratch<u64>> {
    if !chunk_len.is_multiple_of(block_len) {
        return None;
    }
    let slots = chunk_len / block_len;
    u32::try_from(slots).ok()?;
    u32::try_from(src_blocks).ok()?;
    let shift = (usize::BITS - src_blocks.leading_zeros()).saturating_sub(SOURCE_ORDER_BUCKET_BITS);
    let buckets = (src_blocks >> shift) + 1;
    // starts[k + 1] counts bucket k's slots, then (after the prefix sum)
    // starts[k] is where bucket k's next slot goes.
    let mut starts: Vec<u32> = Vec::new();
    starts.try_reserve_exact(buckets + 1).ok()?;
    starts.resize(buckets + 1, 0);
    let mut listed_slots = 0;
    for b in listed.clone().take(slots) {
        if b >= src_blocks {
            return None;
        }
        starts[(b >> shift) + 1] += 1;
        listed_slots += 1;
    }
    if listed_slots != slots {
        return None;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    // The thread's kept list: W1 from Python on one thread otherwise
    // faulted this 512 KiB table's pages in on every call.
    let mut order = scratch::<u64>(slots, DType::U64).ok()?;
    order.resize(slots, 0);
    for (slot, b) in listed.take(slots).enumerate() {
        let next = &mut starts[b >> shift];
        order[*next as usize] = (b as u64) << 32 | slot as u64;
        *next += 1;
    }
    Some(order)
}

/// Copy the blocks that `order` (from [`source_order`]) pairs with the
/// slots of `chunk`, in that order, prefetching `ahead` entries on.
fn copy_in_source_order<B: OutByte>(
    chunk: &mut [B],
    src: &[u8],
    block_len: usize,
    order: &[u64],
    ahead: Lookahead,
    copy: impl Fn(&mut [B], &[u8]),
) {
    let split = |entry: u64| ((entry >> 32) as usize, entry as u32 as usize);
    for (k, &entry) in order.iter().enumerate() {
        let upcoming = order.get(k + ahead.blocks);
        if let Some(next) = upcoming.and_then(|&e| block(src, split(e).0, block_len)) {
            ahead.prefetch(next);
        }
        let (b, slot) = split(entry);
        let to = chunk.get_mut(slot * block_len..(slot + 1) * block_len);
        if let (Some(to), Some(from)) = (to, block(src, b, block_len)) {
            copy(to, from);
        }
    }
}

/// Copy `chunk`'s slots in order from the blocks `listed` names, zeroing
/// slots with no source, prefetching `ahead` blocks on.
fn copy_in_slot_order<B: OutByte>(
    chunk: &mut [B],
    src: &[u8],
    block_len: usize,
    listed: impl Iterator<Item = usize> + Clone,
    ahead: Lookahead,
    copy: impl Fn(&mut [B], &[u8]),
) {
    let mut upcoming = listed.clone().skip(ahead.blocks);
    let mut listed = listed.fuse();
    for slot in chunk.chunks_mut(block_len) {
        if let Some(next) = upcoming.next().and_then(|b| block(src, b, block_len)) {
            ahead.prefetch(next);
        }
        match listed.next().and_then(|b| block(src, b, block_len)) {
            Some(from) if from.len() == slot.len() => copy(slot, from),
            _ => zero(slot),
        }
    }
}

fn block(src: &[u8], b: usize, block_len: usize) -> Option<&[u8]> {
    src.get(b.checked_mul(block_len)?..)?.get(..block_len)
}

/// [`copy_in_slot_order`] with 32-byte streaming stores for chunks of
/// whole rows whose length is a multiple of 32, from a 16-aligned
/// start: every row then starts equally aligned, so one loop over raw
/// row pointers fixes each row's split into streaming stores once,
/// instead of a split and slice checks per row. Returns false, having
/// written nothing, for any other chunk. (Measured on W8, 512-byte
/// rows, into a buffer: 1.09-1.13 against 1.22-1.24 ms on one thread,
/// 0.69 against 0.75 on two, in interleaved runs. W1's 1 KiB rows did
/// not gain from the same loop in source order, which they take on one
/// or two threads; see [`SOURCE_ORDER_MIN_SOURCE_BYTES`].)
fn copy_rows_in_slot_order<B: OutByte>(
    _avx: Avx,
    chunk: &mut [B],
    src: &[u8],
    row_len: usize,
    listed: impl Iterator<Item = usize> + Clone,
    ahead: Lookahead,
) -> bool {
    let fits = row_len > 0
        && row_len.is_multiple_of(32)
        && chunk.len().is_multiple_of(row_len)
        && chunk.as_ptr().addr().is_multiple_of(16);
    if !fits || !cfg!(target_arch = "x86_64") {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: an `Avx` exists only where AVX2, hence AVX, was detected,
    // and the chunk's shape was just checked.
    unsafe {
        rows_in_slot_order_avx(chunk, src, row_len, listed, ahead)
    }
    true
}

/// [`copy_rows_in_slot_order`].
///
/// # Safety
/// The CPU has AVX; `row_len` is a non-zero multiple of 32, `chunk` is
/// whole rows of it and starts 16-aligned.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn rows_in_slot_order_avx<B: OutByte>(
    chunk: &mut [B],
    src: &[u8],
    row_len: usize,
    listed: impl Iterator<Item = usize> + Clone,
    ahead: Lookahead,
) {
    let rows = chunk.len() / row_len;
    let src_rows = src.len() / row_len;
    // Rows are a multiple of 32 long, so each starts as the chunk does:
    // 32-aligned, or 16 bytes short of it.
    let lead = chunk.as_ptr().addr() % 32;
    let to = chunk.as_mut_ptr().cast::<u8>();
    let from = src.as_ptr();
    let mut upcoming = listed.clone().skip(ahead.blocks);
    let mut listed = listed.fuse();
    for row in 0..rows {
        if let Some(b) = upcoming.next().filter(|&b| b < src_rows) {
            ahead.prefetch_span(from.wrapping_add(b * row_len), row_len);
        }
        // SAFETY: `row < rows`, so the row's `row_len` bytes lie inside
        // `chunk`.
        let d = unsafe { to.add(row * row_len) };
        match listed.next().filter(|&b| b < src_rows) {
            // SAFETY: `b < src_rows`, so the source row lies inside `src`,
            // which cannot overlap the exclusively borrowed `chunk`; the
            // destination row starts `lead` bytes short of a 32-byte
            // boundary and is a multiple of 32 long; the caller guarantees
            // AVX.
            Some(b) => unsafe { stream_row(d, from.add(b * row_len), lead, row_len) },
            // SAFETY: the row lies inside `chunk`; zero is a valid byte.
            None => unsafe { std::ptr::write_bytes(d, 0, row_len) },
        }
    }
}

#[cfg(test)]
mod tests;
