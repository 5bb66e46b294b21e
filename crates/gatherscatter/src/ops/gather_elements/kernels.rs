//! GatherElements' kernels: row by row, in tiles along an outer axis, or
//! with the AVX2 gathers along the last one.

use crate::dtype::Element;
use crate::error::Result;
use crate::index::{
    first_bad_index, first_beyond, matching_last_axis_rows, position_shifted, takes_small_path,
    try_for_each_target, AxisRule, InPlace, IndexElement, IndexSource, KernelIndex, ReadIndices,
    WideIndices,
};
use crate::mem::cpu;
use crate::mem::knobs;
use crate::mem::parallel;
use crate::mem::prefetch::{load_lines, prefetch_items, prefetch_items_to_l2, LINE};
use crate::mem::stream::{self, store_fence};
use crate::mem::uninit::{self, Slot};
use crate::ops::alloc_output;
use crate::shape::{merge_dims_after_axis, strides, RowBases};
use crate::tensor::{TypedTensor, TypedView};

use std::mem::MaybeUninit;
use std::ops::Range;

use super::measured_fetch::Fetch;
use super::measured_words::WordLoop;
use super::word_gather::{strided_row, vector_row, StridedRow, VectorRow};
use super::ElementsPlan;

pub(super) fn execute<T: Element, I: IndexElement>(
    data: TypedView<'_, T>,
    indices: TypedView<'_, I>,
    plan: &ElementsPlan,
) -> Result<TypedTensor<T>> {
    let write = |out: &mut [MaybeUninit<T::Word>]| fill_words(data, indices, plan, out);
    // SAFETY: `fill_words` returns `Ok` only after writing every slot: the
    // kernel hands each task whole rows or whole column ranges of every
    // row, and each run writes each slot of its range or returns `Err`.
    #[allow(unsafe_code)]
    let out = match unsafe { uninit::new_vec_written::<T, _>(plan.output_len, write) } {
        Some(written) => written?,
        None => {
            let mut out = alloc_output::<T>(plan.output_len)?;
            fill(data, indices, plan, &mut out)?;
            out
        }
    };
    Ok(TypedTensor::from_parts_unchecked(indices.shape(), out))
}

/// Write the whole output into `out` (the indices' length), checking each
/// index as it is used: one pass over the indices instead of a check pass
/// and a copy pass, which matters because here they are as large as the output.
pub(super) fn fill<T: Element, I: IndexElement>(
    data: TypedView<'_, T>,
    indices: TypedView<'_, I>,
    plan: &ElementsPlan,
    out: &mut [T],
) -> Result<()> {
    fill_words(data, indices, plan, T::as_words_mut(out))
}

/// [`fill`] through the output's words, initialised or not.
fn fill_words<T: Element, I: IndexElement, O: Slot<T::Word> + 'static>(
    data: TypedView<'_, T>,
    indices: TypedView<'_, I>,
    plan: &ElementsPlan,
    out: &mut [O],
) -> Result<()> {
    if plan.output_len == 0 {
        return Ok(());
    }
    let words = T::as_words(data.data());
    let shapes = (data.shape(), indices.shape());
    let values = indices.data();
    // `i64`, `i32` and `u16` are read in place; the other index types are
    // widened to `i64` a chunk at a time. Widened so, `i32` and `u16` had
    // run slower than `i64` indices of twice their bytes (a [256, 64, 256]
    // float32 gather along the last axis from Python, one / two threads:
    // int32 2.3 / 1.23 ms -> 1.5 / 0.83, uint16 2.15 / 1.16 -> 1.4 / 0.75,
    // int64 1.85 / 1.0; along the middle axis of [256, 256, 64], int32
    // 5.7 / 3.0 -> 5.0 / 2.65, uint16 5.45 / 2.75 -> 4.05 / 2.15). `i64`
    // through the widening reader (borrowed, but a virtual call a row
    // piece) ran outer-axis gathers 3-10% slower (in process, the middle
    // axis of [256, 256, 64] float32: 5.35-5.55 / 3.1-3.15 ms -> 4.8-4.9 /
    // 2.9-3.1; int8 rows of 16: 14.25 / 7.7 -> 13.5 / 6.9). Each index
    // type costs a copy of every kernel, about 0.76 MB of library.
    let found = if let Some(same) = I::as_i64_slice(values) {
        gather_rows(words, shapes, InPlace(same), &plan.rule, out)
    } else if let Some(same) = I::as_i32_slice(values) {
        gather_rows(words, shapes, InPlace(same), &plan.rule, out)
    } else if let Some(same) = I::as_u16_slice(values) {
        gather_rows(words, shapes, InPlace(same), &plan.rule, out)
    } else {
        gather_rows(words, shapes, WideIndices::new(&values), &plan.rule, out)
    };
    found.map_err(|found| first_bad_index(indices, plan.rule, found))
}

