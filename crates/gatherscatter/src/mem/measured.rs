//! A choice between two kernel strategies made by timing the calls
//! themselves: the first calls of each class take the first strategy
//! [`CALLS_EACH`] times in a row (in some tables, more while its times
//! still fall: [`TwoWays::until_settled`]), then the second as many, and
//! every later call of the class takes the one whose best time per output
//! byte was lower. The first call of each run is not counted: it pays for what the
//! call before it left in the caches (a streamed output is out of them, an
//! ordinarily stored one is in them, dirty), and the first call of a class
//! for the first touch of its output. Taken in turn, one call each, a
//! 16 MiB Gather of 4 KiB rows on an Intel Xeon family 6 model 167 timed
//! ordinary stores at 2.1-2.4 ms and streaming ones at 1.6 (each call
//! right after the other kind) and kept streaming, 1.17 ms a call from
//! then on, where ordinary stores run at 0.99.
//!
//! For strategies whose winner depends on what no CPU reports, such as how
//! much of a shared last-level cache a process really gets: both write the
//! same result, so the choice changes only the time. It costs two clock
//! reads a call, and is used only for calls that move megabytes.
//!
//! A verdict is checked again now and then: after 16 calls of a class
//! once it settled, the next two take the strategy it lost to (the first
//! uncounted, as above), the two after them the one it kept (the second
//! timed), and again after 64, 256, 1024, ... calls (four times as many
//! each time). Each strategy keeps its best time across every call timed,
//! and the verdict turns when the loser's best is at least
//! [`RECHECK_MARGIN_PERCENT`] below the winner's: a ScatterElements class
//! on an AMD EPYC family 25 model 17 kept the stream prefetch at 271 ps a
//! byte after its two calls without it took 464 (253 in every other
//! process that day). Without the margin and the winner's own fresh time,
//! a Gather class whose two prefetch levels differ by a tenth (43 against
//! 48 ps a byte) turned to the slower on one lucky call and ran 45 calls
//! at 0.81-0.99 ms instead of 0.67 before turning back. The re-checks
//! take two calls in eighteen after settling, then ever fewer.
//!
//! Each measured choice hands its kernel a [`Pick`]: the strategy, and
//! while the class is measuring the start of the call's timing, which
//! [`Pick::done`] adds to the class's table when the call has written its
//! output.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Timed calls of each strategy whose times count, after the first of
/// its run.
pub(crate) const SAMPLES: u32 = 2;

/// Calls each strategy takes in a row while its class is measuring: one
/// that settles the caches, then [`SAMPLES`].
pub(crate) const CALLS_EACH: u32 = SAMPLES + 1;

/// Calls a class takes before its choice is fixed, in tables with runs of
/// a fixed length.
#[cfg(test)]
pub(crate) const CALLS_TO_SETTLE: u32 = 2 * CALLS_EACH;

/// The most calls a strategy takes in a row in a table whose runs last
/// until its times settle ([`TwoWays::until_settled`]).
pub(crate) const MAX_CALLS_EACH: u32 = 6;

/// The calls of a settled class after which its verdict is first checked
/// again; later checks come after four times as many calls each.
const FIRST_RECHECK: u32 = 16;

/// How much lower, in percent, the losing strategy's best time must be
/// for a re-check to turn the verdict.
const RECHECK_MARGIN_PERCENT: u64 = 5;

/// Whether a time of `a` picoseconds a byte beats `b` by more than
/// `percent` percent.
fn faster_by(a: u64, b: u64, percent: u64) -> bool {
    u128::from(a) * (100 + u128::from(percent)) < u128::from(b) * 100
}

/// `elapsed` for `bytes` written, in picoseconds a byte.
fn ps_per_byte(bytes: usize, elapsed: Duration) -> u64 {
    let ps = elapsed.as_nanos().saturating_mul(1000) / bytes.max(1) as u128;
    u64::try_from(ps).unwrap_or(u64::MAX)
}

/// What a settled class's call does in a re-check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recheck {
    /// Takes the losing strategy, untimed: it settles the caches.
    LoserFirst,
    /// Takes the losing strategy, timed.
    Loser,
    /// Takes the kept strategy, timed (the call before it, the first of
    /// the kept strategy's again, settled the caches).
    Winner,
}

