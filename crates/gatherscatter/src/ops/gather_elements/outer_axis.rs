//! GatherElements along an outer axis: output rows read a plane of data
//! (the axis times the dims after it) at stride, in column tiles, from
//! packed strips or in place, split among tasks by columns.

use std::ops::Range;

use super::kernels::RowGeometry;
use super::word_gather::{strided_row, StridedRow};
use crate::index::{position_shifted, AxisRule, IndexSource, KernelIndex, ReadIndices};
use crate::mem::cpu;
use crate::mem::parallel;
use crate::mem::prefetch::{
    asked_until, prefetch_indices_ahead, prefetch_items, prefetch_items_to_l2,
};
use crate::mem::uninit::Slot;
use crate::shape::RowBases;

/// Column tile for the outer-axis loop: rows of data picked at random are
/// latency-bound, so a strip of `tile` columns over the whole axis is
/// gathered for every output row before moving on, keeping that strip in
/// cache instead of missing on each element.
///
/// Read in place, a strip of about 2 MiB. Packed, the tile is cut so its
/// strip stays in a cache level, with rows of indices long enough to read
/// well, as measured on AMD EPYC family 26 model 2 (48 KiB L1, 1 MiB L2),
/// 16 MiB outputs along the middle axis of 256, one thread:
///
/// - a strip in two thirds of L1, when that tile is at least 32 columns
///   and covers at least half a row (the other half's indices are still
///   in L2 when its turn comes): int8 rows of 256, 22.8 -> 15.5 ms at
///   128 columns; float16 rows of 128, 11.3 -> 8.8 ms at 64; float32 rows
///   of 64, 6.5 -> 5.8 ms at 32. Float64 at 16 columns ran 2x slower;
/// - otherwise a strip of an eighth of L2 and at least 64 columns: int8
///   rows of 4096, 33 ms with 1 MiB strips -> 18 ms at 128 KiB (64 KiB
///   the same, 32 KiB 23 ms). W5 (float32 columns of 16 KiB) keeps 64
///   columns, 1 MiB: there 256 KiB strips of 16 columns, whose rows of
///   indices are read 128 bytes at a time, ran 2x slower.
pub(super) fn outer_axis_tile<W>(axis_size: usize, row_len: usize, packed: bool) -> usize {
    let word = std::mem::size_of::<W>().max(1);
    let column_bytes = axis_size.max(1) * word;
    if !packed {
        return ((2 << 20) / column_bytes).max(64 / word).max(16);
    }
    let in_level1 = cpu::columns_in_level1(column_bytes);
    if in_level1 >= 32 && in_level1 * 2 >= row_len {
        return in_level1;
    }
    level2_tile::<W>(axis_size)
}

/// Columns in a strip of an eighth of L2, and at least 64: the packed
/// tile where an L1 strip would be too narrow, and the measure of whether
/// a plane is read in place (a strip this wide covering the whole row).
pub(super) fn level2_tile<W>(axis_size: usize) -> usize {
    let column_bytes = axis_size.max(1) * std::mem::size_of::<W>().max(1);
    (cpu::core_caches().level2 / 8 / column_bytes).max(64)
}

/// Whether the outer-axis loop copies each column tile of data into a
/// contiguous strip before gathering from it. In place, the tile's lines
/// sit one data row apart; when that stride is a multiple of a large power
/// of two they all fall in a few cache sets and evict each other, so every
/// gathered element missed (W5, 16 KiB rows: packed, 2.3x faster on one
/// thread, 1.6x on two). Packing costs a copy of the tile, so it needs the rows that
/// read one strip to be consecutive (the axis is the second-to-last dim)
/// and numerous enough to repay it (at least a quarter of the axis), and a
/// data plane larger than L1.
pub(super) fn packs_strips<W>(
    indices_shape: &[usize],
    axis_size: usize,
    row_len: usize,
    axis: usize,
) -> bool {
    let plane_bytes = axis_size
        .saturating_mul(row_len)
        .saturating_mul(std::mem::size_of::<W>());
    axis + 2 == indices_shape.len()
        && indices_shape[axis].saturating_mul(4) >= axis_size
        && plane_bytes > 32 << 10
}

