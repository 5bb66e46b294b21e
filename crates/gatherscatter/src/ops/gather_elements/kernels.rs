//! GatherElements' kernels: the entry points, the split of a call among
//! tasks and each task's rows, along the last axis ([`super::last_axis`])
//! or an outer one ([`super::outer_axis`]).

use crate::dtype::Element;
use crate::error::Result;
use crate::index::{
    first_bad_index, first_beyond, matching_last_axis_rows, position_shifted, takes_small_path,
    try_for_each_target, AxisRule, InPlace, IndexElement, IndexSource, KernelIndex, ReadAhead,
    ReadIndices, WideIndices,
};
use crate::mem::knobs;
use crate::mem::measured_stores::{Sizes, StoreChoice, Writer};
use crate::mem::parallel;
use crate::mem::stream::store_fence;
use crate::mem::uninit::{self, Slot};
use crate::ops::alloc_output;
use crate::shape::{merge_dims_after_axis, strides, RowBases};
use crate::tensor::{TypedTensor, TypedView};

use std::mem::MaybeUninit;

use super::last_axis::{gather_short_rows, gather_within_row, SHORT_ROW};
use super::measured_fetch::Fetch;
use super::measured_indices::IndexFetch;
use super::measured_planes::PlaneRead;
use super::measured_words::WordLoop;
use super::outer_axis::{
    gather_outer_by_columns, gather_tile, gather_whole_rows, level2_tile, outer_axis_tile,
    packs_strips, Strip,
};
use super::word_gather::{spanning_rows, vector_row, SpanningRows, StridedRow, VectorRow};
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
    let tasks = parallel::tasks(std::mem::size_of_val(out), rows);
    // Split by columns only when there are too few planes (the positions
    // before the axis) to share out: by rows, each task reads whole
    // planes of data and a stream of whole index rows, where each column
    // task read a piece of every index row. Along the middle axis, two
    // threads, in process, medians: int8 [64, 256, 1024] 40 -> 22 ms (no
    // faster than one thread before), [16, 256, 4096] 26.5-34.3 ->
    // 24.3-27.8, float32 [16, 256, 1024] 12.0 -> 7.7.
    let planes: usize = indices_shape[..axis].iter().product();
    let by_columns = !innermost && tasks > 1 && row_len >= 64 * tasks && planes < tasks;
    let packs = !innermost && packs_strips::<W>(indices_shape, rule.size, row_len, axis);
    // A packed tile as wide as the row would copy each plane into a strip
    // of the plane's own layout: split by rows, the plane is read in place
    // instead, the next one asked for a piece per row (`plane_ahead`).
    // Zen 4 (32 KiB L1d, 1 MiB L2), 16 MiB outputs along the middle axis
    // of 256 from 64 KiB planes, from Python, medians of three runs each
    // way, one / two threads: float32 6.2-6.7 / 3.1-4.5 -> 5.3-5.5 /
    // 2.7-3.7 ms, by int32 indices 4.5-6.7 / 2.4-3.3 -> 4.0-4.2 / 2.0-2.6,
    // float64 4.0-4.4 / 2.1-2.8 -> 3.0-3.2 / 1.6-2.2, float16 10.9-11.3
    // -> 10.1-10.4 on one thread, int8 20.3-27.5 -> 18.9-20.1.
    // Judged by the L2 strip even where an L1 strip is the packed tile: on
    // an Intel Xeon family 6 model 167 (48 KiB L1d, 2 MiB L2), float32
    // rows of 64 took L1 strips of 32 columns, packed, 4.2 / 2.2 ms on one /
    // two threads against 2.6 / 1.4 in place (by int32 indices 3.3 / 1.8
    // against 1.9 / 1.1). That is the rule where the calls are not timed
    // (`plane_reads`, [`super::measured_planes`]).
    let whole_row_tile = level2_tile::<W>(rule.size) >= row_len;
    let out_bytes = std::mem::size_of_val(out);
    let row_bytes = rule.size * std::mem::size_of::<W>();
    let axis_stride = strides(data_shape)[axis];
    let knob = tuning.word_gather;
    let short_rows = match innermost && row_len < SHORT_ROW {
        true => matching_last_axis_rows(data_shape, indices_shape, rule).map(|(row, _)| row),
        false => None,
    };
    // Short rows take their own walk, so no per-row word loop is chosen.
    let words = (innermost && short_rows.is_none()).then(|| {
        WordLoop::<VectorRow<W, O, S::Index>>::last_axis(knob, row_bytes, out_bytes, tasks)
    });
    let vector = words.as_ref().is_some_and(|w| w.vector().is_some());
    let spanning = short_rows.map(|data_row| {
        let data_row_bytes = data_row.saturating_mul(std::mem::size_of::<W>());
        WordLoop::<SpanningRows<W, O, S::Index>>::short_rows(knob, data_row_bytes, out_bytes, tasks)
    });
    let spans = spanning.as_ref().is_some_and(|s| s.vector().is_some());
    let strided = (!innermost).then(|| {
        let plane_bytes = row_bytes.saturating_mul(axis_stride);
        WordLoop::<StridedRow<W, O, S::Index>>::outer_axis(knob, plane_bytes, out_bytes, tasks)
    });
    // Both ways of reading planes are open to calls split by rows that
    // pack; while the word loop is timed, they take the size rule.
    let planes = (packs && !by_columns).then(|| {
        let plane_bytes = row_bytes.saturating_mul(axis_stride);
        let index_bytes = std::mem::size_of::<S::Index>();
        let sizes = (std::mem::size_of::<W>(), plane_bytes, index_bytes);
        let may_time = !strided.as_ref().is_some_and(|s| s.timed());
        PlaneRead::choose(
            tuning.plane_reads,
            whole_row_tile,
            may_time,
            sizes,
            out_bytes,
            tasks,
        )
    });
    let in_place = planes.as_ref().is_some_and(|p| p.in_place());
    let packed = packs && !in_place;
    // Timed only once the word loop and the plane reads are not.
    let index_fetch = (!innermost).then(|| {
        let may_time = !strided.as_ref().is_some_and(|s| s.timed())
            && !planes.as_ref().is_some_and(|p| p.timed());
        let sizes = (
            std::mem::size_of::<W>(),
            std::mem::size_of::<S::Index>(),
            !packed,
        );
        IndexFetch::choose(tuning.stream_fetch, may_time, sizes, out_bytes, tasks)
    });
    // While the loop itself is being timed, rows are read through.
    let fetch = Fetch::choose(
        tuning.row_fetch,
        vector && !words.as_ref().is_some_and(|w| w.timed()),
        (row_bytes, std::mem::size_of::<S::Index>()),
        out_bytes,
        tasks,
    );
    // Stores only matter to the vector loops along the last axis, and are
    // timed only once the loop and the row fetch are no longer.
    let may_time = innermost && vector && !words.as_ref().is_some_and(|w| w.timed());
    let sizes = Sizes {
        out_bytes,
        // The vector loops align their own runs of streaming stores.
        run_bytes: usize::MAX,
        src_bytes: std::mem::size_of_val(data),
    };
    let may_time = may_time && !fetch.timed();
    // The spanning loop's stores likewise, once the loop is not timed.
    let may_time = may_time || spans && !spanning.as_ref().is_some_and(|s| s.timed());
    let writer = match short_rows {
        Some(_) => Writer::ElementShortRows,
        None => Writer::ElementRows,
    };
    let stores = StoreChoice::choose(writer, tuning.stores, sizes, || tasks, may_time);
    let geometry = RowGeometry {
        row_len,
        axis_stride,
        innermost,
        streaming: stores.streaming(),
        vector,
        prefetch_next: fetch.prefetch(),
        tile: outer_axis_tile::<W>(rule.size, row_len, packed),
        packed,
        plane_ahead: match in_place {
            // The plane (the axis times the row) over the rows that read it.
            true => (rule.size * axis_stride).div_ceil(indices_shape[axis].max(1)),
            false => 0,
        },
        axis_size: rule.size,
        strided: strided.as_ref().is_some_and(|s| s.vector().is_some()),
        index_ahead: index_fetch.as_ref().is_some_and(|f| f.ahead()),
        short_rows,
        spanning: spans,
    };
    let done = if by_columns {
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
        stores.done(out_bytes);
        fetch.done(out_bytes);
        if let Some(words) = words {
            words.done(out_bytes);
        }
        if let Some(strided) = strided {
            strided.done(out_bytes);
        }
        if let Some(planes) = planes {
            planes.done(out_bytes);
        }
        if let Some(index_fetch) = index_fetch {
            index_fetch.done(out_bytes);
        }
        if let Some(spanning) = spanning {
            spanning.done(out_bytes);
        }
    }
    done
}

