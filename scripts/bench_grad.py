#!/usr/bin/env python3
"""Time the gathers' backward (issue #31): gatherscatter.grad beside torch's
own backward of the same forward, on 1 and 2 threads, in one process. The
CPU is printed first.

    python3 scripts/bench_grad.py [--repeat N]

Workloads (float32 gradients, int64 indices, uniform random: duplicates):
  W1_rows     index_select / x[idx] of 65,536 rows of 256 from 65,536: the
              backward scatter-adds 64 MiB of gradients into 65,536 rows
  W4_elements torch.gather along the last axis of 4096 x 4096 (W4's shape)
  EMB_rows    nn.functional.embedding of 65,536 lookups in a 65,536 x 256 table
  SR_mean     scatter_reduce mean of 16M updates into 1M slots (#30's), both gradients
  SR_amax     the same with amax
  EB_sum      embedding_bag sum over a 1M x 128 table, 64k bags of 20 (#30's):
              the weight's gradient
  EB_max      the same with max
  SEG_sum     segment_csr sum of 1M rows of 64 in 10k segments (#30's), against
              torch.segment_reduce
torch's side is ``torch.autograd.grad`` of the forward's output with the
gradient given (the forward run once, outside the timing); EB_max hands
gatherscatter its forward's result the same way (``output=``). Before timing,
the two gradients must agree (the same sums; summation order may differ in
torch) and gatherscatter's 1- and 2-thread results must be bit-identical.
The bar (issue #31) is 1.5x torch at the same thread count.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_python import print_cpu  # noqa: E402
from bench_reduce import median_time  # noqa: E402

import torch  # noqa: E402

import gatherscatter as gs  # noqa: E402

BAR = 1.5


def scatter_reduce_workload(rng, reduce):
    n, slots = 1 << 24, 1 << 20
    index = rng.integers(0, slots, n)
    src = rng.standard_normal(n).astype(np.float32)
    data = rng.standard_normal(slots).astype(np.float32)
    g = rng.standard_normal(slots).astype(np.float32)
    t_index = torch.from_numpy(index)

    def ours(threads):
        return gs.grad.scatter_reduce(g, data, 0, index, src, reduce, threads=threads)

    def forward(x, s):
        return torch.scatter_reduce(x, 0, t_index, s, reduce)

    return (f"SR_{reduce}", [data, src], ours, forward, g)


def workloads(rng):
    rows = rng.integers(0, 65536, 65536)
    g_rows = rng.standard_normal((65536, 256)).astype(np.float32)
    elements = rng.integers(0, 4096, (4096, 4096))
    g_elements = rng.standard_normal((4096, 4096)).astype(np.float32)
    t_rows = torch.from_numpy(rows)
    table = [np.zeros((65536, 256), np.float32)]
    yield ("W1_rows", table,
           lambda threads: (gs.grad.gather(g_rows, rows, (65536, 256), 0, threads=threads),),
           lambda x: torch.index_select(x, 0, t_rows), g_rows)
    yield ("W4_elements", [np.zeros((4096, 4096), np.float32)],
           lambda threads: (gs.grad.gather_elements(g_elements, elements, (4096, 4096), 1,
                                                    threads=threads),),
           lambda x: torch.gather(x, 1, torch.from_numpy(elements)), g_elements)
    yield ("EMB_rows", table,
           lambda threads: (gs.grad.gather(g_rows, rows, (65536, 256), 0, threads=threads),),
           lambda x: torch.nn.functional.embedding(t_rows, x), g_rows)
    yield scatter_reduce_workload(rng, "mean")
    yield scatter_reduce_workload(rng, "amax")
    yield from fold_workloads(rng)


def fold_workloads(rng):
    bags, size, dim = 1 << 16, 20, 128
    weight = np.zeros((1 << 20, dim), np.float32)
    indices = rng.integers(0, 1 << 20, bags * size)
    offsets = np.arange(bags) * size
    g_bags = rng.standard_normal((bags, dim)).astype(np.float32)
    t_indices, t_offsets = torch.from_numpy(indices), torch.from_numpy(offsets)
    for mode in ("sum", "max"):
        table = [rng.standard_normal(weight.shape).astype(np.float32)] if mode == "max" else [weight]
        # max reads the forward's result, run once outside the timing as
        # torch's forward is (which keeps its max indices for the backward).
        out = gs.embedding_bag(table[0], indices, offsets, mode) if mode == "max" else None
        yield (f"EB_{mode}", table,
               lambda threads, mode=mode, table=table, out=out: (gs.grad.embedding_bag(
                   g_bags, table[0], indices, offsets, mode, output=out, threads=threads)[0],),
               lambda x, mode=mode: torch.nn.functional.embedding_bag(t_indices, x, t_offsets,
                                                                      mode=mode),
               g_bags)
    rows, segments = 1 << 20, 10_000
    indptr = np.linspace(0, rows, segments + 1).astype(np.int64)
    src = np.zeros((rows, 64), np.float32)
    g_segments = rng.standard_normal((segments, 64)).astype(np.float32)
    lengths = torch.from_numpy(np.diff(indptr))
    yield ("SEG_sum", [src],
           lambda threads: (gs.grad.segment_csr(g_segments, src, indptr, "sum", threads=threads),),
           lambda x: torch.segment_reduce(x, "sum", lengths=lengths, axis=0), g_segments)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--only", nargs="*", help="run only these workloads")
    args = parser.parse_args()
    print_cpu()
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    rng = np.random.default_rng(0)
    print("| workload | 1 thread: gatherscatter · torch · speed-up | 2 threads |")
    print("|---|---|---|")
    for name, arrays, ours, forward, grad_out in workloads(rng):
        if args.only and name not in args.only:
            continue
        inputs = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
        y = forward(*inputs)
        g = torch.from_numpy(grad_out)

        def theirs():
            return torch.autograd.grad(y, inputs, g, retain_graph=True)

        one, two = ours(1), ours(2)
        for a, b, t in zip(one, two, theirs()):
            assert a.tobytes() == b.tobytes(), f"{name}: 1 and 2 threads differ"
            if name == "EB_max":
                # A tie in a bag (equal float32 values of two rows) splits the
                # gradient here; torch gives it to one row. Rare, and only there.
                off = ~np.isclose(a, t.numpy(), rtol=1e-4, atol=1e-3)
                assert off.mean() < 1e-6, f"{name}: {off.sum()} elements differ"
            else:
                np.testing.assert_allclose(a, t.numpy(), rtol=1e-4, atol=1e-3)
        cells = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            t_gs = median_time(lambda: ours(threads), args.repeat)
            t_torch = median_time(theirs, args.repeat)
            ratio = t_torch / t_gs
            mark = "**" if ratio >= BAR else ""
            cells.append(f"{t_gs * 1e3:.1f} ms · {t_torch * 1e3:.1f} ms · {mark}{ratio:.2f}×{mark}")
        print(f"| {name} | {cells[0]} | {cells[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
