#!/usr/bin/env python3
"""Time the ten workloads of the peer harness from Python, in one process:
gatherscatter (the installed Python package) beside numpy, onnxruntime and
torch, each called the way a Python user calls it.

    python3 scripts/bench_python.py --bench-dir ../shared/bench [peers.py args]
    (e.g. --quick, --workloads W1,W9, --json out.json, --markdown table.md)
    python3 scripts/bench_python.py --summary-of out.json

--summary-of prints the table of record (docs/performance.md) from a run's JSON: gs on 1 thread
against the fastest 1-thread peer, gs on 2 threads against the fastest peer
on at most 2, the speed-up in bold where it meets the bar (1.5x; for the
latency workload W9, at or below numpy's time).

The harness's peers.py does the timing, checking and the table; this script
adds a `gs` column family to it (one column per --threads value). Every call
returns a fresh numpy array, as the peers' calls do. The CPU is printed first,
then what gatherscatter's `auto` strategies choose on it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def print_cpu() -> None:
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    flags = set(info.get("flags", "").split())
    vector = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl")
              if f in flags]
    print(f"CPU: {info.get('vendor_id')} family {info.get('cpu family')} model {info.get('model')} "
          f"({info.get('model name')}), {' '.join(vector) or 'no AVX'}", flush=True)
    try:
        import gatherscatter
    except ImportError:
        return
    # What the library's `auto` strategies choose on this CPU (docs/performance.md).
    report = gatherscatter.tuning_report()
    print(report, flush=True)
    if "| build debug" in report:
        # `scripts/test_all.sh` installs a dev build; its times are 10-50x
        # an optimised build's and would be published as the library's.
        sys.exit("gatherscatter here is a debug build, not for timing: install the release "
                 "wheel first (maturin build --release -m crates/gatherscatter-py/Cargo.toml)")


BAR = 1.5


def _time(seconds: float, latency: bool) -> str:
    return f"{seconds * 1e6:.2f} µs" if latency else f"{seconds * 1e3:.1f} ms"


def summary(run: dict) -> str:
    """The table of record of one run (peers.py's JSON with gs columns)."""
    lines = ["| workload | gs(1t) · fastest 1-thread peer · speed-up "
             "| gs(2t) · fastest peer (≤2 threads) · speed-up |", "|---|---|---|"]
    met = total = 0
    for wl in run["workloads"]:
        ok = {r["peer"]: r for r in wl["results"] if r.get("status") == "ok"}
        latency = wl["latency"]
        cells = []
        for gs_col, most in (("gs(1t)", 1), ("gs(2t)", 2)):
            peers_here = {p: r["median_s"] for p, r in ok.items()
                          if not p.startswith("gs") and (r.get("threads") or 1) <= most}
            if gs_col not in ok or not peers_here:
                cells.append("—")
                continue
            if latency:   # the bar of a tiny call: numpy's own time
                peers_here = {p: t for p, t in peers_here.items() if p == "numpy"} or peers_here
            peer, peer_s = min(peers_here.items(), key=lambda kv: kv[1])
            ours = ok[gs_col]["median_s"]
            ratio = peer_s / ours
            good = ours <= peer_s if latency else ratio >= BAR
            met, total = met + good, total + 1
            speed_up = f"**{ratio:.2f}×**" if good else f"{ratio:.2f}×"
            cells.append(f"{_time(ours, latency)} · {peer} {_time(peer_s, latency)} · {speed_up}")
        lines.append(f"| {wl['name']} | {cells[0]} | {cells[1]} |")
    lines.append("")
    lines.append(f"{met} of {total} cells meet the bar.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--summary-of", metavar="JSON", help="print the table of record of a run")
    ap.add_argument("--bench-dir", help="the peer harness folder (peers.py)")
    args, rest = ap.parse_known_args()
    if args.summary_of:
        with open(args.summary_of) as f:
            print(summary(json.load(f)))
        return 0
    if not args.bench_dir:
        ap.error("--bench-dir is required to run")
    sys.path.insert(0, os.path.abspath(args.bench_dir))
    import peers  # noqa: E402  (the harness, found through --bench-dir)
    import gatherscatter as gs

    class GatherscatterPeer(peers.Peer):
        """gatherscatter from Python: gs.gather / gather_elements / scatter_elements
        with threads=T, a fresh output per call."""

        family = "gs"

        def version(self):
            return gs.__version__

        def prepare(self, wl, inputs):
            data, idx, ax, t = inputs["data"], inputs["indices"], wl.axis, self.threads
            if wl.op == "Gather":
                return lambda: gs.gather(data, idx, ax, threads=t)
            if wl.op == "GatherElements":
                return lambda: gs.gather_elements(data, idx, ax, threads=t)
            upd, red = inputs["updates"], wl.reduction
            return lambda: gs.scatter_elements(data, idx, upd, ax, red, threads=t)

    peers.PEER_FAMILIES["gs"] = lambda threads, prealloc: (
        [] if prealloc else [GatherscatterPeer(t) for t in threads])
    peers.FAMILY_CLASS["gs"] = GatherscatterPeer
    print_cpu()
    if not any(a == "--peers" or a.startswith("--peers=") for a in rest):
        rest += ["--peers", "gs,numpy,ort,torch"]
    return peers.main(rest)


if __name__ == "__main__":
    sys.exit(main())
