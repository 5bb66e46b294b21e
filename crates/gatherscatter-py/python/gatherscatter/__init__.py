"""gatherscatter: exact, fast gather and scatter for numpy arrays.

The ONNX operators (``gather``, ``gather_elements``, ``scatter_elements``,
``gather_nd``, ``scatter_nd``, ``tensor_scatter``) and numpy's spellings
(``take``, ``take_along_axis``, ``put_along_axis``, ``add_at`` and siblings),
run by a Rust core with the GIL released. Inputs that are C-contiguous numpy
arrays are read in place; results are numpy arrays that own the core's
memory (no copy); ``out=`` writes into an array of yours.
"""

from ._errors import (
    AttributeValueError,
    AxisError,
    DTypeError,
    Error,
    OutOfBoundsError,
    OutOfMemoryError,
    ReductionError,
    ShapeError,
    SizeOverflowError,
    UnsupportedError,
)
from ._native import (
    OPERATORS,
    gather,
    gather_elements,
    gather_nd,
    get_num_threads,
    scatter_elements,
    scatter_nd,
    set_num_threads,
    tensor_scatter,
)
from ._numpy import (
    add_at,
    maximum_at,
    minimum_at,
    multiply_at,
    put_along_axis,
    take,
    take_along_axis,
)

__version__ = "0.1.0"

__all__ = [
    "OPERATORS",
    "gather", "gather_elements", "scatter_elements", "gather_nd", "scatter_nd",
    "tensor_scatter",
    "take", "take_along_axis", "put_along_axis",
    "add_at", "multiply_at", "maximum_at", "minimum_at",
    "set_num_threads", "get_num_threads",
    "Error", "OutOfBoundsError", "AxisError", "ShapeError", "DTypeError",
    "AttributeValueError", "ReductionError", "SizeOverflowError", "OutOfMemoryError",
    "UnsupportedError",
]
