#!/usr/bin/env python3
"""Time GatherND, ScatterND and TensorScatter (issue #34, item 5) from
Python: gatherscatter beside onnxruntime (a one-node model run with numpy
feeds) and torch (advanced indexing, `index_put_`, slice assignment), each
returning a fresh output, on 1 and 2 threads, in one process. The CPU is
printed first.

    python3 scripts/bench_nd.py [--repeat N] [--only NAME] [--json out.json]

Workloads (float32 values, int64 indices):
  GND_rows   GatherND, 64k pairs into [256, 256, 256]: rows of 1 KiB
  GND_elems  GatherND, 4M pairs into [4096, 4096]: single elements
  GND_batch  GatherND batch_dims=1, [64, 1024, 256] by [64, 1024, 1]
  SND_rows   ScatterND none, 16k distinct rows of 1 KiB into [65536, 256]
  SND_add    ScatterND add, 64k rows with duplicates into [65536, 256]
  TS_kv      TensorScatter, 16 new steps into a [4, 8, 2048, 128] cache
Before timing, every result must equal onnxruntime's and torch's (sums:
to 1e-4). The bar (issue #34) is 1.5x the fastest peer at the same thread
count.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_python import print_cpu  # noqa: E402
from bench_reduce import median_time  # noqa: E402

BAR = 1.5


def ort_session(op: str, inputs: dict, out_shape, threads: int, **attrs):
    """A one-node model of `op` on these inputs, run on `threads` threads."""
    import onnxruntime as ort
    from onnx import helper, numpy_helper  # noqa: F401

    def info(name, array):
        dtype = helper.np_dtype_to_tensor_dtype(array.dtype)
        return helper.make_tensor_value_info(name, dtype, list(array.shape))

    names = list(inputs)
    node = helper.make_node(op, names, ["out"], **attrs)
    first = inputs[names[0]]
    out = helper.make_tensor_value_info("out", helper.np_dtype_to_tensor_dtype(first.dtype),
                                        list(out_shape))
    graph = helper.make_graph([node], op, [info(k, v) for k, v in inputs.items()], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), sess_options=options,
                                   providers=["CPUExecutionProvider"])
    return lambda: session.run(["out"], inputs)[0]


class Workload:
    """How gatherscatter, onnxruntime and torch each compute one thing."""

    def __init__(self, name, gs_call, ort_call, torch_call, exact=True):
        self.name, self.gs, self.ort, self.torch, self.exact = (
            name, gs_call, ort_call, torch_call, exact)


def workloads(rng):
    """Built one at a time, so no workload runs beside another's inputs."""
    for build in (gather_nd_rows, gather_nd_elements, gather_nd_batch, scatter_nd_rows,
                  scatter_nd_add, tensor_scatter):
        yield build(rng)


def gather_nd_rows(rng):
    import gatherscatter as gs
    import torch

    data = rng.standard_normal((256, 256, 256), dtype=np.float32)
    idx = rng.integers(0, 256, (65536, 2))
    t_data, t_idx = torch.from_numpy(data), torch.from_numpy(idx)
    return Workload(
        "GND_rows",
        lambda threads: gs.gather_nd(data, idx, threads=threads),
        lambda threads: ort_session("GatherND", {"data": data, "indices": idx},
                                    (65536, 256), threads),
        lambda: t_data[t_idx[:, 0], t_idx[:, 1]].numpy())


def gather_nd_elements(rng):
    import gatherscatter as gs
    import torch

    data = rng.standard_normal((4096, 4096), dtype=np.float32)
    idx = rng.integers(0, 4096, (1 << 22, 2))
    t_data, t_idx = torch.from_numpy(data), torch.from_numpy(idx)
    return Workload(
        "GND_elems",
        lambda threads: gs.gather_nd(data, idx, threads=threads),
        lambda threads: ort_session("GatherND", {"data": data, "indices": idx},
                                    (1 << 22,), threads),
        lambda: t_data[t_idx[:, 0], t_idx[:, 1]].numpy())


def gather_nd_batch(rng):
    import gatherscatter as gs
    import torch

    data = rng.standard_normal((64, 1024, 256), dtype=np.float32)
    idx = rng.integers(0, 1024, (64, 1024, 1))
    t_data, t_idx = torch.from_numpy(data), torch.from_numpy(idx)
    batch = torch.arange(64).unsqueeze(1)
    return Workload(
        "GND_batch",
        lambda threads: gs.gather_nd(data, idx, batch_dims=1, threads=threads),
        lambda threads: ort_session("GatherND", {"data": data, "indices": idx},
                                    (64, 1024, 256), threads, batch_dims=1),
        lambda: t_data[batch, t_idx[..., 0]].numpy())


