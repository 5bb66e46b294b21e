//! Heap settings for `--repeat`: keep freed outputs for the next call.
//!
//! With glibc's defaults every block over 32 MiB is a fresh `mmap`, unmapped
//! when freed, so each timed call that returns a large fresh output would
//! fault all its pages in again and time the kernel's page faults instead
//! of the op (W1, `gsx gather --repeat 15 --threads 1`: 48.3 ms per call
//! against 9.8 ms with reuse). onnxruntime's arena and torch's caching
//! allocator keep such blocks, so the timing loop does too. A one-shot
//! command keeps glibc's defaults.

/// Ask glibc to serve large blocks from its one main heap and keep freed
/// memory for reuse. Call before the thread pool starts: a thread that has
/// allocated keeps its own arena, which serves large blocks by `mmap`.
/// Does nothing elsewhere than Linux with glibc.
pub fn keep_freed_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes glibc's allocation thresholds for later
    // calls; it takes plain integers and touches no memory of ours.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}
