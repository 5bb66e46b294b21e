//! Whether GatherElements along an outer axis asks for its indices ahead
//! in software (`ahead`, [`crate::mem::prefetch::prefetch_indices_ahead`])
//! or leaves that stream to the hardware prefetchers (`hardware`), the
//! `stream_fetch` knob's choice for this op. The same request is worth
//! 1.4x on one CPU and costs 1.6x on another, so `auto` times the calls
//! themselves ([`crate::mem::measured`]).
//!
//! 16 MiB outputs along the middle axis of 256, 64 KiB planes, `i64`
//! indices, one thread. On a 2-vCPU AMD EPYC family 25 model 17 (Zen 4),
//! where the request was written (7b871b90), from Python, before and
//! after: int8 20.9 -> 14.9 ms, float16 10.9 -> 7.7, float32 5.7 -> 4.3.
//! On a 2-vCPU AMD EPYC family 25 model 1 (Zen 3), `gsx-bench` of the
//! commits before and after alternating, medians of 15 in two rounds:
//! float16 15.8 / 18.3 -> 25.0 / 26.1 ms, int8 38.2 / 39.2 -> 45.6 / 43.5,
//! float32 9.5 / 11.9 -> 10.9 / 14.2, and on two threads slower as well;
//! there the scalar loop's time a byte, in the tuning report, went from
//! 879 to 1422 ps.

use crate::mem::knobs::StreamFetch;
use crate::mem::measured::{CallTiming, Pick, TwoWays};

/// Word sizes 1 to 16 bytes, by powers of two.
const WORD_CLASSES: usize = 5;
/// Index types of 1 to 8 bytes, by powers of two.
const INDEX_CLASSES: usize = 4;
/// Planes read in place, or from packed strips.
const READ_CLASSES: usize = 2;
/// One task, or several.
const TASK_CLASSES: usize = 2;
const CLASSES: usize = WORD_CLASSES * INDEX_CLASSES * READ_CLASSES * TASK_CLASSES;

/// Outputs from this size on are measured: long enough to time.
const MEASURED_MIN_OUTPUT: usize = 1 << 20;

/// This process's measurements: `hardware` first, `ahead` second.
static MEASURED: TwoWays<CLASSES> = TwoWays::new();

/// The class of a call: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    word_log2: u32,
    index_log2: u32,
    in_place: bool,
    split: bool,
}

impl Class {
    fn of(word: usize, index: usize, in_place: bool, split: bool) -> Option<Class> {
        let sized = |bytes: usize, classes: usize| {
            (bytes.is_power_of_two() && bytes.ilog2() < classes as u32).then(|| bytes.ilog2())
        };
        Some(Class {
            word_log2: sized(word, WORD_CLASSES)?,
            index_log2: sized(index, INDEX_CLASSES)?,
            in_place,
            split,
        })
    }

    fn slot(self) -> usize {
        let slot = self.word_log2 as usize * INDEX_CLASSES + self.index_log2 as usize;
        let slot = slot * READ_CLASSES + usize::from(self.in_place);
        slot * TASK_CLASSES + usize::from(self.split)
    }

    fn from_slot(slot: usize) -> Class {
        let split = slot % TASK_CLASSES == 1;
        let rest = slot / TASK_CLASSES;
        let in_place = rest % READ_CLASSES == 1;
        let rest = rest / READ_CLASSES;
        Class {
            word_log2: (rest / INDEX_CLASSES) as u32,
            index_log2: (rest % INDEX_CLASSES) as u32,
            in_place,
            split,
        }
    }

    fn describe(self) -> String {
        format!(
            "GatherElements along an outer axis, {}-byte words by {}-byte indices, {}, {}",
            1u32 << self.word_log2,
            1u32 << self.index_log2,
            if self.in_place {
                "planes in place"
            } else {
                "packed strips"
            },
            if self.split { "split" } else { "one task" }
        )
    }
}

