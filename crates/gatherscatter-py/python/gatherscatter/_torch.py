"""PyTorch's spellings of the reductions beyond ONNX, for numpy arrays.

``scatter_reduce`` takes ``torch.Tensor.scatter_reduce``'s arguments in its
order and returns what it returns (with the differences its docstring
names); the work is the core's ScatterReduce. ``index_select``,
``index_add`` and ``index_copy`` take a 1-D index along ``dim``.
``embedding_bag`` is
``torch.nn.functional.embedding_bag`` with ``weight`` first; the work is the
core's EmbeddingBag.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _native
from ._segments import _fill_value


def scatter_reduce(input: Any, dim: int, index: Any, src: Any, reduce: str, *,
                   include_self: bool = True, mode: str = "raise",
                   out: Optional[np.ndarray] = None, threads: Optional[int] = None) -> Any:
    """``torch.scatter_reduce`` for arrays: a copy of ``input`` where each
    target ``t = p with p[dim] := index[p]`` aggregates ``src[p]`` for every
    ``p`` aimed at it, and ``input[t]`` when ``include_self``.

    ``reduce`` is ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
    ``index`` has ``input``'s rank, is no larger than ``src`` in any dim and
    no larger than ``input`` off ``dim``; only ``src[:index.shape[0], ...]``
    is used, as in PyTorch. Targets no index names keep ``input``'s value.
    ``mean`` divides by the number of values aggregated (integers: floor
    division, as PyTorch, but from the exact count; PyTorch counts in the
    input's dtype, which wraps). Contributions apply in row-major order of
    ``index`` on any thread count: bit-identical results, run after run.

    Differences from PyTorch: negative indices count from the end of
    ``dim`` (PyTorch refuses them); without ``self``, a target's first value
    replaces it, so a sum of ``-0.0`` alone is ``-0.0`` (PyTorch starts
    from ``+0.0``). Out-of-range indices raise ``OutOfBoundsError`` (an
    ``IndexError``), or with ``mode="drop"`` (JAX's) are skipped; ``"clip"``
    and ``"wrap"`` move them into range.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.scatter_reduce(np.array([1., 2., 3., 4.]), 0, np.array([0, 1, 0, 1, 2, 1]),
    ...                   np.array([2., 3., 4., 5., 6., 7.]), "amax")
    array([4., 7., 6., 4.])
    """
    index = np.asarray(index)
    src = np.asarray(src)
    if src.ndim == index.ndim and src.shape != index.shape and all(
            i <= s for i, s in zip(index.shape, src.shape)):
        src = src[tuple(slice(0, i) for i in index.shape)]
    return _native._scatter_reduce(input, index, src, dim, reduce, include_self=include_self,
                                   mode=mode, out=out, threads=threads)


def embedding_bag(weight: Any, indices: Any, offsets: Any = None, mode: str = "mean",
                  per_sample_weights: Any = None, include_last_offset: bool = False,
                  padding_idx: Optional[int] = None, *, fill: Any = None,
                  return_arg: bool = False, out: Optional[np.ndarray] = None,
                  threads: Optional[int] = None) -> Any:
    """``torch.nn.functional.embedding_bag`` for arrays (``weight`` first):
    the rows of ``weight`` (``[rows, dim]``) that ``indices`` names, folded
    per bag with ``mode``: ``"sum"``, ``"mean"`` or ``"max"`` (also
    ``"prod"``, ``"min"``). The result is ``[bags, dim]``.

    - Bags: 1-D ``indices`` with ``offsets`` (the bags' starts), or 2-D
      ``indices`` ``[bags, n]`` without. ``include_last_offset`` has one
      meaning in every mode: ``offsets`` then ends with the end of the last
      bag. Either way the boundaries start at 0, never decrease and end at
      ``len(indices)`` (every index in exactly one bag), else
      ``SegmentError`` naming the offset.
    - Indices in ``[-rows, rows)`` (negatives count from the end; PyTorch
      refuses them), all checked first: ``OutOfBoundsError`` (an
      ``IndexError``).
    - ``padding_idx`` rows take no part: not summed, not counted by
      ``mean``, never the max.
    - ``per_sample_weights`` (``indices``' shape, ``weight``'s dtype; ``sum``
      only, as PyTorch) scale each row before it is added.
    - An empty bag gets ``fill`` (default 0, 1 for ``prod``), as PyTorch's
      zeros.
    - ``return_arg=True`` (max/min) also returns, per value, the weight row
      it came from (the first in the bag holding it), ``rows`` for an empty
      bag (PyTorch's ``max_indices`` gives 0 there, also a real row).
    - Rows fold in bag order on any thread count: bit-identical results.

    >>> import numpy as np, gatherscatter as gs
    >>> weight = np.arange(12.0).reshape(4, 3)
    >>> gs.embedding_bag(weight, np.array([0, 2, 1, 3, 2]), np.array([0, 2, 2]), "sum")
    array([[ 6.,  8., 10.],
           [ 0.,  0.,  0.],
           [18., 21., 24.]])
    """
    indices = np.asarray(indices)
    if return_arg and out is not None:
        raise TypeError("embedding_bag: out= cannot be given with return_arg=True")
    if indices.ndim == 2 and offsets is None:
        # Fixed bags of n: the same call with offsets 0, n, 2n, ...
        bags, n = indices.shape
        offsets = np.arange(0, bags * n, n, dtype=np.int64) if n else np.zeros(bags, np.int64)
        indices = indices.reshape(-1)
        include_last_offset = False
        if per_sample_weights is not None:
            per_sample_weights = np.asarray(per_sample_weights).reshape(-1)
    elif offsets is None:
        from ._errors import ShapeError
        raise ShapeError("indices is 1-D but no offsets were given; give offsets, or 2-D "
                         "indices [bags, n] for bags of n")
    weight = np.asarray(weight)
    return _native._embedding_bag(weight, indices, offsets, mode, per_sample_weights,
                                  include_last_offset, padding_idx, _fill_value(fill, weight),
                                  return_arg, out=out, threads=threads)


def index_select(input: Any, dim: int, index: Any, *, threads: Optional[int] = None) -> Any:
    """``torch.index_select`` for arrays: the slices of ``input`` at the 1-D
    ``index`` along ``dim`` (``np.take`` with a vector). Negative indices
    count from the end; every index is checked first (``OutOfBoundsError``).

    >>> import numpy as np, gatherscatter as gs
    >>> gs.index_select(np.arange(12).reshape(3, 4), 1, np.array([0, 2]))
    array([[ 0,  2],
           [ 4,  6],
           [ 8, 10]])
    """
    return _native._index_select(input, dim, index, threads=threads)


def index_add(input: Any, dim: int, index: Any, source: Any, *, alpha: Any = 1,
              threads: Optional[int] = None) -> Any:
    """``torch.index_add`` for arrays: a copy of ``input`` with
    ``alpha * source[.., j, ..]`` added into ``input[.., index[j], ..]`` along
    ``dim``, for ``j`` in ascending order (duplicates accumulate in that
    order on any thread count).

    ``index`` is 1-D; ``source`` has ``input``'s dtype and shape but
    ``len(index)`` along ``dim``. ``alpha`` scales ``source`` first (numpy's
    product in ``source``'s dtype, as PyTorch).

    >>> import numpy as np, gatherscatter as gs
    >>> gs.index_add(np.ones((5, 3)), 0, np.array([0, 4, 2]),
    ...              np.arange(1.0, 10.0).reshape(3, 3))
    array([[ 2.,  3.,  4.],
           [ 1.,  1.,  1.],
           [ 8.,  9., 10.],
           [ 1.,  1.,  1.],
           [ 5.,  6.,  7.]])
    """
    source = np.asarray(source)
    if not (isinstance(alpha, (int, float)) and alpha == 1):
        source = np.multiply(source, alpha, dtype=source.dtype, casting="same_kind")
    return _native._index_scatter(input, dim, index, source, True, threads=threads)


def index_copy(input: Any, dim: int, index: Any, source: Any, *,
               threads: Optional[int] = None) -> Any:
    """``torch.index_copy`` for arrays: a copy of ``input`` with
    ``source[.., j, ..]`` written to ``input[.., index[j], ..]`` along ``dim``;
    of duplicate indices the last ``j`` wins (PyTorch leaves it undefined).

    >>> import numpy as np, gatherscatter as gs
    >>> gs.index_copy(np.zeros(4, np.int32), 0, np.array([3, 0, 3]), np.array([7, 8, 9], np.int32))
    array([8, 0, 0, 9], dtype=int32)
    """
    return _native._index_scatter(input, dim, index, source, False, threads=threads)
