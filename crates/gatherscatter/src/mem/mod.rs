//! The low-level layer: memory and CPU code that the kernels share. It never
//! imports from [`crate::ops`]; the ops build on it (docs/design.md, "Layers").
//!
//! - [`cpu`]: the running CPU's features and cache size.
//! - [`knobs`]: the strategy knobs ([`crate::tuning`]).
//! - [`measured`]: a choice between two strategies timed on the calls.
//! - [`measured_stores`]: ordinary or streaming stores, by size or timed.
//! - [`parallel`]: how a kernel's output is split across the rayon pool.
//! - [`prefetch`]: cache hints.
//! - [`scratch`]: index lists each thread keeps for its next call.
//! - [`stream`]: non-temporal stores for outputs larger than the cache.
//! - [`uninit`]: fresh outputs written without being zeroed first.

pub(crate) mod cpu;
pub mod knobs;
pub(crate) mod measured;
pub(crate) mod measured_stores;
pub(crate) mod parallel;
pub(crate) mod prefetch;
pub(crate) mod scratch;
pub(crate) mod stream;
pub(crate) mod uninit;
