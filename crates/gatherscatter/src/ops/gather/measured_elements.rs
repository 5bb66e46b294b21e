//! Which loop Gather copies one-element blocks (the gathered axis is the
//! last) with: the scalar loop, or a vector loop. The vector loop is the
//! byte permutes of small windows ([`super::windows`]: AVX-512 VBMI, one
//! batch, data slabs of at most 1 KiB, any plain element) where they
//! apply, else for 4- and 8-byte words the AVX2 gathers of
//! GatherElements' rows (`vpgatherdd` / `vpgatherdq` on the call's
//! indices as `i32`). Gather instructions are fast on some CPUs and
//! microcoded on others, so under `word_gather=auto` the calls that write
//! 1 MiB or more time both loops ([`crate::mem::measured`]), each vector
//! loop in classes of its own, unless the first-use measurement of
//! GatherElements' loops found the gathers far behind; smaller calls take
//! the scalar loop, save the windows of short slabs from 8 KiB of output
//! (below).
//!
//! 16 MiB of float32 in slabs of 256 elements, one thread, a loop outside
//! the library: on a 2-vCPU Intel Xeon family 6 model 167, scalar 1.56 ms
//! against 1.13 with AVX2 gathers (rows of 64: 2.06 against 1.17; of
//! 4096: 1.85 against 1.35); on a 2-vCPU AMD EPYC family 25 model 17 (Zen
//! 4), AVX2 gathers ran 5x slower than the scalar loop (1.84 against 10.6
//! ms, 2026-12-04), the windows 1.5-7x faster (figures in `windows`).

use super::windows::{self, WindowPermute};
use super::GatherPlan;
use crate::dtype::Element;
use crate::mem::cpu::avx2_available;
use crate::mem::knobs::{self, WordGather};
use crate::mem::measured::{CallTiming, Log2Classes, Pick, SizeClasses, TwoWays};
use crate::mem::parallel;
use crate::ops::gather_elements::word_gather::vector_far_behind;

/// Classes by word size (1 to 16 bytes by powers of two; the AVX2
/// gathers only see 4 and 8) and slab size (64 B to 128 KiB by powers of
/// two, the first and last holding every smaller and larger one), one
/// task or several.
const CLASSES: SizeClasses = SizeClasses {
    first: Log2Classes {
        min_log2: 0,
        classes: 5,
    },
    second: Log2Classes {
        min_log2: 6,
        classes: 12,
    },
};

/// Outputs from this size on are measured: long enough to time.
const MEASURED_MIN_OUTPUT: usize = 1 << 20;

/// Windows are taken without timing from this output size up to
/// [`MEASURED_MIN_OUTPUT`], from slabs up to [`untimed_windows_max_slab`].
/// Below it a call's table and set-up (about 2 µs on the Zen 4) are a
/// large share of its time: at 8 KiB the windows still ran 1.3-2.8x the
/// scalar loop's speed from slabs of 64 and 128 B, not measured below.
const WINDOWS_MIN_OUTPUT: usize = 8 << 10;

