//! Gather along the last axis as byte permutes of small windows of data.
//!
//! With one-element blocks and one batch, `out[s, j] = data[s, indices[j]]`
//! moves the same bytes within every data slab `s`: byte `b` of output
//! element `j` is byte `indices[j] * w + b` of its slab (`w` bytes a word).
//! So `G` consecutive slabs (a window of `G * axis_size * w` bytes, at most
//! 1 KiB) map to their `G` output slabs by one table of byte positions,
//! built once per call: output byte `k` of a group reads window byte
//! `g * axis_size * w + indices[j] * w + b`, where `k = (g * n + j) * w + b`
//! for `n` indices. AVX-512 VBMI's `vpermi2b` picks 64 output bytes at once
//! from two 64-byte registers of the window (128 bytes, a position's low
//! seven bits); a wider window picks from each pair of registers and
//! blends by the position's bits 7, 8 and 9. The last group of a task may
//! hold fewer slabs: its loads and stores are masked to its bytes.
//!
//! 16 MiB of output, one thread, the data in cache, a loop outside the
//! library on a 2-vCPU AMD EPYC family 25 model 17 (Zen 4), 2026-12-06,
//! against the per-element loop: int8 slabs of 256 5.65 -> 1.12 ms,
//! of 64 6.32 -> 1.14; int8 pixels of 3 channels 7.65 -> 1.16; float16
//! slabs of 128 4.74 -> 1.18 and of 256 (512-byte windows) 4.76 -> 1.42;
//! float32 pixels of 3 2.41 -> 1.04, slabs of 256 (1 KiB windows) 1.92 ->
//! 1.27; float64 slabs of 128 2.90 -> 1.27; a copy of the output bytes took
//! 0.9-1.2 ms in the same runs.

use crate::mem::parallel;
use crate::mem::stream::OutByte;

/// The widest window: eight register pairs, blended on three bits.
const MAX_WINDOW: usize = 1 << 10;

/// The narrowest window: one register pair, nothing to blend.
const MIN_WINDOW: usize = 128;

/// Most output bytes a group writes: its table (65 bytes for each 64 of
/// output, read again for every group) stays within a core's L2.
const MAX_GROUP_OUTPUT: usize = 128 << 10;

/// Whether the CPU can run the permutes: AVX-512 F, BW and VBMI. Under
/// Miri, when they are compiled in (it has no CPUID).
pub(super) fn available() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    return std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi");
    #[cfg(all(target_arch = "x86_64", miri))]
    return cfg!(all(
        target_feature = "avx512f",
        target_feature = "avx512bw",
        target_feature = "avx512vbmi"
    ));
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// Fewest groups a table serves: building it costs more a byte than the
/// per-element loop, so a call's table is at most an eighth of its output.
const MIN_GROUPS: usize = 8;

/// Whether a call of `slabs` output slabs, from data slabs of
/// `slab_bytes` by `count` indices of `word`-byte words, can permute
/// windows, before its table is built: a window of at most 1 KiB, one
/// slab's output at most [`MAX_GROUP_OUTPUT`], at least [`MIN_GROUPS`]
/// slabs, a CPU with the permutes.
pub(super) fn applies(slab_bytes: usize, count: usize, word: usize, slabs: usize) -> bool {
    let out_slab = count.saturating_mul(word);
    (1..=MAX_WINDOW).contains(&slab_bytes)
        && (1..=MAX_GROUP_OUTPUT).contains(&out_slab)
        && slabs >= MIN_GROUPS
        && available()
}

/// One call's table: which window byte each output byte of a group reads.
#[derive(Debug)]
pub(super) struct WindowPermute {
    /// Bytes of one data slab and of one output slab.
    slab_bytes: usize,
    out_slab_bytes: usize,
    /// Slabs in a group.
    group: usize,
    /// 64-byte registers the window is loaded into: 2, 4, 8 or 16.
    registers: usize,
    /// For each 64 output bytes of a group, the low seven bits of each
    /// byte's window position, and its bits 7, 8 and 9 as masks.
    positions: Vec<[u8; 64]>,
    high_bits: Vec<[u64; 3]>,
}

