"""PyTorch autograd functions over this library's gathers (CPU tensors).

``gather``, ``index_select``, ``take_along_dim``, ``embedding``,
``embedding_bag``, ``scatter``, ``scatter_add`` and ``scatter_reduce`` take
PyTorch's arguments and return what PyTorch's functions of the same names
return (``segment_csr`` and ``segment_coo``: pytorch_scatter's); their
backward is this library's (``gatherscatter.grad``): deterministic,
duplicates added in ascending order, bit-identical for any thread count.
One deliberate difference: the backward of ``scatter`` with duplicate
indices gives the update the forward kept (the last) its gradient and the
others none; PyTorch gives every duplicate the gradient. Drop them into a model in place of ``torch.gather`` &
co. Tensors cross to numpy without a copy where their layout allows (a
``bfloat16`` one through ``ml_dtypes``). The indices get no gradient; a
second derivative is not defined (``once_differentiable``).

PyTorch is an optional dependency: ``import gatherscatter.torch`` needs it.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from . import _native
from . import grad as _grad
from ._numpy import take_along_axis as _take_along_axis
from ._segments import segment_coo as _segment_coo, segment_csr as _segment_csr
from ._torch import embedding_bag as _embedding_bag, scatter_reduce as _scatter_reduce

__all__ = ["gather", "index_select", "take_along_dim", "embedding", "embedding_bag", "scatter",
           "scatter_add", "scatter_reduce", "segment_csr", "segment_coo"]


def _array(t: torch.Tensor) -> np.ndarray:
    """The tensor's elements as a numpy array (no copy for a CPU tensor)."""
    t = t.detach()
    if t.device.type != "cpu":
        raise TypeError(f"gatherscatter.torch works on CPU tensors, not {t.device}")
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _tensor(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


class _Gather(torch.autograd.Function):
    """``torch.gather``: GatherElements along ``dim``."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, tuple(input.shape)
        out = _native.gather_elements(_array(input), _array(index), dim)
        return _tensor(out, input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Any, ...]:
        (index,) = ctx.saved_tensors
        g = _grad.gather_elements(_array(grad_out), _array(index), ctx.shape, ctx.dim)
        return _tensor(g, grad_out.dtype), None, None


class _IndexSelect(torch.autograd.Function):
    """``torch.index_select``: Gather of a 1-D index along ``dim``."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, tuple(input.shape)
        out = _native._index_select(_array(input), dim, _array(index))
        return _tensor(out, input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Any, ...]:
        (index,) = ctx.saved_tensors
        g = _grad.index_select(_array(grad_out), ctx.dim, _array(index), ctx.shape)
        return _tensor(g, grad_out.dtype), None, None


class _TakeAlongDim(torch.autograd.Function):
    """``torch.take_along_dim``: numpy's ``take_along_axis`` with broadcasting."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, indices: torch.Tensor, dim: Any) -> torch.Tensor:
        ctx.save_for_backward(indices)
        ctx.dim, ctx.shape = dim, tuple(input.shape)
        out = _take_along_axis(_array(input), _array(indices), dim)
        return _tensor(out, input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Any, ...]:
        (indices,) = ctx.saved_tensors
        g = _grad.take_along_axis(_array(grad_out), _array(indices), ctx.shape, ctx.dim)
        return _tensor(g, grad_out.dtype), None, None


class _Embedding(torch.autograd.Function):
    """``torch.nn.functional.embedding``: Gather of rows of ``weight``."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        ctx.shape = tuple(weight.shape)
        out = _native.gather(_array(weight), _array(input), 0)
        return _tensor(out, weight.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Any, ...]:
        (input,) = ctx.saved_tensors
        g = _grad.gather(_array(grad_out), _array(input), ctx.shape, 0)
        return None, _tensor(g, grad_out.dtype)


def gather(input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``torch.gather(input, dim, index)``, its backward deterministic.

    >>> import torch, gatherscatter.torch as gst
    >>> x = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    >>> gst.gather(x, 1, torch.tensor([[0, 0], [1, 0]])).sum().backward()
    >>> x.grad
    tensor([[2., 0.],
            [1., 1.]])
    """
    return _Gather.apply(input, dim, index)


def index_select(input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``torch.index_select(input, dim, index)``, its backward deterministic.

    >>> import torch, gatherscatter.torch as gst
    >>> x = torch.tensor([1., 2., 3.], requires_grad=True)
    >>> gst.index_select(x, 0, torch.tensor([2, 2, 0])).sum().backward()
    >>> x.grad
    tensor([1., 0., 2.])
    """
    return _IndexSelect.apply(input, dim, index)


def take_along_dim(input: torch.Tensor, indices: torch.Tensor, dim: Any = None) -> torch.Tensor:
    """``torch.take_along_dim(input, indices, dim)``, its backward deterministic.

    >>> import torch, gatherscatter.torch as gst
    >>> x = torch.tensor([[10., 30., 20.]], requires_grad=True)
    >>> gst.take_along_dim(x, torch.tensor([[1, 1]]), 1).sum().backward()
    >>> x.grad
    tensor([[0., 2., 0.]])
    """
    return _TakeAlongDim.apply(input, indices, dim)


def embedding(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``torch.nn.functional.embedding(input, weight)`` (no ``padding_idx``,
    ``max_norm`` or sparse gradient), its backward deterministic.

    >>> import torch, gatherscatter.torch as gst
    >>> w = torch.zeros(3, 2, requires_grad=True)
    >>> gst.embedding(torch.tensor([2, 0, 2]), w).sum().backward()
    >>> w.grad
    tensor([[1., 1.],
            [0., 0.],
            [2., 2.]])
    """
    return _Embedding.apply(input, weight)


class _ScatterReduce(torch.autograd.Function):
    """``torch.scatter_reduce`` (and ``scatter`` as reduce ``"none"``)."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor,
                reduce: str, include_self: bool) -> torch.Tensor:
        ctx.save_for_backward(input, index, src)
        ctx.args = (dim, reduce, include_self)
        a, i, u = _array(input), _array(index), _array(src)
        if reduce == "none":
            u = u[tuple(slice(0, n) for n in i.shape)]
            out = _native.scatter_elements(a, i, u, dim)
        else:
            out = _scatter_reduce(a, dim, i, u, reduce, include_self=include_self)
        return _tensor(out, input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Any, ...]:
        input, index, src = ctx.saved_tensors
        dim, reduce, include_self = ctx.args
        g, a, i, u = _array(grad_out), _array(input), _array(index), _array(src)
        if reduce == "none":
            used = u[tuple(slice(0, n) for n in i.shape)]
            grad_input, grad_used = _grad.scatter_elements(g, a, i, used, dim)
            grad_src = np.zeros(u.shape, grad_used.dtype)
            grad_src[tuple(slice(0, n) for n in i.shape)] = grad_used
        else:
            grad_input, grad_src = _grad.scatter_reduce(g, a, dim, i, u, reduce,
                                                        include_self=include_self)
        return (_tensor(grad_input, grad_out.dtype), None, None, _tensor(grad_src, grad_out.dtype),
                None, None)


def scatter(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """``torch.scatter(input, dim, index, src)``: of duplicates the last wins,
    and only it gets a gradient (PyTorch gives each duplicate one).

    >>> import torch, gatherscatter.torch as gst
    >>> src = torch.tensor([4., 5., 6.], requires_grad=True)
    >>> gst.scatter(torch.zeros(3), 0, torch.tensor([2, 0, 2]), src).sum().backward()
    >>> src.grad
    tensor([0., 1., 1.])
    """
    return _ScatterReduce.apply(input, dim, index, src, "none", True)


def scatter_add(input: torch.Tensor, dim: int, index: torch.Tensor,
                src: torch.Tensor) -> torch.Tensor:
    """``torch.scatter_add(input, dim, index, src)``, deterministic both ways.

    >>> import torch, gatherscatter.torch as gst
    >>> x = torch.zeros(2, requires_grad=True)
    >>> gst.scatter_add(x, 0, torch.tensor([1, 1]), torch.tensor([1., 2.])).detach()
    tensor([0., 3.])
    """
    return _ScatterReduce.apply(input, dim, index, src, "sum", True)


def scatter_reduce(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor,
                   reduce: str, *, include_self: bool = True) -> torch.Tensor:
    """``torch.scatter_reduce(input, dim, index, src, reduce, include_self=...)``
    (``sum``, ``prod``, ``mean``, ``amax``, ``amin``), deterministic both ways;
    ``prod``'s gradient is exact with zeros among the factors.

    >>> import torch, gatherscatter.torch as gst
    >>> src = torch.tensor([3., 0., 2.], requires_grad=True)
    >>> gst.scatter_reduce(torch.ones(1), 0, torch.tensor([0, 0, 0]), src, "prod").backward()
    >>> src.grad
    tensor([0., 6., 0.])
    """
    return _ScatterReduce.apply(input, dim, index, src, reduce, include_self)


class _EmbeddingBag(torch.autograd.Function):
    """``torch.nn.functional.embedding_bag``: rows of ``weight`` folded per bag."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, weight: torch.Tensor, offsets: Any, mode: str,
                per_sample_weights: Any, include_last_offset: bool,
                padding_idx: Any) -> torch.Tensor:
        arrays = [None if t is None else _array(t) for t in (offsets, per_sample_weights)]
        out = _embedding_bag(_array(weight), _array(input), arrays[0], mode, arrays[1],
                             include_last_offset, padding_idx)
        result = _tensor(out, weight.dtype)
        # max and min read the result in the backward, which then need not
        # run the forward again (PyTorch keeps its max indices alike); saved
        # as a tensor, so that changing it in place is refused as for any
        # saved tensor.
        kept = result if mode in ("max", "min") else None
        saved = [input, weight]
        saved += [t for t in (offsets, per_sample_weights, kept) if t is not None]
        ctx.save_for_backward(*saved)
        ctx.given = (offsets is not None, per_sample_weights is not None, kept is not None)
        ctx.args = (mode, include_last_offset, padding_idx)
        return result

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Any, ...]:
        saved = list(ctx.saved_tensors)
        input, weight = saved[0], saved[1]
        rest = iter(saved[2:])
        offsets, psw, output = (next(rest) if given else None for given in ctx.given)
        mode, include_last_offset, padding_idx = ctx.args
        grad_weight, grad_psw = _grad.embedding_bag(
            _array(grad_out), _array(weight), _array(input),
            None if offsets is None else _array(offsets), mode,
            None if psw is None else _array(psw), include_last_offset, padding_idx,
            output=None if output is None else _array(output))
        grad_psw = None if grad_psw is None else _tensor(grad_psw, grad_out.dtype)
        return (None, _tensor(grad_weight, grad_out.dtype), None, None, grad_psw, None, None)


def embedding_bag(input: torch.Tensor, weight: torch.Tensor, offsets: Any = None,
                  mode: str = "mean", per_sample_weights: Any = None,
                  include_last_offset: bool = False, padding_idx: Any = None) -> torch.Tensor:
    """``torch.nn.functional.embedding_bag(input, weight, offsets, mode=...,
    per_sample_weights=..., include_last_offset=..., padding_idx=...)``
    (``max_norm``, ``scale_grad_by_freq`` and ``sparse`` are not taken),
    deterministic both ways. ``include_last_offset`` has one meaning in every
    mode. On max ties the gradient splits evenly among the tying entries;
    PyTorch gives it all to the one row it reports.

    >>> import torch, gatherscatter.torch as gst
    >>> w = torch.tensor([[1.], [2.], [3.]], requires_grad=True)
    >>> gst.embedding_bag(torch.tensor([0, 2, 0, 1]), w, torch.tensor([0, 2])).sum().backward()
    >>> w.grad
    tensor([[1.0000],
            [0.5000],
            [0.5000]])
    """
    return _EmbeddingBag.apply(input, weight, offsets, mode, per_sample_weights,
                               include_last_offset, padding_idx)


class _Segment(torch.autograd.Function):
    """pytorch_scatter's ``segment_csr`` and ``segment_coo``."""

    @staticmethod
    def forward(ctx: Any, op: str, src: torch.Tensor, boundaries: torch.Tensor, reduce: str,
                dim_size: Any) -> torch.Tensor:
        ctx.save_for_backward(src, boundaries)
        ctx.args = (op, reduce, dim_size)
        if op == "segment_csr":
            out = _segment_csr(_array(src), _array(boundaries), reduce=reduce)
        else:
            out = _segment_coo(_array(src), _array(boundaries), dim_size=dim_size, reduce=reduce)
        return _tensor(out, src.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Any, ...]:
        src, boundaries = ctx.saved_tensors
        op, reduce, dim_size = ctx.args
        g, s, b = _array(grad_out), _array(src), _array(boundaries)
        if op == "segment_csr":
            grad = _grad.segment_csr(g, s, b, reduce)
        else:
            grad = _grad.segment_coo(g, s, b, reduce, dim_size)
        return None, _tensor(grad, grad_out.dtype), None, None, None


def segment_csr(src: torch.Tensor, indptr: torch.Tensor, reduce: str = "sum") -> torch.Tensor:
    """pytorch_scatter's ``segment_csr(src, indptr, reduce=...)`` (no ``out``),
    deterministic both ways. Max/min ties split the gradient evenly, as
    ``torch.segment_reduce``; pytorch_scatter gives it to ``arg_out``.

    >>> import torch, gatherscatter.torch as gst
    >>> src = torch.tensor([1., 3., 3., 2.], requires_grad=True)
    >>> gst.segment_csr(src, torch.tensor([0, 3, 4]), "max").sum().backward()
    >>> src.grad
    tensor([0.0000, 0.5000, 0.5000, 1.0000])
    """
    return _Segment.apply("segment_csr", src, indptr, reduce, None)


def segment_coo(src: torch.Tensor, index: torch.Tensor, dim_size: Any = None,
                reduce: str = "sum") -> torch.Tensor:
    """pytorch_scatter's ``segment_coo(src, index, dim_size=..., reduce=...)``
    (no ``out``), deterministic both ways.

    >>> import torch, gatherscatter.torch as gst
    >>> src = torch.tensor([2., 4., 6.], requires_grad=True)
    >>> gst.segment_coo(src, torch.tensor([0, 0, 1]), reduce="mean").sum().backward()
    >>> src.grad
    tensor([0.5000, 0.5000, 1.0000])
    """
    return _Segment.apply("segment_coo", src, index, reduce, dim_size)
