"""PyTorch's spellings of the reductions beyond ONNX, for numpy arrays.

``scatter_reduce`` takes ``torch.Tensor.scatter_reduce``'s arguments in its
order and returns what it returns (with the differences its docstring
names); the work is the core's ScatterReduce.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _native


def scatter_reduce(input: Any, dim: int, index: Any, src: Any, reduce: str, *,
                   include_self: bool = True, out: Optional[np.ndarray] = None,
                   threads: Optional[int] = None) -> Any:
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
    ``IndexError``).

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
                                   out=out, threads=threads)
