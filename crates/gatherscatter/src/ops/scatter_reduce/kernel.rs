//! The ScatterReduce kernel. With `data`'s values included and no mean it
//! is ScatterElements with a reduction, and runs that kernel. Otherwise
//! each output element has a cell beside it (whether it has had a value,
//! or how many): the first update replaces data's value when `self` is
//! left out, and `mean` divides by the count at the end. A task works on a
//! copy of its part with each value and its cell side by side, so an
//! update reads and writes one line, not two (16M f32 updates into 1M
//! targets, mean, one thread: 34 ms with the cells apart, 17 ms packed);
//! the values go back into the output once the task has applied all its
//! updates.
//!
//! Tasks own whole slabs (the dims before the axis) and apply their index
//! rows in row-major order: a target sees its values in the order of a
//! serial loop, so results are bit-identical for any thread count.

mod split;

use std::mem::MaybeUninit;
use std::ops::Range;

use crate::dtype::DType;
use crate::index::{
    first_beyond, matching_last_axis_rows, position_shifted, takes_small_path, try_for_each_target,
    AxisRule, SMALL_INDICES,
};
use crate::mem::parallel;
use crate::mem::prefetch::{
    prefetch_item, prefetch_streams, STREAM_AHEAD, STREAM_CHUNK, TARGET_AHEAD,
};
use crate::ops::copy_into;
use crate::ops::scatter_elements::{scatter, Geometry};
use crate::reduction::Combine;
use crate::shape::{strides, IndexRows, RowBases};

/// Why a call stopped: an index out of range at a flat position of the
/// indices, or a tally that could not be allocated (its cells' count and
/// dtype).
pub(crate) enum Stop {
    BadIndex(usize),
    NoMemory(usize, DType),
}

/// What the output holds when the kernel starts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Anything: the kernel copies data into it first.
    Blank,
    /// Data's values already.
    Copied,
}

/// `out = data`, then every update combined into its target with `C`, the
/// first contribution to a target overwriting it when `include_self` is
/// false, then `C`'s finish run with each target's count.
pub(crate) fn scatter_reduce<T: Clone + Send + Sync, C: Combine<T>>(
    data: &[T],
    out: &mut [T],
    g: &Geometry<'_>,
    indices: &[i64],
    updates: &[T],
    include_self: bool,
    start: Start,
) -> Result<(), Stop> {
    if !C::FINISHES && include_self {
        // ScatterElements with a reduction exactly, and its tuned kernel,
        // the one compiled for fresh outputs.
        // SAFETY: that kernel stores through `Slot` only.
        #[allow(unsafe_code)]
        let slots = unsafe { crate::mem::uninit::as_slots(out) };
        return scatter::<T, MaybeUninit<T>, C, i64>(data, slots, g, indices, updates)
            .map_err(Stop::BadIndex);
    }
    if start == Start::Blank {
        copy_into(data, out);
    }
    if include_self {
        run::<T, C, Counted<true>>(data, out, g, indices, updates)
    } else if C::FINISHES {
        run::<T, C, Counted<false>>(data, out, g, indices, updates)
    } else {
        run::<T, C, FirstOverwrites>(data, out, g, indices, updates)
    }
}

/// A task's working copy of its part: each value with its cell beside it,
/// and a map for the rare cell that overflows.
struct Tally<T, Y: Cell> {
    slots: Vec<(T, Y)>,
    spilled: std::collections::HashMap<usize, u64>,
}

impl<T: Clone, Y: Cell> Tally<T, Y> {
    /// `values` with empty cells; `None` when memory is refused.
    fn from_values(values: &[T]) -> Option<Self> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(values.len()).ok()?;
        slots.extend(values.iter().map(|v| (v.clone(), Y::default())));
        Some(Tally {
            slots,
            spilled: Default::default(),
        })
    }

    /// Combine `update` into slot `s`, counting it.
    #[inline(always)]
    fn apply<C: Combine<T>>(&mut self, s: usize, update: &T) {
        let (acc, cell) = &mut self.slots[s];
        if cell.apply::<T, C>(acc, update) {
            *self.spilled.entry(s).or_insert(0) += SPILL;
        }
    }

    /// Move the first `part.len()` values into `part`, each with `C`'s
    /// finish run on it when it has contributions (a target without them
    /// keeps data's value).
    fn finish_into<C: Combine<T>>(self, part: &mut [T]) {
        let Tally { slots, spilled } = self;
        for (s, (out, (mut value, cell))) in part.iter_mut().zip(slots).enumerate() {
            if C::FINISHES {
                // No hashing per element in the common case of no spills.
                let spill = if spilled.is_empty() {
                    0
                } else {
                    spilled.get(&s).copied().unwrap_or(0)
                };
                let count = cell.count() + spill;
                if count > 0 {
                    C::finish(&mut value, count + u64::from(Y::WITH_SELF));
                }
            }
            *out = value;
        }
    }
}

