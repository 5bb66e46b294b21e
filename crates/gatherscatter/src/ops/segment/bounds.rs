//! Segment boundaries: `indptr` checked, or a sorted segment `index` turned
//! into the same form, before anything is written.
//!
//! Both give, for each row of the boundary tensor, `segments + 1`
//! non-decreasing row numbers `b` of `src` along the axis: segment `s`
//! is rows `b[s]..b[s + 1]`.

use crate::display::Dims;
use crate::error::format_position;
use crate::error::{Error, Result};
use crate::index::IndexElement;
use crate::shape::{checked_product, strides, unravel, SmallDims};

/// The checked boundaries, and how a slab of `src` (a position in the dims
/// before the axis) finds its row of them.
pub(crate) struct Bounds {
    /// Segments per row.
    pub segments: usize,
    /// The segment axis of `src`: the boundary tensor's last.
    pub axis: usize,
    /// `rows × (segments + 1)` boundaries.
    flat: SmallDims,
    /// The dims of `src` before the axis.
    slab_shape: Vec<usize>,
    /// Per dim before the axis: the boundary rows' stride, or 0 where the
    /// boundary tensor has size 1 there (broadcast).
    row_strides: Vec<usize>,
}

impl Bounds {
    /// The boundaries of slab `slab` (a flat position in `src`'s dims
    /// before the axis).
    pub fn of_slab(&self, slab: usize) -> &[usize] {
        let mut row = 0;
        let mut rest = slab;
        for (&size, &stride) in self.slab_shape.iter().zip(&self.row_strides).rev() {
            row += (rest % size) * stride;
            rest /= size;
        }
        let width = self.segments + 1;
        &self.flat[row * width..(row + 1) * width]
    }
}

/// The dims of a boundary tensor before its last must each equal `src`'s
/// or be 1 (broadcast, as pytorch_scatter).
fn check_leading(what: &str, shape: &[usize], src_shape: &[usize]) -> Result<Vec<usize>> {
    let axis = shape.len() - 1;
    if axis == 0 {
        // One boundary row (for every slab): nothing to compare or stride.
        return Ok(Vec::new());
    }
    let row_shape = &shape[..axis];
    let row_strides = strides(row_shape);
    let mut broadcast = Vec::with_capacity(axis);
    for (d, (&given, &src)) in row_shape.iter().zip(src_shape).enumerate() {
        if given != src && given != 1 {
            return Err(Error::shape(format!(
                "{what} dimension {d} is {given}, but src's is {src}; the dims of {what} before its last must equal src's or be 1 ({what} shape {}, src shape {})",
                Dims(shape),
                Dims(src_shape)
            )));
        }
        broadcast.push(if given == 1 { 0 } else { row_strides[d] });
    }
    Ok(broadcast)
}

/// The rank rule both forms share: `1 <= rank <= src's rank`.
pub(crate) fn check_rank(what: &'static str, rank: usize, src_rank: usize) -> Result<()> {
    if rank == 0 || rank > src_rank {
        return Err(Error::RankMismatch {
            what,
            actual: rank,
            expected: format!(
                "a rank from 1 to src's rank {src_rank} is required (its last dim is the segment axis)"
            ),
        });
    }
    Ok(())
}

/// `indptr` (shape `[..., segments + 1]`) checked: every entry in
/// `[0, rows]` and non-decreasing along the last dim. Inlined, so the
/// boundaries are built where the caller keeps them (see [`out_shape`]).
///
/// [`out_shape`]: super::out_shape
#[inline]
pub(crate) fn from_indptr<I: IndexElement>(
    indptr: &[I],
    shape: &[usize],
    src_shape: &[usize],
) -> Result<Bounds> {
    check_rank("indptr", shape.len(), src_shape.len())?;
    let axis = shape.len() - 1;
    let rows = src_shape[axis];
    let width = shape[axis];
    if width == 0 {
        return Err(Error::segments(format!(
            "indptr has shape {}: its last dim is empty, but it needs segments + 1 >= 1 entries",
            Dims(shape)
        )));
    }
    let row_strides = check_leading("indptr", shape, src_shape)?;
    let mut flat = SmallDims::try_filled(0, indptr.len())?;
    // `indptr` holds whole rows: its length is their count times `width`.
    let boundary_rows = checked_product(&shape[..axis]).unwrap_or(0);
    if !sorted_bounds(indptr, boundary_rows, width, rows, &mut flat) {
        checked_bounds(indptr, shape, rows, &mut flat)?;
    }
    Ok(Bounds {
        segments: width - 1,
        axis,
        flat,
        slab_shape: src_shape[..axis].to_vec(),
        row_strides,
    })
}

