//! AVX2 gathers for GatherElements along an outer axis: each output
//! element `j` of a row piece reads `plane[p_j * stride + j]`, the word of
//! its own column at the axis position its index names.
//!
//! The scalar loop spends about 14 instructions an element there (load the
//! index, shift a negative one, check it, multiply by the stride, add the
//! column, check the offset, load, store); here four or eight elements
//! take one vector check, one multiply, one add and one gather.
//!
//! Each group starting before `asks` (worked out by the caller,
//! [`asked_until`](crate::mem::prefetch::asked_until); 0 for none) asks
//! for the indices
//! [`INDEX_AHEAD_BYTES`](crate::mem::prefetch::INDEX_AHEAD_BYTES) past it:
//! the gathers wait on the plane's lines, and the index stream's would
//! queue behind them.
//!
//! Like the last-axis loops, the functions write a prefix of the output
//! in whole groups and return its length (0 without AVX2); the caller's
//! scalar loop writes the rest and names a bad index.
#![allow(unsafe_code)]

use crate::mem::cpu::avx2_available;
use crate::mem::uninit::Slot;

/// An index type the strided loops read in place: `i64`, `i32` and `u16`.
pub(crate) trait StridedIndex: Sized {
    /// The loop for 4-byte words.
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, Self>;
    /// The loop for 8-byte words.
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, Self>;
    /// The loop for 2-byte words.
    #[cfg(target_arch = "x86_64")]
    const U16S: x86::Kernel<u16, Self>;
    /// The loop for bytes.
    #[cfg(target_arch = "x86_64")]
    const U8S: x86::Kernel<u8, Self>;
    /// Whether the loops hold offsets in 32-bit lanes (the narrow index
    /// types), so that every offset must fit an `i32`.
    const NARROW: bool;
}

impl StridedIndex for i64 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, i64> = x86::strided_dwords_avx2::<u32, 4>;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, i64> = x86::strided_u64s_avx2;
    #[cfg(target_arch = "x86_64")]
    const U16S: x86::Kernel<u16, i64> = x86::strided_dwords_avx2::<u16, 2>;
    #[cfg(target_arch = "x86_64")]
    const U8S: x86::Kernel<u8, i64> = x86::strided_dwords_avx2::<u8, 1>;
    const NARROW: bool = false;
}

impl StridedIndex for i32 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, i32> = x86::strided_dwords_narrow_avx2::<u32, i32, 4, false>;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, i32> = x86::strided_u64s_narrow_avx2::<i32, false>;
    #[cfg(target_arch = "x86_64")]
    const U16S: x86::Kernel<u16, i32> = x86::strided_dwords_narrow_avx2::<u16, i32, 2, false>;
    #[cfg(target_arch = "x86_64")]
    const U8S: x86::Kernel<u8, i32> = x86::strided_dwords_narrow_avx2::<u8, i32, 1, false>;
    const NARROW: bool = true;
}

impl StridedIndex for u16 {
    #[cfg(target_arch = "x86_64")]
    const U32S: x86::Kernel<u32, u16> = x86::strided_dwords_narrow_avx2::<u32, u16, 4, true>;
    #[cfg(target_arch = "x86_64")]
    const U64S: x86::Kernel<u64, u16> = x86::strided_u64s_narrow_avx2::<u16, true>;
    #[cfg(target_arch = "x86_64")]
    const U16S: x86::Kernel<u16, u16> = x86::strided_dwords_narrow_avx2::<u16, u16, 2, true>;
    #[cfg(target_arch = "x86_64")]
    const U8S: x86::Kernel<u8, u16> = x86::strided_dwords_narrow_avx2::<u8, u16, 1, true>;
    const NARROW: bool = true;
}

/// A word the strided loops gather: 1, 2, 4 or 8 bytes.
pub(crate) trait StridedWord: Sized {
    /// The loop for this word and indices `X`.
    #[cfg(target_arch = "x86_64")]
    fn kernel<X: StridedIndex>() -> x86::Kernel<Self, X>;
}

impl StridedWord for u8 {
    #[cfg(target_arch = "x86_64")]
    fn kernel<X: StridedIndex>() -> x86::Kernel<u8, X> {
        X::U8S
    }
}

impl StridedWord for u16 {
    #[cfg(target_arch = "x86_64")]
    fn kernel<X: StridedIndex>() -> x86::Kernel<u16, X> {
        X::U16S
    }
}

impl StridedWord for u32 {
    #[cfg(target_arch = "x86_64")]
    fn kernel<X: StridedIndex>() -> x86::Kernel<u32, X> {
        X::U32S
    }
}

impl StridedWord for u64 {
    #[cfg(target_arch = "x86_64")]
    fn kernel<X: StridedIndex>() -> x86::Kernel<u64, X> {
        X::U64S
    }
}

