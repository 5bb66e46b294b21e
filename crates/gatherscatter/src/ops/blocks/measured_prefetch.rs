//! Where Gather's streamed row copies ask for their rows ahead, L1 or L2,
//! where neither is known to win: decided by timing the calls themselves
//! ([`crate::mem::measured`]).
//!
//! The rule before (L2 only in output order from sources past 1.5x the
//! last-level cache) came from a family 26 model 2 with a 32 MiB L3. On a
//! family 25 model 17 with the same L3 (2026-12-02, `gsx-bench`, rounds
//! of the two levels alternating, medians of 9 calls, one thread), L2 won
//! on every shape tried, in both orders: W8 (float16 rows of 512 B, a
//! 32 MiB source, source order) 4.98 -> 4.15 ms fresh, W1 (float32 rows
//! of 1 KiB, 64 MiB, source order) 8.36 -> 6.07, rows of 4 KiB from
//! 32 MiB 3.32 -> 1.88, rows of 512 B from 24 MiB 4.37 -> 2.95.
//!
//! So each class of copy (source size and row size by powers of two, one
//! task or several, and the row order, as each order has its own table)
//! is timed with L1 prefetches, then L2, three calls each in a row (the first of each uncounted), and keeps the faster.

use crate::mem::measured::{CallTiming, Log2Classes, SizeClasses, TwoWays};

/// Classes by source size (1 MiB and up, the last class holding
/// everything larger) and row size (64 bytes, the shortest streamed row,
/// and up), one task or several.
const CLASSES: SizeClasses = SizeClasses {
    first: Log2Classes {
        min_log2: 20,
        classes: 14,
    },
    second: Log2Classes {
        min_log2: 6,
        classes: 12,
    },
};

/// This process's measurements in output order and in source order: L1
/// first, L2 second.
static IN_OUTPUT_ORDER: TwoWays<{ CLASSES.len() }> = TwoWays::new();
static IN_SOURCE_ORDER: TwoWays<{ CLASSES.len() }> = TwoWays::new();

/// The class of a copy: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Class {
    slot: usize,
    in_source_order: bool,
}

impl Class {
    /// The class of a copy from a source of `src_len` bytes in rows of
    /// `block_len`, on `tasks` tasks, in source order or not.
    pub(crate) fn of(
        src_len: usize,
        block_len: usize,
        tasks: usize,
        in_source_order: bool,
    ) -> Class {
        Class {
            slot: CLASSES.slot(src_len, block_len, tasks),
            in_source_order,
        }
    }

    fn table(self) -> &'static TwoWays<{ CLASSES.len() }> {
        if self.in_source_order {
            &IN_SOURCE_ORDER
        } else {
            &IN_OUTPUT_ORDER
        }
    }
}

/// Whether the next copy of `class` asks for its rows into L2.
pub(crate) fn to_l2(class: Class) -> bool {
    class.table().second(class.slot)
}

/// Whether `class` is done measuring: its level is fixed.
pub(crate) fn settled(class: Class) -> bool {
    class.table().settled(class.slot)
}

/// Note the time a copy of `class` took to write `bytes`.
pub(crate) fn record(class: Class, to_l2: bool, bytes: usize, elapsed: std::time::Duration) {
    class.table().record(class.slot, to_l2, bytes, elapsed);
}

/// How the report names a class: `32 MiB sources by 512 B rows, one task,
/// source order`.
fn describe(slot: usize, order: &str) -> String {
    let (source, block, split) = CLASSES.sizes(slot);
    format!(
        "{} MiB sources by {block} B rows, {}, {order} order",
        source >> 20,
        if split { "split" } else { "one task" }
    )
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let levels = ["l1", "l2"];
    let mut all = IN_OUTPUT_ORDER.report("block_prefetch", levels, |slot| describe(slot, "output"));
    all.extend(IN_SOURCE_ORDER.report("block_prefetch", levels, |slot| describe(slot, "source")));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_named_by_source_and_row_size_split_and_order() {
        assert_eq!(
            describe(Class::of(32 << 20, 512, 1, true).slot, "source"),
            "32 MiB sources by 512 B rows, one task, source order"
        );
        assert_eq!(
            describe(Class::of(3 << 20, 300, 2, false).slot, "output"),
            "2 MiB sources by 256 B rows, split, output order"
        );
    }

    #[test]
    fn the_two_orders_keep_separate_measurements() {
        let (output, source) = (
            Class::of(5 << 20, 4096, 1, false),
            Class::of(5 << 20, 4096, 1, true),
        );
        assert_eq!(output.slot, source.slot);
        assert!(!std::ptr::eq(output.table(), source.table()));
    }
}