/// Where a settled class's call number `n` (counted from 0 after it
/// settled) falls in its re-checks, or `None` for a call that takes the
/// verdict untimed.
fn recheck(n: u32) -> Option<Recheck> {
    // Re-checks start at 16, 64, 256, ...: even powers of two from 16 on.
    let starts =
        |x: u32| x >= FIRST_RECHECK && x.is_power_of_two() && x.trailing_zeros().is_multiple_of(2);
    let after = |k: u32| n.checked_sub(k).is_some_and(starts);
    if after(0) {
        Some(Recheck::LoserFirst)
    } else if after(1) {
        Some(Recheck::Loser)
    } else if after(3) {
        Some(Recheck::Winner)
    } else {
        None
    }
}

/// One class's measurements: for the first strategy (0) and the second
/// (1), the calls timed and the best time per output byte, in picoseconds.
struct Timings {
    calls: [AtomicU32; 2],
    best_ps_per_byte: [AtomicU64; 2],
    /// Whether each strategy's latest timed call beat its best before by
    /// the table's settling margin: its run goes on.
    improving: [AtomicBool; 2],
    /// Calls recorded since the class settled, which place its re-checks.
    later: AtomicU32,
    /// The verdict once fixed (at the first call after settling), turned
    /// only by a re-check: 0 before, 1 the first strategy, 2 the second.
    kept: AtomicU8,
}

impl Timings {
    const fn new() -> Timings {
        Timings {
            calls: [AtomicU32::new(0), AtomicU32::new(0)],
            best_ps_per_byte: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
            improving: [AtomicBool::new(false), AtomicBool::new(false)],
            later: AtomicU32::new(0),
            kept: AtomicU8::new(0),
        }
    }

    fn calls(&self) -> [u32; 2] {
        self.calls.each_ref().map(|c| c.load(Ordering::Relaxed))
    }

    fn best(&self) -> [u64; 2] {
        self.best_ps_per_byte
            .each_ref()
            .map(|b| b.load(Ordering::Relaxed))
    }
}

/// What one class has measured so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClassTimings {
    /// The class's slot.
    pub slot: usize,
    /// Calls timed with the first strategy and with the second (the
    /// first of each counts no time).
    pub calls: [u32; 2],
    /// Each strategy's best time per output byte, in picoseconds
    /// (`u64::MAX` before its second timed call).
    pub best_ps_per_byte: [u64; 2],
    /// Whether the second strategy is kept, once both are measured.
    pub second: Option<bool>,
    /// Calls since the class settled, re-checks among them.
    pub settled_calls: u32,
}

/// What the calls of one class measured, for a strategy chosen on the
/// calls ([`crate::tuning::report`] lists them).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallTiming {
    /// The knob whose `auto` this is (`stores`, `word_gather`,
    /// `block_order`, `row_fetch`).
    pub knob: &'static str,
    /// The class of calls: `32 MiB sources by 512 B rows, one task`.
    pub class: String,
    /// The two strategies, as the knob names them, in the order tried.
    pub strategies: [&'static str; 2],
    /// Calls timed with each (the first of each counts no time).
    pub calls: [u32; 2],
    /// Each one's best time per output byte, in picoseconds (`u64::MAX`
    /// before its second timed call).
    pub best_ps_per_byte: [u64; 2],
    /// The strategy kept, or `None` while the class is still measuring.
    pub chosen: Option<&'static str>,
    /// Calls of the class since it settled. After 16 of them, and after
    /// four times as many each time again, two calls re-check the
    /// verdict with the other strategy and two with the kept one.
    pub settled_calls: u32,
}

impl CallTiming {
    /// The entry of `knob` for `timings` of the class described.
    pub(crate) fn new(
        knob: &'static str,
        class: String,
        strategies: [&'static str; 2],
        timings: ClassTimings,
    ) -> CallTiming {
        CallTiming {
            knob,
            class,
            strategies,
            calls: timings.calls,
            best_ps_per_byte: timings.best_ps_per_byte,
            chosen: timings.second.map(|second| strategies[usize::from(second)]),
            settled_calls: timings.settled_calls,
        }
    }
}

impl std::fmt::Display for CallTiming {
    /// `block_order 32 MiB sources by 512 B rows, one task: source (output
    /// 239 ps/B, source 200 ps/B)`, or `...; 40 calls since settling)`
    /// once settled.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ps = |p: u64| match p {
            u64::MAX => "-".to_string(),
            p => format!("{p} ps/B"),
        };
        write!(
            f,
            "{} {}: {} ({} {}, {} {}",
            self.knob,
            self.class,
            self.chosen.unwrap_or("measuring"),
            self.strategies[0],
            ps(self.best_ps_per_byte[0]),
            self.strategies[1],
            ps(self.best_ps_per_byte[1]),
        )?;
        match self.settled_calls {
            0 => write!(f, ")"),
            n => write!(f, "; {n} calls since settling)"),
        }
    }
}

