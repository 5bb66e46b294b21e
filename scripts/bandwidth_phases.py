#!/usr/bin/env python3
"""Does the machine give two threads more memory bandwidth than one, and since when?

    python3 scripts/bandwidth_phases.py [--seconds 120] [--mib 128] [--every 10]
    python3 scripts/bandwidth_phases.py --trace 120 [--mib 16]

Copies MIB MiB (numpy `copyto`, preallocated, as the peer harness's copy
probe) on one thread, then on two (each half on its own thread, numpy
releases the GIL), then fills them on two threads (`fill`: stores only),
over and over for SECONDS, and prints per EVERY-second window the median
GB/s of each (a copy counts bytes read plus bytes written, as the harness
does; a fill the bytes written) and the ratio of the two copies. A
memory-bound kernel on two threads can only beat one thread by that
ratio, and the fill tells what writing an output alone costs; on the
2-core VM these benchmarks run on the ratio stays near 1.0 for minutes,
then near 2 for minutes (see docs/performance.md), so it
tells which phase a benchmark ran in.

With `--trace CALLS`, the time of each of CALLS one-thread calls in a row
of `np.add` on three arrays of MIB MiB (two read, one written), in
milliseconds: on the same VM a call takes one of two times, the slower
about 2.5x the faster, in stretches of a few calls to a few dozen, the
medians above hiding it. A benchmark whose calls land in the slow
stretches for one library and the fast for another reports the machine,
not the libraries (docs/performance.md, "Measuring").
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--mib", type=int, default=128, help="bytes copied per sample, in MiB")
    ap.add_argument("--every", type=float, default=10.0, help="window of the printed medians, in seconds")
    ap.add_argument("--trace", type=int, default=0, help="print the time of each of this many one-thread adds instead")
    args = ap.parse_args()
    if args.trace:
        trace(args.trace, args.mib)
        return
    n = args.mib << 20
    src = np.ones(n // 4, np.float32)
    dst = np.zeros_like(src)
    half = len(src) // 2
    pool = ThreadPoolExecutor(2)

    def one_thread() -> None:
        np.copyto(dst, src)

    def two_threads() -> None:
        parts = [pool.submit(np.copyto, dst[:half], src[:half]), pool.submit(np.copyto, dst[half:], src[half:])]
        for p in parts:
            p.result()

    def fill_two_threads() -> None:
        parts = [pool.submit(dst[:half].fill, 2.0), pool.submit(dst[half:].fill, 2.0)]
        for p in parts:
            p.result()

    def rate(run, bytes_moved: int) -> float:
        start = time.perf_counter()
        run()
        return bytes_moved / (time.perf_counter() - start) / 1e9

    two_threads()
    print("| from (s) | copy 1 thread GB/s | copy 2 threads GB/s | 2t / 1t | fill 2 threads GB/s |")
    print("|---|---|---|---|---|")
    begin = time.perf_counter()
    window, ones, twos, fills = 0, [], [], []
    while True:
        elapsed = time.perf_counter() - begin
        if int(elapsed // args.every) != window or elapsed >= args.seconds:
            if ones:
                a, b, f = (statistics.median(x) for x in (ones, twos, fills))
                print(f"| {window * args.every:g} | {a:.1f} | {b:.1f} | {b / a:.2f} | {f:.1f} |", flush=True)
            window, ones, twos, fills = int(elapsed // args.every), [], [], []
            if elapsed >= args.seconds:
                break
        ones.append(rate(one_thread, 2 * n))
        twos.append(rate(two_threads, 2 * n))
        fills.append(rate(fill_two_threads, n))


def trace(calls: int, mib: int) -> None:
    """Each of `calls` one-thread `np.add` calls' time, in a row."""
    a, b = np.ones((mib << 20) // 4, np.float32), np.ones((mib << 20) // 4, np.float32)
    out = np.empty_like(a)
    np.add(a, b, out=out)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        np.add(a, b, out=out)
        times.append((time.perf_counter() - start) * 1e3)
    print(f"np.add of 3 x {mib} MiB, one thread, ms a call in order:")
    print(" ".join(f"{t:.1f}" for t in times))
    print(f"least {min(times):.2f}, median {statistics.median(times):.2f}, most {max(times):.2f}")


if __name__ == "__main__":
    main()
