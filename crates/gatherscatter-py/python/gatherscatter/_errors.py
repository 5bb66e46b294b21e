"""The exceptions gatherscatter raises: one class per kind of the core's errors.

Every class is a :class:`Error` (with ``.kind``, the core's stable snake_case
name) and the builtin exception a numpy user expects, so both
``except gatherscatter.Error`` and ``except IndexError`` work.
"""

from __future__ import annotations

from typing import Dict, Type


class Error(Exception):
    """Base of every gatherscatter error; ``kind`` is the core's error kind."""

    kind: str = "error"

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class OutOfBoundsError(Error, IndexError):
    """An index (or index tuple) outside its dimension."""

    kind = "out_of_bounds"


class AxisError(Error, ValueError, IndexError):
    """An axis outside ``[-rank, rank - 1]`` (numpy's AxisError is also both)."""

    kind = "bad_axis"


class ShapeError(Error, ValueError):
    """Shapes or ranks that do not fit together (``shape_mismatch``, ``rank_mismatch``)."""

    kind = "shape_mismatch"


class DTypeError(Error, TypeError):
    """A dtype the operator (or the profile) does not take."""

    kind = "bad_dtype"


class AttributeValueError(Error, ValueError):
    """A bad attribute: batch_dims, a profile name, a mode."""

    kind = "bad_attribute"


class ReductionError(Error, ValueError):
    """A reduction unknown, or not defined for the dtype (max of complex numbers)."""

    kind = "bad_reduction"


class SegmentError(Error, ValueError):
    """Segment boundaries that describe no segments: an ``indptr`` that
    decreases or leaves its axis, a segment ``index`` unsorted or negative."""

    kind = "bad_segments"


class SizeOverflowError(Error, ValueError):
    """A shape whose element count does not fit in memory addresses."""

    kind = "size_overflow"


class OutOfMemoryError(Error, MemoryError):
    """The output or a working buffer could not be allocated."""

    kind = "out_of_memory"


class UnsupportedError(Error, ValueError):
    """A call the chosen profile does not define."""

    kind = "unsupported"


_BY_KIND: Dict[str, Type[Error]] = {
    "out_of_bounds": OutOfBoundsError,
    "bad_axis": AxisError,
    "shape_mismatch": ShapeError,
    "rank_mismatch": ShapeError,
    "bad_dtype": DTypeError,
    "bad_attribute": AttributeValueError,
    "bad_reduction": ReductionError,
    "bad_segments": SegmentError,
    "size_overflow": SizeOverflowError,
    "out_of_memory": OutOfMemoryError,
    "unsupported": UnsupportedError,
}


def _from_kind(kind: str, message: str) -> Error:
    """The exception for a core error (called by the native module)."""
    return _BY_KIND.get(kind, Error)(message, kind)
