//! Which order Gather copies rows in where neither is known to win:
//! decided by timing the calls themselves ([`crate::mem::measured`]).
//!
//! Whether random rows of a source come from the cache or from memory
//! depends on how much of the last-level cache a process really gets,
//! which the size the CPU reports does not tell: on a 2-vCPU slice of an
//! AMD EPYC family 25 model 1 whose 32 MiB L3 is shared with other
//! guests, rows of 512 bytes read at random from an 8 MiB source took
//! 7.5-8.5 ms per 32 MiB copied against 1.8-2.1 ms sorted by address (a
//! C probe), and W8 (a 32 MiB source) ran 9.4 ms in output order against
//! 6.2 in source order, where on the family 26 model 2 that the fixed
//! rule came from (the source past 1.5x the L3) the same source stayed in
//! cache and output order won.
//!
//! So for copies in the uncertain range (see [`super::blocks`]) each
//! class of call (source size and block size by powers of two, one task
//! or several) is timed in output order, then source order, twice each,
//! and keeps the faster.

use crate::mem::measured::{CallTiming, TwoWays};

/// Source size classes: `2^MIN_SOURCE_LOG2` bytes and up, the last class
/// holding everything larger.
const MIN_SOURCE_LOG2: u32 = 20;
const SOURCE_CLASSES: usize = 14;
/// Block size classes: 256 bytes (source order's shortest block) and up.
const MIN_BLOCK_LOG2: u32 = 8;
const BLOCK_CLASSES: usize = 10;
/// One task, or several.
const TASK_CLASSES: usize = 2;
const CLASSES: usize = SOURCE_CLASSES * BLOCK_CLASSES * TASK_CLASSES;

/// This process's measurements: output order first, source order second.
static MEASURED: TwoWays<CLASSES> = TwoWays::new();

/// The class of a copy: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Class {
    source_log2: u32,
    block_log2: u32,
    split: bool,
}

impl Class {
    /// The class of a copy from a source of `src_len` bytes in blocks of
    /// `block_len`, on `tasks` tasks.
    pub(crate) fn of(src_len: usize, block_len: usize, tasks: usize) -> Class {
        let log2 = |n: usize, min: u32, classes: usize| {
            n.max(1).ilog2().clamp(min, min + classes as u32 - 1)
        };
        Class {
            source_log2: log2(src_len, MIN_SOURCE_LOG2, SOURCE_CLASSES),
            block_log2: log2(block_len, MIN_BLOCK_LOG2, BLOCK_CLASSES),
            split: tasks > 1,
        }
    }

    fn slot(self) -> usize {
        let source = (self.source_log2 - MIN_SOURCE_LOG2) as usize;
        let block = (self.block_log2 - MIN_BLOCK_LOG2) as usize;
        (source * BLOCK_CLASSES + block) * TASK_CLASSES + usize::from(self.split)
    }

    fn from_slot(slot: usize) -> Class {
        let rest = slot / TASK_CLASSES;
        Class {
            source_log2: MIN_SOURCE_LOG2 + (rest / BLOCK_CLASSES) as u32,
            block_log2: MIN_BLOCK_LOG2 + (rest % BLOCK_CLASSES) as u32,
            split: slot % TASK_CLASSES == 1,
        }
    }

    /// How the report names the class: `32 MiB sources by 512 B rows,
    /// one task`.
    fn describe(self) -> String {
        format!(
            "{} MiB sources by {} B rows, {}",
            1u64 << (self.source_log2 - 20),
            1u64 << self.block_log2,
            if self.split { "split" } else { "one task" }
        )
    }
}

/// Whether the next copy of `class` reads in source order.
pub(crate) fn source_order(class: Class) -> bool {
    MEASURED.second(class.slot())
}

/// Note the time a copy of `class` took to write `bytes`.
pub(crate) fn record(class: Class, source_order: bool, bytes: usize, elapsed: std::time::Duration) {
    MEASURED.record(class.slot(), source_order, bytes, elapsed);
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let describe = |slot| Class::from_slot(slot).describe();
    MEASURED.report("block_order", ["output", "source"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_of_source_and_block_and_whether_the_copy_is_split() {
        let w8 = Class::of(32 << 20, 512, 1);
        assert_eq!((w8.source_log2, w8.block_log2, w8.split), (25, 9, false));
        assert_eq!(w8.describe(), "32 MiB sources by 512 B rows, one task");
        assert_eq!(Class::of((64 << 20) - 1, 1023, 2).source_log2, 25);
        assert!(Class::of(64 << 20, 1024, 2).split);
        // Past either end, the end class.
        let tiny = Class::of(0, 0, 0);
        assert_eq!((tiny.source_log2, tiny.block_log2), (20, 8));
        let huge = Class::of(usize::MAX, usize::MAX, 64);
        assert_eq!((huge.source_log2, huge.block_log2), (33, 17));
        for slot in 0..CLASSES {
            assert_eq!(Class::from_slot(slot).slot(), slot);
        }
    }
}
