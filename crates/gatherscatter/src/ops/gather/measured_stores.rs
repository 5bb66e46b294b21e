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

use crate::mem::measured::{CallTiming, Log2Classes, SizeClasses, TwoWays};

/// Classes by output size (1 MiB and up, the last class holding
/// everything larger) and block size (16 KiB, the rule's shortest cached
/// block, and up), one task or several.
const CLASSES: SizeClasses = SizeClasses {
    first: Log2Classes {
        min_log2: 20,
        classes: 12,
    },
    second: Log2Classes {
        min_log2: 14,
        classes: 8,
    },
};

/// This process's measurements: ordinary stores first, streaming second.
static MEASURED: TwoWays<{ CLASSES.len() }> = TwoWays::new();

/// The class of a copy: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Class {
    slot: usize,
}

impl Class {
    /// The class of a copy of `out_len` bytes in blocks of `block_len`, on
    /// `tasks` tasks.
    pub(super) fn of(out_len: usize, block_len: usize, tasks: usize) -> Class {
        Class {
            slot: CLASSES.slot(out_len, block_len, tasks),
        }
    }
}

/// How the report names the class in `slot`: `16 MiB outputs by 64 KiB
/// blocks, one task`.
fn describe(slot: usize) -> String {
    let (output, block, split) = CLASSES.sizes(slot);
    format!(
        "{} MiB outputs by {} KiB blocks, {}",
        output >> 20,
        block >> 10,
        if split { "split" } else { "one task" }
    )
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
            streaming: MEASURED.second(class.slot),
            started: Instant::now(),
        }
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(super) fn done(self, out_bytes: usize) {
        let elapsed = self.started.elapsed();
        MEASURED.record(self.class.slot, self.streaming, out_bytes, elapsed);
    }
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    MEASURED.report("stores", ["cached", "streaming"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_named_by_output_and_block_size_and_whether_the_copy_is_split() {
        let first_axis = Class::of(16 << 20, 64 << 10, 1);
        assert_eq!(
            describe(first_axis.slot),
            "16 MiB outputs by 64 KiB blocks, one task"
        );
        let odd = Class::of((32 << 20) - 1, (32 << 10) - 1, 2);
        assert_eq!(describe(odd.slot), "16 MiB outputs by 16 KiB blocks, split");
    }
}
