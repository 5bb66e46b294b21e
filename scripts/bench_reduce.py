#!/usr/bin/env python3
"""Time the reductions beyond ONNX (issue #30's workloads) from Python:
gatherscatter beside torch and numpy, each called the way a Python user
calls it, on 1 and 2 threads, in one process. The CPU is printed first.

    python3 scripts/bench_reduce.py [--repeat N] [--json out.json]

Workloads (float32 values, int64 indices, heavy duplicates):
  SR_mean  scatter_reduce mean, 16M updates into 1M slots
  SR_amax  scatter_reduce amax, 16M updates into 1M slots
numpy's spellings: bincount(weights)/bincount for the mean, maximum.at for
amax (on a copy). Before timing, gatherscatter's 1- and 2-thread results
must be bit-identical and agree with torch's. The bar (issue #30) is 2x the
fastest of torch and numpy at the same thread count.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_python import print_cpu  # noqa: E402

BAR = 2.0


def median_time(call, repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def workloads(rng):
    n, m = 16_000_000, 1_000_000
    index = rng.integers(0, m, n)
    src = rng.standard_normal(n).astype(np.float32)
    data = rng.standard_normal(m).astype(np.float32)
    return [("SR_mean", "mean", data, index, src), ("SR_amax", "amax", data, index, src)]


def numpy_call(reduce, data, index, src):
    if reduce == "mean":
        m = len(data)

        def mean():
            sums = np.bincount(index, weights=src, minlength=m) + data
            counts = np.bincount(index, minlength=m) + 1
            return (sums / counts).astype(np.float32)
        return mean

    def amax():
        out = data.copy()
        np.maximum.at(out, index, src)
        return out
    return amax


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    import gatherscatter as gs
    import torch

    print_cpu()
    rows = []
    for name, reduce, data, index, src in workloads(np.random.default_rng(0)):
        one = gs.scatter_reduce(data, 0, index, src, reduce, threads=1)
        two = gs.scatter_reduce(data, 0, index, src, reduce, threads=2)
        assert one.tobytes() == two.tobytes(), f"{name}: 1 and 2 threads differ"
        t_data, t_index, t_src = (torch.from_numpy(a) for a in (data, index, src))
        expected = t_data.scatter_reduce(0, t_index, t_src, reduce).numpy()
        np.testing.assert_allclose(one, expected, rtol=1e-5, atol=1e-6)
        numpy_s = median_time(numpy_call(reduce, data, index, src), max(3, args.repeat // 2))
        for threads in (1, 2):
            torch.set_num_threads(threads)
            torch_s = median_time(lambda: t_data.scatter_reduce(0, t_index, t_src, reduce),
                                  args.repeat)
            gs_s = median_time(lambda: gs.scatter_reduce(data, 0, index, src, reduce,
                                                         threads=threads), args.repeat)
            peer, peer_s = min((("torch", torch_s), ("numpy", numpy_s)), key=lambda p: p[1])
            rows.append({"workload": name, "threads": threads, "gs_s": gs_s, "torch_s": torch_s,
                         "numpy_s": numpy_s, "speed_up": peer_s / gs_s, "peer": peer})
            mark = "meets" if peer_s / gs_s >= BAR else "below"
            print(f"{name} {threads}t: gs {gs_s * 1e3:.1f} ms · torch {torch_s * 1e3:.1f} ms · "
                  f"numpy {numpy_s * 1e3:.1f} ms · {peer_s / gs_s:.2f}x the fastest ({peer}), "
                  f"{mark} the {BAR:.0f}x bar", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
