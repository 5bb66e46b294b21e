"""gatherscatter.grad and gatherscatter.torch: the gathers' gradients
against a loop written from the formula (bit for bit: the same ascending
order), under every mode; take_along_axis's broadcast dims against finite
differences; bit-identical for any thread count; and, when torch is
installed, against torch's own autograd."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import gatherscatter as gs

MODES = ["raise", "clip", "wrap", "fill"]


def read(mode, v, n):
    """Where index v reads on an axis of n under mode (spec §2.16), or None."""
    if mode == "clip" and n:
        return min(max(v + n if -n <= v < 0 else v, 0), n - 1)
    if mode == "wrap" and n:
        return v % n
    v = v + n if -n <= v < 0 else v
    return v if 0 <= v < n else None


def reference_gather(grad_out, idx, data_shape, axis, mode):
    grad = np.zeros(data_shape, grad_out.dtype)
    for p in np.ndindex(*grad_out.shape):
        t = read(mode, int(idx[p[axis:axis + idx.ndim]]), data_shape[axis])
        if t is not None:
            src = p[:axis] + (t,) + p[axis + idx.ndim:]
            grad[src] += grad_out[p]
    return grad


def reference_gather_elements(grad_out, idx, data_shape, axis, mode):
    grad = np.zeros(data_shape, grad_out.dtype)
    for p in np.ndindex(*idx.shape):
        t = read(mode, int(idx[p]), data_shape[axis])
        if t is not None:
            grad[p[:axis] + (t,) + p[axis + 1:]] += grad_out[p]
    return grad


def reference_gather_nd(grad_out, idx, data_shape, mode):
    grad = np.zeros(data_shape, grad_out.dtype)
    k = idx.shape[-1]
    for p in np.ndindex(*idx.shape[:-1]):
        at = [read(mode, int(v), data_shape[j]) for j, v in enumerate(idx[p])]
        if None not in at:
            grad[tuple(at)] += grad_out[p]
    return grad


def values(rng, shape, dtype):
    # Magnitudes far apart: a sum in another order rounds otherwise.
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 6, shape)).astype(dtype)


@st.composite
def cases(draw):
    rank = draw(st.integers(1, 3))
    data_shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axis = draw(st.integers(0, rank - 1))
    mode = draw(st.sampled_from(MODES))
    dtype = np.dtype(draw(st.sampled_from(["float32", "float64", "complex64"])))
    seed = draw(st.integers(0, 2**32 - 1))
    return data_shape, axis, mode, dtype, np.random.default_rng(seed)


def index_values(rng, mode, n, shape):
    low, high = (-n, n) if mode == "raise" else (-2 * n - 1, 2 * n + 2)
    return rng.integers(low, high, shape)


@given(cases(), st.lists(st.integers(0, 4), max_size=2))
def test_gather_grad_is_the_formula_bit_for_bit(case, idx_shape):
    data_shape, axis, mode, dtype, rng = case
    idx = index_values(rng, mode, data_shape[axis], tuple(idx_shape))
    out_shape = data_shape[:axis] + idx.shape + data_shape[axis + 1:]
    grad_out = values(rng, out_shape, dtype)
    got = gs.grad.gather(grad_out, idx, data_shape, axis, mode=mode)
    want = reference_gather(grad_out, idx, data_shape, axis, mode)
    assert got.dtype == dtype and got.tobytes() == want.tobytes()


@given(cases(), st.data())
def test_gather_elements_grad_is_the_formula_bit_for_bit(case, data):
    data_shape, axis, mode, dtype, rng = case
    shape = tuple(data.draw(st.integers(0, 5)) if d == axis else data.draw(st.integers(0, n))
                  for d, n in enumerate(data_shape))
    idx = index_values(rng, mode, data_shape[axis], shape).astype(np.int32)
    grad_out = values(rng, shape, dtype)
    got = gs.grad.gather_elements(grad_out, idx, data_shape, axis, mode=mode)
    assert got.tobytes() == reference_gather_elements(grad_out, idx, data_shape, axis,
                                                      mode).tobytes()


@given(cases(), st.integers(1, 3), st.lists(st.integers(0, 3), max_size=2))
def test_gather_nd_grad_is_the_formula_bit_for_bit(case, k, lead):
    data_shape, _, mode, dtype, rng = case
    k = min(k, len(data_shape))
    idx = np.stack([index_values(rng, mode, data_shape[j], tuple(lead)) for j in range(k)],
                   axis=-1).reshape(tuple(lead) + (k,))
    grad_out = values(rng, tuple(lead) + data_shape[k:], dtype)
    got = gs.grad.gather_nd(grad_out, idx, data_shape, mode=mode)
    assert got.tobytes() == reference_gather_nd(grad_out, idx, data_shape, mode).tobytes()


def test_take_along_axis_grad_sums_over_broadcast_dims_as_finite_differences_say():
    rng = np.random.default_rng(0)
    arr = rng.standard_normal((1, 4, 3))
    idx = rng.integers(-3, 3, (5, 4, 6))
    weights = rng.standard_normal((5, 4, 6))
    grad = gs.grad.take_along_axis(weights, idx, arr.shape, axis=2)
    for t in np.ndindex(*arr.shape):
        up, down = arr.copy(), arr.copy()
        up[t] += 0.5
        down[t] -= 0.5
        numeric = (np.sum(weights * gs.take_along_axis(up, idx, 2))
                   - np.sum(weights * gs.take_along_axis(down, idx, 2)))
        assert abs(numeric - grad[t]) <= 1e-9 * (1 + abs(grad[t]))


def test_take_grad_follows_numpys_clip_and_the_flattened_axis():
    grad = gs.grad.take(np.array([1.0, 2.0, 3.0]), np.array([0, 5, -1]), (2, 2), mode="clip")
    assert grad.tolist() == [[4.0, 0.0], [0.0, 2.0]]  # -1 clips to 0, as numpy's take


def test_gradients_with_heavy_duplicates_are_bit_identical_for_any_thread_count():
    rng = np.random.default_rng(1)
    grad_out = values(rng, (200_000, 16), np.float32)
    idx = rng.integers(-100, 100, 200_000)
    one = gs.grad.gather(grad_out, idx, (100, 16), threads=1)
    for threads in (2, 3, 5):
        assert gs.grad.gather(grad_out, idx, (100, 16), threads=threads).tobytes() == one.tobytes()
    elements = rng.integers(0, 100, (200_000, 16))
    one = gs.grad.gather_elements(grad_out, elements, (100, 16), threads=1)
    for threads in (2, 3, 5):
        got = gs.grad.gather_elements(grad_out, elements, (100, 16), threads=threads)
        assert got.tobytes() == one.tobytes()


def test_the_errors_are_the_forwards():
    with pytest.raises(gs.OutOfBoundsError) as forward:
        gs.gather(np.zeros((3, 2)), np.array([0, 3]))
    with pytest.raises(gs.OutOfBoundsError) as backward:
        gs.grad.gather(np.ones((2, 2)), np.array([0, 3]), (3, 2))
    assert str(backward.value) == str(forward.value)
    with pytest.raises(gs.ShapeError, match="grad_out has shape"):
        gs.grad.gather(np.ones(3), np.array([0, 1]), (4,))
    with pytest.raises(gs.DTypeError, match="grad_out has dtype int64"):
        gs.grad.gather(np.ones(2, np.int64), np.array([0, 1]), (4,))
    with pytest.raises(gs.AttributeValueError):
        gs.grad.gather(np.ones(2), np.array([0, 1]), (4,), mode="drop")


# -- against torch's autograd, when torch is installed


def torch_or_skip():
    return pytest.importorskip("torch")


CALLS = {
    "gather": ((6, 9), 5, lambda m, t, i: m.gather(t, 1, i)),
    "index_select": ((11,), 6, lambda m, t, i: m.index_select(t, 0, i)),
    "take_along_dim": ((1, 7), 5, lambda m, t, i: m.take_along_dim(t, i, 1)),
    "embedding": ((3, 4), 6, lambda m, t, i: m.embedding(i, t)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_torch_functions_give_torchs_values_and_gradients(name, dtype):
    torch = torch_or_skip()
    import gatherscatter.torch as gst

    rng = np.random.default_rng(2)
    shape, n, call = CALLS[name]
    x = rng.standard_normal((6, 5)).astype(dtype)
    i = torch.from_numpy(rng.integers(0, n, shape))  # duplicates: 11 picks of 6 rows, ...
    results = []
    for module in (torch.nn.functional if name == "embedding" else torch, gst):
        t = torch.from_numpy(x.copy()).requires_grad_()
        out = call(module, t, i)
        weight = torch.from_numpy(np.random.default_rng(3).standard_normal(out.shape).astype(dtype))
        (out * weight).sum().backward()
        results.append((out.detach().numpy(), t.grad.numpy()))
    (out_torch, grad_torch), (out_gs, grad_gs) = results
    assert np.array_equal(out_gs, out_torch)
    np.testing.assert_allclose(grad_gs, grad_torch, rtol=1e-5 if dtype == "float32" else 1e-12)


# -- the scatters' gradients

def distinct(rng, shape):
    """Values with gaps: no ties, and a finite-difference step keeps every winner."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.37 - n * 0.15).reshape(shape)


