//! The ScatterElements kernel: copy `data` into the output, then apply the
//! updates in row-major order of `indices`, checking each index as it is used.
//!
//! Two updates can only meet at a target if they share every coordinate off
//! the axis. So the output is split by off-axis coordinates, each task owning
//! its share and walking the updates that land there in the same ascending
//! order as a serial loop: results are bit-identical for any thread count
//! (spec §2.6–2.7).

use std::ops::Range;

use super::split::scatter_split;
use crate::index::{
    position_shifted, takes_small_path, try_for_each_target, AxisRule, KernelIndex,
};
use crate::mem::cpu;
use crate::mem::parallel;
use crate::mem::prefetch::{
    prefetch_item, prefetch_items, prefetch_streams, PREFETCH_TARGETS_ABOVE, STREAM_AHEAD,
    STREAM_CHUNK, TARGET_AHEAD,
};
use crate::mem::uninit::Slot;
use crate::reduction::Combine;
use crate::shape::{merge_dims_after_axis, strides, IndexRows, RowBases};

/// Shapes of one call; indices' shape is checked against data's.
pub(crate) struct Geometry<'a> {
    pub data_shape: &'a [usize],
    pub indices_shape: &'a [usize],
    pub rule: &'a AxisRule,
}

/// A column split pays only when each task's piece of a row is this long,
/// or [`MIN_COLUMN_BYTES_PER_TASK`] long for wider elements.
const MIN_COLUMNS_PER_TASK: usize = 64;

/// Pieces of a row of this many bytes already pay for a column task: rows
/// of 64 complex128 (1 KiB) along axis 0 had run as one task on two
/// threads (a [256, 64, 64] overwrite, 3.3 ms on one thread and on two).
const MIN_COLUMN_BYTES_PER_TASK: usize = 256;

/// The shortest piece of a row, in elements of `W`, a column task takes.
fn min_columns_per_task<W>() -> usize {
    MIN_COLUMNS_PER_TASK.min(MIN_COLUMN_BYTES_PER_TASK / std::mem::size_of::<W>().max(1))
}

/// `out = data`, then every update combined into its target. `Err(p)`: the
/// index at flat position `p` is out of range (out is then partly written).
pub(crate) fn scatter<W: Clone + Send + Sync, O: Slot<W>, C: Combine<W>, X: KernelIndex>(
    data: &[W],
    out: &mut [O],
    g: &Geometry<'_>,
    indices: &[X],
    updates: &[W],
) -> Result<(), usize> {
    // Small calls first: the shape work below cost them about 10% more.
    if takes_small_path(out.len(), indices.len()) {
        let out = O::init_from(out, data);
        return try_for_each_target(g.data_shape, g.indices_shape, g.rule, indices, |k, at| {
            C::combine(&mut out[at], &updates[k])
        });
    }
    // An axis followed only by size-1 dims is walked as the last axis, and
    // the dims after an outer axis, when data and indices agree on them, as
    // one: fewer, longer rows, whose column split and strips then span
    // only the axis's rows (a [256, 64, 128] float64 overwrite along axis
    // 0 had packed strips of all 16384 rows).
    let (data_shape, indices_shape) =
        merge_dims_after_axis(g.data_shape, g.indices_shape, g.rule.axis);
    let rank = data_shape.len();
    let g = &Geometry {
        data_shape: &data_shape,
        indices_shape: &indices_shape,
        rule: g.rule,
    };
    let axis = g.rule.axis;
    let slab = g.data_shape[axis..].iter().product::<usize>();
    let slabs = out.len().checked_div(slab).unwrap_or(0);
    let last = g.data_shape[rank - 1];
    // An empty output with indices still checks them (an empty axis takes none).
    let tasks = parallel::tasks(std::mem::size_of_val(out), out.len().max(1));
    if indices.is_empty() {
        O::init_from(out, data);
        return Ok(());
    }
    // Few slabs but long rows: each task owns a range of the last dim in
    // every output row (W7-like fan-in along an outer axis), as many tasks
    // as the rows' length allows, one at the least: the one-task column
    // walk beats the row loop. (Asking for a task per quarter thread or
    // none sent a [256, 64, 256] add along axis 0 to the row loop on two
    // threads: 30-56 ms, against 12-14 ms for one column task on one
    // thread and 7-8 ms for four on two; complex128 rows of 64, 45 ms
    // against 7.)
    let min_columns = min_columns_per_task::<W>();
    let column_tasks = (last / min_columns).clamp(1, tasks);
    let by_columns = axis < rank - 1 && last >= min_columns && slabs < tasks.max(2);
    // A single slab (a one-dim scatter, or any along axis 0) goes to the
    // serial loop or to tasks that split the updates, even when the output
    // is too small to split: the updates may still be many.
    if slabs >= tasks && slabs > 1 && !by_columns {
        // Split by the dims before the axis: each task owns whole slabs.
        let per_task = slabs.div_ceil(tasks);
        return parallel::try_for_each_chunk(out, per_task * slab, |task, dst| {
            let slabs = OwnedSlabs {
                first: task * per_task,
                len: slab,
            };
            copy_and_apply_slabs::<W, O, C, X>(dst, slabs, data, g, indices, updates)
        });
    }
    if by_columns {
        return scatter_by_columns::<W, O, C, X>(
            data,
            out,
            g,
            indices,
            updates,
            column_tasks,
            true,
        );
    }
    let out = O::init_from(out, data);
    if let Some(done) = scatter_split::<W, C, X>(data, out, g, indices, updates) {
        return done;
    }
    apply_rows::<W, C, X>(out, 0, g, IndexRows::all(g.indices_shape), indices, updates)
}

