//! When and how the kernels use threads.
//!
//! Ops run on the rayon pool they are called from, so a caller picks the
//! thread count with `rayon::ThreadPool::install` (gsx's `--threads` does
//! that), or keeps them on its own thread with [`on_calling_thread`]. Work
//! is split into contiguous ranges of the output, so each element is
//! written by exactly one task and results never depend on the count.

use std::cell::Cell;

use rayon::prelude::*;

thread_local! {
    /// Set while [`on_calling_thread`] runs: every call made meanwhile on
    /// this thread takes one task.
    static ON_CALLING_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with every op it calls on this thread kept on this thread: each
/// call takes one task and hands nothing to a rayon pool. For callers that
/// want one thread without a one-thread pool, whose hand-off costs each
/// call a wake-up and, when its worker runs on another core than the
/// caller, the caller's cached inputs (the Python package's `threads=1`:
/// a 1 MiB gather from Python took 57 us through a one-thread pool, 26
/// inside it).
///
/// ```
/// use gatherscatter::{on_calling_thread, Gather, TypedTensor};
///
/// let data = TypedTensor::new(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap();
/// let indices = TypedTensor::new(vec![2], vec![2i64, 0]).unwrap();
/// let out = on_calling_thread(|| Gather::new(0).run_typed(data.view(), indices.view()));
/// assert_eq!(out.unwrap().data(), &[3.0, 1.0]);
/// ```
pub fn on_calling_thread<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the flag back as it was, also when `f` unwinds.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ON_CALLING_THREAD.with(|flag| flag.set(self.0));
        }
    }
    let _restore = Restore(ON_CALLING_THREAD.with(|flag| flag.replace(true)));
    f()
}

/// Below this many output bytes a call stays on the calling thread: waking
/// the pool costs more than the copy. Measured with
/// `scripts/bench_linearity.py`: at 256 KiB two threads break even with one
/// (into a buffer), from 512 KiB on they pay.
pub(crate) const PARALLEL_MIN_BYTES: usize = 1 << 18;

/// How many tasks to split `units` independent pieces of work, writing
/// `out_bytes` in total, into: 1 for small outputs or a one-thread pool,
/// else a few per thread so uneven ranges balance.
pub(crate) fn tasks(out_bytes: usize, units: usize) -> usize {
    // Small calls never ask rayon anything: that would start the global pool.
    if out_bytes < PARALLEL_MIN_BYTES || ON_CALLING_THREAD.with(Cell::get) {
        return 1;
    }
    let threads = rayon::current_num_threads();
    if threads <= 1 {
        1
    } else {
        (threads * 4).min(units).max(1)
    }
}

/// Like [`tasks`], but at most one task per thread: for kernels where each
/// task repeats a walk over all the input (ScatterND's tuples).
pub(crate) fn one_task_per_thread(out_bytes: usize, units: usize) -> usize {
    match tasks(out_bytes, units) {
        1 => 1,
        many => many.min(rayon::current_num_threads()),
    }
}

/// `out` (empty, with room for `src.len()` values) filled with `f` of each
/// of `src`, in order: on the calling thread for small inputs, else in a
/// few tasks per thread (a whole-tensor widening of indices had run on one
/// thread before every scatter's kernel).
pub(crate) fn map_into<S: Sync, D: Send>(
    src: &[S],
    out: &mut Vec<D>,
    f: impl Fn(&S) -> D + Sync + Send,
) {
    let bytes = std::mem::size_of_val(src) + src.len() * std::mem::size_of::<D>();
    match tasks(bytes, src.len()) {
        1 => out.extend(src.iter().map(f)),
        many => src
            .par_iter()
            .with_min_len(src.len().div_ceil(many))
            .map(f)
            .collect_into_vec(out),
    }
}

/// Run `f(task, chunk)` over `out` cut into chunks of `chunk_len` (the last
/// may be shorter): inline if there is a single chunk, else on the pool.
pub(crate) fn for_each_chunk<W: Send>(
    out: &mut [W],
    chunk_len: usize,
    f: impl Fn(usize, &mut [W]) + Sync + Send,
) {
    let Ok(()) = try_for_each_chunk(out, chunk_len, |task, chunk| {
        f(task, chunk);
        Ok::<(), std::convert::Infallible>(())
    });
}

