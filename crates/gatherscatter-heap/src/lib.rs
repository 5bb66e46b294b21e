//! The global allocators of the project's programs; the library itself
//! allocates through whatever allocator its program has.
//!
//! - [`HugePageHeap`] asks the kernel for transparent huge pages under large
//!   blocks, as numpy does for its arrays, so a fresh 64 MiB tensor costs 32
//!   page faults instead of 16,384. `gsx-bench` and the Python extension
//!   install it. Its large blocks start on a cache line. On request
//!   ([`HugePageHeap::keep_freed_blocks`]) it also keeps a few large freed
//!   blocks for the next request of the same layout.
//! - [`BoundedHeap`] refuses allocations above a limit on the bytes live:
//!   `gsx` installs it under its memory budget.
#![deny(unsafe_op_in_unsafe_fn)]

mod bounded;
mod kept;
mod lined;

pub use bounded::BoundedHeap;

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};

use kept::{KeptBlocks, Released};

/// A global allocator: the system allocator, whose blocks of at least
/// 4 MiB start on a 64-byte cache line (see `lined.rs`), plus, once
/// [`HugePageHeap::enable`] is called, a request for transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`) over the whole 2 MiB pages inside every block
/// of at least 4 MiB, made as the allocator hands the block out, before the
/// caller writes it (`calloc` and `realloc` may have written parts already;
/// those pages stay as they were until the kernel merges them). numpy asks
/// the same for its arrays, so the peers' inputs and outputs sit on huge
/// pages.
///
/// glibc's `glibc.malloc.hugetlb=1` alone did not make this hold: it asks
/// when the heap grows, and whether the request took depended on the heap's
/// layout, hence on the program's path and arguments. W8 (a 32 MiB row
/// gather) into a buffer on 2 threads ran at 1.21-1.27 ms with no huge page
/// from `target/release/gsx-bench`, and at 0.75-1.08 ms with 64 MiB of huge
/// pages from a copy of the same binary under `/tmp` (interleaved runs).
/// Streaming stores into 4 KiB pages were the slow part: in a C loop of the
/// same shape (W1's and W8's rows, 1 and 2 threads, page sizes interleaved
/// in one process), a destination on 4 KiB pages took 1.1-1.6x as long as
/// one on 2 MiB pages; the source's page size moved it by -10% to +16%.
///
/// Each large allocation costs one `madvise` call (6 µs under `strace` on
/// W8, whose fresh output takes about 1 ms to write). Elsewhere than Linux
/// the request is not made.
pub struct HugePageHeap {
    enabled: AtomicBool,
    kept: KeptBlocks,
}

/// Blocks from this size on are asked to sit on huge pages (numpy's
/// threshold for its arrays).
const HUGE_PAGE_MIN_BLOCK: usize = 4 << 20;

/// The transparent huge page size of x86-64 and most aarch64 kernels.
const HUGE_PAGE: usize = 2 << 20;

impl HugePageHeap {
    /// A heap that makes no request until enabled.
    pub const fn new() -> HugePageHeap {
        HugePageHeap {
            enabled: AtomicBool::new(false),
            kept: KeptBlocks::new(),
        }
    }

    /// A heap that asks from the start (for a `static` global allocator).
    pub const fn enabled() -> HugePageHeap {
        HugePageHeap {
            enabled: AtomicBool::new(true),
            kept: KeptBlocks::new(),
        }
    }

    /// From now on, ask for huge pages under large blocks.
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// Keep freed blocks of at least 4 MiB, up to `max_bytes` in all (and
    /// at most 8 blocks), and hand each out again for the next request of
    /// exactly its size and alignment; the oldest go back to the system
    /// first. 0 (the start) keeps none and gives back those kept now.
    ///
    /// A program that makes a large fresh result on every call then writes
    /// into memory that is already mapped instead of paying the kernel's
    /// page faults each time. A kept block's old contents stay until the
    /// new owner writes it, as with any `alloc` (`alloc_zeroed` never takes
    /// a kept block).
    ///
    /// ```
    /// use gatherscatter_heap::HugePageHeap;
    /// let heap = HugePageHeap::new();
    /// heap.keep_freed_blocks(256 << 20);
    /// assert_eq!(heap.kept_limit(), 256 << 20);
    /// heap.keep_freed_blocks(0);
    /// assert_eq!(heap.kept_bytes(), 0);
    /// ```
    pub fn keep_freed_blocks(&self, max_bytes: usize) {
        let released = self.kept.set_limit(max_bytes);
        free_all(released);
    }

    /// The bound set by [`HugePageHeap::keep_freed_blocks`].
    pub fn kept_limit(&self) -> usize {
        self.kept.limit()
    }