/// The measurements of `N` classes, numbered by their slot. Calls made at
/// once from several threads may time a few more calls than
/// [`CALLS_EACH`], or take the two strategies in an order of their own;
/// every count and best time stays a true one.
pub(crate) struct TwoWays<const N: usize> {
    classes: [Timings; N],
    /// How much faster, in percent, the second strategy's best time must
    /// be for it to be kept: 0 takes the faster.
    second_margin_percent: u64,
    /// 0 for runs of [`CALLS_EACH`] calls; else a run goes on, up to
    /// [`MAX_CALLS_EACH`], while each call beats the run's best before it
    /// by this many percent.
    settle_percent: u64,
}

impl<const N: usize> TwoWays<N> {
    pub(crate) const fn new() -> TwoWays<N> {
        TwoWays::keeping_the_first_within(0)
    }

    /// Measurements that keep the first strategy unless the second's best
    /// time is at least `percent` lower: for a first strategy that is
    /// the measured default, where two samples each on a shared machine
    /// can differ by that much with no change at all.
    pub(crate) const fn keeping_the_first_within(percent: u64) -> TwoWays<N> {
        TwoWays {
            classes: [const { Timings::new() }; N],
            second_margin_percent: percent,
            settle_percent: 0,
        }
    }

    /// Measurements whose runs go on while the strategy's times still
    /// fall by `percent` or more a call, up to [`MAX_CALLS_EACH`] calls:
    /// for strategies whose calls take longer than [`CALLS_EACH`] to reach
    /// their steady time. New data, or an output that the other strategy
    /// left out of the cache, takes a few passes to settle in a large
    /// last-level cache: a 16 MiB copy of 4 KiB blocks on an Intel Xeon
    /// family 6 model 167 ran 2.2, 2.1, 1.4, 1.2, 1.15 ms with ordinary
    /// stores after streamed calls, where streaming ones settled on their
    /// second call (3.8, 1.4, 1.4 after ordinary ones).
    pub(crate) const fn until_settled(percent: u64) -> TwoWays<N> {
        TwoWays {
            classes: [const { Timings::new() }; N],
            second_margin_percent: 0,
            settle_percent: percent,
        }
    }

    /// Whether `way`'s run in `timings` is over: [`CALLS_EACH`] calls, and
    /// in a table whose runs last until settled, a last call that did not
    /// beat the run's best, or [`MAX_CALLS_EACH`] calls.
    fn run_done(&self, timings: &Timings, way: usize) -> bool {
        let calls = timings.calls[way].load(Ordering::Relaxed);
        if calls < CALLS_EACH {
            return false;
        }
        self.settle_percent == 0
            || calls >= MAX_CALLS_EACH
            || !timings.improving[way].load(Ordering::Relaxed)
    }

    /// Whether the next call of class `slot` takes the second strategy:
    /// the first until its run is over, then the second until its run is
    /// too, then the faster, except in a re-check ([`recheck`]), which
    /// takes the slower.
    pub(crate) fn second(&self, slot: usize) -> bool {
        let timings = &self.classes[slot];
        if !self.run_done(timings, 0) {
            return false;
        }
        if !self.run_done(timings, 1) {
            return true;
        }
        let loser = matches!(
            recheck(timings.later.load(Ordering::Relaxed)),
            Some(Recheck::LoserFirst | Recheck::Loser)
        );
        self.verdict(slot) != loser
    }

    /// Whether a settled class keeps the second strategy: the one whose
    /// best time was the lower (by the table's margin) when it settled,
    /// unless a re-check turned it.
    fn verdict(&self, slot: usize) -> bool {
        match self.classes[slot].kept.load(Ordering::Relaxed) {
            0 => {
                let [first, second] = self.classes[slot].best();
                faster_by(second, first, self.second_margin_percent)
            }
            kept => kept == 2,
        }
    }

    /// Whether the next call of class `slot` is timed for its
    /// measurement: the class is still measuring, or the call re-checks
    /// its verdict. Its other calls are counted, not timed.
    pub(crate) fn measuring(&self, slot: usize) -> bool {
        !self.settled(slot) || recheck(self.classes[slot].later.load(Ordering::Relaxed)).is_some()
    }

