//! Shape arithmetic: checked element counts, axis normalization, row-major
//! strides and coordinates.

use crate::error::{Error, Result};

/// Product of the dimensions, or an error naming the shape when it overflows.
pub(crate) fn checked_element_count(what: &'static str, shape: &[usize]) -> Result<usize> {
    checked_product(shape).ok_or_else(|| Error::SizeOverflow {
        what,
        shape: shape.to_vec(),
    })
}

/// The number of elements of a tensor of this shape, `None` when it does
/// not fit in `usize`.
///
/// A zero anywhere makes the count zero even if the other factors overflow:
/// such a shape describes an empty tensor, which is valid everywhere (SPEC
/// §2.10), whatever its other dims. The file readers of `gsx` and
/// `gatherscatter-onnx` (`.npy`, `TensorProto`) apply this same rule.
///
/// ```
/// use gatherscatter::element_count;
///
/// assert_eq!(element_count(&[2, 3, 4]), Some(24));
/// assert_eq!(element_count(&[]), Some(1));
/// assert_eq!(element_count(&[1 << 32, 1 << 32, 0]), Some(0));
/// assert_eq!(element_count(&[0, usize::MAX, usize::MAX]), Some(0));
/// assert_eq!(element_count(&[1 << 32, 1 << 32]), None);
/// ```
pub fn element_count(dims: &[usize]) -> Option<usize> {
    checked_product(dims)
}

/// Whether two shapes are equal, compared dim by dim in a loop: `==` on
/// the slices calls `memcmp`, about 20 instructions a rank-2 compare, and a
/// small ScatterElements call made three (callgrind).
#[inline]
pub(crate) fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Product of the dimensions, `None` on overflow; see [`element_count`].
pub(crate) fn checked_product(dims: &[usize]) -> Option<usize> {
    checked_product_of_parts(&[dims])
}

/// [`checked_product`] of the dims of several parts of one shape, as if
/// they were joined (a zero anywhere makes the product zero).
pub(crate) fn checked_product_of_parts(parts: &[&[usize]]) -> Option<usize> {
    // One plain pass (iterator adapters cost a small call more than the
    // product): an overflow is only final once no zero follows.
    let (mut product, mut overflowed) = (1usize, false);
    for dims in parts {
        for &d in *dims {
            if d == 0 {
                return Some(0);
            }
            match product.checked_mul(d) {
                Some(p) => product = p,
                None => overflowed = true,
            }
        }
    }
    (!overflowed).then_some(product)
}

/// The parts of one shape joined: `parts.concat()`, without its generic
/// length pass and per-part loop (a Gather's three output parts), inline
/// up to [`INLINE_RANK`] dims.
pub(crate) fn join_parts(parts: [&[usize]; 3]) -> SmallDims {
    let [a, b, c] = parts;
    let mut joined = SmallDims::filled(0, a.len() + b.len() + c.len());
    let (head, rest) = joined.split_at_mut(a.len());
    head.copy_from_slice(a);
    let (middle, tail) = rest.split_at_mut(b.len());
    middle.copy_from_slice(b);
    tail.copy_from_slice(c);
    joined
}

/// Map an axis from `[-rank, rank - 1]` to `[0, rank - 1]`.
pub(crate) fn normalize_axis(axis: i64, rank: usize, what: &'static str) -> Result<usize> {
    let rank_i = rank as i128;
    let a = axis as i128;
    let normalized = if a < 0 { a + rank_i } else { a };
    if (0..rank_i).contains(&normalized) {
        Ok(normalized as usize)
    } else {
        Err(Error::BadAxis { axis, rank, what })
    }
}

/// Row-major coordinates of the element at `flat` in a tensor of `shape`.
///
/// Only used to report errors, so it favours clarity over speed.
pub(crate) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut position = vec![0; shape.len()];
    for (p, &d) in position.iter_mut().zip(shape).rev() {
        if d > 0 {
            *p = flat % d;
            flat /= d;
        }
    }
    position
}

/// Data rank must be at least 1 for every operator (spec §2.11).
pub(crate) fn require_rank_at_least_1(what: &'static str, rank: usize) -> Result<()> {
    if rank == 0 {
        return Err(Error::RankMismatch {
            what,
            actual: 0,
            expected: "rank >= 1 is required".into(),
        });
    }
    Ok(())
}