/// `indptr`'s rows of `width` entries copied into `flat` when every entry
/// is in `[0, rows]` and each row non-decreasing: two compares an entry,
/// in `i64`. `false` when an entry breaks the rule or is `i64::MAX` or
/// more (exact only in `i128`), for [`checked_bounds`] to report or to
/// copy exactly. (The checked loop's wide arithmetic, a division and
/// position closure an entry, cost 381 instructions for 5 entries.)
fn sorted_bounds<I: IndexElement>(
    indptr: &[I],
    boundary_rows: usize,
    width: usize,
    rows: usize,
    flat: &mut [usize],
) -> bool {
    // Rows by number, not `chunks_exact`, whose two lengths cost a
    // division each.
    for r in 0..boundary_rows {
        let (Some(values), Some(bounds)) = (
            indptr.get(r * width..(r + 1) * width),
            flat.get_mut(r * width..(r + 1) * width),
        ) else {
            return false;
        };
        if !copy_sorted(values, rows, bounds) {
            return false;
        }
    }
    true
}

/// `values` copied into the front of `out` when each is in `[0, limit]`
/// and none is below the one before: two compares a value, in `i64`.
/// `false` at the first that is not, or is `i64::MAX` or more (exact only
/// in `i128`), for the caller's exact loop to report. A row of `indptr`
/// here, EmbeddingBag's offsets there.
pub(crate) fn copy_sorted<I: IndexElement>(values: &[I], limit: usize, out: &mut [usize]) -> bool {
    let mut before = 0;
    for (&value, slot) in values.iter().zip(out) {
        let v = value.to_i64_or_max();
        // A negative `v` is at least 2^63 as a usize, past `limit` unless
        // `limit` is that large too, which the sign test covers.
        let b = v as usize;
        if v < 0 || v == i64::MAX || b > limit || b < before {
            return false;
        }
        *slot = b;
        before = b;
    }
    true
}

/// [`sorted_bounds`] exactly, in `i128`, with the error for the first
/// entry (row-major) out of range or below the one before it.
fn checked_bounds<I: IndexElement>(
    indptr: &[I],
    shape: &[usize],
    rows: usize,
    flat: &mut [usize],
) -> Result<()> {
    let axis = shape.len() - 1;
    let width = shape[axis];
    for (at, &value) in indptr.iter().enumerate() {
        let v = value.to_i128();
        let position = || format_position(&unravel(at, shape));
        let b = usize::try_from(v)
            .ok()
            .filter(|&b| b <= rows)
            .ok_or_else(|| {
                Error::segments(format!(
                "indptr{} = {v} is out of range [0, {rows}]: src has {rows} rows along axis {axis}",
                position()
            ))
            })?;
        if at % width > 0 {
            let before = flat[at - 1];
            if b < before {
                return Err(Error::segments(format!(
                    "indptr decreases at indptr{}: {v} after {before}; it must be non-decreasing",
                    position()
                )));
            }
        }
        flat[at] = b;
    }
    Ok(())
}

