#!/usr/bin/env python3
"""Time the reductions beyond ONNX (issue #30's workloads) from Python:
gatherscatter beside torch and numpy, each called the way a Python user
calls it, on 1 and 2 threads, in one process. The CPU is printed first.

    python3 scripts/bench_reduce.py [--repeat N] [--json out.json]

Workloads (float32 values, int64 indices):
  SR_mean  scatter_reduce mean, 16M updates into 1M slots (heavy duplicates)
  SR_amax  scatter_reduce amax, the same
  SC_sum   segment_csr sum, 1M rows of 64 in 10k segments
  EB_sum   embedding_bag sum, a 1M x 128 table, 64k bags of 20
numpy's spellings: bincount(weights)/bincount for the mean, maximum.at for
amax (on a copy), add.reduceat for segments (after a take for bags);
torch's scatter_reduce, segment_reduce and embedding_bag. Before timing, gatherscatter's 1- and 2-thread results must
be bit-identical and agree with torch's and numpy's. The bar (issue #30) is 2x the
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


class Workload:
    """One row group: how gatherscatter, torch and numpy each compute it."""

    def __init__(self, name, gs_call, torch_call, numpy_call):
        self.name, self.gs, self.torch, self.numpy = name, gs_call, torch_call, numpy_call


def workloads(rng):
    """The workloads, each built when reached: a builder's arrays are freed
    before the next one's are made, so no workload runs beside another's
    gigabyte of inputs."""
    for build in (scatter_reduce_workloads, segment_workload, embedding_workload):
        yield from build(rng)


def scatter_reduce_workloads(rng):
    import gatherscatter as gs
    import torch

    n, m = 16_000_000, 1_000_000
    index = rng.integers(0, m, n)
    src = rng.standard_normal(n).astype(np.float32)
    data = rng.standard_normal(m).astype(np.float32)
    t_data, t_index, t_src = (torch.from_numpy(a) for a in (data, index, src))
    for reduce in ("mean", "amax"):
        yield Workload(
            f"SR_{reduce}",
            lambda threads, reduce=reduce: gs.scatter_reduce(data, 0, index, src, reduce,
                                                             threads=threads),
            lambda reduce=reduce: t_data.scatter_reduce(0, t_index, t_src, reduce).numpy(),
            scatter_reduce_numpy(reduce, data, index, src))



def segment_workload(rng):
    import gatherscatter as gs
    import torch

    # segment_csr: 1M rows of 64 floats in 10k segments (none empty, so
    # that numpy's reduceat, which gives an empty segment its first row,
    # computes the same thing).
    rows, width, segments = 1_000_000, 64, 10_000
    table = rng.standard_normal((rows, width)).astype(np.float32)
    inner = np.sort(rng.choice(np.arange(1, rows), segments - 1, replace=False))
    indptr = np.concatenate([[0], inner, [rows]]).astype(np.int64)
    t_table, t_indptr = torch.from_numpy(table), torch.from_numpy(indptr)
    yield Workload(
        "SC_sum",
        lambda threads: gs.segment_csr(table, indptr, reduce="sum", threads=threads),
        lambda: torch.segment_reduce(t_table, "sum", offsets=t_indptr, axis=0).numpy(),
        lambda: np.add.reduceat(table, indptr[:-1], axis=0))



def embedding_workload(rng):
    import gatherscatter as gs
    import torch

    # embedding_bag: a 1M x 128 table, 64k bags of 20 random rows. numpy
    # has no embedding_bag: its spelling is a take, then reduceat.
    vocab, dim, bags, per_bag = 1_000_000, 128, 65_536, 20
    weight = rng.standard_normal((vocab, dim)).astype(np.float32)
    lookups = rng.integers(0, vocab, bags * per_bag)
    offsets = np.arange(0, bags * per_bag, per_bag, dtype=np.int64)
    t_weight, t_lookups, t_offsets = (torch.from_numpy(a) for a in (weight, lookups, offsets))
    yield Workload(
        "EB_sum",
        lambda threads: gs.embedding_bag(weight, lookups, offsets, "sum", threads=threads),
        lambda: torch.nn.functional.embedding_bag(t_lookups, t_weight, t_offsets,
                                                  mode="sum").numpy(),
        lambda: np.add.reduceat(weight[lookups], offsets, axis=0))


def scatter_reduce_numpy(reduce, data, index, src):
    """numpy's spellings: bincount(weights) / bincount for the mean,
    maximum.at on a copy for amax."""
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
    ap.add_argument("--only", help="run the workloads whose name starts with this")
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch

    print_cpu()
    rows = []
    for w in workloads(np.random.default_rng(0)):
        if args.only and not w.name.startswith(args.only):
            continue
        one, two = w.gs(1), w.gs(2)
        assert one.tobytes() == two.tobytes(), f"{w.name}: 1 and 2 threads differ"
        np.testing.assert_allclose(one, w.torch(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(one, w.numpy(), rtol=1e-4, atol=1e-4)
        numpy_s = median_time(w.numpy, max(3, args.repeat // 2))
        for threads in (1, 2):
            torch.set_num_threads(threads)
            torch_s = median_time(w.torch, args.repeat)
            gs_s = median_time(lambda: w.gs(threads), args.repeat)
            peer, peer_s = min((("torch", torch_s), ("numpy", numpy_s)), key=lambda p: p[1])
            rows.append({"workload": w.name, "threads": threads, "gs_s": gs_s,
                         "torch_s": torch_s, "numpy_s": numpy_s, "speed_up": peer_s / gs_s,
                         "peer": peer})
            mark = "meets" if peer_s / gs_s >= BAR else "below"
            print(f"{w.name} {threads}t: gs {gs_s * 1e3:.1f} ms · torch {torch_s * 1e3:.1f} ms · "
                  f"numpy {numpy_s * 1e3:.1f} ms · {peer_s / gs_s:.2f}x the fastest ({peer}), "
                  f"{mark} the {BAR:.0f}x bar", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