/// The output slabs a task owns: from slab `first` on, `len` elements each.
#[derive(Clone, Copy)]
struct OwnedSlabs {
    first: usize,
    len: usize,
}

/// Copy `data` into `dst` (whole slabs from `slabs.first` on) and apply
/// their updates, a few slabs at a time: each step's slabs are still in
/// cache (about 256 KiB) when their updates land, where copying everything
/// first would have pushed them out to memory.
fn copy_and_apply_slabs<W: Clone, O: Slot<W>, C: Combine<W>, X: KernelIndex>(
    dst: &mut [O],
    slabs: OwnedSlabs,
    data: &[W],
    g: &Geometry<'_>,
    indices: &[X],
    updates: &[W],
) -> Result<(), usize> {
    const STEP_BYTES: usize = 256 << 10;
    let slab_bytes = slabs.len * std::mem::size_of::<W>().max(1);
    if let Some(tile) = slab_tile::<W, X>(g, slab_bytes) {
        let mut strip: Vec<W> = Vec::new();
        // Without memory for a strip, the slabs are walked as below.
        if strip
            .try_reserve_exact(g.data_shape[g.rule.axis] * tile)
            .is_ok()
        {
            let task = (dst, slabs, tile, &mut strip);
            return apply_slabs_in_tiles::<W, O, C, X>(task, data, g, indices, updates);
        }
    }
    let per_step = (STEP_BYTES / slab_bytes.max(1)).max(1);
    for (step, part) in dst.chunks_mut(per_step * slabs.len).enumerate() {
        let from = slabs.first + step * per_step;
        let offset = from * slabs.len;
        let len = part.len();
        let part = O::init_from(part, &data[offset..offset + len]);
        let rows = IndexRows::for_slabs(
            g.indices_shape,
            g.data_shape,
            g.rule.axis,
            from,
            from + part.len() / slabs.len,
        );
        apply_rows::<W, C, X>(part, offset, g, rows, indices, updates)?;
    }
    Ok(())
}

/// Columns per pass when one slab is walked in packed tiles (see
/// [`apply_slabs_in_tiles`]), or `None` to walk it in place. Updates land
/// on random axis rows; once the slab no longer stays in L2 (it fills L2,
/// or its indices streaming past are four times L2), each update waited
/// on a miss. Tiles take every axis row and fit two thirds of L1; they
/// need the axis second-to-last and at least 32 columns. Measured on AMD
/// EPYC family 26 model 2 (48 KiB L1, 1 MiB L2), overwrites along the
/// middle axis of 256, int64 indices, 16 MiB, one thread, in place ->
/// tiles: int8 slabs of 1 MiB 85 -> 23 ms (numpy 59), of 512 KiB (add)
/// 55 -> 21; float32 slabs of 1 MiB 8.2 -> 7.0. Below the rule, in place
/// won: int8 slabs of 256 KiB 17.8 ms against 21.6-24.1 in tiles, of
/// 128 KiB 17.2 against 21.9-22.3; float32 of 512 KiB 5.0-5.2 against
/// 6.6-6.9.
fn slab_tile<W, X>(g: &Geometry<'_>, slab_bytes: usize) -> Option<usize> {
    let rank = g.data_shape.len();
    let caches = cpu::core_caches();
    let word = std::mem::size_of::<W>().max(1);
    let index_bytes = slab_bytes / word * std::mem::size_of::<X>();
    let spills = slab_bytes >= caches.level2 || index_bytes >= 4 * caches.level2;
    if g.rule.axis + 2 != rank || !spills {
        return None;
    }
    let tile = cpu::columns_in_level1(g.data_shape[g.rule.axis] * word);
    (tile >= 32 && tile < g.data_shape[rank - 1]).then_some(tile)
}

/// [`copy_and_apply_slabs`] for slabs that [`slab_tile`] cuts: each slab
/// is a one-task column walk of its own (packed strips of `tile` columns
/// of every axis row, from `data`, updated, then stored), over the index
/// rows that land in it, in order.
fn apply_slabs_in_tiles<W: Clone, O: Slot<W>, C: Combine<W>, X: KernelIndex>(
    (dst, slabs, tile, strip): (&mut [O], OwnedSlabs, usize, &mut Vec<W>),
    data: &[W],
    g: &Geometry<'_>,
    indices: &[X],
    updates: &[W],
) -> Result<(), usize> {
    let rank = g.data_shape.len();
    let (last, row_len) = (g.data_shape[rank - 1], g.indices_shape[rank - 1]);
    let axis = g.rule.axis;
    let slab_shape = [g.data_shape[axis], last];
    // Within a slab the axis is the first of two dims.
    let slab_rule = AxisRule { axis: 0, ..*g.rule };
    for (k, out) in dst.chunks_mut(slabs.len).enumerate() {
        let slab = slabs.first + k;
        let rows = IndexRows::for_slabs(g.indices_shape, g.data_shape, axis, slab, slab + 1);
        let span = rows.first * row_len..rows.end * row_len;
        let slab_g = Geometry {
            data_shape: &slab_shape,
            indices_shape: &[rows.end - rows.first, row_len],
            rule: &slab_rule,
        };
        let from = slab * slabs.len;
        let slab_data = &data[from..from + out.len()];
        let task = ColumnTask {
            columns: 0..last,
            owned: out.chunks_mut(last).collect(),
        };
        task.apply_packed::<W, C, X>(
            strip,
            tile,
            slab_data,
            &slab_g,
            &indices[span.clone()],
            &updates[span.clone()],
        )
        .map_err(|p| span.start + p)?;
    }
    Ok(())
}

