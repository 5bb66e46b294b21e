//! Which loop GatherElements runs for calls that move megabytes: the AVX2
//! gathers or the scalar loop, along the last axis ([`VectorRow`]), across
//! its short rows ([`SpanningRows`]) and along an outer one
//! ([`StridedRow`]), timed on the calls themselves
//! ([`crate::mem::measured`]). Smaller calls, and each class's first ones
//! until it has a verdict, take what the first-use measurement of
//! [`super::word_gather`] found faster for the last axis' 4- and 8-byte
//! words.
//!
//! That first-use measurement times 0.06-0.2 ms loops, too short for a
//! shared machine: on a 2-vCPU AMD EPYC family 25 model 1 (Zen 3) VM,
//! 8-byte words by int64 indices came out vector in one process (scalar
//! 94.4 us, vector 73.5) and scalar in the next (91.8, 114.6), while a
//! last-axis float64 gather of 16 MiB in rows of 256 ran 4.75-4.81 ms
//! vector against 5.06-5.40 scalar on one thread, 2.57-2.71 against
//! 2.83-3.00 on two.
//!
//! So each class of call (which axis, short rows or not, word size, index
//! type, the size of the data a row reads from by powers of two, one task
//! or several) is timed with the scalar loop, then the vector loop, three
//! calls each in a row (the first of each uncounted), and keeps the faster. Along the last axis a row reads one data
//! row; along an outer one, a plane (the axis times the dims after it),
//! which decides whether its gathers hit L1, L2 or memory.

use super::word_gather::{
    measured, spanning_rows, strided_row, vector_far_behind, vector_row, SpanningRows, StridedRow,
    VectorRow,
};
use crate::mem::knobs::WordGather;
use crate::mem::measured::{CallTiming, Pick, TwoWays};

/// The word sizes with a vector loop, in bytes (the last axis has loops
/// for 4- and 8-byte words only).
const WORD_BYTES: [usize; 4] = [1, 2, 4, 8];
/// The index types the vector loops read, by width in bytes.
const INDEX_BYTES: [usize; 3] = [8, 4, 2];
/// Classes of the data a row reads (a row, or a plane): 64 bytes to 1 MiB
/// by powers of two, the ends holding everything beyond.
const MIN_ROW_LOG2: u32 = 6;
const ROW_CLASSES: usize = 15;
/// One task, or several.
const TASK_CLASSES: usize = 2;
const CLASSES: usize =
    Layout::ALL.len() * WORD_BYTES.len() * INDEX_BYTES.len() * ROW_CLASSES * TASK_CLASSES;

/// Which loop a class times against the scalar one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// The last axis, a row at a time.
    Rows,
    /// The last axis, short rows walked end to end.
    ShortRows,
    /// An outer axis (rows of indices read planes of data).
    Planes,
}

impl Layout {
    const ALL: [Layout; 3] = [Layout::Rows, Layout::ShortRows, Layout::Planes];

    fn name(self) -> &'static str {
        match self {
            Layout::Rows => "rows",
            Layout::ShortRows => "short rows from rows",
            Layout::Planes => "planes",
        }
    }
}

/// Outputs from this size on are timed: long enough to time with two
/// clock reads.
const TIMED_MIN_OUTPUT: usize = 1 << 20;

/// This process's measurements: the scalar loop first, the vector loop
/// second.
static MEASURED: TwoWays<CLASSES> = TwoWays::new();

/// The class of a call: which measurements it shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    layout: Layout,
    word: usize,
    index: usize,
    row_log2: u32,
    split: bool,
}

impl Class {
    fn of(
        layout: Layout,
        (word_bytes, index_bytes): (usize, usize),
        row_bytes: usize,
        tasks: usize,
    ) -> Option<Class> {
        let word = WORD_BYTES.iter().position(|&b| b == word_bytes)?;
        let index = INDEX_BYTES.iter().position(|&b| b == index_bytes)?;
        let top = MIN_ROW_LOG2 + ROW_CLASSES as u32 - 1;
        Some(Class {
            layout,
            word,
            index,
            row_log2: row_bytes.max(1).ilog2().clamp(MIN_ROW_LOG2, top),
            split: tasks > 1,
        })
    }