/// The shortest rows along the last axis whose scalar loop asks for its
/// indices ahead: per row, the request's bookkeeping cost more than it
/// saved in shorter ones (16 MiB of int8 by int64 indices into a buffer,
/// one thread, interleaved: rows of 2 147-165 ms without it against
/// 185-211 with it, rows of 8 45-55 against 54-58; rows of 32 26-32
/// against 22-39, 22-23 in most rounds).
const READ_AHEAD_MIN_ROW: usize = 32;

/// How one call's rows are gathered, the same for every task.
pub(super) struct RowGeometry {
    /// Elements in an output row (the last dim of the indices).
    pub(super) row_len: usize,
    /// Data's stride along the axis.
    pub(super) axis_stride: usize,
    /// The axis is the last one.
    pub(super) innermost: bool,
    /// The output is larger than the cache: vector loops store past it.
    pub(super) streaming: bool,
    /// Along the last axis, rows of words take the vector loop.
    pub(super) vector: bool,
    /// The vector loops ask for the next data row as they go instead of
    /// reading each row through first ([`super::measured_fetch`]).
    pub(super) prefetch_next: bool,
    /// Outer axis: columns a tile takes ([`outer_axis_tile`]).
    pub(super) tile: usize,
    /// Outer axis: column tiles are read from packed strips.
    pub(super) packed: bool,
    /// Outer axis, whole rows read in place from planes that would have
    /// been packed: the elements of the next plane each row asks for into
    /// L1 ([`super::outer_axis::gather_whole_rows`]); 0 for none.
    pub(super) plane_ahead: usize,
    /// Positions along the axis.
    pub(super) axis_size: usize,
    /// Outer axis: row pieces of words take the strided vector loop.
    pub(super) strided: bool,
    /// Outer axis: the loops ask for the indices they read next, past a
    /// piece's end in whole rows only ([`super::measured_indices`]).
    pub(super) index_ahead: bool,
    /// Along the last axis, rows under [`SHORT_ROW`] whose data rows follow
    /// one another: the data row's length, for [`gather_short_rows`].
    pub(super) short_rows: Option<usize>,
    /// Short rows take the spanning vector loop ([`super::avx2::gather_spanning`]).
    pub(super) spanning: bool,
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
    // Set only along the last axis.
    if let Some(data_row) = geometry.short_rows {
        let vector = match geometry.spanning {
            true => spanning_rows::<W, O, R::Index>(),
            false => None,
        };
        let streaming = streaming && vector.is_some();
        // The scalar walk's indices are asked for ahead a step at a time;
        // the vector loop's are not: asked ahead, they came in steps too
        // short for it (float32 rows of 16 by int64 indices, 16 MiB into
        // a buffer, one thread: 7.7-9.6 ms against 5.3-6.3 without).
        let mut indices = ReadAhead::new(indices, first, vector.is_none());
        let rows = (data_row, row_len);
        let done = gather_short_rows(
            data,
            rows,
            rule,
            &mut indices,
            first,
            out,
            vector,
            streaming,
        );
        if streaming {
            store_fence();
        }
        return done;
    }
    if innermost {
        // Innermost axis: each row reads one contiguous data row at random offsets.
        let vector = match geometry.vector {
            true => vector_row::<W, O, R::Index>(knobs::WordGather::Vector),
            false => None,
        };
        let mut bases = bases.peekable();
        // The scalar loop reads its indices as a plain stream, which is
        // asked for ahead ([`ReadAhead`]) in rows long enough to pay for
        // the bookkeeping; the vector loops ran no faster with that
        // (float32 and float64 rows of 256, one thread: within noise or
        // up to 1.15x slower), their own row fetch in the way.
        let ask = vector.is_none() && row_len >= READ_AHEAD_MIN_ROW;
        let mut indices = ReadAhead::new(indices, first, ask);
        let mut fill_rows = || {
            for (r, dst) in out.chunks_exact_mut(row_len).enumerate() {
                let Some(base) = bases.next() else { break };
                let next = bases.peek().map_or(&[][..], |&b| &data[b..b + rule.size]);
                let row = &data[base..base + rule.size];
                let at = first + r * row_len;
                let stores = (streaming, geometry.prefetch_next);
                gather_within_row(row, next, rule, &mut indices, at, dst, vector, stores)?;
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
    // Outer axis, one column tile of a group of rows at a time. Packed,
    // a group is a plane's rows (they share a data base), so each plane's
    // indices are read in one pass over its tiles while the lines the
    // first tile skipped are still in L2 (in process, medians: int8
    // [256, 256, 256] along the middle axis, tiles of 128 columns, one
    // thread 54-61 -> 45-49 ms, two 30-36 -> 25-29; float32 [256, 256,
    // 64] 13.7-19 -> 13-17; planes whose indices outgrow L2, int8 rows of
    // 2048 and 4096, within noise). In place, rows sharing a base need not
    // be consecutive, so the group is every row.
    let mut strip = Strip::new(geometry);
    let rows = out.len() / row_len;
    let mut row = 0;
    let mut runs = bases;
    while row < rows {
        let group_bases = runs.clone();
        let run = match geometry.packed {
            true => runs.next_run(rows - row).map_or(rows - row, |(_, run)| run),
            false => rows,
        };
        let group = &mut out[row * row_len..(row + run) * row_len];
        for t0 in (0..row_len).step_by(tile) {
            let columns = t0..(t0 + tile).min(row_len);
            let (c0, c1) = (columns.start, columns.end);
            let pieces = group.chunks_exact_mut(row_len).map(|r| &mut r[c0..c1]);
            gather_tile(
                data,
                geometry,
                rule,
                group_bases.clone(),
                (indices, first + row * row_len),
                columns,
                pieces,
                &mut strip,
            )?;
        }
        row += run;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