SCATTER_REDUCES = ["sum", "prod", "mean", "amax", "amin"]


@pytest.mark.parametrize("reduce", SCATTER_REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_grads_are_the_finite_differences(reduce, include_self):
    rng = np.random.default_rng(4)
    x = distinct(rng, (4, 3))
    index = rng.integers(-4, 4, (6, 3))
    src = distinct(np.random.default_rng(5), (7, 3)) + 100.0  # larger than index: torch's rule
    weights = rng.standard_normal(x.shape)

    def f(x, src):
        return np.sum(weights * gs.scatter_reduce(x, 0, index, src, reduce,
                                                  include_self=include_self))

    grad_x, grad_src = gs.grad.scatter_reduce(weights, x, 0, index, src, reduce,
                                              include_self=include_self)
    assert grad_src.shape == src.shape and not grad_src[6:].any()
    for base, analytic, which in ((x, grad_x, 0), (src, grad_src, 1)):
        for t in np.ndindex(*base.shape):
            up, down = base.copy(), base.copy()
            up[t] += 1e-3
            down[t] -= 1e-3
            args_up = (up, src) if which == 0 else (x, up)
            args_down = (down, src) if which == 0 else (x, down)
            numeric = (f(*args_up) - f(*args_down)) / 2e-3
            assert abs(numeric - analytic[t]) <= 1e-6 * (1 + abs(numeric)), (which, t)


def test_a_plain_scatter_gives_the_kept_duplicate_the_gradient():
    grad_data, grad_updates = gs.grad.scatter_elements(
        np.ones(3), np.zeros(3), np.array([2, 0, 2]), np.array([4.0, 5.0, 6.0]))
    assert grad_data.tolist() == [0.0, 1.0, 0.0] and grad_updates.tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("reduce", SCATTER_REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_grads_match_torch(reduce, include_self):
    torch = torch_or_skip()
    import gatherscatter.torch as gst

    rng = np.random.default_rng(6)
    x = distinct(rng, (5, 4))
    src = distinct(rng, (9, 4)) / 3.0 + 0.5  # no zeros: torch's prod backward divides
    index = torch.from_numpy(rng.integers(0, 5, (9, 4)))
    weight = torch.from_numpy(rng.standard_normal((5, 4)))
    results = []
    for fn in (torch.scatter_reduce, gst.scatter_reduce):
        a = torch.from_numpy(x.copy()).requires_grad_()
        b = torch.from_numpy(src.copy()).requires_grad_()
        out = fn(a, 0, index, b, reduce, include_self=include_self)
        (out * weight).sum().backward()
        results.append((out.detach().numpy(), a.grad.numpy(), b.grad.numpy()))
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_tied_maxima_split_the_gradient_as_torch_does():
    torch = torch_or_skip()
    import gatherscatter.torch as gst

    x = torch.tensor([3.0, 1.0], dtype=torch.float64)
    src = torch.tensor([3.0, 2.0, 3.0, 0.5], dtype=torch.float64)
    index = torch.tensor([0, 0, 0, 1])
    grads = []
    for fn in (torch.scatter_reduce, gst.scatter_reduce):
        a, b = x.clone().requires_grad_(), src.clone().requires_grad_()
        fn(a, 0, index, b, "amax").sum().backward()
        grads.append((a.grad.tolist(), b.grad.tolist()))
    assert grads[0] == grads[1] == ([1 / 3, 1.0], [1 / 3, 0.0, 1 / 3, 0.0])


def test_scatter_add_and_scatter_match_torch_where_torch_defines_the_same():
    torch = torch_or_skip()
    import gatherscatter.torch as gst

    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 3))
    src = rng.standard_normal((6, 3))
    unique = torch.from_numpy(np.stack([rng.permutation(6) for _ in range(3)], axis=1))
    dups = torch.from_numpy(rng.integers(0, 6, (6, 3)))
    cases = [("scatter_add", dups), ("scatter", unique)]
    for name, index in cases:
        results = []
        for fn in (getattr(torch, name), getattr(gst, name)):
            a = torch.from_numpy(x.copy()).requires_grad_()
            b = torch.from_numpy(src.copy()).requires_grad_()
            fn(a, 0, index, b).pow(2).sum().backward()
            results.append((a.grad.numpy(), b.grad.numpy()))
        for ours, theirs in zip(results[1], results[0]):
            np.testing.assert_allclose(ours, theirs, rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_grads_cut_the_written_window_out(mode):
    rng = np.random.default_rng(8)
    cache = rng.standard_normal((3, 2, 6, 4))
    update = rng.standard_normal((3, 2, 3, 4))
    at = np.array([0, 3, 5]) if mode == "circular" else np.array([0, 3, 2])
    grad_out = rng.standard_normal(cache.shape)
    grad_cache, grad_update = gs.grad.tensor_scatter(grad_out, cache, update, at, mode=mode)
    want_cache, want_update = grad_out.copy(), np.zeros(update.shape)
    for b in range(3):
        for s in range(3):
            position = (at[b] + s) % 6
            want_update[b, :, s] = grad_out[b, :, position]
            want_cache[b, :, position] = 0.0
    assert grad_cache.tobytes() == want_cache.tobytes()
    assert grad_update.tobytes() == want_update.tobytes()