/// A range of index rows (runs of the indices' last dim), in row-major
/// order: the rows a scatter task applies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexRows {
    pub first: usize,
    pub end: usize,
}

impl IndexRows {
    /// Every row of `indices_shape` (rank >= 1).
    pub(crate) fn all(indices_shape: &[usize]) -> IndexRows {
        let row_len = indices_shape[indices_shape.len() - 1];
        let count = indices_shape.iter().product::<usize>();
        IndexRows {
            first: 0,
            end: count.checked_div(row_len).unwrap_or(0),
        }
    }

    /// The index rows whose targets lie in data slabs `[from, to)` of a
    /// scatter along `axis`: the slabs are the data's dims before the axis,
    /// and index rows come in runs of `rows_per_prefix` per prefix of the
    /// indices' own such dims (no larger than data's).
    pub(crate) fn for_slabs(
        indices_shape: &[usize],
        data_shape: &[usize],
        axis: usize,
        from: usize,
        to: usize,
    ) -> IndexRows {
        let rank = indices_shape.len();
        let prefixes = indices_shape[..axis].iter().product::<usize>();
        let rows_per_prefix = indices_shape[axis..rank - 1].iter().product::<usize>();
        // The prefix's coordinates, read as a position in data's leading dims.
        let slab_of = |prefix: usize| -> usize {
            let (mut rest, mut slab, mut stride) = (prefix, 0, 1);
            for (&n, &d) in indices_shape[..axis].iter().zip(&data_shape[..axis]).rev() {
                let n = n.max(1);
                slab += rest % n * stride;
                rest /= n;
                stride *= d;
            }
            slab
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
        IndexRows {
            first: first_at_least(from) * rows_per_prefix,
            end: first_at_least(to) * rows_per_prefix,
        }
    }
}

/// An empty vector with room for `len` values, or an allocation error
/// naming them as `dtype`.
pub(crate) fn reserved<T>(len: usize, dtype: crate::DType) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::Allocation {
        elements: len,
        dtype,
    })?;
    Ok(v)
}

/// Dims, strides or coordinates of up to this many axes are kept inline.
/// (Segment boundaries, 32 ids in 4 segments: segment_coo 2713 -> 2593
/// instructions a call with 8 inline; with 32, the larger list was copied
/// on each move, and the call took 2906.)
const INLINE_RANK: usize = 8;

/// A short list of `usize` (dims, strides, coordinates): inline up to
/// [`INLINE_RANK`] entries, on the heap beyond. The shape walks run on every
/// call, and on a small call their allocations cost more than the copying.
#[derive(Clone)]
pub(crate) enum SmallDims {
    Inline([usize; INLINE_RANK], usize),
    Heap(Vec<usize>),
}

impl SmallDims {
    /// `len` copies of `value`.
    pub(crate) fn filled(value: usize, len: usize) -> SmallDims {
        // Refused memory: `vec!` asks again and aborts as any allocation.
        SmallDims::try_filled(value, len).unwrap_or_else(|_| SmallDims::Heap(vec![value; len]))
    }

    /// [`SmallDims::filled`], an allocation error when the heap refuses the
    /// memory (for lengths that come from user input: segment and bag
    /// boundaries).
    ///
    /// Inlined, so the list is built where the caller keeps it: returned
    /// from a call, it was written in words and read back in pairs, and
    /// each such read waited for the writes to reach the cache (a fifth of
    /// segment_csr's bounds checking in a profile).
    #[inline]
    pub(crate) fn try_filled(value: usize, len: usize) -> Result<SmallDims> {
        if len <= INLINE_RANK {
            return Ok(SmallDims::Inline([value; INLINE_RANK], len));
        }
        SmallDims::try_filled_on_heap(value, len)
    }

    fn try_filled_on_heap(value: usize, len: usize) -> Result<SmallDims> {
        let mut heap = reserved(len, crate::DType::U64)?;
        heap.resize(len, value);
        Ok(SmallDims::Heap(heap))
    }

