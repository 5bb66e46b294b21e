//! glibc heap settings for large tensors, applied by re-executing the
//! program (glibc reads `GLIBC_TUNABLES` only at start-up):
//! - `glibc.malloc.hugetlb=1`: transparent huge pages on large blocks (as
//!   numpy asks for its arrays), so a fresh 64 MiB output costs 32 page
//!   faults instead of 16,384;
//! - `glibc.malloc.mmap_max=0`, `glibc.malloc.trim_threshold=4294967296`
//!   and `glibc.malloc.arena_max=1`: a freed output stays in the one heap and
//!   the next call reuses it instead of faulting fresh pages in again, as
//!   onnxruntime's arena and torch's caching do. (Without these, every
//!   fresh output over 32 MiB is a new `mmap`, whose page faults cost more
//!   than the gather itself on this machine.)
//!
//! Any program embedding the library can set the same variable (see
//! docs/performance.md, "Heap settings for embedders"). Large blocks are
//! also asked to sit on huge pages by [`HugePageHeap`] (crate
//! `gatherscatter-heap`), which `gsx-bench` installs as its global allocator.

pub use gatherscatter_heap::HugePageHeap;

/// glibc's own huge-page request, and freed blocks kept in the one heap
/// for the next call. (`gsx` runs on the default heap: huge pages round
/// its one-shot peak memory up by as much as 2 MiB, and a one-shot command
/// reuses nothing.)
pub const HUGE_PAGE_TUNABLES: &str = "glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:\
glibc.malloc.trim_threshold=4294967296:glibc.malloc.arena_max=1";

/// Re-run this program with `tunables` added to `GLIBC_TUNABLES`. Returns
/// without doing anything when `system_malloc` is set, the tunables are
/// already in place, or the target is not Linux with glibc; returns after a
/// note on stderr if the re-execution fails.
pub fn reexec_with_tunables(tunables: &str, system_malloc: bool) {
    if system_malloc || !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let Some(value) = tunables_to_set(std::env::var("GLIBC_TUNABLES").ok().as_deref(), tunables)
    else {
        return;
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        if let Ok(exe) = std::env::current_exe() {
            let error = std::process::Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env("GLIBC_TUNABLES", value)
                .exec();
            eprintln!("note: running with glibc's default heap settings ({error})");
        }
    }
}

/// The `GLIBC_TUNABLES` value that adds `wanted` to `current`, or `None`
/// when `current` already has it (so a re-executed program stops there).
fn tunables_to_set(current: Option<&str>, wanted: &str) -> Option<String> {
    match current {
        Some(v) if v.contains(wanted) => None,
        Some(v) if !v.is_empty() => Some(format!("{v}:{wanted}")),
        _ => Some(wanted.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunables_are_added_once_and_keep_the_callers_own() {
        assert_eq!(
            tunables_to_set(None, HUGE_PAGE_TUNABLES).as_deref(),
            Some(HUGE_PAGE_TUNABLES)
        );
        assert_eq!(
            tunables_to_set(Some(""), HUGE_PAGE_TUNABLES).as_deref(),
            Some(HUGE_PAGE_TUNABLES)
        );
        let mine = "glibc.malloc.tcache_count=0";
        let both = tunables_to_set(Some(mine), HUGE_PAGE_TUNABLES).unwrap();
        assert_eq!(both, format!("{mine}:{HUGE_PAGE_TUNABLES}"));
        assert_eq!(tunables_to_set(Some(&both), HUGE_PAGE_TUNABLES), None);
    }
}
