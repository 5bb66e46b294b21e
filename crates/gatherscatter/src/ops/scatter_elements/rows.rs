//! The ScatterElements kernel: copy `data` into the output, then apply the
//! updates in row-major order of `indices`, checking each index as it is used.
//!
//! Two updates can only meet at a target if they share every coordinate off
//! the axis. So the output is split by off-axis coordinates, each task owning
//! its share and walking the updates that land there in the same ascending
//! order as a serial loop: results are bit-identical for any thread count
//! (spec §2.6–2.7).

use std::ops::Range;

use super::columns::{scatter_by_columns, ColumnTask};
use super::last_axis::{copy_and_apply_rows, MatchingRows};
use super::measured_streams::Streams;
use super::split::scatter_split;
use crate::index::{
    first_beyond, matching_last_axis_rows, position_shifted, takes_small_path, try_for_each_target,
    AxisRule, KernelIndex,
};
use crate::mem::cpu;
use crate::mem::knobs;
use crate::mem::parallel;
use crate::mem::prefetch::{
    prefetch_item, prefetch_streams, PREFETCH_TARGETS_ABOVE, STREAM_AHEAD, STREAM_CHUNK,
    TARGET_AHEAD,
};
use crate::mem::uninit::Slot;
use crate::reduction::Combine;
use crate::shape::{merge_dims_after_axis, strides, IndexRows, RowBases};

/// Shapes of one call; indices' shape is checked against data's.
pub(crate) struct Geometry<'a> {
    pub data_shape: &'a [usize],
    pub indices_shape: &'a [usize],
    pub rule: &'a AxisRule,
    /// The row loop asks for the index and update streams ahead
    /// ([`prefetch_streams`]); [`scatter`] sets it per call from the
    /// `stream_fetch` knob ([`super::measured_streams`]).
    pub stream_ahead: bool,
}

impl<'a> Geometry<'a> {
    /// The shapes of a call, its streams asked for ahead.
    pub(crate) fn new(
        data_shape: &'a [usize],
        indices_shape: &'a [usize],
        rule: &'a AxisRule,
    ) -> Geometry<'a> {
        Geometry {
            data_shape,
            indices_shape,
            rule,
            stream_ahead: true,
        }
    }
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
        let Some((data_row, row_len)) =
            matching_last_axis_rows(g.data_shape, g.indices_shape, g.rule)
        else {
            return try_for_each_target(g.data_shape, g.indices_shape, g.rule, indices, |k, at| {
                C::combine(&mut out[at], &updates[k])
            });
        };
        let shift = g.rule.negative_shift();
        let rows = out
            .chunks_exact_mut(data_row)
            .zip(indices.chunks_exact(row_len));
        for ((out_row, idx_row), upd_row) in rows.zip(updates.chunks_exact(row_len)) {
            for (&v, u) in idx_row.iter().zip(upd_row) {
                match out_row.get_mut(position_shifted(v.wide(), shift)) {
                    Some(target) => C::combine(target, u),
                    // Found again by position, as GatherElements' small walk.
                    None => return Err(first_beyond(indices, shift, data_row)),
                }
            }
        }
        return Ok(());
    }
    // An axis followed only by size-1 dims is walked as the last axis, and
    // the dims after an outer axis, when data and indices agree on them, as
    // one: fewer, longer rows, whose column split and strips then span
    // only the axis's rows (a [256, 64, 128] float64 overwrite along axis
    // 0 had packed strips of all 16384 rows).
    let (data_shape, indices_shape) =
        merge_dims_after_axis(g.data_shape, g.indices_shape, g.rule.axis);
    let rank = data_shape.len();
    let out_bytes = std::mem::size_of_val(out);
    // An empty output with indices still checks them (an empty axis takes none).
    let tasks = parallel::tasks(out_bytes, out.len().max(1));
    if indices.is_empty() {
        O::init_from(out, data);
        return Ok(());
    }
    let streams = Streams::choose(
        knobs::in_force().stream_fetch,
        (std::mem::size_of::<W>(), std::mem::size_of::<X>()),
        (indices_shape[rank - 1], g.rule.axis + 1 == rank),
        out_bytes,
        tasks,
    );
    let g = &Geometry {
        stream_ahead: streams.ahead(),
        ..Geometry::new(&data_shape, &indices_shape, g.rule)
    };
    let applied = scatter_merged::<W, O, C, X>(data, out, g, indices, updates, tasks);
    if applied.is_ok() {
        streams.done(out_bytes);
    }
    applied
}

/// [`scatter`] past its small path, on shapes whose dims after the axis
/// are merged, `tasks` tasks at most.
fn scatter_merged<W: Clone + Send + Sync, O: Slot<W>, C: Combine<W>, X: KernelIndex>(
    data: &[W],
    out: &mut [O],
    g: &Geometry<'_>,
    indices: &[X],
    updates: &[W],
    tasks: usize,
) -> Result<(), usize> {
    let rank = g.data_shape.len();
    let axis = g.rule.axis;
    let slab = g.data_shape[axis..].iter().product::<usize>();
    let slabs = out.len().checked_div(slab).unwrap_or(0);
    let last = g.data_shape[rank - 1];
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
        // Along the last axis, a slab is a row: index row `r` lands in
        // data row `r` where the other dims match.
        let matching = matching_last_axis_rows(g.data_shape, g.indices_shape, g.rule);
        if let Some((data_row, row_len)) = matching {
            return parallel::try_for_each_chunk(out, per_task * slab, |task, dst| {
                let rows = MatchingRows {
                    first: task * per_task,
                    data_row,
                    row_len,
                    negative_shift: g.rule.negative_shift(),
                    stream_ahead: g.stream_ahead,
                };
                copy_and_apply_rows::<W, O, C, X>(dst, rows, data, indices, updates)
            });
        }
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
        let slab_indices_shape = [rows.end - rows.first, row_len];
        let slab_g = Geometry {
            stream_ahead: g.stream_ahead,
            ..Geometry::new(&slab_shape, &slab_indices_shape, &slab_rule)
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
    let whole_rows = span.start.is_multiple_of(row_len) && span.end.is_multiple_of(row_len);
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
            if g.stream_ahead {
                prefetch_streams(indices, updates, from + first + STREAM_AHEAD);
            }
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

#[cfg(test)]
mod tests;