/// The largest data slab whose windows a call writing `out_bytes`, 8 KiB
/// to 1 MiB, takes untimed: where they ran at least 1.25x the scalar
/// loop's speed. The windows' time grows with the slab (wider windows,
/// more permutes a vector) and their table's share falls with the output;
/// the scalar loop's time falls with the word or block it copies. So wide
/// words from wide slabs keep the scalar loop until a call times both;
/// below 64 KiB the limit shrinks with the output, from 256 KiB it
/// doubles. Gather along the middle axis, one thread, µs scalar ->
/// windows, 2-vCPU AMD EPYC family 25 model 17 (Zen 4), 2026-12-07, at
/// 64 KiB: one-element blocks from 1 KiB slabs, int8 23.6 -> 9.9, float16
/// 15.4 -> 9.9, float32 9.5 -> 9.0, float64 5.8 -> 8.8, complex128 4.8 ->
/// 8.7; from 512 B slabs float32 10.3 -> 6.0, float64 6.6 -> 6.0,
/// complex128 5.4 -> 5.8; from 256 B slabs float64 8.2 -> 4.7, complex128
/// 6.8 -> 4.5; blocks of 8 bytes from 1 KiB slabs (int8 x 8, float16 x 4,
/// float32 x 2) 11.2-11.4 -> 8.7-8.9, of 2 and 4 bytes 20.6-40.9 ->
/// 8.9-9.9; 16-byte blocks from 1 KiB slabs 7.2 -> 8.7, from 512 B 7.6 ->
/// 5.8. At 256 KiB: one-element float32 from 1 KiB slabs 34.2 -> 20.3,
/// float64 22.7 -> 14.0 from 512 B and 19.6 -> 20.2 from 1 KiB, complex128
/// 18.1 -> 13.4 from 512 B and 15.5 -> 19.7 from 1 KiB; 16-byte blocks
/// from 1 KiB slabs 25.0 -> 19.7. At 16 KiB, at the limits: one-element
/// int8 from 256 B slabs 7.4 -> 3.0 (from 1 KiB 12.6 -> 12.0), float32
/// from 128 B 6.4 -> 3.7 (from 512 B 3.5 -> 3.9), float64 from 64 B 4.6 ->
/// 2.3 (from 256 B 2.9 -> 2.7); 8-byte blocks from 256 B 3.7 -> 2.8 (from
/// 512 B 3.6 -> 3.8); 16-byte blocks from 128 B 3.1 -> 2.3 (from 256 B 2.7
/// -> 2.7). At 32 KiB the same held at half the 64 KiB limits, at 8 KiB at
/// an eighth (int8 pairs from 128 B slabs 5.8 -> 2.3, 16-byte blocks from
/// 64 B 2.5 -> 2.0); one-element bytes and blocks of 2 and 4 bytes did
/// at twice that (at 16 KiB from 512 B slabs: int8 7.1 -> 4.4, pairs 9.9
/// -> 4.7, quads 5.7 -> 3.9; at 8 KiB from 256 B, 4.3 -> 2.8, 5.6 -> 2.9,
/// 3.5 -> 2.5; at 32 KiB pairs from 1 KiB 18.7 -> 8.7).
fn untimed_windows_max_slab(call: ElementCall, out_bytes: usize) -> usize {
    // The limit at 64 KiB of output; for bytes and blocks of up to four
    // bytes past the windows' 1 KiB, so that it is 1 KiB at 32 KiB.
    let at_64_kib = match (call.inner, call.block_bytes()) {
        (1, 1) => 2 << 10,
        (1, 2) => 1 << 10,
        (1, 4) => 512,
        (1, _) => 256,
        (_, 0..=4) => 2 << 10,
        (_, 0..=8) => 1 << 10,
        _ => 512,
    };
    if out_bytes >= 256 << 10 {
        at_64_kib * 2
    } else if out_bytes >= 64 << 10 {
        at_64_kib
    } else {
        // Below 64 KiB, in proportion to the output (no overflow: both
        // factors are small).
        at_64_kib * out_bytes / (64 << 10)
    }
}

/// This process's measurements: the scalar loop first, the AVX2 gathers
/// second.
static MEASURED: TwoWays<{ CLASSES.len() }> = TwoWays::new();

/// Likewise, the scalar loop against the windows.
static MEASURED_WINDOWS: TwoWays<{ CLASSES.len() }> = TwoWays::new();

/// The vector loop a call could take instead of the scalar one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum VectorKind {
    /// Byte permutes of small windows of data slabs ([`windows`]).
    Windows,
    /// GatherElements' AVX2 row gathers on the indices as `i32`.
    Gathers,
}

/// The longest blocks the windows copy: past 16 bytes the block loops'
/// fixed-length copies move a block in one or two vector moves.
const MAX_WINDOW_BLOCK: usize = 16;