/// Columns per pass of the column-split loop: updates along an outer axis
/// land on random output rows, so all index rows are walked once per strip
/// of this many columns of every output row, packed contiguously so that
/// the strip stays in cache while the indices and updates stream past. At
/// least [`MIN_STRIP_COLUMNS`] columns (each index row's piece is then 1
/// KiB of `i64`s: shorter pieces, a whole index row apart, read memory
/// slowly and each pays the row's set-up) and an eighth of L2; for rows
/// so many that those columns spill L2, at most an eighth of the
/// last-level cache. Measured on AMD EPYC family 26 model 2 (1 MiB L2,
/// 32 MiB L3), in process, one / two threads, strips of 1 MiB (the rule
/// before, fixed) -> the rule's: W7 (1024 output rows, 16 updates each,
/// add) 75-83 / 43-46 ms -> 62-70 / 33-35 at 512 KiB (1 MiB and 128 KiB
/// both slower); overwrites of 256 rows along axis 0 (16 MiB, [256, 64,
/// n]): float16 30 / 15.5 -> 10 / 5.3 at 128 KiB, int8 86 / 43 -> 25 / 13,
/// float32 9.8 / 5.3 -> 5.5 / 3.0, float64 4.25 / 2.24 -> 3.74 / 2.21 at
/// 256 KiB; 4096 rows of float32, 26 / 15.6 -> 25 / 13.8 at 2 MiB (512
/// KiB, 32 columns: 33 / 17.7; 4 MiB: 24 / 13.2).
fn column_tile<W>(output_rows: usize) -> usize {
    let word = std::mem::size_of::<W>().max(1);
    let level2 = cpu::core_caches().level2;
    let most = level2.max(cpu::last_level_cache_bytes() / 8);
    let column_bytes = output_rows.max(1) * word;
    let strip_bytes = (MIN_STRIP_COLUMNS * column_bytes).clamp(level2 / 8, most);
    (strip_bytes / column_bytes).max(64 / word).max(16)
}

/// The fewest columns [`column_tile`] asks for while the cache holds them.
const MIN_STRIP_COLUMNS: usize = 128;

/// Apply index rows `rows` to `out`, which holds the output from element
/// `offset` on.
fn apply_rows<W: Clone, C: Combine<W>, X: KernelIndex>(
    out: &mut [W],
    offset: usize,
    g: &Geometry<'_>,
    rows: IndexRows,
    indices: &[X],
    updates: &[W],
) -> Result<(), usize> {
    let row_len = g.indices_shape[g.indices_shape.len() - 1];
    let span = rows.first * row_len..rows.end * row_len;
    apply_span::<W, C, X>(out, offset, g, span, indices, updates)
}

/// Apply the updates at flat positions `span` of the indices (whole index
/// rows or not) to `out`, which holds the output from element `offset` on.
pub(super) fn apply_span<W: Clone, C: Combine<W>, X: KernelIndex>(
    out: &mut [W],
    offset: usize,
    g: &Geometry<'_>,
    span: Range<usize>,
    indices: &[X],
    updates: &[W],
) -> Result<(), usize> {
    let rank = g.indices_shape.len();
    let row_len = g.indices_shape[rank - 1];
    if span.is_empty() {
        return Ok(());
    }
    let axis = g.rule.axis;
    let size = g.rule.size;
    let first_row = span.start / row_len;
    let bases = RowBases::new(g.indices_shape, g.data_shape, axis).starting_at(first_row);
    let axis_stride = strides(g.data_shape)[axis];
    let prefetch = size * axis_stride * std::mem::size_of::<W>() > PREFETCH_TARGETS_ABOVE;
    let whole_rows = span.start % row_len == 0 && span.end % row_len == 0;
    if axis + 1 < rank && row_len < SHORT_ROW && whole_rows && !prefetch {
        let target = ShortRows {
            out,
            offset,
            axis_stride,
            row_len,
            rule: g.rule,
        };
        return target.apply::<C, X>(bases, span, indices, updates);
    }
    for (row, base) in (first_row..span.end.div_ceil(row_len)).zip(bases) {
        let row_start = row * row_len;
        let (from, to) = (span.start.max(row_start), span.end.min(row_start + row_len));
        let idx = &indices[from..to];
        let upd = &updates[from..to];
        // The column of the row's first update here: targets off the last
        // axis are `i * axis_stride + column`.
        let column = from - row_start;
        let target = &mut out[base - offset..];
        let chunks = idx.chunks(STREAM_CHUNK).zip(upd.chunks(STREAM_CHUNK));
        let row_idx = idx;
        for (c, (idx, upd)) in chunks.enumerate() {
            let first = c * STREAM_CHUNK;
            prefetch_streams(indices, updates, from + first + STREAM_AHEAD);
            let run = Run {
                ahead: &row_idx[first..],
                rule: g.rule,
                axis_stride,
                column: column + first,
                position: from + first,
            };
            match (axis == rank - 1, prefetch) {
                (true, false) => run.apply::<W, C, true, false>(target, idx, upd)?,
                (true, true) => run.apply::<W, C, true, true>(target, idx, upd)?,
                (false, false) => run.apply::<W, C, false, false>(target, idx, upd)?,
                (false, true) => run.apply::<W, C, false, true>(target, idx, upd)?,
            }
        }
    }
    Ok(())
}

/// Index rows shorter than this along an outer axis are applied by
/// [`ShortRows`]: the per-row set-up of the row loop (its chunks, stream
/// prefetches and run) cost more than rows of 16 updates themselves.
const SHORT_ROW: usize = 64;

