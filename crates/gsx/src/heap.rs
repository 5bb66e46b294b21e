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
//! Any program embedding the library can set the same variable.

/// Freed blocks stay in the one heap for the next call.
pub const REUSE_TUNABLES: &str =
    "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296:glibc.malloc.arena_max=1";

/// [`REUSE_TUNABLES`] plus huge pages. `gsx-bench` uses these; `gsx` does
/// not, because huge pages round its one-shot peak memory up by as much as
/// 2 MiB (W1: 134.97 MiB against 133.2 MiB), past the 5% budget over
/// inputs + output, while its `--repeat` timings gain nothing measurable
/// once outputs are reused.
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
            tunables_to_set(None, REUSE_TUNABLES).as_deref(),
            Some(REUSE_TUNABLES)
        );
        assert_eq!(
            tunables_to_set(Some(""), REUSE_TUNABLES).as_deref(),
            Some(REUSE_TUNABLES)
        );
        let mine = "glibc.malloc.tcache_count=0";
        let both = tunables_to_set(Some(mine), REUSE_TUNABLES).unwrap();
        assert_eq!(both, format!("{mine}:{REUSE_TUNABLES}"));
        assert_eq!(tunables_to_set(Some(&both), REUSE_TUNABLES), None);
        assert!(HUGE_PAGE_TUNABLES.ends_with(REUSE_TUNABLES));
    }
}
