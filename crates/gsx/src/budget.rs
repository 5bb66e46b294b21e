//! The memory budget: the most memory that anything a file claims may make
//! `gsx` allocate, and the bound its heap keeps to.
//!
//! The budget is `--max-memory SIZE` when given, else the machine's total
//! memory (`MemTotal` of `/proc/meminfo`; unbounded where that cannot be
//! read). It is applied twice:
//! - **before allocating**, by the readers: a `.npy` whose decoded tensor,
//!   or a `.pb`/`.onnx` file whose bytes, would exceed it is refused with
//!   `error[out_of_memory]`, naming the file, the size and the budget;
//! - **by the heap** of the `gsx` binary ([`BudgetHeap`]): an allocation
//!   that would take the live total above the budget fails, which the
//!   library reports as `out_of_memory` for every output and working buffer
//!   (they are all allocated fallibly). So a model whose outputs grow
//!   without end stops with an error, never with the kernel's OOM killer.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::error::CliError;

static BUDGET: AtomicU64 = AtomicU64::new(u64::MAX);

/// The budget in force, in bytes.
pub fn budget() -> u64 {
    BUDGET.load(Ordering::Relaxed)
}

/// Set the budget (from `--max-memory`, or [`default_budget`]).
pub fn set_budget(bytes: u64) {
    BUDGET.store(bytes, Ordering::Relaxed);
}

/// The machine's total memory, or `u64::MAX` where it cannot be read.
pub fn default_budget() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text))
        .unwrap_or(u64::MAX)
}

/// `MemTotal` in bytes from the text of `/proc/meminfo`.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Parse a size: a whole number of bytes with an optional binary suffix
/// `K`, `M`, `G` or `T` (powers of 1024; `KiB`, `MB`, ... are read alike).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 512M, 4G, 1048576)"))?;
    let shift = match suffix.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(format!("{text:?}: the suffix must be K, M, G or T")),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{text:?} does not fit in 64 bits"))
}

/// An `out_of_memory` error for `what`, which needs `bytes`.
pub fn over_budget(what: String, bytes: u128) -> CliError {
    CliError::out_of_memory(format!(
        "{what} needs {bytes} bytes, over the memory budget of {} bytes (--max-memory)",
        budget()
    ))
}

/// Refuse `bytes` for `what` when they exceed the budget.
pub fn check(what: impl FnOnce() -> String, bytes: u128) -> Result<(), CliError> {
    if bytes > u128::from(budget()) {
        return Err(over_budget(what(), bytes));
    }
    Ok(())
}

/// The global allocator of `gsx`: the system's, refusing any allocation
/// that would take the bytes live above [`budget`].
///
/// Every large allocation in `gsx` and the library is fallible
/// (`try_reserve`), so a refusal becomes an `out_of_memory` error; the
/// small infallible ones (names, messages) never come near the budget.
pub struct BudgetHeap;

static LIVE: AtomicUsize = AtomicUsize::new(0);

impl BudgetHeap {
    /// Count `size` more bytes if the budget allows them.
    fn admit(size: usize) -> bool {
        let limit = usize::try_from(budget()).unwrap_or(usize::MAX);
        LIVE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
            admitted(live, size, limit)
        })
        .is_ok()
    }

    fn release(size: usize) {
        LIVE.fetch_sub(size, Ordering::Relaxed);
    }

    /// Count `size` bytes, then `allocate` them; a refusal by the budget or
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
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for BudgetHeap {
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
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("2gib"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert!(parse_size("").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("4X").is_err());
        assert!(parse_size("16777216T").is_err(), "2^64 does not fit");
    }

    #[test]
    fn the_heap_admits_up_to_the_limit_and_never_wraps() {
        assert_eq!(admitted(10, 5, 15), Some(15));
        assert_eq!(admitted(10, 6, 15), None);
        assert_eq!(admitted(usize::MAX, 1, usize::MAX), None);
    }

    /// Drives every method of the heap (its only `unsafe` code) through
    /// the system allocator, as Miri checks it.
    #[test]
    #[allow(unsafe_code)]
    fn the_heap_counts_what_it_hands_out_and_takes_back() {
        let layout = Layout::from_size_align(64, 8).unwrap();
        // SAFETY: a non-zero layout; the pointer is written within it,
        // grown and shrunk with the same layout, and freed once.
        unsafe {
            let p = BudgetHeap.alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(7, 64);
            let q = BudgetHeap.realloc(p, layout, 256);
            assert!(!q.is_null());
            assert_eq!(*q.add(63), 7);
            let big = Layout::from_size_align(256, 8).unwrap();
            let r = BudgetHeap.realloc(q, big, 32);
            assert!(!r.is_null());
            BudgetHeap.dealloc(r, Layout::from_size_align(32, 8).unwrap());
            let z = BudgetHeap.alloc_zeroed(layout);
            assert!(!z.is_null());
            assert_eq!(*z.add(10), 0);
            BudgetHeap.dealloc(z, layout);
        }
    }

    #[test]
    fn mem_total_is_read_in_kib() {
        let text = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(text), Some(24_576_000 * 1024));
        assert_eq!(mem_total("MemFree: 3 kB\n"), None);
    }
}