    /// Inlined as [`SmallDims::try_filled`].
    #[inline]
    pub(crate) fn from_slice(values: &[usize]) -> SmallDims {
        // Built in place: through `filled`, then a copy, the ND ops' plans
        // (two lists each) cost more.
        if values.len() <= INLINE_RANK {
            let mut dims = [0; INLINE_RANK];
            dims[..values.len()].copy_from_slice(values);
            return SmallDims::Inline(dims, values.len());
        }
        SmallDims::Heap(values.to_vec())
    }

    /// The list as a `Vec` (no copy when it is already on the heap).
    pub(crate) fn into_vec(self) -> Vec<usize> {
        match self {
            SmallDims::Inline(dims, len) => dims[..len].to_vec(),
            SmallDims::Heap(dims) => dims,
        }
    }

    /// `values` followed by `last`.
    pub(crate) fn pushed(values: &[usize], last: usize) -> SmallDims {
        let mut dims = SmallDims::filled(last, values.len() + 1);
        dims[..values.len()].copy_from_slice(values);
        dims
    }
}

impl std::ops::Deref for SmallDims {
    type Target = [usize];

    #[inline]
    fn deref(&self) -> &[usize] {
        match self {
            SmallDims::Inline(dims, len) => &dims[..*len],
            SmallDims::Heap(dims) => dims,
        }
    }
}

impl std::ops::DerefMut for SmallDims {
    #[inline]
    fn deref_mut(&mut self) -> &mut [usize] {
        match self {
            SmallDims::Inline(dims, len) => &mut dims[..*len],
            SmallDims::Heap(dims) => dims,
        }
    }
}

impl<'a> IntoIterator for &'a SmallDims {
    type Item = &'a usize;
    type IntoIter = std::slice::Iter<'a, usize>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A caller's `Vec` is kept as it is: moving it in costs no copy.
impl From<Vec<usize>> for SmallDims {
    fn from(dims: Vec<usize>) -> SmallDims {
        SmallDims::Heap(dims)
    }
}

impl From<&[usize]> for SmallDims {
    fn from(dims: &[usize]) -> SmallDims {
        SmallDims::from_slice(dims)
    }
}

/// Equal when the lists are, inline or not.
impl PartialEq for SmallDims {
    fn eq(&self, other: &SmallDims) -> bool {
        self[..] == other[..]
    }
}

impl Eq for SmallDims {}

impl std::fmt::Debug for SmallDims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The rank left when the dims after `axis` that are 1 in both `data` and
/// `indices` (of equal rank) are dropped from the end: such dims change no
/// flat position, and without them the axis may become the last one, which
/// the elements ops walk fastest.
pub(crate) fn rank_without_trailing_ones(data: &[usize], indices: &[usize], axis: usize) -> usize {
    let mut end = data.len().min(indices.len());
    while end > axis + 1 && data[end - 1] == 1 && indices[end - 1] == 1 {
        end -= 1;
    }
    end
}

/// The shapes with the dims after the axis merged into one when data and
/// indices agree on all of them: the same elements in the same order, but
/// longer rows, and rows that share a data base become consecutive (which
/// GatherElements' strip packing needs).
///
/// Trailing dims of size 1 in both are dropped first: with only such dims
/// after it, the axis is the last one, and its rows are read as the last
/// axis's are (blocks of one element along an outer axis ran 4.8x slower
/// than numpy as tiles of one column).
pub(crate) fn merge_dims_after_axis(
    data_shape: &[usize],
    indices_shape: &[usize],
    axis: usize,
) -> (SmallDims, SmallDims) {
    let end = rank_without_trailing_ones(data_shape, indices_shape, axis);
    let (data_shape, indices_shape) = (&data_shape[..end], &indices_shape[..end]);
    let after = axis + 1;
    if after + 1 >= data_shape.len() || data_shape[after..] != indices_shape[after..] {
        return (
            SmallDims::from_slice(data_shape),
            SmallDims::from_slice(indices_shape),
        );
    }
    let merged: usize = data_shape[after..].iter().product();
    let with_merged = |shape: &[usize]| SmallDims::pushed(&shape[..after], merged);
    (with_merged(data_shape), with_merged(indices_shape))
}

/// Row-major strides of a shape whose element count is known to fit `usize`.
pub(crate) fn strides(shape: &[usize]) -> SmallDims {
    let mut strides = SmallDims::filled(1, shape.len());
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].wrapping_mul(shape[d + 1]);
    }
    strides
}