    /// The bytes of freed blocks kept now.
    pub fn kept_bytes(&self) -> usize {
        self.kept.held()
    }

    /// Ask for huge pages over the whole huge pages inside the `size` bytes
    /// at `block`, when enabled and the block is large enough.
    fn advise(&self, block: *mut u8, size: usize) {
        if block.is_null() || size < HUGE_PAGE_MIN_BLOCK || !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        if let Some((start, len)) = whole_huge_pages(block as usize, size) {
            request_huge_pages(start, len);
        }
    }
}

/// A heap that is not the global allocator (a test's) gives its kept
/// blocks back when it goes.
impl Drop for HugePageHeap {
    fn drop(&mut self) {
        self.keep_freed_blocks(0);
    }
}

impl Default for HugePageHeap {
    fn default() -> HugePageHeap {
        HugePageHeap::new()
    }
}

/// The start and length of the whole huge pages inside `size` bytes at
/// `address`, if there is at least one.
fn whole_huge_pages(address: usize, size: usize) -> Option<(usize, usize)> {
    let start = address.checked_next_multiple_of(HUGE_PAGE)?;
    let end = address.checked_add(size)? / HUGE_PAGE * HUGE_PAGE;
    (end > start).then(|| (start, end - start))
}

/// `madvise(MADV_HUGEPAGE)` over `len` bytes at `start`, both multiples of
/// the huge page size inside one live allocation. A refusal (a kernel
/// without transparent huge pages) leaves ordinary pages, so it is ignored.
#[cfg(all(target_os = "linux", not(miri)))]
fn request_huge_pages(start: usize, len: usize) {
    // SAFETY: the range lies inside a block the system allocator has just
    // handed out and nothing else uses yet; MADV_HUGEPAGE only changes how
    // the kernel backs those pages, never their contents or mapping.
    let _ = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}

/// Miri cannot call the kernel; elsewhere there is no such request.
#[cfg(not(all(target_os = "linux", not(miri))))]
fn request_huge_pages(_start: usize, _len: usize) {}

/// Give blocks let go by the kept set back to the system.
fn free_all(released: Released) {
    for (block, layout) in released.into_iter().flatten() {
        // SAFETY: each was allocated by `lined` with `layout` and freed by
        // its owner (into the kept set, and now out of it, or not kept at
        // all), so nothing else refers to it.
        unsafe { lined::dealloc(block.as_ptr(), layout) }
    }
}

