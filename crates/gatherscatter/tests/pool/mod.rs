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

/// `run` fails on pools of 1, 2 and 3 threads, naming the first bad index
/// in row-major order (`value` at `position`) whichever task met one first.
#[allow(dead_code)]
pub fn names_the_first_bad_index_on_any_pool(
    run: impl Fn() -> Result<gatherscatter::Tensor, gatherscatter::Error> + Send + Sync,
    value: i128,
    position: &[usize],
) {
    for threads in [1, 2, 3] {
        let err = in_pool(threads, &run).unwrap_err();
        let gatherscatter::Error::IndexOutOfRange {
            value: named,
            position: at,
            ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!((named, &at[..]), (value, position), "{threads} threads");
    }
}
