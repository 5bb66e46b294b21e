"""Gather and scatter over Dask arrays, chunk by chunk, without a shuffle.

``take``, ``take_along_axis``, ``gather_elements`` and ``scatter_reduce``
take a chunked ``dask.array.Array`` and return one; Dask's scheduler (local
or ``dask.distributed``) runs the tasks, and each task runs this library's
kernel on one chunk. The plans (docs/dask.md):

- ``take``: the indices are bucketed by the chunk of ``x`` they hit; one task
  per (source chunk, output chunk) pair *with hits* gathers from that chunk,
  and one task per output chunk puts the pieces in index order. The graph
  grows with the pairs hit, not with ``len(indices)``; ``x`` is never
  rechunked or moved whole.
- ``gather_elements`` / ``take_along_axis``: the indices are chunked like
  ``x`` off the axis; each output chunk is filled by a chain of tasks, one per
  chunk of ``x`` along the axis that its indices hit.
- ``scatter_reduce``: each chunk of updates is split by destination chunk
  (keeping its row-major order); each chunk of ``x`` then applies its share
  with the core's deterministic kernel. Every element receives its updates in
  the order a single-machine call applies them, so the result is
  bit-identical to ``gatherscatter.scatter_reduce`` (``scatter_elements`` for
  ``"none"``) on the whole array, for any chunking and any number of workers.

Out-of-range indices raise ``OutOfBoundsError`` at compute time, with the
single-machine message and the index's position in the whole index array.
Dask is an optional dependency: ``pip install "gatherscatter[dask]"``.
"""

from __future__ import annotations

import math
import sys
import threading
from itertools import product
from typing import Any, Dict, List, Optional, Sequence, Tuple

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from . import _native
from ._errors import AxisError, OutOfBoundsError, ShapeError
from ._numpy import _along_axis, _integer_indices

__all__ = ["take", "take_along_axis", "gather_elements", "scatter_reduce"]

REDUCTIONS = ("none", "sum", "prod", "mean", "amax", "amin")

#: Threads of the core's kernel inside one task: Dask already runs a task on
#: each of its worker threads, and more would only contend for the cores.
TASK_THREADS = 1

Block = Tuple[int, ...]


# ---------------------------------------------------------------- helpers


def _dask_array(x: Any, name: str) -> da.Array:
    x = x if isinstance(x, da.Array) else da.asarray(x)
    if any(math.isnan(c) for chunks in x.chunks for c in chunks):
        raise ValueError(f"{name} has unknown chunk sizes; call "
                         f"{name}.compute_chunk_sizes() first")
    return x


def _axis(axis: int, ndim: int) -> int:
    """The core's axis rule and messages (``take_along_axis`` keeps numpy's)."""
    if ndim == 0:
        raise ShapeError("data has rank 0, but rank >= 1 is required", "rank_mismatch")
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of range [{-ndim}, {ndim - 1}] for data of "
                        f"rank {ndim}", "bad_axis")
    return axis % ndim


def _bounds(chunks: Sequence[int]) -> np.ndarray:
    """[0, c0, c0 + c1, ...]: where each chunk starts, and the end."""
    return np.concatenate([[0], np.cumsum(chunks, dtype=np.int64)]).astype(np.int64)


