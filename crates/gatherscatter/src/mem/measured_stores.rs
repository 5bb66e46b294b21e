//! Which stores a copy kernel writes its output with, where the size of the
//! output alone cannot tell: decided by timing the calls themselves
//! ([`super::measured`]).
//!
//! Under `stores=auto`:
//! - runs shorter than a cache line, and outputs under
//!   [`MEASURED_MIN_BYTES`], take ordinary stores;
//! - outputs of at least [`streaming_min_bytes`] (a quarter of the
//!   last-level cache) take streaming stores, except blocks of
//!   [`CACHED_MIN_BLOCK_BYTES`] or more whose source and output fit in that
//!   cache together;
//! - everything between, and those long in-cache blocks, is measured: the
//!   first calls of each class (kernel, output size and run size by powers
//!   of two, one task or several) take ordinary stores, then streaming
//!   ones, three calls each in a row (the first of each uncounted), and
//!   the class keeps the faster. Where the source and the output together
//!   fit in the last-level cache (counting at most 32 MiB of it, and never
//!   less than a quarter), each run goes on, up to six calls, while its
//!   calls still get 5% faster ([`SETTLE_PERCENT`]).
//!
//! Why measure: whether an output stays in cache depends on how much of a
//! shared cache the process really gets, which the size the CPU reports
//! does not tell. A 2-vCPU slice of an Intel Xeon family 6 model 207
//! reports the whole socket's 300 MiB L3, so the size rule alone put the
//! streaming threshold at 75 MiB; yet a 64 MiB row gather (W1, from
//! Python, one thread) took 15.4-16.2 ms with ordinary stores and
//! 11.1-12.0 streamed. On a 2-vCPU slice of an AMD EPYC family 25 model 1
//! with a 32 MiB L3, 16 MiB of 64 KiB blocks from a 16 MiB source took
//! 2.1-2.3 ms with ordinary stores and 1.3-1.5 streamed, where on a Zen 5
//! (family 26 model 2) with the same L3 ordinary stores won (0.43 ms
//! against 0.49).

use super::cpu::last_level_cache_bytes;
use super::knobs::{self, Stores};
use super::measured::{CallTiming, Log2Classes, Pick, SizeClasses, TwoWays};
use super::stream::{streaming_min_bytes, STREAMING_MIN_RUN};

/// Outputs under this size take ordinary stores under `auto`, unmeasured:
/// the caller most likely reads them next from cache, and a call this
/// short times poorly.
pub(crate) const MEASURED_MIN_BYTES: usize = 1 << 20;

/// Blocks at least this long, from a source that fits in the last-level
/// cache with the output, are measured under `auto` whatever the output's
/// size, where a repeated call may read its source from cache and leave
/// its output there. 16 MiB of output from a 16 MiB source on the 32 MiB
/// L3 of a Zen 5 (family 26 model 2), one thread / two threads: blocks of
/// 64 KiB 0.43 / 0.25 ms with ordinary stores against 0.49 / 0.44
/// streamed, 16 KiB 0.43 / 0.25 against 0.43 / 0.40; blocks of 4 KiB
/// still stream (0.46 / 0.42 against 0.61 / 0.32 with ordinary stores),
/// as does everything past the cache (32 MiB from 32 MiB: 64 KiB blocks
/// 1.06 / 0.98 ms against 1.10 / 0.85).
pub(crate) const CACHED_MIN_BLOCK_BYTES: usize = 16 << 10;

/// The `stores` knob in force for a call that writes `out_bytes`. An
/// output under [`MEASURED_MIN_BYTES`] while every knob is `auto` gets
/// `Auto` without decoding the tuning: small calls ask on every call (the
/// tiny calls of `examples/tiny_call_loop.rs`, callgrind, 2026-12-03:
/// TensorScatter 1521 instructions a call with the decode, 1497 without;
/// ScatterND 1542 and 1518).
pub(crate) fn stores_in_force(out_bytes: usize) -> Stores {
    if out_bytes < MEASURED_MIN_BYTES && knobs::auto_in_force() {
        return Stores::Auto;
    }
    knobs::in_force().stores
}

/// The kernels whose stores are measured; each has classes of its own, as
/// the same sizes cost each a different time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    /// Gather's copies of whole blocks.
    Blocks,
    /// GatherElements' vector loops along the last axis.
    ElementRows,
    /// GatherElements' vector loop across short rows along the last axis.
    ElementShortRows,
    /// GatherND's copies of whole slices.
    NdSlices,
    /// ScatterND's overwrites, written as a gather of slices when
    /// streamed.
    NdOverwrites,
    /// ScatterND's reductions, each covered slice folded in a buffer when
    /// streamed.
    NdFolds,
    /// TensorScatter's copies of the past cache with the update windows,
    /// into a new output or a caller's buffer.
    CacheWindows,
}

