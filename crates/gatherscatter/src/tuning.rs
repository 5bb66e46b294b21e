//! Kernel strategies: what the library chooses on the running CPU, and the
//! knobs that force a choice.
//!
//! Where two strategies compete, the kernels choose per call from the
//! CPU's measured behaviour and the call's sizes ([`report`] says what
//! they would choose here). Each choice has a knob in [`Tuning`], for tests
//! (which run every strategy on every CPU) and benchmarks. Forcing a
//! strategy never changes a result, only the time it takes:
//!
//! | knob | values | `auto` chooses by |
//! |---|---|---|
//! | `stores` | `cached`, `streaming` | Gather, GatherND, ScatterND (slices of 256 bytes or more), TensorScatter's copy of the past cache (fresh or into a buffer; streamed, each cache row is written once in order, windows included) and GatherElements' vector loops along the last axis: ordinary stores under 1 MiB of output or for runs under 64 bytes, streaming from a quarter of the last-level cache (save blocks of 16 KiB or more whose source and output fit in that cache together); between, what the first calls of each class of kernel, output size, run size and task count measured faster. The other kernels: the size rule alone |
//! | `word_gather` | `scalar`, `vector` | Gather's one-element blocks (4- and 8-byte words): for outputs from 1 MiB, what the first calls of each class of word size, slab size and task count measured faster, the scalar loop below. GatherElements along the last axis (4- and 8-byte words) and along an outer one (1- to 8-byte words): for outputs from 1 MiB, what the first calls of each class of axis, word size, index type, data row or plane size and task count measured faster; for smaller calls, that verdict once made, before it a measurement of both last-axis loops on first use, per word size and index type (ties to `vector`; 1- and 2-byte words along an outer axis take `vector`) |
//! | `block_order` | `output`, `source` | source order for sources past 1.5x the last-level cache (rows of 256 bytes or more, few tasks); below that, from 2 MiB sources and 1 MiB outputs, the order its first calls measured faster for each class of source size, row size and task count |
//! | `row_fetch` | `read`, `prefetch` | GatherElements along the last axis, vector loops, data rows of 8-128 KiB, outputs from 1 MiB: what the first calls of each class of row size, index type and task count measured faster |
//! | `stream_fetch` | `ahead`, `hardware` | ScatterElements' row loop (and ScatterReduce's calls through it) along the last axis, outputs from 1 MiB: whether its index and update streams are asked for ahead in software or left to the hardware prefetchers, what the first calls of each class of element size, index type, index row length and task count measured faster, `ahead` only when 10% faster; `ahead` along outer axes and for smaller outputs (ScatterReduce's own kernel, for mean or without `include_self`, always asks ahead); GatherElements along an outer axis, outputs from 1 MiB: whether its index stream is asked for ahead, what the first calls of each class of word size, index type, plane read and task count measured faster, `ahead` for smaller outputs |
//! | `block_prefetch` | `l1`, `l2` | Gather's and GatherND's streamed row copies (the outputs `stores` streams), sources from 2 MiB and outputs from 1 MiB: where each row is asked for ahead, what the first calls of each class of source size, row size, task count and row order measured faster (output order's before the row order is timed); L2 in output order past 1.5x the last-level cache and L1 otherwise for smaller copies; L1 about 8 KiB ahead, L2 32 KiB |
//! | `plane_reads` | `packed`, `in_place` | GatherElements along an outer axis, calls split by rows whose data planes (the axis times the dims after it) are over 32 KiB and read by consecutive rows: for planes up to the size of L2 and outputs from 1 MiB, what the first calls of each class of word size, plane size, index type and task count measured faster; otherwise, and while the call's word loop is timed, in place where a strip of an eighth of L2 would span the whole row |
//! | `bag_fold` | `memory`, `registers` | EmbeddingBag's f32 sums: registers wherever they apply (AVX2, rows of a multiple of 8, no per-sample weights) |
//!
//! Set one process-wide with [`set_global`] or the `GATHERSCATTER_TUNING`
//! environment variable (`stores=cached,word_gather=scalar`; check it at
//! start-up with [`Tuning::from_env`], as the kernels read a bad value as
//! unset), or for one thread's calls with [`scoped`].
//!
//! ```
//! use gatherscatter::tuning::{self, Tuning, WordGather};
//! use gatherscatter::GatherElements;
//! use gatherscatter::TypedTensor;
//!
//! let data = TypedTensor::new(vec![2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
//! let indices = TypedTensor::new(vec![2, 2], vec![2i64, 0, 1, 1]).unwrap();
//! let op = GatherElements::new(1);
//! let auto = op.run_typed(data.view(), indices.view()).unwrap();
//! let scalar = tuning::scoped(Tuning::AUTO.with_word_gather(WordGather::Scalar), || {
//!     op.run_typed(data.view(), indices.view()).unwrap()
//! });
//! assert_eq!(auto, scalar);
//! assert_eq!(scalar.data(), &[3.0, 1.0, 5.0, 5.0]);
//! println!("{}", tuning::report());
//! ```

