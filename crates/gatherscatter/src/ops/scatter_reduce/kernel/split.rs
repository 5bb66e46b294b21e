//! `amax` and `amin` without `self` onto fewer slabs than threads: the
//! updates cut into runs, each folded by its task into its own copy with
//! its own cells, then merged in task order. A target's merged value is
//! the fold of its values over every run (max and min are associative,
//! [`Combine::SPLITS`]), and one that no run reached keeps data's.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{apply_span, Cell, Stop, Tally};
use crate::mem::parallel;
use crate::ops::scatter_elements::{split_tasks, Geometry};
use crate::reduction::Combine;

/// One task's fold: where its values go (the output or a copy of it), and
/// which of them its run reached.
struct Fold<'a, T, Y: Cell> {
    values: Values<'a, T>,
    tally: Tally<Y>,
}

enum Values<'a, T> {
    Output(&'a mut [T]),
    /// Filled from data by the task itself (in parallel).
    Copy(Vec<T>),
}

/// Apply every update to `out` (which holds `data`) by runs; `None` when
/// that does not apply (a reduction that does not split, one counting or
/// finishing, one thread, too few updates, copies larger than the updates,
/// or memory refused), and `out` is untouched.
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
    let mut folds = Vec::new();
    folds.try_reserve_exact(tasks).ok()?;
    folds.push(Fold {
        values: Values::Output(out),
        tally: Tally::with_len(data.len())?,
    });
    for _ in 1..tasks {
        let mut copy = Vec::new();
        copy.try_reserve_exact(data.len()).ok()?;
        folds.push(Fold {
            values: Values::Copy(copy),
            tally: Tally::with_len(data.len())?,
        });
    }
    let first_bad = AtomicUsize::new(usize::MAX);
    let Ok(()) = parallel::try_for_each_list(
        folds.iter_mut().collect(),
        |t, fold: &mut Fold<'_, T, Y>| {
            let values: &mut [T] = match &mut fold.values {
                Values::Output(out) => out,
                Values::Copy(copy) => {
                    copy.extend_from_slice(data);
                    copy
                }
            };
            let run: Range<usize> = t * n / tasks..(t + 1) * n / tasks;
            // Each run stops at its own first bad index; the earliest run's is
            // the one a serial loop meets first.
            if let Err(p) =
                apply_span::<T, C, Y>(values, 0, &mut fold.tally, g, run, indices, updates)
            {
                first_bad.fetch_min(p, Ordering::Relaxed);
            }
            Ok::<(), std::convert::Infallible>(())
        },
    );
    if let p @ 0..usize::MAX = first_bad.into_inner() {
        return Some(Err(Stop::BadIndex(p)));
    }
    let mut folds = folds.into_iter();
    let first = folds.next()?;
    let (Values::Output(out), mut reached) = (first.values, first.tally) else {
        return None;
    };
    let rest: Vec<(Vec<T>, Tally<Y>)> = folds
        .filter_map(|f| match f.values {
            Values::Copy(copy) => Some((copy, f.tally)),
            Values::Output(_) => None,
        })
        .collect();
    merge::<T, C, Y>(out, &mut reached.cells, &rest);
    Some(Ok(()))
}

/// For each later fold in task order: a target it reached takes its value
/// (none before) or the combine of both; the output's cells keep track.
fn merge<T: Clone + Send + Sync, C: Combine<T>, Y: Cell + Sync>(
    out: &mut [T],
    reached: &mut [Y],
    rest: &[(Vec<T>, Tally<Y>)],
) {
    let tasks = parallel::tasks(std::mem::size_of_val(out), out.len());
    let chunk = out.len().div_ceil(tasks.max(1)).max(1);
    let pieces: Vec<_> = out
        .chunks_mut(chunk)
        .zip(reached.chunks_mut(chunk))
        .collect();
    let Ok(()) = parallel::try_for_each_list(pieces, |task, (values, cells)| {
        let owned = task * chunk..task * chunk + values.len();
        for (copy, tally) in rest {
            let theirs = copy[owned.clone()].iter().zip(&tally.cells[owned.clone()]);
            for ((acc, cell), (value, their_cell)) in
                values.iter_mut().zip(cells.iter_mut()).zip(theirs)
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
        Ok::<(), std::convert::Infallible>(())
    });
}
