//! Which loop GatherElements runs along the last axis for calls that move
//! megabytes: the AVX2 gathers or the scalar loop, timed on the calls
//! themselves ([`crate::mem::measured`]), where the first-use measurement
//! of [`super::word_gather`] decides smaller calls until their class has a
//! verdict.
//!
//! That first-use measurement times 0.06-0.2 ms loops, too short for a
//! shared machine: on a 2-vCPU AMD EPYC family 25 model 1 (Zen 3) VM,
//! 8-byte words by int64 indices came out vector in one process (scalar
//! 94.4 us, vector 73.5) and scalar in the next (91.8, 114.6), while a
//! last-axis float64 gather of 16 MiB in rows of 256 ran 4.75-4.81 ms
//! vector against 5.06-5.40 scalar on one thread, 2.57-2.71 against
//! 2.83-3.00 on two.
//!
//! So each class of call (word size, index type, data row size by powers
//! of two, one task or several) is timed with the scalar loop, then the
//! vector loop, twice each, and keeps the faster.

use std::time::Instant;

use super::word_gather::{vector_row, VectorRow};
use crate::mem::knobs::WordGather;
use crate::mem::measured::{CallTiming, TwoWays};

/// The word sizes with a vector loop, in bytes.
const WORD_BYTES: [usize; 2] = [4, 8];
/// The index types the vector loops read, by width in bytes.
const INDEX_BYTES: [usize; 3] = [8, 4, 2];
/// Data row classes: 64 bytes to 1 MiB by powers of two, the ends holding
/// everything beyond.
const MIN_ROW_LOG2: u32 = 6;
const ROW_CLASSES: usize = 15;
/// One task, or several.
const TASK_CLASSES: usize = 2;
const CLASSES: usize = WORD_BYTES.len() * INDEX_BYTES.len() * ROW_CLASSES * TASK_CLASSES;

/// Outputs from this size on are timed: long enough to time with two
/// clock reads.
const TIMED_MIN_OUTPUT: usize = 1 << 20;

/// This process's measurements: the scalar loop first, the vector loop
/// second.
static MEASURED: TwoWays<CLASSES> = TwoWays::new();

/// The class of a call: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    word: usize,
    index: usize,
    row_log2: u32,
    split: bool,
}

impl Class {
    fn of(word_bytes: usize, index_bytes: usize, row_bytes: usize, tasks: usize) -> Option<Class> {
        let word = WORD_BYTES.iter().position(|&b| b == word_bytes)?;
        let index = INDEX_BYTES.iter().position(|&b| b == index_bytes)?;
        let top = MIN_ROW_LOG2 + ROW_CLASSES as u32 - 1;
        Some(Class {
            word,
            index,
            row_log2: row_bytes.max(1).ilog2().clamp(MIN_ROW_LOG2, top),
            split: tasks > 1,
        })
    }

    fn slot(self) -> usize {
        let row = (self.row_log2 - MIN_ROW_LOG2) as usize;
        let kind = self.word * INDEX_BYTES.len() + self.index;
        (kind * ROW_CLASSES + row) * TASK_CLASSES + usize::from(self.split)
    }

    fn from_slot(slot: usize) -> Class {
        let rest = slot / TASK_CLASSES;
        let kind = rest / ROW_CLASSES;
        Class {
            word: kind / INDEX_BYTES.len(),
            index: kind % INDEX_BYTES.len(),
            row_log2: MIN_ROW_LOG2 + (rest % ROW_CLASSES) as u32,
            split: slot % TASK_CLASSES == 1,
        }
    }

    /// How the report names the class: `8-byte words by 8-byte indices,
    /// rows of 2 KiB, one task`.
    fn describe(self) -> String {
        let row = 1u64 << self.row_log2;
        let row = match row >> 10 {
            0 => format!("{row} B"),
            kib => format!("{kib} KiB"),
        };
        format!(
            "{}-byte words by {}-byte indices, rows of {row}, {}",
            WORD_BYTES[self.word],
            INDEX_BYTES[self.index],
            if self.split { "split" } else { "one task" }
        )
    }
}

/// One call's loop, and the class whose measurement its time joins.
pub(super) struct WordLoop<W, O, X> {
    /// The vector loop, when the call takes it.
    pub vector: Option<VectorRow<W, O, X>>,
    timing: Option<(Class, Instant)>,
}

