//! Workers that keep looking for work a short while after a call from
//! outside the pool, so that the next call finds them awake.
//!
//! Why: a caller outside the pool (the Python thread) hands each call to
//! the pool and sleeps until it is done; between two calls rayon's idle
//! workers look for work a few dozen rounds, then sleep, and on a VM a
//! sleeping CPU takes a hypervisor round trip to wake. On a 2-vCPU KVM
//! guest (Intel Xeon family 6 model 167) the first task of a call started
//! 14-18 µs after the call and the second 28-47 µs after it, once the
//! caller had paused 50 µs to 1 ms; back to back, 0.5 and 1.3 µs. A 1 MiB
//! row copy on two threads, called with 10 µs between calls, took 38.5 µs
//! (22.6 on the calling thread alone); with the workers kept looking for
//! 200 µs, 15.1; 4 MiB, 156 -> 111 µs. OpenMP runtimes and onnxruntime's
//! pool spin the same way after a parallel region.
//!
//! Each worker yields its CPU on every round, so a caller with work of its
//! own between calls still gets a CPU, and stops looking once it has run a
//! job or the time is up. `GATHERSCATTER_SPIN_US` sets the time: `0` turns
//! it off.

use std::time::{Duration, Instant};

use rayon::ThreadPool;

/// The environment variable that sets how long, in microseconds, workers
/// keep looking for work after a call ([`spin_from_env`]).
pub const SPIN_VARIABLE: &str = "GATHERSCATTER_SPIN_US";

/// How long workers keep looking for work after a call when
/// [`SPIN_VARIABLE`] is unset: about what OpenMP runtimes spin.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(200);

/// Longest time [`SPIN_VARIABLE`] may ask for: a worker that spins longer
/// than this only burns a CPU.
pub const MAX_SPIN: Duration = Duration::from_millis(100);

/// The spin time [`SPIN_VARIABLE`] asks for: unset [`DEFAULT_SPIN`], else
/// whole microseconds from 0 (off) to [`MAX_SPIN`]; any other value is an
/// error naming it.
///
/// ```
/// use std::time::Duration;
/// use gatherscatter_threads::{spin, DEFAULT_SPIN};
///
/// assert_eq!(spin(None), Ok(DEFAULT_SPIN));
/// assert_eq!(spin(Some("0")), Ok(Duration::ZERO));
/// assert_eq!(spin(Some("50")), Ok(Duration::from_micros(50)));
/// assert!(spin(Some("fast")).is_err());
/// assert!(spin(Some("1000000")).is_err());
/// ```
pub fn spin(value: Option<&str>) -> Result<Duration, String> {
    let Some(value) = value.map(str::trim) else {
        return Ok(DEFAULT_SPIN);
    };
    let refused = || {
        format!(
            "{SPIN_VARIABLE}=\"{value}\": expected whole microseconds from 0 (off) to {}",
            MAX_SPIN.as_micros()
        )
    };
    let micros: u64 = value.parse().map_err(|_| refused())?;
    let time = Duration::from_micros(micros);
    if time > MAX_SPIN {
        return Err(refused());
    }
    Ok(time)
}

/// [`spin`] of the environment's [`SPIN_VARIABLE`].
pub fn spin_from_env() -> Result<Duration, String> {
    let value = std::env::var_os(SPIN_VARIABLE).map(|v| v.to_string_lossy().into_owned());
    spin(value.as_deref())
}

/// Run `f` on `pool` (the global pool when `None`, `f` then running on the
/// calling thread, from which the kernels' parallel loops reach that pool),
/// then leave each of the pool's workers looking for work for `time`: the
/// next call made within it starts at once. A zero `time` leaves the pool
/// as rayon does.
///
/// ```
/// use std::time::Duration;
///
/// let pool = gatherscatter_threads::pool(2, |i| format!("w-{i}"))?;
/// let spin = Duration::from_micros(100);
/// let sum: u64 = gatherscatter_threads::run_then_spin(Some(&pool), spin, || {
///     use rayon::prelude::*;
///     (0..1000u64).into_par_iter().sum()
/// });
/// assert_eq!(sum, 499_500);
/// # Ok::<(), rayon::ThreadPoolBuildError>(())
/// ```
pub fn run_then_spin<R: Send>(
    pool: Option<&ThreadPool>,
    time: Duration,
    f: impl FnOnce() -> R + Send,
) -> R {
    let result = match pool {
        Some(pool) => pool.install(f),
        None => f(),
    };
    if !time.is_zero() {
        let keep_looking = move |_: rayon::BroadcastContext<'_>| {
            look_for_work(time);
        };
        match pool {
            Some(pool) => pool.spawn_broadcast(keep_looking),
            None => rayon::spawn_broadcast(keep_looking),
        }
    }
    result
}

/// Run the pool's next job on this worker if one comes within `time`;
/// whether one came.
fn look_for_work(time: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < time {
        if let Some(rayon::Yield::Executed) = rayon::yield_now() {
            return true;
        }
        std::thread::yield_now();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_takes_whole_microseconds_up_to_the_limit() {
        assert_eq!(spin(Some(" 200 ")), Ok(Duration::from_micros(200)));
        let most = MAX_SPIN.as_micros().to_string();
        assert_eq!(spin(Some(&most)), Ok(MAX_SPIN));
        for bad in ["", "-1", "1.5", "100001", "200us"] {
            let refused = spin(Some(bad)).unwrap_err();
            assert!(refused.contains(SPIN_VARIABLE), "{refused}");
        }
    }

    #[test]
    fn a_worker_runs_the_next_job_while_it_looks_and_returns_when_none_comes() {
        let pool = crate::pool(2, |i| format!("spin-{i}")).unwrap();
        // Nothing comes: it gives up after the time.
        let came = pool.install(|| look_for_work(Duration::from_micros(200)));
        assert!(!came);
        // A job spawned while both workers look is run by one of them.
        let (sent, got) = std::sync::mpsc::channel();
        run_then_spin(Some(&pool), Duration::from_millis(50), || ());
        pool.spawn(move || sent.send(6 * 7).unwrap());
        assert_eq!(got.recv_timeout(Duration::from_secs(5)), Ok(42));
    }

    #[test]
    fn calls_in_a_row_return_their_results_with_and_without_spinning() {
        let pool = crate::pool(2, |i| format!("row-{i}")).unwrap();
        for time in [Duration::ZERO, Duration::from_micros(300)] {
            for n in 0..50u64 {
                let sum: u64 = run_then_spin(Some(&pool), time, || {
                    use rayon::prelude::*;
                    (0..=n).into_par_iter().sum()
                });
                assert_eq!(sum, n * (n + 1) / 2);
            }
        }
        // The global pool, from outside it.
        let sum = run_then_spin(None, Duration::from_micros(100), || 1 + 1);
        assert_eq!(sum, 2);
    }
}
