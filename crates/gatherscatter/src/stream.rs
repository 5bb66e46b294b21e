//! Copies for outputs too large to stay in cache: x86-64 intrinsics behind
//! safe slice functions (one of the three modules where the library allows
//! `unsafe`, with `vector_gather` and `uninit`).
//!
//! A row gather whose output does not fit in cache is bound by memory
//! traffic and latency. Three things pay (measured with `gsx-bench` on the
//! peers' W1/W8/W10 workloads, see docs/performance.md):
//! - Non-temporal stores write whole cache lines without first reading them
//!   (an ordinary store reads the line it writes), so the output costs one
//!   pass over memory instead of two.
//! - Prefetching the rows a few blocks ahead keeps several random rows in
//!   flight instead of waiting for each one when its copy starts; in output
//!   order from a source larger than the L3 cache, into L2 (see
//!   `prefetch_items_to_l2`).
//! - From a source larger than the cache, copying rows in the order they
//!   sit in the source turns random reads into a forward stream.
//!
//! On other targets the functions fall back to plain copies, so callers never
//! need a `cfg`. Under Miri, which cannot execute `movntdq`, `sfence` or
//! prefetches, the streaming store is an aligned ordinary store, the fence a
//! language fence and the prefetch nothing; everything else runs as is.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use crate::dtype::Element;
use crate::ops::parallel;
use crate::vector_gather::avx2_available;

/// Outputs at least this large take the streaming path: below it the output
/// probably stays in cache, where the caller reads it next, and streaming
/// stores would push it out to memory.
pub(crate) const STREAMING_MIN_BYTES: usize = 8 << 20;

/// Blocks shorter than a cache line gain nothing from streaming stores,
/// which write whole lines.
pub(crate) const STREAMING_MIN_BLOCK: usize = 64;

/// How far ahead of the copy source blocks are prefetched: about 8 KiB,
/// enough to cover memory latency at this copy rate (measured on W1, W8).
const PREFETCH_BYTES_AHEAD: usize = 8 << 10;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for std::mem::MaybeUninit<u8> {}
}

