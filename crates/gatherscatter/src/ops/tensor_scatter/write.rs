//! TensorScatter's kernels: the past cache copied into the output and each
//! cache row's window of the update written while the row is in cache, or
//! only the windows, into a cache updated in place.

use std::convert::Infallible;
use std::mem::MaybeUninit;

use super::Plan;
use crate::dtype::Element;
use crate::error::Result;
use crate::mem::parallel;
use crate::mem::uninit::{self, Slot};
use crate::ops::{alloc_output, copy_into, copy_then};
use crate::tensor::TypedView;

/// A new output: past with every update window written, into memory that
/// is not zeroed first (the copy of past writes every element).
pub(super) fn fresh<T: Element>(
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
            fill(past, update, positions, plan, &mut out);
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
    copy_and_write_windows(
        T::as_words(past.data()),
        T::as_words_mut(out),
        T::as_words(update.data()),
        positions,
        plan,
    );
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