/// The per-element state of a [`Tally`].
trait Cell: Copy + Default + Send {
    /// Whether data's own value is one of the aggregated values.
    const WITH_SELF: bool;
    /// What a cell holds, for the error when cells cannot be allocated.
    const DTYPE: DType;
    /// Combine `update` into `acc`; `true` when the cell's count
    /// overflowed and [`SPILL`] contributions move to its spilled count.
    fn apply<T: Clone, C: Combine<T>>(&mut self, acc: &mut T, update: &T) -> bool;
    /// The contributions counted in the cell.
    fn count(self) -> u64;
}

/// Without `self` and without a count: the first update to a target
/// replaces data's value.
#[derive(Clone, Copy, Default)]
struct FirstOverwrites(bool);

impl Cell for FirstOverwrites {
    const WITH_SELF: bool = false;
    const DTYPE: DType = DType::Bool;
    #[inline(always)]
    fn apply<T: Clone, C: Combine<T>>(&mut self, acc: &mut T, update: &T) -> bool {
        if std::mem::replace(&mut self.0, true) {
            C::combine(acc, update)
        } else {
            acc.clone_from(update)
        }
        false
    }
    fn count(self) -> u64 {
        u64::from(self.0)
    }
}

/// A cell's count passed `u16::MAX`: it restarts at 1, not 0, so that "no
/// values yet" stays exact. Out of line, so the counting loop stays short.
#[cold]
#[inline(never)]
fn overflowed(count: &mut u16) -> bool {
    *count = 1;
    true
}

/// How many counted contributions move from a cell that overflows to its
/// target's spilled count: the cell goes from `u16::MAX` to 1, not 0.
const SPILL: u64 = (1 << 16) - 1;

/// A 16-bit count of contributions (for `mean`), `WITH_SELF` counting
/// data's value as one of them; an overflow moves [`SPILL`] of them to the
/// target's spilled count (rare, and exact). A count beside every output element
/// adds to what the scatter's random accesses must keep in cache, so it
/// is kept narrow.
#[derive(Clone, Copy, Default)]
struct Counted<const WITH_SELF: bool>(u16);

impl<const WITH_SELF: bool> Cell for Counted<WITH_SELF> {
    const WITH_SELF: bool = WITH_SELF;
    const DTYPE: DType = DType::U16;
    #[inline(always)]
    fn apply<T: Clone, C: Combine<T>>(&mut self, acc: &mut T, update: &T) -> bool {
        // Without self, the first value replaces data's (a cell that has
        // counted values never returns to 0).
        if WITH_SELF || self.0 > 0 {
            C::combine(acc, update)
        } else {
            acc.clone_from(update)
        }
        match self.0.checked_add(1) {
            Some(count) => {
                self.0 = count;
                false
            }
            None => overflowed(&mut self.0),
        }
    }
    fn count(self) -> u64 {
        u64::from(self.0)
    }
}

fn run<T: Clone + Send + Sync, C: Combine<T>, Y: Cell + Sync>(
    data: &[T],
    out: &mut [T],
    g: &Geometry<'_>,
    indices: &[i64],
    updates: &[T],
) -> Result<(), Stop> {
    let axis = g.rule.axis;
    let slab = g.data_shape[axis..].iter().product::<usize>();
    let slabs = out.len().checked_div(slab).unwrap_or(0);
    if out.is_empty() {
        // No target exists (an empty axis, or indices as empty as data):
        // any index is out of range.
        return match indices
            .iter()
            .position(|&v| g.rule.position(v) >= g.rule.size)
        {
            Some(p) => Err(Stop::BadIndex(p)),
            None => Ok(()),
        };
    }
    if indices.is_empty() {
        return Ok(());
    }
    if takes_small_path(out.len(), indices.len()) {
        // Cells for only as many outputs as a few rows hold: zeroing all
        // `SMALL_INDICES` of them cost more than the walk.
        return match out.len() <= FEW_OUTPUTS {
            true => run_small::<T, C, Y, FEW_OUTPUTS>(out, g, indices, updates),
            false => run_small::<T, C, Y, SMALL_INDICES>(out, g, indices, updates),
        }
        .map_err(Stop::BadIndex);
    }
    let bytes = std::mem::size_of_val(out) + std::mem::size_of_val(updates);
    // Whole slabs per task; fewer slabs than threads run on one task,
    // unless the updates split among tasks (max and min without self).
    // (Splitting one slab's targets among tasks that each read every
    // update measured slower on two threads than one: 16M f32 updates
    // into 1M targets, mean, 34 ms against 25 on a Zen 5.)
    let tasks = parallel::tasks(bytes, slabs.max(1));
    if slabs < tasks.max(2) {
        if let Some(done) = split::scatter_split::<T, C, Y>(data, out, g, indices, updates) {
            return done;
        }
    }
    let chunk = slabs.div_ceil(tasks) * slab;
    parallel::try_for_each_chunk(out, chunk, |task, part| {
        let first = task * chunk / slab;
        let last = first + part.len() / slab;
        let rows = IndexRows::for_slabs(g.indices_shape, g.data_shape, axis, first, last);
        let row_len = g.indices_shape[g.indices_shape.len() - 1];
        let span = rows.first * row_len..rows.end * row_len;
        let mut tally =
            Tally::<T, Y>::from_values(part).ok_or(Stop::NoMemory(part.len(), Y::DTYPE))?;
        apply_span::<T, C, Y>(&mut tally, task * chunk, g, span, indices, updates)
            .map_err(Stop::BadIndex)?;
        tally.finish_into::<C>(part);
        Ok(())
    })
}

