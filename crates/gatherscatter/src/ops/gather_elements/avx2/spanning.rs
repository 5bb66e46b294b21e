//! AVX2 gathers for GatherElements along the last axis when its rows are
//! short: one loop runs across row ends, each lane carrying the offset of
//! its own data row, instead of a call per row.
//!
//! Output element `j` of a piece sits at column `c = (first_col + j) %
//! row_len` of row `r = (first_col + j) / row_len` (counted from the
//! piece's first row) and reads `data[r * data_row + p_j]`. Each lane
//! keeps its `c` and `r * data_row`; a step of `n` elements adds
//! `n % row_len` columns and `n / row_len` rows, and one compare carries
//! a column past the row's end into the next row. Float32 rows of 16 by
//! int64 indices (16 MiB out, one thread, a C loop of this shape on Intel
//! Xeon family 6 model 207): 3.6-5.8 ms with the scalar walk, 2.5-3.3
//! with this one.
//!
//! Like the other loops, the functions write a prefix of the output in
//! whole groups and return its length (0 without AVX2); the caller's
//! scalar walk writes the rest and names a bad index.
#![allow(unsafe_code)]

use crate::mem::cpu::avx2_available;
use crate::mem::uninit::Slot;

/// Where a piece of short rows starts, and their shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    /// Words in a data row: the bound of every index, and the distance
    /// between two rows' data.
    pub data_row: usize,
    /// Elements in an output row.
    pub row_len: usize,
    /// The piece's first element's column, below `row_len`.
    pub first_col: usize,
}

/// An index type the spanning loops read in place: `i64`, `i32` and `u16`.
pub(crate) trait SpanningIndex: Sized {
    /// The loop for 4-byte words.
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, Self>;
    /// The loop for 8-byte words.
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, Self>;
    /// Whether the loops hold offsets in 32-bit lanes (the narrow index
    /// types), so that every offset must fit an `i32`.
    const NARROW: bool;
}

impl SpanningIndex for i64 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, i64> = x86::spanning_u32s_avx2;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, i64> = x86::spanning_u64s_avx2;
    const NARROW: bool = false;
}

impl SpanningIndex for i32 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, i32> = x86::spanning_u32s_narrow_avx2::<i32, false>;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, i32> = x86::spanning_u64s_narrow_avx2::<i32, false>;
    const NARROW: bool = true;
}

impl SpanningIndex for u16 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, u16> = x86::spanning_u32s_narrow_avx2::<u16, true>;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, u16> = x86::spanning_u64s_narrow_avx2::<u16, true>;
    const NARROW: bool = true;
}

/// A word the spanning loops gather: 4 or 8 bytes.
pub(crate) trait SpanningWord: Sized {
    /// The loop for this word and indices `X`.
    #[cfg(target_arch = "x86_64")]
    fn kernel<X: SpanningIndex>() -> x86::Kernel<Self, X>;
}

impl SpanningWord for u32 {
    #[cfg(target_arch = "x86_64")]
    fn kernel<X: SpanningIndex>() -> x86::Kernel<u32, X> {
        X::U32S
    }
}

impl SpanningWord for u64 {
    #[cfg(target_arch = "x86_64")]
    fn kernel<X: SpanningIndex>() -> x86::Kernel<u64, X> {
        X::U64S
    }
}

/// Writes `dst[j] = data[r_j * data_row + p_j]` for the rows `r_j` the
/// [`Span`] gives each element, where `p_j` is `indices[j]` plus
/// `negative_shift` when negative and must lie in `[0, data_row)`, in
/// groups of eight (four for 8-byte words by narrow indices), stopping
/// before the first group with a bad `p_j`; returns how many elements it
/// wrote (0 without AVX2). Only elements whose data row lies inside `data`
/// are taken (see [`reach`]).
///
/// With `streaming`, aligned stores bypass the cache; the caller must then
/// call [`crate::mem::stream::store_fence`] before handing `dst` on.
pub(crate) fn gather_spanning<W: SpanningWord, O: Slot<W>, X: SpanningIndex>(
    data: &[W],
    span: Span,
    indices: &[X],
    negative_shift: i64,
    dst: &mut [O],
    streaming: bool,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    return run(data, span, indices, negative_shift, dst, streaming);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, span, indices, negative_shift, dst, streaming);
    #[cfg(not(target_arch = "x86_64"))]
    return 0;
}

