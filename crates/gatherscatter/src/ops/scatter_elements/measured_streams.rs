//! Whether ScatterElements' row loops ask for their index and update
//! streams ahead in software (`ahead`) or leave them to the hardware
//! prefetchers (`hardware`). Which is faster depends on the CPU and the
//! shape, so along the last axis `auto` times the calls themselves
//! ([`crate::mem::measured`]), keeping `hardware` unless `ahead` is at
//! least 10% faster.
//!
//! Measured in one process, the two alternating, medians of 9 calls over
//! 6-10 rounds, `i64` indices, each index row a permutation: on a 2-vCPU
//! AMD EPYC family 25 model 17 (Zen 4) VM, int8 rows of 256 (16 MiB) into
//! a buffer took 30.5 ms ahead against 22.8 without on one thread, 15.9
//! against 13.3 on two; float32 rows of 256 were within noise of each
//! other; W6 (float32 rows of 4096, 64 MiB) 34.1 against 36.1 on one
//! thread and 18.4 against 21.9 on two. On W6 the prefetch had measured
//! 1.3-1.4x faster on an AMD EPYC family 25 model 1 (Zen 3), where it was
//! written ([`crate::mem::prefetch::STREAM_AHEAD`]).
//!
//! `ahead` was the default until the last axis got its own loop
//! ([`super::last_axis`]), where asking ahead costs a larger share of each
//! row: the sweep's 16 MiB cells on the same Zen 4 (rows of 256, one
//! thread, forced each way) took 3.2-4.8 ms with `hardware` against
//! 3.0-5.7 ahead, slower ahead in five of six, and with `ahead` kept
//! within 10%, `auto` had kept it in cells 25-35% slower.

use crate::mem::knobs::StreamFetch;
use crate::mem::measured::{CallTiming, Pick, TwoWays};

/// Element sizes: 1 to 16 bytes by powers of two.
const WORD_CLASSES: usize = 5;
/// The kernels' index types: 8, 4 and 2 bytes.
const INDEX_BYTES: [usize; 3] = [8, 4, 2];
/// Index rows of up to 64 elements, then by powers of four up to 16384
/// and beyond.
const ROW_CLASSES: usize = 6;
const MIN_ROW_LOG2: u32 = 6;
/// One task, or several.
const TASK_CLASSES: usize = 2;
const CLASSES: usize = WORD_CLASSES * INDEX_BYTES.len() * ROW_CLASSES * TASK_CLASSES;

/// Outputs from this size on are measured: long enough to time.
const MEASURED_MIN_OUTPUT: usize = 1 << 20;

/// This process's measurements: `hardware` first, `ahead` second, kept
/// only when its best time is 10% lower (two calls of each on a shared
/// machine differ by that much with no change at all: on W6 on two
/// threads, Zen 4, the first two calls of each had `hardware` 8% ahead
/// where, over the next 50, `ahead` was 15% faster).
static MEASURED: TwoWays<CLASSES> = TwoWays::keeping_the_first_within(10);

/// The class of a call: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    word: usize,
    index: usize,
    row: usize,
    split: bool,
}

impl Class {
    fn new(word_bytes: usize, index: usize, row_len: usize, tasks: usize) -> Option<Class> {
        let word = word_bytes.max(1).ilog2() as usize;
        let row_log2 = row_len
            .max(1)
            .checked_next_power_of_two()
            .map_or(usize::BITS - 1, usize::ilog2)
            .max(MIN_ROW_LOG2);
        let row = ((row_log2 - MIN_ROW_LOG2).div_ceil(2) as usize).min(ROW_CLASSES - 1);
        (word_bytes.is_power_of_two() && word < WORD_CLASSES).then_some(Class {
            word,
            index,
            row,
            split: tasks > 1,
        })
    }

    fn slot(self) -> usize {
        ((self.word * INDEX_BYTES.len() + self.index) * ROW_CLASSES + self.row) * TASK_CLASSES
            + usize::from(self.split)
    }

    fn from_slot(slot: usize) -> Class {
        let split = slot % TASK_CLASSES == 1;
        let rest = slot / TASK_CLASSES;
        let (row, rest) = (rest % ROW_CLASSES, rest / ROW_CLASSES);
        Class {
            word: rest / INDEX_BYTES.len(),
            index: rest % INDEX_BYTES.len(),
            row,
            split,
        }
    }

    fn describe(self) -> String {
        let rows = match self.row {
            0 => "rows of up to 64".to_string(),
            r if r == ROW_CLASSES - 1 => {
                format!("rows of over {}", 1 << (MIN_ROW_LOG2 + 2 * r as u32 - 2))
            }
            r => format!("rows of up to {}", 1 << (MIN_ROW_LOG2 + 2 * r as u32)),
        };
        format!(
            "{}-byte elements by {}-byte indices in {rows}, {}",
            1 << self.word,
            INDEX_BYTES[self.index],
            if self.split { "split" } else { "one task" }
        )
    }
}

