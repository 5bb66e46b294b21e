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
//! So for copies in the uncertain range (see [`super`]) each
//! class of call (source size and block size by powers of two, one task
//! or several, rows on cache-line boundaries or not) is timed in output
//! order, then source order, three calls each in a row (the first of each
//! uncounted), and keeps the faster.
//!
//! Where the rows sit against the cache lines is part of the class
//! because source order writes rows at random: a row that does not start
//! on a line boundary begins and ends in lines it shares with rows
//! written at other times, and each such partial line leaves the CPU's
//! write-combining buffer as a partial write. On an Intel Xeon family 6
//! model 167 (2 vCPUs, `gsx-bench` on W8, float16 rows of 512 B from a
//! 32 MiB source, streaming stores, one thread), source order took
//! 2.56-2.74 ms into an output on a 64-byte boundary and 3.68-3.84 into
//! one 16 or 48 bytes past it, where output order took 2.94-3.06 in both
//! (a C loop of the same stores: 2.4 ms in random row order aligned,
//! 3.3-3.5 at every other offset, 2.4 in sequence at every offset). A
//! fresh output and the one before it, alternating, may sit differently:
//! timed in one class, source order's best time came from the aligned
//! one and the verdict held for both.

use crate::mem::measured::{CallTiming, Log2Classes, SizeClasses, TwoWays};

/// Classes by source size (1 MiB and up, the last class holding
/// everything larger) and block size (256 bytes, source order's shortest
/// block, and up), one task or several.
const CLASSES: SizeClasses = SizeClasses {
    first: Log2Classes {
        min_log2: 20,
        classes: 14,
    },
    second: Log2Classes {
        min_log2: 8,
        classes: 10,
    },
};

/// Slots per size class: rows on line boundaries, and not.
const ALIGNMENTS: usize = 2;

/// This process's measurements: output order first, source order second.
static MEASURED: TwoWays<{ CLASSES.len() * ALIGNMENTS }> = TwoWays::new();

/// The class of a copy: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Class {
    slot: usize,
}

impl Class {
    /// The class of a copy from a source of `src_len` bytes in blocks of
    /// `block_len`, on `tasks` tasks, into rows that all start on a cache
    /// line boundary or not.
    pub(crate) fn of(src_len: usize, block_len: usize, tasks: usize, rows_on_lines: bool) -> Class {
        Class {
            slot: CLASSES.slot(src_len, block_len, tasks) * ALIGNMENTS
                + usize::from(!rows_on_lines),
        }
    }
}

/// How the report names the class in `slot`: `32 MiB sources by 512 B
/// rows, one task, on lines`.
fn describe(slot: usize) -> String {
    let (source, block, split) = CLASSES.sizes(slot / ALIGNMENTS);
    format!(
        "{} MiB sources by {block} B rows, {}, {}",
        source >> 20,
        if split { "split" } else { "one task" },
        if slot.is_multiple_of(ALIGNMENTS) {
            "on lines"
        } else {
            "across lines"
        }
    )
}

/// Whether the next copy of `class` reads in source order.
pub(crate) fn source_order(class: Class) -> bool {
    MEASURED.second(class.slot)
}

/// Whether `class` is done measuring: its order is fixed.
pub(crate) fn settled(class: Class) -> bool {
    MEASURED.settled(class.slot)
}

/// How many calls of `class` each order has had timed so far.
#[cfg(test)]
pub(crate) fn calls(class: Class) -> [u32; 2] {
    let timed = MEASURED.timed();
    let timings = timed.into_iter().find(|t| t.slot == class.slot);
    timings.map_or([0, 0], |t| t.calls)
}

/// Note the time a copy of `class` took to write `bytes`.
pub(crate) fn record(class: Class, source_order: bool, bytes: usize, elapsed: std::time::Duration) {
    MEASURED.record(class.slot, source_order, bytes, elapsed);
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    MEASURED.report("block_order", ["output", "source"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_named_by_source_and_block_size_whether_the_copy_is_split_and_where_rows_sit() {
        assert_eq!(
            describe(Class::of(32 << 20, 512, 1, true).slot),
            "32 MiB sources by 512 B rows, one task, on lines"
        );
        assert_eq!(
            describe(Class::of(3 << 20, 300, 2, false).slot),
            "2 MiB sources by 256 B rows, split, across lines"
        );
        assert_ne!(
            Class::of(32 << 20, 512, 1, true),
            Class::of(32 << 20, 512, 1, false)
        );
    }
}