/// Requires a non-empty output and an indices shape checked by
/// [`check_indices_shape`]. Rows of the output (its last dim) are
/// independent: contiguous ranges of rows go to separate tasks. Returns the
/// flat position of a bad index if a task meets one.
fn gather_rows<W: Clone + Send + Sync + 'static, O: Slot<W> + 'static, S: IndexSource>(
    data: &[W],
    (data_shape, indices_shape): (&[usize], &[usize]),
    indices: S,
    rule: &AxisRule,
    out: &mut [O],
) -> std::result::Result<(), usize> {
    if takes_small_path(out.len(), out.len()) {
        return indices.with_all_small(|idx| {
            let Some((data_row, row_len)) =
                matching_last_axis_rows(data_shape, indices_shape, rule)
            else {
                return try_for_each_target(data_shape, indices_shape, rule, idx, |k, at| {
                    out[k].put(data[at].clone())
                });
            };
            let shift = rule.negative_shift();
            let rows = out.chunks_exact_mut(row_len).zip(idx.chunks_exact(row_len));
            for ((out_row, idx_row), data_row) in rows.zip(data.chunks_exact(data_row)) {
                for (slot, &v) in out_row.iter_mut().zip(idx_row) {
                    match data_row.get(position_shifted(v.wide(), shift)) {
                        Some(value) => slot.put(value.clone()),
                        // Found again by position: a count kept beside the
                        // loop's pointers spilled one of them to the stack.
                        None => return Err(first_beyond(idx, shift, data_row.len())),
                    }
                }
            }
            Ok(())
        });
    }
    let axis = rule.axis;
    let (data_shape, indices_shape) = merge_dims_after_axis(data_shape, indices_shape, axis);
    let (data_shape, indices_shape) = (&data_shape[..], &indices_shape[..]);
    let row_len = indices_shape[indices_shape.len() - 1];
    let rows = out.len() / row_len;
    let innermost = axis == indices_shape.len() - 1;
    let tuning = knobs::in_force();
    let packed = !innermost && packs_strips::<W>(indices_shape, rule.size, row_len, axis);
    let tasks = parallel::tasks(std::mem::size_of_val(out), rows);
    let out_bytes = std::mem::size_of_val(out);
    let row_bytes = rule.size * std::mem::size_of::<W>();
    let axis_stride = strides(data_shape)[axis];
    let knob = tuning.word_gather;
    let words = innermost.then(|| {
        WordLoop::<VectorRow<W, O, S::Index>>::last_axis(knob, row_bytes, out_bytes, tasks)
    });
    let vector = words.as_ref().is_some_and(|w| w.vector.is_some());
    let strided = (!innermost).then(|| {
        let plane_bytes = row_bytes.saturating_mul(axis_stride);
        WordLoop::<StridedRow<W, O, S::Index>>::outer_axis(knob, plane_bytes, out_bytes, tasks)
    });
    // While the loop itself is being timed, rows are read through.
    let fetch = Fetch::choose(
        tuning.row_fetch,
        vector && !words.as_ref().is_some_and(|w| w.timed()),
        (row_bytes, std::mem::size_of::<S::Index>()),
        out_bytes,
        tasks,
    );
    let geometry = RowGeometry {
        row_len,
        axis_stride,
        innermost,
        // Rows' words are stored one by one; the vector loops align their
        // own runs of streaming stores, so no run length is asked for.
        streaming: stream::streams(tuning.stores, std::mem::size_of_val(out), usize::MAX),
        vector,
        prefetch_next: fetch.prefetch,
        tile: outer_axis_tile::<W>(rule.size, row_len, packed),
        packed,
        axis_size: rule.size,
        strided: strided.as_ref().is_some_and(|s| s.vector.is_some()),
    };
    let done = if !geometry.innermost && tasks > 1 && row_len >= 64 * tasks {
        let tasks = tasks.min(row_len / 64);
        gather_outer_by_columns(
            data,
            data_shape,
            indices_shape,
            indices,
            rule,
            &geometry,
            out,
            tasks,
        )
    } else {
        let per_task = rows.div_ceil(tasks);
        parallel::try_for_each_chunk(out, per_task * row_len, |task, dst| {
            let start = task * per_task * row_len;
            let bases = RowBases::new(indices_shape, data_shape, axis).starting_at(task * per_task);
            let mut indices = indices.reader();
            gather_row_range(data, &geometry, rule, bases, &mut indices, start, dst)
        })
    };
    if done.is_ok() {
        fetch.done(out_bytes);
        if let Some(words) = words {
            words.done(out_bytes);
        }
        if let Some(strided) = strided {
            strided.done(out_bytes);
        }
    }
    done
}

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
fn outer_axis_tile<W>(axis_size: usize, row_len: usize, packed: bool) -> usize {
    let word = std::mem::size_of::<W>().max(1);
    let column_bytes = axis_size.max(1) * word;
    if !packed {
        return ((2 << 20) / column_bytes).max(64 / word).max(16);
    }
    let in_level1 = cpu::columns_in_level1(column_bytes);
    if in_level1 >= 32 && in_level1 * 2 >= row_len {
        return in_level1;
    }
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
fn packs_strips<W>(indices_shape: &[usize], axis_size: usize, row_len: usize, axis: usize) -> bool {
    let plane_bytes = axis_size
        .saturating_mul(row_len)
        .saturating_mul(std::mem::size_of::<W>());
    axis + 2 == indices_shape.len()
        && indices_shape[axis].saturating_mul(4) >= axis_size
        && plane_bytes > 32 << 10
}

struct RowGeometry {
    row_len: usize,
    axis_stride: usize,
    innermost: bool,
    /// The output is larger than the cache: vector loops store past it.
    streaming: bool,
    /// Along the last axis, rows of words take the vector loop.
    vector: bool,
    /// The vector loops ask for the next data row as they go instead of
    /// reading each row through first ([`super::measured_fetch`]).
    prefetch_next: bool,
    tile: usize,
    /// Outer axis: column tiles are read from packed strips.
    packed: bool,
    axis_size: usize,
    /// Outer axis: row pieces of words take the strided vector loop.
    strided: bool,
}

/// Fill whole rows `dst`, the output from flat position `first` on, from
/// their data bases and indices; `Err(k)` when the index at flat position
/// `k` is out of range.
fn gather_row_range<W: Clone + 'static, O: Slot<W> + 'static, R: ReadIndices>(
    data: &[W],
    geometry: &RowGeometry,
    rule: &AxisRule,
    bases: RowBases,
    indices: &mut R,
    first: usize,
    out: &mut [O],
) -> std::result::Result<(), usize> {
    let RowGeometry {
        row_len,
        innermost,
        streaming,
        tile,
        ..
    } = *geometry;
    if innermost {
        // Innermost axis: each row reads one contiguous data row at random offsets.
        let vector = match geometry.vector {
            true => vector_row::<W, O, R::Index>(knobs::WordGather::Vector),
            false => None,
        };
        let mut bases = bases.peekable();
        let mut fill_rows = || {
            for (r, dst) in out.chunks_exact_mut(row_len).enumerate() {
                let Some(base) = bases.next() else { break };
                let next = bases.peek().map_or(&[][..], |&b| &data[b..b + rule.size]);
                let row = &data[base..base + rule.size];
                let at = first + r * row_len;
                let stores = (streaming, geometry.prefetch_next);
                gather_within_row(row, next, rule, indices, at, dst, vector, stores)?;
            }
            Ok(())
        };
        let done = fill_rows();
        if streaming {
            store_fence();
        }
        return done;
    }
    if !geometry.packed && tile >= row_len {
        return gather_whole_rows(data, geometry, rule, bases, (indices, first), out);
    }
    // Outer axis, one column tile of every row at a time.
    let mut strip = Strip::new(geometry);
    for t0 in (0..row_len).step_by(tile) {
        let columns = t0..(t0 + tile).min(row_len);
        let (c0, c1) = (columns.start, columns.end);
        let pieces = out.chunks_exact_mut(row_len).map(|row| &mut row[c0..c1]);
        gather_tile(
            data,
            geometry,
            rule,
            bases.clone(),
            (indices, first),
            columns,
            pieces,
            &mut strip,
        )?;
    }
    Ok(())
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
fn gather_whole_rows<W: Clone + 'static, O: Slot<W> + 'static, R: ReadIndices>(
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
    let shift = rule.negative_shift();
    let mut row = 0;
    let rows = out.len() / row_len;
    while let Some((base, run)) = bases.next_run(rows - row) {
        if fetch_planes {
            let next = data.get(base + plane..).unwrap_or_default();
            prefetch_items_to_l2(next.get(..plane).unwrap_or(next));
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
                let width = (row_len - column).min(dst.len() - done);
                let piece = &mut dst[done..done + width];
                let values = &idx[done..done + width];
                gather_row_piece(
                    from_base,
                    (stride, rule.size),
                    (shift, column),
                    values,
                    piece,
                    vector,
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
/// that `indices` name; `Err(j)` at the first bad one. One call a row:
/// a column counter wrapping at the row's end, carried across rows, ran
/// 1.15x slower (int8 rows of 16 along the middle axis).
#[inline]
fn gather_row_piece<W: Clone, O: Slot<W>, X: KernelIndex>(
    from_base: &[W],
    (stride, size): (usize, usize),
    (shift, column): (i64, usize),
    indices: &[X],
    dst: &mut [O],
    vector: Option<StridedRow<W, O, X>>,
) -> std::result::Result<(), usize> {
    let column = from_base.get(column..).unwrap_or_default();
    // The vector loop writes a prefix; the scalar loop takes the rest (the
    // tail, or the group holding a bad index, to name it).
    let done = match vector {
        // Fewer than a group (four 8-byte words, else eight): the call
        // would write nothing.
        Some(gather) if dst.len() >= 32 / std::mem::size_of::<W>().clamp(4, 8) => {
            gather(column, (stride, size), indices, shift, dst)
        }
        _ => 0,
    };
    let rest = dst.get_mut(done..).unwrap_or_default().iter_mut();
    let pairs = rest.zip(indices.get(done..).unwrap_or_default());
    for (j, (d, &v)) in (done..).zip(pairs) {
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
fn gather_tile<'o, W: Clone + 'static, O: Slot<W> + 'static, R: ReadIndices>(
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
                vector,
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
struct Strip<W> {
    buffer: Option<Vec<W>>,
    /// Data base and columns of the tile the buffer holds.
    holds: Option<(usize, Range<usize>)>,
}

impl<W: Clone> Strip<W> {
    fn new(geometry: &RowGeometry) -> Strip<W> {
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

/// Largest part of the next data row asked for in one go. Along the last
/// axis, a whole 16 KiB row asked into L2 at once, before the current row
/// starts, ran W4 1.15-1.2x faster on one thread than asking for it 1 KiB
/// per 256 elements (into L1 or L2) or in 4 KiB parts: long sequential
/// bursts are what memory serves fastest. The cap keeps a burst well
/// inside L2.
const NEXT_ROW_BURST_BYTES: usize = 32 << 10;

/// Largest row read through once before the gathers from it start (see
/// [`gather_within_row`]): well inside L2 (512 KiB per core on the AMD
/// EPYCs measured, 256 KiB or more on current x86 cores).
const LOAD_ROW_MAX_BYTES: usize = 128 << 10;

/// Smallest row read through first: shorter rows follow one another in
/// memory, where the hardware prefetchers already run ahead.
const LOAD_ROW_MIN_BYTES: usize = 8 << 10;

/// `dst[j] = row[i_j]` for the positions `i_j` that `indices` name; `Err(j)`
/// at the first bad one (elements before it are written).
///
/// Random reads of a row that is not yet in cache wait on memory for each
/// line. When the row's indices are at least as many as its lines (so the
/// gathers would touch about all of them anyway) and it fits
/// [`LOAD_ROW_MAX_BYTES`], the row is read through once, line by line,
/// before the gathers: W4 (16 KiB rows, 4096 indices each) into a buffer ran
/// 17.6-19.5 ms on one thread and 9.3-9.7 ms on two this way, against
/// 25.9-26.2 and 13.8-14.3 ms asking for the next row into L2 in bursts
/// (AMD EPYC family 25 model 1, interleaved runs). The scalar loop gains
/// as much (same CPU, into a buffer, one thread, best of 5: W4 34 -> 26
/// ms, W4 in f64 74 -> 38, 2-byte rows of 8 and 32 KiB 32 -> 21 and
/// 63 -> 42, 1-byte rows of 16 KiB 44 -> 37). With `prefetch_next`
/// (the `row_fetch` knob, see [`super::measured_fetch`]) a row the vector
/// loop takes is not read through; the loop asks for the next row's
/// lines as it gathers this one instead. Otherwise the next row
/// is asked into L2 ahead of use, in bursts of [`NEXT_ROW_BURST_BYTES`]:
/// the row's indices are cut into as many pieces as `next_row` has
/// bursts, and each piece starts with its burst. (A branch-free variant,
/// clamping each load and flagging bad indices per chunk, measured slower
/// on W4 than this checked load.)
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_within_row<W: Clone, O: Slot<W>, R: ReadIndices>(
    row: &[W],
    next_row: &[W],
    rule: &AxisRule,
    indices: &mut R,
    first: usize,
    dst: &mut [O],
    vector: Option<VectorRow<W, O, R::Index>>,
    (streaming, prefetch_next): (bool, bool),
) -> std::result::Result<(), usize> {
    let row_bytes = std::mem::size_of_val(row);
    let load_row = (LOAD_ROW_MIN_BYTES..=LOAD_ROW_MAX_BYTES).contains(&row_bytes)
        && dst.len() >= row_bytes.div_ceil(LINE);
    let (next_row, vector_next) = if load_row && vector.is_some() && prefetch_next {
        (&[][..], next_row)
    } else if load_row {
        load_lines(row);
        (&[][..], &[][..])
    } else {
        (next_row, &[][..])
    };
    let bursts = std::mem::size_of_val(next_row)
        .div_ceil(NEXT_ROW_BURST_BYTES)
        .max(1);
    // Short rows take one burst: no divisions per row.
    let share = |len: usize| match bursts {
        1 => len.max(1),
        _ => len.div_ceil(bursts).max(1),
    };
    let piece = share(dst.len());
    let mut ahead = next_row.chunks(share(next_row.len()));
    for (c, dst) in dst.chunks_mut(piece).enumerate() {
        if let Some(lines) = ahead.next() {
            prefetch_items_to_l2(lines);
        }
        let at = first + c * piece;
        indices.try_chunks(at..at + dst.len(), |offset, idx| {
            let dst = &mut dst[offset..offset + idx.len()];
            // The vector loop writes a prefix; the scalar loop takes the
            // rest (the tail, or the vector holding a bad index, to name it).
            let shift = rule.negative_shift();
            // The share of the next row to ask for while these indices
            // are gathered (widened indices come a chunk at a time).
            let share = |k: usize| k * vector_next.len() / piece;
            let next = vector_next
                .get(share(offset)..share(offset + idx.len()))
                .unwrap_or_default();
            let done = vector.map_or(0, |gather| gather(row, next, idx, shift, dst, streaming));
            // Sliced, not `skip`ped: skipping a zip steps through each element.
            let rest = dst.get_mut(done..).unwrap_or_default();
            gather_from_row(row, idx.get(done..).unwrap_or_default(), shift, rest)
                .map_err(|j| at + offset + done + j)
        })?;
    }
    Ok(())
}

/// `dst[j] = row[p_j]` for the positions `p_j` that `indices` name (each
/// negative one shifted by `shift`); `Err(j)` at the first bad one. A
/// function of its own, not inlined: inside the closure that reads the
/// indices in chunks, the output's pointer was reloaded from the stack for
/// every element (2-byte words along the last axis, one load in three).
#[inline(never)]
fn gather_from_row<W: Clone, O: Slot<W>, X: KernelIndex>(
    row: &[W],
    indices: &[X],
    shift: i64,
    dst: &mut [O],
) -> std::result::Result<(), usize> {
    for (j, (d, &v)) in dst.iter_mut().zip(indices).enumerate() {
        d.put(row.get(position_shifted(v.wide(), shift)).ok_or(j)?.clone());
    }
    Ok(())
}

/// Outer axis on several tasks: each owns a range of columns of every
/// output row and reads only those columns of data. (Split by rows, every
/// task would walk the whole axis strip: at 2 threads, 8 tasks read the data
/// 8 times.) Column tiles as in the one-task loop.
#[allow(clippy::too_many_arguments)]
fn gather_outer_by_columns<
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

/// The fresh-output path writes memory that was never initialised, so each
/// of its kernel paths is run here, where Miri (CI) checks that no slot is
/// read before it is written, against a reference from the formula.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::Complex64;
    use crate::GatherElements;

    /// `out[p] = data[p with p[axis] := indices[p] (+ size if negative)]`.
    fn reference<T: Clone>(
        data: &TypedTensor<T>,
        indices: &TypedTensor<i64>,
        axis: usize,
    ) -> Vec<T> {
        let (dshape, ishape) = (data.shape(), indices.shape());
        let mut out = Vec::new();
        for (flat, &v) in indices.data().iter().enumerate() {
            let mut rest = flat;
            let mut coord = vec![0; ishape.len()];
            for d in (0..ishape.len()).rev() {
                coord[d] = rest % ishape[d];
                rest /= ishape[d];
            }
            coord[axis] = if v < 0 { v + dshape[axis] as i64 } else { v } as usize;
            let at = coord
                .iter()
                .zip(dshape)
                .fold(0, |acc, (&c, &s)| acc * s + c);
            out.push(data.data()[at].clone());
        }
        out
    }

    fn check<T: Element + PartialEq + std::fmt::Debug>(
        data_shape: &[usize],
        indices_shape: &[usize],
        axis: usize,
        value: impl Fn(usize) -> T,
    ) {
        let len: usize = data_shape.iter().product();
        let data = TypedTensor::new(data_shape.to_vec(), (0..len).map(value).collect()).unwrap();
        let size = data_shape[axis] as i64;
        let count: usize = indices_shape.iter().product();
        // Every position, negative half the time, in a scrambled order.
        let picks = (0..count as i64).map(|k| (k * 7 + 3) % size - (k % 2) * size);
        let indices = TypedTensor::new(indices_shape.to_vec(), picks.collect()).unwrap();
        let out = GatherElements::new(axis as i64)
            .run_typed(data.view(), indices.view())
            .unwrap();
        assert_eq!(
            out.data(),
            reference(&data, &indices, axis),
            "{data_shape:?} {indices_shape:?} axis {axis}"
        );
    }

    #[test]
    fn fresh_outputs_of_the_innermost_axis_are_written_in_full() {
        check(&[3, 20], &[3, 17], 1, |k| k as f32);
        check(&[2, 9], &[2, 11], 1, |k| k as f64);
        check(&[4, 5], &[3, 6], 1, |k| k as u8);
        check(&[2, 7], &[2, 3], 1, |k| k % 3 == 0);
    }

    /// Rows of 8 KiB and more, where the vector loops may ask for the next
    /// row instead of reading each through: both ways, with indices read
    /// in place (`i64`, `i32`, `u16`) and widened in chunks (`u32`), give
    /// the formula's result, fresh and into a buffer.
    #[test]
    fn rows_prefetched_ahead_give_what_rows_read_through_give() {
        use crate::mem::knobs::{scoped, RowFetch, Tuning, WordGather};
        let (rows, len) = if cfg!(miri) { (2, 2048) } else { (5, 4096) };
        let data =
            TypedTensor::new(vec![rows, len], (0..rows * len).map(|k| k as f32).collect()).unwrap();
        let picks: Vec<i64> = (0..rows * len)
            .map(|k| ((k * 7919 + 13) % len) as i64)
            .collect();
        let indices = TypedTensor::new(vec![rows, len], picks.clone()).unwrap();
        let want = reference(&data, &indices, 1);
        let op = GatherElements::new(1);
        for fetch in [RowFetch::Read, RowFetch::Prefetch] {
            // The vector loops (on a CPU with AVX2) are the ones that prefetch.
            let tuning = Tuning::AUTO
                .with_row_fetch(fetch)
                .with_word_gather(WordGather::Vector);
            let run = |indices: &dyn Fn() -> Vec<f32>| scoped(tuning, indices);
            let i64s = run(&|| {
                op.run_typed(data.view(), indices.view())
                    .unwrap()
                    .data()
                    .to_vec()
            });
            assert_eq!(i64s, want, "{fetch:?} i64");
            macro_rules! narrow {
                ($t:ty) => {{
                    let values = picks.iter().map(|&v| v as $t).collect();
                    let narrow = TypedTensor::new(vec![rows, len], values).unwrap();
                    let fresh = run(&|| {
                        op.run_typed(data.view(), narrow.view())
                            .unwrap()
                            .data()
                            .to_vec()
                    });
                    assert_eq!(fresh, want, "{fetch:?} {}", stringify!($t));
                    let mut into =
                        TypedTensor::new(vec![rows, len], vec![0f32; rows * len]).unwrap();
                    scoped(tuning, || {
                        op.run_typed_into(data.view(), narrow.view(), &mut into)
                            .unwrap()
                    });
                    assert_eq!(into.data(), want, "{fetch:?} {} into", stringify!($t));
                }};
            }
            narrow!(i32);
            narrow!(u16);
            narrow!(u32);
        }
    }

    #[test]
    fn fresh_outputs_of_an_outer_axis_are_written_in_full() {
        // In place (a small plane), then from packed strips (48 KiB plane).
        check(&[5, 4, 3], &[5, 2, 3], 1, |k| k as i16);
        check(&[96, 128], &[32, 128], 0, |k| k as u32);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "rayon's worker threads trip Stacked Borrows inside crossbeam-epoch"
    )]
    fn fresh_outputs_split_by_columns_are_written_in_full() {
        // 256 KiB of output on two threads: tasks own column ranges.
        let run = || check(&[8, 2048], &[8, 2048], 0, |k| Complex64::new(k as f64, 1.0));
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap()
            .install(run);
    }
}
