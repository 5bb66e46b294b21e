"""gatherscatter.dask on a real two-process cluster: every function equals the
single-machine call (bit for bit for the scatters) over random chunkings,
with chunks of size 1, empty chunks and duplicates that span chunks; the
errors are the single-machine ones, at compute time; a killed worker's tasks
are rerun; and the graph of a take grows with the chunk pairs it hits."""

import os
import signal
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import gatherscatter as gs  # noqa: E402
import gatherscatter.dask as gsd  # noqa: E402

# Each example is a round trip to the cluster: fewer of them than elsewhere.
FEW = settings(max_examples=min(settings.default.max_examples, 60))

REDUCES = ["none", "sum", "prod", "mean", "amax", "amin"]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """Two worker processes on loopback; computes in this module run there."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@st.composite
def chunkings(draw, extent):
    """A random split of ``extent``: chunks of size 1 and empty chunks included."""
    sizes, left = [], extent
    while left:
        size = draw(st.sampled_from([0, 1, 1, 2, 3, left]))
        sizes.append(min(size, left))
        left -= sizes[-1]
    if draw(st.booleans()):
        sizes.insert(draw(st.integers(0, len(sizes))), 0)
    return tuple(sizes) or (0,)


@st.composite
def chunked(draw, dtypes=("float32", "float64", "int32", "int8")):
    """(numpy array, the same as a randomly chunked dask array, axis)."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank)))
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        # Magnitudes far apart, so that a sum in another order rounds otherwise.
        a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 8, shape)).astype(dtype)
    else:
        a = rng.integers(-5, 6, shape).astype(dtype)
    chunks = tuple(draw(chunkings(n)) for n in shape)
    return a, da.from_array(a, chunks=chunks), draw(st.integers(0, rank - 1))


def random_indices(draw, n, shape, index_dtype=np.int64):
    """Indices in ``[-n, n)`` (``[0, n)`` if unsigned) drawn from a few values,
    so duplicates are common."""
    if n == 0:
        return np.zeros(shape, index_dtype)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    low = 0 if np.dtype(index_dtype).kind == "u" else -n
    values = rng.integers(low, n, max(1, min(n, 3)))
    return rng.choice(values, shape).astype(index_dtype)


@FEW
@given(chunked(), st.data())
def test_take_equals_the_single_machine_take(case, data):
    a, x, axis = case
    n = a.shape[axis]
    if n == 0:
        return
    shape = tuple(data.draw(st.lists(st.integers(0, 5), min_size=0, max_size=2)))
    idx = random_indices(data.draw, n, shape, data.draw(st.sampled_from([np.int64, np.int32])))
    rows = data.draw(st.sampled_from([None, 1, 2]))
    got = gsd.take(x, idx, axis, chunks=rows).compute()
    assert same_bits(got, np.asarray(gs.take(a, idx, axis)))


def test_take_accepts_dask_indices_and_a_scalar_index():
    a = np.arange(60.0).reshape(12, 5)
    x = da.from_array(a, chunks=(5, 2))
    idx = np.array([11, -1, 0, 4, 4, 7])
    assert same_bits(gsd.take(x, da.from_array(idx, chunks=4), 0).compute(), a[idx])
    assert same_bits(gsd.take(x, np.int64(-2), 1).compute(), a[:, -2])


@FEW
@given(chunked(), st.data())
def test_gather_elements_equals_the_single_machine_gather(case, data):
    a, x, axis = case
    n = a.shape[axis]
    if n == 0:
        return
    shape = tuple(data.draw(st.integers(0, m)) if d != axis else data.draw(st.integers(0, 7))
                  for d, m in enumerate(a.shape))
    idx = random_indices(data.draw, n, shape, data.draw(st.sampled_from([np.int64, np.uint8])))
    want = gs.gather_elements(a, idx, axis)
    assert same_bits(gsd.gather_elements(x, idx, axis).compute(), want)
    lazy = da.from_array(idx, chunks=tuple(data.draw(chunkings(m)) for m in idx.shape))
    assert same_bits(gsd.gather_elements(x, lazy, axis).compute(), want)


def test_take_along_axis_broadcasts_as_numpy_does():
    a = np.random.default_rng(1).standard_normal((6, 1, 9))
    x = da.from_array(a, chunks=(2, 1, 4))
    idx = np.argsort(np.random.default_rng(2).standard_normal((1, 3, 9)), axis=2)
    assert same_bits(gsd.take_along_axis(x, idx, axis=2).compute(),
                     np.take_along_axis(a, idx, axis=2))
    flat = np.array([53, 0, -1, 7])
    assert same_bits(gsd.take_along_axis(x, flat, axis=None).compute(),
                     np.take_along_axis(a.reshape(-1), flat, axis=None))