/// Walks the rows (last-dimension runs) of an indices tensor and yields, for
/// each, the data offset of its first element with the axis coordinate left
/// out. GatherElements and ScatterElements address data this way, with the
/// data's own strides, so indices smaller than data off the axis stay right.
///
/// Requires a non-empty indices shape of rank >= 1 with each dimension no
/// larger than data's (the axis excepted), so every offset is in bounds.
#[derive(Debug, Clone)]
pub(crate) struct RowBases {
    lead_shape: SmallDims,
    /// Data strides of the leading dims, 0 for the axis.
    lead_strides: SmallDims,
    coord: SmallDims,
    base: usize,
    remaining: usize,
}

impl RowBases {
    pub(crate) fn new(indices_shape: &[usize], data_shape: &[usize], axis: usize) -> RowBases {
        let rank = indices_shape.len();
        let mut lead_strides = strides(&data_shape[..rank - 1]);
        // strides of the leading dims alone, scaled by the last dim's size.
        for (d, stride) in lead_strides.iter_mut().enumerate() {
            *stride = if d == axis {
                0
            } else {
                stride.wrapping_mul(data_shape[rank - 1])
            };
        }
        let lead_shape = SmallDims::from_slice(&indices_shape[..rank - 1]);
        let rows = lead_shape.iter().product();
        RowBases {
            coord: SmallDims::filled(0, rank - 1),
            lead_shape,
            lead_strides,
            base: 0,
            remaining: rows,
        }
    }

    /// The same walk, started at row `first` (rows in row-major order).
    pub(crate) fn starting_at(mut self, first: usize) -> RowBases {
        let first = first.min(self.remaining);
        let mut rest = first;
        for d in (0..self.coord.len()).rev() {
            let size = self.lead_shape[d].max(1);
            self.coord[d] = rest % size;
            rest /= size;
            self.base += self.coord[d] * self.lead_strides[d];
        }
        self.remaining -= first;
        self
    }
}

impl RowBases {
    /// The next base and how many consecutive rows, at most `max`, share
    /// it: the rows along the axis when the axis is the last leading dim
    /// (its stride is 0), one row otherwise. The walk moves past them all.
    #[inline]
    pub(crate) fn next_run(&mut self, max: usize) -> Option<(usize, usize)> {
        if self.remaining == 0 || max == 0 {
            return None;
        }
        let base = self.base;
        let run = match self.coord.len().checked_sub(1) {
            Some(d) if self.lead_strides[d] == 0 => {
                let run = (self.lead_shape[d] - self.coord[d])
                    .min(max)
                    .min(self.remaining);
                // The skipped rows leave the base where it is (stride 0);
                // the step below carries into the dims before.
                self.coord[d] += run - 1;
                self.remaining -= run - 1;
                run
            }
            _ => 1,
        };
        self.next();
        Some((base, run))
    }
}