/// One call's choice: whether the outer-axis loops ask for their indices
/// ahead, and its place in its class's measurement.
pub(super) struct IndexFetch(Pick);

impl IndexFetch {
    /// The choice for a call of `word`-byte elements by `index`-byte
    /// indices whose planes are read `in_place` or packed, on `tasks`
    /// tasks, writing `out_bytes`: forced by `knob`, or under `auto`
    /// measured for the call's class from 1 MiB, timed only when
    /// `may_time` (not while another of the call's strategies is);
    /// otherwise, and under Miri, which cannot time, `ahead`.
    pub(super) fn choose(
        knob: StreamFetch,
        may_time: bool,
        (word, index, in_place): (usize, usize, bool),
        out_bytes: usize,
        tasks: usize,
    ) -> IndexFetch {
        let measured = out_bytes >= MEASURED_MIN_OUTPUT && !cfg!(miri);
        let class = Class::of(word, index, in_place, tasks > 1).filter(|_| measured);
        match (knob, class) {
            (StreamFetch::Auto, Some(class)) => {
                IndexFetch(Pick::measured(&MEASURED, class.slot(), may_time, || true))
            }
            (knob, _) => IndexFetch(Pick::fixed(knob != StreamFetch::Hardware)),
        }
    }

    /// The loops ask for the indices they read next.
    pub(super) fn ahead(&self) -> bool {
        self.0.second
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(super) fn done(self, out_bytes: usize) {
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
    fn classes_round_trip_through_their_slots() {
        for slot in 0..CLASSES {
            assert_eq!(Class::from_slot(slot).slot(), slot);
        }
        assert_eq!(Class::of(24, 8, true, false), None);
        assert_eq!(Class::of(4, 16, true, false), None);
        assert_eq!(
            Class::of(2, 8, true, true).unwrap().describe(),
            "GatherElements along an outer axis, 2-byte words by 8-byte indices, \
             planes in place, split"
        );
    }

    #[test]
    fn auto_measures_from_1_mib_and_the_knob_forces_either_way() {
        let call = IndexFetch::choose(StreamFetch::Auto, true, (2, 8, true), 16 << 20, 1);
        match call.0.timed_slot() {
            Some(_) => assert!(!call.ahead(), "hardware is timed first"),
            // Miri's clock is virtual: nothing is measured there.
            None => assert!(cfg!(miri) && call.ahead()),
        }
        for unmeasured in [
            IndexFetch::choose(StreamFetch::Auto, true, (4, 8, false), 1 << 10, 1),
            IndexFetch::choose(StreamFetch::Auto, true, (12, 8, false), 16 << 20, 1),
            IndexFetch::choose(StreamFetch::Ahead, true, (4, 8, false), 16 << 20, 1),
        ] {
            assert!(unmeasured.ahead() && !unmeasured.0.is_timed());
        }
        let forced = IndexFetch::choose(StreamFetch::Hardware, true, (1, 2, true), 64 << 20, 2);
        assert!(!forced.ahead() && !forced.0.is_timed());
    }

    /// A class with its verdict is not timed again, and a call that may
    /// not time takes `ahead` until there is one.
    #[test]
    fn a_class_with_its_verdict_is_no_longer_timed() {
        let call =
            |may_time| IndexFetch::choose(StreamFetch::Auto, may_time, (16, 2, false), 4 << 20, 2);
        let waiting = call(false);
        assert!(waiting.ahead() && !waiting.0.is_timed());
        let mut ways = [0; 2];
        for _ in 0..crate::mem::measured::CALLS_TO_SETTLE {
            let fetch = call(true);
            assert_eq!(fetch.0.is_timed(), !cfg!(miri));
            ways[usize::from(fetch.ahead())] += 1;
            fetch.done(4 << 20);
        }
        assert!(!call(true).0.is_timed());
        if !cfg!(miri) {
            let each = crate::mem::measured::CALLS_EACH;
            assert_eq!(ways, [each, each], "each way timed in a run of its own");
        }
    }
}
