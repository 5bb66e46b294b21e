//! The ScatterReduce kernel: combine every update into its target of an
//! output that already holds `data`, counting contributions where the
//! aggregate needs them, then finish (`mean` divides).
//!
//! Each task owns a contiguous range of the output and applies, in
//! row-major order of the indices, exactly the updates that land in it: a
//! target sees its contributions in the same order as a serial loop, so
//! results are bit-identical for any thread count. When the output has at
//! least as many slabs (the dims before the axis) as there are tasks, a
//! task owns whole slabs and walks only their index rows; otherwise (a 1-D
//! scatter, say) every task walks all the indices and skips the updates
//! that land outside its range.

use crate::index::AxisRule;
use crate::mem::parallel;
use crate::mem::prefetch::{prefetch_streams, STREAM_AHEAD, STREAM_CHUNK};
use crate::reduction::Combine;
use crate::shape::{strides, IndexRows, RowBases};

/// Shapes of one call; indices' shape is checked against data's.
pub(crate) struct Geometry<'a> {
    pub data_shape: &'a [usize],
    pub indices_shape: &'a [usize],
    pub rule: &'a AxisRule,
}

/// Why a call stopped: an index out of range at a flat position of the
/// indices, or a tally that could not be allocated (its element count).
pub(crate) enum Stop {
    BadIndex(usize),
    NoMemory(usize),
}

/// Combine every update into `out` (which holds `data`) with `C`, the
/// first contribution to a target overwriting it when `include_self` is
/// false, then run `C`'s finish with each target's count.
pub(crate) fn scatter_reduce<T: Clone + Send + Sync, C: Combine<T>>(
    out: &mut [T],
    g: &Geometry<'_>,
    indices: &[i64],
    updates: &[T],
    include_self: bool,
) -> Result<(), Stop> {
    let narrow_counts = u32::try_from(indices.len()).is_ok();
    match (C::FINISHES, include_self, narrow_counts) {
        (false, true, _) => run::<T, C, Plain>(out, g, indices, updates),
        (false, false, _) => run::<T, C, FirstOverwrites>(out, g, indices, updates),
        (true, true, true) => run::<T, C, Counted<u32, true>>(out, g, indices, updates),
        (true, false, true) => run::<T, C, Counted<u32, false>>(out, g, indices, updates),
        (true, true, false) => run::<T, C, Counted<u64, true>>(out, g, indices, updates),
        (true, false, false) => run::<T, C, Counted<u64, false>>(out, g, indices, updates),
    }
}

fn run<T: Clone + Send + Sync, C: Combine<T>, Y: Tally>(
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
    let tasks = parallel::one_task_per_thread(bytes, out.len().max(1));
    // Whole slabs per task when there are enough of them; else ranges of
    // the output, each task walking every index row.
    let (chunk, by_slabs) = if slabs >= tasks {
        (slabs.div_ceil(tasks) * slab, true)
    } else {
        (out.len().div_ceil(tasks), false)
    };
    parallel::try_for_each_chunk(out, chunk, |task, part| {
        let lo = task * chunk;
        if by_slabs {
            let first = lo / slab;
            let last = first + part.len() / slab;
            let rows = IndexRows::for_slabs(g.indices_shape, g.data_shape, axis, first, last);
            let mut tally = Y::with_len(part.len()).ok_or(Stop::NoMemory(part.len()))?;
            apply_rows::<T, C, Y, false>(part, lo, &mut tally, g, rows, indices, updates)
                .map_err(Stop::BadIndex)?;
            if C::FINISHES {
                tally.finish::<T, C>(part);
            }
            return Ok(());
        }
        // Every task sees every update, about half of them (on two tasks)
        // not its own: in a private copy with spare slots at the end, those
        // land in a spare slot instead of taking a branch that mispredicts
        // half the time.
        let len = part.len();
        let spare = part.first().cloned().into_iter().cycle().take(SPARE_SLOTS);
        let mut private = Vec::new();
        private
            .try_reserve_exact(len + SPARE_SLOTS)
            .map_err(|_| Stop::NoMemory(len + SPARE_SLOTS))?;
        private.extend(part.iter().cloned().chain(spare));
        let mut tally = Y::with_len(private.len()).ok_or(Stop::NoMemory(private.len()))?;
        let rows = IndexRows::all(g.indices_shape);
        apply_rows::<T, C, Y, true>(&mut private, lo, &mut tally, g, rows, indices, updates)
            .map_err(Stop::BadIndex)?;
        private.truncate(len);
        if C::FINISHES {
            tally.finish::<T, C>(&mut private);
        }
        part.clone_from_slice(&private);
        Ok(())
    })
}

/// Spare slots after a task's private copy of its part: consecutive
/// updates that are not the task's own rotate over them, so that no chain
/// of read-modify-writes through one slot holds the loop up.
const SPARE_SLOTS: usize = 8;

