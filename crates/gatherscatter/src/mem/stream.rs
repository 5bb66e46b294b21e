//! Streaming (non-temporal) stores: copies that write whole cache lines
//! without first reading them, for outputs too large to stay in cache.
//! (An ordinary store reads the line it writes, so the output would cost
//! two passes over memory instead of one.) x86-64 intrinsics behind safe
//! slice functions; on other targets the functions are plain copies, so
//! callers never need a `cfg`. Under Miri, which cannot execute `movntdq`
//! or `sfence`, the streaming store is an aligned ordinary store and the
//! fence a language fence; everything else runs as is.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use super::cpu::{avx2_available, last_level_cache_bytes};

/// Outputs at least this large take the streaming path under
/// [`Stores::Auto`]: a quarter of the last-level cache (8 MiB of the
/// 32 MiB L3 where it was measured). Below it the output probably stays in
/// cache, where the caller reads it next, and streaming stores would push
/// it out to memory.
pub(crate) fn streaming_min_bytes() -> usize {
    (last_level_cache_bytes() / 4).max(1 << 20)
}

/// Runs shorter than a cache line gain nothing from streaming stores,
/// which write whole lines.
pub(crate) const STREAMING_MIN_RUN: usize = 64;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for std::mem::MaybeUninit<u8> {}
}

/// A byte of an output buffer: already initialised (`u8`, a caller's
/// buffer) or not yet (`MaybeUninit<u8>`, a fresh one). Both have the size
/// and alignment of `u8`, and this module writes only initialised bytes.
pub(crate) trait OutByte: sealed::Sealed + Send {}
impl OutByte for u8 {}
impl OutByte for MaybeUninit<u8> {}

/// The pieces of a streaming copy of `len` bytes to `dst_address`: `head`
/// bytes up to the first 16-aligned address and the `tail` after the last
/// whole 16 bytes take ordinary stores; `lead` (0 or 16) brings the body to
/// a 32-byte boundary; `wide` bytes (when 32-byte stores are used) follow,
/// then `narrow` bytes of 16-byte stores.
#[derive(Debug, PartialEq, Eq)]
struct StreamPieces {
    head: usize,
    lead: usize,
    wide: usize,
    narrow: usize,
    tail: usize,
}

impl StreamPieces {
    #[inline(always)]
    fn new(dst_address: usize, len: usize, with_wide: bool) -> StreamPieces {
        // Streaming stores need 16-byte aligned destinations (32 for wide).
        let head = (dst_address.wrapping_neg() % 16).min(len);
        let body = (len - head) / 16 * 16;
        let at_32 = dst_address.wrapping_add(head).is_multiple_of(32);
        let lead = if with_wide && !at_32 { body.min(16) } else { 0 };
        let wide = if with_wide {
            (body - lead) / 32 * 32
        } else {
            0
        };
        let narrow = body - lead - wide;
        StreamPieces {
            head,
            lead,
            wide,
            narrow,
            tail: len - head - body,
        }
    }
}

/// Copy `src` into `dst` (the shorter length of the two) with stores that
/// bypass the cache, 16 bytes at a time (SSE2, the x86-64 baseline;
/// elsewhere a plain copy). Callers must call [`store_fence`] before the
/// written memory is handed to another thread (the end of a parallel task
/// is such a point).
pub(crate) fn copy_nontemporal_16s<B: OutByte>(dst: &mut [B], src: &[u8]) {
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    if !cfg!(target_arch = "x86_64") {
        return copy_plain(dst, src);
    }
    let pieces = StreamPieces::new(dst.as_ptr().addr(), len, false);
    let (dst_head, rest) = dst.split_at_mut(pieces.head);
    let (dst_body, dst_tail) = rest.split_at_mut(pieces.narrow);
    let (src_head, rest) = src.split_at(pieces.head);
    let (src_body, src_tail) = rest.split_at(pieces.narrow);
    copy_plain(dst_head, src_head);
    stream_16s(dst_body, src_body);
    copy_plain(dst_tail, src_tail);
}

/// Proof that the CPU has AVX2 (hence AVX, for 32-byte streaming stores):
/// found once per task instead of per block.
#[derive(Clone, Copy)]
pub(crate) struct Avx(());

