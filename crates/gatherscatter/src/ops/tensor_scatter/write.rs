//! TensorScatter's kernels: the past cache copied into the output and each
//! cache row's window of the update written while the row is in cache, or,
//! for outputs whose stores stream, each row written once in order from
//! past and the update; or only the windows, into a cache updated in place.

use std::convert::Infallible;
use std::mem::MaybeUninit;

use super::Plan;
use crate::dtype::Element;
use crate::error::Result;
use crate::index::takes_small_path;
use crate::mem::measured_stores::{stores_in_force, Sizes, StoreChoice, Writer};
use crate::mem::parallel;
use crate::mem::stream::{copy_nontemporal, store_fence, Avx, OutByte};
use crate::mem::uninit::{self, Slot};
use crate::ops::{alloc_output, copy_into, copy_of, copy_then};
use crate::tensor::TypedView;

/// A new output: past with every update window written, into memory that
/// is not zeroed first (the copy of past writes every element).
pub(super) fn fresh<T: Element>(
    past: TypedView<'_, T>,
    update: TypedView<'_, T>,
    positions: &[usize],
    plan: &Plan,
) -> Result<Vec<T>> {
    if takes_small_path(past.len(), update.len()) {
        let mut out = copy_of(past.data())?;
        write_small(&mut out, update, positions, plan);
        return Ok(out);
    }
    let out_bytes = std::mem::size_of_val(past.data());
    let stores = choose_stores::<T>(plan, out_bytes);
    if stores.streaming() {
        let write = |slots: &mut [MaybeUninit<T>]| {
            let from = T::as_bytes(past.data()).ok_or(())?;
            let update = T::as_bytes(update.data()).ok_or(())?;
            let dst = uninit::slot_bytes(slots).ok_or(())?;
            stream_rows(dst, from, update, std::mem::size_of::<T>(), positions, plan);
            Ok(())
        };
        // SAFETY: `write` returns `Ok` only after `stream_rows` stored every
        // byte of `dst`, all the slots' bytes (its tasks' chunks cover them
        // and each writes every byte of its rows).
        #[allow(unsafe_code)]
        if let Some(Ok(out)) = unsafe { uninit::new_vec_of::<T, ()>(past.len(), write) } {
            stores.done(out_bytes);
            return Ok(out);
        }
        // No memory for the output, or elements that are not plain bytes:
        // the copy below is not the strategy being timed, so `stores` is
        // dropped unrecorded.
        return copied(past, update, positions, plan);
    }
    let out = copied(past, update, positions, plan)?;
    stores.done(out_bytes);
    Ok(out)
}

/// [`fresh`] by the copy of past, then the windows.
fn copied<T: Element>(
    past: TypedView<'_, T>,
    update: TypedView<'_, T>,
    positions: &[usize],
    plan: &Plan,
) -> Result<Vec<T>> {
    let write = |out: &mut [MaybeUninit<T::Word>]| {
        let (from, update) = (T::as_words(past.data()), T::as_words(update.data()));
        copy_and_write_windows(from, out, update, positions, plan);
        Ok::<(), Infallible>(())
    };
    // SAFETY: `copy_and_write_windows` writes every slot: its tasks'
    // chunks cover the output and each stores past's elements into all of
    // its chunk first (`copy_then`).
    #[allow(unsafe_code)]
    match unsafe { uninit::new_vec_written::<T, Infallible>(past.len(), write) } {
        Some(Ok(out)) => Ok(out),
        Some(Err(never)) => match never {},
        None => {
            let mut out = alloc_output(past.len())?;
            copy_windows_into(past, update, positions, plan, &mut out);
            Ok(out)
        }
    }
}

/// `out = past` with every update window written (`out` has past's length).
pub(super) fn fill<T: Element>(
    past: TypedView<'_, T>,
    update: TypedView<'_, T>,
    positions: &[usize],
    plan: &Plan,
    out: &mut [T],
) {
    if takes_small_path(past.len(), update.len()) {
        out.clone_from_slice(past.data());
        write_small(out, update, positions, plan);
        return;
    }
    let out_bytes = std::mem::size_of_val(out);
    let stores = choose_stores::<T>(plan, out_bytes);
    if stores.streaming() {
        let bytes = (T::as_bytes(past.data()), T::as_bytes(update.data()));
        if let ((Some(from), Some(window)), Some(dst)) = (bytes, T::as_bytes_mut(out)) {
            stream_rows(dst, from, window, std::mem::size_of::<T>(), positions, plan);
            stores.done(out_bytes);
            return;
        }
    }
    copy_windows_into(past, update, positions, plan, out);
    stores.done(out_bytes);
}