    /// Whether class `slot` is done measuring: its choice is fixed.
    pub(crate) fn settled(&self, slot: usize) -> bool {
        let timings = &self.classes[slot];
        self.run_done(timings, 0) && self.run_done(timings, 1)
    }

    /// Note that a call of class `slot` with the given strategy wrote
    /// `bytes` in `elapsed`. While the class is measuring, the first call
    /// of each strategy is counted but its time is not. Once it is
    /// settled, each call counts towards the next re-check, and the
    /// second call of a re-check that took the losing strategy lowers
    /// that strategy's best time if it beat it.
    pub(crate) fn record(&self, slot: usize, second: bool, bytes: usize, elapsed: Duration) {
        let timings = &self.classes[slot];
        let way = usize::from(second);
        if self.settled(slot) {
            let n = timings.later.fetch_add(1, Ordering::Relaxed);
            let kept = self.verdict(slot);
            if n == 0 {
                timings.kept.store(1 + u8::from(kept), Ordering::Relaxed);
            }
            let (loser, winner) = (usize::from(!kept), usize::from(kept));
            let counted = match recheck(n) {
                Some(Recheck::LoserFirst) if way == loser => false,
                Some(Recheck::Loser) if way == loser => true,
                Some(Recheck::Winner) if way == winner => true,
                _ => return,
            };
            timings.calls[way].fetch_add(1, Ordering::Relaxed);
            if counted {
                let ps = ps_per_byte(bytes, elapsed);
                timings.best_ps_per_byte[way].fetch_min(ps, Ordering::Relaxed);
                // Turning to the second strategy also needs the table's
                // own margin for it.
                let margin = match kept {
                    true => RECHECK_MARGIN_PERCENT,
                    false => RECHECK_MARGIN_PERCENT.max(self.second_margin_percent),
                };
                let best = timings.best();
                if faster_by(best[loser], best[winner], margin) {
                    timings.kept.store(1 + u8::from(!kept), Ordering::Relaxed);
                }
            }
            return;
        }
        if timings.calls[way].fetch_add(1, Ordering::Relaxed) > 0 {
            let ps = ps_per_byte(bytes, elapsed);
            let before = timings.best_ps_per_byte[way].fetch_min(ps, Ordering::Relaxed);
            let gain = u128::from(ps) * 100
                < u128::from(before) * u128::from(100 - self.settle_percent.min(100));
            timings.improving[way].store(gain, Ordering::Relaxed);
        }
    }

    /// The report's entries for `knob`, whose two values are `strategies`,
    /// one per class timed so far, each named by `describe(slot)`.
    pub(crate) fn report(
        &self,
        knob: &'static str,
        strategies: [&'static str; 2],
        describe: impl Fn(usize) -> String,
    ) -> Vec<CallTiming> {
        let timed = self.timed().into_iter();
        timed
            .map(|t| CallTiming::new(knob, describe(t.slot), strategies, t))
            .collect()
    }

    /// Every class with at least one timed call.
    pub(crate) fn timed(&self) -> Vec<ClassTimings> {
        let timed = self.classes.iter().enumerate();
        let timed = timed.filter(|(_, t)| t.calls() != [0, 0]);
        timed
            .map(|(slot, t)| {
                let calls = t.calls();
                let measuring = !self.settled(slot);
                ClassTimings {
                    slot,
                    calls,
                    best_ps_per_byte: t.best(),
                    second: (!measuring).then(|| self.verdict(slot)),
                    settled_calls: t.later.load(Ordering::Relaxed),
                }
            })
            .collect()
    }
}

/// A table a timed call's time joins ([`TwoWays`], whatever its size).
trait Record: Sync {
    fn record(&self, slot: usize, second: bool, bytes: usize, elapsed: Duration);
}

impl<const N: usize> Record for TwoWays<N> {
    fn record(&self, slot: usize, second: bool, bytes: usize, elapsed: Duration) {
        TwoWays::record(self, slot, second, bytes, elapsed);
    }
}

/// One call's strategy, and, while the call's class is still measuring,
/// the start of the call's timing: what each measured choice hands its
/// kernel, which reports back with [`Pick::done`].
pub(crate) struct Pick {
    /// Whether the call takes the second strategy.
    pub second: bool,
    /// The table, class and start of a call that reports back.
    timing: Option<(&'static dyn Record, usize, Instant)>,
    /// Whether the call measures its class or re-checks its verdict.
    measuring: bool,
}

impl Pick {
    /// A strategy fixed for the call: forced by a knob, or outside the
    /// measured range.
    pub(crate) const fn fixed(second: bool) -> Pick {
        Pick {
            second,
            timing: None,
            measuring: false,
        }
    }