/// A call's short blocks, as [`ElementLoop::choose`] sees them.
#[derive(Clone, Copy, Debug)]
pub(super) struct ElementCall {
    /// Bytes a word.
    pub word: usize,
    /// Words a block (the data dims after the axis).
    pub inner: usize,
    /// Blocks in a data slab (the axis).
    pub axis_size: usize,
    /// Indices a slab reads (`None` with several batches, whose slabs
    /// read different indices) and the output's slabs.
    pub per_slab: Option<usize>,
    pub slabs: usize,
    /// Whether the elements are plain bytes (every bit pattern a value).
    pub plain: bool,
}

impl ElementCall {
    /// Bytes a block.
    fn block_bytes(&self) -> usize {
        self.inner.saturating_mul(self.word)
    }

    /// Bytes a data slab.
    fn slab_bytes(&self) -> usize {
        self.axis_size.saturating_mul(self.block_bytes())
    }

    /// The vector loop this call could take, if any: the windows for
    /// blocks of up to 16 bytes, the gathers for one-element blocks.
    fn vector_kind(&self) -> Option<VectorKind> {
        let block = self.block_bytes();
        let slab_bytes = self.slab_bytes();
        let windows = self.per_slab.is_some_and(|count| {
            self.plain
                && block <= MAX_WINDOW_BLOCK
                && windows::applies(slab_bytes, count, block, self.slabs)
        });
        let gathers = self.inner == 1
            && matches!(self.word, 4 | 8)
            && i32::try_from(self.axis_size).is_ok()
            && avx2_available();
        match (windows, gathers) {
            (true, _) => Some(VectorKind::Windows),
            (false, true) => Some(VectorKind::Gathers),
            (false, false) => None,
        }
    }
}

/// One call's loop for one-element blocks, and its place in its class's
/// measurement.
pub(super) struct ElementLoop {
    pick: Pick,
    /// The vector loop the call would take when the pick says vector.
    kind: Option<VectorKind>,
}

impl ElementLoop {
    /// The loop for `call` writing `out_bytes` on `tasks` tasks: forced
    /// by `knob`, or under `auto` measured for the call's class from 1 MiB
    /// of output, the scalar loop below (the windows of short slabs from
    /// 8 KiB). Without
    /// a vector loop for the call, the scalar loop whatever the knob.
    pub(super) fn choose(
        knob: WordGather,
        call: ElementCall,
        out_bytes: usize,
        tasks: usize,
    ) -> ElementLoop {
        let fixed = |kind: Option<VectorKind>| ElementLoop {
            pick: Pick::fixed(kind.is_some()),
            kind,
        };
        let Some(kind) = call.vector_kind() else {
            return fixed(None);
        };
        let table = match kind {
            VectorKind::Windows => &MEASURED_WINDOWS,
            VectorKind::Gathers => &MEASURED,
        };
        match knob {
            WordGather::Scalar => fixed(None),
            WordGather::Vector => fixed(Some(kind)),
            _ if cfg!(miri) => fixed(None),
            _ if out_bytes < MEASURED_MIN_OUTPUT => fixed(
                (kind == VectorKind::Windows
                    && out_bytes >= WINDOWS_MIN_OUTPUT
                    && call.slab_bytes() <= untimed_windows_max_slab(call, out_bytes))
                .then_some(kind),
            ),
            // Where GatherElements' first-use measurement found the gathers
            // far behind (microcoded), no call times them: on the Ice Lake
            // one such call ran 15-20x slower than the scalar loop.
            _ if kind == VectorKind::Gathers && vector_far_behind(call.word, 4) => fixed(None),
            _ => {
                let slot = CLASSES.slot(call.block_bytes(), call.slab_bytes(), tasks);
                ElementLoop {
                    pick: Pick::measured(table, slot, true, || false),
                    kind: Some(kind),
                }
            }
        }
    }

    /// The vector loop the call takes, or `None` for the scalar loop.
    pub(super) fn vector(&self) -> Option<VectorKind> {
        self.kind.filter(|_| self.pick.second)
    }

