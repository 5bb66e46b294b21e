#!/usr/bin/env python3
"""A shape sweep beside the ten workloads (issue #34, item 6): Gather,
GatherElements and ScatterElements (none and add) from Python, against
the fastest of onnxruntime, torch and numpy at the same thread count, in
one process. The CPU is printed first, then what the `auto` strategies
choose on it (`--tuning` forces them, as GATHERSCATTER_TUNING does).

    python3 scripts/sweep.py [--ops gather,gather_elements,...] [--repeat N] [--rounds R]
                             [--threads 1,2] [--json out.json] [--markdown out.md]
                             [--tuning stores=cached,word_gather=scalar,...]

Each op is swept one factor at a time around a base cell (float32 data,
int64 indices, the middle axis of a rank-3 tensor, blocks of 256 bytes,
16 MiB of output):

  axis × dtype   the first, middle and last axis, each with 1-, 2-, 4-, 8-
                 and 16-byte elements (int8, float16, float32, float64,
                 complex128), int64 indices
  index type     int32, uint16 and int64 indices on each axis, float32 data
  block          the middle axis with contiguous blocks (the dims after the
                 axis) of 1 B to 4 KiB (int8 and float32 data)

The block is what a gathered index moves: for Gather the slab after the
axis; for the element ops, the run of consecutive elements that share an
axis position (the dims after the axis), one element along the last axis.

Every peer is called as a user would call it, returning a fresh array:
onnxruntime a one-node model (int64 or int32 indices; it has no uint16 ones,
and no complex128 kernels), torch `index_select`, `gather`, `scatter` and
`scatter_add` on int64 indices (converted before timing: its best case),
numpy `take`, `take_along_axis`, `put_along_axis` and `add.at`. A peer that
lacks the dtype is left out of that cell. Before timing, every peer's
result must equal gatherscatter's (sums: to the dtype's rounding). The bar
(issue #34) is 1.5x the fastest peer. gatherscatter's timed calls start
after the thirty-six on which its measured strategies (`word_gather`,
`stores`, `block_order`, `block_prefetch`, `row_fetch`, `stream_fetch`,
`plane_reads`) time a class of call they have not seen (up to three of
them in turn, a Gather's stores, row order and prefetch level, or a
GatherElements' word loop and plane reads, three calls each way, up to
six for stores whose source and output fit in a quarter of the cache), so
each cell times the strategies kept for its class; a process pays those
calls once per class. Each library is timed in a block of `--repeat` calls
(its median), gatherscatter first, with a pause after onnxruntime's; the
blocks run `--rounds` times and each library keeps its best median.

Beside each cell's times, what the machine allows in that moment: the
bytes the call must move at the least (every input read once, the output
written once) over the rate of a plain copy (numpy `copyto` of 64 MiB
into a buffer, split in halves on two threads, read and written bytes
counted), timed right before the cell at the same thread count. A cell
whose bar (the fastest peer's time over 1.5) is below that copy's time
asks for more than copying its bytes takes; it is marked "bar < copy".
Data read from cache (a 16 MiB Gather source on a 32 MiB L3) can run
faster than the copy: the mark is a measured hint, not a proof.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_nd import ort_session  # noqa: E402
from bench_python import print_cpu  # noqa: E402
from bench_reduce import median_time  # noqa: E402

BAR = 1.5
# After an onnxruntime call its pool spins on; half a second gave the next
# library its full speed back (docs/performance.md, sweep).
ORT_SPIN_PAUSE_S = 0.5
# The most calls of each strategy in a row before a measured class keeps
# one (`crate::mem::measured::MAX_CALLS_EACH` in the library; most tables
# take `CALLS_EACH`, three).
MEASURED_CALLS_EACH = 6
# Strategies one call may time in turn, each on calls of its own (Gather's
# stores, then row order, then row prefetch level).
MEASURED_IN_TURN = 3
OUTPUT_BYTES = 16 << 20
DTYPES = {1: np.int8, 2: np.float16, 4: np.float32, 8: np.float64, 16: np.complex128}
AXES = ("first", "middle", "last")


class Cell:
    """One point of the sweep: its label and how each library computes it."""

    def __init__(self, op, factor, label, gs_call, peers, moved, exact=True):
        self.op, self.factor, self.label = op, factor, label
        self.gs, self.peers, self.exact = gs_call, peers, exact
        # Bytes the call moves at the least: inputs read once, output written once.
        self.moved = moved


class CopyProbe:
    """The machine's copy rate right now: numpy `copyto` of 64 MiB into a
    preallocated buffer (numpy releases the GIL), halves on two threads."""

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        self.src = np.ones(16 << 20, np.float32)
        self.dst = np.zeros_like(self.src)
        self.pool = ThreadPoolExecutor(2)

    def bytes_per_s(self, threads: int, repeat: int = 7) -> float:
        """Bytes read plus bytes written per second, the median of `repeat`."""
        src, dst = self.src, self.dst
        if threads == 1:
            def copy():
                np.copyto(dst, src)
        else:
            parts = np.array_split(np.arange(len(src)), threads)
            spans = [(p[0], p[-1] + 1) for p in parts]

            def copy():
                list(self.pool.map(lambda ab: np.copyto(dst[ab[0]:ab[1]], src[ab[0]:ab[1]]),
                                   spans))
        return 2 * src.nbytes / median_time(copy, repeat)


def shape_for(dtype, axis: str, block_bytes: int, axis_len: int):
    """A rank-3 shape of about OUTPUT_BYTES whose `axis` has `axis_len`
    positions, with `block_bytes` in the dims after a middle axis."""
    size = np.dtype(dtype).itemsize
    elements = OUTPUT_BYTES // size
    inner = max(1, block_bytes // size)
    if axis == "middle":
        return (max(1, elements // (axis_len * inner)), axis_len, inner), 1
    if axis == "first":
        return (axis_len, 64, max(1, elements // (axis_len * 64))), 0
    return (max(1, elements // (64 * axis_len)), 64, axis_len), 2


def values(rng, shape, dtype):
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-100, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def ort_types_ok(dtype, index_dtype) -> bool:
    return np.dtype(dtype) != np.complex128 and np.dtype(index_dtype) in (np.int32, np.int64)


def gather_cell(rng, factor, label, dtype, index_dtype, axis, block_bytes):
    import gatherscatter as gs
    import torch

    shape, ax = shape_for(dtype, axis, block_bytes, 256)
    data = values(rng, shape, dtype)
    idx = rng.integers(0, shape[ax], shape[ax]).astype(index_dtype)
    t_data, t_idx = torch.from_numpy(data), torch.from_numpy(idx.astype(np.int64))
    out_shape = shape
    peers = {"numpy": lambda threads: lambda: np.take(data, idx, axis=ax),
             "torch": lambda threads: lambda: t_data.index_select(ax, t_idx).numpy()}
    if ort_types_ok(dtype, index_dtype):
        peers["onnxruntime"] = lambda threads: ort_session(
            "Gather", {"data": data, "indices": idx}, out_shape, threads, axis=ax)
    return Cell("Gather", factor, label,
                lambda threads: gs.gather(data, idx, axis=ax, threads=threads), peers,
                moved=data.nbytes + idx.nbytes + data.nbytes)


def elements_inputs(rng, dtype, index_dtype, axis, block_bytes):
    shape, ax = shape_for(dtype, axis, block_bytes, 256)
    data = values(rng, shape, dtype)
    idx = rng.integers(0, shape[ax], shape).astype(index_dtype)
    return data, idx, ax


def gather_elements_cell(rng, factor, label, dtype, index_dtype, axis, block_bytes):
    import gatherscatter as gs
    import torch

    data, idx, ax = elements_inputs(rng, dtype, index_dtype, axis, block_bytes)
    t_data, t_idx = torch.from_numpy(data), torch.from_numpy(idx.astype(np.int64))
    peers = {"numpy": lambda threads: lambda: np.take_along_axis(data, idx, axis=ax),
             "torch": lambda threads: lambda: torch.gather(t_data, ax, t_idx).numpy()}
    if ort_types_ok(dtype, index_dtype):
        peers["onnxruntime"] = lambda threads: ort_session(
            "GatherElements", {"data": data, "indices": idx}, idx.shape, threads, axis=ax)
    return Cell("GatherElements", factor, label,
                lambda threads: gs.gather_elements(data, idx, axis=ax, threads=threads), peers,
                moved=data.nbytes + idx.nbytes + idx.size * data.itemsize)


def scatter_cell(reduction, rng, factor, label, dtype, index_dtype, axis, block_bytes):
    import gatherscatter as gs
    import torch

    data, idx, ax = elements_inputs(rng, dtype, index_dtype, axis, block_bytes)
    if reduction == "none":   # distinct targets: every library agrees on the result
        idx = np.argsort(rng.random(data.shape), axis=ax).astype(index_dtype)
    updates = values(rng, idx.shape, dtype)
    t_data, t_idx, t_upd = (torch.from_numpy(a) for a in (data, idx.astype(np.int64), updates))

    def numpy_call():
        out = data.copy()
        if reduction == "none":
            np.put_along_axis(out, idx, updates, axis=ax)
        else:
            grid = list(np.indices(idx.shape, sparse=True))
            grid[ax] = idx
            np.add.at(out, tuple(grid), updates)
        return out

    def torch_call():
        if reduction == "none":
            return t_data.scatter(ax, t_idx, t_upd).numpy()
        return t_data.scatter_add(ax, t_idx, t_upd).numpy()

    peers = {"numpy": lambda threads: numpy_call, "torch": lambda threads: torch_call}
    if ort_types_ok(dtype, index_dtype):
        peers["onnxruntime"] = lambda threads: ort_session(
            "ScatterElements", {"data": data, "indices": idx, "updates": updates},
            data.shape, threads, axis=ax, reduction=reduction)
    return Cell(f"ScatterElements {reduction}", factor, label,
                lambda threads: gs.scatter_elements(data, idx, updates, axis=ax,
                                                    reduction=reduction, threads=threads),
                peers, moved=data.nbytes + idx.nbytes + updates.nbytes + data.nbytes,
                exact=reduction == "none")


OPS = {
    "gather": gather_cell,
    "gather_elements": gather_elements_cell,
    "scatter_none": lambda *a: scatter_cell("none", *a),
    "scatter_add": lambda *a: scatter_cell("add", *a),
}


def cells(ops, rng):
    """Every cell of the sweep as (label, builder): built when reached, so
    one cell's arrays at a time."""
    for op in ops:
        build = OPS[op]
        for axis in AXES:
            for size, dtype in DTYPES.items():
                label = f"{axis} axis, {size}-byte {np.dtype(dtype).name}"
                yield label, lambda b=build, a=axis, d=dtype, l=label: b(
                    rng, "axis × dtype", l, d, np.int64, a, 256)
        for axis in AXES:
            for index_dtype in (np.int32, np.uint16):
                label = f"{axis} axis, float32, {np.dtype(index_dtype).name} indices"
                yield label, lambda b=build, a=axis, i=index_dtype, l=label: b(
                    rng, "index type", l, np.float32, i, a, 256)
        for dtype in (np.int8, np.float32):
            for block in (1, 16, 256, 4096):
                if block < np.dtype(dtype).itemsize:
                    continue
                label = f"middle axis, {np.dtype(dtype).name}, {block} B blocks"
                yield label, lambda b=build, d=dtype, k=block, l=label: b(
                    rng, "block", l, d, np.int64, "middle", k)