/// [`for_each_chunk`] for a fallible `f`: stops early and returns one of
/// the errors (which one is up to the scheduler; callers that report the
/// first bad input in order resolve that themselves).
pub(crate) fn try_for_each_chunk<W: Send, E: Send>(
    out: &mut [W],
    chunk_len: usize,
    f: impl Fn(usize, &mut [W]) -> Result<(), E> + Sync + Send,
) -> Result<(), E> {
    try_for_each_chunk_of(out, chunk_len, &f)
}

/// One task of [`try_for_each_chunk_of`]: `(task, chunk) -> Result`.
type ChunkTask<'f, W, E> = dyn Fn(usize, &mut [W]) -> Result<(), E> + Sync + 'f;

/// [`try_for_each_chunk`] behind a `dyn` task: rayon's splitting code is
/// compiled once per element and error type instead of once per kernel
/// closure (each dtype, reduction and output kind), which had made it the
/// largest part of a `gsx` binary. A task is a whole chunk, so the indirect
/// call costs nothing measurable.
fn try_for_each_chunk_of<W: Send, E: Send>(
    out: &mut [W],
    chunk_len: usize,
    f: &ChunkTask<'_, W, E>,
) -> Result<(), E> {
    let chunk_len = chunk_len.max(1);
    if out.len() <= chunk_len {
        f(0, out)
    } else {
        out.par_chunks_mut(chunk_len)
            .enumerate()
            .try_for_each(|(task, chunk)| f(task, chunk))
    }
}

/// Run `f(task, list)` on each of `lists` (say, the piece lists of
/// [`column_pieces`]): inline if there is at most one, else on the pool.
/// Stops early and returns one of the errors, as [`try_for_each_chunk`].
pub(crate) fn try_for_each_list<P: Send, E: Send>(
    lists: Vec<P>,
    f: impl Fn(usize, P) -> Result<(), E> + Sync + Send,
) -> Result<(), E> {
    try_for_each_list_of(lists, &f)
}

/// [`try_for_each_list`] behind a `dyn` task, for the reason given at
/// [`try_for_each_chunk_of`].
fn try_for_each_list_of<P: Send, E: Send>(
    lists: Vec<P>,
    f: &(dyn Fn(usize, P) -> Result<(), E> + Sync),
) -> Result<(), E> {
    if lists.len() <= 1 {
        // Small calls never ask rayon anything.
        return lists
            .into_iter()
            .enumerate()
            .try_for_each(|(t, list)| f(t, list));
    }
    lists
        .into_par_iter()
        .enumerate()
        .try_for_each(|(t, list)| f(t, list))
}

/// Cut every row (`row_len` elements) of `out` at `cuts` (from 0 to
/// `row_len`, ascending): piece list `t` holds columns `cuts[t]..cuts[t + 1]`
/// of each row, so tasks that own column ranges get disjoint `&mut` pieces.
pub(crate) fn column_pieces<'a, W>(
    out: &'a mut [W],
    row_len: usize,
    cuts: &[usize],
) -> Vec<Vec<&'a mut [W]>> {
    let tasks = cuts.len().saturating_sub(1);
    let rows = out.len() / row_len.max(1);
    let mut pieces: Vec<Vec<&mut [W]>> = (0..tasks).map(|_| Vec::with_capacity(rows)).collect();
    for row in out.chunks_exact_mut(row_len.max(1)) {
        let mut rest = row;
        for (t, owned) in pieces.iter_mut().enumerate() {
            let (mine, tail) = rest.split_at_mut(cuts[t + 1] - cuts[t]);
            owned.push(mine);
            rest = tail;
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    // Rayon's pool is out of reach of Miri (crossbeam-epoch).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn calls_on_the_calling_thread_take_one_task_until_it_returns() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| {
            let large = 64 << 20;
            assert_eq!(tasks(large, 1000), 8);
            assert_eq!(on_calling_thread(|| tasks(large, 1000)), 1);
            // Nested, and put back after a panic inside.
            let nested = on_calling_thread(|| on_calling_thread(|| tasks(large, 1000)));
            assert_eq!(nested, 1);
            let caught = std::panic::catch_unwind(|| on_calling_thread(|| panic!("inside")));
            assert!(caught.is_err());
            assert_eq!(tasks(large, 1000), 8);
        });
    }
}