/// Writes `dst[j] = plane[p_j * stride + j]`, where `p_j` is `indices[j]`
/// plus `negative_shift` when negative, for `p_j` in `[0, size)`, in groups
/// of eight (four for 8-byte words), stopping before the first group with
/// a `p_j` outside that range; returns how many elements it wrote (0
/// without AVX2). Only elements whose every possible offset lies inside
/// `plane` are taken (see [`reach`]); the caller's scalar loop does the
/// rest. Groups starting before `asks` ask for the indices ahead.
///
/// Stores are plain: streaming ones measured no faster here (float32 and
/// float16 along the middle axis of 16 MiB outputs) and 2-10x slower for
/// bytes, whose 8-byte groups fill a line in pieces.
pub(crate) fn gather_strided<W: StridedWord, O: Slot<W>, X: StridedIndex>(
    plane: &[W],
    (stride, size): (usize, usize),
    indices: &[X],
    negative_shift: i64,
    dst: &mut [O],
    asks: usize,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    return run(plane, (stride, size), indices, negative_shift, dst, asks);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (plane, stride, size, indices, negative_shift, dst, asks);
    #[cfg(not(target_arch = "x86_64"))]
    return 0;
}

/// How many of the first `len` elements a loop may take: those `j` for
/// which `(size - 1) * stride + j + spare` is inside a plane of `plane_len`
/// words (and `(size - 1) * stride + j` fits an `i32` when `narrow`), so
/// that any index the vector check lets through reads inside the plane.
/// `spare`: the words past each element its load also reads (1- and
/// 2-byte words are loaded 4 bytes at a time). 0 for an empty axis.
fn reach(
    plane_len: usize,
    (stride, size): (usize, usize),
    len: usize,
    narrow: bool,
    spare: usize,
) -> usize {
    let Some(last_row) = size.checked_sub(1).and_then(|s| s.checked_mul(stride)) else {
        return 0;
    };
    let mut room = plane_len.saturating_sub(last_row).saturating_sub(spare);
    if narrow {
        // Offsets, the stride and the size are 32-bit lanes.
        let limit = i32::MAX as usize;
        if stride > limit || size > limit {
            return 0;
        }
        room = room.min((limit + 1).saturating_sub(last_row));
    } else if stride > u32::MAX as usize || size > u32::MAX as usize {
        // `vpmuludq` multiplies the low 32 bits of each lane.
        return 0;
    }
    len.min(room)
}