// SAFETY: every method forwards to [`lined`] (the system allocator, large
// blocks starting on a cache line) with the caller's arguments and returns
// what it returned, except that a freed block may be kept and handed out
// again for a request of exactly its layout: it is then a live block of
// that layout owned by no one else, so the new owner may use it and free
// it with that layout. `advise` only reads addresses.
unsafe impl GlobalAlloc for HugePageHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(block) = self.kept.take(layout) {
            return block;
        }
        // SAFETY: forwarded with the caller's guarantees (a non-zero size).
        let block = unsafe { lined::alloc(layout, false) };
        self.advise(block, layout.size());
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let block = unsafe { lined::alloc(layout, true) };
        self.advise(block, layout.size());
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // The test without the lock keeps small frees on the short path.
        if self.kept.may_keep(layout) {
            free_all(self.kept.keep(block, layout));
            return;
        }
        // SAFETY: `block` came from `lined` through this allocator with
        // `layout`, as the caller guarantees.
        unsafe { lined::dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `dealloc`, and the caller guarantees `new_size`.
        let moved = unsafe { lined::realloc(block, layout, new_size) };
        self.advise(moved, new_size);
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_huge_pages_inside_a_block_are_named() {
        let page = HUGE_PAGE;
        assert_eq!(whole_huge_pages(page, 2 * page), Some((page, 2 * page)));
        assert_eq!(
            whole_huge_pages(page + 16, 2 * page),
            Some((2 * page, page))
        );
        assert_eq!(whole_huge_pages(page + 16, 2 * page - 32), None);
        assert_eq!(whole_huge_pages(16, page - 16), None);
        assert_eq!(whole_huge_pages(usize::MAX - 64, 32), None);
        assert_eq!(
            whole_huge_pages(usize::MAX / page * page - page, 4 * page),
            None
        );
    }

    /// Every allocation path of the heap, enabled and not, on blocks below
    /// and above the threshold: the memory is usable, zeroed where asked,
    /// and kept across `realloc`.
    #[test]
    fn the_heap_hands_out_usable_blocks_of_every_size() {
        for enabled in [false, true] {
            let heap = HugePageHeap::new();
            if enabled {
                heap.enable();
            }
            for size in [1, 4096, HUGE_PAGE_MIN_BLOCK, HUGE_PAGE_MIN_BLOCK + 4096 + 3] {
                let layout = Layout::from_size_align(size, 64).unwrap();
                let probes = [0, size / 2, size - 1];
                // SAFETY: a non-zero size; each block is used within its
                // size and freed once with its own layout.
                unsafe {
                    let block = heap.alloc(layout);
                    assert!(!block.is_null() && (block as usize).is_multiple_of(64));
                    for &at in &probes {
                        block.add(at).write(7);
                        assert_eq!(block.add(at).read(), 7);
                    }
                    heap.dealloc(block, layout);

                    let zeroed = heap.alloc_zeroed(layout);
                    assert!(!zeroed.is_null());
                    for &at in &probes {
                        assert_eq!(zeroed.add(at).read(), 0, "size {size}");
                    }
                    zeroed.write(9);
                    let grown_size = size + HUGE_PAGE_MIN_BLOCK;
                    let grown = heap.realloc(zeroed, layout, grown_size);
                    assert!(!grown.is_null());
                    assert_eq!(grown.read(), 9, "size {size}");
                    grown.add(grown_size - 1).write(5);
                    heap.dealloc(grown, Layout::from_size_align(grown_size, 64).unwrap());
                }
            }
        }
    }

    /// Large blocks start on a cache line whatever their type asks, and
    /// keep their bytes when resized across the large-block size both
    /// ways; small blocks keep the alignment asked.
    #[test]
    fn large_blocks_start_on_a_cache_line_and_keep_their_bytes_across_realloc() {
        let heap = HugePageHeap::new();
        heap.enable();
        heap.keep_freed_blocks(64 << 20);
        for align in [1, 2, 16] {
            for round in 0..2 {
                // The second round takes the block kept from the first.
                let (block, layout) = block(&heap, HUGE_PAGE_MIN_BLOCK + 6, align);
                assert_eq!(
                    block as usize % lined::LINE,
                    0,
                    "align {align}, round {round}"
                );
                free(&heap, (block, layout));
            }
            let small = Layout::from_size_align(1000, align).unwrap();
            // SAFETY: a non-zero size; each block is resized with the
            // layout it has and freed once with its last one; every byte
            // read lies inside the block and was written.
            unsafe {
                let block = heap.alloc(small);
                assert!(!block.is_null());
                for k in 0..1000 {
                    block.add(k).write(k as u8);
                }
                let grown = heap.realloc(block, small, HUGE_PAGE_MIN_BLOCK);
                assert!(!grown.is_null() && (grown as usize).is_multiple_of(lined::LINE));
                let grown_layout = Layout::from_size_align(HUGE_PAGE_MIN_BLOCK, align).unwrap();
                // Large to larger: the bytes move with the block, whatever
                // line boundary the moved block has.
                let larger = heap.realloc(grown, grown_layout, 3 * HUGE_PAGE_MIN_BLOCK + 5);
                assert!(!larger.is_null() && (larger as usize).is_multiple_of(lined::LINE));
                for k in 0..1000 {
                    assert_eq!(larger.add(k).read(), k as u8);
                }
                let larger_layout =
                    Layout::from_size_align(3 * HUGE_PAGE_MIN_BLOCK + 5, align).unwrap();
                let shrunk = heap.realloc(larger, larger_layout, 999);
                assert!(!shrunk.is_null());
                for k in 0..999 {
                    assert_eq!(shrunk.add(k).read(), k as u8);
                }
                heap.dealloc(shrunk, Layout::from_size_align(999, align).unwrap());
            }
        }
    }

    /// Allocate `size` bytes aligned to `align` from `heap` and write its
    /// first and last byte.
    fn block(heap: &HugePageHeap, size: usize, align: usize) -> (*mut u8, Layout) {
        let layout = Layout::from_size_align(size, align).unwrap();
        // SAFETY: a non-zero size; the caller frees it with `layout`.
        let block = unsafe { heap.alloc(layout) };
        assert!(!block.is_null());
        // SAFETY: both bytes lie inside the block.
        unsafe {
            block.write(1);
            block.add(size - 1).write(2);
        }
        (block, layout)
    }

    fn free(heap: &HugePageHeap, (block, layout): (*mut u8, Layout)) {
        // SAFETY: `block` came from `heap.alloc(layout)` and is freed once.
        unsafe { heap.dealloc(block, layout) }
    }

    #[test]
    fn a_freed_large_block_comes_back_for_its_own_layout_only() {
        let heap = HugePageHeap::new();
        let large = 5 << 20;
        heap.keep_freed_blocks(64 << 20);
        let first = block(&heap, large, 64);
        let address = first.0;
        free(&heap, first);
        assert_eq!(heap.kept_bytes(), large);

        let other_size = block(&heap, large + 64, 64);
        let other_align = block(&heap, large, 128);
        assert_eq!(heap.kept_bytes(), large, "no other layout takes it");
        let again = block(&heap, large, 64);
        assert_eq!(again.0, address);
        assert_eq!(heap.kept_bytes(), 0);
        for taken in [other_size, other_align, again] {
            free(&heap, taken);
        }
        assert_eq!(heap.kept_bytes(), 3 * large + 64);
    }

    #[test]
    fn small_blocks_and_blocks_over_the_limit_are_not_kept() {
        let heap = HugePageHeap::new();
        heap.keep_freed_blocks(8 << 20);
        free(&heap, block(&heap, 4096, 8));
        free(&heap, block(&heap, kept::KEEP_MIN_BLOCK - 1, 8));
        free(&heap, block(&heap, 9 << 20, 8));
        assert_eq!(heap.kept_bytes(), 0);
        let off = HugePageHeap::new();
        free(&off, block(&off, 5 << 20, 8));
        assert_eq!(off.kept_bytes(), 0, "nothing is kept until asked");
    }

    #[test]
    fn the_kept_bytes_and_blocks_stay_bounded_and_the_oldest_go_first() {
        let heap = HugePageHeap::new();
        let size = kept::KEEP_MIN_BLOCK;
        heap.keep_freed_blocks(3 * size);
        let blocks: Vec<_> = (0..4).map(|_| block(&heap, size, 64)).collect();
        let addresses: Vec<_> = blocks.iter().map(|b| b.0).collect();
        for b in blocks {
            free(&heap, b);
            assert!(heap.kept_bytes() <= 3 * size);
        }
        assert_eq!(heap.kept_bytes(), 3 * size);
        let back: Vec<_> = (0..3).map(|_| block(&heap, size, 64)).collect();
        let mut back_addresses: Vec<_> = back.iter().map(|b| b.0).collect();
        back_addresses.sort();
        let mut newest = addresses[1..].to_vec();
        newest.sort();
        assert_eq!(back_addresses, newest, "the first freed went back");
        for b in back {
            free(&heap, b);
        }

        heap.keep_freed_blocks(usize::MAX);
        let many: Vec<_> = (0..kept::SLOTS + 2)
            .map(|_| block(&heap, size, 64))
            .collect();
        for b in many {
            free(&heap, b);
        }
        assert_eq!(heap.kept_bytes(), kept::SLOTS * size);
        heap.keep_freed_blocks(size);
        assert_eq!(heap.kept_bytes(), size, "a lower limit lets blocks go");
        heap.keep_freed_blocks(0);
        assert_eq!(heap.kept_bytes(), 0);
    }

    /// On Linux with transparent huge pages, an enabled heap's large block
    /// lies in a mapping the kernel has marked for them (`hg` in
    /// `/proc/self/smaps`), whatever the heap's layout.
    #[test]
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "Miri cannot call madvise or read /proc")]
    fn large_blocks_are_marked_for_huge_pages() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        if thp.map_or(true, |mode| mode.contains("[never]")) {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        let heap = HugePageHeap::new();
        heap.enable();
        let layout = Layout::from_size_align(4 * HUGE_PAGE, 64).unwrap();
        // SAFETY: a non-zero size, freed once below with the same layout.
        let block = unsafe { heap.alloc(layout) };
        assert!(!block.is_null());
        let (start, _) = whole_huge_pages(block as usize, layout.size()).unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let flags = vm_flags_of(&smaps, start).expect("the block's mapping");
        // SAFETY: as above.
        unsafe { heap.dealloc(block, layout) };
        assert!(
            flags.split_whitespace().any(|f| f == "hg"),
            "VmFlags: {flags}"
        );
    }

    /// The `VmFlags` line of the mapping in `smaps` that holds `address`.
    fn vm_flags_of(smaps: &str, address: usize) -> Option<&str> {
        let mut inside = false;
        for line in smaps.lines() {
            let range = line
                .split_whitespace()
                .next()
                .and_then(|r| r.split_once('-'));
            let bounds = range.and_then(|(a, b)| {
                Some((
                    usize::from_str_radix(a, 16).ok()?,
                    usize::from_str_radix(b, 16).ok()?,
                ))
            });
            if let Some((from, to)) = bounds {
                inside = (from..to).contains(&address);
            } else if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags);
                }
            }
        }
        None
    }
}