def scatter_nd_rows(rng):
    import gatherscatter as gs
    import torch

    data = rng.standard_normal((65536, 256), dtype=np.float32)
    idx = rng.permutation(65536)[:16384].reshape(-1, 1)
    updates = rng.standard_normal((16384, 256), dtype=np.float32)
    t_data, t_idx, t_upd = (torch.from_numpy(a) for a in (data, idx, updates))
    return Workload(
        "SND_rows",
        lambda threads: gs.scatter_nd(data, idx, updates, threads=threads),
        lambda threads: ort_session("ScatterND", {"data": data, "indices": idx,
                                                  "updates": updates}, data.shape, threads),
        lambda: t_data.clone().index_put_((t_idx[:, 0],), t_upd).numpy())


def scatter_nd_add(rng):
    import gatherscatter as gs
    import torch

    data = rng.standard_normal((65536, 256), dtype=np.float32)
    idx = rng.integers(0, 65536, (65536, 1))
    updates = rng.standard_normal((65536, 256), dtype=np.float32)
    t_data, t_idx, t_upd = (torch.from_numpy(a) for a in (data, idx, updates))
    return Workload(
        "SND_add",
        lambda threads: gs.scatter_nd(data, idx, updates, "add", threads=threads),
        lambda threads: ort_session("ScatterND", {"data": data, "indices": idx,
                                                  "updates": updates}, data.shape, threads,
                                    reduction="add"),
        lambda: t_data.clone().index_put_((t_idx[:, 0],), t_upd, accumulate=True).numpy(),
        exact=False)


def tensor_scatter(rng):
    import gatherscatter as gs
    import torch

    past = rng.standard_normal((4, 8, 2048, 128), dtype=np.float32)
    update = rng.standard_normal((4, 8, 16, 128), dtype=np.float32)
    at = np.array([0, 700, 1500, 2032], dtype=np.int64)
    t_past, t_update = torch.from_numpy(past), torch.from_numpy(update)

    def torch_call():
        present = t_past.clone()
        for b, w in enumerate(at.tolist()):
            present[b, :, w:w + 16] = t_update[b]
        return present.numpy()
    return Workload(
        "TS_kv",
        lambda threads: gs.tensor_scatter(past, update, at, threads=threads),
        lambda threads: ort_session("TensorScatter", {"past": past, "update": update,
                                                      "write_indices": at},
                                    past.shape, threads, axis=-2),
        torch_call)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", help="run the workloads whose name starts with this")
    ap.add_argument("--json")
    args = ap.parse_args()
    import onnxruntime
    import torch

    print_cpu()
    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}", flush=True)
    rows = []
    for w in workloads(np.random.default_rng(0)):
        if args.only and not w.name.startswith(args.only):
            continue
        one, two = w.gs(1), w.gs(2)
        assert one.tobytes() == two.tobytes(), f"{w.name}: 1 and 2 threads differ"
        for peer in (w.ort(1)(), w.torch()):
            if w.exact:
                assert np.array_equal(one, peer), f"{w.name}: differs from a peer"
            else:
                np.testing.assert_allclose(one, peer, rtol=1e-4, atol=1e-4)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            ort_call = w.ort(threads)
            # gatherscatter first and onnxruntime last: on two vCPUs the
            # pool of a two-thread session keeps spinning after its call
            # and slows whatever runs next (docs/performance.md, sweep).
            gs_s = median_time(lambda: w.gs(threads), args.repeat)
            torch_s = median_time(w.torch, args.repeat)
            ort_s = median_time(ort_call, args.repeat)
            peer, peer_s = min((("onnxruntime", ort_s), ("torch", torch_s)),
                               key=lambda p: p[1])
            rows.append({"workload": w.name, "threads": threads, "gs_s": gs_s,
                         "ort_s": ort_s, "torch_s": torch_s, "speed_up": peer_s / gs_s,
                         "peer": peer})
            mark = "meets" if peer_s / gs_s >= BAR else "below"
            print(f"{w.name} {threads}t: gs {gs_s * 1e3:.2f} ms · onnxruntime "
                  f"{ort_s * 1e3:.2f} ms · torch {torch_s * 1e3:.2f} ms · "
                  f"{peer_s / gs_s:.2f}x the fastest ({peer}), {mark} the {BAR}x bar",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
