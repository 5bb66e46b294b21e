"""embedding_bag against a reference written from the formula (always) and
against torch.nn.functional.embedding_bag (when torch is installed): every
mode, both offset forms, padding, per-sample weights and the winning rows."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import gatherscatter as gs


def embedding_bag_reference(weight, indices, bounds, mode, padding, psw):
    """Bag b folds weight[indices[j]] (times psw[j]) for j in its range whose
    row is not ``padding``, in order; an empty bag is 0 (1 for prod)."""
    rows, dim = weight.shape
    out = np.empty((len(bounds) - 1, dim), weight.dtype)
    for b in range(len(bounds) - 1):
        members = [j for j in range(bounds[b], bounds[b + 1])
                   if int(indices[j]) % max(rows, 1) != padding]
        if not members:
            out[b] = 1 if mode == "prod" else 0
            continue
        values = [weight[int(indices[j]) % rows] * (psw[j] if psw is not None else 1)
                  for j in members]
        acc = values[0].copy()
        for v in values[1:]:
            if mode in ("sum", "mean"):
                acc = acc + v
            elif mode == "prod":
                acc = acc * v
            elif mode == "max":
                acc = np.maximum(acc, v)
            else:
                acc = np.minimum(acc, v)
        if mode == "mean":
            acc = (np.floor_divide(acc, len(members)) if weight.dtype.kind in "iu"
                   else acc / weight.dtype.type(len(members)))
        out[b] = acc
    return out


@st.composite
def cases(draw, dtypes=("float32", "float64", "int32", "int64", "int16"), negatives=True):
    rows = draw(st.integers(1, 6))
    dim = draw(st.integers(0, 4))
    n = draw(st.integers(0, 12))
    low = -rows if negatives else 0
    indices = np.array(draw(st.lists(st.integers(low, rows - 1), min_size=n, max_size=n)),
                       dtype=draw(st.sampled_from(["int64", "int32", "int8"])))
    starts = sorted(draw(st.lists(st.integers(0, n), max_size=5)) + [0])
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    weight = np.array(draw(st.lists(st.integers(-5, 5), min_size=rows * dim,
                                    max_size=rows * dim)), dtype=dtype).reshape(rows, dim)
    mode = draw(st.sampled_from(["sum", "mean", "max", "min", "prod"]))
    padding = draw(st.none() | st.integers(0, rows - 1))
    psw = None
    if mode == "sum" and draw(st.booleans()):
        psw = np.array(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=dtype)
    include_last = draw(st.booleans())
    return weight, indices, starts, mode, padding, psw, include_last


@given(cases())
def test_embedding_bag_matches_the_formula(case):
    weight, indices, starts, mode, padding, psw, include_last = case
    bounds = starts + [len(indices)]
    offsets = np.array(bounds if include_last else starts)
    with np.errstate(over="ignore"):
        expected = embedding_bag_reference(weight, indices, bounds, mode, padding, psw)
    got = gs.embedding_bag(weight, indices, offsets, mode, psw, include_last, padding)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@given(cases(dtypes=("float32", "float64"), negatives=False))
def test_embedding_bag_matches_torch(case):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    weight, indices, starts, mode, padding, psw, include_last = case
    if weight.shape[1] == 0:
        return  # torch raises "Expected i < index_size" on a zero-width weight
    if mode in ("min", "prod"):
        mode = "max"  # torch has sum, mean and max
        psw = None
    bounds = starts + [len(indices)]
    offsets = np.array(bounds if include_last else starts, np.int64)
    kwargs = dict(mode=mode, include_last_offset=include_last, padding_idx=padding)
    t_psw = None if psw is None else torch.from_numpy(psw)
    expected = F.embedding_bag(torch.from_numpy(indices.astype(np.int64)),
                               torch.from_numpy(weight), torch.from_numpy(offsets),
                               per_sample_weights=t_psw, **kwargs).numpy()
    got = gs.embedding_bag(weight, indices, offsets, mode, psw, include_last, padding)
    np.testing.assert_array_equal(got, expected)
    if mode == "max" and padding is None:
        # torch's max_indices agree except in empty bags (torch: 0, a real
        # row; this library: rows, one past the last).
        _, _, _, max_indices = torch.ops.aten._embedding_bag_forward_only(
            torch.from_numpy(weight), torch.from_numpy(indices.astype(np.int64)),
            torch.from_numpy(offsets), False, 2, False, None, include_last, -1)
        _, arg = gs.embedding_bag(weight, indices, offsets, "max", None, include_last,
                                  return_arg=True)
        empty = np.diff(bounds) == 0
        np.testing.assert_array_equal(arg[~empty], max_indices.numpy()[~empty])
        assert (arg[empty] == weight.shape[0]).all()


def test_pytorchs_example_in_every_mode():
    weight = np.arange(12.0).reshape(4, 3)
    indices, offsets = np.array([0, 2, 1, 3, 2]), np.array([0, 2, 2])
    np.testing.assert_array_equal(gs.embedding_bag(weight, indices, offsets, "sum"),
                                  [[6, 8, 10], [0, 0, 0], [18, 21, 24]])
    np.testing.assert_array_equal(gs.embedding_bag(weight, indices, offsets, "mean"),
                                  [[3, 4, 5], [0, 0, 0], [6, 7, 8]])
    np.testing.assert_array_equal(gs.embedding_bag(weight, indices, offsets, "max"),
                                  [[6, 7, 8], [0, 0, 0], [9, 10, 11]])
    np.testing.assert_array_equal(
        gs.embedding_bag(weight, indices, offsets, "sum", padding_idx=2),
        [[0, 1, 2], [0, 0, 0], [12, 14, 16]])
    np.testing.assert_array_equal(
        gs.embedding_bag(weight, indices, offsets, "sum", np.arange(1.0, 6.0)),
        [[12, 15, 18], [0, 0, 0], [75, 87, 99]])
    # include_last_offset has the same meaning in every mode.
    for mode in ("sum", "mean", "max"):
        np.testing.assert_array_equal(
            gs.embedding_bag(weight, indices, np.array([0, 2, 2, 5]), mode,
                             include_last_offset=True),
            gs.embedding_bag(weight, indices, offsets, mode))


def test_two_dimensional_indices_are_bags_of_equal_size_with_their_weights():
    weight = np.arange(12.0).reshape(4, 3)
    got = gs.embedding_bag(weight, np.array([[0, 1], [2, 3]]), mode="sum",
                           per_sample_weights=np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(got, [[6, 9, 12], [54, 61, 68]])


def test_errors_are_the_cores_kinds():
    weight = np.zeros((4, 3), np.float32)
    indices = np.array([0, 2, 1, 3, 2])
    with pytest.raises(gs.SegmentError, match="offsets decreases"):
        gs.embedding_bag(weight, indices, np.array([0, 3, 2]))
    with pytest.raises(gs.SegmentError, match="first bag starts at 1"):
        gs.embedding_bag(weight, indices, np.array([1, 3]))
    with pytest.raises(gs.SegmentError, match="include_last_offset"):
        gs.embedding_bag(weight, indices, np.array([0, 2, 4]), include_last_offset=True)
    with pytest.raises(IndexError, match="index 4 at indices"):
        gs.embedding_bag(weight, np.array([4]), np.array([0]))
    with pytest.raises(gs.AttributeValueError, match="padding_idx"):
        gs.embedding_bag(weight, indices, np.array([0]), padding_idx=4)
    with pytest.raises(gs.AttributeValueError, match="only defined for mode sum"):
        gs.embedding_bag(weight, indices, np.array([0]), "mean", np.ones(5, np.float32))
    with pytest.raises(gs.ShapeError):
        gs.embedding_bag(weight, indices)
    with pytest.raises(gs.ReductionError):
        gs.embedding_bag(weight, indices, np.array([0]), "sum", return_arg=True)


def test_results_are_bit_identical_on_one_and_two_threads():
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((20_000, 64)).astype(np.float32)
    indices = rng.integers(0, 20_000, 200_000)
    offsets = np.sort(rng.integers(0, 200_000, 10_000))
    offsets[0] = 0
    psw = rng.standard_normal(200_000).astype(np.float32)
    for mode, weights in (("sum", None), ("sum", psw), ("mean", None), ("max", None)):
        one = gs.embedding_bag(weight, indices, offsets, mode, weights, threads=1)
        two = gs.embedding_bag(weight, indices, offsets, mode, weights, threads=2)
        assert one.tobytes() == two.tobytes(), mode