/// Rows ahead of the current one whose indices are prefetched: rows of an
/// outer-axis tile sit a whole output row apart, where the hardware
/// prefetchers do not follow.
const TILE_PREFETCH_ROWS: usize = 16;

/// Data planes (the axis times the dims after it) up to this size, too
/// small to be packed into strips (see [`packs_strips`]), are asked into
/// L2 one plane ahead: the rows that read a plane pick its elements at
/// random, where the hardware prefetchers do not follow, so each line
/// waited on memory. The plane after the current one in memory is the one
/// the next rows read when the dims before the axis are walked in order.
/// (A [4096, 256, 4] float32 along the middle axis, 4 KiB planes.)
const NEXT_PLANE_MAX_BYTES: usize = 32 << 10;

/// Outer axis, rows no wider than a tile and read in place: the rows that
/// share a data base (consecutive ones) are gathered as one run, their
/// indices read in one go, instead of a tile call per row, whose set-up
/// cost more than the row's few elements (a [4096, 256, 4] float32 along
/// the middle axis, rows of 4). `out` holds whole rows from flat position
/// `first` on.
///
/// The next plane is asked for ahead: up to [`NEXT_PLANE_MAX_BYTES`], whole
/// into L2 as the run starts; with [`RowGeometry::plane_ahead`], a piece
/// per row into L1, so that its lines arrive over the run and the first
/// rows of the next run do not wait on memory for each element.
pub(super) fn gather_whole_rows<W: Clone + 'static, O: Slot<W> + 'static, R: ReadIndices>(
    data: &[W],
    geometry: &RowGeometry,
    rule: &AxisRule,
    mut bases: RowBases,
    (indices, first): (&mut R, usize),
    out: &mut [O],
) -> std::result::Result<(), usize> {
    let row_len = geometry.row_len;
    let stride = geometry.axis_stride;
    let plane = geometry.axis_size * stride;
    let vector = strided_row::<W, O, R::Index>(geometry.strided);
    let fetch_planes =
        std::mem::size_of_val(data.get(..plane).unwrap_or(data)) <= NEXT_PLANE_MAX_BYTES;
    let ahead_per_row = geometry.plane_ahead;
    let shift = rule.negative_shift();
    let mut row = 0;
    let rows = out.len() / row_len;
    while let Some((base, run)) = bases.next_run(rows - row) {
        let next = data.get(base + plane..).unwrap_or_default();
        let next = next.get(..plane).unwrap_or(next);
        if fetch_planes && ahead_per_row == 0 {
            prefetch_items_to_l2(next);
        }
        let at = first + row * row_len;
        let dst = &mut out[row * row_len..(row + run) * row_len];
        // Not cut at `base + plane`: indices narrower than data after the
        // axis give bases past the plane's start, read element by element.
        let from_base = data.get(base..).unwrap_or_default();
        indices.try_chunks(at..at + dst.len(), |offset, idx| {
            let dst = &mut dst[offset..offset + idx.len()];
            // Widened chunks may start and end inside a row.
            let mut column = offset % row_len;
            let mut done = 0;
            while done < dst.len() {
                if column == 0 && ahead_per_row > 0 {
                    let r = (offset + done) / row_len;
                    let piece = next.get(r * ahead_per_row..).unwrap_or_default();
                    prefetch_items(piece.get(..ahead_per_row).unwrap_or(piece));
                }
                let width = (row_len - column).min(dst.len() - done);
                let piece = &mut dst[done..done + width];
                let values = &idx[done..done + width];
                gather_row_piece(
                    from_base,
                    (stride, rule.size),
                    (shift, column),
                    values,
                    piece,
                    (vector, geometry.index_ahead.then_some(true)),
                )
                .map_err(|j| at + offset + done + j)?;
                done += width;
                column = 0;
            }
            Ok::<_, usize>(())
        })?;
        row += run;
    }
    Ok(())
}

