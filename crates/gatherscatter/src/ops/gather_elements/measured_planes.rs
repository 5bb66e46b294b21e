//! How GatherElements along an outer axis reads a data plane (the axis
//! times the dims after it) that its output rows share: a tile of columns
//! at a time copied into a packed strip first (`packed`), or gathered where
//! it lies, the next plane asked for a piece per row (`in_place`). Which is
//! faster depends on the core's L1 and L2 and on the word size, so `auto`
//! times the calls themselves ([`crate::mem::measured`]) where both are
//! plausible: planes up to the size of L2.
//!
//! On a 2-vCPU Intel Xeon family 6 model 167 (48 KiB L1d, 2 MiB L2), 16 MiB
//! outputs along the middle axis of 256 from 64 KiB planes, from Python,
//! two processes each way, one / two threads: float32 packed in L1 strips
//! of 32 columns 4.21-4.25 / 2.24 ms, in place 2.59-2.77 / 1.36-1.38; int8
//! 19.1-20.8 / 8.1-8.6 against 15.0-15.7 / 8.3-10.0; float16 7.05-7.33 /
//! 3.56-3.61 against 7.19-9.72 / 3.20-3.43. No size rule gets all three.

use crate::mem::cpu;
use crate::mem::knobs::PlaneReads;
use crate::mem::measured::{CallTiming, Pick, TwoWays};

/// Word sizes 1 to 16 bytes, by powers of two.
const WORD_CLASSES: usize = 5;
/// Plane sizes from 32 KiB (smaller planes are never packed) by powers of
/// two, the last class holding every larger one.
const MIN_PLANE_LOG2: u32 = 15;
const PLANE_CLASSES: usize = 8;
/// Index types of 1 to 8 bytes, by powers of two.
const INDEX_CLASSES: usize = 4;
/// One task, or several.
const TASK_CLASSES: usize = 2;
const CLASSES: usize = WORD_CLASSES * PLANE_CLASSES * INDEX_CLASSES * TASK_CLASSES;

/// Outputs from this size on are measured: long enough to time.
const MEASURED_MIN_OUTPUT: usize = 1 << 20;

/// This process's measurements: `packed` first, `in_place` second.
static MEASURED: TwoWays<CLASSES> = TwoWays::new();

/// The class of a call: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    word_log2: u32,
    plane_log2: u32,
    index_log2: u32,
    split: bool,
}

impl Class {
    /// The class of words, planes and indices of these sizes in bytes, if
    /// the words and indices are 1 to 16 and 1 to 8 bytes.
    fn of(word: usize, plane: usize, index: usize, split: bool) -> Option<Class> {
        let log2 = |n: usize, classes: usize| {
            (n.is_power_of_two() && n.ilog2() < classes as u32).then(|| n.ilog2())
        };
        let top = MIN_PLANE_LOG2 + PLANE_CLASSES as u32 - 1;
        Some(Class {
            word_log2: log2(word, WORD_CLASSES)?,
            plane_log2: plane.max(1).ilog2().clamp(MIN_PLANE_LOG2, top),
            index_log2: log2(index, INDEX_CLASSES)?,
            split,
        })
    }

    fn slot(self) -> usize {
        let plane = (self.plane_log2 - MIN_PLANE_LOG2) as usize;
        let slot = self.word_log2 as usize;
        let slot = slot * PLANE_CLASSES + plane;
        let slot = slot * INDEX_CLASSES + self.index_log2 as usize;
        slot * TASK_CLASSES + usize::from(self.split)
    }

    fn from_slot(slot: usize) -> Class {
        let split = slot % TASK_CLASSES == 1;
        let rest = slot / TASK_CLASSES;
        let index_log2 = (rest % INDEX_CLASSES) as u32;
        let rest = rest / INDEX_CLASSES;
        Class {
            word_log2: (rest / PLANE_CLASSES) as u32,
            plane_log2: MIN_PLANE_LOG2 + (rest % PLANE_CLASSES) as u32,
            index_log2,
            split,
        }
    }

    fn describe(self) -> String {
        format!(
            "{}-byte words, {} KiB planes by {}-byte indices, {}",
            1u32 << self.word_log2,
            1u64 << (self.plane_log2 - 10),
            1u32 << self.index_log2,
            if self.split { "split" } else { "one task" }
        )
    }
}

