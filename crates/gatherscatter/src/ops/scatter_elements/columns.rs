//! Column tasks: when few slabs hold long rows (an outer axis), each task
//! owns a range of columns of every output row and applies every index
//! row's share of it, in order, a tile of columns at a time, packed into a
//! contiguous strip or in place. Same order of updates per cell as the
//! serial loop, so the result is the same for any split (spec §2.6).

use super::rows::Geometry;
use crate::index::{AxisRule, KernelIndex};
use crate::mem::cpu;
use crate::mem::parallel;
use crate::mem::prefetch::prefetch_items;
use crate::mem::uninit::Slot;
use crate::reduction::Combine;
use crate::shape::{strides, IndexRows, RowBases};

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
pub(super) fn scatter_by_columns<
    W: Clone + Send + Sync,
    O: Slot<W>,
    C: Combine<W>,
    X: KernelIndex,
>(
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
pub(super) struct ColumnTask<'a, O> {
    pub columns: std::ops::Range<usize>,
    pub owned: Vec<&'a mut [O]>,
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
    pub(super) fn apply_packed<W: Clone, C: Combine<W>, X: KernelIndex>(
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

/// [`scatter_by_columns`] with `AddOp` into a fresh output (see
/// `super::fresh_output`).
#[cfg(test)]
pub(super) fn fresh_by_columns(
    data: &[i64],
    g: &Geometry<'_>,
    idx: &[i64],
    upd: &[i64],
    tasks: usize,
    packed_strips: bool,
) -> Result<Vec<i64>, usize> {
    super::fresh_output(data.len(), |out| {
        scatter_by_columns::<i64, _, crate::reduction::AddOp, i64>(
            data,
            out,
            g,
            idx,
            upd,
            tasks,
            packed_strips,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduction::AddOp;

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
        let g = Geometry::new(&shape, &ishape, &rule);
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
}