/// `dst[j] = from_base[i_j * stride + column + j]` for the positions `i_j`
/// that `indices` name; `Err(j)` at the first bad one. `asks`: `None`,
/// the loops leave the index stream to the hardware prefetchers;
/// `Some(then_next)`, they ask for the indices ahead, and past the piece's
/// end too when the indices read next follow these in memory
/// ([`asked_until`]; a tile's next piece is a row further on). One call a row:
/// a column counter wrapping at the row's end, carried across rows, ran
/// 1.15x slower (int8 rows of 16 along the middle axis).
#[inline]
fn gather_row_piece<W: Clone, O: Slot<W>, X: KernelIndex>(
    from_base: &[W],
    (stride, size): (usize, usize),
    (shift, column): (i64, usize),
    indices: &[X],
    dst: &mut [O],
    (vector, asks): (Option<StridedRow<W, O, X>>, Option<bool>),
) -> std::result::Result<(), usize> {
    let column = from_base.get(column..).unwrap_or_default();
    let asks = asks.map_or(0, |then_next| asked_until::<X>(indices.len(), then_next));
    // The vector loop writes a prefix; the scalar loop takes the rest (the
    // tail, or the group holding a bad index, to name it).
    let done = match vector {
        // Fewer than a group (four 8-byte words, else eight): the call
        // would write nothing.
        Some(gather) if dst.len() >= 32 / std::mem::size_of::<W>().clamp(4, 8) => {
            gather(column, (stride, size), indices, shift, dst, asks)
        }
        _ => 0,
    };
    let rest = dst.get_mut(done..).unwrap_or_default();
    let values = indices.get(done..).unwrap_or_default();
    if asks <= done {
        return scalar_piece(column, (stride, size), shift, (values, done), rest);
    }
    // A line of indices asked for per 8 elements, outside the element loop.
    for (k, (dst, values)) in rest.chunks_mut(8).zip(values.chunks(8)).enumerate() {
        let j = done + 8 * k;
        if j < asks {
            prefetch_indices_ahead(indices.as_ptr().wrapping_add(j));
        }
        scalar_piece(column, (stride, size), shift, (values, j), dst)?;
    }
    Ok(())
}

/// `dst[k] = column[i_k * stride + first + k]` for the positions `i_k`
/// that `indices` name; `Err(first + k)` at the first bad one.
#[inline(always)]
fn scalar_piece<W: Clone, O: Slot<W>, X: KernelIndex>(
    column: &[W],
    (stride, size): (usize, usize),
    shift: i64,
    (indices, first): (&[X], usize),
    dst: &mut [O],
) -> std::result::Result<(), usize> {
    for (j, (d, &v)) in (first..).zip(dst.iter_mut().zip(indices)) {
        let i = position_shifted(v.wide(), shift);
        if i >= size {
            return Err(j);
        }
        d.put(column[i * stride + j].clone());
    }
    Ok(())
}

/// Gather `columns` of consecutive output rows (`pieces`, the rows' slices
/// of those columns) whose data bases `bases` lists; `(indices, first)`:
/// the indices, whose whole rows from flat position `first` on are these
/// rows'. `Err(k)` at the first bad index, at flat position `k`.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_tile<'o, W: Clone + 'static, O: Slot<W> + 'static, R: ReadIndices>(
    data: &[W],
    geometry: &RowGeometry,
    rule: &AxisRule,
    bases: RowBases,
    (indices, first): (&mut R, usize),
    columns: Range<usize>,
    pieces: impl Iterator<Item = &'o mut [O]>,
    strip: &mut Strip<W>,
) -> std::result::Result<(), usize> {
    let row_len = geometry.row_len;
    let width = columns.len();
    let (shift, size) = (rule.negative_shift(), rule.size);
    let vector = strided_row::<W, O, R::Index>(geometry.strided);
    // Whole rows follow one another: the next indices come right after.
    let asks = geometry.index_ahead.then_some(width == row_len);
    for (r, (base, dst)) in bases.zip(pieces).enumerate() {
        let at = first + r * row_len + columns.start;
        if width < row_len {
            // A tile's rows of indices are a whole row apart; whole rows
            // follow one another, where the hardware prefetchers run ahead.
            let ahead = at + TILE_PREFETCH_ROWS * row_len;
            indices.prefetch(ahead..ahead + width);
        }
        // A packed strip holds the tile's columns from 0, `width` apart.
        let (from_base, stride, column) = match strip.packed(data, geometry, base, &columns) {
            Some(packed) => (packed, width, 0),
            None => (
                data.get(base..).unwrap_or_default(),
                geometry.axis_stride,
                columns.start,
            ),
        };
        indices.try_chunks(at..at + width, |offset, idx| {
            let dst = &mut dst[offset..offset + idx.len()];
            gather_row_piece(
                from_base,
                (stride, size),
                (shift, column + offset),
                idx,
                dst,
                (vector, asks),
            )
            .map_err(|j| at + offset + j)
        })?;
    }
    Ok(())
}

