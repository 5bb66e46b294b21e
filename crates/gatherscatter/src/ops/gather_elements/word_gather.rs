//! Which loop reads rows of 4- and 8-byte words along the last axis, and
//! row pieces of 1- to 8-byte words along an outer one: the AVX2 gathers
//! ([`super::avx2`]) or the scalar loop. Gather instructions
//! are fast on some CPUs and microcoded on others, so under
//! [`WordGather::Auto`] the choice is a measurement: on first use, each
//! word size and index type times both loops on rows that sit in L2,
//! through the kernel's own row function, and keeps the faster for the
//! process.

use std::mem::MaybeUninit;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::avx2::{Span, SpanningIndex, StridedIndex, VectorIndex};
use super::last_axis::gather_within_row;
use crate::index::{AxisRule, InPlace, KernelIndex};
use crate::mem::cpu::avx2_available;
use crate::mem::knobs::WordGather;
use crate::mem::uninit::Slot;

/// A vector loop for one row of words: writes `dst[j] = row[indices[j]]`
/// (each negative index shifted by the given amount, streaming stores if
/// asked) for a prefix of `dst`, asking for the second slice (the next
/// row, or none) into cache as it goes, and returns the prefix's length
/// (0 when the CPU cannot run it). See [`super::avx2`].
pub(crate) type VectorRow<W, O, X> = fn(&[W], &[W], &[X], i64, &mut [O], bool) -> usize;

/// The vector loop for words of type `W` in slots `O` and indices `X`, if
/// there is one and `choice` takes it: 4- and 8-byte words (f32, i32, u32,
/// f64, i64, u64), `i64`, `i32` and `u16` indices.
/// (Loops for 1- and 2-byte words, gathering 4 bytes and keeping the low
/// ones, measured no faster than the scalar loop on AMD EPYC family 25
/// model 1: 1.1-1.6x slower for bytes, -15% to +50% for 2-byte words,
/// inside the noise.)
pub(super) fn vector_row<W: 'static, O: 'static, X: 'static>(
    choice: WordGather,
) -> Option<VectorRow<W, O, X>> {
    let kernel = any_vector_row::<W, O, X>()?;
    let taken = match choice {
        WordGather::Scalar => false,
        WordGather::Vector => true,
        WordGather::Auto => measured(std::mem::size_of::<W>(), std::mem::size_of::<X>())
            .is_some_and(|m| m.vector_wins()),
    };
    taken.then_some(kernel)
}

/// The vector loop for words `W` in slots `O` and indices `X` whatever the
/// knob says, if there is one (Gather's one-element blocks measure their
/// own choice).
pub(crate) fn any_vector_row<W: 'static, O: 'static, X: 'static>() -> Option<VectorRow<W, O, X>> {
    match std::mem::size_of::<X>() {
        8 => vector_row_for::<W, O, X, i64>(),
        4 => vector_row_for::<W, O, X, i32>(),
        2 => vector_row_for::<W, O, X, u16>(),
        _ => None,
    }
}

/// The vector loop for `W`, `O` and `X` among those for indices `Y`: `None`
/// unless `X` is `Y`.
fn vector_row_for<W: 'static, O: 'static, X: 'static, Y: VectorIndex + 'static>(
) -> Option<VectorRow<W, O, X>> {
    use super::avx2::{gather_u32s, gather_u64s};
    let kernels: [&dyn std::any::Any; 4] = [
        &(gather_u32s::<u32, Y> as VectorRow<u32, u32, Y>),
        &(gather_u32s::<MaybeUninit<u32>, Y> as VectorRow<u32, MaybeUninit<u32>, Y>),
        &(gather_u64s::<u64, Y> as VectorRow<u64, u64, Y>),
        &(gather_u64s::<MaybeUninit<u64>, Y> as VectorRow<u64, MaybeUninit<u64>, Y>),
    ];
    the_one(&kernels)
}

