"""segment_csr / segment_coo against a reference written from the formula
(always), against np.add.reduceat and its siblings where numpy defines the
same thing, and against torch.segment_reduce (when torch is installed)."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import gatherscatter as gs

REDUCES = ["sum", "prod", "mean", "max", "min"]


def fold(values, reduce, dtype):
    """One segment's values folded in order, as the formula says."""
    acc = values[0]
    for v in values[1:]:
        if reduce in ("sum", "mean"):
            acc = acc + v
        elif reduce == "prod":
            acc = acc * v
        elif reduce == "max":
            acc = v if (np.isnan(v) or v > acc) and not np.isnan(acc) else acc
        else:
            acc = v if (np.isnan(v) or v < acc) and not np.isnan(acc) else acc
    if reduce == "mean":
        if dtype.kind in "iu":
            return np.floor_divide(int(acc), len(values))
        return acc / dtype.type(len(values))
    return acc


def segment_reference(src, axis, members, segments, reduce, fill):
    """out[p] folds src[p with p[axis] := r] over the rows r of segment
    p[axis] of the slab p[:axis]; an empty segment gets ``fill``."""
    shape = list(src.shape)
    shape[axis] = segments
    out = np.empty(shape, src.dtype)
    for p in np.ndindex(*shape):
        rows = members(p[:axis], p[axis])
        if not rows:
            out[p] = fill
            continue
        values = [src[p[:axis] + (r,) + p[axis + 1:]] for r in rows]
        out[p] = fold(values, reduce, src.dtype)
    return out


def default_fill(reduce):
    return 1 if reduce == "prod" else 0


@st.composite
def cases(draw, dtypes=("float32", "float64", "int32", "int64", "uint8", "int16")):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    axis = draw(st.integers(0, rank - 1))
    lead = tuple(1 if draw(st.booleans()) else n for n in shape[:axis])
    segments = draw(st.integers(0, 4))
    rows = shape[axis]
    bounds = [sorted(draw(st.lists(st.integers(0, rows), min_size=segments + 1,
                                   max_size=segments + 1)))
              for _ in range(int(np.prod(lead)))]
    indptr = np.array(bounds, dtype=draw(st.sampled_from(["int64", "int32", "uint16", "int8"])))
    indptr = indptr.reshape(lead + (segments + 1,))
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    low = 0 if dtype.kind == "u" else -5
    n = int(np.prod(shape))
    src = np.array(draw(st.lists(st.integers(low, 5), min_size=n, max_size=n)),
                   dtype=dtype).reshape(shape)
    return src, axis, indptr, draw(st.sampled_from(REDUCES))


def csr_members(indptr, axis):
    lead = indptr.shape[:-1]

    def members(slab, s):
        at = tuple(0 if n == 1 else c for c, n in zip(slab, lead))
        row = indptr[at] if at else indptr
        return list(range(int(row[s]), int(row[s + 1])))
    return members


def assert_same(got, expected):
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@given(cases())
def test_segment_csr_matches_the_formula(case):
    src, axis, indptr, reduce = case
    with np.errstate(over="ignore"):
        expected = segment_reference(src, axis, csr_members(indptr, axis), indptr.shape[-1] - 1,
                                     reduce, default_fill(reduce))
    assert_same(gs.segment_csr(src, indptr, reduce=reduce), expected)


@given(cases(), st.integers(-3, 3))
def test_segment_csr_arg_names_the_first_row_holding_each_value(case, fill):
    src, axis, indptr, reduce = case
    reduce = "max" if reduce in ("sum", "max", "mean") else "min"
    fill = max(fill, 0) if src.dtype.kind == "u" else fill
    values, arg = gs.segment_csr(src, indptr, reduce=reduce, fill=fill, return_arg=True)
    members = csr_members(indptr, axis)
    assert_same(values, segment_reference(src, axis, members, indptr.shape[-1] - 1, reduce, fill))
    assert arg.dtype == np.int64 and arg.shape == values.shape
    for p in np.ndindex(*values.shape):
        rows = [r for r in members(p[:axis], p[axis])
                if src[p[:axis] + (r,) + p[axis + 1:]] == values[p]]
        assert arg[p] == (rows[0] if rows else src.shape[axis])


@given(cases())
def test_segment_coo_equals_segment_csr_on_the_same_segments(case):
    src, axis, indptr, reduce = case
    rows = src.shape[axis]
    # Ids from the boundaries: row r belongs to the last segment starting at or before it;
    # rows outside every segment do not exist in the coo form, so cover them all.
    indptr = indptr.astype(np.int64)
    indptr[..., 0] = 0
    indptr[..., -1] = rows
    segments = indptr.shape[-1] - 1
    if segments == 0 or indptr.size == 0:
        return
    ids = np.stack([np.searchsorted(row[1:], np.arange(rows), side="right")
                    for row in indptr.reshape(-1, segments + 1)])
    ids = np.minimum(ids, segments - 1).reshape(indptr.shape[:-1] + (rows,))
    got = gs.segment_coo(src, ids, dim_size=segments, reduce=reduce)
    with np.errstate(over="ignore"):
        members = lambda slab, s: [r for r in range(rows)  # noqa: E731
                                   if ids[tuple(0 if n == 1 else c for c, n in
                                                zip(slab, ids.shape[:-1]))][r] == s]
        expected = segment_reference(src, axis, members, segments, reduce, default_fill(reduce))
    assert_same(got, expected)


