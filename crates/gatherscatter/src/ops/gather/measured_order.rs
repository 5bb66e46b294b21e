//! Which order Gather copies rows in where neither is known to win:
//! decided by timing the calls themselves.
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
//! So for copies in the uncertain range (see [`fill_blocks`]'s caller)
//! the first calls of each class (source size and block size by powers of
//! two, one task or several) alternate between the two orders, output
//! first, [`SAMPLES`] each; every later call of the class takes the one
//! whose best time per output byte was lower. Both orders write the same
//! bytes, so the choice changes only the time. The timing is two clock
//! reads a call, on calls that copy megabytes.
//!
//! [`fill_blocks`]: super::blocks::fill_blocks

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Timed calls of each order before a class's choice is fixed.
pub(crate) const SAMPLES: u32 = 2;

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
        let split = slot % TASK_CLASSES == 1;
        let rest = slot / TASK_CLASSES;
        Class {
            source_log2: MIN_SOURCE_LOG2 + (rest / BLOCK_CLASSES) as u32,
            block_log2: MIN_BLOCK_LOG2 + (rest % BLOCK_CLASSES) as u32,
            split,
        }
    }
}

/// One class's measurements: for output order (0) and source order (1),
/// the calls timed and the best time per output byte, in picoseconds.
struct Timings {
    calls: [AtomicU32; 2],
    best_ps_per_byte: [AtomicU64; 2],
}

impl Timings {
    const fn new() -> Timings {
        Timings {
            calls: [AtomicU32::new(0), AtomicU32::new(0)],
            best_ps_per_byte: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
        }
    }
}

/// The measurements of one process. Calls made at once from several
/// threads may time a few more calls than [`SAMPLES`]; every count and
/// best time stays a true one.
pub(crate) struct Measurements {
    classes: [Timings; CLASSES],
}

/// This process's measurements.
pub(crate) static MEASURED: Measurements = Measurements::new();

/// What the calls of one class of Gather row copies measured: each order's
/// timed calls and best time, and the order kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OrderTiming {
    /// Sources of this many bytes up to twice as many (the largest class
    /// holds every larger source).
    pub source_bytes: u64,
    /// Rows (blocks) of this many bytes up to twice as many, likewise.
    pub block_bytes: u64,
    /// Whether the copy was split across threads.
    pub split: bool,
    /// Calls timed in output order and in source order.
    pub calls: [u32; 2],
    /// Each order's best time per output byte, in picoseconds (`u64::MAX`
    /// before its first timed call).
    pub best_ps_per_byte: [u64; 2],
    /// The order kept (`Some(true)` for source order), or `None` while the
    /// class is still measuring.
    pub source_order: Option<bool>,
}

impl Measurements {
    pub(crate) const fn new() -> Measurements {
        Measurements {
            classes: [const { Timings::new() }; CLASSES],
        }
    }

    /// Whether the next call of `class` copies in source order: the order
    /// with fewer timed calls while either has fewer than [`SAMPLES`]
    /// (output order on a tie), then the faster.
    pub(crate) fn source_order(&self, class: Class) -> bool {
        let timings = &self.classes[class.slot()];
        let calls = timings.calls.each_ref().map(|c| c.load(Ordering::Relaxed));
        if calls.iter().any(|&c| c < SAMPLES) {
            return calls[1] < calls[0];
        }
        let best = timings
            .best_ps_per_byte
            .each_ref()
            .map(|b| b.load(Ordering::Relaxed));
        best[1] < best[0]
    }

    /// Note that a call of `class` in the given order wrote `bytes` in
    /// `elapsed`, while the class is still measuring (later calls are not
    /// recorded, so the choice stays fixed).
    pub(crate) fn record(&self, class: Class, source_order: bool, bytes: usize, elapsed: Duration) {
        let timings = &self.classes[class.slot()];
        let order = usize::from(source_order);
        if timings
            .calls
            .iter()
            .all(|c| c.load(Ordering::Relaxed) >= SAMPLES)
        {
            return;
        }
        let ps = elapsed.as_nanos().saturating_mul(1000) / bytes.max(1) as u128;
        let ps = u64::try_from(ps).unwrap_or(u64::MAX);
        timings.best_ps_per_byte[order].fetch_min(ps, Ordering::Relaxed);
        timings.calls[order].fetch_add(1, Ordering::Relaxed);
    }

    /// Every class with at least one timed call.
    pub(crate) fn found(&self) -> Vec<OrderTiming> {
        let mut found = Vec::new();
        for (slot, timings) in self.classes.iter().enumerate() {
            let calls = timings.calls.each_ref().map(|c| c.load(Ordering::Relaxed));
            if calls == [0, 0] {
                continue;
            }
            let class = Class::from_slot(slot);
            let measuring = calls.iter().any(|&c| c < SAMPLES);
            found.push(OrderTiming {
                source_bytes: 1 << class.source_log2,
                block_bytes: 1 << class.block_log2,
                split: class.split,
                calls,
                best_ps_per_byte: timings
                    .best_ps_per_byte
                    .each_ref()
                    .map(|b| b.load(Ordering::Relaxed)),
                source_order: (!measuring).then(|| self.source_order(class)),
            });
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_of_source_and_block_and_whether_the_copy_is_split() {
        let w8 = Class::of(32 << 20, 512, 1);
        assert_eq!((w8.source_log2, w8.block_log2, w8.split), (25, 9, false));
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

    #[test]
    fn each_order_is_timed_in_turn_then_the_faster_is_kept() {
        let measured = Measurements::new();
        let class = Class::of(32 << 20, 512, 1);
        let ms = Duration::from_millis;
        // Output, source, output, source; source order is faster per byte.
        for (source, elapsed) in [(false, 9), (true, 7), (false, 8), (true, 6)] {
            assert_eq!(measured.source_order(class), source);
            measured.record(class, source, 32 << 20, ms(elapsed));
        }
        assert!(measured.source_order(class));
        // Fixed from now on: slower calls of the chosen order change nothing.
        measured.record(class, true, 32 << 20, ms(50));
        assert!(measured.source_order(class));
        let found = measured.found();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].calls, [2, 2]);
        assert_eq!(found[0].source_order, Some(true));
        // 6 ms over 32 MiB: 178 ps a byte.
        assert_eq!(found[0].best_ps_per_byte[1], 178);
        // Another class is measured on its own, and may choose otherwise.
        let other = Class::of(4 << 20, 512, 2);
        assert!(!measured.source_order(other));
        for (source, elapsed) in [(false, 1), (true, 2), (false, 1), (true, 2)] {
            measured.record(other, source, 4 << 20, ms(elapsed));
        }
        assert!(!measured.source_order(other));
        assert!(measured.source_order(class));
        assert_eq!(measured.found().len(), 2);
    }

    #[test]
    fn a_class_still_measuring_reports_no_choice() {
        let measured = Measurements::new();
        let class = Class::of(8 << 20, 4096, 1);
        measured.record(class, false, 1 << 20, Duration::from_micros(100));
        let found = measured.found();
        assert_eq!(found[0].calls, [1, 0]);
        assert_eq!(found[0].source_order, None);
        assert_eq!(found[0].best_ps_per_byte[1], u64::MAX);
    }
}