    /// The strategy of a call of class `slot` in `table` under `auto`,
    /// when `may_time` (not while another of the call's strategies is
    /// timed, so that two measurements do not mix): the strategy its
    /// measurement or re-check takes next, timed, or the class's verdict,
    /// counted. When not `may_time`: the verdict once the class has one,
    /// else `unmeasured()`.
    pub(crate) fn measured<const N: usize>(
        table: &'static TwoWays<N>,
        slot: usize,
        may_time: bool,
        unmeasured: impl FnOnce() -> bool,
    ) -> Pick {
        if !may_time {
            let second = match table.settled(slot) {
                true => table.verdict(slot),
                false => unmeasured(),
            };
            return Pick::fixed(second);
        }
        Pick {
            second: table.second(slot),
            timing: Some((table, slot, Instant::now())),
            measuring: table.measuring(slot),
        }
    }

    /// Whether this call's time joins a measurement (or a re-check), so
    /// that the call's other choices take theirs untimed.
    pub(crate) fn is_timed(&self) -> bool {
        self.measuring
    }

    /// The slot of the class this call's time joins, if it is timed.
    #[cfg(test)]
    pub(crate) fn timed_slot(&self) -> Option<usize> {
        self.timing.map(|(_, slot, _)| slot)
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(crate) fn done(self, out_bytes: usize) {
        if let Some((table, slot, started)) = self.timing {
            table.record(slot, self.second, out_bytes, started.elapsed());
        }
    }
}

impl std::fmt::Debug for Pick {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pick")
            .field("second", &self.second)
            .field("timed", &self.is_timed())
            .finish()
    }
}

/// Sizes by powers of two from `2^min_log2` on, in `classes` classes; the
/// first and the last also hold everything below and above.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Log2Classes {
    pub min_log2: u32,
    pub classes: usize,
}

impl Log2Classes {
    /// The class of size `n`.
    fn of(self, n: usize) -> usize {
        let top = self.min_log2 + self.classes as u32 - 1;
        (n.max(1).ilog2().clamp(self.min_log2, top) - self.min_log2) as usize
    }

    /// The smallest size of class `class`.
    fn bytes(self, class: usize) -> u64 {
        1 << (self.min_log2 + class as u32)
    }
}

/// Classes of calls by two sizes, each by powers of two, and whether the
/// call is split among tasks: their slots in a [`TwoWays`] table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SizeClasses {
    pub first: Log2Classes,
    pub second: Log2Classes,
}

impl SizeClasses {
    /// The number of classes (and slots).
    pub(crate) const fn len(self) -> usize {
        self.first.classes * self.second.classes * 2
    }

    /// The slot of a call with sizes `first` and `second` on `tasks` tasks.
    pub(crate) fn slot(self, first: usize, second: usize, tasks: usize) -> usize {
        let sizes = self.first.of(first) * self.second.classes + self.second.of(second);
        sizes * 2 + usize::from(tasks > 1)
    }