    fn slot(self) -> usize {
        let row = (self.row_log2 - MIN_ROW_LOG2) as usize;
        let kind = ((self.layout as usize) * WORD_BYTES.len() + self.word) * INDEX_BYTES.len()
            + self.index;
        (kind * ROW_CLASSES + row) * TASK_CLASSES + usize::from(self.split)
    }

    fn from_slot(slot: usize) -> Class {
        let rest = slot / TASK_CLASSES;
        let kind = rest / ROW_CLASSES;
        let word = kind / INDEX_BYTES.len();
        Class {
            layout: Layout::ALL[word / WORD_BYTES.len()],
            word: word % WORD_BYTES.len(),
            index: kind % INDEX_BYTES.len(),
            row_log2: MIN_ROW_LOG2 + (rest % ROW_CLASSES) as u32,
            split: slot % TASK_CLASSES == 1,
        }
    }

    /// How the report names the class: `8-byte words by 8-byte indices,
    /// rows of 2 KiB, one task` (the last axis), `4-byte words by 8-byte
    /// indices, short rows from rows of 64 B, one task` (its short rows),
    /// `2-byte words by 4-byte indices, planes of 64 KiB, split` (an outer
    /// axis).
    fn describe(self) -> String {
        let row = 1u64 << self.row_log2;
        let row = match row >> 10 {
            0 => format!("{row} B"),
            kib => format!("{kib} KiB"),
        };
        format!(
            "{}-byte words by {}-byte indices, {} of {row}, {}",
            WORD_BYTES[self.word],
            INDEX_BYTES[self.index],
            self.layout.name(),
            if self.split { "split" } else { "one task" }
        )
    }
}

/// One call's loop (`K`, a [`VectorRow`] or a [`StridedRow`]), and its
/// place in its class's measurement.
pub(super) struct WordLoop<K> {
    /// The vector loop the CPU and types have, if any.
    kernel: Option<K>,
    /// Whether the call takes it, and the call's place in its class's
    /// measurement.
    pick: Pick,
}

impl<W: 'static, O: 'static, X: 'static> WordLoop<VectorRow<W, O, X>> {
    /// The loop for a call gathering words `W` into slots `O` through
    /// indices `X` along the last axis, from data rows of `row_bytes`.
    pub(super) fn last_axis(
        knob: WordGather,
        row_bytes: usize,
        out_bytes: usize,
        tasks: usize,
    ) -> Self {
        let class = Class::of(
            Layout::Rows,
            (size_of::<W>(), size_of::<X>()),
            row_bytes,
            tasks,
        );
        let kernel = vector_row::<W, O, X>(WordGather::Vector);
        let first_use = || vector_row::<W, O, X>(WordGather::Auto).is_some();
        let sizes = (size_of::<W>(), size_of::<X>());
        Self::choose(knob, (class, kernel), (first_use, sizes), out_bytes)
    }
}

impl<W: 'static, O: 'static, X: 'static> WordLoop<StridedRow<W, O, X>> {
    /// The loop for a call gathering words `W` into slots `O` through
    /// indices `X` along an outer axis, from data planes of `plane_bytes`.
    /// Before its class has a verdict: the vector loop, unless the
    /// first-use measurement of the last axis' loops found the scalar one
    /// faster for this word and index size (it times 4- and 8-byte words).
    pub(super) fn outer_axis(
        knob: WordGather,
        plane_bytes: usize,
        out_bytes: usize,
        tasks: usize,
    ) -> Self {
        let sizes = (size_of::<W>(), size_of::<X>());
        let class = Class::of(Layout::Planes, sizes, plane_bytes, tasks);
        let kernel = strided_row::<W, O, X>(true);
        let first_use = || measured(sizes.0, sizes.1).is_none_or(|m| m.vector_wins());
        Self::choose(knob, (class, kernel), (first_use, sizes), out_bytes)
    }
}

