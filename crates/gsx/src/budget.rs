//! The memory budget: the most memory that anything a file claims may make
//! `gsx` allocate, and the bound its heap keeps to.
//!
//! The budget is `--max-memory SIZE` when given, else the machine's total
//! memory (`MemTotal` of `/proc/meminfo`; unbounded where that cannot be
//! read). It is applied twice:
//! - **before allocating**, by the readers: a `.npy` whose decoded tensor,
//!   or a `.pb`/`.onnx` file whose bytes, would exceed it is refused with
//!   `error[out_of_memory]`, naming the file, the size and the budget;
//! - **by the heap** of the `gsx` binary (`gatherscatter_heap::BoundedHeap`,
//!   whose limit is the budget): an allocation that would take the live
//!   total above the budget fails, which the library reports as
//!   `out_of_memory` for every output and working buffer (they are all
//!   allocated fallibly). So a model whose outputs grow without end stops
//!   with an error, never with the kernel's OOM killer.

use gatherscatter_heap::BoundedHeap;

use crate::error::CliError;

/// The budget in force, in bytes: the limit of `BoundedHeap`, whether or
/// not the program installed it (the readers check against it either way).
pub fn budget() -> u64 {
    BoundedHeap::limit()
}

/// Set the budget (from `--max-memory`, or [`default_budget`]).
pub fn set_budget(bytes: u64) {
    BoundedHeap::set_limit(bytes);
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
    fn mem_total_is_read_in_kib() {
        let text = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(text), Some(24_576_000 * 1024));
        assert_eq!(mem_total("MemFree: 3 kB\n"), None);
    }
}
