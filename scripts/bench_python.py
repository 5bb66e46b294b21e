#!/usr/bin/env python3
"""Time the ten workloads of the peer harness from Python, in one process:
gatherscatter (the installed Python package) beside numpy, onnxruntime and
torch, each called the way a Python user calls it.

    python3 scripts/bench_python.py --bench-dir ../shared/bench [peers.py args]
    (e.g. --quick, --workloads W1,W9, --json out.json, --markdown table.md)

The harness's peers.py does the timing, checking and the table; this script
adds a `gs` column family to it (one column per --threads value). Every call
returns a fresh numpy array, as the peers' calls do. The CPU is printed first.
"""

from __future__ import annotations

import argparse
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


def main() -> int:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--bench-dir", required=True, help="the peer harness folder (peers.py)")
    args, rest = ap.parse_known_args()
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