/// Short index rows along an outer axis, in whole rows: `out` holds the
/// output from element `offset` on.
struct ShortRows<'a, W> {
    out: &'a mut [W],
    offset: usize,
    axis_stride: usize,
    row_len: usize,
    rule: &'a AxisRule,
}

impl<W: Clone> ShortRows<'_, W> {
    /// Apply index rows `span` (whole rows) in order, rows sharing a data
    /// base taken as one run; their targets (one data plane) stay in cache.
    /// (An int8 overwrite of [4096, 256, 16] along the middle axis, rows of
    /// 16: 19.4 ms on one thread against torch's 20.7 before.)
    fn apply<C: Combine<W>, X: KernelIndex>(
        self,
        mut bases: RowBases,
        span: Range<usize>,
        indices: &[X],
        updates: &[W],
    ) -> Result<(), usize> {
        let (row_len, stride) = (self.row_len, self.axis_stride);
        let shift = self.rule.negative_shift();
        let size = self.rule.size;
        let rows = span.len() / row_len;
        let mut row = 0;
        while let Some((base, run)) = bases.next_run(rows - row) {
            let start = span.start + row * row_len;
            let end = start + run * row_len;
            let target = self.out.get_mut(base - self.offset..).unwrap_or_default();
            let pieces = indices[start..end].chunks_exact(row_len);
            for (r, (idx, upd)) in pieces
                .zip(updates[start..end].chunks_exact(row_len))
                .enumerate()
            {
                for (j, (&v, u)) in idx.iter().zip(upd).enumerate() {
                    let i = position_shifted(v.wide(), shift);
                    if i >= size {
                        return Err(start + r * row_len + j);
                    }
                    C::combine(&mut target[i * stride + j], u);
                }
            }
            row += run;
        }
        Ok(())
    }
}

/// A run of one index row's updates: where its targets are.
struct Run<'a, X> {
    /// The row's indices from the run's first on, to look ahead in.
    ahead: &'a [X],
    rule: &'a AxisRule,
    /// Data's stride along the axis.
    axis_stride: usize,
    /// The column (position in its index row) of the run's first update.
    column: usize,
    /// The flat position in the indices of the run's first update.
    position: usize,
}

impl<X: KernelIndex> Run<'_, X> {
    /// Combine each of `upd` into its target in `target` (the output from
    /// the row's base on); one loop per axis kind and prefetch choice.
    #[inline(always)]
    fn apply<W: Clone, C: Combine<W>, const ALONG_LAST: bool, const PREFETCH: bool>(
        &self,
        target: &mut [W],
        idx: &[X],
        upd: &[W],
    ) -> Result<(), usize> {
        let size = self.rule.size;
        let target = if ALONG_LAST {
            &mut target[..size]
        } else {
            target
        };
        // Along the last axis a target is `i`, else `i * axis_stride + column`.
        let cell = |k: usize, i: usize| {
            if ALONG_LAST {
                i
            } else {
                i * self.axis_stride + self.column + k
            }
        };
        for (k, (&v, u)) in idx.iter().zip(upd).enumerate() {
            if PREFETCH {
                if let Some(&ahead) = self.ahead.get(k + TARGET_AHEAD) {
                    let i = self.rule.position(ahead.wide());
                    if let Some(item) = target.get(cell(k + TARGET_AHEAD, i)).filter(|_| i < size) {
                        prefetch_item(item);
                    }
                }
            }
            let i = self.rule.position(v.wide());
            if ALONG_LAST {
                C::combine(target.get_mut(i).ok_or(self.position + k)?, u);
            } else if i < size {
                C::combine(&mut target[cell(k, i)], u);
            } else {
                return Err(self.position + k);
            }
        }
        Ok(())
    }
}

/// Each task owns columns `[c0, c1)` of every output row (rows of the last
/// dim) and applies every index row's share of them, in order, a tile of
/// columns at a time (see [`column_tile`]).
///
/// With `packed_strips`, each tile of data is copied into a contiguous strip,
/// updated there and written to the output once. In place, the tile's cells
/// sit a whole row apart; rows of a power-of-two length put them in a few
/// cache sets that evict each other, so the random updates missed (W7 on
/// one thread: packed, 1.3x faster). Without `packed_strips`, or when a
/// strip cannot be allocated, the task copies data into its pieces of the
/// output and updates them in place (same order, same result).
fn scatter_by_columns<W: Clone + Send + Sync, O: Slot<W>, C: Combine<W>, X: KernelIndex>(
    data: &[W],
    out: &mut [O],
    g: &Geometry<'_>,
    indices: &[X],
    updates: &[W],
    tasks: usize,
    packed_strips: bool,
) -> Result<(), usize> {
    let rank = g.data_shape.len();
    let last = g.data_shape[rank - 1];
    let cuts: Vec<usize> = (0..=tasks.max(1))
        .map(|t| t * last / tasks.max(1))
        .collect();
    let pieces = parallel::column_pieces(out, last, &cuts);
    parallel::try_for_each_list(pieces, |t, owned: Vec<&mut [O]>| {
        let task = ColumnTask {
            columns: cuts[t]..cuts[t + 1],
            owned,
        };
        task.apply::<W, C, X>(data, g, indices, updates, packed_strips)
    })
}

/// The columns one task owns, as its piece of every output row (slots of
/// a caller's buffer or of a fresh one).
struct ColumnTask<'a, O> {
    columns: std::ops::Range<usize>,
    owned: Vec<&'a mut [O]>,
}

