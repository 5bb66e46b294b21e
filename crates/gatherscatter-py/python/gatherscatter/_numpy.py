"""numpy's spellings of gather and scatter, with numpy's results.

``take``, ``take_along_axis`` and ``put_along_axis`` return (or write) exactly
what numpy's functions of the same names do, including broadcasting and the
``mode=`` of ``take``; ``add_at`` and its siblings are ``np.add.at`` & co. for
integer-array indices. The work is the core's Gather, GatherElements,
ScatterElements and ScatterND; this module only shapes the arguments.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._errors import AxisError, OutOfBoundsError, ShapeError


def _normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of bounds for array of dimension {ndim}", "bad_axis")
    return axis % ndim


def _integer_indices(indices: Any, what: str = "indices") -> np.ndarray:
    idx = np.asarray(indices)
    if idx.dtype.kind == "b":
        # numpy casts booleans to 0/1 positions here (a safe cast).
        return idx.astype(np.intp)
    if idx.dtype.kind not in "iu":
        if idx.size == 0 and idx.dtype.kind == "f":
            return idx.astype(np.intp)  # np.asarray([]) is float64
        raise IndexError(f"{what} must be an integer array, not {idx.dtype}")
    return idx


def take_general(a: Any, indices: Any, axis: Optional[int] = None,
                 out: Optional[np.ndarray] = None, mode: str = "raise", *,
                 fill_value: Any = None, threads: Optional[int] = None) -> Any:
    """The calls of ``gatherscatter.take`` (native) that its own path does
    not take: ``axis=None``, modes other than ``"raise"``, indices that are
    not an integer ndarray. Same arguments and results."""
    a = np.asarray(a)
    idx = _integer_indices(indices)
    if axis is None:
        a = a.reshape(-1)
        axis = 0
    if mode not in ("raise", "wrap", "clip", "fill"):
        raise ValueError(f"mode must be 'raise', 'wrap', 'clip' or 'fill', not {mode!r}")
    if mode == "clip":
        idx = np.maximum(idx, 0)  # numpy's clip: negatives do not count from the end
    extra = {"fill_value": fill_value} if fill_value is not None else {}
    result = _native.gather(a, idx, axis, mode=mode, out=out, threads=threads, **extra)
    if out is None and result.ndim == 0:
        return result[()]
    return result


def _along_axis_shapes(arr_shape: Tuple[int, ...], idx_shape: Tuple[int, ...], axis: int):
    """numpy's broadcasting of the dims off ``axis`` for the *_along_axis pair."""
    if len(arr_shape) != len(idx_shape):
        raise ShapeError("`indices` and `arr` must have the same number of dimensions",
                         "rank_mismatch")
    common = []
    for d, (n, m) in enumerate(zip(arr_shape, idx_shape)):
        if d == axis or n == m:
            common.append(n if d != axis else None)
        elif n == 1 or m == 1:
            common.append(m if n == 1 else n)
        else:
            raise ShapeError(f"shape mismatch: arr {arr_shape} and indices {idx_shape} "
                             f"cannot be broadcast off axis {axis}", "shape_mismatch")
    arr_to = tuple(arr_shape[axis] if c is None else c for c in common)
    idx_to = tuple(idx_shape[axis] if c is None else c for c in common)
    return arr_to, idx_to


def _along_axis(arr_shape: Tuple[int, ...], idx_shape: Tuple[int, ...],
                axis: Optional[int]):
    """numpy's rules for the *_along_axis pair: whether ``arr`` is flattened
    first (``axis=None``), the axis, and the shapes both broadcast to."""
    flatten = axis is None
    if flatten:
        if len(idx_shape) != 1:
            raise ShapeError("when axis=None, `indices` must have a single dimension.",
                             "rank_mismatch")
        arr_shape, axis = (math.prod(arr_shape),), 0
    axis = _normalize_axis(axis, len(arr_shape))
    arr_to, idx_to = _along_axis_shapes(arr_shape, idx_shape, axis)
    return flatten, axis, arr_to, idx_to


def take_along_axis(arr: Any, indices: Any, axis: Optional[int] = -1, *,
                    threads: Optional[int] = None) -> np.ndarray:
    """``numpy.take_along_axis``: ``out[p] = arr[p with p[axis] := indices[p]]``,
    with numpy's broadcasting of the other dims; ``axis=None`` works on the
    flattened ``arr`` (1-D ``indices``).

    >>> import numpy as np, gatherscatter as gs
    >>> a = np.array([[10, 30, 20], [60, 40, 50]])
    >>> gs.take_along_axis(a, np.argsort(a, axis=1), axis=1)
    array([[10, 20, 30],
           [40, 50, 60]])
    """
    arr = np.asarray(arr)
    idx = _integer_indices(indices)
    flatten, axis, arr_to, idx_to = _along_axis(arr.shape, idx.shape, axis)
    if flatten:
        arr = arr.reshape(-1)
    if arr.shape != arr_to:
        arr = np.broadcast_to(arr, arr_to)
    if idx.shape != idx_to:
        idx = np.broadcast_to(idx, idx_to)
    return _native.gather_elements(arr, idx, axis, threads=threads)