impl<W: 'static, O: 'static, X: 'static> WordLoop<W, O, X> {
    /// The loop for a call gathering words `W` into slots `O` through
    /// indices `X` from data rows of `row_bytes`, writing `out_bytes` on
    /// `tasks` tasks: forced by `knob`; under `auto`, timed for calls of
    /// at least [`TIMED_MIN_OUTPUT`] (not under Miri, which cannot time),
    /// and for smaller ones the verdict of their class once it has one,
    /// else the first-use measurement.
    pub(super) fn choose(
        knob: WordGather,
        row_bytes: usize,
        out_bytes: usize,
        tasks: usize,
    ) -> WordLoop<W, O, X> {
        let untimed = |vector| WordLoop {
            vector,
            timing: None,
        };
        let class = Class::of(size_of::<W>(), size_of::<X>(), row_bytes, tasks);
        let (Some(class), WordGather::Auto, Some(kernel)) =
            (class, knob, vector_row::<W, O, X>(WordGather::Vector))
        else {
            return untimed(vector_row(knob));
        };
        let slot = class.slot();
        if MEASURED.settled(slot) {
            return untimed(MEASURED.second(slot).then_some(kernel));
        }
        if out_bytes < TIMED_MIN_OUTPUT || cfg!(miri) {
            return untimed(vector_row(knob));
        }
        WordLoop {
            vector: MEASURED.second(slot).then_some(kernel),
            timing: Some((class, Instant::now())),
        }
    }

    /// Whether this call is one of its class's timed ones (whose other
    /// measured choices then stay at their defaults, so that the two
    /// measurements do not mix).
    pub(super) fn timed(&self) -> bool {
        self.timing.is_some()
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(super) fn done(self, out_bytes: usize) {
        if let Some((class, started)) = self.timing {
            let vector = self.vector.is_some();
            MEASURED.record(class.slot(), vector, out_bytes, started.elapsed());
        }
    }
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let describe = |slot| Class::from_slot(slot).describe();
    MEASURED.report("word_gather", ["scalar", "vector"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;

    #[test]
    fn classes_are_word_index_row_size_and_whether_the_call_is_split() {
        let f64_rows = Class::of(8, 8, 2048, 1).unwrap();
        assert_eq!(
            f64_rows.describe(),
            "8-byte words by 8-byte indices, rows of 2 KiB, one task"
        );
        assert_eq!(
            Class::of(4, 2, 100, 2).unwrap().describe(),
            "4-byte words by 2-byte indices, rows of 64 B, split"
        );
        assert_eq!(Class::of(2, 8, 2048, 1), None);
        assert_eq!(Class::of(4, 1, 2048, 1), None);
        assert_eq!(Class::of(4, 4, usize::MAX, 1).unwrap().row_log2, 20);
        for slot in 0..CLASSES {
            assert_eq!(Class::from_slot(slot).slot(), slot);
        }
    }

    #[test]
    fn large_calls_are_timed_scalar_first_and_forced_or_small_ones_are_not() {
        type Loop = WordLoop<u64, MaybeUninit<u64>, i32>;
        let auto = WordGather::Auto;
        let large = Loop::choose(auto, 4096, 16 << 20, 1);
        let has_vector = vector_row::<u64, MaybeUninit<u64>, i32>(WordGather::Vector).is_some();
        match large.timing {
            Some(_) => assert!(large.vector.is_none(), "the scalar loop is timed first"),
            None => assert!(cfg!(miri) || !has_vector, "a large call is timed"),
        }
        let small = Loop::choose(auto, 4096, (1 << 20) - 8, 1);
        assert!(!small.timed());
        let first_use = vector_row::<u64, MaybeUninit<u64>, i32>(auto).is_some();
        assert_eq!(small.vector.is_some(), first_use);
        for (knob, vector) in [
            (WordGather::Scalar, false),
            (WordGather::Vector, has_vector),
        ] {
            let forced = Loop::choose(knob, 4096, 16 << 20, 1);
            assert!(!forced.timed());
            assert_eq!(forced.vector.is_some(), vector);
        }
        // No vector loop for 2-byte words: nothing to time.
        let words = WordLoop::<u16, u16, i64>::choose(auto, 4096, 16 << 20, 1);
        assert!(!words.timed() && words.vector.is_none());
    }
}
