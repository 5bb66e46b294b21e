"""scatter_reduce against a reference written from its formula (always) and
against torch.Tensor.scatter_reduce (when torch is installed): every
aggregate, with and without self, several dtypes and index dtypes."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import gatherscatter as gs

AGGREGATES = ["sum", "prod", "mean", "amax", "amin"]


def scatter_reduce_reference(data, axis, index, src, reduce, include_self):
    """From the formula: collect each target's values in row-major order of
    ``index`` (``data[t]`` first when ``include_self``), then fold them."""
    values = {}
    for p in np.ndindex(*index.shape):
        t = list(p)
        t[axis] = int(index[p]) % data.shape[axis]
        values.setdefault(tuple(t), []).append(src[p])
    out = data.copy()
    for t, vals in values.items():
        if include_self:
            vals = [data[t]] + vals
        acc = vals[0]
        for v in vals[1:]:
            if reduce in ("sum", "mean"):
                acc = acc + v
            elif reduce == "prod":
                acc = acc * v
            elif reduce == "amax":
                acc = v if (np.isnan(v) or v > acc) and not np.isnan(acc) else acc
            else:
                acc = v if (np.isnan(v) or v < acc) and not np.isnan(acc) else acc
        if reduce == "mean":
            if data.dtype.kind in "iu":
                acc = np.floor_divide(int(acc), len(vals))
            else:
                acc = acc / data.dtype.type(len(vals))
        out[t] = acc
    return out


@st.composite
def cases(draw, dtypes=("float32", "float64", "int32", "int64", "uint8", "int16")):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axis = draw(st.integers(0, rank - 1))
    index_shape = tuple(
        draw(st.integers(0, 6)) if d == axis else draw(st.integers(0, s))
        for d, s in enumerate(shape))
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    n = int(np.prod(index_shape))
    index = np.array(draw(st.lists(st.integers(-shape[axis], shape[axis] - 1), min_size=n,
                                   max_size=n)), dtype=draw(st.sampled_from(["int64", "int32",
                                                                              "int8"])))
    index = index.reshape(index_shape)
    low = 0 if dtype.kind == "u" else -9
    data = np.array(draw(st.lists(st.integers(low, 9), min_size=int(np.prod(shape)),
                                  max_size=int(np.prod(shape)))), dtype=dtype).reshape(shape)
    src = np.array(draw(st.lists(st.integers(low, 9), min_size=n, max_size=n)),
                   dtype=dtype).reshape(index_shape)
    reduce = draw(st.sampled_from(AGGREGATES))
    include_self = draw(st.booleans())
    return data, axis, index, src, reduce, include_self


def assert_same(got, expected):
    assert got.dtype == expected.dtype
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-6 if got.dtype.itemsize > 2 else 1e-3)
    else:
        np.testing.assert_array_equal(got, expected)


@given(cases())
def test_scatter_reduce_matches_the_formula(case):
    data, axis, index, src, reduce, include_self = case
    with np.errstate(over="ignore"):
        expected = scatter_reduce_reference(data, axis, index, src, reduce, include_self)
    got = gs.scatter_reduce(data, axis, index, src, reduce, include_self=include_self)
    assert_same(got, expected)


@given(cases(dtypes=("float32", "float64", "int32", "int64", "uint8", "int16", "float16")))
def test_scatter_reduce_matches_torch(case):
    torch = pytest.importorskip("torch")
    data, axis, index, src, reduce, include_self = case
    index = index.astype(np.int64) % data.shape[axis]  # torch refuses negative indices
    expected = torch.from_numpy(data).scatter_reduce(
        axis, torch.from_numpy(index), torch.from_numpy(src), reduce,
        include_self=include_self).numpy()
    got = gs.scatter_reduce(data, axis, index, src, reduce, include_self=include_self)
    if reduce == "sum" and data.dtype.kind == "f" and data.dtype.itemsize >= 4:
        # The same order of additions: the same bits.
        np.testing.assert_array_equal(got, expected)
    assert_same(got, expected)


def test_the_docstring_example_and_pytorch_documentation_examples():
    src = np.array([1., 2., 3., 4., 5., 6.])
    index = np.array([0, 1, 0, 1, 2, 1])
    data = np.array([1., 2., 3., 4.])
    np.testing.assert_array_equal(gs.scatter_reduce(data, 0, index, src, "sum"), [5, 14, 8, 4])
    np.testing.assert_array_equal(
        gs.scatter_reduce(data, 0, index, src, "sum", include_self=False), [4, 12, 5, 4])
    data2 = np.array([5., 4., 3., 2.])
    np.testing.assert_array_equal(gs.scatter_reduce(data2, 0, index, src, "amax"), [5, 6, 5, 2])
    np.testing.assert_array_equal(
        gs.scatter_reduce(data2, 0, index, src, "amax", include_self=False), [3, 6, 5, 2])


def test_a_larger_src_is_cut_to_the_index_shape_as_in_pytorch():
    data = np.zeros((2, 3), np.float32)
    index = np.array([[0, 1], [1, 2]])
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = gs.scatter_reduce(data, 1, index, src, "sum")
    np.testing.assert_array_equal(got, [[0, 1, 0], [0, 4, 5]])


def test_integer_mean_rounds_down():
    got = gs.scatter_reduce(np.array([-7, 5], np.int32), 0, np.array([0]), np.array([0], np.int32),
                            "mean")
    np.testing.assert_array_equal(got, [-4, 5])


def test_errors_are_the_cores_kinds():
    data = np.zeros(3, np.float32)
    with pytest.raises(IndexError):
        gs.scatter_reduce(data, 0, np.array([3]), np.ones(1, np.float32), "sum")
    with pytest.raises(gs.ReductionError):
        gs.scatter_reduce(np.zeros(2, bool), 0, np.array([0]), np.ones(1, bool), "mean")
    with pytest.raises(gs.ReductionError):
        gs.scatter_reduce(data, 0, np.array([0]), np.ones(1, np.float32), "median")
    with pytest.raises(gs.ShapeError):
        gs.scatter_reduce(data, 0, np.array([0, 1]), np.ones(1, np.float32), "sum")
    with pytest.raises(gs.DTypeError):
        gs.scatter_reduce(data, 0, np.array([0]), np.ones(1, np.float64), "sum")


def test_results_are_bit_identical_on_one_and_two_threads():
    rng = np.random.default_rng(1)
    data = rng.standard_normal(200_000).astype(np.float32)
    index = rng.integers(0, 200_000, 1_000_000)
    src = rng.standard_normal(1_000_000).astype(np.float32)
    for reduce in AGGREGATES:
        one = gs.scatter_reduce(data, 0, index, src, reduce, threads=1)
        two = gs.scatter_reduce(data, 0, index, src, reduce, threads=2)
        assert one.tobytes() == two.tobytes(), reduce


def test_out_receives_the_result():
    data = np.array([1., 2., 3.])
    out = np.empty(3)
    result = gs.scatter_reduce(data, 0, np.array([2, 2]), np.array([5., 7.]), "mean", out=out)
    assert result is out
    np.testing.assert_array_equal(out, [1, 2, 5])
