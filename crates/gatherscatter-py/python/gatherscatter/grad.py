"""Gradients of the gathers with respect to their data (spec §2.17).

Each function takes ``grad_out`` (the gradient of the forward call's
output), the forward's indices and attributes, and ``data_shape``, and
returns ``grad_data``: the scatter-add of ``grad_out`` to the positions the
forward read,

    grad_data[t] = sum of grad_out[p] over the output positions p that read data[t],

the terms added in ascending row-major order of ``p``: bit-identical for
any thread count. ``mode`` routes the gradient as the forward's ``mode``
read: ``clip`` and ``wrap`` to the position they moved the index to, a
``fill`` position nowhere. The indices get no gradient (they are integers).
Gradients are defined for float16, bfloat16, float32, float64, complex64
and complex128.

The scatters' gradients (``scatter_elements``, ``scatter_nd``,
``scatter_reduce``) are pairs: with respect to ``data`` and to ``updates``.
Per reduction (``g = grad_out[t]`` for a data element ``t`` that updates land
on): ``none`` gives ``g`` to the update the forward kept (the last), 0 to
``data[t]``; ``add``/``sum`` pass ``g`` to all; ``mean`` gives ``g / count``;
``mul``/``prod`` give ``g`` times the product of the other factors (no
division: exact with zeros); ``max``/``min``/``amax``/``amin`` split ``g``
evenly among the values equal to the result, as PyTorch does (NaN equal to
NaN). Without ``include_self``, ``data[t]`` gets 0. ``mode="drop"`` gives a
dropped update 0.

``tensor_scatter``'s pair: the cache gets ``grad_out`` outside the written
window, the update gets the window.

The folds over groups of rows (``segment_csr``, ``segment_coo``,
``embedding_bag``) give each row of a group its share of the group's
gradient ``g``: ``g`` (sum), ``g / n`` (mean), ``g`` times the product of the
group's other rows (prod), ``g`` split evenly among the rows equal to the
result (max/min, PyTorch's ``segment_reduce`` rule). ``embedding_bag`` adds
each entry's share into the weight row it read, entries in ascending order.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _native
from ._errors import ShapeError
from ._numpy import _along_axis, _integer_indices

__all__ = ["gather", "gather_elements", "gather_nd", "take", "take_along_axis", "index_select",
           "scatter_elements", "scatter_nd", "scatter_reduce", "tensor_scatter", "segment_csr",
           "segment_coo", "embedding_bag"]


def _shape(data_shape: Sequence[int]) -> Tuple[int, ...]:
    return tuple(int(d) for d in data_shape)


def gather(grad_out: Any, indices: Any, data_shape: Sequence[int], axis: int = 0,
           batch_dims: int = 0, *, mode: str = "raise",
           threads: Optional[int] = None) -> np.ndarray:
    """The gradient of ``gatherscatter.gather(data, indices, axis, batch_dims,
    mode=mode)`` with respect to ``data``:
    ``grad_data[a.., idx(indices[i..]), b..] += grad_out[a.., i.., b..]``.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.gather(np.array([1., 10., 100.]), np.array([2, 0, -1]), (3,))
    array([ 10.,   0., 101.])
    """
    return _native._gather_grad("gather", grad_out, indices, _shape(data_shape), axis,
                                batch_dims, mode=mode, threads=threads)


def gather_elements(grad_out: Any, indices: Any, data_shape: Sequence[int], axis: int = 0, *,
                    mode: str = "raise", threads: Optional[int] = None) -> np.ndarray:
    """The gradient of ``gatherscatter.gather_elements(data, indices, axis,
    mode=mode)`` (``torch.gather``) with respect to ``data``:
    ``grad_data[p with p[axis] := idx(indices[p])] += grad_out[p]``.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.gather_elements(np.array([[1., 2.], [3., 4.]]), np.array([[1, 1], [0, 2]]),
    ...                         (2, 3), axis=1)
    array([[0., 3., 0.],
           [3., 0., 4.]])
    """
    return _native._gather_grad("gather_elements", grad_out, indices, _shape(data_shape), axis,
                                mode=mode, threads=threads)


def gather_nd(grad_out: Any, indices: Any, data_shape: Sequence[int], batch_dims: int = 0, *,
              mode: str = "raise", threads: Optional[int] = None) -> np.ndarray:
    """The gradient of ``gatherscatter.gather_nd(data, indices, batch_dims,
    mode=mode)`` with respect to ``data``: each tuple's slice of ``grad_out``
    added into the slice it names.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.gather_nd(np.array([1., 2., 4.]), np.array([[0, 1], [1, 0], [0, 1]]), (2, 2))
    array([[0., 5.],
           [2., 0.]])
    """
    return _native._gather_grad("gather_nd", grad_out, indices, _shape(data_shape),
                                batch_dims=batch_dims, mode=mode, threads=threads)


def take(grad_out: Any, indices: Any, data_shape: Sequence[int], axis: Optional[int] = None,
         mode: str = "raise", *, threads: Optional[int] = None) -> np.ndarray:
    """The gradient of ``gatherscatter.take(a, indices, axis, mode=mode)``
    (``numpy.take``) with respect to ``a`` of shape ``data_shape``; with
    ``axis=None``, of the flattened ``a``, returned in ``data_shape``.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.take(np.array([1., 2., 3.]), [0, 5, -1], (2, 2), mode="clip")  # -1 clips to 0
    array([[4., 0.],
           [0., 2.]])
    """
    shape = _shape(data_shape)
    idx = _integer_indices(indices)
    if mode == "clip":
        idx = np.maximum(idx, 0)  # numpy's clip: negatives do not count from the end
    flat = axis is None
    grad = gather(grad_out, idx, (int(np.prod(shape)),) if flat else shape,
                  0 if flat else axis, mode=mode, threads=threads)
    return grad.reshape(shape)


def take_along_axis(grad_out: Any, indices: Any, data_shape: Sequence[int],
                    axis: Optional[int] = -1, *, threads: Optional[int] = None) -> np.ndarray:
    """The gradient of ``gatherscatter.take_along_axis(arr, indices, axis)``
    with respect to ``arr`` of shape ``data_shape``. Where numpy broadcast
    ``arr`` (a dim of 1 against the indices' larger one), the gradient is
    summed over that dim, in ascending order.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.take_along_axis(np.array([[1., 2.], [3., 4.]]), np.array([[1, 1], [0, 1]]),
    ...                         (2, 3), axis=1)
    array([[0., 3., 0.],
           [3., 4., 0.]])
    """
    shape = _shape(data_shape)
    idx = _integer_indices(indices)
    flatten, axis, arr_to, idx_to = _along_axis(shape, idx.shape, axis)
    if idx.shape != idx_to:
        idx = np.broadcast_to(idx, idx_to)
    grad = gather_elements(grad_out, idx, arr_to, axis, threads=threads)
    if flatten:
        return grad.reshape(shape)
    for d, (n, m) in enumerate(zip(shape, arr_to)):
        if n != m:  # arr was broadcast along d: its one row fed them all
            grad = np.add.accumulate(grad, axis=d).take([-1], axis=d) if m else \
                np.zeros(grad.shape[:d] + (1,) + grad.shape[d + 1:], grad.dtype)
    return grad


def index_select(grad_out: Any, dim: int, index: Any, data_shape: Sequence[int], *,
                 threads: Optional[int] = None) -> np.ndarray:
    """The gradient of ``gatherscatter.index_select(input, dim, index)``
    (``torch.index_select``) with respect to ``input``.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.index_select(np.array([[1., 2.]]), 1, np.array([0, 0]), (1, 3))
    array([[3., 0., 0.]])
    """
    index = _integer_indices(index, "index")
    if index.ndim != 1:
        raise ShapeError(f"index has rank {index.ndim}, but rank 1 (a vector of positions "
                         f"along dim) is required", "rank_mismatch")
    return gather(grad_out, index, data_shape, dim, threads=threads)


def scatter_elements(grad_out: Any, data: Any, indices: Any, updates: Any, axis: int = 0,
                     reduction: str = "none", *, mode: str = "raise",
                     threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The gradients of ``gatherscatter.scatter_elements(data, indices,
    updates, axis, reduction, mode=mode)`` with respect to ``data`` and
    ``updates``.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.scatter_elements(np.ones(3), np.zeros(3), np.array([2, 0, 2]),
    ...                          np.array([4., 5., 6.]))  # the last 2 wins
    (array([0., 1., 0.]), array([0., 1., 1.]))
    """
    return _native._scatter_grad("scatter_elements", data, indices, updates, grad_out, axis,
                                 reduction, mode=mode, threads=threads)


def scatter_nd(grad_out: Any, data: Any, indices: Any, updates: Any, reduction: str = "none", *,
               mode: str = "raise", threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The gradients of ``gatherscatter.scatter_nd(data, indices, updates,
    reduction, mode=mode)`` with respect to ``data`` and ``updates``.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.scatter_nd(np.ones((2, 2)), np.full((2, 2), 2.), np.array([[1], [1]]),
    ...                    np.array([[3., 0.], [5., 5.]]), "mul")
    (array([[ 1.,  1.],
           [15.,  0.]]), array([[10., 10.],
           [ 6.,  0.]]))
    """
    return _native._scatter_grad("scatter_nd", data, indices, updates, grad_out,
                                 reduction=reduction, mode=mode, threads=threads)


def scatter_reduce(grad_out: Any, input: Any, dim: int, index: Any, src: Any, reduce: str, *,
                   include_self: bool = True, mode: str = "raise",
                   threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The gradients of ``gatherscatter.scatter_reduce(input, dim, index, src,
    reduce, include_self=...)`` with respect to ``input`` and ``src`` (of
    ``src``'s shape: 0 beyond the part of ``src`` the index uses).

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.scatter_reduce(np.ones(2), np.array([3., 1.]), 0, np.array([0, 0, 0]),
    ...                        np.array([3., 2., 3.]), "amax")  # three tie at 3
    (array([0.33333333, 1.        ]), array([0.33333333, 0.        , 0.33333333]))
    """
    index = np.asarray(index)
    src = np.asarray(src)
    used = src
    if src.ndim == index.ndim and src.shape != index.shape and all(
            i <= s for i, s in zip(index.shape, src.shape)):
        used = src[tuple(slice(0, i) for i in index.shape)]
    grad_input, grad_used = _native._scatter_grad("scatter_reduce", input, index, used, grad_out,
                                                  dim, reduce, include_self, mode=mode,
                                                  threads=threads)
    if used is src:
        return grad_input, grad_used
    grad_src = np.zeros(src.shape, grad_used.dtype)
    grad_src[tuple(slice(0, i) for i in index.shape)] = grad_used
    return grad_input, grad_src


def tensor_scatter(grad_out: Any, past_cache: Any, update: Any, write_indices: Any = None,
                   axis: int = -2, mode: str = "linear", *,
                   threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The gradients of ``gatherscatter.tensor_scatter(past_cache, update,
    write_indices, axis, mode)`` with respect to ``past_cache`` and
    ``update``.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.tensor_scatter(np.arange(4.).reshape(1, 4, 1), np.zeros((1, 4, 1)),
    ...                        np.ones((1, 2, 1)), np.array([3]), mode="circular")
    (array([[[0.],
            [1.],
            [2.],
            [0.]]]), array([[[3.],
            [0.]]]))
    """
    return _native._tensor_scatter_grad(grad_out, past_cache, update, write_indices, axis, mode,
                                        threads=threads)


def segment_csr(grad_out: Any, src: Any, indptr: Any, reduce: str = "sum", *,
                threads: Optional[int] = None) -> np.ndarray:
    """The gradient of ``gatherscatter.segment_csr(src, indptr, reduce=reduce)``
    with respect to ``src``: each row of segment ``s`` gets its share of
    ``grad_out[..., s, ...]``; rows outside every segment get 0. Ties of
    max/min split evenly (PyTorch's ``segment_reduce``; pytorch_scatter gives
    all to ``arg_out``, the first).

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.segment_csr(np.array([1., 10.]), np.array([1., 3., 3., 4., 5.]),
    ...                     np.array([0, 3, 4]), "max")
    array([ 0. ,  0.5,  0.5, 10. ,  0. ])
    """
    return _native._segment_grad("segment_csr", src, indptr, grad_out, reduce, threads=threads)


def segment_coo(grad_out: Any, src: Any, index: Any, reduce: str = "sum",
                dim_size: Optional[int] = None, *, threads: Optional[int] = None) -> np.ndarray:
    """The gradient of ``gatherscatter.segment_coo(src, index, dim_size=dim_size,
    reduce=reduce)`` with respect to ``src``, as ``segment_csr``'s.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.segment_coo(np.array([1.]), np.array([2., 0., 3.]), np.array([0, 0, 0]), "prod")
    array([0., 6., 0.])
    """
    if dim_size is not None and dim_size < 0:
        raise ValueError(f"dim_size must be >= 0, not {dim_size}")
    return _native._segment_grad("segment_coo", src, index, grad_out, reduce, dim_size,
                                 threads=threads)


def embedding_bag(grad_out: Any, weight: Any, indices: Any, offsets: Any = None,
                  mode: str = "mean", per_sample_weights: Any = None,
                  include_last_offset: bool = False, padding_idx: Optional[int] = None, *,
                  output: Any = None,
                  threads: Optional[int] = None) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """The gradients of ``gatherscatter.embedding_bag(weight, indices, offsets,
    mode, per_sample_weights, include_last_offset, padding_idx)`` with respect
    to ``weight`` and ``per_sample_weights`` (``None`` when not given): an
    entry of bag ``b`` adds its share of ``grad_out[b]`` into the weight row it
    read (times its per-sample weight), and its per-sample weight gets
    ``grad_out[b] · weight[row]``. The padding row and its entries get 0. On
    max ties the gradient splits evenly; PyTorch gives it all to one row.

    ``output``, when given, is that call's result, kept from the forward (as
    PyTorch's autograd keeps its max indices): ``max`` and ``min`` then do not
    run the forward again, about a third of their time. It must have the
    output's shape and ``weight``'s dtype; the other modes do not read it.

    >>> import numpy as np, gatherscatter as gs
    >>> gs.grad.embedding_bag(np.array([[1.], [10.]]), np.array([[1.], [2.], [3.]]),
    ...                       np.array([0, 2, 0, 1]), np.array([0, 2]), "mean")
    (array([[5.5],
           [5. ],
           [0.5]]), None)
    """
    return _native._embedding_bag_grad(weight, indices, offsets, grad_out, mode,
                                       per_sample_weights, include_last_offset, padding_idx,
                                       output=output, threads=threads)