def put_along_axis(arr: np.ndarray, indices: Any, values: Any, axis: Optional[int], *,
                   threads: Optional[int] = None) -> None:
    """``numpy.put_along_axis``, in place: ``arr[p with p[axis] := indices[p]] = values[p]``.

    ``values`` is cast to ``arr.dtype`` and broadcast to the indices' shape;
    with duplicate positions the last in row-major order wins. Every index
    is checked before ``arr`` is written: on an error ``arr`` is unchanged.
    (The result is computed into a new buffer and copied into ``arr``.)

    >>> import numpy as np, gatherscatter as gs
    >>> a = np.array([[10, 30, 20], [60, 40, 50]])
    >>> gs.put_along_axis(a, np.array([[1], [0]]), 99, axis=1)
    >>> a
    array([[10, 99, 20],
           [99, 40, 50]])
    """
    if not isinstance(arr, np.ndarray):
        raise TypeError("arr must be a numpy.ndarray: it is updated in place")
    idx = _integer_indices(indices)
    flatten, axis, arr_to, idx_to = _along_axis(arr.shape, idx.shape, axis)
    target = arr.reshape(-1) if flatten else arr
    if arr_to != target.shape:
        raise ShapeError(f"indices {idx.shape} would broadcast arr {target.shape}, which "
                         "is written in place", "shape_mismatch")
    if idx.shape != idx_to:
        idx = np.broadcast_to(idx, idx_to)
    vals = np.broadcast_to(np.asarray(values).astype(arr.dtype, copy=False), idx.shape)
    result = _native.scatter_elements(target, idx, vals, axis, threads=threads)
    np.copyto(target, result)
    if target is not arr and not np.shares_memory(target, arr):
        arr[...] = target.reshape(arr.shape)


IndexLike = Union[Any, Tuple[Any, ...]]


def _index_tuples(a: np.ndarray, indices: IndexLike) -> np.ndarray:
    """ScatterND tuples (last dim k) for numpy's integer-array indexing ``a[indices]``."""
    if isinstance(indices, tuple):
        parts = [_integer_indices(i) for i in indices]
        if not parts:
            raise IndexError("an empty index tuple selects the whole array; use a[...] += b")
        parts = np.broadcast_arrays(*parts)
        idx = np.stack([p.astype(np.int64, copy=False) for p in parts], axis=-1)
    else:
        raw = np.asarray(indices)
        if raw.dtype.kind == "b":
            return _index_tuples(a, tuple(np.nonzero(raw)))
        idx = _integer_indices(raw)[..., None]
    if idx.shape[-1] > a.ndim:
        raise OutOfBoundsError(f"too many indices for array: array is {a.ndim}-dimensional, "
                               f"but {idx.shape[-1]} were indexed", "out_of_bounds")
    return idx


def _updates(a: np.ndarray, idx: np.ndarray, b: Any, name: str) -> np.ndarray:
    shape = idx.shape[:-1] + a.shape[idx.shape[-1]:]
    if isinstance(b, (bool, int, float, complex)):
        vals = np.asarray(b, dtype=a.dtype)
    else:
        vals = np.asarray(b)
        if not np.can_cast(vals.dtype, a.dtype, "same_kind"):
            raise TypeError(f"Cannot cast ufunc '{name}' output from {vals.dtype} to "
                            f"{a.dtype} with casting rule 'same_kind'")
        vals = vals.astype(a.dtype, copy=False)
    return np.broadcast_to(vals, shape)


def _reduce_at(a: np.ndarray, indices: IndexLike, b: Any, reduction: str, name: str) -> None:
    if not isinstance(a, np.ndarray):
        raise TypeError("a must be a numpy.ndarray: it is updated in place")
    idx = _index_tuples(a, indices)
    vals = _updates(a, idx, b, name)
    if a.flags.c_contiguous and a.flags.writeable and a.dtype.isnative:
        _native._scatter_nd_in_place(a, idx, vals, reduction)
        return
    work = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
    _native._scatter_nd_in_place(work, idx, vals, reduction)
    a[...] = work


def add_at(a: np.ndarray, indices: IndexLike, b: Any) -> None:
    """``np.add.at(a, indices, b)``: unbuffered, in place, ``a[indices] += b``
    with every duplicate counted, in index order (the same sums as numpy's).

    ``indices`` is an integer array (into the first axis), a tuple of them
    (broadcast together, one per leading axis) or a boolean mask. Every index
    is checked before ``a`` is written; ``a`` is never copied when it is
    C-contiguous, so a large accumulator costs only the updates.

    >>> import numpy as np, gatherscatter as gs
    >>> a = np.zeros(4)
    >>> gs.add_at(a, [0, 1, 1, 3], 1.0)
    >>> a
    array([1., 2., 0., 1.])
    """
    _reduce_at(a, indices, b, "add", "add")


def multiply_at(a: np.ndarray, indices: IndexLike, b: Any) -> None:
    """``np.multiply.at(a, indices, b)``; see :func:`add_at`."""
    _reduce_at(a, indices, b, "mul", "multiply")


def maximum_at(a: np.ndarray, indices: IndexLike, b: Any) -> None:
    """``np.maximum.at(a, indices, b)``: NaN propagates, as numpy's; see :func:`add_at`."""
    _reduce_at(a, indices, b, "max", "maximum")


def minimum_at(a: np.ndarray, indices: IndexLike, b: Any) -> None:
    """``np.minimum.at(a, indices, b)``: NaN propagates, as numpy's; see :func:`add_at`."""
    _reduce_at(a, indices, b, "min", "minimum")


__all__: Sequence[str] = ["take", "take_along_axis", "put_along_axis", "add_at",
                          "multiply_at", "maximum_at", "minimum_at"]