/// A small call ([`takes_small_path`]): one walk of the updates into
/// `out` (data's copy), the cells on the stack, without the tally, slab
/// and split planning of [`run`], which on 8x4 updates into 8x8, mean,
/// cost 254 ns a call. No cell can overflow: there are fewer updates than
/// a cell counts.
fn run_small<T: Clone, C: Combine<T>, Y: Cell, const N: usize>(
    out: &mut [T],
    g: &Geometry<'_>,
    indices: &[i64],
    updates: &[T],
) -> Result<(), usize> {
    debug_assert!(out.len() <= N && N <= SMALL_INDICES);
    let mut cells = [Y::default(); N];
    if let Some((data_row, row_len)) =
        matching_last_axis_rows(g.data_shape, g.indices_shape, g.rule)
    {
        let shift = g.rule.negative_shift();
        let targets = out
            .chunks_exact_mut(data_row)
            .zip(cells.chunks_exact_mut(data_row));
        let sources = indices
            .chunks_exact(row_len)
            .zip(updates.chunks_exact(row_len));
        for ((out_row, cell_row), (idx_row, upd_row)) in targets.zip(sources) {
            for (&v, u) in idx_row.iter().zip(upd_row) {
                let at = position_shifted(v, shift);
                let (Some(value), Some(cell)) = (out_row.get_mut(at), cell_row.get_mut(at)) else {
                    // Found again by position, as GatherElements' small walk.
                    return Err(first_beyond(indices, shift, data_row));
                };
                let spilled = cell.apply::<T, C>(value, u);
                debug_assert!(!spilled, "a cell counts past {SMALL_INDICES} updates");
            }
        }
    } else {
        try_for_each_target(
            g.data_shape,
            g.indices_shape,
            g.rule,
            indices,
            |k, target| {
                let spilled = cells[target].apply::<T, C>(&mut out[target], &updates[k]);
                debug_assert!(!spilled, "a cell counts past {SMALL_INDICES} updates");
            },
        )?;
    }
    if C::FINISHES {
        // The counts apart, for a finish without a branch per value. No
        // cell counts past `SMALL_INDICES` updates, so each fits a u16.
        let mut counts = [0u16; N];
        for (count, cell) in counts.iter_mut().zip(&cells) {
            *count = cell.count() as u16;
        }
        C::finish_counted(out, &counts, u16::from(Y::WITH_SELF));
    }
    Ok(())
}

/// Up to this many outputs a small call's cells are a short array.
const FEW_OUTPUTS: usize = 64;

/// Apply the updates at flat positions `span` of the indices (whole index
/// rows or not), whose targets lie in `tally` (output elements `lo..`);
/// `Err(p)`: the index at flat position `p` is out of range.
fn apply_span<T: Clone, C: Combine<T>, Y: Cell>(
    tally: &mut Tally<T, Y>,
    lo: usize,
    g: &Geometry<'_>,
    span: Range<usize>,
    indices: &[i64],
    updates: &[T],
) -> Result<(), usize> {
    let rank = g.indices_shape.len();
    let row_len = g.indices_shape[rank - 1];
    if span.is_empty() {
        return Ok(());
    }
    let rule = *g.rule;
    // Along the last axis a target is `row_base + i`; along another axis
    // it is `row_base + i * axis_stride + column`.
    let along_last = rule.axis == rank - 1;
    let (stride, column_step) = if along_last {
        (1, 0)
    } else {
        (strides(g.data_shape)[rule.axis], 1)
    };
    let first_row = span.start / row_len;
    let bases = RowBases::new(g.indices_shape, g.data_shape, rule.axis).starting_at(first_row);
    for (row, base) in (first_row..span.end.div_ceil(row_len)).zip(bases) {
        let row_start = row * row_len;
        // This row's updates in the span: from `start` (column `column`).
        let (start, end) = (span.start.max(row_start), span.end.min(row_start + row_len));
        let column = start - row_start;
        // Targets of this row, relative to the part.
        let row_base = base - lo;
        let idx = &indices[start..end];
        let upd = &updates[start..end];
        if along_last {
            // The row's targets are one run of the part: a target's value
            // and cell indexed alike.
            LastAxisRun {
                tally: &mut *tally,
                row_base,
                rule: &rule,
            }
            .apply_all::<C>(indices, updates, start..end)?;
            continue;
        }
        let chunks = idx.chunks(STREAM_CHUNK).zip(upd.chunks(STREAM_CHUNK));
        for (c, (idx, upd)) in chunks.enumerate() {
            let first = c * STREAM_CHUNK;
            prefetch_streams(indices, updates, start + first + STREAM_AHEAD);
            for (k, (&v, u)) in idx.iter().zip(upd).enumerate() {
                let i = rule.position(v);
                if i >= rule.size {
                    return Err(start + first + k);
                }
                tally.apply::<C>(
                    row_base + i * stride + (column + first + k) * column_step,
                    u,
                );
            }
        }
    }
    Ok(())
}

