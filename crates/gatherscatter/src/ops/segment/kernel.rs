//! The segment kernels: each output row is one segment of `src` rows
//! folded in ascending order, so a task owns whole output rows and results
//! are bit-identical for any thread count.

use super::bounds::Bounds;
use crate::dtype::Element;
use crate::mem::parallel;
use crate::reduction::Combine;

/// `src` as `[slabs, rows, inner]` (the dims before the axis, the axis, the
/// dims after it); the output is `[slabs, segments, inner]`.
#[derive(Clone, Copy)]
pub(crate) struct Layout {
    pub rows: usize,
    pub inner: usize,
}

/// Tasks get whole output rows (a segment's `inner` elements): the chunk
/// length in elements for `out_len` output elements.
fn chunk_len(layout: Layout, out_len: usize, bytes: usize) -> usize {
    let out_rows = out_len.checked_div(layout.inner).unwrap_or(0);
    match parallel::tasks(bytes, out_rows.max(1)) {
        // One task takes it all (no division on a small call).
        1 => out_len,
        tasks => out_rows.div_ceil(tasks).max(1) * layout.inner,
    }
}

/// The first output row of task `task`'s chunk (0 without a division for
/// the first task, which is every small call's only one); for
/// EmbeddingBag, the first bag.
pub(crate) fn first_row_of(task: usize, chunk: usize, inner: usize) -> usize {
    match task {
        0 => 0,
        _ => task * chunk / inner,
    }
}

/// The `src` rows of output rows `g, g + 1, …` (slab `g / segments`):
/// each one's first row number along the axis, its elements and how many
/// rows they are. A slab's boundaries are looked up as the walk enters it,
/// not per segment.
struct SegmentsFrom<'s, T> {
    src: &'s [T],
    layout: Layout,
    bounds: &'s Bounds,
    slab: usize,
    /// The next segment within the slab.
    s: usize,
    /// The slab's boundaries.
    b: &'s [usize],
}

impl<'s, T> SegmentsFrom<'s, T> {
    fn new(src: &'s [T], layout: Layout, bounds: &'s Bounds, g: usize) -> Self {
        let per_slab = bounds.segments.max(1);
        let (slab, s) = match g {
            0 => (0, 0),
            _ => (g / per_slab, g % per_slab),
        };
        SegmentsFrom {
            src,
            layout,
            bounds,
            slab,
            s,
            b: bounds.of_slab(slab),
        }
    }
}

impl<'s, T> Iterator for SegmentsFrom<'s, T> {
    type Item = (usize, &'s [T], usize);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.s == self.bounds.segments {
            self.slab += 1;
            self.s = 0;
            self.b = self.bounds.of_slab(self.slab);
        }
        let (first, end) = (*self.b.get(self.s)?, *self.b.get(self.s + 1)?);
        self.s += 1;
        let Layout { rows, inner } = self.layout;
        let base = self.slab * rows * inner;
        let elements = self.src.get(base + first * inner..base + end * inner)?;
        Some((first, elements, end - first))
    }
}

/// `out[g] = C`-fold of segment `g`'s rows, then `C`'s finish with the row
/// count; an empty segment gets `empty`.
pub(crate) fn reduce<T: Clone + Send + Sync, C: Combine<T>>(
    src: &[T],
    layout: Layout,
    bounds: &Bounds,
    empty: &T,
    out: &mut [T],
) {
    if out.is_empty() {
        return;
    }
    let bytes = std::mem::size_of_val(src) + std::mem::size_of_val(out);
    let chunk = chunk_len(layout, out.len(), bytes);
    let inner = layout.inner;
    parallel::for_each_chunk(out, chunk, |task, part| {
        let first_row = first_row_of(task, chunk, inner);
        let segments = SegmentsFrom::new(src, layout, bounds, first_row);
        for (acc, (_, rows, count)) in part.chunks_exact_mut(inner).zip(segments) {
            if count == 0 {
                acc.fill(empty.clone());
                continue;
            }
            if inner == 1 {
                // One column: a plain fold, the accumulator in a register.
                let mut value = rows[0].clone();
                for u in &rows[1..] {
                    C::combine(&mut value, u);
                }
                acc[0] = value;
            } else {
                fold_rows::<T, C>(acc, rows.chunks_exact(inner));
            }
            if C::FINISHES {
                for a in acc.iter_mut() {
                    C::finish(a, count as u64);
                }
            }
        }
    });
}