use std::fmt;
use std::time::Duration;

pub use crate::mem::knobs::{
    global, in_force, scoped, set_global, BagFold, BlockOrder, BlockPrefetch, PlaneReads, RowFetch,
    Stores, StreamFetch, Tuning, WordGather, TUNING_VARIABLE,
};

pub use crate::mem::measured::CallTiming;
use crate::mem::{cpu, measured_stores, stream};
use crate::ops::blocks::{measured_orders, measured_prefetches, source_order_min_source_bytes};
use crate::ops::gather::measured_element_loops;
use crate::ops::gather_elements::word_gather;
use crate::ops::gather_elements::{
    measured_fetches, measured_index_fetches, measured_plane_reads, measured_word_loops,
};
use crate::ops::scatter_elements::measured_stream_fetches;

/// What the `auto` strategies resolve to on the running CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The tuning in force on this thread.
    pub in_force: Tuning,
    /// Whether the CPU has AVX2.
    pub avx2: bool,
    /// Whether this library was compiled with debug assertions (cargo's
    /// dev profile, the workspace's `pytest` profile that
    /// `scripts/test_all.sh` builds, or `maturin develop` without
    /// `--release`): its times are then an unoptimised build's, 10-50x
    /// slower, not the library's.
    pub debug_build: bool,
    /// The last-level cache the thresholds scale with, in bytes.
    pub last_level_cache_bytes: usize,
    /// Outputs from this size on take streaming stores (where their
    /// stores are not measured: see `stores` above).
    pub streaming_min_bytes: usize,
    /// Outputs from this size on, up to [`Report::streaming_min_bytes`],
    /// have their stores measured per class of call.
    pub stores_measured_min_bytes: usize,
    /// Gather reads sources from this size on in source order (given long
    /// rows and few tasks).
    pub source_order_min_source_bytes: usize,
    /// The first-use measurement of the word gathers, for 4- and 8-byte
    /// words, each with `i64`, `i32` and `u16` indices: empty where there
    /// is no vector loop to measure.
    pub word_gather: Vec<WordTiming>,
    /// The strategies chosen by timing this process's calls, one entry per
    /// class of call measured so far: Gather's row order (`block_order`)
    /// and stores for long blocks (`stores`) and where its streamed row
    /// copies ask for their rows (`block_prefetch`), GatherElements' loop along
    /// the last axis and along outer ones (`word_gather`) and fetch of each data row
    /// (`row_fetch`), ScatterElements' fetch of its index and update
    /// streams along the last axis (`stream_fetch`).
    pub measured: Vec<CallTiming>,
}

/// One word size's and index type's measurement: the best time of each
/// loop over the same rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WordTiming {
    /// The word size in bytes.
    pub word_bytes: usize,
    /// The index type's size in bytes (8 `i64`, 4 `i32`, 2 `u16`).
    pub index_bytes: usize,
    /// The scalar loop.
    pub scalar: Duration,
    /// The vector (gather instruction) loop.
    pub vector: Duration,
    /// Whether `auto` takes the vector loop: unless the scalar loop was at
    /// least 10% faster.
    pub vector_chosen: bool,
    /// Whether the vector loop took at least 1.5x the scalar loop's time:
    /// then `auto` takes the scalar loop for every call of this word and
    /// index size and no call times the vector one.
    pub vector_far_behind: bool,
}