@FEW
@given(chunked(), st.sampled_from(REDUCES), st.booleans(), st.data())
def test_scatter_reduce_is_bit_identical_to_the_single_machine_scatter(case, reduce,
                                                                       include_self, data):
    a, x, axis = case
    n = a.shape[axis]
    if n == 0:
        return
    shape = tuple(data.draw(st.integers(0, m)) if d != axis else data.draw(st.integers(0, 9))
                  for d, m in enumerate(a.shape))
    idx = random_indices(data.draw, n, shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Values whose sum (and product) in another order rounds otherwise.
    values = [1e8, 1.0, -1e8, 0.5, 3.0, -7.25] if a.dtype.kind == "f" else [-5, 1, 2, 7]
    updates = rng.choice(values, shape).astype(a.dtype)
    if reduce == "none":
        want = gs.scatter_elements(a, idx, updates, axis)
    else:
        want = gs.scatter_reduce(a, axis, idx, updates, reduce, include_self=include_self)
    chunks = tuple(data.draw(chunkings(m)) for m in shape)
    lazy_idx = da.from_array(idx, chunks=chunks)
    got = gsd.scatter_reduce(x, lazy_idx, updates, axis, reduce, include_self=include_self)
    assert same_bits(got.compute(), want)


def test_a_sum_whose_value_depends_on_the_order_matches_the_single_machine_order():
    # 1e8 + 1 - 1e8 is 0 in float32 in this order, 1 in another: the check has teeth.
    a = np.zeros(4, np.float32)
    idx = np.array([2, 2, 2, 2, 2, 2])
    updates = np.array([1e8, 1, -1e8, 1, 1, 1], np.float32)
    want = gs.scatter_reduce(a, 0, idx, updates, "sum")
    x = da.from_array(a, chunks=1)
    for chunks in [1, 2, 5]:
        got = gsd.scatter_reduce(x, da.from_array(idx, chunks=chunks), updates, 0, "sum")
        assert same_bits(got.compute(), want)
    assert want[2] != np.float32(np.sum(updates[::-1]))


def test_a_scatter_into_chunks_whose_last_is_the_largest_finds_each_target():
    # Regression: chunks (1, 1, 2) once passed for even chunks of 1.
    a = np.arange(4.0)
    idx = np.array([3, 2, 0, 3])
    updates = np.array([10.0, 20.0, 30.0, 40.0])
    got = gsd.scatter_reduce(da.from_array(a, chunks=((1, 1, 2),)), idx, updates, 0, "sum")
    assert same_bits(got.compute(), gs.scatter_reduce(a, 0, idx, updates, "sum"))


def test_out_of_range_indices_raise_the_single_machine_error_at_compute_time():
    a = np.arange(20.0).reshape(4, 5)
    x = da.from_array(a, chunks=(1, 2))
    bad = np.array([[0, 1], [3, -6], [1, 2]])
    lazy = gsd.take(x, bad, 1)  # building the graph does not raise
    with pytest.raises(gs.OutOfBoundsError) as got:
        lazy.compute()
    with pytest.raises(gs.OutOfBoundsError) as want:
        gs.take(a, bad, 1)
    assert str(got.value) == str(want.value) == (
        "index -6 at indices[1, 1] is out of range [-5, 4] for axis 1 of size 5")

    elements = np.array([[0, 1, 9], [0, 0, 0]])
    with pytest.raises(gs.OutOfBoundsError) as want:
        gs.gather_elements(a, elements, 1)
    for idx in (elements, da.from_array(elements, chunks=1)):
        with pytest.raises(gs.OutOfBoundsError) as got:
            gsd.gather_elements(x, idx, 1).compute()
        assert str(got.value) == str(want.value)

    with pytest.raises(gs.OutOfBoundsError) as want:
        gs.scatter_reduce(a, 1, elements, np.ones((2, 3)), "sum")
    with pytest.raises(gs.OutOfBoundsError) as got:
        gsd.scatter_reduce(x, da.from_array(elements, chunks=1), np.ones((2, 3)), 1,
                           "sum").compute()
    assert str(got.value) == str(want.value)


def test_bad_shapes_dtypes_and_reductions_raise_the_single_machine_errors_at_once():
    a = np.zeros((3, 5))
    x = da.from_array(a, chunks=2)
    cases = [
        (lambda m: m.take(x if m is gsd else a, [1], 2)),
        (lambda m: m.take(da.from_array(np.float64(3)) if m is gsd else np.float64(3), [0], 0)),
        (lambda m: m.gather_elements(x if m is gsd else a, np.zeros((2, 2), int), -3)),
        (lambda m: m.gather_elements(x if m is gsd else a, np.zeros(2, int), 1)),
        (lambda m: m.gather_elements(x if m is gsd else a, np.zeros((4, 2), int), 1)),
        (lambda m: m.scatter_elements(a, np.zeros((2, 2), int), np.ones((2, 3)), 1)
         if m is gs else m.scatter_reduce(x, np.zeros((2, 2), int), np.ones((2, 3)), 1,
                                          "none")),
        (lambda m: m.scatter_reduce(a, 0, np.zeros(0, int), np.ones(0, np.float32), "sum")
         if m is gs else m.scatter_reduce(x, np.zeros((0, 0), int),
                                          np.ones((0, 0), np.float32), 0, "sum")),
        (lambda m: m.scatter_reduce(a, 0, np.zeros(0, int), np.ones(0), "avg")
         if m is gs else m.scatter_reduce(x, np.zeros((0, 0), int), np.ones((0, 0)), 0,
                                          "avg")),
    ]
    for case in cases:
        with pytest.raises(gs.Error) as want:
            case(gs)
        with pytest.raises(type(want.value)) as got:
            case(gsd)
        assert got.value.kind == want.value.kind
        if want.value.kind != "bad_dtype":  # the stand-in's shape differs, not the text
            assert str(got.value) == str(want.value)


def test_slab_room_is_reused_only_once_no_piece_of_it_is_alive():
    from gatherscatter.dask import _Slabs

    slabs = _Slabs()
    count = slabs.SLAB // 4 // 8  # float64 entries of the largest piece cut from a slab
    pieces = [slabs.empty((count,), np.dtype(np.float64)) for _ in range(4 * slabs.KEEP)]
    survivor = pieces[1][::2]  # a view of a piece keeps its slab in use
    survivor[:] = 7.0
    del pieces
    later = [slabs.empty((count,), np.dtype(np.float64)) for _ in range(4 * slabs.KEEP)]
    for piece in later:
        piece[:] = -1.0
        assert not np.shares_memory(piece, survivor)
    assert (survivor == 7.0).all()
    # ... and the other kept slabs were used again.
    reused = [slab for slab in slabs._kept if not np.shares_memory(slab, survivor)]
    assert reused and all(any(np.shares_memory(p, slab) for p in later) for slab in reused)


def _tasks(array, prefix):
    return sum(1 for key in array.__dask_graph__() if key[0].startswith(prefix))


def test_the_graph_of_a_take_grows_with_the_chunk_pairs_hit_not_the_indices():
    x = da.zeros((1000, 4), chunks=(10, 4))  # 100 source chunks
    rng = np.random.default_rng(0)
    few = rng.integers(0, 30, 50)             # hits 3 source chunks, 1 output chunk
    many = rng.integers(0, 30, 5000)          # the same 3 chunks, 500 output chunks of 10
    one_chunk = gsd.take(x, few, 0, chunks=50)
    assert _tasks(one_chunk, "gs-take-part-") == 3
    assert _tasks(one_chunk, "gs-take-") == 3 + 1
    assert _tasks(gsd.take(x, many, 0, chunks=5000), "gs-take-") == 3 + 1
    sorted_many = gsd.take(x, np.sort(many), 0, chunks=10)
    pairs = {(o, s) for o in range(500) for s in np.unique(np.sort(many)[o * 10:o * 10 + 10] // 10)}
    assert _tasks(sorted_many, "gs-take-part-") == len(pairs) < 600


def _slowly(block):
    time.sleep(0.05)
    return block


def test_a_worker_killed_mid_computation_has_its_tasks_rerun():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((400, 3))
    idx = rng.integers(0, 400, (900, 3))
    updates = rng.standard_normal((900, 3))
    want = gs.scatter_reduce(a, 0, idx, updates, "sum")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        x = da.from_array(a, chunks=(5, 3)).map_blocks(_slowly)  # 80 chunks, 2 s of work
        result = client.compute(gsd.scatter_reduce(x, da.from_array(idx, chunks=(100, 3)),
                                                   updates, 0, "sum"))
        time.sleep(0.5)
        assert not result.done()
        victim = sorted(client.run(os.getpid).values())[0]
        os.kill(victim, signal.SIGKILL)
        got = result.result(timeout=120)
        assert victim not in client.run(os.getpid).values()
    assert same_bits(got, want)