/// A vector loop for a row piece along an outer axis: writes
/// `dst[j] = plane[p_j * stride + j]` (for the given stride and axis
/// size; each negative index shifted by the given amount) for a prefix of
/// `dst` and returns its length (0 when the CPU cannot run it). See
/// [`super::avx2::gather_strided`].
pub(super) type StridedRow<W, O, X> = fn(&[W], (usize, usize), &[X], i64, &mut [O], usize) -> usize;

/// The strided vector loop for words `W` in slots `O` and indices `X`,
/// when `taken` and there is one: 1-, 2-, 4- and 8-byte words, `i64`,
/// `i32` and `u16` indices.
pub(super) fn strided_row<W: 'static, O: 'static, X: 'static>(
    taken: bool,
) -> Option<StridedRow<W, O, X>> {
    if !taken {
        return None;
    }
    match std::mem::size_of::<X>() {
        8 => strided_row_for::<W, O, X, i64>(),
        4 => strided_row_for::<W, O, X, i32>(),
        2 => strided_row_for::<W, O, X, u16>(),
        _ => None,
    }
}

/// The strided loop for `W`, `O` and `X` among those for indices `Y`:
/// `None` unless `X` is `Y`.
fn strided_row_for<W: 'static, O: 'static, X: 'static, Y: StridedIndex + 'static>(
) -> Option<StridedRow<W, O, X>> {
    use super::avx2::gather_strided as g;
    let kernels: [&dyn std::any::Any; 8] = [
        &(g::<u8, u8, Y> as StridedRow<u8, u8, Y>),
        &(g::<u8, MaybeUninit<u8>, Y> as StridedRow<u8, MaybeUninit<u8>, Y>),
        &(g::<u16, u16, Y> as StridedRow<u16, u16, Y>),
        &(g::<u16, MaybeUninit<u16>, Y> as StridedRow<u16, MaybeUninit<u16>, Y>),
        &(g::<u32, u32, Y> as StridedRow<u32, u32, Y>),
        &(g::<u32, MaybeUninit<u32>, Y> as StridedRow<u32, MaybeUninit<u32>, Y>),
        &(g::<u64, u64, Y> as StridedRow<u64, u64, Y>),
        &(g::<u64, MaybeUninit<u64>, Y> as StridedRow<u64, MaybeUninit<u64>, Y>),
    ];
    the_one(&kernels)
}

/// A vector loop across short rows laid end to end: writes
/// `dst[j] = data[r_j * data_row + p_j]` for the row `r_j` the [`Span`]
/// gives element `j` (each negative index shifted by the given amount,
/// streaming stores if asked) for a prefix of `dst`, and returns its
/// length (0 when the CPU cannot run it). See
/// [`super::avx2::gather_spanning`].
pub(super) type SpanningRows<W, O, X> = fn(&[W], Span, &[X], i64, &mut [O], bool) -> usize;

/// The spanning vector loop for words `W` in slots `O` and indices `X`,
/// if there is one: 4- and 8-byte words, `i64`, `i32` and `u16` indices.
pub(super) fn spanning_rows<W: 'static, O: 'static, X: 'static>() -> Option<SpanningRows<W, O, X>> {
    match std::mem::size_of::<X>() {
        8 => spanning_rows_for::<W, O, X, i64>(),
        4 => spanning_rows_for::<W, O, X, i32>(),
        2 => spanning_rows_for::<W, O, X, u16>(),
        _ => None,
    }
}

/// The spanning loop for `W`, `O` and `X` among those for indices `Y`:
/// `None` unless `X` is `Y`.
fn spanning_rows_for<W: 'static, O: 'static, X: 'static, Y: SpanningIndex + 'static>(
) -> Option<SpanningRows<W, O, X>> {
    use super::avx2::gather_spanning as g;
    let kernels: [&dyn std::any::Any; 4] = [
        &(g::<u32, u32, Y> as SpanningRows<u32, u32, Y>),
        &(g::<u32, MaybeUninit<u32>, Y> as SpanningRows<u32, MaybeUninit<u32>, Y>),
        &(g::<u64, u64, Y> as SpanningRows<u64, u64, Y>),
        &(g::<u64, MaybeUninit<u64>, Y> as SpanningRows<u64, MaybeUninit<u64>, Y>),
    ];
    the_one(&kernels)
}