impl Avx {
    /// The proof, where the CPU has AVX2.
    pub(crate) fn detect() -> Option<Avx> {
        avx2_available().then_some(Avx(()))
    }

    /// [`copy_nontemporal_16s`] with 32-byte streaming stores (measured on this
    /// Zen 4: a 64 MiB copy of 1 KiB blocks about 1.4x faster than with
    /// 16-byte ones).
    #[inline]
    pub(crate) fn copy_nontemporal<B: OutByte>(self, dst: &mut [B], src: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Avx` exists only where AVX2, hence AVX, was detected.
        unsafe {
            copy_nontemporal_avx(dst, src)
        }
        #[cfg(not(target_arch = "x86_64"))]
        copy_nontemporal_16s(dst, src)
    }
}

/// A streaming copy of `src` into `dst`: 32-byte stores where `avx` proves
/// the CPU has AVX2, else 16-byte ones. The same fence rule as
/// [`copy_nontemporal_16s`].
#[inline(always)]
pub(crate) fn copy_nontemporal<B: OutByte>(avx: Option<Avx>, dst: &mut [B], src: &[u8]) {
    match avx {
        Some(avx) => avx.copy_nontemporal(dst, src),
        None => copy_nontemporal_16s(dst, src),
    }
}

/// [`Avx::copy_nontemporal`]: the ordinary copies of the head
/// and tail only when they are not empty (each is a `memcpy` call), and the
/// 32-byte stores inlined.
///
/// # Safety
/// The CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn copy_nontemporal_avx<B: OutByte>(dst: &mut [B], src: &[u8]) {
    let len = dst.len().min(src.len());
    let pieces = StreamPieces::new(dst.as_ptr().addr(), len, true);
    let head = pieces.head;
    if head > 0 {
        copy_plain(&mut dst[..head], &src[..head]);
    }
    let lead_end = head + pieces.lead;
    stream_16s(&mut dst[head..lead_end], &src[head..lead_end]);
    let wide_end = lead_end + pieces.wide;
    // SAFETY: the caller guarantees AVX; the wide part starts 32-aligned
    // (after the head and the lead) and is a multiple of 32 long.
    unsafe { stream_32s(&mut dst[lead_end..wide_end], &src[lead_end..wide_end]) };
    let narrow_end = wide_end + pieces.narrow;
    stream_16s(&mut dst[wide_end..narrow_end], &src[wide_end..narrow_end]);
    if narrow_end < len {
        copy_plain(&mut dst[narrow_end..len], &src[narrow_end..len]);
    }
}

/// Streaming copy of one row: a 16-byte store when `lead` is 16, 32-byte
/// stores, and a 16-byte store for what is left.
///
/// # Safety
/// The CPU has AVX; `src` is readable and `dst` writable for `len` bytes,
/// not overlapping; `len` is a multiple of 32; `lead` is 0 with `dst`
/// 32-aligned, or 16 with `dst` 16 bytes short of a 32-byte boundary.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
pub(crate) unsafe fn stream_row(dst: *mut u8, src: *const u8, lead: usize, len: usize) {
    // SAFETY (every store): each offset leaves its 16 or 32 bytes inside
    // both rows, at the alignment its store needs, given the caller's
    // `lead`.
    unsafe {
        if lead != 0 {
            stream_16_at(dst, src);
        }
        let mut offset = lead;
        while offset + 32 <= len {
            stream_32_at(dst.add(offset), src.add(offset));
            offset += 32;
        }
        if offset < len {
            stream_16_at(dst.add(offset), src.add(offset));
        }
    }
}

/// One 16-byte streaming store of the 16 bytes at `src` to `dst`.
///
/// # Safety
/// `src` is readable and `dst` writable for 16 bytes, not overlapping;
/// `dst` is 16-aligned.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_16_at(dst: *mut u8, src: *const u8) {
    #[cfg(not(miri))]
    use std::arch::x86_64::_mm_stream_si128;
    use std::arch::x86_64::{__m128i, _mm_loadu_si128};
    // SAFETY: the caller's contract; the load tolerates any alignment. SSE2
    // is part of the x86-64 baseline.
    unsafe {
        let v = _mm_loadu_si128(src.cast::<__m128i>());
        let to = dst.cast::<__m128i>();
        // Miri cannot run `movntdq` (inline assembly); an aligned store
        // has the same preconditions, which Miri then checks.
        #[cfg(not(miri))]
        _mm_stream_si128(to, v);
        #[cfg(miri)]
        to.write(v);
    }
}

/// One 32-byte streaming store of the 32 bytes at `src` to `dst`.
///
/// # Safety
/// The CPU has AVX; `src` is readable and `dst` writable for 32 bytes, not
/// overlapping; `dst` is 32-aligned.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn stream_32_at(dst: *mut u8, src: *const u8) {
    #[cfg(not(miri))]
    use std::arch::x86_64::_mm256_stream_si256;
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256};
    // SAFETY: the caller's contract; the load tolerates any alignment.
    unsafe {
        let v = _mm256_loadu_si256(src.cast::<__m256i>());
        let to = dst.cast::<__m256i>();
        // As in `stream_16_at`: Miri gets an aligned store.
        #[cfg(not(miri))]
        _mm256_stream_si256(to, v);
        #[cfg(miri)]
        to.write(v);
    }
}

/// Streaming copy of 16-byte chunks: `dst` starts 16-aligned and both have
/// the same length, a multiple of 16 (elsewhere than x86-64, a plain copy).
fn stream_16s<B: OutByte>(dst: &mut [B], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for (d, s) in dst.chunks_exact_mut(16).zip(src.chunks_exact(16)) {
        // SAFETY: `s` and `d` are 16-byte slices of live, non-overlapping
        // buffers (a shared and an exclusive borrow); `B` is one byte, so
        // `d` spans 16 bytes, and it starts at a multiple of 16 from the
        // 16-aligned `dst`.
        unsafe { stream_16_at(d.as_mut_ptr().cast(), s.as_ptr()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    copy_plain(dst, src);
}

/// Streaming copy of 32-byte chunks.
///
/// # Safety
/// The CPU has AVX; `dst` starts 32-aligned; both have the same length, a
/// multiple of 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn stream_32s<B: OutByte>(dst: &mut [B], src: &[u8]) {
    for (d, s) in dst.chunks_exact_mut(32).zip(src.chunks_exact(32)) {
        // SAFETY: `s` and `d` are 32-byte slices of live, non-overlapping
        // buffers; `d` starts at a multiple of 32 from the 32-aligned `dst`;
        // the caller guarantees AVX.
        unsafe { stream_32_at(d.as_mut_ptr().cast(), s.as_ptr()) };
    }
}

/// Ordinary copy of `src` into `dst` (same length) for either byte kind.
fn copy_plain<B: OutByte>(dst: &mut [B], src: &[u8]) {
    let len = dst.len().min(src.len());
    // SAFETY: both ranges are `len` bytes inside live slices (`B` is one
    // byte), and a shared and an exclusive borrow cannot overlap.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), len) };
}

/// Zero every byte of `dst`.
pub(crate) fn zero<B: OutByte>(dst: &mut [B]) {
    // SAFETY: `dst` is `dst.len()` bytes of exclusively borrowed memory, and
    // zero is a valid `u8`.
    unsafe { std::ptr::write_bytes(dst.as_mut_ptr().cast::<u8>(), 0, dst.len()) };
}

/// Order this thread's earlier streaming stores before its later
/// stores, so whoever synchronises with it afterwards sees the data.
/// (Miri has no `sfence`; it gets the language-level fence instead.)
pub(crate) fn store_fence() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `sfence` has no operands and no memory-safety preconditions;
    // SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
    #[cfg(miri)]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length and alignment around the 16-byte body, including empty,
    /// shorter than one chunk and a head that is the whole slice.
    #[test]
    fn nontemporal_copy_equals_the_source_at_every_offset() {
        // Both copies where the CPU (or, under Miri, the build) has AVX.
        let avx = Avx::detect().map(|avx| move |d: &mut [u8], s: &[u8]| avx.copy_nontemporal(d, s));
        type Copy<'a> = &'a dyn Fn(&mut [u8], &[u8]);
        let mut copies: Vec<(&str, Copy)> = vec![("16-byte", &copy_nontemporal_16s)];
        if let Some(avx) = &avx {
            copies.push(("avx", avx));
        }
        let src: Vec<u8> = (0..200u16).map(|v| (v * 7 + 3) as u8).collect();
        // Offsets over two 32-byte periods, so the 16-byte lead before the
        // 32-byte stores is both needed and not; under Miri (a quarter of
        // CI's time in this one test otherwise) the offsets around each edge.
        let dst_offsets: Vec<usize> = if cfg!(miri) {
            vec![0, 1, 8, 15, 16, 17, 24, 31, 32, 33]
        } else {
            (0..40).collect()
        };
        for (name, copy) in copies {
            for &dst_offset in &dst_offsets {
                for src_offset in [0, 1, 5, 16] {
                    for len in [0, 1, 15, 16, 17, 31, 33, 48, 64, 80, 100, 150] {
                        let mut dst = vec![0xAAu8; 240];
                        let s = &src[src_offset..src_offset + len];
                        copy(&mut dst[dst_offset..dst_offset + len], s);
                        store_fence();
                        assert_eq!(
                            &dst[dst_offset..dst_offset + len],
                            s,
                            "{name}: dst +{dst_offset}, src +{src_offset}, {len} bytes"
                        );
                        assert!(
                            dst[..dst_offset].iter().all(|&b| b == 0xAA),
                            "{name}: dst +{dst_offset}, src +{src_offset}, {len} bytes"
                        );
                        assert!(
                            dst[dst_offset + len..].iter().all(|&b| b == 0xAA),
                            "{name}: dst +{dst_offset}, src +{src_offset}, {len} bytes"
                        );
                    }
                }
            }
        }
    }

    /// The pieces of every copy add up to its length, each streamed piece
    /// starts on the alignment its stores need, and only the head and tail
    /// (under 16 bytes each) take ordinary stores.
    #[test]
    fn stream_pieces_cover_the_copy_with_aligned_stores() {
        // Miri interprets every step: a shorter sweep there, still over
        // two 32-byte periods and several wide stores.
        let (addresses, lengths) = if cfg!(miri) { (64, 120) } else { (96, 300) };
        for address in 0..addresses {
            for len in 0..lengths {
                for with_wide in [false, true] {
                    let p = StreamPieces::new(address, len, with_wide);
                    assert_eq!(
                        p.head + p.lead + p.wide + p.narrow + p.tail,
                        len,
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                    assert!(
                        p.head < 16 && p.tail < 16,
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                    let body_start = address + p.head;
                    if p.lead + p.wide + p.narrow > 0 {
                        assert_eq!(
                            body_start % 16,
                            0,
                            "{address} + {len}, wide {with_wide}: {p:?}"
                        );
                    }
                    assert!(
                        p.lead == 0 || p.lead == 16,
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                    assert_eq!(p.wide % 32, 0, "{address} + {len}, wide {with_wide}: {p:?}");
                    if p.wide > 0 {
                        assert_eq!(
                            (body_start + p.lead) % 32,
                            0,
                            "{address} + {len}, wide {with_wide}: {p:?}"
                        );
                    }
                    assert!(
                        p.narrow.is_multiple_of(16) && p.narrow <= if with_wide { 16 } else { len },
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                    if !with_wide {
                        assert_eq!(
                            p.lead + p.wide,
                            0,
                            "{address} + {len}, wide {with_wide}: {p:?}"
                        );
                    }
                    // Ordinary stores only up to the first 16-aligned byte.
                    assert_eq!(
                        p.head,
                        ((16 - address % 16) % 16).min(len),
                        "{address} + {len}, wide {with_wide}: {p:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn mismatched_lengths_copy_the_shorter() {
        let avx = Avx::detect();
        for wide in [false, true] {
            let copy = |dst: &mut [u8], src: &[u8]| match (wide, avx) {
                (true, Some(avx)) => avx.copy_nontemporal(dst, src),
                _ => copy_nontemporal_16s(dst, src),
            };
            let mut dst = [0u8; 80];
            copy(&mut dst, &[9u8; 50]);
            store_fence();
            assert_eq!(&dst[..50], &[9u8; 50]);
            assert_eq!(&dst[50..], &[0u8; 30]);
            let mut short = [0u8; 50];
            copy(&mut short, &[7u8; 80]);
            store_fence();
            assert_eq!(short, [7u8; 50]);
        }
    }
}
