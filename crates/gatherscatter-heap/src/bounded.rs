//! [`BoundedHeap`]: the system allocator under a limit on the bytes live.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A global allocator: the system's, refusing (with null) any allocation
/// that would take the bytes live above [`BoundedHeap::limit`]. `gsx`
/// installs it under its memory budget (`--max-memory`).
///
/// A program that allocates its large buffers fallibly (`try_reserve`, as
/// the library does for every output and working buffer) then reports a
/// refusal as an error instead of meeting the kernel's OOM killer; an
/// infallible allocation that is refused aborts, as on any heap.
///
/// ```
/// use gatherscatter_heap::BoundedHeap;
///
/// // In a binary: `#[global_allocator] static HEAP: BoundedHeap = BoundedHeap;`
/// BoundedHeap::set_limit(1 << 30);
/// assert_eq!(BoundedHeap::limit(), 1 << 30);
/// ```
pub struct BoundedHeap;

/// The limit: one for the process, as the heap is.
static LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
/// The bytes handed out through `BoundedHeap` and not yet freed.
static LIVE: AtomicUsize = AtomicUsize::new(0);

impl BoundedHeap {
    /// The most bytes live at once (`u64::MAX`, no limit, at the start).
    pub fn limit() -> u64 {
        LIMIT.load(Ordering::Relaxed)
    }

    /// Set the limit. Blocks live already stay; the next allocation that
    /// would exceed the new limit is refused.
    pub fn set_limit(bytes: u64) {
        LIMIT.store(bytes, Ordering::Relaxed);
    }

    /// Count `size` more bytes if the limit allows them.
    fn admit(size: usize) -> bool {
        let limit = usize::try_from(Self::limit()).unwrap_or(usize::MAX);
        LIVE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
            admitted(live, size, limit)
        })
        .is_ok()
    }

    fn release(size: usize) {
        LIVE.fetch_sub(size, Ordering::Relaxed);
    }

    /// Count `size` bytes, then `allocate` them; a refusal by the limit or
    /// by the system is null, and a system refusal is uncounted again.
    fn counted(size: usize, allocate: impl FnOnce() -> *mut u8) -> *mut u8 {
        if !Self::admit(size) {
            return std::ptr::null_mut();
        }
        let ptr = allocate();
        if ptr.is_null() {
            Self::release(size);
        }
        ptr
    }
}

/// The live total after allocating `size` more, if it stays within `limit`.
fn admitted(live: usize, size: usize, limit: usize) -> Option<usize> {
    live.checked_add(size).filter(|&total| total <= limit)
}

// SAFETY: every method forwards to `System` with the caller's layout and
// pointer unchanged, so `System`'s guarantees hold; the only addition is
// the counter, and a refused request returns null, which `GlobalAlloc`
// allows for any failure.
unsafe impl GlobalAlloc for BoundedHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout goes to System as it came.
        Self::counted(layout.size(), || unsafe { System.alloc(layout) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        Self::counted(layout.size(), || unsafe { System.alloc_zeroed(layout) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, hence from System, with
        // this layout.
        unsafe { System.dealloc(ptr, layout) };
        Self::release(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !Self::admit(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` and `layout` are the caller's, from this allocator.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if moved.is_null() {
            if new_size > old {
                Self::release(new_size - old);
            }
        } else if new_size < old {
            Self::release(old - new_size);
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_admits_up_to_the_limit_and_never_wraps() {
        assert_eq!(admitted(10, 5, 15), Some(15));
        assert_eq!(admitted(10, 6, 15), None);
        assert_eq!(admitted(usize::MAX, 1, usize::MAX), None);
    }

    /// Drives every method of the heap (its only `unsafe` code) through
    /// the system allocator, as Miri checks it, then a refusal by the
    /// limit. The only test here that sets the limit: it is the process's.
    #[test]
    fn the_heap_counts_what_it_hands_out_and_takes_back() {
        let layout = Layout::from_size_align(64, 8).unwrap();
        // SAFETY: a non-zero layout; the pointer is written within it,
        // grown and shrunk with the same layout, and freed once.
        unsafe {
            let p = BoundedHeap.alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(7, 64);
            let q = BoundedHeap.realloc(p, layout, 256);
            assert!(!q.is_null());
            assert_eq!(*q.add(63), 7);
            let big = Layout::from_size_align(256, 8).unwrap();
            let r = BoundedHeap.realloc(q, big, 32);
            assert!(!r.is_null());
            BoundedHeap.dealloc(r, Layout::from_size_align(32, 8).unwrap());
            let z = BoundedHeap.alloc_zeroed(layout);
            assert!(!z.is_null());
            assert_eq!(*z.add(10), 0);
            BoundedHeap.dealloc(z, layout);
            assert_eq!(LIVE.load(Ordering::Relaxed), 0);

            BoundedHeap::set_limit(100);
            let kept = BoundedHeap.alloc(layout);
            assert!(!kept.is_null());
            assert!(BoundedHeap.alloc(layout).is_null(), "128 bytes > 100");
            assert!(BoundedHeap.realloc(kept, layout, 101).is_null());
            BoundedHeap.dealloc(kept, layout);
            BoundedHeap::set_limit(u64::MAX);
        }
    }
}
