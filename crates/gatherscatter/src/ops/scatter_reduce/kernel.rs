//! The ScatterReduce kernel. With `data`'s values included and no mean it
//! is ScatterElements with a reduction, and runs that kernel. Otherwise
//! each output element has a cell beside it (whether it has had a value,
//! or how many): the first update replaces data's value when `self` is
//! left out, and `mean` divides by the count at the end.
//!
//! Tasks own whole slabs (the dims before the axis) and apply their index
//! rows in row-major order: a target sees its values in the order of a
//! serial loop, so results are bit-identical for any thread count.

mod split;

use std::ops::Range;

use crate::dtype::DType;
use crate::mem::parallel;
use crate::mem::prefetch::{
    prefetch_item, prefetch_streams, PREFETCH_TARGETS_ABOVE, STREAM_AHEAD, STREAM_CHUNK,
    TARGET_AHEAD,
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
) -> Result<(), Stop> {
    if !C::FINISHES && include_self {
        // ScatterElements with a reduction exactly, and its tuned kernel.
        return scatter::<T, T, C>(data, out, g, indices, updates).map_err(Stop::BadIndex);
    }
    copy_into(data, out);
    if include_self {
        run::<T, C, Counted<true>>(data, out, g, indices, updates)
    } else if C::FINISHES {
        run::<T, C, Counted<false>>(data, out, g, indices, updates)
    } else {
        run::<T, C, FirstOverwrites>(data, out, g, indices, updates)
    }
}

/// What a task keeps per output element besides the value: a cell each,
/// and a map for the rare cell that overflows.
struct Tally<Y: Cell> {
    cells: Vec<Y>,
    spilled: std::collections::HashMap<usize, u64>,
}

impl<Y: Cell> Tally<Y> {
    fn with_len(len: usize) -> Option<Self> {
        let mut cells = Vec::new();
        cells.try_reserve_exact(len).ok()?;
        cells.resize(len, Y::default());
        Some(Tally {
            cells,
            spilled: Default::default(),
        })
    }

    /// Run `C`'s finish on each element with contributions (`part` holds
    /// the elements of `cells`, from the first on).
    fn finish<T, C: Combine<T>>(&self, part: &mut [T]) {
        for (slot, (acc, cell)) in part.iter_mut().zip(&self.cells).enumerate() {
            let spilled = if self.spilled.is_empty() {
                0
            } else {
                self.spilled.get(&slot).copied().unwrap_or(0)
            };
            let count = cell.count() + spilled;
            // A target without contributions keeps data's value.
            if count > 0 {
                C::finish(acc, count + u64::from(Y::WITH_SELF));
            }
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
        self.0 = self.0.wrapping_add(1);
        if self.0 == 0 {
            // Non-zero, so that "no values yet" stays exact.
            self.0 = 1;
            return true;
        }
        false
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
    let bytes = std::mem::size_of_val(out) + std::mem::size_of_val(updates);
    // Whole slabs per task; fewer slabs than threads run on one task.
    // (Splitting one slab's output among tasks that each walk every update
    // measured slower on two threads than one: 16M updates into 1M f32,
    // mean 112 ms against 56.)
    let tasks = parallel::tasks(bytes, slabs.max(1));
    if slabs < tasks.max(2) {
        // max and min without self: the updates split among tasks instead.
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
            Tally::<Y>::with_len(part.len()).ok_or(Stop::NoMemory(part.len(), Y::DTYPE))?;
        apply_span::<T, C, Y>(part, task * chunk, &mut tally, g, span, indices, updates)
            .map_err(Stop::BadIndex)?;
        if C::FINISHES {
            tally.finish::<T, C>(part);
        }
        Ok(())
    })
}

/// Apply the updates at flat positions `span` of the indices (whole index
/// rows or not), whose targets lie in `part` (output elements `lo..`);
/// `Err(p)`: the index at flat position `p` is out of range.
fn apply_span<T: Clone, C: Combine<T>, Y: Cell>(
    part: &mut [T],
    lo: usize,
    tally: &mut Tally<Y>,
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
        let cells = &mut tally.cells;
        let chunks = idx.chunks(STREAM_CHUNK).zip(upd.chunks(STREAM_CHUNK));
        if along_last {
            // The row's targets are one run of the part: the tight loop of
            // ScatterElements (a target's value and cell indexed alike).
            let values = &mut part[row_base..row_base + rule.size];
            let cells = &mut cells[row_base..row_base + rule.size];
            let prefetch = rule.size * std::mem::size_of::<(T, Y)>() > PREFETCH_TARGETS_ABOVE;
            for (c, (idx, upd)) in chunks.enumerate() {
                let first = c * STREAM_CHUNK;
                prefetch_streams(indices, updates, start + first + STREAM_AHEAD);
                let ahead = &indices[start + first..end];
                for (k, (&v, u)) in idx.iter().zip(upd).enumerate() {
                    if prefetch {
                        if let Some(&a) = ahead.get(k + TARGET_AHEAD) {
                            let i = rule.position(a);
                            if let (Some(value), Some(cell)) = (values.get(i), cells.get(i)) {
                                prefetch_item(value);
                                prefetch_item(cell);
                            }
                        }
                    }
                    let i = rule.position(v);
                    let (Some(acc), Some(cell)) = (values.get_mut(i), cells.get_mut(i)) else {
                        return Err(start + first + k);
                    };
                    if cell.apply::<T, C>(acc, u) {
                        *tally.spilled.entry(row_base + i).or_insert(0) += SPILL;
                    }
                }
            }
            continue;
        }
        for (c, (idx, upd)) in chunks.enumerate() {
            let first = c * STREAM_CHUNK;
            prefetch_streams(indices, updates, start + first + STREAM_AHEAD);
            for (k, (&v, u)) in idx.iter().zip(upd).enumerate() {
                let i = rule.position(v);
                if i >= rule.size {
                    return Err(start + first + k);
                }
                let slot = row_base + i * stride + (column + first + k) * column_step;
                if cells[slot].apply::<T, C>(&mut part[slot], u) {
                    *tally.spilled.entry(slot).or_insert(0) += SPILL;
                }
            }
        }
    }
    Ok(())
}