/// Apply index rows `rows` whose targets lie in `part` (output elements
/// `lo..`; with `SPARE`, its last [`SPARE_SLOTS`] elements take the
/// updates aimed elsewhere); `Err(p)`: the index at flat position `p` is
/// out of range.
fn apply_rows<T: Clone, C: Combine<T>, Y: Tally, const SPARE: bool>(
    part: &mut [T],
    lo: usize,
    tally: &mut Y,
    g: &Geometry<'_>,
    rows: IndexRows,
    indices: &[i64],
    updates: &[T],
) -> Result<(), usize> {
    let rank = g.indices_shape.len();
    let row_len = g.indices_shape[rank - 1];
    let axis = g.rule.axis;
    let along_last = axis == rank - 1;
    let axis_stride = strides(g.data_shape)[axis];
    let bases = RowBases::new(g.indices_shape, g.data_shape, axis).starting_at(rows.first);
    let len = part.len() - if SPARE { SPARE_SLOTS } else { 0 };
    for (row, base) in (rows.first..rows.end).zip(bases) {
        let start = row * row_len;
        // Targets of this row, relative to the part (wrapping: a row may
        // begin before it).
        let row_base = base.wrapping_sub(lo);
        let idx = &indices[start..start + row_len];
        let upd = &updates[start..start + row_len];
        let chunks = idx.chunks(STREAM_CHUNK).zip(upd.chunks(STREAM_CHUNK));
        for (c, (idx, upd)) in chunks.enumerate() {
            let first = c * STREAM_CHUNK;
            prefetch_streams(indices, updates, start + first + STREAM_AHEAD);
            for (k, (&v, u)) in idx.iter().zip(upd).enumerate() {
                let i = g.rule.position(v);
                if i >= g.rule.size {
                    return Err(start + first + k);
                }
                let local = if along_last {
                    row_base.wrapping_add(i)
                } else {
                    row_base.wrapping_add(i * axis_stride + first + k)
                };
                if SPARE {
                    let spare = len + k % SPARE_SLOTS;
                    let slot = std::hint::select_unpredictable(local < len, local, spare);
                    tally.apply::<T, C>(slot, &mut part[slot], u);
                } else if local < len {
                    tally.apply::<T, C>(local, &mut part[local], u);
                }
            }
        }
    }
    Ok(())
}

/// What a task keeps per output element besides the value.
trait Tally: Sized {
    /// A tally for `len` output elements, or `None` when it cannot be allocated.
    fn with_len(len: usize) -> Option<Self>;
    /// Combine `update` into `acc`, the output element at `slot`.
    fn apply<T: Clone, C: Combine<T>>(&mut self, slot: usize, acc: &mut T, update: &T);
    /// Run `C`'s finish on each element that has contributions.
    fn finish<T, C: Combine<T>>(&self, _part: &mut [T]) {}
}

/// `include_self` without a count: every update combines into the value.
struct Plain;

impl Tally for Plain {
    fn with_len(_len: usize) -> Option<Self> {
        Some(Plain)
    }
    #[inline(always)]
    fn apply<T: Clone, C: Combine<T>>(&mut self, _slot: usize, acc: &mut T, update: &T) {
        C::combine(acc, update)
    }
}

/// Without `self`: the first update to a target replaces data's value.
struct FirstOverwrites {
    seen: Vec<bool>,
}

impl Tally for FirstOverwrites {
    fn with_len(len: usize) -> Option<Self> {
        zeroed(len).map(|seen| FirstOverwrites { seen })
    }
    #[inline(always)]
    fn apply<T: Clone, C: Combine<T>>(&mut self, slot: usize, acc: &mut T, update: &T) {
        if std::mem::replace(&mut self.seen[slot], true) {
            C::combine(acc, update)
        } else {
            acc.clone_from(update)
        }
    }
}

/// Counts of contributions per target (for `mean`), `WITH_SELF` counting
/// data's value as one of them.
struct Counted<N, const WITH_SELF: bool> {
    counts: Vec<N>,
}

/// A contribution count: `u32` unless a call has more than `u32::MAX` updates.
trait Count: Copy + Default + Send {
    fn bump(&mut self);
    fn get(self) -> u64;
}

impl Count for u32 {
    #[inline(always)]
    fn bump(&mut self) {
        *self += 1
    }
    fn get(self) -> u64 {
        u64::from(self)
    }
}

impl Count for u64 {
    #[inline(always)]
    fn bump(&mut self) {
        *self += 1
    }
    fn get(self) -> u64 {
        self
    }
}

impl<N: Count, const WITH_SELF: bool> Tally for Counted<N, WITH_SELF> {
    fn with_len(len: usize) -> Option<Self> {
        zeroed(len).map(|counts| Counted { counts })
    }
    #[inline(always)]
    fn apply<T: Clone, C: Combine<T>>(&mut self, slot: usize, acc: &mut T, update: &T) {
        let count = &mut self.counts[slot];
        if WITH_SELF || count.get() > 0 {
            C::combine(acc, update)
        } else {
            acc.clone_from(update)
        }
        count.bump();
    }
    fn finish<T, C: Combine<T>>(&self, part: &mut [T]) {
        for (acc, &count) in part.iter_mut().zip(&self.counts) {
            let count = count.get() + u64::from(WITH_SELF);
            // A target without contributions keeps data's value.
            if count > u64::from(WITH_SELF) {
                C::finish(acc, count);
            }
        }
    }
}

/// `len` default values, or `None` when they cannot be allocated.
fn zeroed<N: Copy + Default>(len: usize) -> Option<Vec<N>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.resize(len, N::default());
    Some(v)
}