/// Run the AVX2 kernel for `W` and `X` on the elements [`reach`] allows,
/// if the CPU has AVX2; 0 elements written otherwise.
#[cfg(target_arch = "x86_64")]
fn run<W: StridedWord, O: Slot<W>, X: StridedIndex>(
    plane: &[W],
    (stride, size): (usize, usize),
    indices: &[X],
    negative_shift: i64,
    dst: &mut [O],
    asks: usize,
) -> usize {
    if !avx2_available() {
        return 0;
    }
    let len = dst.len().min(indices.len());
    let spare = (4 / std::mem::size_of::<W>()).saturating_sub(1);
    let len = reach(plane.len(), (stride, size), len, X::NARROW, spare);
    // A shift beyond the lanes' range: the scalar loop takes the piece.
    if X::NARROW && i32::try_from(negative_shift).is_err() {
        return 0;
    }
    // SAFETY: AVX2 is available (checked above). For `j < len` and any
    // `p < size`, `p * stride + j <= (size - 1) * stride + len - 1`, and
    // the `spare` words after it, lie inside `plane` (and it fits an `i32` for narrow indices, as do `stride`,
    // `size` and the shift; for wide ones `stride` and `size` fit 32 bits),
    // by `reach`. `dst` has room for `len` words: `len` slots of an
    // exclusively borrowed slice, each a word (`Slot`'s contract), and
    // writing a word into either kind of slot leaves a valid value.
    unsafe {
        W::kernel::<X>()(
            plane.as_ptr(),
            (stride, size),
            &indices[..len],
            negative_shift,
            O::words(dst),
            asks,
        )
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::mem::prefetch::prefetch_indices_ahead;

    use super::super::x86::{positions, positions4, positions8};

    /// A strided kernel: writes the `k` words from `dst` on, for the `k` it
    /// returns.
    ///
    /// # Safety
    /// AVX2 must be available; for every `j < indices.len()` and `p <
    /// size`, `plane + p * stride + j` must be a readable word, and so must
    /// the `4 / size_of::<W>() - 1` words after it (1- and 2-byte words are
    /// loaded 4 bytes at a time); `stride`
    /// and `size` must fit 32 bits (`i32` for the narrow kernels, as must
    /// every such offset and the shift); `dst` must be valid for writes of
    /// `indices.len()` words, referenced by nothing else meanwhile.
    pub(super) type Kernel<W, X> =
        unsafe fn(*const W, (usize, usize), &[X], i64, *mut W, usize) -> usize;

    /// Four wide indices a group, one `vpgatherqq`.
    ///
    /// # Safety
    /// As for [`Kernel`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn strided_u64s_avx2(
        plane: *const u64,
        (stride, size): (usize, usize),
        indices: &[i64],
        shift: i64,
        dst: *mut u64,
        asks: usize,
    ) -> usize {
        let (shift, size) = (_mm256_set1_epi64x(shift), _mm256_set1_epi64x(size as i64));
        let stride = _mm256_set1_epi64x(stride as i64);
        let base = plane.cast::<i64>();
        let mut columns = _mm256_setr_epi64x(0, 1, 2, 3);
        let four = _mm256_set1_epi64x(4);
        let mut j = 0;
        while j + 4 <= indices.len() {
            if j < asks {
                prefetch_indices_ahead(indices.as_ptr().wrapping_add(j));
            }
            // SAFETY: `j + 4 <= indices.len()`: four readable indices.
            let (p, ok) = unsafe { positions(indices.as_ptr().add(j), shift, size) };
            if !ok {
                break;
            }
            let at = _mm256_add_epi64(_mm256_mul_epu32(p, stride), columns);
            // SAFETY: as in `strided_dwords_avx2`, for four lanes.
            unsafe {
                let v = _mm256_i64gather_epi64::<8>(base, at);
                _mm256_storeu_si256(dst.add(j).cast(), v);
            }
            columns = _mm256_add_epi64(columns, four);
            j += 4;
        }
        j
    }

    /// Four `i32` or `u16` indices a group, one `vpgatherdq`.
    ///
    /// # Safety
    /// As for [`strided_dwords_narrow_avx2`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn strided_u64s_narrow_avx2<X, const U16: bool>(
        plane: *const u64,
        (stride, size): (usize, usize),
        indices: &[X],
        shift: i64,
        dst: *mut u64,
        asks: usize,
    ) -> usize {
        debug_assert_eq!(std::mem::size_of::<X>(), if U16 { 2 } else { 4 });
        let (shift, size) = (_mm_set1_epi32(shift as i32), _mm_set1_epi32(size as i32));
        let stride = _mm_set1_epi32(stride as i32);
        let base = plane.cast::<i64>();
        let at = indices.as_ptr().cast::<u8>();
        let width = std::mem::size_of::<X>();
        let mut columns = _mm_setr_epi32(0, 1, 2, 3);
        let four = _mm_set1_epi32(4);
        let mut j = 0;
        while j + 4 <= indices.len() {
            if j < asks {
                prefetch_indices_ahead(indices.as_ptr().wrapping_add(j));
            }
            // SAFETY: `j + 4 <= indices.len()`: four readable indices.
            let (p, ok) = unsafe { positions4::<U16>(at.add(j * width), shift, size) };
            if !ok {
                break;
            }
            let offsets = _mm_add_epi32(_mm_mullo_epi32(p, stride), columns);
            // SAFETY: as in `strided_dwords_narrow_avx2`, for four lanes.
            unsafe {
                let v = _mm256_i32gather_epi64::<8>(base, offsets);
                _mm256_storeu_si256(dst.add(j).cast(), v);
            }
            columns = _mm_add_epi32(columns, four);
            j += 4;
        }
        j
    }

    /// The low `BYTES` bytes (1 or 2) of each of eight 4-byte lanes, packed
    /// in order into the low `8 * BYTES` bytes.
    #[target_feature(enable = "avx2")]
    fn low_parts<const BYTES: i32>(v: __m256i) -> __m128i {
        if BYTES == 2 {
            // Each 128-bit half keeps its four words in its low 8 bytes;
            // the two halves' low quadwords then meet.
            let keep = _mm256_setr_epi8(
                0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, //
                0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
            );
            let v = _mm256_shuffle_epi8(v, keep);
            _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b1000>(v))
        } else {
            let keep = _mm256_setr_epi8(
                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, //
                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
            );
            let v = _mm256_shuffle_epi8(v, keep);
            let halves = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
            _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, halves))
        }
    }

    /// Store the eight `BYTES`-byte words (4, 2 or 1) held in the low
    /// bytes of the eight 4-byte lanes of `v` at `to`.
    ///
    /// # Safety
    /// `to` must be valid for a write of `8 * BYTES` bytes.
    #[target_feature(enable = "avx2")]
    unsafe fn store_eight<const BYTES: i32>(to: *mut u8, v: __m256i) {
        // SAFETY: the caller's contract; the stores tolerate any alignment.
        unsafe {
            match BYTES {
                4 => _mm256_storeu_si256(to.cast(), v),
                2 => _mm_storeu_si128(to.cast(), low_parts::<2>(v)),
                _ => _mm_storel_epi64(to.cast(), low_parts::<1>(v)),
            }
        }
    }

    /// Eight wide indices a group for `BYTES`-byte words (`W` of that
    /// size: 4, 2 or 1): two `vpgatherqd` of four 4-byte loads at the
    /// words' offsets, each word the low bytes of its load.
    ///
    /// # Safety
    /// As for [`Kernel`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn strided_dwords_avx2<W, const BYTES: i32>(
        plane: *const W,
        (stride, size): (usize, usize),
        indices: &[i64],
        shift: i64,
        dst: *mut W,
        asks: usize,
    ) -> usize {
        debug_assert_eq!(std::mem::size_of::<W>(), BYTES as usize);
        let (shift, size) = (_mm256_set1_epi64x(shift), _mm256_set1_epi64x(size as i64));
        let stride = _mm256_set1_epi64x(stride as i64);
        let base = plane.cast::<i32>();
        let mut columns = _mm256_setr_epi64x(0, 1, 2, 3);
        let (four, eight) = (_mm256_set1_epi64x(4), _mm256_set1_epi64x(8));
        let mut j = 0;
        while j + 8 <= indices.len() {
            if j < asks {
                prefetch_indices_ahead(indices.as_ptr().wrapping_add(j));
            }
            // SAFETY: `j + 8 <= indices.len()`: both groups of four are readable.
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
            // Every lane is now in `[0, size)`, below 2^32: `vpmuludq`
            // multiplies it whole.
            let lo = _mm256_add_epi64(_mm256_mul_epu32(lo, stride), columns);
            let hi = _mm256_add_epi64(
                _mm256_mul_epu32(hi, stride),
                _mm256_add_epi64(columns, four),
            );
            // SAFETY: each lane is `p * stride + j'` for a `p < size` and a
            // `j' < j + 8 <= indices.len()`: a word readable with the words
            // after it that a 4-byte load takes (the contract). `dst` has
            // room for `j + 8` words.
            unsafe {
                let a = _mm256_i64gather_epi32::<BYTES>(base, lo);
                let b = _mm256_i64gather_epi32::<BYTES>(base, hi);
                let v = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(a), b);
                store_eight::<BYTES>(dst.add(j).cast(), v);
            }
            columns = _mm256_add_epi64(columns, eight);
            j += 8;
        }
        j
    }

    /// Eight `i32` or `u16` (`U16`) indices a group for `BYTES`-byte words
    /// (4, 2 or 1): one `vpgatherdd` of 4-byte loads at the words' offsets,
    /// no offset overflowing (each is at most `(size - 1) * stride + j'`,
    /// which fits an i32 by the contract).
    ///
    /// # Safety
    /// As for [`Kernel`]; `X` must be 2 bytes wide when `U16`, else 4.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn strided_dwords_narrow_avx2<W, X, const BYTES: i32, const U16: bool>(
        plane: *const W,
        (stride, size): (usize, usize),
        indices: &[X],
        shift: i64,
        dst: *mut W,
        asks: usize,
    ) -> usize {
        debug_assert_eq!(std::mem::size_of::<W>(), BYTES as usize);
        debug_assert_eq!(std::mem::size_of::<X>(), if U16 { 2 } else { 4 });
        let (shift, size) = (
            _mm256_set1_epi32(shift as i32),
            _mm256_set1_epi32(size as i32),
        );
        let stride = _mm256_set1_epi32(stride as i32);
        let base = plane.cast::<i32>();
        let at = indices.as_ptr().cast::<u8>();
        let width = std::mem::size_of::<X>();
        let mut columns = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let eight = _mm256_set1_epi32(8);
        let mut j = 0;
        while j + 8 <= indices.len() {
            if j < asks {
                prefetch_indices_ahead(indices.as_ptr().wrapping_add(j));
            }
            // SAFETY: `j + 8 <= indices.len()`: eight readable indices.
            let (p, ok) = unsafe { positions8::<U16>(at.add(j * width), shift, size) };
            if !ok {
                break;
            }
            let offsets = _mm256_add_epi32(_mm256_mullo_epi32(p, stride), columns);
            // SAFETY: as in `strided_dwords_avx2`; the offsets fit an i32
            // (the contract).
            unsafe {
                let v = _mm256_i32gather_epi32::<BYTES>(base, offsets);
                store_eight::<BYTES>(dst.add(j).cast(), v);
            }
            columns = _mm256_add_epi32(columns, eight);
            j += 8;
        }
        j
    }
}

#[cfg(test)]
mod tests;