/// What the `auto` strategies resolve to here, measuring the word gathers
/// first if no call has yet (a few milliseconds, once).
pub fn report() -> Report {
    let timing = |(word_bytes, index_bytes)| {
        word_gather::measured(word_bytes, index_bytes).map(|m| WordTiming {
            word_bytes,
            index_bytes,
            scalar: m.scalar,
            vector: m.vector,
            vector_chosen: m.vector_wins(),
            vector_far_behind: m.vector_far_behind(),
        })
    };
    let sizes = [4, 8].into_iter().flat_map(|w| [(w, 8), (w, 4), (w, 2)]);
    Report {
        in_force: in_force(),
        avx2: cpu::avx2_available(),
        debug_build: cfg!(debug_assertions),
        last_level_cache_bytes: cpu::last_level_cache_bytes(),
        streaming_min_bytes: stream::streaming_min_bytes(),
        stores_measured_min_bytes: measured_stores::MEASURED_MIN_BYTES,
        source_order_min_source_bytes: source_order_min_source_bytes(),
        word_gather: sizes.filter_map(timing).collect(),
        measured: measured_orders()
            .into_iter()
            .chain(measured_prefetches())
            .chain(measured_stores::timings())
            .chain(measured_word_loops())
            .chain(measured_element_loops())
            .chain(measured_fetches())
            .chain(measured_plane_reads())
            .chain(measured_stream_fetches())
            .chain(measured_index_fetches())
            .collect(),
    }
}

impl fmt::Display for Report {
    /// One line: `tuning stores=auto,... | AVX2 yes | build release |
    /// last-level cache 32 MiB: stores measured from 1 MiB, streaming from 8 MiB, source order
    /// from 48 MiB | word gather 4 B by i64 vector (scalar 20.3 us, vector
    /// 9.1 us) ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
        write!(
            f,
            "tuning {} | AVX2 {} | build {} | last-level cache {:.0} MiB: stores measured from {:.0} MiB, streaming from {:.0} MiB, source order from {:.0} MiB | word gather",
            self.in_force,
            if self.avx2 { "yes" } else { "no" },
            if self.debug_build {
                "debug (unoptimised: not for timing)"
            } else {
                "release"
            },
            mib(self.last_level_cache_bytes),
            mib(self.stores_measured_min_bytes),
            mib(self.streaming_min_bytes),
            mib(self.source_order_min_source_bytes),
        )?;
        if self.word_gather.is_empty() {
            write!(f, " scalar (no vector loop)")?;
        }
        for t in &self.word_gather {
            let index = match t.index_bytes {
                8 => "i64",
                4 => "i32",
                _ => "u16",
            };
            write!(
                f,
                " {} B by {index} {} (scalar {:.1} us, vector {:.1} us)",
                t.word_bytes,
                match (t.vector_chosen, t.vector_far_behind) {
                    (true, _) => "vector",
                    (false, false) => "scalar",
                    (false, true) => "scalar, vector never timed",
                },
                t.scalar.as_secs_f64() * 1e6,
                t.vector.as_secs_f64() * 1e6,
            )?;
        }
        for timing in &self.measured {
            write!(f, " | {timing}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_the_tuning_in_force_and_every_threshold() {
        let forced = Tuning::AUTO.with_stores(Stores::Cached);
        let report = scoped(forced, report);
        assert_eq!(report.in_force, forced);
        assert!(report.streaming_min_bytes <= report.last_level_cache_bytes);
        assert!(report.source_order_min_source_bytes > report.last_level_cache_bytes);
        let line = report.to_string();
        assert!(line.starts_with("tuning stores=cached,"), "{line}");
        assert!(line.contains("word gather"), "{line}");
        // The tests run a dev build; a benchmark script refuses one.
        assert_eq!(
            line.contains("| build debug (unoptimised"),
            cfg!(debug_assertions),
            "{line}"
        );
        if report.avx2 && !cfg!(miri) {
            assert_eq!(report.word_gather.len(), 6, "{line}");
            assert!(
                line.contains("4 B by i64") && line.contains("8 B by u16"),
                "{line}"
            );
        }
    }
}
