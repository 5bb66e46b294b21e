//! Which loop Gather copies one-element blocks (the gathered axis is the
//! last) of 4- and 8-byte words with: the scalar loop, or the AVX2 gathers
//! of GatherElements' rows (`vpgatherdd` / `vpgatherdq` on the call's
//! indices as `i32`). Gather instructions are fast on some CPUs and
//! microcoded on others, so under `word_gather=auto` the calls that write
//! 1 MiB or more time both ([`crate::mem::measured`]), unless the
//! first-use measurement of GatherElements' loops found the gathers far
//! behind; smaller calls take the scalar loop.
//!
//! 16 MiB of float32 in slabs of 256 elements, one thread, a loop outside
//! the library: on a 2-vCPU Intel Xeon family 6 model 167, scalar 1.56 ms
//! against 1.13 with AVX2 gathers (rows of 64: 2.06 against 1.17; of
//! 4096: 1.85 against 1.35); on a 2-vCPU AMD EPYC family 25 model 17 (Zen
//! 4), AVX2 gathers ran 5x slower than the scalar loop (1.84 against 10.6
//! ms, 2026-12-04).

use super::GatherPlan;
use crate::dtype::Element;
use crate::mem::cpu::avx2_available;
use crate::mem::knobs::{self, WordGather};
use crate::mem::measured::{CallTiming, Log2Classes, Pick, SizeClasses, TwoWays};
use crate::mem::parallel;
use crate::ops::gather_elements::word_gather::vector_far_behind;

/// Classes by word size (4 or 8 bytes: 4 and 8 by powers of two, from 4)
/// and slab size (64 B to 128 KiB by powers of two, the last holding
/// every larger one), one task or several.
const CLASSES: SizeClasses = SizeClasses {
    first: Log2Classes {
        min_log2: 2,
        classes: 2,
    },
    second: Log2Classes {
        min_log2: 6,
        classes: 12,
    },
};

/// Outputs from this size on are measured: long enough to time.
const MEASURED_MIN_OUTPUT: usize = 1 << 20;

/// This process's measurements: the scalar loop first, the vector second.
static MEASURED: TwoWays<{ CLASSES.len() }> = TwoWays::new();

/// One call's loop for one-element blocks, and its place in its class's
/// measurement.
pub(super) struct ElementLoop(Pick);

impl ElementLoop {
    /// The loop for a call copying one-element blocks of `word` bytes
    /// from slabs of `slab_bytes` (an axis of `axis_size`) into
    /// `out_bytes` on `tasks` tasks: forced by `knob`, or under `auto`
    /// measured for the call's class from 1 MiB of output, the scalar loop
    /// below. The vector loop needs AVX2, 4- or 8-byte words and an axis
    /// that `i32` indexes; without them, the scalar loop whatever the knob.
    pub(super) fn choose(
        knob: WordGather,
        (word, slab_bytes, axis_size): (usize, usize, usize),
        out_bytes: usize,
        tasks: usize,
    ) -> ElementLoop {
        let fixed = |vector| ElementLoop(Pick::fixed(vector));
        let possible =
            matches!(word, 4 | 8) && i32::try_from(axis_size).is_ok() && avx2_available();
        match knob {
            _ if !possible => fixed(false),
            WordGather::Scalar => fixed(false),
            WordGather::Vector => fixed(true),
            _ if out_bytes < MEASURED_MIN_OUTPUT || cfg!(miri) => fixed(false),
            // Where GatherElements' first-use measurement found the gathers
            // far behind (microcoded), no call times them: on the Ice Lake
            // one such call ran 15-20x slower than the scalar loop.
            _ if vector_far_behind(word, 4) => fixed(false),
            _ => {
                let slot = CLASSES.slot(word, slab_bytes, tasks);
                ElementLoop(Pick::measured(&MEASURED, slot, true, || false))
            }
        }
    }

    /// The AVX2 gathers rather than the scalar loop.
    pub(super) fn vector(&self) -> bool {
        self.0.second
    }

    /// Whether this call's time joins a measurement.
    #[cfg(test)]
    fn timed(&self) -> bool {
        self.0.is_timed()
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(super) fn done(self, out_bytes: usize) {
        self.0.done(out_bytes);
    }
}

/// A call's loop for its one-element blocks, with its indices as `i32`
/// for the vector one.
pub(super) struct Elements {
    pub chosen: ElementLoop,
    /// The resolved indices as `i32`, when the vector loop was chosen.
    pub offsets: Option<Vec<i32>>,
}

impl Elements {
    /// The loop for a call of `plan` copying one-element blocks of `T`
    /// (the scalar loop for longer blocks, untimed).
    pub(super) fn choose<T: Element>(resolved: &[usize], plan: &GatherPlan) -> Elements {
        let word = std::mem::size_of::<T::Word>();
        let chosen = match plan.inner {
            1 => {
                let out_bytes = plan.output_len.saturating_mul(word);
                let tasks = parallel::tasks(out_bytes, plan.output_len);
                let sizes = (word, plan.axis_size.saturating_mul(word), plan.axis_size);
                ElementLoop::choose(knobs::in_force().word_gather, sizes, out_bytes, tasks)
            }
            _ => ElementLoop(Pick::fixed(false)),
        };
        // Every resolved index is below the axis size, which fits `i32`
        // when the vector loop is chosen.
        let offsets = chosen
            .vector()
            .then(|| resolved.iter().map(|&i| i as i32).collect());
        Elements { chosen, offsets }
    }
}

/// How the report names the class in `slot`: `Gather 4-byte elements
/// from 1 KiB slabs, one task`.
fn describe(slot: usize) -> String {
    let (word, slab, split) = CLASSES.sizes(slot);
    let slab = match slab {
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    };
    let split = if split { "split" } else { "one task" };
    format!("Gather {word}-byte elements from {slab} slabs, {split}")
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    MEASURED.report("word_gather", ["scalar", "vector"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_measures_large_calls_of_4_and_8_byte_words_and_the_knob_forces_either() {
        let avx2 = avx2_available();
        let measured = ElementLoop::choose(WordGather::Auto, (4, 1 << 10, 256), 16 << 20, 1);
        let timed = avx2 && !cfg!(miri) && !vector_far_behind(4, 4);
        assert_eq!(measured.timed(), timed);
        assert!(!measured.vector(), "the scalar loop is timed first");
        for unmeasured in [
            ElementLoop::choose(WordGather::Auto, (4, 1 << 10, 256), 1 << 10, 1),
            ElementLoop::choose(WordGather::Auto, (2, 1 << 10, 512), 16 << 20, 1),
            ElementLoop::choose(WordGather::Vector, (16, 1 << 10, 64), 16 << 20, 1),
            ElementLoop::choose(WordGather::Vector, (4, 1 << 40, 1 << 38), 16 << 20, 1),
            ElementLoop::choose(WordGather::Scalar, (8, 1 << 10, 128), 16 << 20, 2),
        ] {
            assert!(!unmeasured.vector() && !unmeasured.timed());
        }
        let forced = ElementLoop::choose(WordGather::Vector, (8, 1 << 10, 128), 1 << 10, 2);
        assert_eq!(forced.vector(), avx2);
        assert_eq!(
            describe(CLASSES.slot(4, 1 << 10, 1)),
            "Gather 4-byte elements from 1 KiB slabs, one task"
        );
        assert_eq!(
            describe(CLASSES.slot(8, 256, 2)),
            "Gather 8-byte elements from 256 B slabs, split"
        );
    }
}
