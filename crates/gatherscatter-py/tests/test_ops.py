"""The ONNX operators against plain references written from their formulas,
every dtype (strings and bfloat16 included), threads, and torch where it
defines the same operator."""

import numpy as np
import pytest

import gatherscatter as gs

ALL_NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
               "uint64", "float16", "float32", "float64", "complex64", "complex128"]


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 100, int(np.prod(shape))) % (2 if dtype == "bool" else 100)).astype(dtype).reshape(shape)


def gather_nd_reference(data, indices, batch_dims=0):
    """GatherND from its formula: one loop over index tuples."""
    k = indices.shape[-1]
    batch = int(np.prod(indices.shape[:batch_dims]))
    inner_idx = indices.reshape((batch, -1, k))
    d = data.reshape((batch,) + data.shape[batch_dims:])
    rows = []
    for b in range(batch):
        for t in inner_idx[b]:
            rows.append(d[(b,) + tuple(int(x) for x in t)])
    out_shape = indices.shape[:-1] + data.shape[batch_dims + k:]
    return np.array(rows, dtype=data.dtype).reshape(out_shape)


def scatter_nd_reference(data, indices, updates, reduction="none"):
    out = data.copy()
    k = indices.shape[-1]
    ops = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply,
           "max": np.maximum, "min": np.minimum}
    tuples = indices.reshape(-1, k)
    slices = updates.reshape((len(tuples),) + data.shape[k:])
    for t, u in zip(tuples, slices):
        key = tuple(int(x) for x in t)
        out[key] = ops[reduction](out[key], u)
    return out


@pytest.mark.parametrize("dtype", ALL_NUMERIC)
def test_every_numeric_dtype_gathers_and_scatters_exactly(dtype):
    data = sample(dtype, (4, 3))
    idx = np.array([3, -4, 1])
    np.testing.assert_array_equal(gs.gather(data, idx, axis=0), data[idx])
    out = gs.scatter_elements(data, np.array([[1, 0, 2]]), data[:1], axis=0)
    expected = data.copy()
    expected[[1, 0, 2], [0, 1, 2]] = data[0]
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.dtype(dtype)


@pytest.mark.parametrize("index_dtype", ["int8", "int16", "int32", "int64",
                                         "uint8", "uint16", "uint32", "uint64"])
def test_every_index_dtype_is_taken(index_dtype):
    data = np.arange(12.0).reshape(3, 4)
    idx = np.array([2, 0, 2], dtype=index_dtype)
    np.testing.assert_array_equal(gs.gather(data, idx, axis=1), data[:, [2, 0, 2]])
    np.testing.assert_array_equal(gs.gather_nd(data, idx[:2].reshape(1, 2)), [data[2, 0]])


def test_unicode_strings_keep_their_width_and_survive_nuls_inside():
    words = np.array(["alpha", "b", "", "d\x00e"], dtype="U7")
    got = gs.gather(words, np.array([3, 0, 2, 1]))
    assert got.dtype == np.dtype("U7")
    np.testing.assert_array_equal(got, words[[3, 0, 2, 1]])


def test_byte_strings_round_trip_every_byte_value():
    cells = np.array([bytes([b, 255 - b]) for b in range(1, 255)], dtype="S2")
    got = gs.take(cells, np.arange(len(cells))[::-1])
    assert got.dtype == np.dtype("S2")
    np.testing.assert_array_equal(got, cells[::-1])


def test_string_add_concatenates_and_widens_the_result():
    data = np.array(["ab", "c"])
    got = gs.scatter_elements(data, np.array([0, 0]), np.array(["x", "yz"]), reduction="add")
    np.testing.assert_array_equal(got, ["abxyz", "c"])
    assert got.dtype == np.dtype("U5")


def test_bfloat16_through_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data = np.arange(8, dtype=np.float32).reshape(4, 2).astype(ml_dtypes.bfloat16)
    got = gs.gather(data, np.array([3, 1]))
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), [[6, 7], [2, 3]])
    out = np.zeros((2, 2), ml_dtypes.bfloat16)
    assert gs.gather(data, np.array([0, 0]), out=out) is out
    np.testing.assert_array_equal(out.astype(np.float32), [[0, 1], [0, 1]])