/// One call's choice: whether the row loop asks for its streams ahead,
/// and its place in its class's measurement.
pub(crate) struct Streams(Pick);

impl Streams {
    /// The choice for a call of `word_bytes` elements by `index_bytes`
    /// indices in index rows of `row_len`, along the last axis or not,
    /// writing `out_bytes` on `tasks` tasks: forced by `knob`, or under
    /// `auto` measured for the call's class along the last axis (`ahead`
    /// elsewhere, for small outputs, and under Miri, which cannot time).
    pub(crate) fn choose(
        knob: StreamFetch,
        (word_bytes, index_bytes): (usize, usize),
        (row_len, along_last): (usize, bool),
        out_bytes: usize,
        tasks: usize,
    ) -> Streams {
        let index = INDEX_BYTES.iter().position(|&b| b == index_bytes);
        let class = index.and_then(|index| Class::new(word_bytes, index, row_len, tasks));
        let measured = along_last && out_bytes >= MEASURED_MIN_OUTPUT && !cfg!(miri);
        match (knob, class) {
            (StreamFetch::Auto, Some(class)) if measured => {
                Streams(Pick::measured(&MEASURED, class.slot(), true, || true))
            }
            (knob, _) => Streams(Pick::fixed(knob != StreamFetch::Hardware)),
        }
    }

    /// The row loop prefetches the index and update streams.
    pub(crate) fn ahead(&self) -> bool {
        self.0.second
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(crate) fn done(self, out_bytes: usize) {
        self.0.done(out_bytes);
    }
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let describe = |slot| Class::from_slot(slot).describe();
    MEASURED.report("stream_fetch", ["hardware", "ahead"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_measures_last_axis_calls_from_1_mib_and_the_knob_forces_either_way() {
        let call = Streams::choose(StreamFetch::Auto, (1, 8), (256, true), 16 << 20, 1);
        match call.0.timed_slot().map(Class::from_slot) {
            Some(class) => {
                assert_eq!(
                    class.describe(),
                    "1-byte elements by 8-byte indices in rows of up to 256, one task"
                );
                assert!(!call.ahead(), "hardware is timed first");
            }
            // Miri's clock is virtual: nothing is measured there.
            None => assert!(cfg!(miri) && call.ahead()),
        }
        for unmeasured in [
            Streams::choose(StreamFetch::Auto, (4, 8), (256, false), 16 << 20, 1),
            Streams::choose(StreamFetch::Auto, (4, 8), (256, true), 1 << 10, 1),
            Streams::choose(StreamFetch::Auto, (3, 8), (256, true), 16 << 20, 1),
            Streams::choose(StreamFetch::Auto, (4, 1), (256, true), 16 << 20, 1),
            Streams::choose(StreamFetch::Ahead, (4, 8), (256, true), 16 << 20, 1),
        ] {
            assert!(unmeasured.ahead() && !unmeasured.0.is_timed());
        }
        let forced = Streams::choose(StreamFetch::Hardware, (4, 4), (4096, true), 64 << 20, 2);
        assert!(!forced.ahead() && !forced.0.is_timed());
    }

    #[test]
    fn classes_round_trip_through_their_slots_and_name_their_rows() {
        for slot in 0..CLASSES {
            assert_eq!(Class::from_slot(slot).slot(), slot);
        }
        let row = |len| Class::new(4, 0, len, 1).unwrap().describe();
        assert!(row(1).contains("rows of up to 64"), "{}", row(1));
        assert!(row(65).contains("rows of up to 256"), "{}", row(65));
        assert!(row(4096).contains("rows of up to 4096"), "{}", row(4096));
        assert!(
            row(1 << 20).contains("rows of over 16384"),
            "{}",
            row(1 << 20)
        );
        assert_eq!(Class::new(32, 0, 8, 1), None);
    }

    /// A class with its verdict is not timed again.
    #[test]
    fn a_class_with_its_verdict_is_no_longer_timed() {
        let call = || Streams::choose(StreamFetch::Auto, (8, 2), (1 << 20, true), 4 << 20, 2);
        let mut ways = [0; 2];
        for _ in 0..crate::mem::measured::CALLS_TO_SETTLE {
            let streams = call();
            assert_eq!(streams.0.is_timed(), !cfg!(miri));
            ways[usize::from(streams.ahead())] += 1;
            streams.done(4 << 20);
        }
        assert!(!call().0.is_timed());
        if !cfg!(miri) {
            let each = crate::mem::measured::CALLS_EACH;
            assert_eq!(ways, [each, each], "each way timed in a run of its own");
        }
    }
}
