//! `amax` and `amin` without `self` onto fewer slabs than threads: the
//! updates cut into runs, each folded by its task into its own copy with
//! its own cells, then merged in task order. A target's merged value is
//! the fold of its values over every run (max and min are associative,
//! [`Combine::SPLITS`]), and one that no run reached keeps data's.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{apply_span, Cell, Stop, Tally};
use crate::mem::parallel;
use crate::ops::scatter_elements::{split_tasks, Geometry};
use crate::reduction::Combine;

/// Apply every update to `out` (which holds `data`) by runs; `None` when
/// that does not apply (a reduction that does not split, one counting or
/// finishing, one thread, too few updates, or copies larger than the
/// updates), and `out` is untouched.
pub(super) fn scatter_split<T: Clone + Send + Sync, C: Combine<T>, Y: Cell + Sync>(
    data: &[T],
    out: &mut [T],
    g: &Geometry<'_>,
    indices: &[i64],
    updates: &[T],
) -> Option<Result<(), Stop>> {
    // Counts (mean, or data's value among the values) do not merge by a
    // reached flag alone.
    if !C::SPLITS || C::FINISHES || Y::WITH_SELF {
        return None;
    }
    let n = indices.len();
    let tasks = split_tasks(out.len(), indices, updates)?;
    // Each task's fold: its copy of data with its cells, made by the task
    // itself (in parallel).
    let mut folds: Vec<Option<Tally<T, Y>>> = Vec::new();
    folds.try_reserve_exact(tasks).ok()?;
    folds.resize_with(tasks, || None);
    let first_bad = AtomicUsize::new(usize::MAX);
    let refused = AtomicBool::new(false);
    let Ok(()) = parallel::try_for_each_list(
        folds.iter_mut().collect(),
        |t, fold: &mut Option<Tally<T, Y>>| {
            *fold = Tally::from_values(data);
            let Some(tally) = fold else {
                refused.store(true, Ordering::Relaxed);
                return Ok(());
            };
            let run: Range<usize> = t * n / tasks..(t + 1) * n / tasks;
            // Each run stops at its own first bad index; the earliest run's is
            // the one a serial loop meets first.
            if let Err(p) = apply_span::<T, C, Y>(tally, 0, g, run, indices, updates) {
                first_bad.fetch_min(p, Ordering::Relaxed);
            }
            Ok::<(), std::convert::Infallible>(())
        },
    );
    if let p @ 0..usize::MAX = first_bad.into_inner() {
        return Some(Err(Stop::BadIndex(p)));
    }
    if refused.into_inner() {
        return Some(Err(Stop::NoMemory(data.len(), Y::DTYPE)));
    }
    let folds: Vec<Tally<T, Y>> = folds.into_iter().flatten().collect();
    merge::<T, C, Y>(out, folds);
    Some(Ok(()))
}

/// Into `out`, for each target: the first fold's slot, then each later
/// fold's in task order, where it reached the target, taken (none before)
/// or combined; a target no fold reached keeps data's value.
fn merge<T: Clone + Send + Sync, C: Combine<T>, Y: Cell + Sync>(
    out: &mut [T],
    mut folds: Vec<Tally<T, Y>>,
) {
    let Some((first, rest)) = folds.split_first_mut() else {
        return;
    };
    let tasks = parallel::tasks(std::mem::size_of_val(out), out.len());
    let chunk = out.len().div_ceil(tasks.max(1)).max(1);
    let pieces: Vec<_> = out
        .chunks_mut(chunk)
        .zip(first.slots.chunks_mut(chunk))
        .collect();
    let rest = &*rest;
    let Ok(()) = parallel::try_for_each_list(pieces, |task, (values, slots)| {
        let owned = task * chunk..task * chunk + values.len();
        for tally in rest {
            for ((acc, cell), (value, their_cell)) in
                slots.iter_mut().zip(&tally.slots[owned.clone()])
            {
                if their_cell.count() > 0 {
                    if cell.count() > 0 {
                        C::combine(acc, value);
                    } else {
                        acc.clone_from(value);
                        *cell = *their_cell;
                    }
                }
            }
        }
        for (out, (acc, _)) in values.iter_mut().zip(slots.iter()) {
            out.clone_from(acc);
        }
        Ok::<(), std::convert::Infallible>(())
    });
}
