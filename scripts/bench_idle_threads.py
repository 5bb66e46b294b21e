#!/usr/bin/env python3
"""Do two-thread calls keep their speed after the process has been idle?

    python3 scripts/bench_idle_threads.py [--processes 4] [--rounds 8] [--idle 0.5]

Each round sleeps `--idle` seconds, then times 9 back-to-back calls of a
16 MiB float32 GatherElements along the last axis (int32 indices) on two
threads and keeps their median; a first line per process gives the same
call's median on one thread. Processes alternate between the default
(`gatherscatter-threads` pins the workers of a pool with a thread per CPU)
and `GATHERSCATTER_PIN_THREADS=0` (workers left to the scheduler), so the
two run under the same drift of the machine. Needs the package installed
and at least two CPUs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROUND = r"""
import sys, time
import numpy as np
import gatherscatter as gs

rounds, idle = int(sys.argv[1]), float(sys.argv[2])
rng = np.random.default_rng(0)
shape = (256, 64, 256)
data = rng.standard_normal(shape).astype(np.float32)
idx = rng.integers(0, 256, shape).astype(np.int32)

def median_ms(threads):
    call = lambda: gs.gather_elements(data, idx, axis=2, threads=threads)
    call()
    times = []
    for _ in range(9):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return sorted(times)[4] * 1e3

one = median_ms(1)
after_idle = []
for _ in range(rounds):
    time.sleep(idle)
    after_idle.append(median_ms(2))
print(f"{one:.2f}", " ".join(f"{t:.2f}" for t in after_idle))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=4, help="processes per setting")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--idle", type=float, default=0.5)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_python import print_cpu

    print_cpu()
    results = {"pinned": [], "free": []}
    for _ in range(args.processes):
        for setting in results:
            env = dict(os.environ)
            env.pop("GATHERSCATTER_PIN_THREADS", None)
            if setting == "free":
                env["GATHERSCATTER_PIN_THREADS"] = "0"
            out = subprocess.run(
                [sys.executable, "-c", ROUND, str(args.rounds), str(args.idle)],
                env=env, check=True, capture_output=True, text=True).stdout.split()
            one, two = float(out[0]), [float(t) for t in out[1:]]
            results[setting].append((one, two))
            print(f"{setting:6} 1 thread {one:.2f} ms; 2 threads after {args.idle} s idle: "
                  + " ".join(f"{t:.2f}" for t in two), flush=True)
    for setting, runs in results.items():
        ones = sorted(one for one, _ in runs)
        twos = sorted(t for _, two in runs for t in two)
        print(f"{setting}: 1 thread median {ones[len(ones) // 2]:.2f} ms; 2 threads after idle "
              f"median {twos[len(twos) // 2]:.2f} ms, {sum(t < 0.75 * ones[len(ones) // 2] for t in twos)}"
              f" of {len(twos)} rounds below 3/4 of one thread's time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