impl<O> ColumnTask<'_, O> {
    fn apply<W: Clone, C: Combine<W>, X: KernelIndex>(
        self,
        data: &[W],
        g: &Geometry<'_>,
        indices: &[X],
        updates: &[W],
        packed_strips: bool,
    ) -> Result<(), usize>
    where
        O: Slot<W>,
    {
        let tile = column_tile::<W>(self.owned.len());
        let mut strip: Vec<W> = Vec::new();
        if packed_strips && strip.try_reserve_exact(self.owned.len() * tile).is_ok() {
            return self.apply_packed::<W, C, X>(&mut strip, tile, data, g, indices, updates);
        }
        let last = g.data_shape[g.data_shape.len() - 1];
        let c0 = self.columns.start;
        let mut pieces: Vec<&mut [W]> = Vec::with_capacity(self.owned.len());
        for (r, piece) in self.owned.into_iter().enumerate() {
            let len = piece.len();
            pieces.push(O::init_from(piece, &data[r * last + c0..][..len]));
        }
        for j0 in self.columns.clone().step_by(tile) {
            let j1 = (j0 + tile).min(self.columns.end);
            let mut cells = RowPieces {
                pieces: &mut pieces,
                first_column: c0,
            };
            apply_columns::<W, C, _, X>(&mut cells, j0, j1, g, indices, updates)?;
        }
        Ok(())
    }

    /// Each tile of columns is packed from `data` into `strip` (room for
    /// `tile` columns of every row), updated there, then stored into the
    /// owned pieces.
    fn apply_packed<W: Clone, C: Combine<W>, X: KernelIndex>(
        mut self,
        strip: &mut Vec<W>,
        tile: usize,
        data: &[W],
        g: &Geometry<'_>,
        indices: &[X],
        updates: &[W],
    ) -> Result<(), usize>
    where
        O: Slot<W>,
    {
        let last = g.data_shape[g.data_shape.len() - 1];
        let rows = self.owned.len();
        let c0 = self.columns.start;
        for j0 in self.columns.clone().step_by(tile) {
            let j1 = (j0 + tile).min(self.columns.end);
            strip.clear();
            for r in 0..rows {
                let ahead = (r + STRIP_PREFETCH_ROWS) * last;
                prefetch_items(data.get(ahead + j0..ahead + j1).unwrap_or_default());
                strip.extend_from_slice(&data[r * last + j0..r * last + j1]);
            }
            let mut cells = WholeRows {
                out: strip,
                row_len: j1 - j0,
                first_column: j0,
            };
            apply_columns::<W, C, _, X>(&mut cells, j0, j1, g, indices, updates)?;
            let (p0, p1) = (j0 - c0, j1 - c0);
            for (r, row) in strip.chunks_exact(j1 - j0).enumerate() {
                if let Some(upcoming) = self.owned.get(r + STRIP_PREFETCH_ROWS) {
                    prefetch_items(upcoming.get(p0..p1).unwrap_or_default());
                }
                O::copy_from(&mut self.owned[r][p0..p1], row);
            }
        }
        Ok(())
    }
}

/// Rows ahead whose piece of a strip is prefetched while a strip is packed
/// from `data` or copied back to the output: consecutive pieces sit a whole
/// row apart, where the hardware prefetchers do not follow.
const STRIP_PREFETCH_ROWS: usize = 16;

/// The output cells a column task may write, by output row (of the last
/// dim) and column.
trait OwnedCells<W> {
    fn cell(&mut self, row: usize, column: usize) -> &mut W;

    /// Apply one index row's share of a tile, in order; `Err(j)`: `idx[j]`
    /// is the first index out of range.
    #[inline(always)]
    fn apply_row<C: Combine<W>, X: KernelIndex>(
        &mut self,
        row: IndexRow,
        idx: &[X],
        upd: &[W],
        rule: AxisRule,
    ) -> Result<(), usize> {
        apply_cell_by_cell::<W, C, Self, X>(self, row, idx, upd, rule)
    }
}

/// Columns `first_column..` of every output row, stored contiguously
/// `row_len` to a row: a packed strip.
struct WholeRows<'a, W> {
    out: &'a mut [W],
    row_len: usize,
    first_column: usize,
}

impl<W> OwnedCells<W> for WholeRows<'_, W> {
    #[inline(always)]
    fn cell(&mut self, row: usize, column: usize) -> &mut W {
        &mut self.out[row * self.row_len + column - self.first_column]
    }

    /// The row's cells sit one fixed stride apart per step along the axis,
    /// from one start: a loop of 16 instructions per update against 31 for
    /// the cell-by-cell walk. Not inlined: inside the tile loop it spilled
    /// its bounds to the stack again. (W7, a fan-in scatter-add along axis
    /// 0, in A/B runs: 1.33x faster on one thread, 1.23x into a buffer and
    /// 1.36x fresh on two.)
    #[inline(never)]
    fn apply_row<C: Combine<W>, X: KernelIndex>(
        &mut self,
        row: IndexRow,
        idx: &[X],
        upd: &[W],
        rule: AxisRule,
    ) -> Result<(), usize> {
        if idx.is_empty() {
            // A tile past the end of shorter index rows.
            return Ok(());
        }
        let stride = row.axis_rows * self.row_len;
        let first = (row.base_row * self.row_len + row.first_column).checked_sub(self.first_column);
        let Some(cells) = first.and_then(|first| self.out.get_mut(first..)) else {
            // Never for a tile of a checked geometry; the cell-by-cell walk
            // fails there as any other walk would.
            return apply_cell_by_cell::<W, C, Self, X>(self, row, idx, upd, rule);
        };
        let len = idx.len().min(upd.len());
        let (idx, upd) = (&idx[..len], &upd[..len]);
        for j in 0..len {
            let i = rule.position(idx[j].wide());
            if i >= rule.size {
                return Err(j);
            }
            C::combine(&mut cells[i * stride + j], &upd[j]);
        }
        Ok(())
    }
}

