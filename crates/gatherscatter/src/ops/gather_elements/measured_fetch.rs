//! How GatherElements' vector loops along the last axis have each data row
//! of 8 KiB to 128 KiB in cache before they gather from it: read through
//! first (`read`), or asked for line by line while the row before it is
//! gathered (`prefetch`). Which is faster depends on the CPU and on what
//! else shares its memory, so `auto` times the calls themselves
//! ([`crate::mem::measured`]).
//!
//! On a 2-vCPU AMD EPYC family 25 model 1 (Zen 3) VM, W4 (4096 rows of
//! 16 KiB, int64 indices), three rounds interleaved: fresh outputs on one
//! thread 29.8-31.1 ms read against 24.8-26.0 prefetched, on two threads
//! 15.0-15.6 against 13.0-14.0, into a buffer on two 14.9-16.2 against
//! 12.4-13.3; into a buffer on one thread too noisy to call (20.4-32.9
//! against 22.6-30.3 over five rounds). A C probe of the same loop: read
//! through 23.9-24.8 ms, next row prefetched into L1 a line every 16
//! elements 20.1-21.4, into L2 20.9-24.7, two rows ahead 22.1-23.5.

use crate::mem::knobs::RowFetch;
use crate::mem::measured::{CallTiming, Pick, TwoWays};

/// Row size classes: 8 KiB to 128 KiB by powers of two.
const MIN_ROW_LOG2: u32 = 13;
const ROW_CLASSES: usize = 5;
/// The index types read in place by the vector loops: 8, 4 and 2 bytes.
const INDEX_BYTES: [usize; 3] = [8, 4, 2];
/// One task, or several.
const TASK_CLASSES: usize = 2;
const CLASSES: usize = ROW_CLASSES * INDEX_BYTES.len() * TASK_CLASSES;

/// Outputs from this size on are measured: long enough to time.
const MEASURED_MIN_OUTPUT: usize = 1 << 20;

/// This process's measurements: `read` first, `prefetch` second.
static MEASURED: TwoWays<CLASSES> = TwoWays::new();

/// The class of a call: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    row_log2: u32,
    index: usize,
    split: bool,
}

impl Class {
    fn slot(self) -> usize {
        let row = (self.row_log2 - MIN_ROW_LOG2) as usize;
        (row * INDEX_BYTES.len() + self.index) * TASK_CLASSES + usize::from(self.split)
    }

    fn from_slot(slot: usize) -> Class {
        let rest = slot / TASK_CLASSES;
        Class {
            row_log2: MIN_ROW_LOG2 + (rest / INDEX_BYTES.len()) as u32,
            index: rest % INDEX_BYTES.len(),
            split: slot % TASK_CLASSES == 1,
        }
    }

    fn describe(self) -> String {
        format!(
            "{} KiB rows by {}-byte indices, {}",
            1u64 << (self.row_log2 - 10),
            INDEX_BYTES[self.index],
            if self.split { "split" } else { "one task" }
        )
    }
}

/// One call's choice: whether the vector loops prefetch the next row, and
/// its place in its class's measurement.
pub(super) struct Fetch(Pick);

impl Fetch {
    /// The choice for a call gathering along the last axis from rows of
    /// `row_bytes` with `index_bytes`-byte indices into `out_bytes` on
    /// `tasks` tasks, `vector` when the vector loops run: forced by
    /// `knob`, or under `auto` measured for the call's class (`read`
    /// outside the measured range: rows read through or none, the scalar
    /// loop, small outputs, and under Miri, which cannot time).
    pub(super) fn choose(
        knob: RowFetch,
        vector: bool,
        (row_bytes, index_bytes): (usize, usize),
        out_bytes: usize,
        tasks: usize,
    ) -> Fetch {
        let index = INDEX_BYTES.iter().position(|&b| b == index_bytes);
        let row_log2 = row_bytes.max(1).ilog2();
        let in_range = (MIN_ROW_LOG2..MIN_ROW_LOG2 + ROW_CLASSES as u32).contains(&row_log2);
        let class = match index {
            Some(index) if vector && in_range => Some(Class {
                row_log2,
                index,
                split: tasks > 1,
            }),
            _ => None,
        };
        let measured = knob == RowFetch::Auto && out_bytes >= MEASURED_MIN_OUTPUT && !cfg!(miri);
        match (knob, class) {
            (RowFetch::Auto, Some(class)) if measured => {
                Fetch(Pick::measured(&MEASURED, class.slot(), true, || false))
            }
            (knob, _) => Fetch(Pick::fixed(knob == RowFetch::Prefetch)),
        }
    }

    /// The vector loops ask for the next row instead of reading each row
    /// through first.
    pub(super) fn prefetch(&self) -> bool {
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
    MEASURED.report("row_fetch", ["read", "prefetch"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_measures_vector_rows_of_8_to_128_kib_and_the_knob_forces_either_way() {
        let w4 = Fetch::choose(RowFetch::Auto, true, (16 << 10, 8), 64 << 20, 1);
        // Miri's clock is virtual: nothing is measured there, and auto reads rows through.
        match w4.0.timed_slot().map(Class::from_slot) {
            Some(class) => {
                assert_eq!(class.describe(), "16 KiB rows by 8-byte indices, one task");
                assert!(!w4.prefetch(), "read is timed first");
            }
            None => assert!(cfg!(miri) && !w4.prefetch(), "W4 is measured outside Miri"),
        }
        for unmeasured in [
            Fetch::choose(RowFetch::Auto, false, (16 << 10, 8), 64 << 20, 1),
            Fetch::choose(RowFetch::Auto, true, (4 << 10, 8), 64 << 20, 1),
            Fetch::choose(RowFetch::Auto, true, (256 << 10, 8), 64 << 20, 1),
            Fetch::choose(RowFetch::Auto, true, (16 << 10, 1), 64 << 20, 1),
            Fetch::choose(RowFetch::Auto, true, (16 << 10, 8), 1 << 10, 1),
            Fetch::choose(RowFetch::Read, true, (16 << 10, 8), 64 << 20, 1),
        ] {
            assert!(!unmeasured.prefetch() && !unmeasured.0.is_timed());
        }
        let forced = Fetch::choose(RowFetch::Prefetch, true, (16 << 10, 4), 64 << 20, 2);
        assert!(forced.prefetch() && !forced.0.is_timed());
        for slot in 0..CLASSES {
            assert_eq!(Class::from_slot(slot).slot(), slot);
        }
    }

    /// A class with its verdict is not timed again, so the call's stores
    /// may be ([`crate::mem::measured_stores`]).
    #[test]
    fn a_class_with_its_verdict_is_no_longer_timed() {
        let call = || Fetch::choose(RowFetch::Auto, true, (64 << 10, 2), 4 << 20, 2);
        for _ in 0..crate::mem::measured::CALLS_TO_SETTLE {
            let fetch = call();
            assert_eq!(fetch.timed(), !cfg!(miri));
            fetch.done(4 << 20);
        }
        assert!(!call().timed());
    }
}