impl Writer {
    const ALL: [Writer; 7] = [
        Writer::Blocks,
        Writer::ElementRows,
        Writer::ElementShortRows,
        Writer::NdSlices,
        Writer::NdOverwrites,
        Writer::NdFolds,
        Writer::CacheWindows,
    ];

    fn name(self) -> &'static str {
        match self {
            Writer::Blocks => "Gather",
            Writer::ElementRows => "GatherElements",
            Writer::ElementShortRows => "GatherElements short rows",
            Writer::NdSlices => "GatherND",
            Writer::NdOverwrites => "ScatterND",
            Writer::NdFolds => "ScatterND reductions",
            Writer::CacheWindows => "TensorScatter",
        }
    }
}

/// The sizes of one call that its stores depend on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizes {
    /// The output, in bytes.
    pub out_bytes: usize,
    /// The contiguous runs it is written in (`usize::MAX` for a kernel
    /// that aligns its own runs of streaming stores).
    pub run_bytes: usize,
    /// The data read from.
    pub src_bytes: usize,
}

/// Classes by output size (1 MiB and up, the last class holding
/// everything larger) and run size (a cache line and up), one task or
/// several.
const CLASSES: SizeClasses = SizeClasses {
    first: Log2Classes {
        min_log2: 20,
        classes: 12,
    },
    second: Log2Classes {
        min_log2: 6,
        classes: 12,
    },
};

/// For calls whose source and output fit in the cache
/// ([`settles_in_cache`]), a run of calls with one kind of stores
/// goes on while each call beats the run's best by this many percent
/// ([`TwoWays::until_settled`]). In runs of three, ordinary stores were
/// timed before an output in cache had settled there: a 16 MiB Gather of
/// 4 KiB blocks from a 16 MiB source on an Intel Xeon family 6 model 167
/// (2 vCPUs, 480 MiB L3) kept streaming stores at 1.16-1.22 ms a call from
/// Python; with runs until settled it keeps ordinary ones, 1.04-1.07 ms
/// (old and new wheels in alternating processes), as fast as `np.take`.
const SETTLE_PERCENT: u64 = 5;

/// This process's measurements, one table per [`Writer`]: ordinary stores
/// first, streaming second; runs of three calls.
static MEASURED: [TwoWays<{ CLASSES.len() }>; Writer::ALL.len()] =
    [const { TwoWays::new() }; Writer::ALL.len()];

/// Like [`MEASURED`], for calls that [`settles_in_cache`]: runs until
/// settled.
static MEASURED_IN_CACHE: [TwoWays<{ CLASSES.len() }>; Writer::ALL.len()] =
    [const { TwoWays::until_settled(SETTLE_PERCENT) }; Writer::ALL.len()];

/// Whether a call's source and output fit together in the part of the
/// last-level cache that repeated calls may keep them in once it has taken
/// them in ([`settle_max_bytes`]).
fn settles_in_cache(sizes: Sizes) -> bool {
    sizes.out_bytes.saturating_add(sizes.src_bytes) <= settle_max_bytes()
}

/// Most bytes of source and output together whose stores are timed in runs
/// until settled: the whole last-level cache up to [`SETTLE_MAX_CACHE`],
/// and never less than a quarter of it.
///
/// Why the whole of a 32 MiB L3: a 16 MiB Gather of 64 KiB blocks from a
/// 16 MiB source on two threads, from Python, on a 2-vCPU AMD EPYC family
/// 25 model 17 (Zen 4): ordinary stores settle over four to six calls in a
/// row after streaming ones (0.70, 0.66, 0.60, 0.56, 0.55, ..., 0.45 ms),
/// to 0.42-0.50 ms against 0.60-0.64 streamed; runs of three timed them at
/// 36-38 ps a byte against 35 streamed, and the class kept streaming
/// stores (0.61 ms, onnxruntime 0.45).
///
/// Why no more: runs until settled cost calls with the slower stores, and
/// a VM may report a cache far larger than its share. On an Intel Xeon
/// family 6 model 167 that reports a 480 MiB L3, a 64 MiB row gather from
/// a 64 MiB source (W1) timed ordinary stores in longer runs, and its
/// median under the peer harness went 5.2 -> 5.9 ms on one thread; there
/// the quarter (120 MiB) stays the limit.
fn settle_max_bytes() -> usize {
    last_level_cache_bytes()
        .min(SETTLE_MAX_CACHE)
        .max(streaming_min_bytes())
}

