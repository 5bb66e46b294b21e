#!/usr/bin/env python3
"""Does Gather's cost grow linearly with the bytes it moves?

    python3 scripts/bench_linearity.py --bench-dir PATH/TO/bench [--sizes-mib 1,32,256,1024] [--rounds 3] [--keep DIR]
                                       [--wide-source 64:256] [--cold-cache-mib 96]

Builds W1-shaped workloads (Gather axis 0, float32 rows of 256, int64
indices, as many indices as data rows) whose output is each given size,
with the seeded generator of the peer harness's workloads.py (the folder
`--bench-dir` names, e.g. ../shared/bench beside a checkout). Times them with
gsx-bench (fresh output and caller buffer, 1 and 2 threads) and prints
effective GB/s (the harness's minimal bytes / median time), each as a ratio
to the largest size's, in a Markdown table. Each cell is the best median of
`--rounds` rounds, every round timing every size and mode once (as the peer
harness keeps the best median of its rounds): this machine's speed drifts
by 20% or more between minutes, as much as the band being checked. Rows
from `--wide-source OUT:SRC` gather an OUT MiB output from a larger
source, and are compared with the largest of `--sizes-mib`. With
`--cold-cache-mib N`, gsx-bench reads N MiB of another buffer before each
timed call, so no call finds its source or output in the caches (take N
above the last-level cache; 3x it is safe); without it calls run back to
back, as in the peer harness, and a source not much larger than the cache
is partly served from it. Then it
measures the peak resident memory of `gsx gather` on the W1-sized case
against its inputs and output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ROW = 256  # float32 elements per row: 1 KiB, as in W1


def build(cargo_target: str) -> tuple[str, str]:
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "gsx", "--bins"], cwd=ROOT, check=True)
    return (os.path.join(cargo_target, "release", "gsx-bench"), os.path.join(cargo_target, "release", "gsx"))


def median_seconds(bench: str, wdir: str, threads: int, into: bool, cold_mib: int) -> float:
    cmd = [bench, "--workload-dir", wdir, "--threads", str(threads), "--reps", "9",
           "--cold-cache-mib", str(cold_mib), "--out", os.path.join(wdir, "out.npy")]
    cmd += ["--into"] if into else []
    last = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return statistics.median(json.loads(last)["times_s"])


def peak_rss_kib(cmd: list[str]) -> int:
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, check=True, capture_output=True, text=True)
    return int(out.stderr.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-dir", required=True, help="the peer harness's folder (make_inputs.py, workloads.py)")
    ap.add_argument("--sizes-mib", default="1,32,256,1024")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over every size and mode; each cell keeps its best median")
    ap.add_argument("--keep", help="write the inputs here and keep them")
    ap.add_argument("--wide-source", action="append", default=[], metavar="OUT:SRC",
                    help="also time an OUT MiB output gathered from a SRC MiB source (rows drawn "
                         "uniformly), to tell the output's size from the source's; repeatable")
    ap.add_argument("--cold-cache-mib", type=int, default=0, metavar="N",
                    help="read N MiB of another buffer before each timed call (untimed), so every "
                         "call starts with cold caches; 0 (default) times calls back to back")
    args = ap.parse_args()
    # The harness's generator is imported from the folder given, so a clone
    # without ../shared beside it still runs everything else.
    sys.path.insert(0, os.path.abspath(args.bench_dir))
    global Workload, write_workload
    from make_inputs import write_workload
    from workloads import Workload
    sizes = [float(s) for s in args.sizes_mib.split(",")]
    wide = [tuple(float(v) for v in pair.split(":")) for pair in args.wide_source]
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    bench, gsx = build(target)
    root = args.keep or tempfile.mkdtemp(prefix="gs_linearity_")
    rows_table = []
    try:
        workloads = []
        for mib, src_mib in [(m, m) for m in sizes] + wide:
            rows = int(mib * (1 << 20)) // (ROW * 4)
            src_rows = int(src_mib * (1 << 20)) // (ROW * 4)
            name = f"W1_out_{mib:g}MiB" + ("" if src_mib == mib else f"_src_{src_mib:g}MiB")
            wl = Workload(name, "Gather", 0, (src_rows, ROW), (rows,))
            wdir = write_workload(root, wl)
            with open(os.path.join(wdir, "manifest.json")) as f:
                min_bytes = json.load(f)["bytes_moved"]["min"]
            label = f"{mib:g} MiB" + ("" if src_mib == mib else f" (source {src_mib:g} MiB)")
            workloads.append((label, wdir, min_bytes, {}))
        for _ in range(max(args.rounds, 1)):
            for label, wdir, min_bytes, cells in workloads:
                for threads in (1, 2):
                    for into in (False, True):
                        rate = min_bytes / median_seconds(bench, wdir, threads, into, args.cold_cache_mib) / 1e9
                        cells[(threads, into)] = max(rate, cells.get((threads, into), 0.0))
        for label, wdir, min_bytes, cells in workloads:
            rows_table.append((label, min_bytes, cells))
            if not args.keep:
                shutil.rmtree(wdir)
        if args.cold_cache_mib:
            print(f"Caches cold: {args.cold_cache_mib} MiB read before each timed call.\n")
        print("| output | min bytes | " + " | ".join(
            f"{'into' if into else 'fresh'} {t}t GB/s (vs largest)" for t in (1, 2) for into in (False, True)) + " |")
        print("|---|---|" + "---|" * 4)
        _, _, largest = rows_table[len(sizes) - 1]
        for label, min_bytes, cells in rows_table:
            print(f"| {label} | {min_bytes / 2**20:.2f} MiB | " + " | ".join(
                f"{cells[k]:.1f} ({cells[k] / largest[k]:.2f})" for k in sorted(cells)) + " |")

        # Peak memory of the CLI on the W1 shape (64 MiB data, 64 MiB output).
        wl = Workload("W1_rss", "Gather", 0, (65536, ROW), (65536,))
        wdir = write_workload(root, wl)
        data, idx = os.path.join(wdir, "data.npy"), os.path.join(wdir, "indices.npy")
        out = os.path.join(wdir, "out.npy")
        inputs = os.path.getsize(data) + os.path.getsize(idx)
        output = 65536 * ROW * 4
        baseline = peak_rss_kib([gsx, "--version"]) * 1024
        peak = peak_rss_kib([gsx, "gather", data, idx, "--axis", "0", "-o", out]) * 1024
        budget = (inputs + output) * 1.05
        print(f"\npeak RSS of `gsx gather` on W1: {peak / 2**20:.1f} MiB; inputs {inputs / 2**20:.1f} MiB "
              f"+ output {output / 2**20:.1f} MiB = {(inputs + output) / 2**20:.1f} MiB "
              f"(+5%: {budget / 2**20:.1f} MiB); the binary alone: {baseline / 2**20:.1f} MiB; "
              f"{'within' if peak <= budget else 'over'} the budget")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
