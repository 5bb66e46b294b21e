"""gatherscatter: exact, fast gather and scatter for numpy arrays.

The ONNX operators (``gather``, ``gather_elements``, ``scatter_elements``,
``gather_nd``, ``scatter_nd``, ``tensor_scatter``) and numpy's spellings
(``take``, ``take_along_axis``, ``put_along_axis``, ``add_at`` and siblings),
PyTorch's ``scatter_reduce`` (with ``mean`` and ``include_self``),
``embedding_bag``, ``index_select``, ``index_add`` and ``index_copy``,
pytorch_scatter's ``segment_csr`` and ``segment_coo``, run by a Rust core with the GIL released. Inputs that are C-contiguous numpy
arrays are read in place; results are numpy arrays that own the core's
memory (no copy); ``out=`` writes into an array of yours.
``gatherscatter.grad`` has the gathers' gradients; ``gatherscatter.torch``
(with PyTorch installed) wraps them as ``torch.autograd`` functions;
``gatherscatter.dask`` (with Dask installed) runs the ops over chunked Dask
arrays.

Freed results of 4 MiB or more are kept for reuse, up to 256 MiB by
default (``GATHERSCATTER_CACHE_BYTES`` in the environment, or
``set_cache_limit``; 0 turns it off), so a loop of large calls does not pay
the kernel's page faults for a new result each time.
"""

import os as _os

from ._errors import (
    AttributeValueError,
    AxisError,
    DTypeError,
    Error,
    OutOfBoundsError,
    OutOfMemoryError,
    ReductionError,
    SegmentError,
    ShapeError,
    SizeOverflowError,
    UnsupportedError,
)
from ._native import (
    OPERATORS,
    cache_info,
    gather,
    gather_elements,
    gather_nd,
    get_num_threads,
    get_tuning,
    scatter_elements,
    scatter_nd,
    set_cache_limit,
    set_num_threads,
    set_tuning,
    take,
    tensor_scatter,
    tuning_report,
)
from ._numpy import (
    add_at,
    maximum_at,
    minimum_at,
    multiply_at,
    put_along_axis,
    take_along_axis,
)
from . import grad
from ._segments import segment_coo, segment_csr
from ._torch import embedding_bag, index_add, index_copy, index_select, scatter_reduce

__version__ = "0.1.0"

#: Bytes of freed results kept for reuse unless the environment says otherwise.
DEFAULT_CACHE_BYTES = 256 << 20


def _cache_limit_from_environment() -> int:
    text = _os.environ.get("GATHERSCATTER_CACHE_BYTES")
    if text is None:
        return DEFAULT_CACHE_BYTES
    try:
        limit = int(text)
    except ValueError:
        limit = -1
    if limit < 0:
        raise ValueError(
            f"GATHERSCATTER_CACHE_BYTES must be a number of bytes >= 0, not {text!r}")
    return limit


set_cache_limit(_cache_limit_from_environment())

__all__ = [
    "OPERATORS",
    "gather", "gather_elements", "scatter_elements", "gather_nd", "scatter_nd",
    "tensor_scatter",
    "take", "take_along_axis", "put_along_axis",
    "add_at", "multiply_at", "maximum_at", "minimum_at",
    "scatter_reduce", "segment_csr", "segment_coo", "embedding_bag",
    "index_select", "index_add", "index_copy", "grad",
    "set_num_threads", "get_num_threads", "set_cache_limit", "cache_info",
    "set_tuning", "get_tuning", "tuning_report",
    "DEFAULT_CACHE_BYTES",
    "Error", "OutOfBoundsError", "AxisError", "ShapeError", "DTypeError",
    "AttributeValueError", "ReductionError", "SegmentError", "SizeOverflowError", "OutOfMemoryError",
    "UnsupportedError",
]