/// The largest last-level cache [`settle_max_bytes`] counts whole: the L3
/// of one core complex on the AMD EPYCs measured (Zen 3, 4 and 5).
const SETTLE_MAX_CACHE: usize = 32 << 20;

fn table(writer: Writer, in_cache: bool) -> &'static TwoWays<{ CLASSES.len() }> {
    if in_cache {
        &MEASURED_IN_CACHE[writer as usize]
    } else {
        &MEASURED[writer as usize]
    }
}

/// The stores one call takes, and its place in its class's measurement.
#[derive(Debug)]
pub(crate) struct StoreChoice(Pick);

impl StoreChoice {
    /// Ordinary stores, untimed: for calls whose stores make no choice
    /// (empty outputs, elements that are not plain bytes).
    pub(crate) const ORDINARY: StoreChoice = StoreChoice(Pick::fixed(false));

    /// The stores of a call of `writer` with `sizes` under `stores`. Under
    /// `auto`, a call in the measured range takes its class's verdict once
    /// made; before that it is timed when `may_time` (false while another
    /// of the call's strategies is being timed, so that two measurements do
    /// not mix, and for copies where the stores make no difference), and
    /// otherwise takes the size rule. `tasks` gives the number of tasks the
    /// call is split into, asked only for a call in the measured range.
    /// Under Miri, which cannot time, no class is ever measured: the size
    /// rule (and the thread pool is not asked for its size).
    pub(crate) fn choose(
        writer: Writer,
        stores: Stores,
        sizes: Sizes,
        tasks: impl FnOnce() -> usize,
        may_time: bool,
    ) -> Self {
        let fixed = |streaming| StoreChoice(Pick::fixed(streaming));
        match stores {
            Stores::Cached => return fixed(false),
            Stores::Streaming => return fixed(true),
            Stores::Auto => {}
        }
        if let Some(streaming) = auto_by_size(sizes) {
            return fixed(streaming);
        }
        let by_size = || sizes.out_bytes >= streaming_min_bytes();
        if cfg!(miri) {
            return fixed(by_size());
        }
        let slot = CLASSES.slot(sizes.out_bytes, sizes.run_bytes, tasks());
        let table = table(writer, settles_in_cache(sizes));
        StoreChoice(Pick::measured(table, slot, may_time, by_size))
    }

    /// Streaming (non-temporal) stores rather than ordinary ones.
    pub(crate) fn streaming(&self) -> bool {
        self.0.second
    }

    /// Whether this call's time joins a measurement.
    #[cfg(test)]
    pub(crate) fn is_timed(&self) -> bool {
        self.0.is_timed()
    }

    /// The call has written `out_bytes`: its time joins its class's.
    pub(crate) fn done(self, out_bytes: usize) {
        self.0.done(out_bytes);
    }
}

/// The stores `auto` takes from the sizes alone, or `None` for a call
/// whose stores are measured.
fn auto_by_size(sizes: Sizes) -> Option<bool> {
    let Sizes {
        out_bytes,
        run_bytes,
        src_bytes,
        ..
    } = sizes;
    if run_bytes < STREAMING_MIN_RUN || out_bytes < MEASURED_MIN_BYTES {
        return Some(false);
    }
    let in_cache = run_bytes >= CACHED_MIN_BLOCK_BYTES
        && out_bytes.saturating_add(src_bytes) <= last_level_cache_bytes();
    if out_bytes >= streaming_min_bytes() && !in_cache {
        return Some(true);
    }
    None
}

/// How the report names the class in `slot`: `Gather 64 MiB outputs by
/// 1 KiB runs, split` (GatherElements' vector loops align their own runs,
/// so its classes name none), with `, in cache` for classes that
/// [`settles_in_cache`].
fn describe(writer: Writer, slot: usize, in_cache: bool) -> String {
    let (output, run, split) = CLASSES.sizes(slot);
    let runs = match run {
        _ if matches!(writer, Writer::ElementRows | Writer::ElementShortRows) => String::new(),
        r if r >= 1 << 10 => format!(" by {} KiB runs", r >> 10),
        r => format!(" by {r} B runs"),
    };
    format!(
        "{} {} MiB outputs{runs}, {}{}",
        writer.name(),
        output >> 20,
        if split { "split" } else { "one task" },
        if in_cache { ", in cache" } else { "" }
    )
}