def check(cell: Cell, ours, theirs, peer: str) -> None:
    if cell.exact:
        assert np.array_equal(ours, theirs), f"{cell.op} {cell.label}: {peer} differs"
    else:
        tol = 1e-2 if ours.dtype == np.float16 else 1e-4
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol,
                                   err_msg=f"{cell.op} {cell.label}: {peer} differs")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2,
                    help="times each library's block runs per cell; its best median is kept")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", help="run the cells whose label contains this")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    ap.add_argument("--tuning", default="",
                    help="force kernel strategies: stores=cached|streaming,"
                         "word_gather=scalar|vector,block_order=output|source,"
                         "bag_fold=memory|registers,row_fetch=read|prefetch,"
                         "stream_fetch=ahead|hardware,block_prefetch=l1|l2,"
                         "plane_reads=packed|in_place")
    args = ap.parse_args()
    if args.tuning:
        import gatherscatter as gs
        gs.set_tuning(**dict(p.strip().split("=", 1) for p in args.tuning.split(",")))
    import onnxruntime
    import torch

    print_cpu()
    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
          f"numpy {np.__version__}", flush=True)
    thread_counts = [int(t) for t in args.threads.split(",")]
    probe = CopyProbe()
    rows = []
    for label, make in cells(args.ops.split(","), np.random.default_rng(0)):
        if args.only and args.only not in label:
            continue
        cell = make()
        ours = cell.gs(1)
        assert ours.tobytes() == cell.gs(2).tobytes(), f"{cell.label}: 1 and 2 threads differ"
        peers = {}
        for name, make_call in cell.peers.items():
            try:
                call = make_call(1)
                theirs = call()
            except Exception as error:  # the peer lacks this dtype: left out
                print(f"  ({name} skipped on {cell.op} {cell.label}: "
                      f"{type(error).__name__})", flush=True)
                continue
            check(cell, ours, theirs, name)
            peers[name] = make_call
        row = {"op": cell.op, "factor": cell.factor, "cell": cell.label,
               "moved_bytes": cell.moved}
        for threads in thread_counts:
            torch.set_num_threads(threads)
            copy_rate = probe.bytes_per_s(threads)
            # The calls the measured strategies time a new class on (a run
            # of each way, each strategy in turn) come first, so the cell
            # times the ones kept.
            for _ in range(MEASURED_IN_TURN * 2 * MEASURED_CALLS_EACH):
                cell.gs(threads)
            # Each library in a block, gatherscatter first, not interleaved:
            # on two vCPUs a peer's pool still spinning after its call takes
            # a core from whatever runs next (docs/performance.md, sweep),
            # so onnxruntime's block is followed by a pause. The blocks run
            # `--rounds` times and each library keeps its best median, as
            # the peer harness does: the machine's speed drifts within a run.
            gs_s, times = float("inf"), {}
            for _ in range(args.rounds):
                gs_s = min(gs_s, median_time(lambda: cell.gs(threads), args.repeat))
                for name, make_call in peers.items():
                    t = median_time(make_call(threads), args.repeat)
                    times[name] = min(times.get(name, t), t)
                    if name == "onnxruntime":
                        time.sleep(ORT_SPIN_PAUSE_S)
            peer, peer_s = min(times.items(), key=lambda kv: kv[1])
            row[f"{threads}t"] = {"gs_s": gs_s, "peers": times, "fastest": peer,
                                  "speed_up": peer_s / gs_s, "copy_bytes_per_s": copy_rate,
                                  "copy_s": cell.moved / copy_rate}
        rows.append(row)
        text = " · ".join(
            f"{t}t gs {row[f'{t}t']['gs_s'] * 1e3:.2f} ms, {row[f'{t}t']['fastest']} "
            f"{row[f'{t}t']['peers'][row[f'{t}t']['fastest']] * 1e3:.2f} ms = "
            f"{row[f'{t}t']['speed_up']:.2f}x (copy {row[f'{t}t']['copy_s'] * 1e3:.2f} ms)"
            for t in thread_counts)
        print(f"{cell.op} | {cell.label} | {text}", flush=True)
    # What the measured strategies kept, to tell a mis-picked class from a
    # slow kernel when a cell is below the bar.
    import gatherscatter as gs
    report = gs.tuning_report()
    print(report.replace(" | ", "\n  "), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "tuning_report": report}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table(rows, thread_counts))
    return 0