    /// The smallest two sizes of the class in `slot`, and whether it is split.
    pub(crate) fn sizes(self, slot: usize) -> (u64, u64, bool) {
        let sizes = slot / 2;
        (
            self.first.bytes(sizes / self.second.classes),
            self.second.bytes(sizes % self.second.classes),
            slot % 2 == 1,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Record a run of calls of the first strategy, then one of the
    /// second, of class `slot`, each writing `bytes` in the time given,
    /// checking before each that the class is still measuring and gives
    /// the call that strategy.
    fn replay_measuring<const N: usize>(
        measured: &TwoWays<N>,
        slot: usize,
        bytes: usize,
        [first, second]: [&[Duration]; 2],
    ) {
        let calls = first.iter().map(|&t| (false, t));
        for (second, elapsed) in calls.chain(second.iter().map(|&t| (true, t))) {
            assert!(!measured.settled(slot));
            assert_eq!(measured.second(slot), second);
            measured.record(slot, second, bytes, elapsed);
        }
    }

    #[test]
    fn size_classes_are_powers_of_two_clamped_to_their_ranges_with_one_slot_each() {
        let classes = SizeClasses {
            first: Log2Classes {
                min_log2: 20,
                classes: 14,
            },
            second: Log2Classes {
                min_log2: 8,
                classes: 10,
            },
        };
        let w8 = classes.slot(32 << 20, 512, 1);
        assert_eq!(classes.sizes(w8), (32 << 20, 512, false));
        assert_eq!(
            classes.sizes(classes.slot((64 << 20) - 1, 1023, 2)),
            (32 << 20, 512, true)
        );
        // Past either end, the end class.
        assert_eq!(classes.sizes(classes.slot(0, 0, 0)), (1 << 20, 256, false));
        let huge = classes.slot(usize::MAX, usize::MAX, 64);
        assert_eq!(classes.sizes(huge), (1 << 33, 1 << 17, true));
        assert_eq!(huge, classes.len() - 1);
        for slot in 0..classes.len() {
            let (first, second, split) = classes.sizes(slot);
            let tasks = if split { 2 } else { 1 };
            assert_eq!(classes.slot(first as usize, second as usize, tasks), slot);
        }
    }

    #[test]
    fn each_strategy_runs_in_turn_its_first_call_uncounted_then_the_faster_is_kept() {
        let measured = TwoWays::<4>::new();
        let ms = Duration::from_millis;
        // Three calls of the first, three of the second; the first call of
        // each run (50 ms: cold caches) is not counted, and the second is
        // faster per byte in the calls that are.
        let (first, second) = ([50, 9, 8].map(ms), [50, 7, 6].map(ms));
        replay_measuring(&measured, 2, 32 << 20, [&first, &second]);
        assert!(measured.second(2) && measured.settled(2) && !measured.settled(0));
        // Fixed from now on: slower calls of the kept strategy change nothing.
        measured.record(2, true, 32 << 20, ms(50));
        assert!(measured.second(2));
        let timed = measured.timed();
        assert_eq!(timed.len(), 1);
        assert_eq!((timed[0].slot, timed[0].calls), (2, [3, 3]));
        assert_eq!(timed[0].second, Some(true));
        // 6 ms over 32 MiB: 178 ps a byte; 8 ms: 238.
        assert_eq!(timed[0].best_ps_per_byte, [238, 178]);
        // Another class is measured on its own, and may choose otherwise:
        // the first's uncounted call was slow, its counted ones fast.
        assert!(!measured.second(0));
        for (second, elapsed) in [(false, 9), (false, 1), (false, 1)] {
            measured.record(0, second, 4 << 20, ms(elapsed));
        }
        for (second, elapsed) in [(true, 2), (true, 2), (true, 2)] {
            measured.record(0, second, 4 << 20, ms(elapsed));
        }
        assert!(measured.settled(0) && !measured.second(0));
        assert!(measured.second(2));
        assert_eq!(measured.timed().len(), 2);
        assert_eq!(CALLS_TO_SETTLE, 6);
    }

    #[test]
    fn runs_until_settled_go_on_while_each_call_beats_the_best_by_the_margin() {
        let measured = TwoWays::<3>::until_settled(5);
        let us = Duration::from_micros;
        // Ordinary stores after streamed calls: 2200 (uncounted), 2100,
        // 1400, 1200 (each 5% or more below the best), 1150 (4%): five
        // calls. Then the second: 3800 (uncounted), 1400, 1420: three.
        let first = [2200, 2100, 1400, 1200, 1150].map(us);
        let second = [3800, 1400, 1420].map(us);
        replay_measuring(&measured, 0, 1 << 20, [&first, &second]);
        assert!(measured.settled(0) && !measured.second(0));
        assert_eq!(measured.timed()[0].calls, [5, 3]);
        assert_eq!(measured.timed()[0].second, Some(false));
        // A run that keeps getting faster ends at the most calls allowed.
        for k in 0..MAX_CALLS_EACH {
            assert!(!measured.second(1), "call {k} takes the first");
            measured.record(1, false, 1 << 20, us(2000 - 200 * u64::from(k)));
        }
        assert!(measured.second(1) && !measured.settled(1));
        // A slower call ends a run at three, as in tables of fixed runs.
        for elapsed in [900, 800, 900] {
            measured.record(2, false, 1 << 20, us(elapsed));
        }
        assert!(measured.second(2));
    }

    #[test]
    fn with_a_margin_the_second_is_kept_only_when_that_much_faster() {
        let measured = TwoWays::<2>::keeping_the_first_within(10);
        let us = Duration::from_micros;
        // 8% faster: the first stays; 20% faster: the second is kept.
        for (slot, second_time) in [(0, 920), (1, 800)] {
            for (second, elapsed) in [(false, 1000), (true, second_time)] {
                for _ in 0..CALLS_EACH {
                    measured.record(slot, second, 1 << 20, us(elapsed));
                }
            }
        }
        assert!(measured.settled(0) && measured.settled(1));
        assert!(!measured.second(0));
        assert!(measured.second(1));
        // Untimed, the first strategy's best is u64::MAX: no overflow.
        let fresh = TwoWays::<1>::keeping_the_first_within(10);
        assert!(!fresh.second(0));
    }

    #[test]
    fn a_pick_is_timed_until_its_class_settles_then_takes_the_verdict() {
        static TABLE: TwoWays<2> = TwoWays::new();
        let mut taken = Vec::new();
        for elapsed in [90, 9, 8, 70, 7, 6] {
            let pick = Pick::measured(&TABLE, 1, true, || unreachable!());
            assert!(pick.is_timed());
            taken.push(pick.second);
            // Time as if the call had taken `elapsed` ms.
            let (table, slot, _) = pick.timing.unwrap();
            table.record(slot, pick.second, 1 << 20, Duration::from_millis(elapsed));
        }
        assert_eq!(taken, [false, false, false, true, true, true]);
        let settled = Pick::measured(&TABLE, 1, true, || unreachable!());
        assert!(settled.second && !settled.is_timed());
        // Not allowed to time, an unsettled class takes what it is told.
        let held = Pick::measured(&TABLE, 0, false, || true);
        assert!(held.second && !held.is_timed());
        let fixed = Pick::fixed(false);
        assert!(!fixed.second && !fixed.is_timed());
        fixed.done(1 << 20);
        assert_eq!(TABLE.timed().len(), 1);
    }

    #[test]
    fn re_checks_start_at_16_64_256_calls_after_settling_loser_twice_then_winner() {
        let taken: Vec<(u32, Recheck)> = (0..1100)
            .filter_map(|n| recheck(n).map(|call| (n, call)))
            .collect();
        let starts = [16, 64, 256, 1024];
        let expected: Vec<(u32, Recheck)> = starts
            .iter()
            .flat_map(|&n| {
                [
                    (n, Recheck::LoserFirst),
                    (n + 1, Recheck::Loser),
                    (n + 3, Recheck::Winner),
                ]
            })
            .collect();
        assert_eq!(taken, expected);
        assert_eq!(recheck(1 << 30), Some(Recheck::LoserFirst));
        assert_eq!(recheck((1 << 30) + 3), Some(Recheck::Winner));
        assert_eq!(recheck(1 << 29), None);
        assert_eq!(recheck(u32::MAX), None);
    }

    /// Record `calls` calls of class 0 as its table hands them out, the
    /// loser's taking `loser` and the winner's `winner` microseconds on
    /// 1 MiB; returns the strategy each took.
    fn replay_settled(measured: &TwoWays<1>, calls: u32, [loser, winner]: [u64; 2]) -> Vec<bool> {
        let kept = measured.timed()[0].second.unwrap();
        (0..calls)
            .map(|_| {
                let second = measured.second(0);
                let us = if second == kept { winner } else { loser };
                measured.record(0, second, 1 << 20, Duration::from_micros(us));
                second
            })
            .collect()
    }

    #[test]
    fn a_verdict_made_in_a_slow_stretch_turns_when_a_re_check_times_the_loser_faster() {
        let measured = TwoWays::<1>::new();
        let us = Duration::from_micros;
        // The second strategy's two timed calls fall in a slow stretch:
        // the first is kept.
        let (first, second) = ([900, 300, 300].map(us), [900, 500, 500].map(us));
        replay_measuring(&measured, 0, 1 << 20, [&first, &second]);
        assert!(measured.settled(0) && !measured.second(0));
        // Sixteen calls keep it, untimed; the next two take the second
        // (the first of them uncounted, however fast), then the first
        // again, its second call timed.
        let taken = replay_settled(&measured, 16, [100, 300]);
        assert_eq!(taken, [false; 16]);
        assert!(measured.second(0) && measured.measuring(0));
        measured.record(0, true, 1 << 20, us(100));
        assert_eq!(measured.timed()[0].best_ps_per_byte, [286, 476]);
        assert!(measured.second(0) && measured.measuring(0));
        // 250 us: over 5% below the first's 300, the second is kept.
        measured.record(0, true, 1 << 20, us(250));
        assert_eq!(measured.timed()[0].calls, [3, 5]);
        assert_eq!(measured.timed()[0].second, Some(true));
        assert_eq!(measured.timed()[0].best_ps_per_byte, [286, 238]);
        // From then on its re-checks take the first: at 64 it is slower
        // and changes nothing; the kept one's timed call at 67 counts.
        let taken = replay_settled(&measured, 64 - 18 + 4, [400, 240]);
        assert!(taken[..46].iter().all(|&second| second));
        assert_eq!(taken[46..], [false, false, true, true]);
        assert_eq!(measured.timed()[0].calls, [5, 7]);
        assert_eq!(measured.timed()[0].best_ps_per_byte, [286, 228]);
        assert_eq!(measured.timed()[0].second, Some(true));
    }

    #[test]
    fn a_re_check_turns_the_verdict_only_past_its_margin_and_the_tables() {
        let us = Duration::from_micros;
        // Kept first at 300; the second's re-check at 290 (3% lower) and
        // then at 280 (7%): the first stays, then the second is kept.
        let measured = TwoWays::<1>::new();
        replay_measuring(
            &measured,
            0,
            1 << 20,
            [&[300; 3].map(us), &[400; 3].map(us)],
        );
        replay_settled(&measured, 20, [290, 300]);
        assert_eq!(measured.timed()[0].second, Some(false));
        replay_settled(&measured, 48, [280, 300]);
        assert_eq!(measured.timed()[0].second, Some(true));
        // A table that keeps the first within 10%: a re-check timing the
        // second 7% lower does not turn it; 12% lower does.
        let within = TwoWays::<1>::keeping_the_first_within(10);
        replay_measuring(&within, 0, 1 << 20, [&[300; 3].map(us), &[295; 3].map(us)]);
        assert_eq!(within.timed()[0].second, Some(false));
        replay_settled(&within, 20, [280, 300]);
        assert_eq!(within.timed()[0].second, Some(false));
        replay_settled(&within, 48, [264, 300]);
        assert_eq!(within.timed()[0].second, Some(true));
    }

    #[test]
    fn a_settled_pick_is_counted_untimed_and_a_re_checking_one_is_timed() {
        static TABLE: TwoWays<1> = TwoWays::new();
        let ms = Duration::from_millis;
        for (second, elapsed) in [(false, 9), (false, 2), (false, 2)] {
            TABLE.record(0, second, 1 << 20, ms(elapsed));
        }
        for (second, elapsed) in [(true, 9), (true, 3), (true, 3)] {
            TABLE.record(0, second, 1 << 20, ms(elapsed));
        }
        let mut taken = Vec::new();
        for _ in 0..18 {
            let pick = Pick::measured(&TABLE, 0, true, || unreachable!());
            taken.push((pick.second, pick.is_timed()));
            pick.done(1 << 20);
        }
        let verdict = (false, false);
        let mut expected = vec![verdict; 16];
        expected.extend([(true, true), (true, true)]);
        assert_eq!(taken, expected);
        // The re-check's timed call took microseconds against the first
        // strategy's 2 ms: the second is kept. A call not allowed to time
        // takes the verdict, untimed.
        let held = Pick::measured(&TABLE, 0, false, || unreachable!());
        assert!(held.second && !held.is_timed());
    }

    #[test]
    fn a_class_still_measuring_reports_no_choice() {
        let measured = TwoWays::<1>::new();
        measured.record(0, false, 1 << 20, Duration::from_micros(100));
        let timed = measured.timed();
        assert_eq!(timed[0].calls, [1, 0]);
        assert_eq!(timed[0].second, None);
        assert_eq!(timed[0].best_ps_per_byte[1], u64::MAX);
    }

    #[test]
    fn a_settled_class_reports_its_calls_since_settling() {
        let measured = TwoWays::<1>::new();
        let ms = Duration::from_millis;
        replay_measuring(
            &measured,
            0,
            32 << 20,
            [&[50, 9, 8].map(ms), &[50, 7, 6].map(ms)],
        );
        let line = |measured: &TwoWays<1>| {
            let timed = measured.timed().remove(0);
            CallTiming::new("stores", "c".into(), ["cached", "streamed"], timed).to_string()
        };
        assert_eq!(
            line(&measured),
            "stores c: streamed (cached 238 ps/B, streamed 178 ps/B)"
        );
        for _ in 0..3 {
            measured.record(0, true, 32 << 20, ms(6));
        }
        assert_eq!(
            line(&measured),
            "stores c: streamed (cached 238 ps/B, streamed 178 ps/B; 3 calls since settling)"
        );
    }
}