@given(cases(dtypes=("float64", "int64", "int32")))
def test_numpy_reduceat_agrees_where_every_segment_has_rows(case):
    """``np.ufunc.reduceat(src, starts, axis)`` reduces ``src[starts[i]:starts[i+1]]``
    and the last start to the end, but gives ``src[starts[i]]`` for an empty segment
    (this library gives the fill, as pytorch_scatter): compared on strictly increasing
    boundaries that cover every row."""
    src, axis, indptr, reduce = case
    rows = src.shape[axis]
    if reduce == "mean" or indptr.ndim > 1 or rows == 0:
        return
    starts = np.unique(indptr.astype(np.int64).clip(0, rows - 1))
    starts[0] = 0
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[reduce]
    with np.errstate(over="ignore"):
        expected = ufunc.reduceat(src, starts, axis=axis, dtype=src.dtype)
    got = gs.segment_csr(src, np.append(starts, rows), reduce=reduce)
    assert_same(got, expected)


@given(cases(dtypes=("float32", "float64")))
def test_torch_segment_reduce_agrees_with_its_identities_as_fill(case):
    torch = pytest.importorskip("torch")
    src, axis, indptr, reduce = case
    # torch needs offsets from 0 to the end of the axis, one row per slab
    # (it does not broadcast), and a non-empty src.
    if src.size == 0:
        return
    indptr = np.ascontiguousarray(
        np.broadcast_to(indptr, src.shape[:axis] + indptr.shape[-1:])).astype(np.int64)
    indptr[..., 0] = 0
    indptr[..., -1] = src.shape[axis]
    identity = {"sum": 0.0, "prod": 1.0, "mean": np.nan, "max": -np.inf, "min": np.inf}[reduce]
    offsets = torch.from_numpy(indptr)
    expected = torch.segment_reduce(torch.from_numpy(src), reduce, offsets=offsets,
                                    axis=axis).numpy()
    got = gs.segment_csr(src, indptr, reduce=reduce, fill=identity)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_the_docstring_examples_and_pytorch_scatters_example():
    src = np.array([1., 2., 3., 4., 5.])
    np.testing.assert_array_equal(gs.segment_csr(src, [0, 2, 2, 5]), [3, 0, 12])
    values, arg = gs.segment_csr(src, [0, 2, 2, 5], reduce="max", return_arg=True)
    np.testing.assert_array_equal(values, [2, 0, 5])
    np.testing.assert_array_equal(arg, [1, 5, 4])
    np.testing.assert_array_equal(
        gs.segment_coo(np.array([1, 2, 3, 4]), np.array([0, 0, 2, 2]), reduce="mean"), [1, 0, 3])
    # pytorch_scatter's README: src [10, 6, 64], indptr [[0, 2, 5, 6]] -> [10, 3, 64].
    big = np.random.default_rng(0).standard_normal((10, 6, 64))
    out = gs.segment_csr(big, np.array([[0, 2, 5, 6]]))
    assert out.shape == (10, 3, 64)
    np.testing.assert_allclose(out[:, 1], big[:, 2] + big[:, 3] + big[:, 4])


def test_empty_segments_take_the_fill_cast_to_the_dtype():
    src = np.arange(4, dtype=np.float32)
    got = gs.segment_csr(src, [0, 0, 4], reduce="min", fill=np.inf)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [np.inf, 0])
    with pytest.raises(gs.DTypeError):
        gs.segment_csr(np.arange(4), [0, 0, 4], reduce="min", fill=np.inf)


def test_bad_boundaries_raise_segment_errors_naming_the_entry():
    src = np.arange(4.0)
    with pytest.raises(gs.SegmentError, match=r"indptr decreases at indptr\[2\]"):
        gs.segment_csr(src, [0, 3, 2])
    with pytest.raises(ValueError, match=r"out of range \[0, 4\]"):
        gs.segment_csr(src, [0, 5])
    with pytest.raises(gs.SegmentError, match="not sorted"):
        gs.segment_coo(src, [0, 1, 0, 1])
    with pytest.raises(gs.SegmentError, match="negative"):
        gs.segment_coo(src, [-1, 0, 0, 0])
    with pytest.raises(gs.SegmentError, match="there are 2 segments"):
        gs.segment_coo(src, [0, 0, 1, 2], dim_size=2)
    with pytest.raises(gs.ReductionError):
        gs.segment_csr(src, [0, 4], reduce="sum", return_arg=True)
    with pytest.raises(gs.DTypeError):
        gs.segment_csr(src, np.array([0.0, 4.0]))
    with pytest.raises(gs.ShapeError):
        gs.segment_coo(src, [0, 0])


def test_out_receives_the_result_and_is_untouched_on_an_error():
    out = np.full(2, -1.0)
    assert gs.segment_csr(np.arange(4.0), [0, 1, 4], out=out) is out
    np.testing.assert_array_equal(out, [0, 6])
    out = np.full(2, -1.0)
    with pytest.raises(gs.SegmentError):
        gs.segment_csr(np.arange(4.0), [0, 5, 4], out=out)
    np.testing.assert_array_equal(out, [-1, -1])


def test_results_are_bit_identical_on_one_and_two_threads():
    rng = np.random.default_rng(2)
    src = rng.standard_normal((50_000, 16)).astype(np.float32)
    indptr = np.sort(rng.integers(0, 50_000, 2_001))
    for reduce in REDUCES:
        one = gs.segment_csr(src, indptr, reduce=reduce, threads=1)
        two = gs.segment_csr(src, indptr, reduce=reduce, threads=2)
        assert one.tobytes() == two.tobytes(), reduce