impl WindowPermute {
    /// The table for `indices` (each below `axis_size`) over data slabs of
    /// `axis_size` words of `word` bytes, for an output of `slabs` slabs;
    /// `None` where the windows do not [`applies`], or an index is past the
    /// axis.
    pub(super) fn new(
        indices: &[usize],
        axis_size: usize,
        word: usize,
        slabs: usize,
    ) -> Option<WindowPermute> {
        let slab_bytes = axis_size.checked_mul(word)?;
        if !applies(slab_bytes, indices.len(), word, slabs) {
            return None;
        }
        let out_slab_bytes = indices.len() * word;
        let window = slab_bytes.next_power_of_two().max(MIN_WINDOW);
        let group = (window / slab_bytes)
            .min(MAX_GROUP_OUTPUT / out_slab_bytes)
            .min(slabs / MIN_GROUPS)
            .max(1);
        let chunks = (group * out_slab_bytes).div_ceil(64);
        let mut positions = vec![[0u8; 64]; chunks];
        let mut high_bits = vec![[0u64; 3]; chunks];
        let bytes_read = (0..group).flat_map(|g| {
            indices.iter().flat_map(move |&i| {
                (0..word).map(move |b| (i < axis_size).then_some(g * slab_bytes + i * word + b))
            })
        });
        for (k, at) in bytes_read.enumerate() {
            let at = at?;
            let (chunk, lane) = (k / 64, k % 64);
            positions[chunk][lane] = (at & 127) as u8;
            for (bit, mask) in high_bits[chunk].iter_mut().enumerate() {
                *mask |= (((at >> (7 + bit)) & 1) as u64) << lane;
            }
        }
        Some(WindowPermute {
            slab_bytes,
            out_slab_bytes,
            group,
            registers: window.div_ceil(64),
            positions,
            high_bits,
        })
    }

    /// Write `dst`, whole output slabs, from the data slabs at the start of
    /// `src`, split among tasks by whole groups. Whether `dst` was written:
    /// `false` (nothing written) when it is not whole slabs or `src` holds
    /// fewer of them.
    pub(super) fn fill<B: OutByte>(&self, dst: &mut [B], src: &[u8]) -> bool {
        let slabs = dst.len() / self.out_slab_bytes;
        let whole = slabs * self.out_slab_bytes == dst.len();
        if !whole || src.len() / self.slab_bytes < slabs {
            return false;
        }
        let groups = slabs.div_ceil(self.group);
        let per_task = groups.div_ceil(parallel::tasks(dst.len(), groups));
        let (group_out, group_src) = (
            self.group * self.out_slab_bytes,
            self.group * self.slab_bytes,
        );
        parallel::for_each_chunk(dst, per_task * group_out, |task, part| {
            let from = src.get(task * per_task * group_src..).unwrap_or(&[]);
            self.fill_groups(part, from);
        });
        true
    }