/// A byte of an output buffer: already initialised (`u8`, a caller's
/// buffer) or not yet (`MaybeUninit<u8>`, a fresh one). Both have the size
/// and alignment of `u8`, and this module writes only initialised bytes.
pub(crate) trait OutByte: sealed::Sealed + Send {}
impl OutByte for u8 {}
impl OutByte for MaybeUninit<u8> {}

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
/// [`reads_in_source_order`]).
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
    let by_source = reads_in_source_order(src.len(), block_len, per_thread);
    let tasks = if by_source {
        per_thread
    } else {
        parallel::tasks(dst.len(), blocks)
    };
    let per_task = blocks.div_ceil(tasks);
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
        let order = order.as_deref();
        let ahead = Lookahead::new(src.len(), block_len, order.is_some());
        match Avx::detect() {
            Some(avx) => {
                let whole_rows = order.is_none()
                    && avx.copy_rows_in_slot_order(chunk, src, block_len, listed.clone(), ahead);
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

/// How the row copies prefetch: `blocks` source blocks ahead, into L1 or,
/// in output order from sources beyond [`L2_PREFETCH_MIN_SOURCE_BYTES`],
/// into L2.
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
    fn new(src_len: usize, block_len: usize, in_source_order: bool) -> Lookahead {
        Lookahead {
            blocks: (PREFETCH_BYTES_AHEAD / block_len.max(1)).clamp(2, 16),
            to_l2: !in_source_order && src_len > L2_PREFETCH_MIN_SOURCE_BYTES,
        }
    }

    #[inline]
    fn prefetch(self, block: &[u8]) {
        if self.to_l2 {
            prefetch_items_to_l2(block);
        } else {
            prefetch_items(block);
        }
    }

    /// Ask for the `len` bytes from `first` with one prefetch per 64 bytes
    /// from `first` and one at the last byte, which between them touch
    /// every line the span does. A prefetch never faults, so `first` may be
    /// any address. (In the whole-row loop, W8 into a buffer ran in 1.51
    /// ms with this against 1.68 with [`Lookahead::prefetch`]'s walk over
    /// the lines on one thread, 0.83 against 0.97 on two, interleaved. W1's
    /// source-order loop was as fast with either.)
    #[inline]
    fn prefetch_span(self, first: *const u8, len: usize) {
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
/// (Source order always prefetches into L1; see [`Lookahead::new`].)
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
const SOURCE_ORDER_MIN_SOURCE_BYTES: usize = 48 << 20;

/// Each task's share of the source (its size over the task count) must be
/// above this for source order to pay. W1's 64 MiB source split between
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
fn reads_in_source_order(src_len: usize, block_len: usize, tasks: usize) -> bool {
    src_len >= SOURCE_ORDER_MIN_SOURCE_BYTES
        && src_len / tasks.max(1) > SOURCE_ORDER_MIN_BYTES_PER_TASK
        && block_len >= SOURCE_ORDER_MIN_BLOCK
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
) -> Option<Vec<u64>> {
    if chunk_len % block_len != 0 {
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
    let mut order: Vec<u64> = Vec::new();
    order.try_reserve_exact(slots).ok()?;
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

/// The pieces of a streaming copy of `len` bytes to `dst_address`: `head`
/// bytes up to the first 16-aligned address and the `tail` after the last
/// whole 16 bytes take ordinary stores; `lead` (0 or 16) brings the body to
/// a 32-byte boundary; `wide` bytes (when 32-byte stores are used) follow,
/// then `narrow` bytes of 16-byte stores.
#[derive(Debug, PartialEq, Eq)]
struct StreamPieces {
    head: usize,
    lead: usize,
    wide: usize,
    narrow: usize,
    tail: usize,
}

impl StreamPieces {
    #[inline(always)]
    fn new(dst_address: usize, len: usize, with_wide: bool) -> StreamPieces {
        // Streaming stores need 16-byte aligned destinations (32 for wide).
        let head = (dst_address.wrapping_neg() % 16).min(len);
        let body = (len - head) / 16 * 16;
        let at_32 = dst_address.wrapping_add(head) % 32 == 0;
        let lead = if with_wide && !at_32 { body.min(16) } else { 0 };
        let wide = if with_wide {
            (body - lead) / 32 * 32
        } else {
            0
        };
        let narrow = body - lead - wide;
        StreamPieces {
            head,
            lead,
            wide,
            narrow,
            tail: len - head - body,
        }
    }
}

/// Copy `src` into `dst` (the shorter length of the two) with stores that
/// bypass the cache, 16 bytes at a time (SSE2, the x86-64 baseline;
/// elsewhere a plain copy). Callers must call [`store_fence`] before the
/// written memory is handed to another thread (the end of a parallel task
/// is such a point).
fn copy_nontemporal_16s<B: OutByte>(dst: &mut [B], src: &[u8]) {
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    if !cfg!(target_arch = "x86_64") {
        return copy_plain(dst, src);
    }
    let pieces = StreamPieces::new(dst.as_ptr().addr(), len, false);
    let (dst_head, rest) = dst.split_at_mut(pieces.head);
    let (dst_body, dst_tail) = rest.split_at_mut(pieces.narrow);
    let (src_head, rest) = src.split_at(pieces.head);
    let (src_body, src_tail) = rest.split_at(pieces.narrow);
    copy_plain(dst_head, src_head);
    stream_16s(dst_body, src_body);
    copy_plain(dst_tail, src_tail);
}

/// Proof that the CPU has AVX2 (hence AVX, for 32-byte streaming stores):
/// found once per task instead of per block.
#[derive(Clone, Copy)]
struct Avx(());

impl Avx {
    fn detect() -> Option<Avx> {
        (cfg!(target_arch = "x86_64") && avx2_available()).then_some(Avx(()))
    }

    /// [`copy_in_slot_order`] with [`Avx::copy_nontemporal`] for chunks of
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
        self,
        chunk: &mut [B],
        src: &[u8],
        row_len: usize,
        listed: impl Iterator<Item = usize> + Clone,
        ahead: Lookahead,
    ) -> bool {
        let fits = row_len > 0
            && row_len % 32 == 0
            && chunk.len() % row_len == 0
            && chunk.as_ptr().addr() % 16 == 0;
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

    /// [`copy_nontemporal_16s`] with 32-byte streaming stores (measured on this
    /// Zen 4: a 64 MiB copy of 1 KiB blocks about 1.4x faster than with
    /// 16-byte ones).
    #[inline]
    fn copy_nontemporal<B: OutByte>(self, dst: &mut [B], src: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Avx` exists only where AVX2, hence AVX, was detected.
        unsafe {
            copy_nontemporal_avx(dst, src)
        }
        #[cfg(not(target_arch = "x86_64"))]
        copy_nontemporal_16s(dst, src)
    }
}

/// [`Avx::copy_nontemporal`]: the ordinary copies of the head
/// and tail only when they are not empty (each is a `memcpy` call), and the
/// 32-byte stores inlined.
///
/// # Safety
/// The CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn copy_nontemporal_avx<B: OutByte>(dst: &mut [B], src: &[u8]) {
    let len = dst.len().min(src.len());
    let pieces = StreamPieces::new(dst.as_ptr().addr(), len, true);
    let head = pieces.head;
    if head > 0 {
        copy_plain(&mut dst[..head], &src[..head]);
    }
    let lead_end = head + pieces.lead;
    stream_16s(&mut dst[head..lead_end], &src[head..lead_end]);
    let wide_end = lead_end + pieces.wide;
    // SAFETY: the caller guarantees AVX; the wide part starts 32-aligned
    // (after the head and the lead) and is a multiple of 32 long.
    unsafe { stream_32s(&mut dst[lead_end..wide_end], &src[lead_end..wide_end]) };
    let narrow_end = wide_end + pieces.narrow;
    stream_16s(&mut dst[wide_end..narrow_end], &src[wide_end..narrow_end]);
    if narrow_end < len {
        copy_plain(&mut dst[narrow_end..len], &src[narrow_end..len]);
    }
}

/// [`Avx::copy_rows_in_slot_order`].
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

/// Streaming copy of one row: a 16-byte store when `lead` is 16, 32-byte
/// stores, and a 16-byte store for what is left.
///
/// # Safety
/// The CPU has AVX; `src` is readable and `dst` writable for `len` bytes,
/// not overlapping; `len` is a multiple of 32; `lead` is 0 with `dst`
/// 32-aligned, or 16 with `dst` 16 bytes short of a 32-byte boundary.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn stream_row(dst: *mut u8, src: *const u8, lead: usize, len: usize) {
    // SAFETY (every store): each offset leaves its 16 or 32 bytes inside
    // both rows, at the alignment its store needs, given the caller's
    // `lead`.
    unsafe {
        if lead != 0 {
            stream_16_at(dst, src);
        }
        let mut offset = lead;
        while offset + 32 <= len {
            stream_32_at(dst.add(offset), src.add(offset));
            offset += 32;
        }
        if offset < len {
            stream_16_at(dst.add(offset), src.add(offset));
        }
    }
}

/// One 16-byte streaming store of the 16 bytes at `src` to `dst`.
///
/// # Safety
/// `src` is readable and `dst` writable for 16 bytes, not overlapping;
/// `dst` is 16-aligned.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_16_at(dst: *mut u8, src: *const u8) {
    #[cfg(not(miri))]
    use std::arch::x86_64::_mm_stream_si128;
    use std::arch::x86_64::{__m128i, _mm_loadu_si128};
    // SAFETY: the caller's contract; the load tolerates any alignment. SSE2
    // is part of the x86-64 baseline.
    unsafe {
        let v = _mm_loadu_si128(src.cast::<__m128i>());
        let to = dst.cast::<__m128i>();
        // Miri cannot run `movntdq` (inline assembly); an aligned store
        // has the same preconditions, which Miri then checks.
        #[cfg(not(miri))]
        _mm_stream_si128(to, v);
        #[cfg(miri)]
        to.write(v);
    }
}

/// One 32-byte streaming store of the 32 bytes at `src` to `dst`.
///
/// # Safety
/// The CPU has AVX; `src` is readable and `dst` writable for 32 bytes, not
/// overlapping; `dst` is 32-aligned.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn stream_32_at(dst: *mut u8, src: *const u8) {
    #[cfg(not(miri))]
    use std::arch::x86_64::_mm256_stream_si256;
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256};
    // SAFETY: the caller's contract; the load tolerates any alignment.
    unsafe {
        let v = _mm256_loadu_si256(src.cast::<__m256i>());
        let to = dst.cast::<__m256i>();
        // As in `stream_16_at`: Miri gets an aligned store.
        #[cfg(not(miri))]
        _mm256_stream_si256(to, v);
        #[cfg(miri)]
        to.write(v);
    }
}

/// Streaming copy of 16-byte chunks: `dst` starts 16-aligned and both have
/// the same length, a multiple of 16 (elsewhere than x86-64, a plain copy).
fn stream_16s<B: OutByte>(dst: &mut [B], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for (d, s) in dst.chunks_exact_mut(16).zip(src.chunks_exact(16)) {
        // SAFETY: `s` and `d` are 16-byte slices of live, non-overlapping
        // buffers (a shared and an exclusive borrow); `B` is one byte, so
        // `d` spans 16 bytes, and it starts at a multiple of 16 from the
        // 16-aligned `dst`.
        unsafe { stream_16_at(d.as_mut_ptr().cast(), s.as_ptr()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    copy_plain(dst, src);
}

/// Streaming copy of 32-byte chunks.
///
/// # Safety
/// The CPU has AVX; `dst` starts 32-aligned; both have the same length, a
/// multiple of 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn stream_32s<B: OutByte>(dst: &mut [B], src: &[u8]) {
    for (d, s) in dst.chunks_exact_mut(32).zip(src.chunks_exact(32)) {
        // SAFETY: `s` and `d` are 32-byte slices of live, non-overlapping
        // buffers; `d` starts at a multiple of 32 from the 32-aligned `dst`;
        // the caller guarantees AVX.
        unsafe { stream_32_at(d.as_mut_ptr().cast(), s.as_ptr()) };
    }
}

/// Ordinary copy of `src` into `dst` (same length) for either byte kind.
fn copy_plain<B: OutByte>(dst: &mut [B], src: &[u8]) {
    let len = dst.len().min(src.len());
    // SAFETY: both ranges are `len` bytes inside live slices (`B` is one
    // byte), and a shared and an exclusive borrow cannot overlap.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), len) };
}

fn zero<B: OutByte>(dst: &mut [B]) {
    // SAFETY: `dst` is `dst.len()` bytes of exclusively borrowed memory, and
    // zero is a valid `u8`.
    unsafe { std::ptr::write_bytes(dst.as_mut_ptr().cast::<u8>(), 0, dst.len()) };
}

/// Order this thread's earlier streaming stores before its later
/// stores, so whoever synchronises with it afterwards sees the data.
/// (Miri has no `sfence`; it gets the language-level fence instead.)
pub(crate) fn store_fence() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `sfence` has no operands and no memory-safety preconditions;
    // SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
    #[cfg(miri)]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

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
/// streaming row copy asks for 8 KiB ahead, over a hundred lines; as L1
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
enum CacheLevel {
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
/// be any address: the callers pass addresses inside live values.
#[inline(always)]
fn prefetch_line<const LEVEL: u8>(line: *const i8) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length and alignment around the 16-byte body, including empty,
    /// shorter than one chunk and a head that is the whole slice.
    #[test]
    fn nontemporal_copy_equals_the_source_at_every_offset() {
        // Both copies where the CPU (or, under Miri, the build) has AVX.
        let avx = Avx::detect().map(|avx| move |d: &mut [u8], s: &[u8]| avx.copy_nontemporal(d, s));
        type Copy<'a> = &'a dyn Fn(&mut [u8], &[u8]);
        let mut copies: Vec<(&str, Copy)> = vec![("16-byte", &copy_nontemporal_16s)];
        if let Some(avx) = &avx {
            copies.push(("avx", avx));
        }
        let src: Vec<u8> = (0..200u16).map(|v| (v * 7 + 3) as u8).collect();
        for (name, copy) in copies {
            // Offsets over two 32-byte periods, so the 16-byte lead before
            // the 32-byte stores is both needed and not.
            for dst_offset in 0..40 {
                for src_offset in [0, 1, 5, 16] {
                    for len in [0, 1, 15, 16, 17, 31, 33, 48, 64, 80, 100, 150] {
                        let mut dst = vec![0xAAu8; 240];
                        let s = &src[src_offset..src_offset + len];
                        copy(&mut dst[dst_offset..dst_offset + len], s);
                        store_fence();
                        assert_eq!(
                            &dst[dst_offset..dst_offset + len],
                            s,
                            "{name}: dst +{dst_offset}, src +{src_offset}, {len} bytes"
                        );
                        assert!(
                            dst[..dst_offset].iter().all(|&b| b == 0xAA),
                            "{name}: dst +{dst_offset}, src +{src_offset}, {len} bytes"
                        );
                        assert!(
                            dst[dst_offset + len..].iter().all(|&b| b == 0xAA),
                            "{name}: dst +{dst_offset}, src +{src_offset}, {len} bytes"
                        );
                    }
                }
            }
        }
    }

    /// The pieces of every copy add up to its length, each streamed piece
    /// starts on the alignment its stores need, and only the head and tail
    /// (under 16 bytes each) take ordinary stores.
    #[test]
    fn stream_pieces_cover_the_copy_with_aligned_stores() {
        // Miri interprets every step: a shorter sweep there, still over
        // two 32-byte periods and several wide stores.
        let (addresses, lengths) = if cfg!(miri) { (64, 120) } else { (96, 300) };
        for address in 0..addresses {
            for len in 0..lengths {
                for with_wide in [false, true] {
                    let p = StreamPieces::new(address, len, with_wide);
                    assert_eq!(
                        p.head + p.lead + p.wide + p.narrow + p.tail,
                        len,
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                    assert!(
                        p.head < 16 && p.tail < 16,
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                    let body_start = address + p.head;
                    if p.lead + p.wide + p.narrow > 0 {
                        assert_eq!(
                            body_start % 16,
                            0,
                            "{address} + {len}, wide {with_wide}: {p:?}"
                        );
                    }
                    assert!(
                        p.lead == 0 || p.lead == 16,
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                    assert_eq!(p.wide % 32, 0, "{address} + {len}, wide {with_wide}: {p:?}");
                    if p.wide > 0 {
                        assert_eq!(
                            (body_start + p.lead) % 32,
                            0,
                            "{address} + {len}, wide {with_wide}: {p:?}"
                        );
                    }
                    assert!(
                        p.narrow % 16 == 0 && p.narrow <= if with_wide { 16 } else { len },
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                    if !with_wide {
                        assert_eq!(
                            p.lead + p.wide,
                            0,
                            "{address} + {len}, wide {with_wide}: {p:?}"
                        );
                    }
                    // Ordinary stores only up to the first 16-aligned byte.
                    assert_eq!(
                        p.head,
                        ((16 - address % 16) % 16).min(len),
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn mismatched_lengths_copy_the_shorter() {
        let avx = Avx::detect();
        for wide in [false, true] {
            let copy = |dst: &mut [u8], src: &[u8]| match (wide, avx) {
                (true, Some(avx)) => avx.copy_nontemporal(dst, src),
                _ => copy_nontemporal_16s(dst, src),
            };
            let mut dst = [0u8; 80];
            copy(&mut dst, &[9u8; 50]);
            store_fence();
            assert_eq!(&dst[..50], &[9u8; 50]);
            assert_eq!(&dst[50..], &[0u8; 30]);
            let mut short = [0u8; 50];
            copy(&mut short, &[7u8; 80]);
            store_fence();
            assert_eq!(short, [7u8; 50]);
        }
    }

    /// Slot k holds source block `listed[k]`; the rest is zero.
    fn expected_blocks(src: &[u8], block_len: usize, listed: &[usize], len: usize) -> Vec<u8> {
        let mut expected = vec![0u8; len];
        for (slot, &b) in expected.chunks_mut(block_len).zip(listed) {
            if let Some(from) = src.get(b * block_len..(b + 1) * block_len) {
                if from.len() == slot.len() {
                    slot.copy_from_slice(from);
                }
            }
        }
        expected
    }

    #[test]
    fn fill_blocks_copies_listed_blocks_and_zeroes_the_rest() {
        let src: Vec<u8> = (0..=255u8).cycle().take(40 * 70).collect();
        let listed = [3usize, 0, 39, 3, 1000, 7];
        for block_len in [1, 16, 17, 64, 70] {
            // Fewer slots than listed, as many, more (zeroed), and a partial tail.
            for len in [0, block_len * 3, block_len * 6, block_len * 8 + 5] {
                let mut dst = vec![0xAAu8; len];
                fill_blocks(&mut dst, &src, block_len, |first| {
                    listed.iter().copied().skip(first)
                });
                assert_eq!(
                    dst,
                    expected_blocks(&src, block_len, &listed, len),
                    "{block_len} {len}"
                );
            }
        }
    }

    /// The raw row loop writes what the slot-order copy writes, for rows a
    /// multiple of 32 long from a 32-aligned start and from 16 bytes short
    /// of one, and declines every other chunk without writing.
    #[test]
    fn whole_row_copy_writes_what_slot_order_writes() {
        let Some(avx) = Avx::detect() else {
            // Only a CPU (or, under Miri, a build) without AVX2 gets here.
            assert!(cfg!(miri) || !cfg!(target_arch = "x86_64") || !avx2_available());
            return;
        };
        let src: Vec<u8> = (0..40 * 96).map(|v| (v * 13 % 251) as u8).collect();
        // Out of range (zeroed; 40 is just past the source for 96-byte
        // rows), repeated, and fewer listed than rows.
        let listed = [3usize, 0, 1000, 3, 40, 7];
        let mut backing = vec![0u8; 7 * 512 + 64];
        let aligned_at = backing.as_ptr().addr().wrapping_neg() % 32;
        for row_len in [32, 64, 96, 512] {
            let rows = if cfg!(miri) { 4 } else { 7 };
            let len = rows * row_len;
            let expected = expected_blocks(&src, row_len, &listed, len);
            for (start, fits) in [(0, true), (16, true), (8, false)] {
                for to_l2 in [false, true] {
                    let ahead = Lookahead { blocks: 2, to_l2 };
                    let chunk = &mut backing[aligned_at + start..][..len];
                    chunk.fill(0xAA);
                    let rows = listed.iter().copied();
                    let took = avx.copy_rows_in_slot_order(chunk, &src, row_len, rows, ahead);
                    store_fence();
                    assert_eq!(took, fits, "{row_len} bytes from +{start}");
                    if fits {
                        assert!(chunk == &expected[..], "{row_len} bytes from +{start}");
                    } else {
                        assert!(chunk.iter().all(|&b| b == 0xAA), "{row_len} from +{start}");
                    }
                }
            }
            let partial = &mut backing[aligned_at..][..len - 16];
            let rows = listed.iter().copied();
            assert!(!avx.copy_rows_in_slot_order(
                partial,
                &src,
                row_len,
                rows,
                Lookahead {
                    blocks: 2,
                    to_l2: false
                }
            ));
        }
        let rows = listed.iter().copied();
        assert!(!avx.copy_rows_in_slot_order(
            &mut backing[..48],
            &src,
            48,
            rows,
            Lookahead {
                blocks: 2,
                to_l2: false
            }
        ));
    }

    /// Source order groups slots by the bucket of the block they read and
    /// keeps slot order inside a bucket; copying in that order writes what
    /// slot order writes.
    #[test]
    fn source_order_copies_the_same_blocks_as_slot_order() {
        let block_len = 4;
        // 9000 source blocks: more than 2^12, so buckets hold several blocks.
        let src: Vec<u8> = (0..9000 * block_len)
            .map(|v| (v * 31 % 251) as u8)
            .collect();
        let listed: Vec<usize> = (0..300).map(|k| (k * 7919 + 13) % 9000).collect();
        let order = source_order(listed.iter().copied(), 300 * block_len, 9000, block_len)
            .expect("every slot is listed");
        let shift = (usize::BITS - 9000usize.leading_zeros()) - SOURCE_ORDER_BUCKET_BITS;
        let entries: Vec<(usize, usize)> = order
            .iter()
            .map(|&e| ((e >> 32) as usize, e as u32 as usize))
            .collect();
        let mut slots: Vec<usize> = entries.iter().map(|&(_, slot)| slot).collect();
        slots.sort_unstable();
        assert_eq!(slots, (0..300).collect::<Vec<_>>());
        for pair in entries.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert_eq!(listed[a.1], a.0);
            assert!(a.0 >> shift < b.0 >> shift || (a.0 >> shift == b.0 >> shift && a.1 < b.1));
        }
        let mut dst = vec![0xAAu8; 300 * block_len];
        let ahead = Lookahead {
            blocks: 3,
            to_l2: true,
        };
        copy_in_source_order(
            &mut dst,
            &src,
            block_len,
            &order,
            ahead,
            copy_nontemporal_16s,
        );
        store_fence();
        assert_eq!(dst, expected_blocks(&src, block_len, &listed, dst.len()));
    }

    /// Cases source order does not take, left to the slot-order copy.
    #[test]
    fn source_order_declines_what_it_cannot_order() {
        let listed = [0usize, 5, 2];
        let ok = |chunk_len, src_blocks| {
            source_order(listed.iter().copied(), chunk_len, src_blocks, 8).is_some()
        };
        assert!(ok(24, 6));
        assert!(!ok(20, 6), "a partial slot");
        assert!(!ok(32, 6), "a slot with no listed block");
        assert!(!ok(24, 5), "a block outside the source");
        assert!(!ok(24, 1 << 40), "more source blocks than 32 bits count");
    }

    /// A source large enough for the source-order path, split across
    /// threads when the caller runs in a pool.
    #[test]
    #[cfg_attr(miri, ignore = "64 MiB of source is too slow under Miri")]
    fn fill_blocks_in_source_order_matches_slot_order() {
        let block_len = SOURCE_ORDER_MIN_BLOCK;
        assert!(reads_in_source_order(48 << 20, block_len, 1));
        assert!(!reads_in_source_order(48 << 20, block_len, 2));
        assert!(!reads_in_source_order(48 << 20, 128, 1));
        assert!(reads_in_source_order(64 << 20, 1024, 1), "W1, one thread");
        assert!(!reads_in_source_order(64 << 20, 1024, 2), "W1, two threads");
        assert!(
            !reads_in_source_order(32 << 20, 512, 1),
            "W8's 32 MiB source"
        );
        // Just over two tasks' minimum: source order on one and two tasks.
        let src_blocks = 2 * SOURCE_ORDER_MIN_BYTES_PER_TASK / block_len + 1;
        assert!(reads_in_source_order(src_blocks * block_len, block_len, 2));
        assert!(!reads_in_source_order(src_blocks * block_len, block_len, 3));
        let src: Vec<u8> = (0..src_blocks * block_len)
            .map(|v| (v % 253) as u8)
            .collect();
        let listed: Vec<usize> = (0..40_000)
            .map(|k| (k * 104_729 + 7) % src_blocks)
            .collect();
        let len = listed.len() * block_len;
        let expected = expected_blocks(&src, block_len, &listed, len);
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a small pool");
            let mut dst = vec![0xAAu8; len];
            pool.install(|| {
                fill_blocks(&mut dst, &src, block_len, |first| {
                    listed.iter().copied().skip(first)
                })
            });
            assert!(dst == expected, "{threads} threads");
        }
    }

    #[test]
    fn new_vec_of_blocks_writes_every_byte_of_plain_elements() {
        let src: Vec<u8> = (0..200u8).collect();
        let listed = [2usize, 0, 4, 2];
        let out =
            new_vec_of_blocks::<u32, _>(10, &src, 8, |first| listed.iter().copied().skip(first))
                .expect("plain type");
        let bytes: Vec<u8> = out.iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(bytes, expected_blocks(&src, 8, &listed, 40));
        assert!(new_vec_of_blocks::<String, _>(1, &src, 8, |_| 0..1).is_none());
        assert!(new_vec_of_blocks::<bool, _>(1, &src, 1, |_| 0..1).is_none());
        assert!(new_vec_of_blocks::<u64, _>(usize::MAX / 4, &src, 8, |_| 0..1).is_none());
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

    #[test]
    fn sources_beyond_the_l3_are_prefetched_into_l2_eight_kib_ahead_in_output_order() {
        let w1 = Lookahead::new(64 << 20, 1024, false);
        assert!(w1.to_l2);
        assert_eq!(w1.blocks, 8);
        let w1_by_source = Lookahead::new(64 << 20, 1024, true);
        assert!(!w1_by_source.to_l2);
        assert_eq!(w1_by_source.blocks, 8);
        let w8 = Lookahead::new(32 << 20, 512, false);
        assert!(!w8.to_l2);
        assert_eq!(w8.blocks, 16);
        assert_eq!(Lookahead::new(0, 1 << 20, false).blocks, 2);
        assert_eq!(Lookahead::new(0, 0, true).blocks, 16);
        w1.prefetch(&[1, 2, 3]);
        w8.prefetch(&[]);
    }
}