/// One piece of every output row, from `first_column` on.
struct RowPieces<'a, 'p, W> {
    pieces: &'a mut [&'p mut [W]],
    first_column: usize,
}

impl<W> OwnedCells<W> for RowPieces<'_, '_, W> {
    #[inline(always)]
    fn cell(&mut self, row: usize, column: usize) -> &mut W {
        &mut self.pieces[row][column - self.first_column]
    }
}

/// Index rows ahead of the current one whose indices and updates are
/// prefetched: a tile's share of consecutive index rows sits a whole row
/// apart, where the hardware prefetchers do not follow.
const PREFETCH_ROWS: usize = 16;

/// Apply every index row's updates in columns `[j0, j1)`, in order.
fn apply_columns<W, C: Combine<W>, O: OwnedCells<W>, X: KernelIndex>(
    owned: &mut O,
    j0: usize,
    j1: usize,
    g: &Geometry<'_>,
    indices: &[X],
    updates: &[W],
) -> Result<(), usize> {
    let rank = g.data_shape.len();
    let last = g.data_shape[rank - 1];
    let row_len = g.indices_shape[rank - 1];
    let axis = g.rule.axis;
    // Strides in output rows: an index row's base is a row start (last
    // coordinate 0), and the axis is before the last dim.
    let axis_rows = strides(g.data_shape)[axis] / last;
    let rule = *g.rule;
    let rows = IndexRows::all(g.indices_shape);
    let bases = RowBases::new(g.indices_shape, g.data_shape, axis);
    let (j0, j1) = (j0.min(row_len), j1.min(row_len));
    for (row, base) in (rows.first..rows.end).zip(bases) {
        let start = row * row_len;
        let ahead = start + PREFETCH_ROWS * row_len;
        if let Some(upcoming) = indices.get(ahead + j0..ahead + j1) {
            prefetch_items(upcoming);
            prefetch_items(updates.get(ahead + j0..ahead + j1).unwrap_or_default());
        }
        let idx = &indices[start + j0..start + j1];
        let upd = &updates[start + j0..start + j1];
        let row = IndexRow {
            base_row: base / last,
            axis_rows,
            first_column: j0,
        };
        owned
            .apply_row::<C, X>(row, idx, upd, rule)
            .map_err(|j| start + j0 + j)?;
    }
    Ok(())
}

/// Where one index row's share of a tile lands: update `j` goes to output
/// row `base_row + position * axis_rows`, column `first_column + j`.
#[derive(Clone, Copy)]
struct IndexRow {
    base_row: usize,
    axis_rows: usize,
    first_column: usize,
}

