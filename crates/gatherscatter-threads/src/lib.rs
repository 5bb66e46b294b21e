//! Rayon thread pools for programs that run gatherscatter (the Python
//! extension, `gsx`, `gsx-bench`): a pool with a thread for every CPU the
//! process may use keeps each worker on its own CPU.
//!
//! Why: on a 2-vCPU Linux VM (AMD EPYC, family 26 model 2), after the
//! process had been idle for half a second, the scheduler woke both
//! workers of a 2-thread pool on the same CPU, and kept them there for
//! every call that followed, so a 2-thread call ran at the speed of one
//! (a 16 MiB float32 GatherElements along the last axis: 2.2 ms against
//! 1.2 ms with the workers on separate CPUs, in 9 of 10 rounds). A worker
//! wakes on the CPU it last ran on when that one is idle, and the worker
//! that wakes the second one is itself on that CPU, so a pair once put
//! together stays together. Pinning one worker per CPU ends it.
//!
//! Only a pool with exactly one worker per allowed CPU is pinned: then
//! every CPU gets one worker whatever else runs, as it would unpinned. A
//! smaller pool is left to the scheduler, so that processes that each ask
//! for a few threads (Dask workers, say) do not all crowd onto the first
//! CPUs. `GATHERSCATTER_PIN_THREADS=0` turns pinning off (`1`, or unset,
//! leaves it on); any other value is refused by [`pinning_from_env`],
//! which the programs call at start-up.
//!
//! A caller outside the pool can also have the workers keep looking for
//! work a short while after each call ([`run_then_spin`]), so the next call
//! does not wait for them to wake.
#![deny(unsafe_op_in_unsafe_fn)]

mod spin;

pub use spin::{run_then_spin, spin, spin_from_env, DEFAULT_SPIN, MAX_SPIN, SPIN_VARIABLE};

use rayon::{ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder};

/// The environment variable that, set to `0`, leaves every worker free.
pub const PIN_VARIABLE: &str = "GATHERSCATTER_PIN_THREADS";

/// Whether pools are pinned, from [`PIN_VARIABLE`]: unset or `1` on, `0`
/// off; any other value is an error naming it.
///
/// ```
/// assert_eq!(gatherscatter_threads::pinning(None), Ok(true));
/// assert_eq!(gatherscatter_threads::pinning(Some("0")), Ok(false));
/// assert!(gatherscatter_threads::pinning(Some("no")).is_err());
/// ```
pub fn pinning(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(other) => Err(format!(
            "{PIN_VARIABLE}=\"{other}\": expected 0 (workers left free) or 1 (pinned)"
        )),
    }
}

/// [`pinning`] of the environment's [`PIN_VARIABLE`].
pub fn pinning_from_env() -> Result<bool, String> {
    let value = std::env::var_os(PIN_VARIABLE).map(|v| v.to_string_lossy().into_owned());
    pinning(value.as_deref())
}

/// A pool of `threads` workers (at least 1) named `name(i)`, each pinned to
/// one CPU when [`pinned_cpus`] says so.
///
/// ```
/// let pool = gatherscatter_threads::pool(2, |i| format!("worker-{i}"))?;
/// assert_eq!(pool.current_num_threads(), 2);
/// assert_eq!(pool.install(|| 6 * 7), 42);
/// # Ok::<(), rayon::ThreadPoolBuildError>(())
/// ```
pub fn pool(
    threads: usize,
    name: impl FnMut(usize) -> String + 'static,
) -> Result<ThreadPool, ThreadPoolBuildError> {
    builder(threads).thread_name(name).build()
}

/// Make rayon's global pool a pool of this kind, with as many workers as
/// rayon would give it (`RAYON_NUM_THREADS`, else one per CPU the process
/// may use). Returns an error, and changes nothing, if the global pool has
/// already started.
pub fn configure_global() -> Result<(), ThreadPoolBuildError> {
    builder(global_threads())
        .thread_name(|i| format!("gatherscatter-global-{i}"))
        .build_global()
}

/// A builder for a pool of `threads` workers (at least 1), each pinned to
/// one CPU when [`pinned_cpus`] says so; the caller adds names and builds.
pub fn builder(threads: usize) -> ThreadPoolBuilder {
    let threads = threads.max(1);
    let builder = ThreadPoolBuilder::new().num_threads(threads);
    match pinned_cpus(threads) {
        Some(cpus) => builder.start_handler(move |worker| {
            if let Some(&cpu) = cpus.get(worker) {
                // A refused pin leaves the worker free, as if unpinned.
                let _ = pin_current_thread(cpu);
            }
        }),
        None => builder,
    }
}

/// The CPU each worker of a `threads`-worker pool is pinned to: the CPUs
/// this process may use, in order, when there are exactly `threads` of
/// them, pinning is on ([`pinning_from_env`]; a value it refuses pins
/// nothing, the programs having stopped on it first) and the platform can
/// pin; else `None`.
pub fn pinned_cpus(threads: usize) -> Option<Vec<usize>> {
    if pinning_from_env() != Ok(true) {
        return None;
    }
    let cpus = allowed_cpus()?;
    (threads >= 2 && cpus.len() == threads).then_some(cpus)
}

fn global_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
}

#[cfg(target_os = "linux")]
fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: `cpu_set_t` is plain bits, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size passed is the size of `set`, which the call fills.
    let got = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if got != 0 {
        return None;
    }
    let bits = 8 * std::mem::size_of_val(&set);
    // SAFETY: each `cpu` is below the set's size in bits.
    Some(
        (0..bits)
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect(),
    )
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Option<Vec<usize>> {
    None
}

/// Keep the calling thread on `cpu`.
#[cfg(target_os = "linux")]
fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of_val(&set) {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    // SAFETY: `cpu` is below the set's size in bits (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the size is that of `set`.
    match unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_current_thread(_cpu: usize) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_smaller_than_the_cpu_set_is_not_pinned() {
        let Some(cpus) = allowed_cpus() else { return };
        assert_eq!(pinned_cpus(cpus.len() + 1), None);
        if cpus.len() > 2 {
            assert_eq!(pinned_cpus(cpus.len() - 1), None);
        }
        assert_eq!(pinned_cpus(1), None);
    }

    #[test]
    fn a_pool_with_a_thread_per_cpu_puts_each_worker_on_its_own_cpu() {
        let Some(cpus) = allowed_cpus() else { return };
        if cpus.len() < 2 || std::env::var(PIN_VARIABLE).is_ok() {
            return;
        }
        assert_eq!(pinned_cpus(cpus.len()).as_deref(), Some(&cpus[..]));
        let pool = pool(cpus.len(), |i| format!("test-{i}")).unwrap();
        let mut seen: Vec<Vec<usize>> = pool.broadcast(|_| allowed_cpus().unwrap());
        seen.sort();
        let expected: Vec<Vec<usize>> = cpus.iter().map(|&c| vec![c]).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_pool_runs_work_whatever_its_size() {
        for threads in [0, 1, 2, 3, 64] {
            let pool = pool(threads, |i| format!("w-{i}")).unwrap();
            assert_eq!(pool.install(rayon::current_num_threads), threads.max(1));
            let sum: u64 = pool.install(|| {
                use rayon::prelude::*;
                (0..1000u64).into_par_iter().sum()
            });
            assert_eq!(sum, 499_500);
        }
    }
}