/// The kernel among `kernels` whose type is `K`, if one is: the loops are
/// listed per word and slot type, and a call asks for its own.
fn the_one<K: Copy + 'static>(kernels: &[&dyn std::any::Any]) -> Option<K> {
    kernels
        .iter()
        .find_map(|kernel| kernel.downcast_ref::<K>())
        .copied()
}

/// What the first-use measurement found for one word size: the fastest
/// of [`ROUNDS`] timings of each loop over the same rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Measured {
    /// The scalar loop's best time.
    pub scalar: Duration,
    /// The vector loop's best time.
    pub vector: Duration,
}

impl Measured {
    /// Whether `auto` takes the vector loop: unless the scalar loop was at
    /// least 10% faster. Ties go to the vector loop, which led on every
    /// last-axis shape measured on AMD EPYC family 25 model 1 (1.0-1.4x,
    /// 4- and 8-byte words, rows of 64 to 4096), where the measurement of
    /// 8-byte words came out within 10% either way in 2 of 7 runs.
    pub(crate) fn vector_wins(self) -> bool {
        self.scalar.as_nanos() * 10 >= self.vector.as_nanos() * 9
    }

    /// Whether the vector loop took at least 1.5x the scalar loop's time:
    /// the CPU's gather instructions are slow, and calls do not time them
    /// again. On a 2-vCPU Intel Xeon family 6 model 106 (Ice Lake) it took
    /// 1.8-3.7x as long for most word and index sizes, and one W4 call
    /// (GatherElements along the last axis of 4096x4096 float32) 441-463
    /// ms with it against 22-31 scalar; the loops' ratio on an AMD EPYC
    /// family 25 model 1 (Zen 3) was 0.7-1.4.
    pub(crate) fn vector_far_behind(self) -> bool {
        self.vector.as_nanos() * 2 >= self.scalar.as_nanos() * 3
    }
}

/// Whether the first-use measurement found the vector loop
/// [far behind](Measured::vector_far_behind) for `word_bytes`-byte words by
/// `index_bytes`-byte indices. Words of 1 and 2 bytes go by the 4-byte
/// measurement: their loops gather 4 bytes a lane with the same
/// instruction.
pub(crate) fn vector_far_behind(word_bytes: usize, index_bytes: usize) -> bool {
    measured(word_bytes.max(4), index_bytes).is_some_and(Measured::vector_far_behind)
}

/// Rounds of the measurement, the two loops alternating.
const ROUNDS: usize = 3;
/// The measured rows: 16 rows of 4096 words (16 or 32 KiB each, past L1;
/// 256 or 512 KiB in all, within L2 or at its edge), each read by 4096
/// random indices, as in a last-axis gather of a larger tensor. A loop
/// takes 0.06-0.2 ms; the whole measurement, allocation included, 2-4 ms.
const ROWS: usize = 16;
const ROW_WORDS: usize = 4096;

/// The index types measured, by their width in bytes.
const INDEX_BYTES: [usize; 3] = [8, 4, 2];

/// The measurement for `word_bytes`-byte words (4 or 8) read through
/// `index_bytes`-byte indices (`i64`, `i32`, `u16`), made on first call;
/// `None` for other sizes, without AVX2, and under Miri (which cannot
/// time; the vector loop is then taken when compiled in).
pub(crate) fn measured(word_bytes: usize, index_bytes: usize) -> Option<Measured> {
    static TIMINGS: [OnceLock<Option<Measured>>; 6] = [const { OnceLock::new() }; 6];
    let untimed = Measured {
        scalar: Duration::from_nanos(1),
        vector: Duration::ZERO,
    };
    let index = INDEX_BYTES.iter().position(|&b| b == index_bytes)?;
    let slot = |word: usize| &TIMINGS[word * INDEX_BYTES.len() + index];
    match (word_bytes, index_bytes) {
        (4 | 8, _) if cfg!(miri) => avx2_available().then_some(untimed),
        (4, 8) => *slot(0).get_or_init(measure::<u32, i64>),
        (4, 4) => *slot(0).get_or_init(measure::<u32, i32>),
        (4, 2) => *slot(0).get_or_init(measure::<u32, u16>),
        (8, 8) => *slot(1).get_or_init(measure::<u64, i64>),
        (8, 4) => *slot(1).get_or_init(measure::<u64, i32>),
        (8, 2) => *slot(1).get_or_init(measure::<u64, u16>),
        _ => None,
    }
}