/// A contiguous copy of one column tile of data along the whole axis
/// (`strip[i * width + j]` = column `j` of the tile at axis position `i`),
/// kept while consecutive rows read the same tile. No buffer when the
/// geometry does not pack or the memory is not there: the tile is then read
/// in place, which gives the same values.
pub(super) struct Strip<W> {
    buffer: Option<Vec<W>>,
    /// Data base and columns of the tile the buffer holds.
    holds: Option<(usize, Range<usize>)>,
}

impl<W: Clone> Strip<W> {
    pub(super) fn new(geometry: &RowGeometry) -> Strip<W> {
        let buffer = geometry.packed.then(|| {
            let mut buffer = Vec::new();
            let len = geometry.axis_size.checked_mul(geometry.tile)?;
            buffer.try_reserve_exact(len).ok()?;
            Some(buffer)
        });
        Strip {
            buffer: buffer.flatten(),
            holds: None,
        }
    }

    /// The packed tile `columns` of the axis strip at data `base`, copied
    /// now unless the buffer already holds it.
    #[inline]
    fn packed(
        &mut self,
        data: &[W],
        geometry: &RowGeometry,
        base: usize,
        columns: &Range<usize>,
    ) -> Option<&[W]> {
        let buffer = self.buffer.as_mut()?;
        if self.holds.as_ref() != Some(&(base, columns.clone())) {
            buffer.clear();
            let width = columns.len();
            let stride = geometry.axis_stride;
            for i in 0..geometry.axis_size {
                let from = base + i * stride + columns.start;
                if let Some(ahead) = data.get(from + TILE_PREFETCH_ROWS * stride..) {
                    prefetch_items(ahead.get(..width).unwrap_or(ahead));
                }
                buffer.extend_from_slice(&data[from..from + width]);
            }
            self.holds = Some((base, columns.clone()));
        }
        Some(buffer)
    }
}

/// Outer axis on several tasks: each owns a range of columns of every
/// output row and reads only those columns of data: for data of fewer
/// planes (the positions before the axis) than tasks. (Split by rows, every
/// task would walk the whole axis strip of its plane: on one plane at 2
/// threads, 8 tasks read the data 8 times.) Column tiles as in the one-task
/// loop.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_outer_by_columns<
    W: Clone + Send + Sync + 'static,
    O: Slot<W> + 'static,
    S: IndexSource,
>(
    data: &[W],
    data_shape: &[usize],
    indices_shape: &[usize],
    indices: S,
    rule: &AxisRule,
    geometry: &RowGeometry,
    out: &mut [O],
    tasks: usize,
) -> std::result::Result<(), usize> {
    let row_len = geometry.row_len;
    let cuts: Vec<usize> = (0..=tasks).map(|t| t * row_len / tasks).collect();
    let pieces = parallel::column_pieces(out, row_len, &cuts);
    parallel::try_for_each_list(pieces, |t, mut owned: Vec<&mut [O]>| {
        let (c0, c1) = (cuts[t], cuts[t + 1]);
        let mut strip = Strip::new(geometry);
        let mut indices = indices.reader();

        for t0 in (c0..c1).step_by(geometry.tile) {
            let columns = t0..(t0 + geometry.tile).min(c1);
            let (t0, t1) = (columns.start - c0, columns.end - c0);
            let pieces = owned.iter_mut().map(|piece| &mut piece[t0..t1]);
            let bases = RowBases::new(indices_shape, data_shape, rule.axis);
            gather_tile(
                data,
                geometry,
                rule,
                bases,
                (&mut indices, 0),
                columns,
                pieces,
                &mut strip,
            )?;
        }
        Ok(())
    })
}
