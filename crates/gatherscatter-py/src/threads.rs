//! How many threads a call uses: `threads=` on the call, else the module's
//! `set_num_threads`, else all cores (rayon's global pool). Pools of other
//! sizes are built once and kept, so a call never pays for starting threads
//! after the first. A pool with a thread per CPU keeps each worker on its
//! own CPU (`gatherscatter-threads`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rayon::ThreadPool;

/// 0: all cores.
static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(0);
static POOLS: Mutex<Vec<(usize, Arc<ThreadPool>)>> = Mutex::new(Vec::new());

/// Set the thread count of calls that do not pass `threads=`.
pub(crate) fn set_default(threads: usize) -> PyResult<()> {
    check(Some(threads))?;
    DEFAULT_THREADS.store(threads, Ordering::Relaxed);
    Ok(())
}

/// The thread count of calls that do not pass `threads=`.
pub(crate) fn default() -> usize {
    match DEFAULT_THREADS.load(Ordering::Relaxed) {
        0 => rayon::current_num_threads(),
        n => n,
    }
}

/// `threads=` is at least 1 when given.
pub(crate) fn check(threads: Option<usize>) -> PyResult<()> {
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    Ok(())
}

/// How many threads a call with `threads=` (checked) takes.
pub(crate) fn count(threads: Option<usize>) -> PyResult<usize> {
    check(threads)?;
    Ok(threads.unwrap_or_else(default))
}

/// The pool for `threads=` (checked), or `None` for the global pool.
pub(crate) fn pool(threads: Option<usize>) -> PyResult<Option<Arc<ThreadPool>>> {
    let wanted = match threads {
        Some(n) => {
            check(Some(n))?;
            n
        }
        None => DEFAULT_THREADS.load(Ordering::Relaxed),
    };
    if wanted == 0 {
        return Ok(None);
    }
    let mut pools = POOLS
        .lock()
        .map_err(|_| PyRuntimeError::new_err("the thread-pool table was poisoned"))?;
    if let Some((_, pool)) = pools.iter().find(|(n, _)| *n == wanted) {
        return Ok(Some(Arc::clone(pool)));
    }
    let pool = gatherscatter_threads::pool(wanted, |i| format!("gatherscatter-{i}"))
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start {wanted} threads: {e}")))?;
    let pool = Arc::new(pool);
    pools.push((wanted, Arc::clone(&pool)));
    Ok(Some(pool))
}

/// How long the workers keep looking for the next call after one, in
/// microseconds (`GATHERSCATTER_SPIN_US`, read at import).
static SPIN_MICROS: AtomicU64 = AtomicU64::new(0);

/// Read `GATHERSCATTER_SPIN_US` (the import fails on a value it refuses).
pub(crate) fn configure_spin() -> PyResult<()> {
    let time = gatherscatter_threads::spin_from_env().map_err(PyValueError::new_err)?;
    let micros = u64::try_from(time.as_micros()).unwrap_or(u64::MAX);
    SPIN_MICROS.store(micros, Ordering::Relaxed);
    Ok(())
}

/// Run `f` on `pool` (or the global pool), then leave the pool's workers
/// looking for work a while: this thread waits outside the pool, and calls
/// made in a row would otherwise each wait for the workers to wake
/// (`gatherscatter-threads`, `run_then_spin`).
pub(crate) fn run<R: Send>(pool: Option<&ThreadPool>, f: impl FnOnce() -> R + Send) -> R {
    let spin = Duration::from_micros(SPIN_MICROS.load(Ordering::Relaxed));
    gatherscatter_threads::run_then_spin(pool, spin, f)
}
