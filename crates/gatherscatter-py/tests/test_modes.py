"""Index modes: numpy's take(mode=) verbatim, JAX's clip / fill / drop from
their formulas (JAX itself is not a test dependency), and which function
takes which mode."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import gatherscatter as gs


def jax_position(mode, v, s):
    """The position JAX reads for index v on an axis of size s (None: fill/drop)."""
    if s == 0:
        return None
    if -s <= v < 0:
        v += s
    if mode == "clip":
        return min(max(v, 0), s - 1)
    return v if 0 <= v < s else None


@st.composite
def gathers(draw):
    n = draw(st.integers(1, 6))
    a = np.arange(n * 2, dtype=np.int32).reshape(n, 2)
    idx = np.array(draw(st.lists(st.integers(-3 * n, 3 * n), max_size=8)), np.int64)
    return a, idx


@given(gathers(), st.sampled_from(["wrap", "clip"]))
def test_take_modes_are_numpys(case, mode):
    a, idx = case
    np.testing.assert_array_equal(gs.take(a, idx, axis=0, mode=mode),
                                  np.take(a, idx, axis=0, mode=mode))
    np.testing.assert_array_equal(gs.take(a, idx, mode=mode), np.take(a, idx, mode=mode))


@given(gathers(), st.sampled_from(["clip", "wrap", "fill"]))
def test_gather_modes_follow_jax(case, mode):
    a, idx = case
    got = gs.gather(a, idx, axis=0, mode=mode, **({"fill_value": -7} if mode == "fill" else {}))
    n = a.shape[0]
    rows = []
    for v in idx:
        p = int(v) % n if mode == "wrap" else jax_position(mode, int(v), n)
        rows.append(a[p] if p is not None else np.full(2, -7, np.int32))
    np.testing.assert_array_equal(got, np.array(rows, np.int32).reshape(len(idx), 2))


@given(gathers())
def test_gather_elements_and_gather_nd_fill_with_jaxs_default(case):
    a, idx = case
    a = a.astype(np.float64)
    n = a.shape[0]
    got = gs.gather_elements(a[:, :1], idx.reshape(-1, 1) if idx.size else
                             np.zeros((0, 1), np.int64), axis=0, mode="fill")
    for k, v in enumerate(idx):
        p = jax_position("fill", int(v), n)
        assert (np.isnan(got[k, 0]) if p is None else got[k, 0] == a[p, 0])
    tuples = np.stack([idx, np.zeros_like(idx)], axis=-1) if idx.size else np.zeros((0, 2), np.int64)
    got = gs.gather_nd(a, tuples, mode="fill", fill_value=0.5)
    for k, v in enumerate(idx):
        p = jax_position("fill", int(v), n)
        assert got[k] == (0.5 if p is None else a[p, 0])


@given(gathers(), st.sampled_from(["add", "none"]))
def test_scatter_drop_skips_out_of_range_updates_in_order(case, reduction):
    a, idx = case
    data = np.zeros(a.shape[0], np.int64)
    updates = np.arange(1, len(idx) + 1, dtype=np.int64)
    got = gs.scatter_elements(data, idx, updates, reduction=reduction, mode="drop")
    expected = data.copy()
    for v, u in zip(idx, updates):
        p = jax_position("drop", int(v), len(data))
        if p is not None:
            expected[p] = expected[p] + u if reduction == "add" else u
    np.testing.assert_array_equal(got, expected)
    got = gs.scatter_nd(data, idx.reshape(-1, 1), updates, reduction=reduction, mode="drop")
    np.testing.assert_array_equal(got, expected)
    if reduction == "add":
        got = gs.scatter_reduce(data, 0, idx, updates, "sum", mode="drop")
        np.testing.assert_array_equal(got, expected)


def test_modes_each_function_takes_and_refuses():
    a = np.arange(3.0)
    with pytest.raises(gs.AttributeValueError):
        gs.gather(a, [0], mode="drop")
    with pytest.raises(gs.AttributeValueError):
        gs.scatter_elements(a, np.array([0]), np.ones(1), mode="fill")
    with pytest.raises(gs.AttributeValueError):
        gs.gather(a, [0], mode="clip", fill_value=1.0)
    with pytest.raises(gs.AttributeValueError):
        gs.gather(a, [0], mode="nearest")
    with pytest.raises(gs.UnsupportedError):
        gs.gather(a, [5], mode="clip", profile="onnx:13")
    with pytest.raises(gs.DTypeError):
        gs.gather(np.arange(3), [5], mode="fill", fill_value=0.5)
    out = np.empty(2)
    assert gs.gather(a, [1, 9], mode="clip", out=out) is out
    np.testing.assert_array_equal(out, [1, 2])
