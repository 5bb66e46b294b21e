//! Updates cut among tasks, each run folded into its own copy of the
//! output, the copies then combined in task order: for the reductions
//! whose result does not depend on where a run is cut ([`Combine::SPLITS`]:
//! max and min), when the output has fewer slabs than there are threads (a
//! one-dim scatter, or any along axis 0) and owning slabs would leave all
//! but one thread idle. (16M updates into 1M f32, max, two threads: 1.8x
//! faster than one.)

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::rows::{apply_span, Geometry};
use crate::index::KernelIndex;
use crate::mem::parallel;
use crate::reduction::Combine;

/// Fewer updates than this per task do not pay for a copy of the output.
const MIN_UPDATES_PER_TASK: usize = 1 << 16;

/// How many tasks should fold runs of the updates into copies of an
/// output of `out_len` elements: `None` for fewer than two (one thread,
/// or too few updates per task), or when the copies would outnumber the
/// updates, as each copy costs a pass over the output that the updates it
/// takes off the first task must outweigh.
pub(crate) fn split_tasks<W, X>(out_len: usize, indices: &[X], updates: &[W]) -> Option<usize> {
    let n = indices.len();
    let work = std::mem::size_of_val(indices) + std::mem::size_of_val(updates);
    let tasks = parallel::one_task_per_thread(work, n / MIN_UPDATES_PER_TASK);
    (tasks >= 2 && out_len.saturating_mul(tasks - 1) <= n).then_some(tasks)
}

/// Where one task folds its run: the output itself, or a copy of it.
enum Fold<'a, W> {
    Output(&'a mut [W]),
    Copy(&'a mut Vec<W>),
}

/// Apply every update to `out`, which holds `data`, with tasks that each
/// fold a run of the updates into a copy of `data`; `None` when that does
/// not apply (`C` does not split, one thread, too few updates per task,
/// copies larger than the updates, or memory for them refused), and `out`
/// is untouched. `Err(p)`: the first index out of range is at flat
/// position `p`, as the serial loop reports it.
pub(super) fn scatter_split<W: Clone + Send + Sync, C: Combine<W>, X: KernelIndex>(
    data: &[W],
    out: &mut [W],
    g: &Geometry<'_>,
    indices: &[X],
    updates: &[W],
) -> Option<Result<(), usize>> {
    if !C::SPLITS {
        return None;
    }
    let tasks = split_tasks(out.len(), indices, updates)?;
    let mut copies = Vec::new();
    copies.try_reserve_exact(tasks - 1).ok()?;
    for _ in 1..tasks {
        let mut copy = Vec::new();
        copy.try_reserve_exact(data.len()).ok()?;
        copies.push(copy);
    }
    let folds = std::iter::once(Fold::Output(&mut *out))
        .chain(copies.iter_mut().map(Fold::Copy))
        .collect();
    if let Err(p) = fold_runs::<W, C, X>(folds, data, g, indices, updates) {
        return Some(Err(p));
    }
    merge::<W, C>(out, &copies);
    Some(Ok(()))
}

/// Task `t` of `folds.len()` folds run `t` of the updates (runs of equal
/// length, in order) into its fold, a copy of `data` made first when it
/// is not the output. `Err(p)`: `p` is the first bad index over all runs.
fn fold_runs<W: Clone + Send + Sync, C: Combine<W>, X: KernelIndex>(
    folds: Vec<Fold<'_, W>>,
    data: &[W],
    g: &Geometry<'_>,
    indices: &[X],
    updates: &[W],
) -> Result<(), usize> {
    let tasks = folds.len();
    let n = indices.len();
    // Each run stops at its own first bad index; the earliest run's is the
    // one a serial loop meets first.
    let first_bad = AtomicUsize::new(usize::MAX);
    let Ok(()) = parallel::try_for_each_list(folds, |t, fold| {
        let target = match fold {
            Fold::Output(out) => out,
            Fold::Copy(copy) => {
                copy.extend_from_slice(data);
                copy.as_mut_slice()
            }
        };
        let run: Range<usize> = t * n / tasks..(t + 1) * n / tasks;
        if let Err(p) = apply_span::<W, C, X>(target, 0, g, run, indices, updates) {
            first_bad.fetch_min(p, Ordering::Relaxed);
        }
        Ok::<(), std::convert::Infallible>(())
    });
    match first_bad.into_inner() {
        usize::MAX => Ok(()),
        p => Err(p),
    }
}

/// `out[i] = C(out[i], copy[i])` for each copy in task order, the output
/// cut among tasks.
fn merge<W: Clone + Send + Sync, C: Combine<W>>(out: &mut [W], copies: &[Vec<W>]) {
    let tasks = parallel::tasks(std::mem::size_of_val(out), out.len());
    let chunk = out.len().div_ceil(tasks.max(1));
    parallel::for_each_chunk(out, chunk, |task, part| {
        let owned = task * chunk..task * chunk + part.len();
        for copy in copies {
            for (acc, value) in part.iter_mut().zip(&copy[owned.clone()]) {
                C::combine(acc, value);
            }
        }
    });
}