/// A sorted segment `index` (shape `[..., rows]`, one segment id per row of
/// `src` along the axis) as boundaries: ids in `[0, segments)` (when
/// `segments` is `None`, the largest id + 1), non-decreasing along the last
/// dim. Inlined as [`from_indptr`].
#[inline]
pub(crate) fn from_index<I: IndexElement>(
    index: &[I],
    shape: &[usize],
    src_shape: &[usize],
    segments: Option<usize>,
) -> Result<Bounds> {
    check_rank("index", shape.len(), src_shape.len())?;
    let axis = shape.len() - 1;
    let rows = src_shape[axis];
    if shape[axis] != rows {
        return Err(Error::shape(format!(
            "index dimension {axis} is {}, but src's is {rows}; index needs one segment id per row of src along axis {axis} (index shape {}, src shape {})",
            shape[axis],
            Dims(shape),
            Dims(src_shape)
        )));
    }
    let row_strides = check_leading("index", shape, src_shape)?;
    let slab_shape = src_shape[..axis].to_vec();
    // A boundary row per position in the dims before the axis, with or
    // without ids.
    let boundary_rows = checked_product(&shape[..axis])
        .ok_or_else(|| Error::segments("the segment boundaries overflow usize"))?;
    if let Some(count) = one_pass_count(index, rows, boundary_rows, segments) {
        let mut flat = SmallDims::try_filled(rows, boundary_rows * (count + 1))?;
        if place_sorted_ids(index, boundary_rows, rows, count, &mut flat) {
            return Ok(Bounds {
                segments: count,
                axis,
                flat,
                slab_shape,
                row_strides,
            });
        }
    }
    let (segments, flat) = exact_bounds(index, shape, rows, boundary_rows, segments)?;
    Ok(Bounds {
        segments,
        axis,
        flat,
        slab_shape,
        row_strides,
    })
}

/// [`from_index`]'s segment count and boundaries by the exact passes, for
/// what [`place_sorted_ids`] does not take: every id checked before any is
/// used (sign and order first, then the count), the errors naming the
/// first bad one. Out of line, so that `from_index` stays small enough to
/// inline.
#[inline(never)]
fn exact_bounds<I: IndexElement>(
    index: &[I],
    shape: &[usize],
    rows: usize,
    boundary_rows: usize,
    segments: Option<usize>,
) -> Result<(usize, SmallDims)> {
    // The count is the largest id + 1 unless given. The rows are sorted,
    // so the largest id is the only one the count needs to see.
    let largest = match largest_sorted_id(index, rows) {
        Some(largest) => i128::from(largest),
        None => checked_largest_id(index, shape, rows)?,
    };
    let segments = match segments {
        Some(count) if largest >= count as i128 => {
            let at = index
                .iter()
                .position(|id| id.to_i128() >= count as i128)
                .unwrap_or_default();
            return Err(Error::segments(format!(
                "index{} = {} is out of range [0, {}]: there are {count} segments",
                format_position(&unravel(at, shape)),
                index[at].to_i128(),
                count as i128 - 1
            )));
        }
        Some(count) => count,
        None => usize::try_from(largest + 1).map_err(|_| {
            Error::segments(format!("index holds {largest}, too large a segment count"))
        })?,
    };
    let width = segments
        .checked_add(1)
        .ok_or_else(|| Error::segments("the segment count overflows usize"))?;
    let total = boundary_rows
        .checked_mul(width)
        .ok_or_else(|| Error::segments("the segment boundaries overflow usize"))?;
    let mut flat = SmallDims::try_filled(rows, total)?;
    for (ids, b) in index.chunks(rows.max(1)).zip(flat.chunks_exact_mut(width)) {
        // b[s] = the first row whose id is at least s (the ids are sorted
        // and below `segments`, checked above), one step per row; the
        // segments after the last id keep `rows`.
        let mut opened = 0;
        for (row, id) in ids.iter().enumerate() {
            let last = id.to_i64_or_max() as usize;
            while opened <= last {
                b[opened] = row;
                opened += 1;
            }
        }
    }
    Ok((segments, flat))
}