def _normalized(idx: np.ndarray, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """The indices as int64 in ``[0, n)`` (negatives counted from the end) and
    the mask of those out of ``[-n, n)``."""
    if idx.dtype.kind == "u":
        bad = idx >= n
        return np.where(bad, 0, idx).astype(np.int64), bad
    v = idx.astype(np.int64, copy=False)
    v = np.where(v < 0, v + n, v)
    return v, (v < 0) | (v >= n)


def _out_of_range(idx: np.ndarray, bad: np.ndarray, offset: Sequence[int], axis: int,
                  n: int, shape: Optional[Tuple[int, ...]] = None,
                  base: int = 0) -> OutOfBoundsError:
    """The single-machine error for the first bad index of a block of
    ``indices`` at ``offset``; or of a flat run of them starting ``base``
    entries into an array of ``shape``."""
    first = int(np.argmax(bad.reshape(-1)))
    value = int(idx.reshape(-1)[first])
    shape = idx.shape if shape is None else shape
    local = np.unravel_index(base + first, shape) if shape else ()
    where = ", ".join(str(o + int(p)) for o, p in zip(offset, local))
    if n == 0:
        text = (f"index {value} at indices[{where}] is out of range: axis {axis} has "
                f"size 0, so no index is valid")
    else:
        text = (f"index {value} at indices[{where}] is out of range [{-n}, {n - 1}] "
                f"for axis {axis} of size {n}")
    return OutOfBoundsError(text, "out_of_bounds")


def _check_off_axis(idx_shape: Tuple[int, ...], x_shape: Tuple[int, ...], axis: int) -> None:
    """The core's rule for GatherElements and ScatterElements: same rank, and
    the indices no larger than the data off the axis."""
    if len(idx_shape) != len(x_shape):
        raise ShapeError(f"indices has rank {len(idx_shape)}, but the rank {len(x_shape)} "
                         f"of data is required", "rank_mismatch")
    for d, (m, n) in enumerate(zip(idx_shape, x_shape)):
        if d != axis and m > n:
            raise ShapeError(
                f"indices dimension {d} is {m}, larger than data's {n}; only the axis "
                f"{axis} may be larger (indices shape {list(idx_shape)}, data shape "
                f"{list(x_shape)})", "shape_mismatch")


def _cut(chunks: Sequence[int], extent: int) -> Tuple[int, ...]:
    """``chunks`` truncated to cover ``[0, extent)``: the same boundaries."""
    out, start = [], 0
    for c in chunks:
        if start >= extent:
            break
        out.append(min(c, extent - start))
        start += c
    return tuple(out) or (0,)


def _along_chunks(extent: int, size: int) -> Tuple[int, ...]:
    size = max(1, size)
    return tuple(min(size, extent - a) for a in range(0, extent, size)) or (0,)


def _array(graph: Dict, name: str, deps: List[da.Array], chunks, dtype) -> da.Array:
    hlg = HighLevelGraph.from_collections(name, graph, dependencies=deps)
    return da.Array(hlg, name, chunks, meta=np.empty((0,) * len(chunks), dtype))


# ---------------------------------------------------------------- take


class _Slabs:
    """Room for small task results, cut from 16 MiB slabs that this process
    keeps and reuses once no piece cut from them is alive.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_`` set, so the C
    heap hands freed memory back at once and every fresh result of a few
    hundred KiB pays its page faults again: in a worker, a 0.7 MB gather took
    0.55 ms into fresh memory and 0.1 ms into memory already touched.
    """

    SLAB = 16 << 20
    KEEP = 4  # slabs kept per process: 64 MiB at most

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: List[np.ndarray] = []
        self._current: Optional[np.ndarray] = None
        self._used = 0

    def empty(self, shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes == 0 or nbytes > self.SLAB // 4 or dtype.hasobject:
            return np.empty(shape, dtype)
        with self._lock:
            start = -(-self._used // 64) * 64
            if self._current is None or start + nbytes > self.SLAB:
                self._current, start = self._free_slab(), 0
            self._used = start + nbytes
            room = self._current[start:start + nbytes]
        return room.view(dtype).reshape(shape)

    def _free_slab(self) -> np.ndarray:
        self._current = None
        for slab in self._kept:
            # Every view of a slab, however derived, refers to the slab itself
            # (numpy collapses bases): the list, `slab` and the call's
            # argument are the only references of a slab nothing uses.
            if sys.getrefcount(slab) == 3:
                return slab
        slab = np.empty(self.SLAB, np.uint8)
        if len(self._kept) < self.KEEP:
            self._kept.append(slab)
        return slab


_SLABS = _Slabs()


def _take_block(block: np.ndarray, local: np.ndarray, axis: int) -> np.ndarray:
    shape = block.shape[:axis] + local.shape + block.shape[axis + 1:]
    out = _SLABS.empty(shape, block.dtype)
    return _native.gather(block, local, axis, out=out, threads=TASK_THREADS)


def _raise(error: Exception) -> None:
    raise error


def _assemble(shape: Tuple[int, ...], dtype: np.dtype, axis: int, index_shape: Tuple[int, ...],
              positions: List[np.ndarray], parts: List[np.ndarray]) -> np.ndarray:
    """One output chunk from the pieces gathered from each source chunk."""
    final = shape[:axis] + index_shape + shape[axis + 1:]
    if len(parts) == 1 and positions[0].size == shape[axis]:
        return parts[0].reshape(final)  # one source chunk, already in index order
    out = np.empty(shape, dtype)
    lead = (slice(None),) * axis
    for pos, part in zip(positions, parts):
        out[lead + (pos,)] = part
    return out.reshape(final)


def take(x: Any, indices: Any, axis: int = 0, *, chunks: Optional[int] = None) -> da.Array:
    """``numpy.take`` of a chunked array: ``out[a.., i.., b..] = x[a.., indices[i..], b..]``.

    ``x`` is a ``dask.array.Array`` (anything else is wrapped with
    ``da.asarray``); ``indices`` is a numpy array, or a dask array, which is
    computed first: its values decide the plan. Negative indices count from
    the end; others out of range raise ``OutOfBoundsError`` at compute time.
    ``chunks`` is the number of entries of ``indices``' first dim per output
    chunk (default: as many as fill two chunks of ``x`` along ``axis``).

    >>> import numpy as np, dask.array as da, gatherscatter.dask as gsd
    >>> x = da.arange(12, chunks=5)
    >>> gsd.take(x, np.array([11, 0, 5, 6])).compute()
    array([11,  0,  5,  6])
    """
    x = _dask_array(x, "x")
    axis = _axis(axis, x.ndim)
    if isinstance(indices, da.Array):
        indices = indices.compute()
    idx = _integer_indices(indices)
    index_shape = idx.shape
    scalar = idx.ndim == 0
    if scalar:
        idx = idx.reshape(1)
    if chunks is not None and (not isinstance(chunks, (int, np.integer)) or chunks < 1):
        raise ValueError(f"chunks must be a positive number of index rows, not {chunks!r}")

    n = x.shape[axis]
    flat, bad = _normalized(idx.reshape(-1), n)
    per_row = math.prod(idx.shape[1:])
    if chunks is None:
        # Output chunks of two chunks of x: half the (source, output) pairs of
        # one, and so half the tasks, whose overhead dominates small pieces.
        chunks = 2 * max(max(x.chunks[axis], default=1), 1) // max(per_row, 1)
    out_rows = _along_chunks(idx.shape[0], chunks)
    x_bounds = _bounds(x.chunks[axis])
    source = np.searchsorted(x_bounds, flat, side="right") - 1
    n_sources = len(x.chunks[axis])

    token = tokenize(x, idx, axis, out_rows)
    name, gathered = f"gs-take-{token}", f"gs-take-part-{token}"
    before = [range(b) for b in x.numblocks[:axis]]
    after = [range(b) for b in x.numblocks[axis + 1:]]
    graph: Dict = {}
    start = 0
    for o, rows in enumerate(out_rows):
        stop = start + rows * per_row
        zeros = (0,) * (idx.ndim - 1)
        if bad[start:stop].any():
            # The first bad index of this output chunk, named in the whole array.
            error = _out_of_range(idx.reshape(-1)[start:stop], bad[start:stop],
                                  [0] * len(index_shape), axis, n, index_shape, start)
            for kb, ka in product(product(*before), product(*after)):
                graph[(name, *kb, o, *zeros, *ka)] = (_raise, error)
            start = stop
            continue
        here = source[start:stop]
        order = np.argsort(here, kind="stable")
        ends = np.searchsorted(here[order], np.arange(n_sources + 1))
        pieces = [(s, order[ends[s]:ends[s + 1]]) for s in range(n_sources)
                  if ends[s + 1] > ends[s]]
        for kb, ka in product(product(*before), product(*after)):
            shape = tuple(x.chunks[d][k] for d, k in enumerate(kb))
            shape += (stop - start,) + tuple(x.chunks[axis + 1 + d][k] for d, k in enumerate(ka))
            keys = []
            for s, pos in pieces:
                key = (gathered, *kb, o, s, *ka)
                local = flat[start + pos] - x_bounds[s]
                graph[key] = (_take_block, (x.name, *kb, s, *ka), local, axis)
                keys.append(key)
            graph[(name, *kb, o, *zeros, *ka)] = (
                _assemble, shape, x.dtype, axis, (rows, *idx.shape[1:]),
                [pos for _, pos in pieces], keys)
        start = stop

    out_chunks = (x.chunks[:axis] + (out_rows,) + tuple((d,) for d in idx.shape[1:])
                  + x.chunks[axis + 1:])
    out = _array(graph, name, [x], out_chunks, x.dtype)
    return out[(slice(None),) * axis + (0,)] if scalar else out


# ---------------------------------------------------------------- gather_elements


def _gather_step(acc: Optional[np.ndarray], block: Optional[np.ndarray], idx: np.ndarray,
                 lo: int, hi: int, axis: int, n: int, offset: Tuple[int, ...],
                 first: bool, dtype: np.dtype) -> np.ndarray:
    """One link of an output chunk's chain: the entries whose index falls in
    the source chunk ``[lo, hi)`` along the axis. The first link checks the
    indices; the chain's links cover every entry exactly once."""
    v, bad = _normalized(idx, n)
    if first and bad.any():
        raise _out_of_range(idx, bad, offset, axis, n)
    if acc is None:
        acc = np.empty(idx.shape, dtype)
    if block is None or hi == lo:
        return acc
    hit = (v >= lo) & (v < hi)
    if hit.all():
        return _native.gather_elements(block, v - lo, axis, threads=TASK_THREADS)
    where = np.flatnonzero(hit)
    if where.size:
        coords = list(np.unravel_index(where, idx.shape))
        coords[axis] = v.reshape(-1)[where] - lo
        flat = np.ravel_multi_index(coords, block.shape)
        # The accumulator is this chain's own (one dependent), and writing the
        # same values twice is harmless, so a rerun task may write it in place.
        acc.reshape(-1)[where] = _native.gather(np.ascontiguousarray(block).reshape(-1),
                                                flat, 0, threads=TASK_THREADS)
    return acc


def gather_elements(x: Any, indices: Any, axis: int = 0) -> da.Array:
    """ONNX GatherElements (``torch.gather``) of a chunked array:
    ``out[p] = x[p with p[axis] := indices[p]]``, ``out`` of ``indices``' shape.

    ``indices`` has ``x``'s rank and, off ``axis``, is no larger than ``x``;
    it is chunked like ``x`` off the axis (``x`` itself never moves). A numpy
    ``indices`` prunes the plan to the chunks of ``x`` it hits; a dask one
    stays lazy (every chunk along the axis is visited). Negative indices count
    from the end; others raise ``OutOfBoundsError`` at compute time.

    >>> import numpy as np, dask.array as da, gatherscatter.dask as gsd
    >>> x = da.from_array(np.arange(12).reshape(3, 4), chunks=2)
    >>> gsd.gather_elements(x, np.array([[3, 0], [1, 1], [0, 2]]), axis=1).compute()
    array([[ 3,  0],
           [ 5,  5],
           [ 8, 10]])
    """
    x = _dask_array(x, "x")
    axis = _axis(axis, x.ndim)
    lazy = isinstance(indices, da.Array)
    idx = _dask_array(indices, "indices") if lazy else _integer_indices(indices)
    if lazy and idx.dtype.kind not in "iu":
        raise IndexError(f"indices must be an integer array, not {idx.dtype}")
    _check_off_axis(idx.shape, x.shape, axis)

    n = x.shape[axis]
    along = (idx.chunks[axis] if lazy
             else _along_chunks(idx.shape[axis], max(max(x.chunks[axis], default=1), 1)))
    chunks = tuple(along if d == axis else _cut(x.chunks[d], idx.shape[d])
                   for d in range(x.ndim))
    idx_da = idx.rechunk(chunks) if lazy else da.from_array(idx, chunks=chunks)
    x_bounds = _bounds(x.chunks[axis])
    n_sources = len(x.chunks[axis])

    token = tokenize(x, idx_da, axis)
    name, link = f"gs-gather-elements-{token}", f"gs-gather-elements-link-{token}"
    graph: Dict = {}
    starts = [_bounds(c) for c in chunks]
    for k in product(*(range(len(c)) for c in chunks)):
        offset = tuple(int(starts[d][k[d]]) for d in range(x.ndim))
        if lazy:
            sources = [s for s in range(n_sources) if x.chunks[axis][s] > 0]
        else:
            part = idx[tuple(slice(o, o + chunks[d][k[d]]) for d, o in enumerate(offset))]
            v, bad = _normalized(part, n)
            hit = np.searchsorted(x_bounds, v[~bad], side="right") - 1
            sources = np.unique(hit).tolist()
        sources = sources or [None]
        previous = None
        for i, s in enumerate(sources):
            if s is None:
                block, lo, hi = None, 0, 0
            else:
                block = (x.name, *(s if d == axis else k[d] for d in range(x.ndim)))
                lo, hi = int(x_bounds[s]), int(x_bounds[s + 1])
            key = (link, *k, i)
            graph[key] = (_gather_step, previous, block, (idx_da.name, *k), lo, hi, axis, n,
                          offset, i == 0, x.dtype)
            previous = key
        graph[(name, *k)] = previous
    return _array(graph, name, [x, idx_da], chunks, x.dtype)


def take_along_axis(x: Any, indices: Any, axis: Optional[int] = -1) -> da.Array:
    """``numpy.take_along_axis`` of a chunked array, with numpy's broadcasting
    of the dims off ``axis`` (``axis=None``: the flattened ``x``, through
    dask's reshape); the work is :func:`gather_elements`.

    >>> import numpy as np, dask.array as da, gatherscatter.dask as gsd
    >>> a = np.array([[10, 30, 20], [60, 40, 50]])
    >>> x = da.from_array(a, chunks=(1, 2))
    >>> gsd.take_along_axis(x, np.argsort(a, axis=1), axis=1).compute()
    array([[10, 20, 30],
           [40, 50, 60]])
    """
    x = _dask_array(x, "x")
    idx = indices if isinstance(indices, da.Array) else _integer_indices(indices)
    flatten, axis, x_to, idx_to = _along_axis(x.shape, idx.shape, axis)
    if flatten:
        x = x.reshape(-1)
    if x.shape != x_to:
        x = da.broadcast_to(x, x_to)
    if idx.shape != idx_to:
        idx = (da.broadcast_to(idx, idx_to) if isinstance(idx, da.Array)
               else np.broadcast_to(idx, idx_to))
    return gather_elements(x, idx, axis)


# ---------------------------------------------------------------- scatter_reduce


def _bucket(idx: np.ndarray, updates: np.ndarray, offset: Tuple[int, ...], axis: int,
            x_chunks: Tuple[Tuple[int, ...], ...]) -> Dict[Block, Tuple[np.ndarray, np.ndarray]]:
    """One chunk of updates split by the chunk of ``x`` each one lands in:
    ``{x block: (flat offsets in that block, values)}``, each list in the
    chunk's row-major order."""
    n = sum(x_chunks[axis])
    v, bad = _normalized(idx, n)
    if bad.any():
        raise _out_of_range(idx, bad, offset, axis, n)
    if idx.size == 0:
        return {}
    grid = tuple(len(c) for c in x_chunks)
    block: Any = 0  # grows to the full shape by broadcasting
    local: Any = 0
    for d in range(idx.ndim):
        if d == axis:
            coord = v
        else:
            line = [1] * idx.ndim
            line[d] = idx.shape[d]
            coord = (offset[d] + np.arange(idx.shape[d], dtype=np.int64)).reshape(line)
        chunks = x_chunks[d]
        if grid[d] == 1:
            b, within = 0, coord
        elif chunks[0] > 0 and all(c == chunks[0] for c in chunks[:-1]) \
                and chunks[-1] <= chunks[0]:
            b, within = np.divmod(coord, chunks[0])  # even chunks: no search
        else:
            bounds = _bounds(chunks)
            b = np.searchsorted(bounds, coord, side="right") - 1
            within = coord - bounds[b]
        block = block * grid[d] + b
        local = local * np.asarray(chunks, dtype=np.int64)[b] + within
    block = np.broadcast_to(block, idx.shape)
    local = np.broadcast_to(local, idx.shape)
    block, local = block.reshape(-1), local.reshape(-1)
    values = np.ascontiguousarray(updates).reshape(-1)
    if math.prod(grid) == 1:
        return {(0,) * idx.ndim: (local, values)}
    if math.prod(grid) <= np.iinfo(np.uint16).max:
        order = np.argsort(block.astype(np.uint16), kind="stable")  # a radix sort
    else:
        order = np.argsort(block, kind="stable")
    block, local, values = block[order], local[order], values[order]
    starts = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])
    ends = np.r_[starts[1:], block.size]
    return {tuple(int(i) for i in np.unravel_index(block[a], grid)): (local[a:b], values[a:b])
            for a, b in zip(starts, ends)}


def _share(buckets: Dict[Block, Tuple[np.ndarray, np.ndarray]], block: Block):
    return buckets.get(block)


def _apply(x: np.ndarray, shares: List[Optional[Tuple[np.ndarray, np.ndarray]]], reduce: str,
           include_self: bool) -> np.ndarray:
    """A chunk of ``x`` with its updates applied, as one flat scatter: each
    element's updates arrive in ascending order along the axis."""
    shares = [s for s in shares if s is not None]
    if not shares:
        return x
    offsets = np.concatenate([s[0] for s in shares])
    values = np.concatenate([s[1] for s in shares])
    flat = np.ascontiguousarray(x).reshape(-1)
    if reduce == "none":
        out = _native.scatter_elements(flat, offsets, values, 0, threads=TASK_THREADS)
    else:
        out = _native._scatter_reduce(flat, offsets, values, 0, reduce,
                                      include_self=include_self, threads=TASK_THREADS)
    return out.reshape(x.shape)


def scatter_reduce(x: Any, indices: Any, updates: Any, axis: int, reduce: str, *,
                   include_self: bool = True) -> da.Array:
    """ScatterElements / ``torch.scatter_reduce`` into a chunked array: each
    target ``t = p with p[axis] := indices[p]`` of a copy of ``x`` aggregates
    ``updates[p]`` with ``reduce`` (``"sum"``, ``"prod"``, ``"mean"``,
    ``"amax"``, ``"amin"``; ``"none"``: the last update wins), and ``x[t]``
    when ``include_self``.

    The result is bit-identical to ``gatherscatter.scatter_reduce(x, axis,
    indices, updates, reduce, include_self=...)`` (``scatter_elements`` for
    ``"none"``) on the whole array, whatever the chunking of either side and
    the number of workers. ``indices`` and ``updates`` are numpy or dask
    arrays of ``x``'s rank; ``updates`` may be larger than ``indices`` (only
    ``updates[:indices.shape]`` is used, as in PyTorch) except for ``"none"``.

    >>> import numpy as np, dask.array as da, gatherscatter.dask as gsd
    >>> x = da.zeros(5, chunks=2)
    >>> gsd.scatter_reduce(x, np.array([4, 0, 4, 1]), np.array([1., 2., 3., 4.]), 0,
    ...                    "sum").compute()
    array([2., 4., 0., 0., 4.])
    """
    x = _dask_array(x, "x")
    axis = _axis(axis, x.ndim)
    idx = indices if isinstance(indices, da.Array) else _integer_indices(indices)
    upd = updates if isinstance(updates, da.Array) else np.asarray(updates)
    # The dtype rules (and the reduction's, e.g. no amax of complex numbers)
    # are the core's: ask it on empty stand-ins, so the errors are its own.
    stand_in = np.zeros((1,) * x.ndim, x.dtype)
    no_idx, no_upd = np.zeros((0,) * x.ndim, idx.dtype), np.zeros((0,) * x.ndim, upd.dtype)
    if reduce == "none":
        _native.scatter_elements(stand_in, no_idx, no_upd, axis)
    else:
        _native._scatter_reduce(stand_in, no_idx, no_upd, axis, reduce,
                                include_self=include_self)
    _check_off_axis(idx.shape, x.shape, axis)
    if upd.shape != idx.shape:
        if (reduce == "none" or upd.ndim != idx.ndim
                or any(u < i for u, i in zip(upd.shape, idx.shape))):
            raise ShapeError(f"updates shape {list(upd.shape)} differs from indices shape "
                             f"{list(idx.shape)}; they must be equal", "shape_mismatch")
        upd = upd[tuple(slice(0, i) for i in idx.shape)]

    if isinstance(idx, da.Array):
        idx = _dask_array(idx, "indices")
        upd = da.asarray(upd).rechunk(idx.chunks)
    elif isinstance(upd, da.Array):
        upd = _dask_array(upd, "updates")
        idx = da.from_array(idx, chunks=upd.chunks)
    else:
        idx = da.from_array(idx, chunks="auto")
        upd = da.from_array(upd, chunks=idx.chunks)

    token = tokenize(x, idx, upd, axis, reduce, include_self)
    name = f"gs-scatter-reduce-{token}"
    split, share = f"gs-scatter-split-{token}", f"gs-scatter-share-{token}"
    graph: Dict = {}
    idx_starts = [_bounds(c) for c in idx.chunks]
    for k in product(*(range(len(c)) for c in idx.chunks)):
        offset = tuple(int(idx_starts[d][k[d]]) for d in range(x.ndim))
        graph[(split, *k)] = (_bucket, (idx.name, *k), (upd.name, *k), offset, axis, x.chunks)

    # The chunks of updates that may land in each chunk of x: all of them
    # along the axis, those that overlap it off the axis.
    x_starts = [_bounds(c) for c in x.chunks]
    overlapping = []
    for d in range(x.ndim):
        if d == axis:
            overlapping.append([list(range(len(idx.chunks[d])))] * len(x.chunks[d]))
            continue
        lists = []
        for j in range(len(x.chunks[d])):
            lo, hi = x_starts[d][j], x_starts[d][j + 1]
            lists.append([i for i in range(len(idx.chunks[d]))
                          if idx_starts[d][i] < hi and idx_starts[d][i + 1] > lo
                          and idx.chunks[d][i] > 0])
        overlapping.append(lists)
    for b in product(*(range(len(c)) for c in x.chunks)):
        keys = []
        for k in product(*(overlapping[d][b[d]] for d in range(x.ndim))):
            key = (share, *k, *b)
            graph[key] = (_share, (split, *k), b)
            keys.append(key)
        graph[(name, *b)] = (_apply, (x.name, *b), keys, reduce, include_self)
    return _array(graph, name, [x, idx, upd], x.chunks, x.dtype)
