"""Type stubs of gatherscatter (the Rust module and its numpy spellings)."""

from typing import Any, List, Literal, Optional, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

from ._errors import (
    AttributeValueError as AttributeValueError,
    AxisError as AxisError,
    DTypeError as DTypeError,
    Error as Error,
    OutOfBoundsError as OutOfBoundsError,
    OutOfMemoryError as OutOfMemoryError,
    ReductionError as ReductionError,
    SegmentError as SegmentError,
    ShapeError as ShapeError,
    SizeOverflowError as SizeOverflowError,
    UnsupportedError as UnsupportedError,
)

from . import grad as grad

__version__: str
OPERATORS: List[str]

Reduction = Literal["none", "add", "mul", "max", "min"]
Aggregate = Literal["sum", "prod", "mean", "amax", "amin", "add", "mul", "max", "min"]
IndexLike = Union[npt.ArrayLike, Tuple[npt.ArrayLike, ...]]
GatherMode = Literal["raise", "clip", "wrap", "fill"]
ScatterMode = Literal["raise", "clip", "wrap", "drop"]

def gather(data: npt.ArrayLike, indices: npt.ArrayLike, axis: int = 0, batch_dims: int = 0, *,
           mode: GatherMode = "raise", fill_value: Any = None, profile: Optional[str] = None, out: Optional[np.ndarray] = None,
           threads: Optional[int] = None) -> np.ndarray: ...
def gather_elements(data: npt.ArrayLike, indices: npt.ArrayLike, axis: int = 0, *,
                    mode: GatherMode = "raise", fill_value: Any = None, profile: Optional[str] = None, out: Optional[np.ndarray] = None,
                    threads: Optional[int] = None) -> np.ndarray: ...
def scatter_elements(data: npt.ArrayLike, indices: npt.ArrayLike, updates: npt.ArrayLike,
                     axis: int = 0, reduction: Reduction = "none", *,
                     mode: ScatterMode = "raise", profile: Optional[str] = None, out: Optional[np.ndarray] = None,
                     threads: Optional[int] = None) -> np.ndarray: ...
def gather_nd(data: npt.ArrayLike, indices: npt.ArrayLike, batch_dims: int = 0, *,
              mode: GatherMode = "raise", fill_value: Any = None, profile: Optional[str] = None, out: Optional[np.ndarray] = None,
              threads: Optional[int] = None) -> np.ndarray: ...
def scatter_nd(data: npt.ArrayLike, indices: npt.ArrayLike, updates: npt.ArrayLike,
               reduction: Reduction = "none", *, mode: ScatterMode = "raise",
               profile: Optional[str] = None,
               out: Optional[np.ndarray] = None, threads: Optional[int] = None) -> np.ndarray: ...
def tensor_scatter(past_cache: npt.ArrayLike, update: npt.ArrayLike,
                   write_indices: Optional[npt.ArrayLike] = None, axis: int = -2,
                   mode: Literal["linear", "circular"] = "linear", *,
                   profile: Optional[str] = None, out: Optional[np.ndarray] = None,
                   threads: Optional[int] = None) -> np.ndarray: ...

def take(a: npt.ArrayLike, indices: npt.ArrayLike, axis: Optional[int] = None,
         out: Optional[np.ndarray] = None, mode: Literal["raise", "wrap", "clip", "fill"] = "raise", *,
         fill_value: Any = None, threads: Optional[int] = None) -> Any: ...
def take_along_axis(arr: npt.ArrayLike, indices: npt.ArrayLike, axis: Optional[int] = -1, *,
                    threads: Optional[int] = None) -> np.ndarray: ...
def put_along_axis(arr: np.ndarray, indices: npt.ArrayLike, values: npt.ArrayLike,
                   axis: Optional[int], *, threads: Optional[int] = None) -> None: ...
def add_at(a: np.ndarray, indices: IndexLike, b: npt.ArrayLike) -> None: ...
def multiply_at(a: np.ndarray, indices: IndexLike, b: npt.ArrayLike) -> None: ...
def maximum_at(a: np.ndarray, indices: IndexLike, b: npt.ArrayLike) -> None: ...
def minimum_at(a: np.ndarray, indices: IndexLike, b: npt.ArrayLike) -> None: ...