/// The segment count [`from_index`]'s one-pass form ([`place_sorted_ids`])
/// takes: `segments`, or else the largest of the rows' last ids + 1 (the
/// largest id if the rows are sorted, which the pass checks); `None` for
/// no ids, a negative last id, or boundaries more than about twice the
/// index's length (sparse or huge counts, or garbage that only looks like
/// one), which go to the exact passes: they check every id before they
/// allocate anything.
fn one_pass_count<I: IndexElement>(
    index: &[I],
    rows: usize,
    boundary_rows: usize,
    segments: Option<usize>,
) -> Option<usize> {
    if rows == 0 {
        return None;
    }
    let segments = match segments {
        Some(count) => count,
        None => {
            let mut largest = None;
            for r in 1..=boundary_rows {
                largest = largest.max(Some(index.get(r * rows - 1)?.to_i64_or_max()));
            }
            usize::try_from(largest?).ok()?.checked_add(1)?
        }
    };
    let total = boundary_rows.checked_mul(segments.checked_add(1)?)?;
    (total <= index.len().saturating_mul(2).saturating_add(64)).then_some(segments)
}

/// `flat` (filled with `rows`) set to the boundaries of `index`'s rows, each
/// id checked as it is placed; `false` at the first that is negative, not
/// below `segments` or below the id before it, for the exact passes to
/// report. (Those two passes cost 809 instructions for 32 ids.)
fn place_sorted_ids<I: IndexElement>(
    index: &[I],
    boundary_rows: usize,
    rows: usize,
    segments: usize,
    flat: &mut [usize],
) -> bool {
    let width = segments + 1;
    // Rows by number, as `sorted_bounds`.
    for r in 0..boundary_rows {
        let (Some(ids), Some(b)) = (
            index.get(r * rows..(r + 1) * rows),
            flat.get_mut(r * width..(r + 1) * width),
        ) else {
            return false;
        };
        // Segments `0..opened` have their first row: the last id was
        // `opened - 1`.
        let mut opened = 0;
        for (row, id) in ids.iter().enumerate() {
            // A negative id is 2^63 or more here, past any count.
            let v = id.to_i64_or_max() as u64 as usize;
            if v >= opened {
                // A new segment, and those skipped before it, start here.
                if v >= segments {
                    return false;
                }
                for first in &mut b[opened..=v] {
                    *first = row;
                }
                opened = v + 1;
            } else if v + 1 != opened {
                return false;
            }
        }
    }
    true
}

/// The largest id (-1 when there are none) when every row of `index` is
/// non-negative and non-decreasing: one compare per id, in `i64`. `None`
/// when a row breaks the rule or an id does not fit an `i64`, for
/// [`checked_largest_id`] to report or to measure exactly.
fn largest_sorted_id<I: IndexElement>(index: &[I], rows: usize) -> Option<i64> {
    let mut largest = -1;
    for ids in index.chunks(rows.max(1)) {
        // Starting at 0, the first id's sign is the first order check.
        let mut before = 0;
        for &id in ids {
            let v = id.to_i64_or_max();
            if v < before {
                return None;
            }
            before = v;
        }
        largest = largest.max(ids.last().map_or(-1, |_| before));
    }
    (largest < i64::MAX).then_some(largest)
}

/// [`largest_sorted_id`] exactly, in `i128`, with the error for the first
/// id (row-major) that is negative or below the one before it.
fn checked_largest_id<I: IndexElement>(index: &[I], shape: &[usize], rows: usize) -> Result<i128> {
    let mut largest = -1;
    for (r, ids) in index.chunks(rows.max(1)).enumerate() {
        // Each row starts its order afresh; the smallest id passes.
        let mut before = i128::MIN;
        for (j, &id) in ids.iter().enumerate() {
            let v = id.to_i128();
            let position = || format_position(&unravel(r * rows + j, shape));
            if v < 0 {
                return Err(Error::segments(format!(
                    "index{} = {v} is negative; segment ids are >= 0",
                    position()
                )));
            }
            if v < before {
                return Err(Error::segments(format!(
                    "index is not sorted: index{} = {v} after {before}; segment_coo needs ids non-decreasing along the last dim",
                    position()
                )));
            }
            before = v;
        }
        largest = largest.max(ids.last().map_or(-1, |id| id.to_i128()));
    }
    Ok(largest)
}
