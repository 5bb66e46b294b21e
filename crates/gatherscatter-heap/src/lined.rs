//! The system allocator, with blocks of at least [`LINED_MIN_BLOCK`] that
//! start on a cache line (64 bytes) whatever alignment their type asks
//! for.
//!
//! glibc's blocks start 16 bytes past a line, and rows written at random
//! with streaming stores into an output that does not start on a line pay
//! for a partial line at each end of every row: on an Intel Xeon family 6
//! model 167 a Gather of float16 rows of 512 B from a 32 MiB source in
//! source order took 2.56-2.74 ms into an output on a line and 3.68-3.84
//! into one 16 or 48 bytes past it (`gsx-bench`, W8, one thread). The
//! library times the two cases apart; this makes every large fresh output
//! the faster one.
//!
//! Asking `System` for the alignment instead sends glibc through
//! `memalign`, which did not reuse the freed block of the call before: W8
//! fresh then faulted a new 32 MiB in on every call (50-100 ms a call
//! against 3). So a large block is an ordinary `malloc` block one line
//! longer, handed out from its first line boundary past the start; the
//! byte just before holds how far that is, for the way back.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks from this size on start on a line: those [`super::HugePageHeap`]
/// asks huge pages for.
pub(crate) const LINED_MIN_BLOCK: usize = super::HUGE_PAGE_MIN_BLOCK;

/// A cache line of x86-64 and most aarch64 cores.
pub(crate) const LINE: usize = 64;

/// The alignment of the underlying `malloc` blocks: one every target's
/// `System` serves with plain `malloc`.
const BASE_ALIGN: usize = 8;

/// Whether blocks of `layout` are lined: large, and asking for less than
/// a line (larger alignments go to `System` as asked).
fn lined(layout: Layout) -> bool {
    layout.size() >= LINED_MIN_BLOCK && layout.align() < LINE
}

/// The `malloc` block under a lined block of `size` bytes.
fn base(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(LINE)?, BASE_ALIGN).ok()
}

/// How far past `base` its first line boundary is (1 to [`LINE`]), where
/// the lined block inside a `malloc` block at `base` starts.
fn line_offset(base: *mut u8) -> usize {
    LINE - base.addr() % LINE
}

/// The lined block inside the `malloc` block at `base`, its offset noted
/// in the byte before it.
///
/// # Safety
/// `base` is a live block at least [`LINE`] bytes longer than the lined
/// block.
unsafe fn hand_out(base: *mut u8) -> *mut u8 {
    let offset = line_offset(base);
    // SAFETY: `offset` is 1..=64, inside the block; the byte before the
    // returned start is at `offset - 1 >= 0`.
    unsafe {
        let block = base.add(offset);
        block.sub(1).write(offset as u8);
        block
    }
}

/// The `malloc` block a lined block was handed out from.
///
/// # Safety
/// `block` came from [`hand_out`] and is live.
unsafe fn base_of(block: *mut u8) -> *mut u8 {
    // SAFETY: `hand_out` wrote the offset into the byte before `block`,
    // inside the same `malloc` block, and the lined block's owner never
    // writes outside it.
    unsafe { block.sub(usize::from(block.sub(1).read())) }
}

/// `System.alloc`, or its `alloc_zeroed` when `zeroed`, lined.
///
/// # Safety
/// As `GlobalAlloc::alloc`: `layout` has a non-zero size.
pub(crate) unsafe fn alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    let base = match base(layout.size()) {
        Some(base) if lined(layout) => base,
        // SAFETY: the caller's guarantees, forwarded.
        _ if zeroed => return unsafe { System.alloc_zeroed(layout) },
        // SAFETY: as above.
        _ => return unsafe { System.alloc(layout) },
    };
    // SAFETY: a non-zero size.
    let block = unsafe {
        if zeroed {
            System.alloc_zeroed(base)
        } else {
            System.alloc(base)
        }
    };
    if block.is_null() {
        return block;
    }
    // SAFETY: a live block a line longer than the caller's.
    unsafe { hand_out(block) }
}

/// `System.dealloc` of a block from [`alloc`] or [`realloc`].
///
/// # Safety
/// As `GlobalAlloc::dealloc`: `block` came from this module with `layout`.
pub(crate) unsafe fn dealloc(block: *mut u8, layout: Layout) {
    match base(layout.size()) {
        // SAFETY: a lined block of this size came from `hand_out` inside
        // a `malloc` block of `base`.
        Some(base) if lined(layout) => unsafe { System.dealloc(base_of(block), base) },
        // SAFETY: the caller's guarantees, forwarded.
        _ => unsafe { System.dealloc(block, layout) },
    }
}

/// `System.realloc`, lined: the bytes up to the shorter length are kept.
///
/// # Safety
/// As `GlobalAlloc::realloc`: `block` came from this module with
/// `layout`, `new_size` is non-zero and does not overflow `isize` when
/// rounded to `layout.align()`.
pub(crate) unsafe fn realloc(block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: the caller's guarantee on `new_size`.
    let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
    match (
        lined(layout),
        lined(new),
        base(layout.size()),
        base(new_size),
    ) {
        // SAFETY: the caller's guarantees, forwarded.
        (false, false, _, _) => unsafe { System.realloc(block, layout, new_size) },
        (true, true, Some(old_base), Some(new_base)) => {
            // SAFETY: the block is lined, so its base came from `malloc`
            // with `old_base`; `new_base` is a non-zero size.
            unsafe {
                let old = base_of(block);
                let old_offset = block.offset_from(old) as usize;
                let moved = System.realloc(old, old_base, new_base.size());
                if moved.is_null() {
                    return moved;
                }
                // The bytes sit at the old offset inside the moved block;
                // the new line boundary may be elsewhere.
                let kept = layout.size().min(new_size);
                let lined = moved.add(line_offset(moved));
                std::ptr::copy(moved.add(old_offset), lined, kept);
                hand_out(moved)
            }
        }
        _ => {
            // Into or out of the lined sizes: a new block and a copy.
            // SAFETY: a non-zero size; both blocks are live and distinct,
            // each at least `kept` long; the old one came from here.
            unsafe {
                let moved = alloc(new, false);
                if !moved.is_null() {
                    std::ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                    dealloc(block, layout);
                }
                moved
            }
        }
    }
}