impl Iterator for RowBases {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.base;
        let (coord, shape, strides) = (&mut *self.coord, &*self.lead_shape, &*self.lead_strides);
        // Odometer step: bump the last leading coordinate, carrying leftwards.
        for ((c, &size), &stride) in coord.iter_mut().zip(shape).zip(strides).rev() {
            *c += 1;
            self.base += stride;
            if *c < size {
                break;
            }
            self.base -= stride * *c;
            *c = 0;
        }
        Some(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_rows_visit_the_same_bases_as_single_steps() {
        let cases: [(&[usize], &[usize], usize); 5] = [
            (&[3, 4, 5], &[3, 4, 5], 1),
            (&[3, 4, 5], &[2, 3, 5], 1),
            (&[3, 4, 5], &[3, 4, 5], 0),
            (&[6, 2], &[6, 2], 0),
            (&[7], &[7], 0),
        ];
        for (data, indices, axis) in cases {
            let single: Vec<usize> = RowBases::new(indices, data, axis).collect();
            for max in [1, 2, 3, 100] {
                for first in 0..single.len() {
                    let mut walk = RowBases::new(indices, data, axis).starting_at(first);
                    let mut seen = Vec::new();
                    while let Some((base, run)) = walk.next_run(max) {
                        assert!((1..=max).contains(&run));
                        seen.extend(std::iter::repeat_n(base, run));
                    }
                    assert_eq!(seen, single[first..], "{data:?} {indices:?} {axis} {max}");
                }
            }
        }
    }

    #[test]
    fn product_of_shape_with_zero_is_zero_even_if_others_overflow() {
        assert_eq!(checked_product(&[usize::MAX, 0, usize::MAX]), Some(0));
        assert_eq!(checked_product(&[usize::MAX, 2]), None);
        assert_eq!(checked_product(&[]), Some(1));
    }

    #[test]
    fn product_of_parts_is_the_product_of_the_joined_shape() {
        let cases: [&[&[usize]]; 7] = [
            &[&[2, 3], &[], &[4]],
            &[&[], &[], &[]],
            &[&[usize::MAX], &[2], &[0]],
            &[&[0], &[usize::MAX, 2]],
            &[&[usize::MAX / 2], &[3]],
            &[&[1 << 20], &[1 << 20], &[1 << 20]],
            // Past the inline length: joined on the heap.
            &[&[1, 2, 3, 4], &[5, 6, 7], &[8, 9]],
        ];
        for parts in cases {
            let joined = parts.concat();
            if let [a, b, c] = parts {
                assert_eq!(join_parts([*a, *b, *c])[..], joined[..]);
            }
            assert_eq!(
                checked_product_of_parts(parts),
                checked_product(&joined),
                "{parts:?}"
            );
        }
        assert_eq!(checked_product_of_parts(&[&[2, 3], &[4]]), Some(24));
        assert_eq!(
            checked_product_of_parts(&[&[usize::MAX], &[2], &[0]]),
            Some(0)
        );
        assert_eq!(checked_product_of_parts(&[&[usize::MAX / 2], &[3]]), None);
    }

    #[test]
    fn axis_normalization_accepts_exactly_minus_rank_to_rank_minus_1() {
        assert_eq!(normalize_axis(-3, 3, "data").unwrap(), 0);
        assert_eq!(normalize_axis(2, 3, "data").unwrap(), 2);
        assert!(normalize_axis(3, 3, "data").is_err());
        assert!(normalize_axis(-4, 3, "data").is_err());
        assert!(normalize_axis(i64::MIN, 3, "data").is_err());
        assert!(normalize_axis(0, 0, "data").is_err());
    }

    #[test]
    fn row_bases_skip_the_axis_and_use_data_strides() {
        // indices [2, 2, 1] inside data [3, 2, 4], axis 1: rows at (i, *, 0).
        let bases: Vec<usize> = RowBases::new(&[2, 2, 1], &[3, 2, 4], 1).collect();
        assert_eq!(bases, vec![0, 0, 8, 8]);
        // axis 2 (last): rows at (i, j) -> i * 8 + j * 4.
        let bases: Vec<usize> = RowBases::new(&[2, 2, 3], &[3, 2, 4], 2).collect();
        assert_eq!(bases, vec![0, 4, 8, 12]);
        assert_eq!(RowBases::new(&[5], &[7], 0).collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn strides_and_row_bases_hold_past_the_inline_rank() {
        // Rank 10, beyond the 8 kept inline: the same walk on the heap.
        let shape = [2, 1, 3, 1, 2, 1, 1, 2, 1, 3];
        let s = strides(&shape);
        assert_eq!(&s[..], &[36, 36, 12, 12, 6, 6, 6, 3, 3, 1]);
        let bases: Vec<usize> = RowBases::new(&shape, &shape, 9).collect();
        let expected: Vec<usize> = (0..24).map(|r| r * 3).collect();
        assert_eq!(bases, expected);
        assert!(matches!(SmallDims::filled(0, 9), SmallDims::Heap(_)));
        assert!(matches!(SmallDims::filled(0, 8), SmallDims::Inline(..)));
        assert_eq!(
            &SmallDims::pushed(&[4; 8], 5)[..],
            &[4, 4, 4, 4, 4, 4, 4, 4, 5]
        );
    }

    #[test]
    fn unravel_gives_row_major_coordinates() {
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
        assert_eq!(unravel(7, &[2, 2, 2]), vec![1, 1, 1]);
    }
}