/// The classes measured so far, for the report.
pub(crate) fn timings() -> Vec<CallTiming> {
    let tables = Writer::ALL
        .into_iter()
        .flat_map(|writer| [(writer, false), (writer, true)]);
    let each = tables.flat_map(|(writer, in_cache)| {
        let describe = move |slot| describe(writer, slot, in_cache);
        table(writer, in_cache).report("stores", ["cached", "streaming"], describe)
    });
    each.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(out_bytes: usize, run_bytes: usize, src_bytes: usize) -> Sizes {
        Sizes {
            out_bytes,
            run_bytes,
            src_bytes,
        }
    }

    #[test]
    fn auto_measures_between_the_small_outputs_and_the_streaming_threshold() {
        let threshold = streaming_min_bytes();
        let cache = last_level_cache_bytes();
        // Short runs and small outputs: ordinary stores.
        assert_eq!(auto_by_size(sizes(threshold * 2, 32, 0)), Some(false));
        assert_eq!(auto_by_size(sizes((1 << 20) - 1, 4096, 0)), Some(false));
        // Between: measured.
        assert_eq!(auto_by_size(sizes(1 << 20, 64, 1 << 20)), None);
        assert_eq!(auto_by_size(sizes(threshold - 1, 1024, 0)), None);
        // Past the threshold: streaming, save long blocks within the cache.
        assert_eq!(auto_by_size(sizes(threshold, 1024, 0)), Some(true));
        assert_eq!(auto_by_size(sizes(threshold, 16 << 10, cache)), Some(true));
        let in_cache = sizes(threshold, 16 << 10, cache - threshold);
        assert_eq!(auto_by_size(in_cache), None);
    }

    #[test]
    fn runs_last_until_settled_only_where_source_and_output_fit_the_settling_part_of_the_cache() {
        let limit = settle_max_bytes();
        assert!(limit >= streaming_min_bytes());
        assert!(limit <= last_level_cache_bytes().max(streaming_min_bytes()));
        assert!(limit <= SETTLE_MAX_CACHE.max(streaming_min_bytes()));
        assert!(settles_in_cache(sizes(limit / 2, 4096, limit / 2)));
        assert!(!settles_in_cache(sizes(limit / 2, 4096, limit / 2 + 1)));
        assert!(!settles_in_cache(sizes(usize::MAX, 4096, usize::MAX)));
        assert!(!std::ptr::eq(
            table(Writer::Blocks, true),
            table(Writer::Blocks, false)
        ));
    }

    #[test]
    fn a_forced_knob_is_never_timed_and_auto_times_only_when_allowed() {
        let call = sizes(streaming_min_bytes() - 1, 4096, 0);
        let forced = StoreChoice::choose(Writer::NdSlices, Stores::Streaming, call, || 1, true);
        assert!(forced.streaming() && !forced.is_timed());
        let forced = StoreChoice::choose(Writer::NdSlices, Stores::Cached, call, || 1, true);
        assert!(!forced.streaming() && !forced.is_timed());
        // Not allowed to time: the size rule (ordinary stores below it).
        let held = StoreChoice::choose(Writer::NdSlices, Stores::Auto, call, || 1, false);
        assert!(!held.streaming() && !held.is_timed());
        let timed = StoreChoice::choose(Writer::NdSlices, Stores::Auto, call, || 1, true);
        assert_eq!(timed.is_timed(), !cfg!(miri));
    }

    #[test]
    fn classes_are_named_by_kernel_output_and_run_size_and_split() {
        let w1 = CLASSES.slot(64 << 20, 1024, 1);
        assert_eq!(
            describe(Writer::Blocks, w1, false),
            "Gather 64 MiB outputs by 1 KiB runs, one task"
        );
        let odd = CLASSES.slot((32 << 20) - 1, 127, 2);
        assert_eq!(
            describe(Writer::NdSlices, odd, true),
            "GatherND 16 MiB outputs by 64 B runs, split, in cache"
        );
        let folds = CLASSES.slot(64 << 20, 1024, 2);
        assert_eq!(
            describe(Writer::NdFolds, folds, false),
            "ScatterND reductions 64 MiB outputs by 1 KiB runs, split"
        );
        let rows = CLASSES.slot(1 << 20, usize::MAX, 1);
        assert_eq!(
            describe(Writer::ElementRows, rows, false),
            "GatherElements 1 MiB outputs, one task"
        );
        assert_eq!(
            describe(Writer::ElementShortRows, rows, false),
            "GatherElements short rows 1 MiB outputs, one task"
        );
    }
}