impl<W: 'static, O: 'static, X: 'static> WordLoop<SpanningRows<W, O, X>> {
    /// The loop for a call gathering words `W` into slots `O` through
    /// indices `X` along the last axis in short rows, each reading a data
    /// row of `data_row_bytes`. Before its class has a verdict: the vector
    /// loop, unless the first-use measurement of the per-row loops found
    /// the scalar one faster for this word and index size.
    pub(super) fn short_rows(
        knob: WordGather,
        data_row_bytes: usize,
        out_bytes: usize,
        tasks: usize,
    ) -> Self {
        let sizes = (size_of::<W>(), size_of::<X>());
        let class = Class::of(Layout::ShortRows, sizes, data_row_bytes, tasks);
        let kernel = spanning_rows::<W, O, X>();
        let first_use = || measured(sizes.0, sizes.1).is_none_or(|m| m.vector_wins());
        Self::choose(knob, (class, kernel), (first_use, sizes), out_bytes)
    }
}

impl<K: Copy> WordLoop<K> {
    /// The loop for a call of `class` whose vector loop is `kernel` (none
    /// where the CPU or the types have none), gathering words by indices
    /// of `sizes` (bytes) and writing `out_bytes`: forced by `knob`; under
    /// `auto`, the scalar loop where the first-use measurement found the
    /// vector one [far behind](super::word_gather::vector_far_behind) (a
    /// timed call with it would cost many scalar ones), else timed for
    /// calls of at least [`TIMED_MIN_OUTPUT`] (not under Miri, which cannot
    /// time), and for smaller ones the verdict of their class once it has
    /// one, else what `first_use` says.
    fn choose(
        knob: WordGather,
        (class, kernel): (Option<Class>, Option<K>),
        (first_use, sizes): (impl FnOnce() -> bool, (usize, usize)),
        out_bytes: usize,
    ) -> WordLoop<K> {
        let with = |pick| WordLoop { kernel, pick };
        if kernel.is_none() {
            return with(Pick::fixed(false));
        }
        match knob {
            WordGather::Scalar => return with(Pick::fixed(false)),
            WordGather::Vector => return with(Pick::fixed(true)),
            WordGather::Auto if vector_far_behind(sizes.0, sizes.1) => {
                return with(Pick::fixed(false))
            }
            WordGather::Auto => {}
        }
        let Some(slot) = class.map(Class::slot) else {
            return with(Pick::fixed(first_use()));
        };
        let may_time = out_bytes >= TIMED_MIN_OUTPUT && !cfg!(miri);
        with(Pick::measured(&MEASURED, slot, may_time, first_use))
    }

    /// The vector loop, when the call takes it.
    pub(super) fn vector(&self) -> Option<K> {
        self.kernel.filter(|_| self.pick.second)
    }

