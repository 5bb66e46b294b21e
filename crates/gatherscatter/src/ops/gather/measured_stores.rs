//! Which stores Gather writes long blocks with where the fixed rule cannot
//! tell: decided by timing the calls themselves ([`crate::mem::measured`]).
//!
//! Under `stores=auto` an output past a quarter of the last-level cache is
//! written with streaming stores, except blocks of 16 KiB or more whose
//! source and output fit in that cache together: on the Zen 5 (family 26
//! model 2) where that rule was measured, a repeated call there read its
//! source from cache and left its output there, and ordinary stores won
//! (16 MiB from 16 MiB in 64 KiB blocks: 0.43 ms against 0.49 streamed).
//! Whether they stay in cache depends on how much of a shared cache the
//! process really gets, which the size the CPU reports does not tell: on a
//! 2-vCPU slice of an AMD EPYC family 25 model 1 (Zen 3) with the same
//! 32 MiB L3, the same copy took 2.1-2.3 ms with ordinary stores and
//! 1.3-1.5 streamed, one thread, fresh outputs and into a buffer alike
//! (numpy's `take` 2.1, a plain `copy` 2.3).
//!
//! So for those copies each class of call (output size and block size by
//! powers of two, one task or several) is timed with ordinary stores, then
//! streaming ones, twice each, and keeps the faster.

use std::time::Instant;

use crate::mem::measured::{CallTiming, TwoWays};

/// Output size classes: 1 MiB and up, the last class holding everything
/// larger.
const MIN_OUTPUT_LOG2: u32 = 20;
const OUTPUT_CLASSES: usize = 12;
/// Block size classes: 16 KiB (the rule's shortest cached block) and up.
const MIN_BLOCK_LOG2: u32 = 14;
const BLOCK_CLASSES: usize = 8;
/// One task, or several.
const TASK_CLASSES: usize = 2;
const CLASSES: usize = OUTPUT_CLASSES * BLOCK_CLASSES * TASK_CLASSES;

/// This process's measurements: ordinary stores first, streaming second.
static MEASURED: TwoWays<CLASSES> = TwoWays::new();

/// The class of a copy: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Class {
    output_log2: u32,
    block_log2: u32,
    split: bool,
}

impl Class {
    /// The class of a copy of `out_len` bytes in blocks of `block_len`, on
    /// `tasks` tasks.
    pub(super) fn of(out_len: usize, block_len: usize, tasks: usize) -> Class {
        let log2 = |n: usize, min: u32, classes: usize| {
            n.max(1).ilog2().clamp(min, min + classes as u32 - 1)
        };
        Class {
            output_log2: log2(out_len, MIN_OUTPUT_LOG2, OUTPUT_CLASSES),
            block_log2: log2(block_len, MIN_BLOCK_LOG2, BLOCK_CLASSES),
            split: tasks > 1,
        }
    }

    fn slot(self) -> usize {
        let output = (self.output_log2 - MIN_OUTPUT_LOG2) as usize;
        let block = (self.block_log2 - MIN_BLOCK_LOG2) as usize;
        (output * BLOCK_CLASSES + block) * TASK_CLASSES + usize::from(self.split)
    }

    fn from_slot(slot: usize) -> Class {
        let rest = slot / TASK_CLASSES;
        Class {
            output_log2: MIN_OUTPUT_LOG2 + (rest / BLOCK_CLASSES) as u32,
            block_log2: MIN_BLOCK_LOG2 + (rest % BLOCK_CLASSES) as u32,
            split: slot % TASK_CLASSES == 1,
        }
    }

    /// How the report names the class: `16 MiB outputs by 64 KiB blocks,
    /// one task`.
    fn describe(self) -> String {
        format!(
            "{} MiB outputs by {} KiB blocks, {}",
            1u64 << (self.output_log2 - 20),
            1u64 << (self.block_log2 - 10),
            if self.split { "split" } else { "one task" }
        )
    }
}

/// One measured call: its class, the stores it takes and when it started.
pub(super) struct Timed {
    class: Class,
    pub(super) streaming: bool,
    started: Instant,
}

impl Timed {
    /// Start a call of `class`, with the stores its class takes next.
    pub(super) fn start(class: Class) -> Timed {
        Timed {
            class,
            streaming: MEASURED.second(class.slot()),
            started: Instant::now(),
        }
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(super) fn done(self, out_bytes: usize) {
        let elapsed = self.started.elapsed();
        MEASURED.record(self.class.slot(), self.streaming, out_bytes, elapsed);
    }
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let describe = |slot| Class::from_slot(slot).describe();
    MEASURED.report("stores", ["cached", "streaming"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_of_output_and_block_and_whether_the_copy_is_split() {
        let first_axis = Class::of(16 << 20, 64 << 10, 1);
        assert_eq!(
            first_axis.describe(),
            "16 MiB outputs by 64 KiB blocks, one task"
        );
        assert_eq!(Class::of((32 << 20) - 1, (32 << 10) - 1, 2).output_log2, 24);
        assert!(Class::of(16 << 20, 16 << 10, 2).split);
        // Past either end, the end class.
        let tiny = Class::of(0, 0, 0);
        assert_eq!((tiny.output_log2, tiny.block_log2), (20, 14));
        let huge = Class::of(usize::MAX, usize::MAX, 64);
        assert_eq!((huge.output_log2, huge.block_log2), (31, 21));
        for slot in 0..CLASSES {
            assert_eq!(Class::from_slot(slot).slot(), slot);
        }
    }
}
