"""index_select / index_add / index_copy against numpy (np.take, np.add.at
on a copy, assignment in order) and torch (when installed)."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import gatherscatter as gs


@st.composite
def cases(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    dim = draw(st.integers(0, rank - 1))
    k = draw(st.integers(0, 6))
    index = np.array(draw(st.lists(st.integers(-shape[dim], shape[dim] - 1), min_size=k,
                                   max_size=k)), dtype=draw(st.sampled_from(["int64", "int32"])))
    dtype = np.dtype(draw(st.sampled_from(["float32", "float64", "int32", "int64", "uint8"])))
    data = np.array(draw(st.lists(st.integers(0, 9), min_size=int(np.prod(shape)),
                                  max_size=int(np.prod(shape)))), dtype).reshape(shape)
    source_shape = shape[:dim] + (k,) + shape[dim + 1:]
    source = np.array(draw(st.lists(st.integers(0, 9), min_size=int(np.prod(source_shape)),
                                    max_size=int(np.prod(source_shape)))),
                      dtype).reshape(source_shape)
    return data, dim, index, source


@given(cases())
def test_index_select_is_numpy_take_with_a_vector(case):
    data, dim, index, _ = case
    np.testing.assert_array_equal(gs.index_select(data, dim, index),
                                  np.take(data, index, axis=dim))


@given(cases())
def test_index_add_is_numpy_add_at_on_a_copy(case):
    data, dim, index, source = case
    expected = data.copy()
    at = (slice(None),) * dim + (index,)
    np.add.at(expected, at, source)
    got = gs.index_add(data, dim, index, source)
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got, expected)


@given(cases())
def test_index_copy_writes_in_order_so_the_last_duplicate_wins(case):
    data, dim, index, source = case
    expected = data.copy()
    for j, t in enumerate(index):
        expected[(slice(None),) * dim + (t,)] = source[(slice(None),) * dim + (j,)]
    np.testing.assert_array_equal(gs.index_copy(data, dim, index, source), expected)


@given(cases())
def test_agrees_with_torch(case):
    torch = pytest.importorskip("torch")
    data, dim, index, source = case
    if data.dtype == np.uint8:
        return
    index = index.astype(np.int64) % data.shape[dim]  # torch refuses negatives
    t_data, t_index, t_source = (torch.from_numpy(a) for a in (data, index, source))
    np.testing.assert_array_equal(gs.index_select(data, dim, index),
                                  torch.index_select(t_data, dim, t_index).numpy())
    np.testing.assert_array_equal(gs.index_add(data, dim, index, source, alpha=2),
                                  t_data.index_add(dim, t_index, t_source, alpha=2).numpy())
    if len(set(index.tolist())) == len(index):  # torch's index_copy of duplicates is undefined
        np.testing.assert_array_equal(gs.index_copy(data, dim, index, source),
                                      t_data.index_copy(dim, t_index, t_source).numpy())


def test_pytorch_documentation_examples():
    t = np.arange(1.0, 10.0).reshape(3, 3)
    index = np.array([0, 4, 2])
    np.testing.assert_array_equal(
        gs.index_add(np.ones((5, 3)), 0, index, t),
        [[2, 3, 4], [1, 1, 1], [8, 9, 10], [1, 1, 1], [5, 6, 7]])
    np.testing.assert_array_equal(
        gs.index_copy(np.zeros((5, 3)), 0, index, t),
        [[1, 2, 3], [0, 0, 0], [7, 8, 9], [0, 0, 0], [4, 5, 6]])
    np.testing.assert_array_equal(gs.index_add(np.zeros(3), 0, [1, 1], [1.0, 2.0], alpha=-1),
                                  [0, -3, 0])


def test_errors():
    data = np.zeros((2, 3), np.float32)
    with pytest.raises(IndexError, match=r"index 3 at indices\[1\]"):
        gs.index_add(data, 1, np.array([0, 3]), np.ones((2, 2), np.float32))
    with pytest.raises(gs.ShapeError):
        gs.index_select(data, 0, np.array([[0]]))
    with pytest.raises(gs.ShapeError):
        gs.index_copy(data, 1, np.array([0, 1]), np.ones((2, 3), np.float32))
    with pytest.raises(gs.DTypeError):
        gs.index_add(data, 1, np.array([0, 1]), np.ones((2, 2), np.float64))