def scatter_reduce(input: npt.ArrayLike, dim: int, index: npt.ArrayLike, src: npt.ArrayLike,
                   reduce: Aggregate, *, include_self: bool = True, mode: ScatterMode = "raise",
                   out: Optional[np.ndarray] = None, threads: Optional[int] = None) -> np.ndarray: ...

@overload
def segment_csr(src: npt.ArrayLike, indptr: npt.ArrayLike, out: Optional[np.ndarray] = None,
                reduce: Aggregate = "sum", *, fill: Any = None, return_arg: Literal[False] = False,
                threads: Optional[int] = None) -> np.ndarray: ...
@overload
def segment_csr(src: npt.ArrayLike, indptr: npt.ArrayLike, out: None = None,
                reduce: Aggregate = "sum", *, fill: Any = None, return_arg: Literal[True],
                threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]: ...
@overload
def segment_coo(src: npt.ArrayLike, index: npt.ArrayLike, out: Optional[np.ndarray] = None,
                dim_size: Optional[int] = None, reduce: Aggregate = "sum", *, fill: Any = None,
                return_arg: Literal[False] = False,
                threads: Optional[int] = None) -> np.ndarray: ...
@overload
def segment_coo(src: npt.ArrayLike, index: npt.ArrayLike, out: None = None,
                dim_size: Optional[int] = None, reduce: Aggregate = "sum", *, fill: Any = None,
                return_arg: Literal[True], threads: Optional[int] = None,
                ) -> Tuple[np.ndarray, np.ndarray]: ...

@overload
def embedding_bag(weight: npt.ArrayLike, indices: npt.ArrayLike,
                  offsets: Optional[npt.ArrayLike] = None, mode: Aggregate = "mean",
                  per_sample_weights: Optional[npt.ArrayLike] = None,
                  include_last_offset: bool = False, padding_idx: Optional[int] = None, *,
                  fill: Any = None, return_arg: Literal[False] = False,
                  out: Optional[np.ndarray] = None,
                  threads: Optional[int] = None) -> np.ndarray: ...
@overload
def embedding_bag(weight: npt.ArrayLike, indices: npt.ArrayLike,
                  offsets: Optional[npt.ArrayLike] = None, mode: Aggregate = "mean",
                  per_sample_weights: Optional[npt.ArrayLike] = None,
                  include_last_offset: bool = False, padding_idx: Optional[int] = None, *,
                  fill: Any = None, return_arg: Literal[True], out: None = None,
                  threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]: ...

def index_select(input: npt.ArrayLike, dim: int, index: npt.ArrayLike, *,
                 threads: Optional[int] = None) -> np.ndarray: ...
def index_add(input: npt.ArrayLike, dim: int, index: npt.ArrayLike, source: npt.ArrayLike, *,
              alpha: Any = 1, threads: Optional[int] = None) -> np.ndarray: ...
def index_copy(input: npt.ArrayLike, dim: int, index: npt.ArrayLike, source: npt.ArrayLike, *,
               threads: Optional[int] = None) -> np.ndarray: ...

def set_num_threads(threads: int) -> None: ...
def get_num_threads() -> int: ...
def set_cache_limit(max_bytes: int) -> None: ...
def set_tuning(*, stores: Optional[Literal["auto", "cached", "streaming"]] = None,
               word_gather: Optional[Literal["auto", "scalar", "vector"]] = None,
               block_order: Optional[Literal["auto", "output", "source"]] = None,
               bag_fold: Optional[Literal["auto", "memory", "registers"]] = None,
               row_fetch: Optional[Literal["auto", "read", "prefetch"]] = None,
               stream_fetch: Optional[Literal["auto", "ahead", "hardware"]] = None,
               block_prefetch: Optional[Literal["auto", "l1", "l2"]] = None,
               plane_reads: Optional[Literal["auto", "packed", "in_place"]] = None) -> str: ...
def get_tuning() -> str: ...
def tuning_report() -> str: ...
def cache_info() -> dict[str, int]: ...

DEFAULT_CACHE_BYTES: int
