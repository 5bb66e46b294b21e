//! AVX2 gathers for GatherElements along the last axis (here, and across
//! the ends of short rows in [`spanning`]) and along an outer one
//! ([`strided`]): x86-64 intrinsics behind safe slice functions,
//! chosen at run time.
//!
//! Along the last axis each output element reads one word of a data row
//! that sits in cache, so the scalar loop is bound by instructions (load
//! the index, check it, load, store: about 4.5 cycles an element on W4),
//! not by memory. `vpgatherqd` / `vpgatherqq` load four words per
//! instruction after one vector check of four indices; with `i32` or
//! `u16` indices (widened to `i32` lanes in registers), `vpgatherdd` loads
//! eight and `vpgatherdq` four.
//!
//! The functions write a prefix of the output and return its length: 0 when
//! the CPU lacks AVX2 (or the target is not x86-64). The caller's scalar
//! loop writes the rest and reports bad indices. Under Miri the AVX2 path
//! runs only when the crate is built with `-C target-feature=+avx2`, which
//! CI does for this module's tests.
#![allow(unsafe_code)]

mod spanning;
mod strided;

pub(crate) use spanning::{gather_spanning, Span, SpanningIndex};
pub(crate) use strided::{gather_strided, StridedIndex};

use crate::mem::cpu::avx2_available;
use crate::mem::uninit::Slot;

/// An index type the vector loops read in place: `i64`, `i32` and `u16`.
pub(crate) trait VectorIndex: Sized {
    /// The loop for 4-byte words.
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, Self>;
    /// The loop for 8-byte words.
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, Self>;
}

impl VectorIndex for i64 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, i64> = x86::gather_u32s_avx2;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, i64> = x86::gather_u64s_avx2;
}

impl VectorIndex for i32 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, i32> = x86::gather_u32s_narrow_avx2::<i32, false>;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, i32> = x86::gather_u64s_narrow_avx2::<i32, false>;
}

impl VectorIndex for u16 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, u16> = x86::gather_u32s_narrow_avx2::<u16, true>;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, u16> = x86::gather_u64s_narrow_avx2::<u16, true>;
}

/// Writes `dst[j] = row[p_j]` for 4-byte words, where `p_j` is
/// `indices[j]` plus `negative_shift` when negative (the axis size, or 0
/// where negative indices are refused), in groups of eight, stopping before
/// the first group with a `p_j` outside `row`; returns how many elements it
/// wrote (0 without AVX2). The caller's scalar loop does the rest: the
/// tail, and the group with a bad index, to name it.
///
/// The lines of `next_row` (the row gathered after this one, or none) are
/// asked into L1 one at a time, spread evenly over the groups: a hint,
/// which reads nothing into the result.
///
/// With `streaming`, aligned stores bypass the cache (for outputs larger
/// than it: a plain store first reads the line it writes); the caller must
/// then call [`crate::mem::stream::store_fence`] before handing `dst` on.
pub(crate) fn gather_u32s<O: Slot<u32>, X: VectorIndex>(
    row: &[u32],
    next_row: &[u32],
    indices: &[X],
    negative_shift: i64,
    dst: &mut [O],
    streaming: bool,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    return run(
        row,
        next_row,
        indices,
        negative_shift,
        dst,
        streaming,
        X::U32S,
    );
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (row, next_row, indices, negative_shift, dst, streaming);
    #[cfg(not(target_arch = "x86_64"))]
    return 0;
}

/// [`gather_u32s`] for 8-byte words, in groups of four.
pub(crate) fn gather_u64s<O: Slot<u64>, X: VectorIndex>(
    row: &[u64],
    next_row: &[u64],
    indices: &[X],
    negative_shift: i64,
    dst: &mut [O],
    streaming: bool,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    return run(
        row,
        next_row,
        indices,
        negative_shift,
        dst,
        streaming,
        X::U64S,
    );
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (row, next_row, indices, negative_shift, dst, streaming);
    #[cfg(not(target_arch = "x86_64"))]
    return 0;
}