def test_gather_nd_with_batch_dims_matches_its_formula():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    idx = rng.integers(-3, 3, (2, 6, 2))
    np.testing.assert_array_equal(gs.gather_nd(data, idx, batch_dims=1),
                                  gather_nd_reference(data, idx % np.array([3, 4]), 1))


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_with_duplicates_matches_a_serial_loop(reduction):
    rng = np.random.default_rng(2)
    data = rng.integers(-5, 5, (5, 3)).astype(np.int64)
    idx = rng.integers(0, 5, (9, 1))
    upd = rng.integers(-5, 5, (9, 3)).astype(np.int64)
    for threads in (1, 2):
        np.testing.assert_array_equal(gs.scatter_nd(data, idx, upd, reduction, threads=threads),
                                      scatter_nd_reference(data, idx, upd, reduction))


def test_tensor_scatter_writes_each_batch_window_circularly():
    cache = np.zeros((2, 4, 1), np.float32)
    update = np.arange(1, 7, dtype=np.float32).reshape(2, 3, 1)
    got = gs.tensor_scatter(cache, update, np.array([0, 2]), mode="circular")
    np.testing.assert_array_equal(got[..., 0], [[1, 2, 3, 0], [6, 0, 4, 5]])


def test_large_calls_give_the_same_bits_on_one_and_two_threads():
    rng = np.random.default_rng(3)
    data = rng.standard_normal((512, 1024)).astype(np.float32)
    idx = rng.integers(0, 512, (4096, 1024))
    upd = rng.standard_normal((4096, 1024)).astype(np.float32)
    one = gs.scatter_elements(data, idx, upd, axis=0, reduction="add", threads=1)
    two = gs.scatter_elements(data, idx, upd, axis=0, reduction="add", threads=2)
    assert one.tobytes() == two.tobytes()


def test_num_threads_is_a_module_setting():
    before = gs.get_num_threads()
    try:
        gs.set_num_threads(1)
        assert gs.get_num_threads() == 1
        np.testing.assert_array_equal(gs.gather(np.arange(4), [1]), [1])
    finally:
        gs.set_num_threads(before)
    with pytest.raises(ValueError):
        gs.set_num_threads(0)
    with pytest.raises(ValueError):
        gs.gather(np.arange(4), [1], threads=0)


def test_profiles_are_the_gsx_strings():
    data, idx = np.arange(6.0).reshape(2, 3), np.array([1])
    np.testing.assert_array_equal(gs.gather(data, idx, profile="onnx:13"), data[[1]])
    with pytest.raises(gs.DTypeError):
        gs.gather(data.astype(np.uint64), np.array([1], np.uint8), profile="onnx:13")
    np.testing.assert_array_equal(
        gs.gather_elements(data.astype(np.float32), np.array([[1, 0, 2], [0, 0, 0]]), axis=1,
                           profile="directml:3.0"), [[1, 0, 2], [3, 3, 3]])
    with pytest.raises(gs.UnsupportedError, match="GatherElements only"):
        gs.gather(data, idx, profile="directml:3.0")
    np.testing.assert_array_equal(gs.gather(data, idx, profile="mindspore"), data[[1]])


def test_inputs_may_be_lists_and_scalars_as_with_numpy():
    np.testing.assert_array_equal(gs.gather([[1, 2], [3, 4]], [1]), [[3, 4]])
    assert gs.take([5, 6, 7], 2) == 7


def test_operator_list_is_the_cores():
    assert gs.OPERATORS == ["Gather", "GatherElements", "ScatterElements",
                            "GatherND", "ScatterND", "TensorScatter", "ScatterReduce",
                            "SegmentCsr", "SegmentCoo", "EmbeddingBag"]



@pytest.mark.parametrize("reduction,torch_reduce", [("add", "sum"), ("mul", "prod"),
                                                    ("max", "amax"), ("min", "amin")])
def test_scatter_elements_reductions_match_torch_scatter_reduce(reduction, torch_reduce):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    data = rng.integers(-9, 9, (6, 5)).astype(np.int64)
    idx = rng.integers(0, 6, (8, 5))
    upd = rng.integers(-9, 9, (8, 5)).astype(np.int64)
    expected = torch.from_numpy(data).scatter_reduce(0, torch.from_numpy(idx), torch.from_numpy(upd),
                                                     torch_reduce, include_self=True).numpy()
    np.testing.assert_array_equal(gs.scatter_elements(data, idx, upd, 0, reduction), expected)


def test_gather_elements_matches_torch_gather():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    data = rng.standard_normal((7, 9)).astype(np.float32)
    idx = rng.integers(0, 7, (5, 9))
    np.testing.assert_array_equal(gs.gather_elements(data, idx, axis=0),
                                  torch.gather(torch.from_numpy(data), 0, torch.from_numpy(idx)).numpy())
    # A CPU torch tensor is taken through numpy.asarray, without a copy.
    np.testing.assert_array_equal(gs.gather(torch.arange(5), torch.tensor([4, 0])), [4, 0])