/// The windows of a small call, written on the calling thread into `out`,
/// which holds past: on a call this size the store choice and the task
/// split cost more than the copy (a [1, 8, 4] cache: 1497 -> 1226 instructions
/// a call).
fn write_small<T: Element>(
    out: &mut [T],
    update: TypedView<'_, T>,
    positions: &[usize],
    plan: &Plan,
) {
    if !plan.writes_nothing() {
        write_windows(
            T::as_words_mut(out),
            0,
            T::as_words(update.data()),
            positions,
            plan,
        );
    }
}

/// [`fill`] by the copy of past, then the windows, whatever the stores.
fn copy_windows_into<T: Element>(
    past: TypedView<'_, T>,
    update: TypedView<'_, T>,
    positions: &[usize],
    plan: &Plan,
    out: &mut [T],
) {
    copy_and_write_windows(
        T::as_words(past.data()),
        T::as_words_mut(out),
        T::as_words(update.data()),
        positions,
        plan,
    );
}

/// The stores of a copy of `out_bytes` (see [`StoreChoice`]: under `auto`,
/// ordinary ones below 1 MiB or for windows under a cache line, streaming
/// ones past a quarter of the last-level cache, measured per class of call
/// between). Why stream: the copy-then-windows path reads every line of
/// the output before writing it, so a cache past the caches costs three
/// passes over memory where a streamed one costs two. Plain elements only
/// (the streamed rows are copied as bytes); a plan that writes no window is
/// a plain copy, left to ordinary stores.
fn choose_stores<T: Element>(plan: &Plan, out_bytes: usize) -> StoreChoice {
    if T::as_bytes(&[]).is_none() || plan.writes_nothing() {
        return StoreChoice::ORDINARY;
    }
    let word = std::mem::size_of::<T>();
    let sizes = Sizes {
        out_bytes,
        run_bytes: plan.sequence_length * plan.inner * word,
        src_bytes: out_bytes,
    };
    let rows = out_bytes / (plan.cache_row() * word).max(1);
    let tasks = || parallel::tasks(out_bytes, rows);
    let stores = stores_in_force(out_bytes);
    StoreChoice::choose(Writer::CacheWindows, stores, sizes, tasks, true)
}

/// Write `dst`, the output's bytes (whole cache rows of elements of `word`
/// bytes), with streaming stores, each row once in order: its positions
/// outside the window from `past`'s bytes, those inside from `update`'s.
/// Tasks own ranges of rows.
fn stream_rows<B: OutByte>(
    dst: &mut [B],
    past: &[u8],
    update: &[u8],
    word: usize,
    positions: &[usize],
    plan: &Plan,
) {
    let step = plan.inner * word;
    let row = plan.max_sequence_length * step;
    let window = plan.sequence_length * step;
    assert!(dst.len() == past.len() && row > 0 && dst.len().is_multiple_of(row));
    let rows = dst.len() / row;
    let per_task = rows.div_ceil(parallel::tasks(dst.len(), rows));
    parallel::for_each_chunk(dst, per_task * row, |task, chunk| {
        let avx = Avx::detect();
        let first = task * per_task;
        for (k, to) in chunk.chunks_exact_mut(row).enumerate() {
            let p = first + k;
            let start = positions[p / plan.per_batch] % plan.max_sequence_length * step;
            let runs = row_runs(row, window, start);
            let from_past = &past[p * row..(p + 1) * row];
            let from_update = &update[p * window..(p + 1) * window];
            for run in runs.into_iter().filter(|run| !run.to.is_empty()) {
                let src = if run.from_update {
                    from_update
                } else {
                    from_past
                };
                copy_nontemporal(avx, &mut to[run.to.clone()], &src[run.from..]);
            }
        }
        store_fence();
    });
}

/// One contiguous run of a cache row's bytes: `to` in the row, read from
/// offset `from` of the update's window or of past's row.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    to: std::ops::Range<usize>,
    from: usize,
    from_update: bool,
}

