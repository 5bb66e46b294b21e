"""pytorch_scatter's segment reductions for numpy arrays.

``segment_csr`` and ``segment_coo`` take pytorch_scatter's arguments (``out``
and ``reduce`` as keywords) and return what it returns; the work is the
core's SegmentCsr / SegmentCoo.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _native
from ._errors import DTypeError


def _fill_value(fill: Any, src: np.ndarray) -> Optional[np.ndarray]:
    """``fill`` as a 0-d array of ``src``'s dtype. A Python int fits any
    number type it is in range of; a Python float needs a float or complex
    ``src``; numpy values cast by ``same_kind``. Anything else (``-inf`` for
    integers, 300 for uint8) raises ``DTypeError`` rather than wrapping."""
    if fill is None:
        return None
    refused = DTypeError(f"fill {fill!r} cannot be a value of src's dtype {src.dtype}")
    if isinstance(fill, (bool, int, float, complex)) and not isinstance(fill, np.generic):
        kinds = {bool: "biufc", int: "iufc", float: "fc", complex: "c"}[type(fill)]
        if src.dtype.kind not in kinds:
            raise refused
        try:
            return np.array(fill, dtype=src.dtype)
        except OverflowError:
            raise refused from None
    given = np.asarray(fill)
    if given.size != 1:
        raise DTypeError(f"fill must be one value, not an array of shape {given.shape}")
    if not np.can_cast(given.dtype, src.dtype, "same_kind"):
        raise refused
    return np.asarray(given.reshape(()), dtype=src.dtype)


def segment_csr(src: Any, indptr: Any, out: Optional[np.ndarray] = None, reduce: str = "sum",
                *, fill: Any = None, return_arg: bool = False,
                threads: Optional[int] = None) -> Any:
    """pytorch_scatter's ``segment_csr``: ``src`` reduced over the row ranges
    ``indptr`` gives, along axis ``indptr.ndim - 1``.

    Segment ``s`` is rows ``indptr[..., s]`` to ``indptr[..., s + 1]`` of
    ``src`` along that axis; ``indptr``'s dims before its last equal
    ``src``'s or are 1 (broadcast). The result is ``src``'s shape with the
    axis replaced by ``indptr.shape[-1] - 1``. ``reduce`` is ``"sum"``,
    ``"mean"``, ``"prod"``, ``"max"``/``"amax"`` or ``"min"``/``"amin"``.

    - ``indptr`` entries in ``[0, rows]`` and non-decreasing, else
      ``SegmentError`` (a ``ValueError``) naming the entry; nothing is
      written.
    - An empty segment gets ``fill``: by default 1 for ``prod`` and 0 for the
      others, as pytorch_scatter (``torch.segment_reduce`` writes the
      identity, ``-inf`` for max, NaN for mean: pass ``fill=`` to match it).
    - ``return_arg=True`` (max/min only) also returns, for each value, the
      row along the axis it came from: the first row holding it (NaN matches
      NaN), ``rows`` for an empty segment, as pytorch_scatter's ``arg_out``.
    - Rows fold in ascending order on any thread count: bit-identical
      results. Integer means round down; float16/bfloat16 step in float32.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.segment_csr(np.array([1., 2., 3., 4., 5.]), np.array([0, 2, 2, 5]))
    array([ 3.,  0., 12.])
    >>> gs.segment_csr(np.array([1., 2., 3., 4., 5.]), np.array([0, 2, 2, 5]), reduce="max",
    ...                return_arg=True)
    (array([2., 0., 5.]), array([1, 5, 4]))
    """
    src = np.asarray(src)
    if return_arg and out is not None:
        raise TypeError("segment_csr: out= cannot be given with return_arg=True")
    return _native._segment_csr(src, indptr, reduce, _fill_value(fill, src), return_arg,
                                out=out, threads=threads)


def segment_coo(src: Any, index: Any, out: Optional[np.ndarray] = None,
                dim_size: Optional[int] = None, reduce: str = "sum", *, fill: Any = None,
                return_arg: bool = False, threads: Optional[int] = None) -> Any:
    """pytorch_scatter's ``segment_coo``: ``src`` reduced over the rows that
    share a segment id, ``index`` holding one sorted id per row along axis
    ``index.ndim - 1``.

    ``index.shape[-1]`` equals ``src``'s along that axis; its dims before
    equal ``src``'s or are 1. The result has ``dim_size`` segments along the
    axis (default: the largest id + 1). Ids must be ``>= 0``, below
    ``dim_size`` and non-decreasing along the last dim, else
    ``SegmentError`` naming the first that is not. Otherwise as
    ``segment_csr`` (``fill``, ``return_arg``, determinism).

    >>> import numpy as np, gatherscatter as gs
    >>> gs.segment_coo(np.array([1, 2, 3, 4]), np.array([0, 0, 2, 2]), reduce="mean")
    array([1, 0, 3])
    """
    src = np.asarray(src)
    if return_arg and out is not None:
        raise TypeError("segment_coo: out= cannot be given with return_arg=True")
    if dim_size is not None and dim_size < 0:
        raise ValueError(f"dim_size must be >= 0, not {dim_size}")
    return _native._segment_coo(src, index, reduce, dim_size, _fill_value(fill, src), return_arg,
                                out=out, threads=threads)
