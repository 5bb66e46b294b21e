//! `gatherscatter._native`: the core's operators for numpy arrays.
//!
//! Each function takes numpy arrays (or anything `numpy.asarray` takes),
//! builds the core's [`Op`] from its keywords, and runs it with the GIL
//! released on the chosen number of threads. The Python package
//! (`python/gatherscatter`) re-exports these and adds numpy's spellings.
//!
//! Here: the module and the process's settings (threads, tuning, the heap).
//! The functions are in `ops` (one per operator) and `grad`; how a call
//! runs (its keywords parsed, its arrays read, where it runs and when the
//! GIL is released) is in `calls`.

mod arrays;
mod calls;
mod errors;
mod grad;
mod ops;
mod threads;

use gatherscatter::tuning::{self};
use gatherscatter::Op;
use pyo3::prelude::*;

use crate::errors::to_py_err;

/// Large fresh results sit on transparent huge pages, as numpy's own arrays
/// do: W1's 64 MiB output otherwise costs 16,384 page faults per call
/// (61 ms on one thread against 17 ms, measured from Python). The package
/// also has it keep freed large blocks (`set_cache_limit`).
#[global_allocator]
static HEAP: gatherscatter_heap::HugePageHeap = gatherscatter_heap::HugePageHeap::enabled();

/// Set how many threads calls without ``threads=`` use (default: all cores).
#[pyfunction]
fn set_num_threads(threads: usize) -> PyResult<()> {
    threads::set_default(threads)
}

/// How many threads calls without ``threads=`` use.
#[pyfunction]
fn get_num_threads() -> usize {
    threads::default()
}

/// Force kernel strategies for the whole process (docs/performance.md,
/// "Strategies"): each of ``stores`` (``"cached"``, ``"streaming"``),
/// ``word_gather`` (``"scalar"``, ``"vector"``), ``block_order``
/// (``"output"``, ``"source"``), ``bag_fold`` (``"memory"``,
/// ``"registers"``), ``row_fetch`` (``"read"``, ``"prefetch"``),
/// ``stream_fetch`` (``"ahead"``, ``"hardware"``), ``block_prefetch``
/// (``"l1"``, ``"l2"``) and ``plane_reads`` (``"packed"``, ``"in_place"``)
/// given, else ``"auto"``. Results are the same
/// under every strategy; only the speed differs. Returns the tuning now in
/// force, in the text form ``GATHERSCATTER_TUNING`` takes.
#[pyfunction]
#[pyo3(signature = (*, stores = None, word_gather = None, block_order = None, bag_fold = None, row_fetch = None, stream_fetch = None, block_prefetch = None, plane_reads = None))]
// One keyword argument a knob, each named and typed in the stub.
#[allow(clippy::too_many_arguments)]
fn set_tuning(
    stores: Option<&str>,
    word_gather: Option<&str>,
    block_order: Option<&str>,
    bag_fold: Option<&str>,
    row_fetch: Option<&str>,
    stream_fetch: Option<&str>,
    block_prefetch: Option<&str>,
    plane_reads: Option<&str>,
) -> PyResult<String> {
    let knobs = [
        ("stores", stores),
        ("word_gather", word_gather),
        ("block_order", block_order),
        ("bag_fold", bag_fold),
        ("row_fetch", row_fetch),
        ("stream_fetch", stream_fetch),
        ("block_prefetch", block_prefetch),
        ("plane_reads", plane_reads),
    ];
    let text: Vec<String> = knobs
        .iter()
        .filter_map(|(knob, value)| value.map(|v| format!("{knob}={v}")))
        .collect();
    let parsed = tuning::Tuning::parse(&text.join(",")).map_err(to_py_err)?;
    tuning::set_global(parsed);
    Ok(parsed.to_string())
}

/// The tuning in force, in the text form ``GATHERSCATTER_TUNING`` takes.
#[pyfunction]
fn get_tuning() -> String {
    tuning::global().to_string()
}

/// One line on what the ``auto`` strategies choose on this CPU (cache
/// size, thresholds, the word-gather measurement), for benchmark headers.
#[pyfunction]
fn tuning_report(py: Python<'_>) -> String {
    py.detach(|| tuning::report().to_string())
}

/// Keep freed results (and the core's scratch blocks) of at least 4 MiB,
/// up to ``max_bytes`` in all, for the next result of the same size: a loop
/// that makes a large fresh result per call then writes into memory that is
/// already mapped instead of paying the kernel's page faults every time.
/// 0 keeps none and gives back what is kept now.
#[pyfunction]
fn set_cache_limit(max_bytes: usize) {
    HEAP.keep_freed_blocks(max_bytes);
}

/// ``{"limit": bytes, "held": bytes}`` of the cache of freed results.
#[pyfunction]
fn cache_info(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let info = pyo3::types::PyDict::new(py);
    info.set_item("limit", HEAP.kept_limit())?;
    info.set_item("held", HEAP.kept_bytes())?;
    Ok(info)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The kernels would read a bad GATHERSCATTER_TUNING as unset: the
    // import fails instead, naming it.
    tuning::Tuning::from_env().map_err(to_py_err)?;
    gatherscatter_threads::pinning_from_env().map_err(pyo3::exceptions::PyValueError::new_err)?;
    threads::configure_spin()?;
    // Another copy of this module in the process may have started the
    // global pool already; it then stays as it is.
    let _ = gatherscatter_threads::configure_global();
    m.add_function(wrap_pyfunction!(ops::gather, m)?)?;
    m.add_function(wrap_pyfunction!(ops::gather_elements, m)?)?;
    m.add_function(wrap_pyfunction!(ops::take, m)?)?;
    m.add_function(wrap_pyfunction!(ops::scatter_elements, m)?)?;
    m.add_function(wrap_pyfunction!(ops::gather_nd, m)?)?;
    m.add_function(wrap_pyfunction!(ops::scatter_nd, m)?)?;
    m.add_function(wrap_pyfunction!(ops::tensor_scatter, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_scatter_reduce, m)?)?;
    grad::register(m)?;
    m.add_function(wrap_pyfunction!(ops::_segment_csr, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_segment_coo, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_embedding_bag, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_index_select, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_index_scatter, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_scatter_nd_in_place, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(set_tuning, m)?)?;
    m.add_function(wrap_pyfunction!(get_tuning, m)?)?;
    m.add_function(wrap_pyfunction!(tuning_report, m)?)?;
    m.add_function(wrap_pyfunction!(set_cache_limit, m)?)?;
    m.add_function(wrap_pyfunction!(cache_info, m)?)?;
    m.add("OPERATORS", Op::NAMES.to_vec())?;
    Ok(())
}
