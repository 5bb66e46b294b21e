#!/usr/bin/env python3
"""gatherscatter.dask against Dask alone on a 2-worker local cluster (issue
#32), with an array larger than either worker's memory limit.

    python3 scripts/bench_dask.py [--gib 6] [--chunk-mib 64] [--worker-gib 5]
                                  [--rows-taken 1000000] [--updates 16777216]

A float32 array of rows of 128 (512 B) is built on the workers and persisted
(spilling to disk is off: everything stays in memory). Then, each timed as
``persist`` + ``wait`` of the result, on the workers (nothing comes back to
this process), median of 3 after one warm-up:

  take     1M random rows: gatherscatter.dask.take, Dask's ``x[idx]`` and
           ``da.take``;
  scatter  ``scatter_reduce(sum)`` of 16M updates (random rows, one update
           per element of each row) into a copy of the array, reduced to its
           column sums so the 6 GiB result need not be held: gatherscatter.dask
           against the Dask user's fallback, ``map_blocks`` with
           ``np.add.at`` on every chunk (each task scans all the updates),
           and a plain ``x.sum(axis=0)`` for the cost of the read and sum.

Each worker samples its own resident memory every 5 ms; the peak above its
resident memory before the call is printed beside each time. The bar: take
at least 3x Dask's own, a peak under 2 chunks + the worker's share of the
output, and a scatter-add Dask alone cannot do.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import warnings

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_python import print_cpu  # noqa: E402

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import distributed  # noqa: E402

import gatherscatter.dask as gsd  # noqa: E402

COLUMNS = 128
MiB = 1 << 20


# -- the workers' memory sampler (runs inside each worker via client.run)

def _start_sampler(dask_worker):
    import psutil

    process = psutil.Process()
    state = {"peak": process.memory_info().rss, "base": process.memory_info().rss,
             "run": True}

    def sample():
        while state["run"]:
            state["peak"] = max(state["peak"], process.memory_info().rss)
            time.sleep(0.005)

    state["thread"] = threading.Thread(target=sample, daemon=True)
    state["thread"].start()
    dask_worker._gs_sampler = state


def _stop_sampler(dask_worker):
    state = dask_worker._gs_sampler
    state["run"] = False
    state["thread"].join()
    return state["base"], state["peak"]


def timed(client, make, repeat=3):
    """Median seconds of persist + wait, and the largest per-worker peak of
    resident memory above its level before the call (bytes)."""
    times, peaks = [], []
    for i in range(repeat + 1):
        client.run(_start_sampler)
        start = time.perf_counter()
        result = make().persist()
        distributed.wait(result)
        seconds = time.perf_counter() - start
        samples = client.run(_stop_sampler)
        del result
        if i:  # the first is a warm-up
            times.append(seconds)
            peaks.append(max(peak - base for base, peak in samples.values()))
    return statistics.median(times), max(peaks)


def run_cells(client, cells):
    """Time each (label, make) and print its line; {label: seconds}."""
    results = {}
    for label, make in cells:
        seconds, peak = timed(client, make)
        results[label] = seconds
        print(f"  {label:28s} {seconds:8.3f} s   peak above base {peak / MiB:7.0f} MiB",
              flush=True)
    return results


def _add_at_block(block, idx, updates, block_info=None):
    """What a Dask user can write: every chunk scans all the updates."""
    lo, hi = block_info[0]["array-location"][0]
    hit = (idx >= lo) & (idx < hi)
    rows, cols = np.nonzero(hit)
    out = block.copy()
    np.add.at(out, (idx[rows, cols] - lo, cols), updates[rows, cols])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=6.0)
    parser.add_argument("--chunk-mib", type=int, default=64)
    parser.add_argument("--worker-gib", type=float, default=5.0)
    parser.add_argument("--rows-taken", type=int, default=1_000_000)
    parser.add_argument("--updates", type=int, default=16 << 20)
    args = parser.parse_args()

    print_cpu()
    rows = int(args.gib * (1 << 30)) // (COLUMNS * 4)
    chunk_rows = args.chunk_mib * MiB // (COLUMNS * 4)
    print(f"array: {rows} x {COLUMNS} float32 = {rows * COLUMNS * 4 / (1 << 30):.2f} GiB in "
          f"{-(-rows // chunk_rows)} chunks of {args.chunk_mib} MiB; 2 workers of "
          f"{args.worker_gib:g} GiB, 1 thread each", flush=True)

    dask.config.set({"distributed.worker.memory.target": False,
                     "distributed.worker.memory.spill": False,
                     "distributed.worker.memory.pause": 0.95,
                     "distributed.worker.memory.terminate": 0.99})
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  memory_limit=f"{args.worker_gib}GiB",
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        x = da.random.default_rng(0).random((rows, COLUMNS), dtype=np.float32,
                                            chunks=(chunk_rows, COLUMNS)).persist()
        distributed.wait(x)
        rng = np.random.default_rng(1)

        # -- take
        idx = rng.integers(0, rows, args.rows_taken)
        share = args.rows_taken * COLUMNS * 4 / 2
        print(f"\ntake of {args.rows_taken} random rows ({2 * share / MiB:.0f} MiB out; "
              f"a worker's share {share / MiB:.0f} MiB, 2 chunks {2 * args.chunk_mib} MiB)")
        assert np.array_equal(gsd.take(x, idx[:1000], 0).compute(),
                              x[idx[:1000]].compute()), "gatherscatter.dask.take is wrong"
        cells = [("gatherscatter.dask.take", lambda: gsd.take(x, idx, 0)),
                 ("dask x[idx]", lambda: x[idx]),
                 ("dask da.take", lambda: da.take(x, idx, axis=0))]
        results = run_cells(client, cells)
        best = min(results["dask x[idx]"], results["dask da.take"])
        print(f"  speed-up over Dask's fastest take: {best / results['gatherscatter.dask.take']:.2f}x")

        # -- scatter-add
        update_rows = args.updates // COLUMNS
        sidx = rng.integers(0, rows, (update_rows, COLUMNS))
        supd = rng.standard_normal((update_rows, COLUMNS)).astype(np.float32)
        print(f"\nscatter_reduce(sum) of {update_rows * COLUMNS} updates into a copy of the "
              f"array, then its column sums")
        try:
            np.add.at(x, (sidx, np.arange(COLUMNS)), supd)
            print("  np.add.at on a dask array: accepted")
        except Exception as error:  # what Dask alone says
            first = str(error).split("(", 1)[0]
            print(f"  np.add.at on a dask array: {type(error).__name__}: {first}(...)")
        # Both sides start from updates already on the workers: ours in 8 chunks,
        # the fallback's whole on each worker.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*large graph.*")
            lazy_idx = da.from_array(sidx, chunks=(update_rows // 8, COLUMNS)).persist()
            lazy_upd = da.from_array(supd, chunks=(update_rows // 8, COLUMNS)).persist()
            distributed.wait([lazy_idx, lazy_upd])
        idx_future = client.scatter(sidx, broadcast=True)
        upd_future = client.scatter(supd, broadcast=True)
        ours_sum = gsd.scatter_reduce(x, lazy_idx, lazy_upd, 0, "sum").sum(axis=0).compute()
        theirs_sum = x.map_blocks(_add_at_block, idx_future, upd_future,
                                  dtype=x.dtype).sum(axis=0).compute()
        print(f"  the two agree to {np.max(np.abs(ours_sum - theirs_sum)):.3g} "
              f"(column sums of ~{rows / 2:.3g})")
        cells = [("gatherscatter.dask", lambda: gsd.scatter_reduce(
                      x, lazy_idx, lazy_upd, 0, "sum").sum(axis=0)),
                 ("map_blocks + np.add.at", lambda: x.map_blocks(
                      _add_at_block, idx_future, upd_future, dtype=x.dtype).sum(axis=0)),
                 ("x.sum(axis=0) alone", lambda: x.sum(axis=0))]
        results = run_cells(client, cells)
        print(f"  speed-up over map_blocks + np.add.at: "
              f"{results['map_blocks + np.add.at'] / results['gatherscatter.dask']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