/// The runs of a row of `row` bytes whose window of `window` bytes
/// (`window <= row`) starts at byte `start` (`start < row`) and wraps
/// around the row's end: past's bytes before and after the window, or,
/// when it wraps, the window's tail, past's bytes between, the window's
/// head. Some may be empty.
fn row_runs(row: usize, window: usize, start: usize) -> [Run; 3] {
    let run = |to: std::ops::Range<usize>, from, from_update| Run {
        to,
        from,
        from_update,
    };
    if start + window <= row {
        let end = start + window;
        [
            run(0..start, 0, false),
            run(start..end, 0, true),
            run(end..row, end, false),
        ]
    } else {
        let wrapped = start + window - row;
        [
            run(0..wrapped, window - wrapped, true),
            run(wrapped..start, wrapped, false),
            run(start..row, 0, true),
        ]
    }
}

/// `out = past`, then each cache row (one prefix `p`: `max_sequence_length`
/// positions of `inner` elements) gets its window of `update`. Rows are
/// independent, so each task owns a range of them, copies it and writes its
/// windows. Positions are distinct within a window (`sequence_length <=
/// max_sequence_length`), so the order of writes does not matter.
fn copy_and_write_windows<W: Clone + Send + Sync, O: Slot<W>>(
    past: &[W],
    out: &mut [O],
    update: &[W],
    positions: &[usize],
    plan: &Plan,
) {
    if plan.writes_nothing() {
        copy_into(past, out);
        return;
    }
    let cache_row = plan.cache_row();
    let rows = out.len() / cache_row;
    let rows_per_task = rows.div_ceil(parallel::tasks(std::mem::size_of_val(out), rows));
    copy_then(past, out, rows_per_task * cache_row, |offset, owned| {
        write_windows(owned, offset / cache_row, update, positions, plan);
    });
}

/// Only the windows of `update`, into a cache that already holds the past
/// values; tasks are sized by the update, the bytes that move.
pub(super) fn write_windows_in_place<T: Element>(
    cache: &mut [T],
    update: TypedView<'_, T>,
    positions: &[usize],
    plan: &Plan,
) {
    if plan.writes_nothing() {
        return;
    }
    let cache_row = plan.cache_row();
    let (cache, update) = (T::as_words_mut(cache), T::as_words(update.data()));
    let rows = cache.len() / cache_row;
    let rows_per_task = rows.div_ceil(parallel::tasks(std::mem::size_of_val(update), rows));
    parallel::for_each_chunk(cache, rows_per_task * cache_row, |task, owned| {
        write_windows(owned, task * rows_per_task, update, positions, plan);
    });
}

/// Write into `owned`, whole cache rows from row `first` on, each row's
/// window of `update`.
fn write_windows<W: Clone>(
    owned: &mut [W],
    first: usize,
    update: &[W],
    positions: &[usize],
    plan: &Plan,
) {
    let (max, inner) = (plan.max_sequence_length, plan.inner);
    let update_row = plan.sequence_length * inner;
    for (k, cache) in owned.chunks_exact_mut(plan.cache_row()).enumerate() {
        let p = first + k;
        let start = positions[p / plan.per_batch];
        let window = &update[p * update_row..(p + 1) * update_row];
        for (s, src) in window.chunks_exact(inner).enumerate() {
            let pos = (start + s) % max;
            cache[pos * inner..(pos + 1) * inner].clone_from_slice(src);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_inside_the_row_splits_it_in_three() {
        let runs = row_runs(10, 4, 3);
        assert_eq!(
            runs,
            [
                Run {
                    to: 0..3,
                    from: 0,
                    from_update: false
                },
                Run {
                    to: 3..7,
                    from: 0,
                    from_update: true
                },
                Run {
                    to: 7..10,
                    from: 7,
                    from_update: false
                },
            ]
        );
    }

    #[test]
    fn a_window_past_the_row_end_wraps_to_its_start() {
        let runs = row_runs(10, 4, 8);
        assert_eq!(
            runs,
            [
                Run {
                    to: 0..2,
                    from: 2,
                    from_update: true
                },
                Run {
                    to: 2..8,
                    from: 2,
                    from_update: false
                },
                Run {
                    to: 8..10,
                    from: 0,
                    from_update: true
                },
            ]
        );
        // A window as long as the row, from its middle: no byte of past.
        let whole = row_runs(10, 10, 5);
        assert!(whole[1].to.is_empty());
        assert_eq!((whole[0].to.clone(), whole[0].from), (0..5, 5));
        assert_eq!((whole[2].to.clone(), whole[2].from), (5..10, 0));
    }
}