/// Above this many bytes of targets (values and cells) in one index row,
/// the last-axis loop prefetches its targets and streams, as the
/// ScatterElements loop does above
/// [`PREFETCH_TARGETS_ABOVE`](crate::mem::prefetch::PREFETCH_TARGETS_ABOVE); below it,
/// the hints cost more than they save. 16M f32 updates, mean, one thread,
/// values and cells apart: into 1M targets (6 MiB with cells) 7% faster
/// without; 1.5M (9 MiB) within noise; 2M (12 MiB) 1.4x faster with, 4M
/// 1.5x, 32M 1.2x. The step sits at the reach of the second-level TLB
/// (2,048 pages of 4 KiB on Zen 3), beyond which each random target also
/// waits on a page walk.
const PREFETCH_COUNTED_TARGETS_ABOVE: usize = 8 << 20;

/// One index row's updates along the last axis, whose targets are one run
/// of the tally's slots from `row_base` on.
struct LastAxisRun<'a, T, Y: Cell> {
    tally: &'a mut Tally<T, Y>,
    /// The slot of the row's first target.
    row_base: usize,
    rule: &'a AxisRule,
}

impl<T: Clone, Y: Cell> LastAxisRun<'_, T, Y> {
    /// Combine the updates at flat positions `span` of the indices into
    /// their targets; `Err(p)`: the index at `p` is out of range.
    #[inline(always)]
    fn apply_all<C: Combine<T>>(
        self,
        indices: &[i64],
        updates: &[T],
        span: Range<usize>,
    ) -> Result<(), usize> {
        if self.rule.size * std::mem::size_of::<(T, Y)>() > PREFETCH_COUNTED_TARGETS_ABOVE {
            self.apply::<C, true>(indices, updates, span)
        } else {
            self.apply::<C, false>(indices, updates, span)
        }
    }

    /// [`LastAxisRun::apply_all`], one loop per prefetch choice, with the
    /// position's negative shift read once (the rule's flag did not stay
    /// in a register).
    #[inline(always)]
    fn apply<C: Combine<T>, const PREFETCH: bool>(
        self,
        indices: &[i64],
        updates: &[T],
        span: Range<usize>,
    ) -> Result<(), usize> {
        let (size, shift) = (self.rule.size, self.rule.negative_shift());
        let position = |v| position_shifted(v, shift);
        let base = self.row_base;
        let slots = &mut self.tally.slots[base..base + size];
        let spilled = &mut self.tally.spilled;
        let (idx, upd) = (&indices[span.clone()], &updates[span.clone()]);
        for (c, (chunk_idx, chunk_upd)) in idx
            .chunks(STREAM_CHUNK)
            .zip(upd.chunks(STREAM_CHUNK))
            .enumerate()
        {
            let first = c * STREAM_CHUNK;
            if PREFETCH {
                prefetch_streams(indices, updates, span.start + first + STREAM_AHEAD);
            }
            let ahead = &idx[first..];
            for (k, (&v, u)) in chunk_idx.iter().zip(chunk_upd).enumerate() {
                if PREFETCH {
                    if let Some(slot) = ahead
                        .get(k + TARGET_AHEAD)
                        .and_then(|&a| slots.get(position(a)))
                    {
                        prefetch_item(slot);
                    }
                }
                let i = position(v);
                let Some((acc, cell)) = slots.get_mut(i) else {
                    return Err(span.start + first + k);
                };
                if cell.apply::<T, C>(acc, u) {
                    *spilled.entry(base + i).or_insert(0) += SPILL;
                }
            }
        }
        Ok(())
    }
}