    /// Whether this call's time joins a measurement.
    #[cfg(test)]
    fn timed(&self) -> bool {
        self.pick.is_timed()
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(super) fn done(self, out_bytes: usize) {
        self.pick.done(out_bytes);
    }
}

/// A call's loop for its one-element blocks, with what its vector loop
/// needs.
pub(super) struct Elements {
    pub chosen: ElementLoop,
    vector: Option<VectorLoop>,
}

/// The chosen vector loop's inputs.
enum VectorLoop {
    /// The resolved indices as `i32`, for the AVX2 gathers.
    Gathers(Vec<i32>),
    /// The table of byte positions, for the windows.
    Windows(WindowPermute),
}

impl Elements {
    /// The loop for a call of `plan` copying blocks of `T`: for blocks
    /// of more than 16 bytes, or not one element and several batches, the
    /// scalar loop, untimed.
    pub(super) fn choose<T: Element>(resolved: &[usize], plan: &GatherPlan) -> Elements {
        let word = std::mem::size_of::<T::Word>();
        let ipb = plan.indices_per_batch;
        let call = ElementCall {
            word,
            inner: plan.inner,
            axis_size: plan.axis_size,
            per_slab: (resolved.len() == ipb).then_some(ipb),
            slabs: plan.output_len / ipb.saturating_mul(plan.inner).max(1),
            plain: T::as_bytes(&[]).is_some(),
        };
        let out_bytes = plan.output_len.saturating_mul(word);
        let tasks = parallel::tasks(out_bytes, plan.output_len / plan.inner.max(1));
        let chosen = ElementLoop::choose(knobs::in_force().word_gather, call, out_bytes, tasks);
        let vector = match chosen.vector() {
            Some(VectorKind::Windows) => {
                WindowPermute::new(resolved, plan.axis_size, call.block_bytes(), call.slabs)
                    .map(VectorLoop::Windows)
            }
            // Every resolved index is below the axis size, which fits
            // `i32` when the gathers are chosen.
            Some(VectorKind::Gathers) => Some(VectorLoop::Gathers(
                resolved.iter().map(|&i| i as i32).collect(),
            )),
            None => None,
        };
        // A table the windows cannot build (never: `vector_kind` checked
        // what `WindowPermute::new` does, and resolved indices are below
        // the axis) sends the call to the scalar loop untimed, so that no
        // class times the scalar loop as its vector one.
        let chosen = match (chosen.vector(), &vector) {
            (Some(_), None) => ElementLoop::choose(WordGather::Scalar, call, out_bytes, tasks),
            _ => chosen,
        };
        Elements { chosen, vector }
    }

    /// The indices as `i32` when the AVX2 gathers were chosen.
    pub(super) fn gathers(&self) -> Option<&[i32]> {
        match &self.vector {
            Some(VectorLoop::Gathers(offsets)) => Some(offsets),
            _ => None,
        }
    }