/// How many of the first `len` elements a loop may take: those whose data
/// row ends inside `data_len` words (and, when `narrow`, whose every
/// offset fits an `i32`, as do the row sizes). 0 for an empty data row or
/// a `first_col` not inside a row.
fn reach(data_len: usize, span: Span, len: usize, narrow: bool) -> usize {
    let Span {
        data_row,
        row_len,
        first_col,
    } = span;
    if data_row == 0 || first_col >= row_len {
        return 0;
    }
    let mut rows = data_len / data_row;
    if narrow {
        let limit = i32::MAX as usize;
        if data_row > limit || row_len > limit {
            return 0;
        }
        // Row `r`'s last offset, `(r + 1) * data_row - 1`, fits an `i32`.
        rows = rows.min((limit + 1) / data_row);
    }
    let room = rows.saturating_mul(row_len).saturating_sub(first_col);
    len.min(room)
}

/// Run the AVX2 kernel for `W` and `X` on the elements [`reach`] allows,
/// if the CPU has AVX2; 0 elements written otherwise.
#[cfg(target_arch = "x86_64")]
fn run<W: SpanningWord, O: Slot<W>, X: SpanningIndex>(
    data: &[W],
    span: Span,
    indices: &[X],
    negative_shift: i64,
    dst: &mut [O],
    streaming: bool,
) -> usize {
    if !avx2_available() {
        return 0;
    }
    let len = reach(data.len(), span, dst.len().min(indices.len()), X::NARROW);
    // A shift beyond the lanes' range: the scalar walk takes the piece.
    if X::NARROW && i32::try_from(negative_shift).is_err() {
        return 0;
    }
    // SAFETY: AVX2 is available (checked above). Element `j < len` sits in
    // row `(first_col + j) / row_len`, whose data row lies inside `data`
    // by `reach` (and whose offsets fit an `i32` for narrow indices, as do
    // `data_row`, `row_len` and the shift); the kernels read only at
    // positions in `[0, data_row)` of it. `dst` has room for `len` words:
    // `len` slots of an exclusively borrowed slice, each a word (`Slot`'s
    // contract), and writing a word into either kind of slot leaves a
    // valid value.
    unsafe {
        W::kernel::<X>()(
            data.as_ptr(),
            span,
            &indices[..len],
            negative_shift,
            O::words(dst),
            streaming,
        )
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{positions, positions4, positions8, store};
    use super::Span;

    /// A spanning kernel: writes the `k` words from `dst` on, for the `k`
    /// it returns.
    ///
    /// # Safety
    /// AVX2 must be available; for every `j < indices.len()` the data row
    /// of element `j` (see [`Span`]), `data_row` words from `data` plus
    /// that row's number times `data_row`, must be readable, and its
    /// offsets must fit an `i32` for narrow index types, as must
    /// `data_row`, `row_len` and the shift; `first_col < row_len`; `dst`
    /// must be valid for writes of `indices.len()` words, referenced by
    /// nothing else meanwhile.
    pub(super) type Kernel<W, X> = unsafe fn(*const W, Span, &[X], i64, *mut W, bool) -> usize;

    /// Columns and data-row offsets of the `N` elements from `first` on
    /// (counted from the piece's first element), and the columns and
    /// offset a step of `step` elements adds, without a division per lane
    /// (one for `first`; the pieces are a few hundred elements long).
    /// Offsets past the piece's end may wrap; they are never used.
    #[allow(clippy::type_complexity)]
    fn lanes<const N: usize>(
        span: Span,
        first: usize,
        step: usize,
    ) -> ([(usize, usize); N], (usize, usize)) {
        let Span {
            data_row,
            row_len,
            first_col,
        } = span;
        let t = first_col + first;
        let (mut col, mut row) = (t % row_len, t / row_len);
        let mut lanes = [(0, 0); N];
        for lane in &mut lanes {
            *lane = (col, row.wrapping_mul(data_row));
            col += 1;
            if col == row_len {
                (col, row) = (0, row + 1);
            }
        }
        let (mut cols, mut rows) = (step, 0usize);
        while cols >= row_len {
            (cols, rows) = (cols - row_len, rows + 1);
        }
        (lanes, (cols, rows.wrapping_mul(data_row)))
    }

    /// Four lanes' columns and data-row offsets, as `i64`s, for elements
    /// `step` apart from one group to the next.
    struct Lanes64 {
        col: __m256i,
        base: __m256i,
        /// `step % row_len` and `(step / row_len) * data_row`.
        cols: __m256i,
        rows: __m256i,
        last_col: __m256i,
        row_len: __m256i,
        data_row: __m256i,
    }

    impl Lanes64 {
        /// The lanes of elements `first..first + 4`, counted from the
        /// piece's first element (offsets past the piece's end may wrap;
        /// they are never used).
        ///
        /// # Safety
        /// AVX2 must be available; `row_len > 0`.
        #[target_feature(enable = "avx2")]
        unsafe fn new(span: Span, first: usize, step: usize) -> Lanes64 {
            let ([a, b, c, d], (cols, rows)) = lanes::<4>(span, first, step);
            let (row_len, data_row) = (span.row_len, span.data_row);
            Lanes64 {
                col: _mm256_setr_epi64x(a.0 as i64, b.0 as i64, c.0 as i64, d.0 as i64),
                base: _mm256_setr_epi64x(a.1 as i64, b.1 as i64, c.1 as i64, d.1 as i64),
                cols: _mm256_set1_epi64x(cols as i64),
                rows: _mm256_set1_epi64x(rows as i64),
                last_col: _mm256_set1_epi64x((row_len - 1) as i64),
                row_len: _mm256_set1_epi64x(row_len as i64),
                data_row: _mm256_set1_epi64x(data_row as i64),
            }
        }

        /// The group `step` further on: a column past the row's end
        /// moves into the next row (once: both parts are below `row_len`).
        ///
        /// # Safety
        /// AVX2 must be available.
        #[target_feature(enable = "avx2")]
        unsafe fn advance(&mut self) {
            let col = _mm256_add_epi64(self.col, self.cols);
            let past = _mm256_cmpgt_epi64(col, self.last_col);
            self.col = _mm256_sub_epi64(col, _mm256_and_si256(past, self.row_len));
            let base = _mm256_add_epi64(self.base, self.rows);
            self.base = _mm256_add_epi64(base, _mm256_and_si256(past, self.data_row));
        }
    }

    /// Eight lanes' columns and data-row offsets, as `i32`s: [`Lanes64`]
    /// for narrow indices.
    struct Lanes32 {
        col: __m256i,
        base: __m256i,
        cols: __m256i,
        rows: __m256i,
        last_col: __m256i,
        row_len: __m256i,
        data_row: __m256i,
    }

    impl Lanes32 {
        /// The lanes of elements `first..first + 8` (offsets past the
        /// piece's end may wrap; they are never used).
        ///
        /// # Safety
        /// AVX2 must be available; `row_len > 0`.
        #[target_feature(enable = "avx2")]
        unsafe fn new(span: Span, first: usize, step: usize) -> Lanes32 {
            let (l, (cols, rows)) = lanes::<8>(span, first, step);
            let (row_len, data_row) = (span.row_len, span.data_row);
            let [a, b, c, d, e, f, g, h] = l.map(|(col, base)| (col as i32, base as i32));
            Lanes32 {
                col: _mm256_setr_epi32(a.0, b.0, c.0, d.0, e.0, f.0, g.0, h.0),
                base: _mm256_setr_epi32(a.1, b.1, c.1, d.1, e.1, f.1, g.1, h.1),
                cols: _mm256_set1_epi32(cols as i32),
                rows: _mm256_set1_epi32(rows as i32),
                last_col: _mm256_set1_epi32((row_len - 1) as i32),
                row_len: _mm256_set1_epi32(row_len as i32),
                data_row: _mm256_set1_epi32(data_row as i32),
            }
        }

        /// As [`Lanes64::advance`].
        ///
        /// # Safety
        /// AVX2 must be available.
        #[target_feature(enable = "avx2")]
        unsafe fn advance(&mut self) {
            let col = _mm256_add_epi32(self.col, self.cols);
            let past = _mm256_cmpgt_epi32(col, self.last_col);
            self.col = _mm256_sub_epi32(col, _mm256_and_si256(past, self.row_len));
            let base = _mm256_add_epi32(self.base, self.rows);
            self.base = _mm256_add_epi32(base, _mm256_and_si256(past, self.data_row));
        }
    }

    /// Groups of eight 4-byte words by `i64` indices, two `vpgatherqd`
    /// each, while every index is in range; returns how many elements it
    /// wrote (a multiple of eight).
    ///
    /// # Safety
    /// As for [`Kernel`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn spanning_u32s_avx2(
        data: *const u32,
        span: Span,
        indices: &[i64],
        shift: i64,
        dst: *mut u32,
        streaming: bool,
    ) -> usize {
        let streaming = streaming && dst.align_offset(16) == 0;
        let (shift, size) = (
            _mm256_set1_epi64x(shift),
            _mm256_set1_epi64x(span.data_row as i64),
        );
        // SAFETY: AVX2 is available and `row_len > 0` (the contract's
        // `first_col < row_len`).
        let (mut lo_lanes, mut hi_lanes) =
            unsafe { (Lanes64::new(span, 0, 8), Lanes64::new(span, 4, 8)) };
        let base = data.cast::<i32>();
        let mut j = 0;
        while j + 8 <= indices.len() {
            // SAFETY: `j + 8 <= indices.len()`: both groups of four are
            // readable.
            let ((lo, lo_ok), (hi, hi_ok)) = unsafe {
                let at = indices.as_ptr().add(j);
                (
                    positions(at, shift, size),
                    positions(at.add(4), shift, size),
                )
            };
            if !(lo_ok && hi_ok) {
                break;
            }
            // SAFETY: every lane of `lo` and `hi` is in `[0, data_row)`
            // (checked just above) and each lane's base is its element's
            // row times `data_row`, so each 4-byte load lies inside that
            // element's data row, readable by the kernel's contract. `dst`
            // has room for `indices.len() >= j + 8` words, so for the two
            // 16-byte stores at `j` and `j + 4`.
            unsafe {
                let a = _mm256_i64gather_epi32::<4>(base, _mm256_add_epi64(lo, lo_lanes.base));
                let b = _mm256_i64gather_epi32::<4>(base, _mm256_add_epi64(hi, hi_lanes.base));
                let to = dst.add(j).cast::<__m128i>();
                store(to, a, streaming);
                store(to.add(1), b, streaming);
            }
            // SAFETY: AVX2 is available (the kernel's contract).
            unsafe {
                lo_lanes.advance();
                hi_lanes.advance();
            }
            j += 8;
        }
        j
    }

    /// [`spanning_u32s_avx2`] for 8-byte words, two `vpgatherqq` a group
    /// of eight.
    ///
    /// # Safety
    /// As for [`Kernel`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn spanning_u64s_avx2(
        data: *const u64,
        span: Span,
        indices: &[i64],
        shift: i64,
        dst: *mut u64,
        streaming: bool,
    ) -> usize {
        let streaming = streaming && dst.align_offset(16) == 0;
        let (shift, size) = (
            _mm256_set1_epi64x(shift),
            _mm256_set1_epi64x(span.data_row as i64),
        );
        // SAFETY: AVX2 is available and `row_len > 0` (the contract's
        // `first_col < row_len`).
        let (mut lo_lanes, mut hi_lanes) =
            unsafe { (Lanes64::new(span, 0, 8), Lanes64::new(span, 4, 8)) };
        let base = data.cast::<i64>();
        let mut j = 0;
        while j + 8 <= indices.len() {
            // SAFETY: `j + 8 <= indices.len()`: both groups of four are
            // readable.
            let ((lo, lo_ok), (hi, hi_ok)) = unsafe {
                let at = indices.as_ptr().add(j);
                (
                    positions(at, shift, size),
                    positions(at.add(4), shift, size),
                )
            };
            if !(lo_ok && hi_ok) {
                break;
            }
            // SAFETY: as in `spanning_u32s_avx2`, each 8-byte load lies
            // inside its element's data row; `dst` has room for the four
            // 16-byte stores from `j` to `j + 8`.
            unsafe {
                let a = _mm256_i64gather_epi64::<8>(base, _mm256_add_epi64(lo, lo_lanes.base));
                let b = _mm256_i64gather_epi64::<8>(base, _mm256_add_epi64(hi, hi_lanes.base));
                let to = dst.add(j).cast::<__m128i>();
                store(to, _mm256_castsi256_si128(a), streaming);
                store(to.add(1), _mm256_extracti128_si256::<1>(a), streaming);
                store(to.add(2), _mm256_castsi256_si128(b), streaming);
                store(to.add(3), _mm256_extracti128_si256::<1>(b), streaming);
            }
            // SAFETY: AVX2 is available (the kernel's contract).
            unsafe {
                lo_lanes.advance();
                hi_lanes.advance();
            }
            j += 8;
        }
        j
    }

    /// [`spanning_u32s_avx2`] with `i32` indices or `u16` ones (`U16`),
    /// eight a group, each group one `vpgatherdd`.
    ///
    /// # Safety
    /// As for [`Kernel`]; `X` must be 2 bytes wide when `U16`, else 4.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn spanning_u32s_narrow_avx2<X, const U16: bool>(
        data: *const u32,
        span: Span,
        indices: &[X],
        shift: i64,
        dst: *mut u32,
        streaming: bool,
    ) -> usize {
        debug_assert_eq!(std::mem::size_of::<X>(), if U16 { 2 } else { 4 });
        let streaming = streaming && dst.align_offset(16) == 0;
        // The caller's contract: both fit an `i32`.
        let (shift, size) = (
            _mm256_set1_epi32(shift as i32),
            _mm256_set1_epi32(span.data_row as i32),
        );
        // SAFETY: AVX2 is available and `row_len > 0` (the contract's
        // `first_col < row_len`).
        let mut lanes = unsafe { Lanes32::new(span, 0, 8) };
        let base = data.cast::<i32>();
        let at = indices.as_ptr().cast::<u8>();
        let width = std::mem::size_of::<X>();
        let mut j = 0;
        while j + 8 <= indices.len() {
            // SAFETY: `j + 8 <= indices.len()`: eight readable indices.
            let (p, ok) = unsafe { positions8::<U16>(at.add(j * width), shift, size) };
            if !ok {
                break;
            }
            // SAFETY: every lane of `p` is in `[0, data_row)` (checked just
            // above) and each lane's base is its element's row times
            // `data_row`, an offset that fits an `i32` by the contract, so
            // each 4-byte load lies inside that element's data row; `dst`
            // has room for `indices.len() >= j + 8` words, so for the two
            // 16-byte stores.
            unsafe {
                let v = _mm256_i32gather_epi32::<4>(base, _mm256_add_epi32(p, lanes.base));
                let to = dst.add(j).cast::<__m128i>();
                store(to, _mm256_castsi256_si128(v), streaming);
                store(to.add(1), _mm256_extracti128_si256::<1>(v), streaming);
            }
            // SAFETY: AVX2 is available (the kernel's contract).
            unsafe { lanes.advance() };
            j += 8;
        }
        j
    }

    /// [`spanning_u64s_avx2`] with `i32` or `u16` indices, four a group,
    /// each group's positions widened to `i64` lanes for one `vpgatherqq`.
    ///
    /// # Safety
    /// As for [`spanning_u32s_narrow_avx2`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn spanning_u64s_narrow_avx2<X, const U16: bool>(
        data: *const u64,
        span: Span,
        indices: &[X],
        shift: i64,
        dst: *mut u64,
        streaming: bool,
    ) -> usize {
        debug_assert_eq!(std::mem::size_of::<X>(), if U16 { 2 } else { 4 });
        let streaming = streaming && dst.align_offset(16) == 0;
        // The caller's contract: both fit an `i32`.
        let (shift, size) = (
            _mm_set1_epi32(shift as i32),
            _mm_set1_epi32(span.data_row as i32),
        );
        // SAFETY: AVX2 is available and `row_len > 0` (the contract's
        // `first_col < row_len`).
        let mut lanes = unsafe { Lanes64::new(span, 0, 4) };
        let base = data.cast::<i64>();
        let at = indices.as_ptr().cast::<u8>();
        let width = std::mem::size_of::<X>();
        let mut j = 0;
        while j + 4 <= indices.len() {
            // SAFETY: `j + 4 <= indices.len()`: four readable indices.
            let (p, ok) = unsafe { positions4::<U16>(at.add(j * width), shift, size) };
            if !ok {
                break;
            }
            // SAFETY: every lane of `p` is in `[0, data_row)` (checked just
            // above), widened exactly, and each lane's base is its
            // element's row times `data_row`, so each 8-byte load lies
            // inside that element's data row; `dst` has room for
            // `indices.len() >= j + 4` words, so for the two 16-byte stores.
            unsafe {
                let offsets = _mm256_add_epi64(_mm256_cvtepi32_epi64(p), lanes.base);
                let v = _mm256_i64gather_epi64::<8>(base, offsets);
                let to = dst.add(j).cast::<__m128i>();
                store(to, _mm256_castsi256_si128(v), streaming);
                store(to.add(1), _mm256_extracti128_si256::<1>(v), streaming);
            }
            // SAFETY: AVX2 is available (the kernel's contract).
            unsafe { lanes.advance() };
            j += 4;
        }
        j
    }
}

#[cfg(test)]
mod tests;
