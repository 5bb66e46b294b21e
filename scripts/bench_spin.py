#!/usr/bin/env python3
"""Do two-thread calls in a loop gain from workers that keep looking for work?

    python3 scripts/bench_spin.py [--processes 4] [--work-us 0,50]

Each process times 200 calls of a float32 Gather along the first axis
(64 KiB rows, outputs of 1, 4 and 16 MiB) on two threads, with `--work-us`
microseconds of other work (a numpy sum) before each call, and prints per
size the median call and the mean time of one loop round (the work and the
call). Processes alternate between the default spin
(`GATHERSCATTER_SPIN_US` unset) and `GATHERSCATTER_SPIN_US=0`, so both run
under the same drift of the machine. Prints the CPU first. Needs the
package installed and at least two CPUs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from bench_python import print_cpu

LOOP = r"""
import sys, time
import numpy as np
import gatherscatter as gs

work_us = float(sys.argv[1])
rng = np.random.default_rng(0)
# About 0.5 ns an element for a float32 sum: work_us of it.
other = np.ones(int(work_us * 2000), np.float32)
cells = []
for rows in (16, 64, 256):
    shape = (rows, 64, 256)
    data = rng.standard_normal(shape).astype(np.float32)
    idx = rng.integers(0, rows, rows)
    call = lambda: gs.gather(data, idx, 0, threads=2)
    for _ in range(20):
        call()
    times = []
    start = time.perf_counter()
    for _ in range(200):
        if work_us:
            other.sum()
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    loop = (time.perf_counter() - start) / 200
    times.sort()
    cells.append(f"{rows // 16} MiB call {times[100] * 1e6:6.0f} loop {loop * 1e6:6.0f} us")
print(" | ".join(cells))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--work-us", default="0,50")
    args = ap.parse_args()
    print_cpu()
    for work in args.work_us.split(","):
        for _ in range(args.processes):
            for spin in (None, "0"):
                env = dict(os.environ)
                env.pop("GATHERSCATTER_SPIN_US", None)
                if spin is not None:
                    env["GATHERSCATTER_SPIN_US"] = spin
                run = subprocess.run([sys.executable, "-c", LOOP, work], env=env,
                                     capture_output=True, text=True, check=True)
                label = "spin default" if spin is None else "spin 0      "
                print(f"work {work:>3} us, {label}: {run.stdout.strip()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