fn measure<W, X>() -> Option<Measured>
where
    W: Copy + Default + Slot<W> + 'static,
    X: KernelIndex + TryFrom<u64>,
{
    let vector = any_vector_row::<W, W, X>().filter(|_| avx2_available())?;
    let len = ROWS * ROW_WORDS;
    let data = vec![W::default(); len];
    // A fixed hash of each position: random reads within each row.
    let indices = (0..len as u64)
        .map(|k| X::try_from((k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % ROW_WORDS as u64))
        .collect::<Result<Vec<X>, _>>()
        .ok()?;
    let rule = AxisRule {
        axis: 1,
        size: ROW_WORDS,
        negative_allowed: true,
    };
    let mut dst = vec![W::default(); len];
    let mut time = |loop_: Option<VectorRow<W, W, X>>| {
        let mut reader = InPlace(&indices[..]);
        let start = Instant::now();
        let rows = data
            .chunks_exact(ROW_WORDS)
            .zip(dst.chunks_exact_mut(ROW_WORDS));
        for (r, (row, out)) in rows.enumerate() {
            let next = data.get((r + 1) * ROW_WORDS..(r + 2) * ROW_WORDS);
            let at = r * ROW_WORDS;
            let next = next.unwrap_or_default();
            gather_within_row(
                row,
                next,
                &rule,
                &mut reader,
                at,
                out,
                loop_,
                (false, false),
            )
            .ok()?;
        }
        Some(start.elapsed())
    };
    let (mut scalar, mut vectored) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        scalar = scalar.min(time(None)?);
        vectored = vectored.min(time(Some(vector))?);
    }
    Some(Measured {
        scalar,
        vector: vectored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_loops_serve_both_kinds_of_output_and_every_index_type_when_forced() {
        let forced = WordGather::Vector;
        assert!(vector_row::<u32, u32, i64>(forced).is_some());
        assert!(vector_row::<u32, MaybeUninit<u32>, i32>(forced).is_some());
        assert!(vector_row::<u64, MaybeUninit<u64>, u16>(forced).is_some());
        assert!(vector_row::<u64, u64, i32>(forced).is_some());
        assert!(vector_row::<u16, MaybeUninit<u16>, i64>(forced).is_none());
        assert!(vector_row::<u32, u32, u64>(forced).is_none());
        assert!(vector_row::<u32, u32, i64>(WordGather::Scalar).is_none());
    }

    #[test]
    fn the_automatic_choice_follows_the_measurement() {
        let auto = WordGather::Auto;
        for (word, index, chosen) in [
            (4, 8, vector_row::<u32, u32, i64>(auto).is_some()),
            (4, 4, vector_row::<u32, u32, i32>(auto).is_some()),
            (4, 2, vector_row::<u32, u32, u16>(auto).is_some()),
            (8, 8, vector_row::<u64, u64, i64>(auto).is_some()),
            (8, 4, vector_row::<u64, u64, i32>(auto).is_some()),
            (8, 2, vector_row::<u64, u64, u16>(auto).is_some()),
        ] {
            match measured(word, index) {
                Some(m) => {
                    assert!(m.scalar > Duration::ZERO || cfg!(miri), "{m:?}");
                    assert_eq!(
                        chosen,
                        m.vector_wins(),
                        "{word}-byte words by {index}: {m:?}"
                    );
                }
                None => assert!(!chosen && (!avx2_available() || cfg!(miri))),
            }
        }
        assert_eq!(measured(2, 8), None);
        assert_eq!(measured(4, 1), None);
    }
}
