//! The ScatterElements kernel: copy `data` into the output, then apply the
//! updates in row-major order of `indices`, checking each index as it is used.
//!
//! Two updates can only meet at a target if they share every coordinate off
//! the axis. So the output is split by off-axis coordinates, each task owning
//! its share and walking the updates that land there in the same ascending
//! order as a serial loop: results are bit-identical for any thread count
//! (SPEC §2.6–2.7).

use rayon::prelude::*;

use crate::index::AxisRule;
use crate::ops::parallel;
use crate::reduction::Combine;
use crate::shape::{strides, unravel, RowBases};

/// Shapes of one call; indices' shape is checked against data's.
pub(crate) struct Geometry<'a> {
    pub data_shape: &'a [usize],
    pub indices_shape: &'a [usize],
    pub rule: &'a AxisRule,
}

/// A column split pays only when each task's piece of a row is this long.
const MIN_COLUMNS_PER_TASK: usize = 64;

/// `out = data`, then every update combined into its target. `Err(p)`: the
/// index at flat position `p` is out of range (out is then partly written).
pub(crate) fn scatter<W: Clone + Send + Sync, C: Combine<W>>(
    data: &[W],
    out: &mut [W],
    g: &Geometry<'_>,
    indices: &[i64],
    updates: &[W],
) -> Result<(), usize> {
    let rank = g.data_shape.len();
    let axis = g.rule.axis;
    let slab = g.data_shape[axis..].iter().product::<usize>();
    let slabs = out.len().checked_div(slab).unwrap_or(0);
    let last = g.data_shape[rank - 1];
    // An empty output with indices still checks them (an empty axis takes none).
    let tasks = parallel::tasks(std::mem::size_of_val(out), out.len().max(1));
    if indices.is_empty() {
        out.clone_from_slice(data);
        return Ok(());
    }
    // Few slabs but long rows: each task owns a range of the last dim in
    // every output row (W7-like fan-in along an outer axis).
    let by_columns =
        axis < rank - 1 && last >= MIN_COLUMNS_PER_TASK * tasks && slabs < tasks.max(2);
    if slabs >= tasks && !by_columns {
        // Split by the dims before the axis: each task owns whole slabs.
        let per_task = slabs.div_ceil(tasks);
        return parallel::try_for_each_chunk(out, per_task * slab, |task, dst| {
            let slabs = OwnedSlabs {
                first: task * per_task,
                len: slab,
            };
            copy_and_apply_slabs::<W, C>(dst, slabs, data, g, indices, updates)
        });
    }
    if by_columns {
        return scatter_by_columns::<W, C>(data, out, g, indices, updates, tasks);
    }
    out.clone_from_slice(data);
    apply_rows::<W, C>(out, 0, g, RowRange::all(g), indices, updates)
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
fn copy_and_apply_slabs<W: Clone, C: Combine<W>>(
    dst: &mut [W],
    slabs: OwnedSlabs,
    data: &[W],
    g: &Geometry<'_>,
    indices: &[i64],
    updates: &[W],
) -> Result<(), usize> {
    const STEP_BYTES: usize = 256 << 10;
    let slab_bytes = slabs.len * std::mem::size_of::<W>().max(1);
    let per_step = (STEP_BYTES / slab_bytes.max(1)).max(1);
    for (step, part) in dst.chunks_mut(per_step * slabs.len).enumerate() {
        let from = slabs.first + step * per_step;
        let offset = from * slabs.len;
        part.clone_from_slice(&data[offset..offset + part.len()]);
        let rows = RowRange::for_slabs(g, from, from + part.len() / slabs.len);
        apply_rows::<W, C>(part, offset, g, rows, indices, updates)?;
    }
    Ok(())
}

/// Columns per pass of the column-split loop: updates along an outer axis
/// land on random output rows, so all index rows are walked once per strip
/// of this many columns, keeping the strip's targets (about 1 MiB) in cache.
fn column_tile<W>(rows_per_slab: usize) -> usize {
    const STRIP_BYTES: usize = 1 << 20;
    (STRIP_BYTES / (rows_per_slab.max(1) * std::mem::size_of::<W>().max(1))).max(16)
}

/// Index rows (runs of the indices' last dim) to apply, in order.
#[derive(Clone, Copy)]
struct RowRange {
    first: usize,
    end: usize,
}

impl RowRange {
    fn all(g: &Geometry<'_>) -> RowRange {
        let row_len = g.indices_shape[g.indices_shape.len() - 1];
        let count = g.indices_shape.iter().product::<usize>();
        RowRange {
            first: 0,
            end: count.checked_div(row_len).unwrap_or(0),
        }
    }

    /// The index rows whose targets lie in data slabs `[from, to)`: the
    /// slabs are the data's dims before the axis, and index rows come in
    /// runs of `rows_per_prefix` per prefix of the indices' own such dims.
    fn for_slabs(g: &Geometry<'_>, from: usize, to: usize) -> RowRange {
        let axis = g.rule.axis;
        let rank = g.indices_shape.len();
        let prefixes = g.indices_shape[..axis].iter().product::<usize>();
        let rows_per_prefix = g.indices_shape[axis..rank - 1].iter().product::<usize>();
        let slab_of = |prefix: usize| -> usize {
            let coords = unravel(prefix, &g.indices_shape[..axis]);
            coords
                .iter()
                .zip(&g.data_shape[..axis])
                .fold(0, |acc, (&c, &d)| acc * d + c)
        };
        // slab_of is increasing, as indices' dims are no larger than data's.
        let first_at_least = |slab: usize| -> usize {
            let (mut lo, mut hi) = (0, prefixes);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if slab_of(mid) < slab {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        RowRange {
            first: first_at_least(from) * rows_per_prefix,
            end: first_at_least(to) * rows_per_prefix,
        }
    }
}

/// Apply index rows `rows` to `out`, which holds the output from element
/// `offset` on.
fn apply_rows<W: Clone, C: Combine<W>>(
    out: &mut [W],
    offset: usize,
    g: &Geometry<'_>,
    rows: RowRange,
    indices: &[i64],
    updates: &[W],
) -> Result<(), usize> {
    let rank = g.indices_shape.len();
    let row_len = g.indices_shape[rank - 1];
    let axis = g.rule.axis;
    let bases = RowBases::new(g.indices_shape, g.data_shape, axis).starting_at(rows.first);
    let axis_stride = strides(g.data_shape)[axis];
    for (row, base) in (rows.first..rows.end).zip(bases) {
        let start = row * row_len;
        let idx = &indices[start..start + row_len];
        let upd = &updates[start..start + row_len];
        let target = &mut out[base - offset..];
        if axis == rank - 1 {
            for (j, (&v, u)) in idx.iter().zip(upd).enumerate() {
                let cell = target[..g.rule.size].get_mut(g.rule.position(v));
                C::combine(cell.ok_or(start + j)?, u);
            }
        } else {
            for (j, (&v, u)) in idx.iter().zip(upd).enumerate() {
                let i = g.rule.position(v);
                if i >= g.rule.size {
                    return Err(start + j);
                }
                C::combine(&mut target[i * axis_stride + j], u);
            }
        }
    }
    Ok(())
}

/// Each task owns columns `[c0, c1)` of every output row (rows of the last
/// dim), copies its pieces of `data`, then applies every index row's share
/// of those columns, in order.
fn scatter_by_columns<W: Clone + Send + Sync, C: Combine<W>>(
    data: &[W],
    out: &mut [W],
    g: &Geometry<'_>,
    indices: &[i64],
    updates: &[W],
    tasks: usize,
) -> Result<(), usize> {
    let rank = g.data_shape.len();
    let last = g.data_shape[rank - 1];
    let cuts: Vec<usize> = (0..=tasks).map(|t| t * last / tasks).collect();
    let pieces = parallel::column_pieces(out, last, &cuts);
    let row_len = g.indices_shape[rank - 1];
    let axis_stride = strides(g.data_shape)[g.rule.axis];
    // Strides in output rows: an index row's base is a row start (last
    // coordinate 0), and the axis is before the last dim.
    let axis_rows = axis_stride / last;
    let tile = column_tile::<W>(g.data_shape[g.rule.axis..rank - 1].iter().product());
    pieces
        .into_par_iter()
        .enumerate()
        .try_for_each(|(t, mut owned)| {
            let (c0, c1) = (cuts[t], cuts[t + 1]);
            for (r, piece) in owned.iter_mut().enumerate() {
                piece.clone_from_slice(&data[r * last + c0..r * last + c1]);
            }
            let rows = RowRange::all(g);
            let bases = RowBases::new(g.indices_shape, g.data_shape, g.rule.axis);
            let (c0, c1) = (c0.min(row_len), c1.min(row_len));
            for j0 in (c0..c1).step_by(tile) {
                let j1 = (j0 + tile).min(c1);
                for (row, base) in (rows.first..rows.end).zip(bases.clone()) {
                    let start = row * row_len;
                    let idx = &indices[start + j0..start + j1];
                    let upd = &updates[start + j0..start + j1];
                    let base_row = base / last;
                    for (j, (&v, u)) in idx.iter().zip(upd).enumerate() {
                        let i = g.rule.position(v);
                        if i >= g.rule.size {
                            return Err(start + j0 + j);
                        }
                        C::combine(&mut owned[base_row + i * axis_rows][j0 + j - cuts[t]], u);
                    }
                }
            }
            Ok(())
        })
}