    /// Whether this call is one of its class's timed ones (whose other
    /// measured choices then stay at their defaults, so that the two
    /// measurements do not mix).
    pub(super) fn timed(&self) -> bool {
        self.pick.is_timed()
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(super) fn done(self, out_bytes: usize) {
        self.pick.done(out_bytes);
    }
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let describe = |slot| Class::from_slot(slot).describe();
    MEASURED.report("word_gather", ["scalar", "vector"], describe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;

    #[test]
    fn classes_are_axis_word_index_data_size_and_whether_the_call_is_split() {
        let f64_rows = Class::of(Layout::Rows, (8, 8), 2048, 1).unwrap();
        assert_eq!(
            f64_rows.describe(),
            "8-byte words by 8-byte indices, rows of 2 KiB, one task"
        );
        assert_eq!(
            Class::of(Layout::Rows, (4, 2), 100, 2).unwrap().describe(),
            "4-byte words by 2-byte indices, rows of 64 B, split"
        );
        assert_eq!(
            Class::of(Layout::Planes, (2, 4), 64 << 10, 2)
                .unwrap()
                .describe(),
            "2-byte words by 4-byte indices, planes of 64 KiB, split"
        );
        assert_eq!(
            Class::of(Layout::ShortRows, (4, 8), 16, 1)
                .unwrap()
                .describe(),
            "4-byte words by 8-byte indices, short rows from rows of 64 B, one task"
        );
        assert_eq!(Class::of(Layout::Rows, (16, 8), 2048, 1), None);
        assert_eq!(Class::of(Layout::Planes, (4, 1), 2048, 1), None);
        assert_eq!(
            Class::of(Layout::Rows, (4, 4), usize::MAX, 1)
                .unwrap()
                .row_log2,
            20
        );
        for slot in 0..CLASSES {
            assert_eq!(Class::from_slot(slot).slot(), slot);
        }
    }

    /// A large call under `auto` is timed, the scalar loop first, unless
    /// the CPU's gathers are far behind (then no call is timed and every
    /// one takes the scalar loop); a smaller one is not; a forced one takes
    /// what it is told.
    fn check_timing<K: Copy>(
        (large, small): (WordLoop<K>, WordLoop<K>),
        forced: [bool; 2],
        far_behind: bool,
    ) {
        let has_vector = forced[1];
        match large.pick.timed_slot() {
            Some(_) => assert!(large.vector().is_none(), "the scalar loop is timed first"),
            None => assert!(
                cfg!(miri) || !has_vector || far_behind,
                "a large call is timed"
            ),
        }
        assert!(!small.timed());
        if far_behind {
            assert!(large.vector().is_none() && small.vector().is_none());
        }
        assert!(!forced[0]);
    }

    #[test]
    fn large_calls_are_timed_scalar_first_and_forced_or_small_ones_are_not() {
        type Rows = WordLoop<VectorRow<u64, MaybeUninit<u64>, i32>>;
        type Planes = WordLoop<StridedRow<u16, MaybeUninit<u16>, i64>>;
        let (auto, knobs) = (WordGather::Auto, [WordGather::Scalar, WordGather::Vector]);
        let has_vector = vector_row::<u64, MaybeUninit<u64>, i32>(WordGather::Vector).is_some();
        let rows = |knob, out| Rows::last_axis(knob, 4096, out, 1);
        let forced = knobs.map(|knob| rows(knob, 16 << 20).vector().is_some());
        assert_eq!(forced, [false, has_vector]);
        let behind = vector_far_behind(8, 4);
        check_timing(
            (rows(auto, 16 << 20), rows(auto, (1 << 20) - 8)),
            forced,
            behind,
        );
        let planes = |knob, out| Planes::outer_axis(knob, 1 << 16, out, 2);
        let forced = knobs.map(|knob| planes(knob, 16 << 20).vector().is_some());
        assert_eq!(forced, [false, has_vector]);
        // 2-byte words go by the 4-byte words' measurement.
        let behind = vector_far_behind(4, 8);
        assert_eq!(vector_far_behind(2, 8), behind);
        check_timing(
            (planes(auto, 16 << 20), planes(auto, (1 << 20) - 8)),
            forced,
            behind,
        );
        // A small last-axis call takes what the first-use measurement found.
        let first_use = vector_row::<u64, MaybeUninit<u64>, i32>(auto).is_some();
        assert_eq!(rows(auto, (1 << 20) - 8).vector().is_some(), first_use);
        // No vector loop for 2-byte words along the last axis: nothing to time.
        let words = WordLoop::<VectorRow<u16, u16, i64>>::last_axis(auto, 4096, 16 << 20, 1);
        assert!(!words.timed() && words.vector().is_none());
    }
}