/// Fold `rows` (each as long as `acc`) into `acc` with `C`, row by row, so
/// each row is one streaming read and the column loop vectorizes where the
/// combine does; the first row is copied in. Returns how many rows there
/// were (`acc` is untouched when none).
pub(crate) fn fold_rows<'r, T: Clone + 'r, C: Combine<T>>(
    acc: &mut [T],
    mut rows: impl Iterator<Item = &'r [T]>,
) -> usize {
    let Some(first) = rows.next() else {
        return 0;
    };
    acc.clone_from_slice(first);
    let mut count = 1;
    for row in rows {
        for (a, u) in acc.iter_mut().zip(row) {
            C::combine(a, u);
        }
        count += 1;
    }
    count
}

/// [`fold_rows`] of each row scaled by its weight: `acc = w0 * row0`, then
/// `acc = C(acc, w * row)`, the product rounded to `T` first (`M` is `T`'s
/// product).
pub(crate) fn fold_weighted_rows<'r, T: Clone + 'r, C: Combine<T>, M: Combine<T>>(
    acc: &mut [T],
    mut rows: impl Iterator<Item = (&'r [T], &'r T)>,
) -> usize {
    let Some((first, weight)) = rows.next() else {
        return 0;
    };
    acc.clone_from_slice(first);
    for a in acc.iter_mut() {
        M::combine(a, weight);
    }
    let mut count = 1;
    for (row, weight) in rows {
        for (a, x) in acc.iter_mut().zip(row) {
            let mut product = x.clone();
            M::combine(&mut product, weight);
            C::combine(a, &product);
        }
        count += 1;
    }
    count
}

/// For `amax`/`amin` whose `values` are computed: `arg[g]` = the row number
/// along the axis of the first row of segment `g` that holds the value
/// (NaN matches NaN, `-0.0` does not match `0.0`); `rows` (one past the
/// last) for an empty segment.
pub(crate) fn arg<T: Element>(
    src: &[T],
    layout: Layout,
    bounds: &Bounds,
    values: &[T],
    arg: &mut [i64],
) {
    if arg.is_empty() {
        return;
    }
    let bytes = std::mem::size_of_val(src) + std::mem::size_of_val(arg);
    let chunk = chunk_len(layout, arg.len(), bytes);
    let inner = layout.inner;
    let none = layout.rows as i64;
    parallel::for_each_chunk(arg, chunk, |task, part| {
        let first_row = first_row_of(task, chunk, inner);
        let segments = SegmentsFrom::new(src, layout, bounds, first_row);
        for (k, (found, (first, rows, _))) in part.chunks_exact_mut(inner).zip(segments).enumerate()
        {
            let g = first_row + k;
            let value = &values[g * inner..(g + 1) * inner];
            found.fill(none);
            for (r, row) in rows.chunks_exact(inner).enumerate() {
                for ((slot, v), x) in found.iter_mut().zip(value).zip(row) {
                    if *slot == none && same(x, v) {
                        *slot = (first + r) as i64;
                    }
                }
            }
        }
    });
}

/// Whether `a` is `b`: the same bytes, or both NaN (a fold may quiet a
/// NaN's payload); `==` for bool and strings.
pub(crate) fn same<T: Element>(a: &T, b: &T) -> bool {
    match (
        T::as_bytes(std::slice::from_ref(a)),
        T::as_bytes(std::slice::from_ref(b)),
    ) {
        (Some(x), Some(y)) => x == y || (is_nan(a) && is_nan(b)),
        _ => a == b,
    }
}

/// NaN is the one value not equal to itself.
#[allow(clippy::eq_op)]
fn is_nan<T: PartialEq>(x: &T) -> bool {
    x != x
}