/// One call's choice: whether the planes are read in place, and its
/// place in its class's measurement.
pub(super) struct PlaneRead(Pick);

impl PlaneRead {
    /// The choice for a call whose planes could be packed or read in
    /// place: forced by `knob`, or under `auto` measured for the call's
    /// class (`word`, `plane` and `index` sizes in bytes, `tasks`) when its
    /// plane fits in L2 and it writes `out_bytes` of 1 MiB or more, timed
    /// only when `may_time` (not while the call's word loop is timed);
    /// otherwise, and under Miri, which cannot time, `by_size`.
    pub(super) fn choose(
        knob: PlaneReads,
        by_size: bool,
        may_time: bool,
        (word, plane, index): (usize, usize, usize),
        out_bytes: usize,
        tasks: usize,
    ) -> PlaneRead {
        let fixed = |in_place| PlaneRead(Pick::fixed(in_place));
        match knob {
            PlaneReads::Packed => return fixed(false),
            PlaneReads::InPlace => return fixed(true),
            _ => {}
        }
        let measured =
            out_bytes >= MEASURED_MIN_OUTPUT && plane <= cpu::core_caches().level2 && !cfg!(miri);
        let Some(class) = Class::of(word, plane, index, tasks > 1).filter(|_| measured) else {
            return fixed(by_size);
        };
        PlaneRead(Pick::measured(&MEASURED, class.slot(), may_time, || {
            by_size
        }))
    }

    /// Whether the planes are read in place rather than packed.
    pub(super) fn in_place(&self) -> bool {
        self.0.second
    }

    /// Whether this call's time joins a measurement.
    pub(super) fn timed(&self) -> bool {
        self.0.is_timed()
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(super) fn done(self, out_bytes: usize) {
        self.0.done(out_bytes);
    }
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let describe = |slot| Class::from_slot(slot).describe();
    MEASURED.report("plane_reads", ["packed", "in_place"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLANE: usize = 64 << 10;

    #[test]
    fn auto_measures_planes_up_to_l2_and_the_knob_forces_either_way() {
        let call = |knob, by_size, plane, out| {
            PlaneRead::choose(knob, by_size, true, (4, plane, 8), out, 1)
        };
        let measured = call(PlaneReads::Auto, true, PLANE, 16 << 20);
        // Miri's clock is virtual: nothing is measured there.
        match measured.0.timed_slot().map(Class::from_slot) {
            Some(class) => {
                assert_eq!(
                    class.describe(),
                    "4-byte words, 64 KiB planes by 8-byte indices, one task"
                );
                assert!(!measured.in_place(), "packed is timed first");
            }
            None => assert!(
                cfg!(miri) && measured.in_place(),
                "the size rule under Miri"
            ),
        }
        // Outside the measured range, the size rule either way.
        let beyond_l2 = 2 * cpu::core_caches().level2;
        for by_size in [false, true] {
            for unmeasured in [
                call(PlaneReads::Auto, by_size, beyond_l2, 16 << 20),
                call(PlaneReads::Auto, by_size, PLANE, 1 << 10),
                PlaneRead::choose(PlaneReads::Auto, by_size, true, (24, PLANE, 8), 16 << 20, 1),
                PlaneRead::choose(PlaneReads::Auto, by_size, false, (2, PLANE, 4), 16 << 20, 2),
            ] {
                assert_eq!(unmeasured.in_place(), by_size);
                assert!(!unmeasured.timed());
            }
        }
        for (knob, in_place) in [(PlaneReads::Packed, false), (PlaneReads::InPlace, true)] {
            let forced = call(knob, !in_place, PLANE, 16 << 20);
            assert!(forced.in_place() == in_place && !forced.timed());
        }
        for slot in 0..CLASSES {
            assert_eq!(Class::from_slot(slot).slot(), slot);
        }
    }

    /// A class with its verdict is not timed again.
    #[test]
    fn a_class_with_its_verdict_is_no_longer_timed() {
        let call = || PlaneRead::choose(PlaneReads::Auto, false, true, (1, PLANE, 2), 4 << 20, 2);
        for _ in 0..crate::mem::measured::CALLS_TO_SETTLE {
            let planes = call();
            assert_eq!(planes.timed(), !cfg!(miri));
            planes.done(4 << 20);
        }
        assert!(!call().timed());
    }
}
