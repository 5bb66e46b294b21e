"""Property tests: gatherscatter's numpy spellings give numpy's results.

Each test draws a dtype, a shape of rank 0-5 (empty and size-1 dims
included), indices of any integer dtype with negatives and duplicates, and
a memory layout (C order, Fortran order, a strided view, byte-swapped),
then compares with numpy's own function.
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import gatherscatter as gs

DATA_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
               "uint64", "float16", "float32", "float64", "complex64", "complex128"]
INDEX_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
LAYOUTS = ["C", "F", "strided", "byteswapped"]

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=5).map(tuple)
nonempty_rank_shapes = st.lists(st.integers(0, 4), min_size=1, max_size=5).map(tuple)


def make_array(draw, shape, dtype):
    n = int(np.prod(shape))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype).reshape(shape)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(n).astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(dtype).reshape(shape)


def lay_out(draw, a):
    """The same values in another memory layout."""
    layout = draw(st.sampled_from(LAYOUTS))
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "strided" and a.ndim >= 1:
        wide = np.repeat(a, 2, axis=-1)
        return wide[..., ::2]
    if layout == "byteswapped" and a.dtype.itemsize > 1 and a.dtype.kind != "b":
        return a.astype(a.dtype.newbyteorder("S"))
    return a


def make_indices(draw, shape, n, dtype):
    """Indices into a dim of length n: negatives where signed, duplicates likely."""
    signed = np.dtype(dtype).kind == "i"
    lo = -n if signed else 0
    hi = n - 1
    if n == 0:
        assume(int(np.prod(shape)) == 0)
        return np.zeros(shape, dtype)
    hi = min(hi, np.iinfo(dtype).max)
    lo = max(lo, np.iinfo(dtype).min)
    values = draw(st.lists(st.integers(lo, hi), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    return np.array(values, dtype=np.int64).astype(dtype).reshape(shape)


@st.composite
def take_case(draw):
    shape = draw(shapes)
    data = make_array(draw, shape, draw(st.sampled_from(DATA_DTYPES)))
    axis = None if not shape else draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    n = data.size if axis is None else shape[axis]
    idx_shape = draw(st.lists(st.integers(0, 3), min_size=0, max_size=2).map(tuple))
    idx = make_indices(draw, idx_shape, n, draw(st.sampled_from(INDEX_DTYPES)))
    return lay_out(draw, data), idx, axis


@given(take_case())
def test_take_matches_numpy(case):
    data, idx, axis = case
    expected = np.take(data, idx, axis=axis)
    got = gs.take(data, idx, axis=axis)
    assert np.asarray(got).dtype == np.asarray(expected).dtype.newbyteorder("=")
    np.testing.assert_array_equal(got, expected)
    assert type(got) is type(expected)


@given(take_case(), st.sampled_from(["wrap", "clip"]), st.integers(-7, 7))
def test_take_modes_match_numpy(case, mode, shift):
    data, idx, axis = case
    n = data.size if axis is None else data.shape[axis]
    assume(n > 0)
    wild = idx.astype(np.int64) + shift * n  # indices far outside the dim
    np.testing.assert_array_equal(gs.take(data, wild, axis=axis, mode=mode),
                                  np.take(data, wild, axis=axis, mode=mode))


@st.composite
def along_axis_case(draw):
    shape = draw(nonempty_rank_shapes)
    data = make_array(draw, shape, draw(st.sampled_from(DATA_DTYPES)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    idx_shape = list(shape)
    idx_shape[axis] = draw(st.integers(0, 4))
    for d in range(len(shape)):  # numpy broadcasts size-1 index dims
        if d != axis % len(shape) and draw(st.booleans()) and draw(st.booleans()):
            idx_shape[d] = 1
    idx = make_indices(draw, tuple(idx_shape), shape[axis], draw(st.sampled_from(INDEX_DTYPES)))
    return lay_out(draw, data), lay_out(draw, idx), axis


@given(along_axis_case())
def test_take_along_axis_matches_numpy(case):
    data, idx, axis = case
    np.testing.assert_array_equal(gs.take_along_axis(data, idx, axis),
                                  np.take_along_axis(data, idx, axis))


@given(along_axis_case(), st.data())
def test_put_along_axis_matches_numpy(case, draw):
    data, idx, axis = case
    # Positions written twice: numpy's fancy assignment keeps the last in
    # C order, as ScatterElements does.
    values = make_array(draw.draw, np.broadcast_shapes(idx.shape, idx.shape), data.dtype.name
                        if data.dtype.isnative else data.dtype.newbyteorder("=").name)
    ours, theirs = data.copy(), data.copy()
    gs.put_along_axis(ours, idx, values, axis)
    np.put_along_axis(theirs, idx, values, axis)
    np.testing.assert_array_equal(ours, theirs)


UFUNC_AT = [("add_at", np.add), ("multiply_at", np.multiply),
            ("maximum_at", np.maximum), ("minimum_at", np.minimum)]


@st.composite
def at_case(draw):
    shape = draw(nonempty_rank_shapes)
    assume(shape[0] > 0)
    dtypes = [d for d in DATA_DTYPES if d != "float16"]  # numpy's float16 add.at rounds like ours, but is slow to cover
    data = make_array(draw, shape, draw(st.sampled_from(dtypes)))
    name, ufunc = draw(st.sampled_from(UFUNC_AT))
    assume(not (data.dtype.kind == "c" and ufunc in (np.maximum, np.minimum)))
    if draw(st.booleans()) and len(shape) >= 2 and shape[1] > 0:
        k = 2
        rows = make_indices(draw, (draw(st.integers(0, 6)),), shape[0], "int64")
        cols = make_indices(draw, rows.shape, shape[1], draw(st.sampled_from(INDEX_DTYPES)))
        indices = (rows, cols)
        n = rows.size
    else:
        k = 1
        indices = make_indices(draw, (draw(st.integers(0, 8)),), shape[0], draw(st.sampled_from(INDEX_DTYPES)))
        n = indices.size
    updates = make_array(draw, (n,) + shape[k:], data.dtype.name)
    return data, indices, updates, name, ufunc


@given(at_case())
def test_ufunc_at_spellings_match_numpy(case):
    data, indices, updates, name, ufunc = case
    ours, theirs = data.copy(), data.copy()
    with np.errstate(all="ignore"):
        getattr(gs, name)(ours, indices, updates)
        ufunc.at(theirs, indices, updates)
    np.testing.assert_array_equal(ours, theirs)


def test_add_at_on_a_fortran_array_updates_it_in_place():
    a = np.asfortranarray(np.zeros((3, 2)))
    gs.add_at(a, [0, 2, 0], np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    np.testing.assert_array_equal(a, [[6.0, 8.0], [0.0, 0.0], [3.0, 4.0]])
    assert a.flags.f_contiguous


def test_add_at_refuses_a_lossy_cast_as_numpy_does():
    with pytest.raises(TypeError):
        gs.add_at(np.zeros(3, np.int64), [0], np.array([1.5]))