/// Combine each `upd[j]` into its cell through [`OwnedCells::cell`], in
/// order; `Err(j)`: `idx[j]` is the first index out of range.
#[inline(always)]
fn apply_cell_by_cell<W, C: Combine<W>, O: OwnedCells<W> + ?Sized, X: KernelIndex>(
    owned: &mut O,
    row: IndexRow,
    idx: &[X],
    upd: &[W],
    rule: AxisRule,
) -> Result<(), usize> {
    for (j, (&v, u)) in idx.iter().zip(upd).enumerate() {
        let i = rule.position(v.wide());
        if i >= rule.size {
            return Err(j);
        }
        let cell = owned.cell(row.base_row + i * row.axis_rows, row.first_column + j);
        C::combine(cell, u);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduction::{AddOp, Overwrite};

    /// A new output that `write` fills from uninitialised memory (under
    /// Miri, reading a slot it did not write is an error).
    fn fresh_output(
        len: usize,
        write: impl FnOnce(&mut [std::mem::MaybeUninit<i64>]) -> Result<(), usize>,
    ) -> Result<Vec<i64>, usize> {
        // SAFETY: the kernels under test return `Ok` only after writing
        // every slot, which is what the tests calling this check.
        #[allow(unsafe_code)]
        let written = unsafe { crate::mem::uninit::new_vec_of::<i64, usize>(len, write) };
        written.expect("a small vector of i64 can be made")
    }

    /// [`scatter_by_columns`] with `AddOp` into a [`fresh_output`].
    fn fresh_by_columns(
        data: &[i64],
        g: &Geometry<'_>,
        idx: &[i64],
        upd: &[i64],
        tasks: usize,
        packed_strips: bool,
    ) -> Result<Vec<i64>, usize> {
        fresh_output(data.len(), |out| {
            scatter_by_columns::<i64, _, AddOp, i64>(data, out, g, idx, upd, tasks, packed_strips)
        })
    }

    /// Each path of one task stores data into every slot of a fresh output
    /// before applying the updates: whole slabs (a scatter along the last
    /// axis and one along a middle axis), column pieces of every row with
    /// and without packed strips (along axis 0), and no updates at all.
    #[test]
    fn every_path_writes_every_slot_of_a_fresh_output() {
        let shape = [3, 4, 70];
        let data: Vec<i64> = (0..840).collect();
        for (axis, ishape) in [
            (2, [2, 4, 70]),
            (1, [3, 2, 70]),
            (0, [2, 3, 66]),
            (0, [0, 4, 70]),
        ] {
            let count: usize = ishape.iter().product();
            let idx: Vec<i64> = (0..count as i64).map(|k| k % 2 - 1).collect();
            let upd: Vec<i64> = (0..count as i64).map(|k| 1000 + k).collect();
            let rule = AxisRule {
                axis,
                size: shape[axis],
                negative_allowed: true,
            };
            let g = Geometry {
                data_shape: &shape,
                indices_shape: &ishape,
                rule: &rule,
            };
            let mut expected = vec![0; data.len()];
            scatter::<i64, i64, AddOp, i64>(&data, &mut expected, &g, &idx, &upd).unwrap();
            let fresh = fresh_output(data.len(), |out| {
                scatter::<i64, _, AddOp, i64>(&data, out, &g, &idx, &upd)
            });
            assert_eq!(
                fresh,
                Ok(expected.clone()),
                "axis {axis}, indices {ishape:?}"
            );
            if axis == 0 {
                for packed_strips in [true, false] {
                    let fresh = fresh_by_columns(&data, &g, &idx, &upd, 1, packed_strips);
                    assert_eq!(fresh, Ok(expected.clone()), "packed strips {packed_strips}");
                }
            }
        }
    }

    /// Slabs walked in packed tiles (too small here to be chosen, so the
    /// tiles are forced) write every slot of a fresh output and give what
    /// the in-place walk gives: tiles narrower than a row, ending inside it
    /// and as wide as it; index rows shorter than data's, more index rows
    /// than axis positions, a slab with no index rows; overwrite and add;
    /// and a bad index is reported.
    #[test]
    fn slabs_walked_in_packed_tiles_match_the_slabs_walked_in_place() {
        let shape = [3, 5, 70];
        let ishape = [2, 8, 66];
        let data: Vec<i64> = (0..1050).collect();
        let count: usize = ishape.iter().product();
        let mut idx: Vec<i64> = (0..count as i64)
            .map(|k| (k * 7 + k / 66) % 5 - (k % 3 == 0) as i64 * 5)
            .collect();
        let upd: Vec<i64> = (0..count as i64).map(|k| 1000 + k).collect();
        let rule = AxisRule {
            axis: 1,
            size: 5,
            negative_allowed: true,
        };
        let g = Geometry {
            data_shape: &shape,
            indices_shape: &ishape,
            rule: &rule,
        };
        let slabs = OwnedSlabs { first: 0, len: 350 };
        fn tiled<C: Combine<i64>>(
            data: &[i64],
            g: &Geometry<'_>,
            idx: &[i64],
            upd: &[i64],
            (slabs, tile): (OwnedSlabs, usize),
        ) -> Result<Vec<i64>, usize> {
            fresh_output(data.len(), |out| {
                let mut strip = Vec::with_capacity(g.data_shape[g.rule.axis] * tile);
                let task = (out, slabs, tile, &mut strip);
                apply_slabs_in_tiles::<i64, _, C, i64>(task, data, g, idx, upd)
            })
        }
        for tile in [4, 32, 70] {
            let mut expected = vec![0; data.len()];
            scatter::<i64, i64, AddOp, i64>(&data, &mut expected, &g, &idx, &upd).unwrap();
            let got = tiled::<AddOp>(&data, &g, &idx, &upd, (slabs, tile));
            assert_eq!(got, Ok(expected), "add, tile {tile}");
            let mut expected = vec![0; data.len()];
            scatter::<i64, i64, Overwrite, i64>(&data, &mut expected, &g, &idx, &upd).unwrap();
            let got = tiled::<Overwrite>(&data, &g, &idx, &upd, (slabs, tile));
            assert_eq!(got, Ok(expected), "overwrite, tile {tile}");
        }
        let bad = 66 * 8 + 66 * 3 + 40;
        idx[bad] = 5;
        let mut out = vec![0; data.len()];
        let found = apply_slabs_in_tiles::<i64, i64, AddOp, i64>(
            (&mut out, slabs, 32, &mut Vec::new()),
            &data,
            &g,
            &idx,
            &upd,
        );
        assert_eq!(found, Err(bad));
    }

    /// `out[idx[p, q, j], q, j] += upd[p, q, j]` in row-major order of the
    /// indices, straight from spec §2.6 for axis 0 of a rank-3 tensor.
    fn naive_axis0_add(
        data: &[i64],
        shape: [usize; 3],
        idx: &[i64],
        ishape: [usize; 3],
        upd: &[i64],
    ) -> Vec<i64> {
        let mut out = data.to_vec();
        for p in 0..ishape[0] {
            for q in 0..ishape[1] {
                for j in 0..ishape[2] {
                    let k = (p * ishape[1] + q) * ishape[2] + j;
                    let wrapped = if idx[k] < 0 {
                        idx[k] + shape[0] as i64
                    } else {
                        idx[k]
                    };
                    let row = usize::try_from(wrapped).unwrap();
                    out[(row * shape[1] + q) * shape[2] + j] += upd[k];
                }
            }
        }
        out
    }

    // Rayon's pool is out of reach of Miri (crossbeam-epoch).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn column_tasks_with_and_without_packed_strips_match_the_reference() {
        // One tile of columns, then rows two tiles and a part long (the
        // tile depends on the running CPU's caches).
        let tile = column_tile::<i64>(4096);
        check_column_tasks([5, 3, 200], [9, 2, 190]);
        check_column_tasks([1024, 4, 2 * tile + 6], [700, 3, 2 * tile + 2]);
    }

    /// Strips take at least 128 columns while an eighth of the last-level
    /// cache (or L2, if larger) holds them, never fewer than 16, and never
    /// more than those bounds allow.
    #[test]
    fn column_tiles_take_long_row_pieces_within_the_cache() {
        let level2 = cpu::core_caches().level2;
        let most = level2.max(cpu::last_level_cache_bytes() / 8);
        for rows in [1, 4, 256, 1024, 4096, 1 << 16, 1 << 22] {
            let tile = column_tile::<f32>(rows);
            let column_bytes = rows * 4;
            assert!(tile >= 16, "{rows} rows: {tile}");
            if MIN_STRIP_COLUMNS * column_bytes <= most {
                assert!(tile >= MIN_STRIP_COLUMNS, "{rows} rows: {tile}");
            }
            assert!(
                tile * column_bytes <= most.max(16 * column_bytes),
                "{rows} rows: {tile}"
            );
        }
    }

    fn check_column_tasks(shape: [usize; 3], ishape: [usize; 3]) {
        let data: Vec<i64> = (0..shape.iter().product::<usize>() as i64).collect();
        let count = ishape.iter().product::<usize>();
        // Many duplicate targets: more index rows than positions; every
        // third index in its negative form.
        let rows = shape[0] as i64;
        let idx: Vec<i64> = (0..count as i64)
            .map(|k| (k * 7 + k / 190) % rows - if k % 3 == 0 { rows } else { 0 })
            .collect();
        let upd: Vec<i64> = (0..count as i64).map(|k| k * 31 % 101 - 50).collect();
        let rule = AxisRule {
            axis: 0,
            size: shape[0],
            negative_allowed: true,
        };
        let g = Geometry {
            data_shape: &shape,
            indices_shape: &ishape,
            rule: &rule,
        };
        let expected = naive_axis0_add(&data, shape, &idx, ishape, &upd);
        for tasks in [1, 2, 3] {
            for packed_strips in [true, false] {
                let mut out = vec![0; data.len()];
                scatter_by_columns::<i64, i64, AddOp, i64>(
                    &data,
                    &mut out,
                    &g,
                    &idx,
                    &upd,
                    tasks,
                    packed_strips,
                )
                .unwrap();
                assert_eq!(
                    out, expected,
                    "tasks {tasks}, packed strips {packed_strips}"
                );
                let fresh = fresh_by_columns(&data, &g, &idx, &upd, tasks, packed_strips);
                assert_eq!(
                    fresh,
                    Ok(expected.clone()),
                    "fresh, tasks {tasks}, packed strips {packed_strips}"
                );
                // One bad index, in the first, a middle and the last tile.
                let (row_len, last) = (ishape[2], shape[2]);
                for bad in [0, row_len + 17, count / 2 + 1, count - 1] {
                    for value in [rows, -rows - 1] {
                        let mut wrong = idx.clone();
                        wrong[bad] = value;
                        let mut out = vec![0; data.len()];
                        let found = scatter_by_columns::<i64, i64, AddOp, i64>(
                            &data,
                            &mut out,
                            &g,
                            &wrong,
                            &upd,
                            tasks,
                            packed_strips,
                        );
                        assert_eq!(
                            found,
                            Err(bad),
                            "tasks {tasks}, packed {packed_strips}, {value} at {bad} (column {} of {last})",
                            bad % row_len
                        );
                    }
                }
            }
        }
    }

    /// Rows of 40 updates are walked in chunks of 16 with the streams
    /// prefetched ahead: every target and every reported position must
    /// still be the one of the plain row-major walk (spec §2.6), for the
    /// last axis and an outer one.
    #[test]
    fn row_walks_in_chunks_apply_every_update_and_name_the_first_bad_index() {
        let row = 40;
        for (axis, shape) in [(1, [3, row]), (0, [5, row])] {
            let ishape = [3, row];
            let size = shape[axis];
            let data: Vec<i64> = (0..(shape[0] * shape[1]) as i64).collect();
            let count = ishape[0] * ishape[1];
            // Negative and duplicate indices, in range.
            let idx: Vec<i64> = (0..count as i64)
                .map(|k| (k * 5 + k / 7) % (2 * size as i64) - size as i64)
                .collect();
            let upd: Vec<i64> = (0..count as i64).map(|k| 1000 + k).collect();
            let rule = AxisRule {
                axis,
                size,
                negative_allowed: true,
            };
            let g = Geometry {
                data_shape: &shape,
                indices_shape: &ishape,
                rule: &rule,
            };
            let mut expected = data.clone();
            for p in 0..ishape[0] {
                for j in 0..row {
                    let k = p * row + j;
                    let i = (idx[k] + size as i64) as usize % size;
                    let at = if axis == 1 { p * row + i } else { i * row + j };
                    expected[at] = upd[k];
                }
            }
            let mut out = vec![0; data.len()];
            scatter::<i64, i64, Overwrite, i64>(&data, &mut out, &g, &idx, &upd).unwrap();
            assert_eq!(out, expected, "axis {axis}");
            let fresh = fresh_output(data.len(), |out| {
                scatter::<i64, _, Overwrite, i64>(&data, out, &g, &idx, &upd)
            });
            assert_eq!(fresh, Ok(expected), "fresh, axis {axis}");
            for bad in [0, 15, 16, 17, 31, 32, 39, 40, 56, 79, 80, 119] {
                for value in [size as i64, -(size as i64) - 1] {
                    let mut wrong = idx.clone();
                    wrong[bad] = value;
                    let mut out = vec![0; data.len()];
                    let found =
                        scatter::<i64, i64, Overwrite, i64>(&data, &mut out, &g, &wrong, &upd);
                    assert_eq!(found, Err(bad), "axis {axis}, index {value} at {bad}");
                }
            }
        }
    }
}