/// Run an AVX2 `kernel` if the CPU has AVX2; 0 elements written otherwise.
#[cfg(target_arch = "x86_64")]
fn run<W, O: Slot<W>, X>(
    row: &[W],
    next_row: &[W],
    indices: &[X],
    negative_shift: i64,
    dst: &mut [O],
    streaming: bool,
    kernel: x86::Kernel<W, X>,
) -> usize {
    if !avx2_available() {
        return 0;
    }
    let len = dst.len().min(indices.len());
    // SAFETY: the kernels need AVX2, available (checked above), and room
    // for `indices.len()` words at `dst`: `len` slots of an exclusively
    // borrowed slice, each the size of a word (`Slot`'s contract), and
    // writing a word into either kind of slot leaves a valid value.
    unsafe {
        kernel(
            row,
            next_row,
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

    /// A gather kernel: writes the `k` words from `dst` on, for the `k`
    /// it returns.
    ///
    /// # Safety
    /// AVX2 must be available and `dst` valid for writes of
    /// `indices.len()` words, referenced by nothing else meanwhile.
    pub(super) type Kernel<W, X> = unsafe fn(&[W], &[W], &[X], i64, *mut W, bool) -> usize;

    use crate::mem::prefetch::{prefetch_line, CacheLevel};

    /// Asks for the lines of the row gathered after this one into L1, one
    /// at a time, spread evenly over this row's groups, so that row is in
    /// cache when its turn comes without a pass over it first.
    struct NextRow {
        line: *const i8,
        lines: usize,
        every: usize,
        countdown: usize,
    }

    impl NextRow {
        /// For `groups` groups of this row, `next_row` to ask for.
        fn new<W>(next_row: &[W], groups: usize) -> NextRow {
            let lines = std::mem::size_of_val(next_row).div_ceil(64);
            let every = match lines {
                0 => usize::MAX,
                _ => (groups / lines).max(1),
            };
            NextRow {
                line: next_row.as_ptr().cast(),
                lines,
                every,
                countdown: every,
            }
        }

        /// One group done: the next line when its turn has come.
        #[inline(always)]
        fn step(&mut self) {
            self.countdown -= 1;
            if self.countdown == 0 {
                self.countdown = self.every;
                if self.lines > 0 {
                    // The crate's one prefetch (none under Miri, which has
                    // no such instruction).
                    prefetch_line::<{ CacheLevel::L1 as u8 }>(self.line);
                    self.line = self.line.wrapping_add(64);
                    self.lines -= 1;
                }
            }
        }
    }

    /// Four indices, negatives shifted, and whether all four are in
    /// `[0, size)`.
    ///
    /// # Safety
    /// AVX2 must be available; `at` must point to four readable `i64`s.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn positions(
        at: *const i64,
        shift: __m256i,
        size: __m256i,
    ) -> (__m256i, bool) {
        // SAFETY: the caller guarantees four readable i64s at `at`; the load
        // tolerates any alignment.
        let v = unsafe { _mm256_loadu_si256(at.cast::<__m256i>()) };
        let negative = _mm256_cmpgt_epi64(_mm256_setzero_si256(), v);
        let p = _mm256_add_epi64(v, _mm256_and_si256(negative, shift));
        let at_least_0 = _mm256_cmpgt_epi64(p, _mm256_set1_epi64x(-1));
        let below_size = _mm256_cmpgt_epi64(size, p);
        let ok = _mm256_movemask_epi8(_mm256_and_si256(at_least_0, below_size)) == -1;
        (p, ok)
    }

    /// Store 16 bytes at `to`: streaming (past the cache) or plain.
    ///
    /// # Safety
    /// `to` must be valid for a 16-byte write, and 16-byte aligned when
    /// `streaming`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn store(to: *mut __m128i, v: __m128i, streaming: bool) {
        // SAFETY: the caller's contract; Miri cannot run `movntdq`, so there
        // it gets an aligned plain store with the same preconditions.
        unsafe {
            match streaming {
                #[cfg(not(miri))]
                true => _mm_stream_si128(to, v),
                #[cfg(miri)]
                true => to.write(v),
                false => _mm_storeu_si128(to, v),
            }
        }
    }

    /// Gathers whole groups of eight while every index is in range; returns
    /// how many elements it wrote (a multiple of eight), stopping before
    /// the first group with a bad index.
    ///
    /// # Safety
    /// As for [`Kernel`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gather_u32s_avx2(
        row: &[u32],
        next_row: &[u32],
        indices: &[i64],
        shift: i64,
        dst: *mut u32,
        streaming: bool,
    ) -> usize {
        let streaming = streaming && dst.align_offset(16) == 0;
        let Ok(size) = i64::try_from(row.len()) else {
            return 0;
        };
        let (shift, size) = (_mm256_set1_epi64x(shift), _mm256_set1_epi64x(size));
        let base = row.as_ptr().cast::<i32>();
        let mut ahead = NextRow::new(next_row, indices.len() / 8);
        let mut j = 0;
        while j + 8 <= indices.len() {
            // SAFETY: `j + 8 <= indices.len()`, so both groups of four are
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
            // SAFETY: every lane of `lo` and `hi` is in `[0, row.len())`
            // (checked just above), so each gathered 4-byte load lies inside
            // `row`. `dst` has room for `indices.len() >= j + 8` words, so
            // the two 16-byte unaligned stores at `j` and `j + 4` are inside it.
            unsafe {
                let a = _mm256_i64gather_epi32::<4>(base, lo);
                let b = _mm256_i64gather_epi32::<4>(base, hi);
                let to = dst.add(j).cast::<__m128i>();
                store(to, a, streaming);
                store(to.add(1), b, streaming);
            }
            ahead.step();
            j += 8;
        }
        j
    }

    /// [`gather_u32s_avx2`] for 8-byte words, in groups of four.
    ///
    /// # Safety
    /// As for [`Kernel`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gather_u64s_avx2(
        row: &[u64],
        next_row: &[u64],
        indices: &[i64],
        shift: i64,
        dst: *mut u64,
        streaming: bool,
    ) -> usize {
        let streaming = streaming && dst.align_offset(16) == 0;
        let Ok(size) = i64::try_from(row.len()) else {
            return 0;
        };
        let (shift, size) = (_mm256_set1_epi64x(shift), _mm256_set1_epi64x(size));
        let base = row.as_ptr().cast::<i64>();
        let mut ahead = NextRow::new(next_row, indices.len() / 4);
        let mut j = 0;
        while j + 4 <= indices.len() {
            // SAFETY: `j + 4 <= indices.len()`: four readable indices.
            let (p, ok) = unsafe { positions(indices.as_ptr().add(j), shift, size) };
            if !ok {
                break;
            }
            // SAFETY: every lane of `p` is in `[0, row.len())` (checked just
            // above), so each 8-byte load lies inside `row`; `dst` has room
            // for `indices.len() >= j + 4` words, so for the two 16-byte stores.
            unsafe {
                let v = _mm256_i64gather_epi64::<8>(base, p);
                let to = dst.add(j).cast::<__m128i>();
                store(to, _mm256_castsi256_si128(v), streaming);
                store(to.add(1), _mm256_extracti128_si256::<1>(v), streaming);
            }
            ahead.step();
            j += 4;
        }
        j
    }

    /// Eight indices of 4 bytes (`i32`), or of 2 (`u16`) widened, as `i32`
    /// lanes with negatives shifted, and whether all eight are in
    /// `[0, size)`.
    ///
    /// # Safety
    /// AVX2 must be available; `at` must point to eight readable indices
    /// of that width.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn positions8<const U16: bool>(
        at: *const u8,
        shift: __m256i,
        size: __m256i,
    ) -> (__m256i, bool) {
        // SAFETY: the caller guarantees the 16 or 32 readable bytes; the
        // loads tolerate any alignment.
        let v = unsafe {
            match U16 {
                true => _mm256_cvtepu16_epi32(_mm_loadu_si128(at.cast())),
                false => _mm256_loadu_si256(at.cast()),
            }
        };
        let negative = _mm256_cmpgt_epi32(_mm256_setzero_si256(), v);
        let p = _mm256_add_epi32(v, _mm256_and_si256(negative, shift));
        let at_least_0 = _mm256_cmpgt_epi32(p, _mm256_set1_epi32(-1));
        let below_size = _mm256_cmpgt_epi32(size, p);
        let ok = _mm256_movemask_epi8(_mm256_and_si256(at_least_0, below_size)) == -1;
        (p, ok)
    }

    /// [`positions8`] for four indices, in a 128-bit vector.
    ///
    /// # Safety
    /// AVX2 must be available; `at` must point to four readable indices of
    /// that width.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn positions4<const U16: bool>(
        at: *const u8,
        shift: __m128i,
        size: __m128i,
    ) -> (__m128i, bool) {
        // SAFETY: the caller guarantees the 8 or 16 readable bytes; the
        // loads tolerate any alignment.
        let v = unsafe {
            match U16 {
                true => _mm_cvtepu16_epi32(_mm_loadl_epi64(at.cast())),
                false => _mm_loadu_si128(at.cast()),
            }
        };
        let negative = _mm_cmpgt_epi32(_mm_setzero_si128(), v);
        let p = _mm_add_epi32(v, _mm_and_si128(negative, shift));
        let at_least_0 = _mm_cmpgt_epi32(p, _mm_set1_epi32(-1));
        let below_size = _mm_cmpgt_epi32(size, p);
        let ok = _mm_movemask_epi8(_mm_and_si128(at_least_0, below_size)) == 0xFFFF;
        (p, ok)
    }

    /// The axis size and negative shift as `i32` lanes, or `None` for a
    /// row too long for them (the scalar loop takes it).
    pub(super) fn narrow_bounds(row_len: usize, shift: i64) -> Option<(i32, i32)> {
        Some((i32::try_from(row_len).ok()?, i32::try_from(shift).ok()?))
    }

    /// [`gather_u32s_avx2`] with `i32` indices or `u16` ones (`U16`), eight
    /// a group, each group one `vpgatherdd`.
    ///
    /// # Safety
    /// As for [`Kernel`]; `X` must be 2 bytes wide when `U16`, else 4.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gather_u32s_narrow_avx2<X, const U16: bool>(
        row: &[u32],
        next_row: &[u32],
        indices: &[X],
        shift: i64,
        dst: *mut u32,
        streaming: bool,
    ) -> usize {
        debug_assert_eq!(std::mem::size_of::<X>(), if U16 { 2 } else { 4 });
        let streaming = streaming && dst.align_offset(16) == 0;
        let Some((size, shift)) = narrow_bounds(row.len(), shift) else {
            return 0;
        };
        let (shift, size) = (_mm256_set1_epi32(shift), _mm256_set1_epi32(size));
        let base = row.as_ptr().cast::<i32>();
        let at = indices.as_ptr().cast::<u8>();
        let width = std::mem::size_of::<X>();
        let mut ahead = NextRow::new(next_row, indices.len() / 8);
        let mut j = 0;
        while j + 8 <= indices.len() {
            // SAFETY: `j + 8 <= indices.len()`: eight readable indices.
            let (p, ok) = unsafe { positions8::<U16>(at.add(j * width), shift, size) };
            if !ok {
                break;
            }
            // SAFETY: every lane of `p` is in `[0, row.len())` (checked just
            // above), so each 4-byte load lies inside `row`; `dst` has room
            // for `indices.len() >= j + 8` words, so for the two 16-byte stores.
            unsafe {
                let v = _mm256_i32gather_epi32::<4>(base, p);
                let to = dst.add(j).cast::<__m128i>();
                store(to, _mm256_castsi256_si128(v), streaming);
                store(to.add(1), _mm256_extracti128_si256::<1>(v), streaming);
            }
            ahead.step();
            j += 8;
        }
        j
    }

    /// [`gather_u64s_avx2`] with `i32` or `u16` indices, four a group, each
    /// group one `vpgatherdq`.
    ///
    /// # Safety
    /// As for [`gather_u32s_narrow_avx2`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gather_u64s_narrow_avx2<X, const U16: bool>(
        row: &[u64],
        next_row: &[u64],
        indices: &[X],
        shift: i64,
        dst: *mut u64,
        streaming: bool,
    ) -> usize {
        debug_assert_eq!(std::mem::size_of::<X>(), if U16 { 2 } else { 4 });
        let streaming = streaming && dst.align_offset(16) == 0;
        let Some((size, shift)) = narrow_bounds(row.len(), shift) else {
            return 0;
        };
        let (shift, size) = (_mm_set1_epi32(shift), _mm_set1_epi32(size));
        let base = row.as_ptr().cast::<i64>();
        let at = indices.as_ptr().cast::<u8>();
        let width = std::mem::size_of::<X>();
        let mut ahead = NextRow::new(next_row, indices.len() / 4);
        let mut j = 0;
        while j + 4 <= indices.len() {
            // SAFETY: `j + 4 <= indices.len()`: four readable indices.
            let (p, ok) = unsafe { positions4::<U16>(at.add(j * width), shift, size) };
            if !ok {
                break;
            }
            // SAFETY: every lane of `p` is in `[0, row.len())` (checked just
            // above), so each 8-byte load lies inside `row`; `dst` has room
            // for `indices.len() >= j + 4` words, so for the two 16-byte stores.
            unsafe {
                let v = _mm256_i32gather_epi64::<8>(base, p);
                let to = dst.add(j).cast::<__m128i>();
                store(to, _mm256_castsi256_si128(v), streaming);
                store(to.add(1), _mm256_extracti128_si256::<1>(v), streaming);
            }
            ahead.step();
            j += 4;
        }
        j
    }
}

#[cfg(test)]
mod tests;