    /// `part`'s groups, from the data slabs at the start of `src` (which
    /// holds at least as many).
    fn fill_groups<B: OutByte>(&self, part: &mut [B], src: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        {
            let kernel = match self.registers {
                2 => permute_groups::<B, 2>,
                4 => permute_groups::<B, 4>,
                8 => permute_groups::<B, 8>,
                _ => permute_groups::<B, 16>,
            };
            // SAFETY: a table is only built where `available` found the
            // CPU's AVX-512 F, BW and VBMI.
            #[allow(unsafe_code)]
            unsafe {
                kernel(self, part, src)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (part, src);
    }
}

/// The mask of a register's first `bytes` bytes (all 64 from 64 on).
#[cfg(target_arch = "x86_64")]
fn first_bytes(bytes: usize) -> u64 {
    match bytes {
        64.. => u64::MAX,
        n => (1u64 << n) - 1,
    }
}

/// Each group of `out` from its window of `src`, with `R` registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[allow(unsafe_code)]
fn permute_groups<B: OutByte, const R: usize>(p: &WindowPermute, out: &mut [B], src: &[u8]) {
    use std::arch::x86_64::*;
    let group_src = p.group * p.slab_bytes;
    let groups = out.chunks_mut(p.group * p.out_slab_bytes);
    for (g, out) in groups.enumerate() {
        let slabs = out.len() / p.out_slab_bytes;
        let from = g * group_src;
        let Some(window) = src.get(from..from + slabs * p.slab_bytes) else {
            return;
        };
        let mut table = [_mm512_setzero_si512(); R];
        for (r, register) in table.iter_mut().enumerate() {
            let Some(bytes) = window.get(r * 64..).filter(|b| !b.is_empty()) else {
                break;
            };
            // SAFETY: the mask covers the first `bytes.len()` (at most
            // 64) bytes from `bytes`' start, all inside `window`; the
            // masked-off bytes are neither read nor faulted on.
            *register =
                unsafe { _mm512_maskz_loadu_epi8(first_bytes(bytes.len()), bytes.as_ptr().cast()) };
        }
        let rows = p.positions.iter().zip(&p.high_bits);
        for (chunk, (positions, high_bits)) in out.chunks_mut(64).zip(rows) {
            // SAFETY: `positions` is 64 bytes.
            let positions = unsafe { _mm512_loadu_si512(positions.as_ptr().cast()) };
            let bytes = pick::<R>(&table, positions, high_bits);
            // SAFETY: the mask covers the `chunk.len()` (at most 64) bytes
            // of `chunk`, borrowed exclusively; `B` is a byte, and each
            // stored byte is initialised.
            unsafe {
                _mm512_mask_storeu_epi8(chunk.as_mut_ptr().cast(), first_bytes(chunk.len()), bytes)
            };
        }
    }
}

/// The 64 bytes at `positions` of the `R` registers of `table`: each pair
/// of registers permuted, then the pairs blended by bit 7 of the position,
/// those results by bit 8, then by bit 9.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[inline]
fn pick<const R: usize>(
    table: &[std::arch::x86_64::__m512i; R],
    positions: std::arch::x86_64::__m512i,
    high_bits: &[u64; 3],
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    let mut level = [_mm512_setzero_si512(); 8];
    for (pair, picked) in table.chunks_exact(2).zip(level.iter_mut()) {
        *picked = _mm512_permutex2var_epi8(pair[0], positions, pair[1]);
    }
    let (mut live, mut bit) = (R / 2, 0);
    while live > 1 {
        for i in 0..live / 2 {
            level[i] = _mm512_mask_mov_epi8(level[2 * i], high_bits[bit], level[2 * i + 1]);
        }
        live /= 2;
        bit += 1;
    }
    level[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;

    /// `out[s, j] = data[s, indices[j]]`, word by word, from the formula.
    fn reference(data: &[u8], axis_size: usize, word: usize, indices: &[usize]) -> Vec<u8> {
        let slab = axis_size * word;
        let mut out = Vec::new();
        for from in data.chunks_exact(slab) {
            for &i in indices {
                out.extend_from_slice(&from[i * word..(i + 1) * word]);
            }
        }
        out
    }

    fn scrambled(count: usize, axis_size: usize) -> Vec<usize> {
        (0..count).map(|k| (k * 37 + 11) % axis_size).collect()
    }

    /// Every window width (one pair to eight), groups of one slab and of
    /// many, a last group with fewer slabs, output slabs that end inside
    /// a register, fresh and initialised outputs, on the calling thread
    /// and (outside Miri) split among pools of one to three threads.
    #[test]
    fn windows_write_what_the_formula_gives() {
        if !available() {
            return;
        }
        let cases: &[(usize, usize, usize, usize)] = if cfg!(miri) {
            &[
                (3, 3, 1, 50),
                (3, 5, 4, 8),
                (100, 70, 2, 8),
                (256, 300, 1, 8),
            ]
        } else {
            &[
                (3, 3, 1, 1000),
                (4, 3, 1, 999),
                (3, 5, 4, 701),
                (1, 9, 2, 300),
                (64, 64, 1, 123),
                (100, 70, 2, 57),
                (256, 300, 1, 41),
                (256, 256, 2, 33),
                (128, 31, 8, 29),
                (64, 17, 16, 45),
                (1024, 3, 1, 80),
                // From 256 KiB of output: split among the pool's tasks.
                (3, 3, 1, 90_001),
                (100, 70, 2, 1_001),
                (64, 17, 16, 1_003),
            ]
        };
        // Rayon's worker threads trip Stacked Borrows inside crossbeam-epoch.
        let pools: &[usize] = if cfg!(miri) { &[] } else { &[1, 2, 3] };
        for &(axis_size, count, word, slabs) in cases {
            let data: Vec<u8> = (0..slabs * axis_size * word)
                .map(|k| (k * 7 + k / 251) as u8)
                .collect();
            let indices = scrambled(count, axis_size);
            let expected = reference(&data, axis_size, word, &indices);
            let table = WindowPermute::new(&indices, axis_size, word, slabs).unwrap();
            let check = |threads: &str| {
                let mut out = vec![0xA5u8; expected.len()];
                assert!(table.fill(&mut out, &data));
                assert!(
                    out == expected,
                    "{axis_size} {count} {word} {slabs}, {threads}"
                );
                let mut fresh = vec![MaybeUninit::<u8>::uninit(); expected.len()];
                assert!(table.fill(&mut fresh, &data));
                // SAFETY: `fill` returned true: every byte was written.
                #[allow(unsafe_code)]
                let fresh: Vec<u8> = fresh.iter().map(|b| unsafe { b.assume_init() }).collect();
                assert!(fresh == expected, "fresh, {threads}");
            };
            check("the calling thread");
            for &threads in pools {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| check(&format!("{threads} threads")));
            }
        }
    }

    #[test]
    fn outputs_that_are_not_whole_slabs_or_too_little_data_are_refused_unwritten() {
        if !available() {
            return;
        }
        let table = WindowPermute::new(&[2, 0], 3, 1, 8).unwrap();
        let data = [1u8, 2, 3, 4, 5, 6];
        let mut out = [9u8; 5];
        assert!(!table.fill(&mut out, &data));
        let mut out = [9u8; 6];
        assert!(!table.fill(&mut out, &data));
        assert_eq!(out, [9; 6]);
        let mut out = [9u8; 4];
        assert!(table.fill(&mut out, &data));
        assert_eq!(out, [3, 1, 6, 4]);
    }

    #[test]
    fn windows_past_1_kib_long_output_slabs_few_slabs_and_bad_indices_build_no_table() {
        assert!(WindowPermute::new(&[0], 1025, 1, 8).is_none());
        assert!(WindowPermute::new(&[0], 129, 8, 8).is_none());
        assert!(WindowPermute::new(&vec![0; (128 << 10) + 1], 4, 1, 8).is_none());
        assert!(WindowPermute::new(&[0, 3], 3, 1, 8).is_none());
        assert!(WindowPermute::new(&[0], 3, 1, 7).is_none());
        assert!(WindowPermute::new(&[0], usize::MAX, 2, 1).is_none());
        if available() {
            let table = WindowPermute::new(&[1, 2], 3, 4, 1000).unwrap();
            assert_eq!((table.group, table.registers), (10, 2));
            let table = WindowPermute::new(&[1], 200, 4, 1000).unwrap();
            assert_eq!((table.group, table.registers), (1, 16));
            let table = WindowPermute::new(&[1], 3, 1, 80).unwrap();
            assert_eq!(table.group, 10);
        }
    }
}