def bar_below_copy(r) -> bool:
    """Whether the bar's time (the fastest peer's over BAR) is below a plain
    copy of the cell's bytes at the run's copy rate."""
    return r["peers"][r["fastest"]] / BAR < r["copy_s"]


def table(rows, thread_counts) -> str:
    """The sweep as a table: the speed-up over the fastest peer per thread
    count, in bold where it meets the bar, and the time a plain copy of the
    cell's bytes took, marked where the bar asks for less."""
    head = " | ".join(f"{t}t gs / fastest peer (a copy of the bytes)" for t in thread_counts)
    lines = [f"| op | cell | {head} |", "|---|---|" + "---|" * len(thread_counts)]
    met = below_one = unreachable = 0
    for row in rows:
        parts = []
        for t in thread_counts:
            r = row[f"{t}t"]
            good = r["speed_up"] >= BAR
            met += good
            below_one += r["speed_up"] < 1.0
            ratio = f"**{r['speed_up']:.2f}×**" if good else f"{r['speed_up']:.2f}×"
            mark = ""
            if not good and bar_below_copy(r):
                unreachable += 1
                mark = ", bar < copy"
            parts.append(f"{r['gs_s'] * 1e3:.2f} ms / {r['fastest']} "
                         f"{r['peers'][r['fastest']] * 1e3:.2f} ms = {ratio} "
                         f"({r['copy_s'] * 1e3:.2f} ms{mark})")
        lines.append(f"| {row['op']} | {row['cell']} | " + " | ".join(parts) + " |")
    cells = len(rows) * len(thread_counts)
    lines.append("")
    lines.append(f"{met} of {cells} cells meet the {BAR}x bar; {below_one} are below 1.0x; "
                 f"of the {cells - met} below the bar, {unreachable} ask for less time than "
                 f"a plain copy of their bytes took (bar < copy).")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
