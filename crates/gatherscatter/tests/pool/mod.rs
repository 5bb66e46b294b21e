//! Thread-pool helper for the multi-threaded tests (kept out of `common`,
//! which the fuzz crate also includes and which must not need rayon).

/// Runs `f` on a fresh rayon pool of `threads` threads.
pub fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool")
        .install(f)
}