    /// The table when the windows were chosen.
    pub(super) fn windows(&self) -> Option<&WindowPermute> {
        match &self.vector {
            Some(VectorLoop::Windows(table)) => Some(table),
            _ => None,
        }
    }
}

/// How the report names the class in `slot`: `Gather 4-byte elements
/// from 1 KiB slabs, one task`, with `by windows` after the slabs for the
/// windows' classes (whose "elements" are blocks of up to 16 bytes).
fn describe(slot: usize, windows: bool) -> String {
    let (word, slab, split) = CLASSES.sizes(slot);
    let slab = match slab {
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    };
    let split = if split { "split" } else { "one task" };
    let by = if windows { " by windows" } else { "" };
    format!("Gather {word}-byte elements from {slab} slabs{by}, {split}")
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let gathers = MEASURED.report("word_gather", ["scalar", "vector"], |s| describe(s, false));
    let windows =
        MEASURED_WINDOWS.report("word_gather", ["scalar", "vector"], |s| describe(s, true));
    gathers.into_iter().chain(windows).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-element blocks of `word` bytes from slabs of `axis_size`, one
    /// batch (`per_slab` indices a slab) or several (`None`).
    fn call(word: usize, axis_size: usize, per_slab: Option<usize>, slabs: usize) -> ElementCall {
        ElementCall {
            word,
            inner: 1,
            axis_size,
            per_slab,
            slabs,
            plain: true,
        }
    }

    #[test]
    fn auto_measures_large_calls_with_a_vector_loop_and_the_knob_forces_either() {
        let avx2 = avx2_available();
        // Several batches: no windows, the AVX2 gathers for 4- and 8-byte words.
        let batches = call(4, 256, None, 1 << 14);
        let measured = ElementLoop::choose(WordGather::Auto, batches, 16 << 20, 1);
        let timed = avx2 && !cfg!(miri) && !vector_far_behind(4, 4);
        assert_eq!(measured.timed(), timed);
        assert!(
            measured.vector().is_none(),
            "the scalar loop is timed first"
        );
        let mut not_plain = call(1, 256, Some(256), 1 << 16);
        not_plain.plain = false;
        for unmeasured in [
            ElementLoop::choose(WordGather::Auto, batches, 1 << 10, 1),
            ElementLoop::choose(WordGather::Auto, call(2, 512, None, 1 << 14), 16 << 20, 1),
            ElementLoop::choose(WordGather::Vector, call(16, 64, None, 1 << 14), 16 << 20, 1),
            ElementLoop::choose(WordGather::Vector, call(4, 1 << 38, None, 4), 16 << 20, 1),
            ElementLoop::choose(WordGather::Vector, not_plain, 16 << 20, 1),
            ElementLoop::choose(WordGather::Scalar, call(8, 128, None, 1 << 14), 16 << 20, 2),
        ] {
            assert!(unmeasured.vector().is_none() && !unmeasured.timed());
        }
        let forced = ElementLoop::choose(WordGather::Vector, call(8, 128, None, 8), 1 << 10, 2);
        assert_eq!(forced.vector(), avx2.then_some(VectorKind::Gathers));
    }

    /// With the windows: timed from 1 MiB of output, taken untimed from
    /// 8 KiB where the slab is short for the word, block and output, the
    /// scalar loop otherwise; forced by the knob either way.
    #[test]
    fn auto_takes_the_windows_of_short_slabs_from_8_kib_and_measures_them_from_1_mib() {
        let bytes = call(1, 256, Some(256), 1 << 16);
        let windows = windows::available();
        let taken = (windows && !cfg!(miri)).then_some(VectorKind::Windows);
        assert_eq!(bytes.vector_kind(), windows.then_some(VectorKind::Windows));
        let measured = ElementLoop::choose(WordGather::Auto, bytes, 16 << 20, 1);
        assert_eq!(measured.timed(), windows && !cfg!(miri));
        let mid = ElementLoop::choose(WordGather::Auto, bytes, 256 << 10, 1);
        assert_eq!(mid.vector(), taken);
        assert!(!mid.timed());
        // Below 64 KiB the slabs may be narrower in proportion, down to
        // 8 KiB: 256 B slabs of bytes from 8 KiB, not below.
        let small = ElementLoop::choose(WordGather::Auto, bytes, 16 << 10, 1);
        assert_eq!(small.vector(), taken);
        let tiny = ElementLoop::choose(WordGather::Auto, bytes, 8 << 10, 1);
        assert_eq!(tiny.vector(), taken);
        let tinier = ElementLoop::choose(WordGather::Auto, bytes, 4 << 10, 1);
        assert!(tinier.vector().is_none() && !tinier.timed());
        let halves = call(2, 256, Some(256), 1 << 10);
        let tiny = ElementLoop::choose(WordGather::Auto, halves, 8 << 10, 1);
        assert!(tiny.vector().is_none() && !tiny.timed());
        let doubles = call(8, 16, Some(16), 1 << 10);
        let small = ElementLoop::choose(WordGather::Auto, doubles, 16 << 10, 1);
        assert!(small.vector().is_none() && !small.timed());
        let small = ElementLoop::choose(WordGather::Auto, doubles, 32 << 10, 1);
        assert_eq!(small.vector(), taken);
        let forced = ElementLoop::choose(WordGather::Vector, bytes, 1 << 10, 1);
        assert_eq!(forced.vector(), windows.then_some(VectorKind::Windows));
        // Pixels of three bytes from slabs of 255: blocks of several
        // elements take them untimed too.
        let pixels = ElementCall {
            inner: 3,
            ..call(1, 85, Some(85), 1 << 12)
        };
        assert_eq!(pixels.vector_kind(), windows.then_some(VectorKind::Windows));
        let mid = ElementLoop::choose(WordGather::Auto, pixels, 256 << 10, 1);
        assert_eq!(mid.vector(), taken);
        assert!(!mid.timed());
        let measured = ElementLoop::choose(WordGather::Auto, pixels, 4 << 20, 1);
        assert_eq!(measured.timed(), windows && !cfg!(miri));
        let forced = ElementLoop::choose(WordGather::Vector, pixels, 256 << 10, 1);
        assert_eq!(forced.vector(), windows.then_some(VectorKind::Windows));
        // Wide words or blocks from wide slabs: the scalar loop until
        // timed, which a call of 1 MiB is; from 256 KiB the slabs may be
        // twice as wide.
        let float64 = call(8, 128, Some(128), 1 << 10);
        let complex = call(16, 64, Some(64), 1 << 10);
        let quads = ElementCall {
            inner: 4,
            ..call(4, 64, Some(64), 1 << 10)
        };
        let wider_complex = call(16, 32, Some(32), 1 << 10);
        for (wide, out_bytes) in [
            (float64, 128 << 10),
            (float64, 512 << 10),
            (complex, 512 << 10),
            (quads, 128 << 10),
            (wider_complex, 128 << 10),
        ] {
            let mid = ElementLoop::choose(WordGather::Auto, wide, out_bytes, 1);
            assert!(mid.vector().is_none() && !mid.timed(), "{wide:?}");
            let measured = ElementLoop::choose(WordGather::Auto, wide, 1 << 20, 1);
            assert_eq!(measured.timed(), windows && !cfg!(miri), "{wide:?}");
        }
        for wider in [quads, wider_complex] {
            let mid = ElementLoop::choose(WordGather::Auto, wider, 256 << 10, 1);
            assert_eq!(mid.vector(), taken, "{wider:?}");
        }
        for short in [
            call(8, 32, Some(32), 1 << 10),
            ElementCall {
                inner: 4,
                ..call(4, 32, Some(32), 1 << 10)
            },
            ElementCall {
                inner: 2,
                ..call(4, 128, Some(128), 1 << 10)
            },
        ] {
            let mid = ElementLoop::choose(WordGather::Auto, short, 64 << 10, 1);
            assert_eq!(mid.vector(), taken, "{short:?}");
        }
        // Slabs past 1 KiB, or fewer than eight: 4- and 8-byte words fall
        // to the gathers, shorter ones to the scalar loop.
        let avx2 = avx2_available();
        let wide = call(4, 257, Some(16), 1 << 10);
        let few = call(4, 16, Some(16), 7);
        for gathers in [wide, few] {
            let expected = avx2.then_some(VectorKind::Gathers);
            assert_eq!(gathers.vector_kind(), expected);
        }
        assert_eq!(call(2, 513, Some(16), 1 << 10).vector_kind(), None);
    }

    #[test]
    fn classes_are_named_by_word_slab_loop_and_split() {
        assert_eq!(
            describe(CLASSES.slot(4, 1 << 10, 1), false),
            "Gather 4-byte elements from 1 KiB slabs, one task"
        );
        assert_eq!(
            describe(CLASSES.slot(8, 256, 2), false),
            "Gather 8-byte elements from 256 B slabs, split"
        );
        assert_eq!(
            describe(CLASSES.slot(1, 3, 2), true),
            "Gather 1-byte elements from 64 B slabs by windows, split"
        );
        assert_eq!(
            describe(CLASSES.slot(16, 1024, 1), true),
            "Gather 16-byte elements from 1 KiB slabs by windows, one task"
        );
    }
}
