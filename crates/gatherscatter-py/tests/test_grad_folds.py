"""gatherscatter.grad and gatherscatter.torch for the folds over groups of
rows: segment_csr, segment_coo and embedding_bag. Their sums against
numpy's np.add.at bit for bit; every reduction against torch's autograd
(torch.segment_reduce, torch.nn.functional.embedding_bag) when torch is
installed; thread counts; errors."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gatherscatter as gs

REDUCES = ["sum", "mean", "max", "min", "prod"]


def distinct(rng, shape, offset=0.0):
    """Values with gaps of 0.37 and no zero: no ties, no zero factors."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.37 - n * 0.15 + 0.05 + offset).reshape(shape)


@st.composite
def segment_cases(draw):
    lengths = draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))
    inner = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    return np.array(lengths), inner, np.random.default_rng(seed)


@st.composite
def bag_cases(draw):
    rows = draw(st.integers(1, 6))
    dim = draw(st.integers(1, 3))
    bag_sizes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))
    seed = draw(st.integers(0, 2**32 - 1))
    padding = draw(st.one_of(st.none(), st.integers(0, rows - 1)))
    include_last_offset = draw(st.booleans())
    return rows, dim, np.array(bag_sizes), padding, include_last_offset, \
        np.random.default_rng(seed)


def bag_inputs(rows, dim, sizes, include_last_offset, rng):
    indices = rng.integers(0, rows, int(sizes.sum()))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    offsets = starts if include_last_offset else starts[:-1]
    return distinct(rng, (rows, dim)), indices, offsets


# -- sums against numpy, bit for bit


@given(segment_cases())
def test_a_segment_sum_grad_repeats_grad_out_over_its_rows(case):
    lengths, inner, rng = case
    src = rng.standard_normal((int(lengths.sum()), inner))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    grad_out = rng.standard_normal((len(lengths), inner))
    want = np.repeat(grad_out, lengths, axis=0)
    assert gs.grad.segment_csr(grad_out, src, indptr).tobytes() == want.tobytes()
    index = np.repeat(np.arange(len(lengths)), lengths)
    got = gs.grad.segment_coo(grad_out, src, index, dim_size=len(lengths))
    assert got.tobytes() == want.tobytes()


@given(bag_cases(), st.booleans())
def test_an_embedding_bag_sum_grad_is_np_add_at_bit_for_bit(case, weighted):
    rows, dim, sizes, padding, include_last_offset, rng = case
    weight, indices, offsets = bag_inputs(rows, dim, sizes, include_last_offset, rng)
    grad_out = rng.standard_normal((len(sizes), dim)) * 10.0 ** rng.integers(-3, 4, (len(sizes), 1))
    psw = rng.standard_normal(len(indices)) if weighted else None
    bag = np.repeat(np.arange(len(sizes)), sizes)
    scale = psw if weighted else np.ones(len(indices))
    keep = indices != padding if padding is not None else np.ones(len(indices), bool)
    want = np.zeros_like(weight)
    np.add.at(want, indices[keep], grad_out[bag[keep]] * scale[keep, None])
    grad_weight, grad_psw = gs.grad.embedding_bag(grad_out, weight, indices, offsets, "sum", psw,
                                                  include_last_offset, padding)
    assert grad_weight.tobytes() == want.tobytes()
    if weighted:
        want_psw = np.where(keep, np.einsum("ij,ij->i", grad_out[bag], weight[indices]), 0.0)
        np.testing.assert_allclose(grad_psw, want_psw, rtol=1e-12, atol=1e-12)
    else:
        assert grad_psw is None


def test_fold_gradients_are_bit_identical_for_any_thread_count():
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((3000, 32)).astype(np.float32)
    indices = rng.integers(0, 3000, 200_000)
    offsets = np.sort(rng.integers(0, 200_000, 8000))
    offsets[0] = 0
    grad_out = rng.standard_normal((8000, 32)).astype(np.float32)
    src = rng.standard_normal((200_000, 4)).astype(np.float32)
    indptr = np.sort(rng.integers(0, 200_001, 8001))
    for mode in ["sum", "mean", "max", "prod"]:
        results = [(gs.grad.embedding_bag(grad_out, weight, indices, offsets, mode,
                                          threads=t)[0].tobytes(),
                    gs.grad.segment_csr(grad_out[:, :4], src, indptr, mode, threads=t).tobytes())
                   for t in (1, 2, 3)]
        assert results[0] == results[1] == results[2], mode


def test_fold_gradient_errors_are_the_forwards_or_name_grad_out():
    src = np.arange(3.0)
    with pytest.raises(gs.SegmentError) as bad:
        gs.grad.segment_csr(np.ones(2), src, np.array([0, 2, 1]))
    with pytest.raises(gs.SegmentError) as forward:
        gs.segment_csr(src, np.array([0, 2, 1]))
    assert str(bad.value) == str(forward.value)
    with pytest.raises(ValueError, match="grad_out has shape"):
        gs.grad.segment_coo(np.ones(3), src, np.array([0, 0, 1]))
    with pytest.raises(TypeError):
        gs.grad.segment_csr(np.ones(2, np.int32), src.astype(np.int32), np.array([0, 1, 3]))
    with pytest.raises(IndexError):
        gs.grad.embedding_bag(np.ones((1, 1)), np.ones((2, 1)), np.array([0, 2]), np.array([0]))
    with pytest.raises(ValueError, match="per_sample_weights are only defined for mode sum"):
        gs.grad.embedding_bag(np.ones((1, 1)), np.ones((2, 1)), np.array([0, 1]), np.array([0]),
                              "mean", np.ones(2))


# -- against torch's autograd, when torch is installed


def torch_or_skip():
    return pytest.importorskip("torch")


@settings(max_examples=60, deadline=None)
@given(segment_cases(), st.sampled_from(REDUCES))
def test_segment_grads_match_torch_segment_reduce(case, reduce):
    torch = torch_or_skip()
    import gatherscatter.torch as gst

    lengths, inner, rng = case
    src = distinct(rng, (int(lengths.sum()), inner))
    indptr = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]))
    weight = torch.from_numpy(rng.standard_normal((len(lengths), inner)))
    grads = []
    for ours in (False, True):
        s = torch.from_numpy(src.copy()).requires_grad_()
        if ours:
            out = gst.segment_csr(s, indptr, reduce)
        else:
            out = torch.segment_reduce(s, reduce, lengths=torch.from_numpy(lengths), axis=0)
        # Empty segments: torch writes the identity (NaN for mean), this library 0.
        out = torch.where(torch.from_numpy(lengths > 0)[:, None], out, torch.zeros(()))
        (out * weight).sum().backward()
        grads.append((out.detach().numpy(), s.grad.numpy()))
    for ours, theirs in zip(grads[1], grads[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    index = torch.from_numpy(np.repeat(np.arange(len(lengths)), lengths))
    s = torch.from_numpy(src.copy()).requires_grad_()
    (gst.segment_coo(s, index, len(lengths), reduce) * weight).sum().backward()
    np.testing.assert_array_equal(s.grad.numpy(), grads[1][1])


@settings(max_examples=100, deadline=None)
@given(bag_cases(), st.sampled_from(["sum", "mean", "max"]), st.booleans())
def test_embedding_bag_grads_match_torch(case, mode, weighted):
    torch = torch_or_skip()
    import gatherscatter.torch as gst

    rows, dim, sizes, padding, include_last_offset, rng = case
    weighted = weighted and mode == "sum"
    weight, indices, offsets = bag_inputs(rows, dim, sizes, include_last_offset, rng)
    psw = rng.standard_normal(len(indices)) if weighted else None
    grad_out = torch.from_numpy(rng.standard_normal((len(sizes), dim)))
    results = []
    for fn in (torch.nn.functional.embedding_bag, gst.embedding_bag):
        w = torch.from_numpy(weight.copy()).requires_grad_()
        p = torch.from_numpy(psw.copy()).requires_grad_() if weighted else None
        out = fn(torch.from_numpy(indices), w, torch.from_numpy(offsets), mode=mode,
                 per_sample_weights=p, include_last_offset=include_last_offset,
                 padding_idx=padding)
        (out * grad_out).sum().backward()
        results.append((out.detach().numpy(), w.grad.numpy(),
                        p.grad.numpy() if weighted else None))
    for ours, theirs in zip(results[1], results[0]):
        if theirs is None:
            assert ours is None
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_a_bag_max_tie_splits_where_torch_picks_one_row():
    torch = torch_or_skip()
    import gatherscatter.torch as gst

    weight = torch.tensor([[5.0], [5.0]], dtype=torch.float64)
    indices, offsets = torch.tensor([0, 1]), torch.tensor([0])
    grads = []
    for fn in (torch.nn.functional.embedding_bag, gst.embedding_bag):
        w = weight.clone().requires_grad_()
        fn(indices, w, offsets, mode="max").sum().backward()
        grads.append(sorted(w.grad.flatten().tolist()))
    assert grads[0] == [0.0, 1.0]  # torch: all to the row it reports
    assert grads[1] == [0.5, 0.5]  # this library: split evenly, as for scatter_reduce


@settings(max_examples=100, deadline=None)
@given(bag_cases(), st.sampled_from(["max", "min", "sum", "mean"]))
def test_embedding_bag_grads_given_the_forwards_output_are_the_same(case, mode):
    rows, dim, sizes, padding, include_last_offset, rng = case
    weight, indices, offsets = bag_inputs(rows, dim, sizes, include_last_offset, rng)
    # Rounded values, so that bags often tie.
    weight = np.round(weight)
    grad_out = rng.standard_normal((len(sizes), dim))
    out = gs.embedding_bag(weight, indices, offsets, mode, None, include_last_offset, padding)
    args = (grad_out, weight, indices, offsets, mode, None, include_last_offset, padding)
    plain = gs.grad.embedding_bag(*args)[0]
    given = gs.grad.embedding_bag(*args, output=out)[0]
    assert given.tobytes() == plain.tobytes()


def test_embedding_bag_output_of_another_shape_or_dtype_is_refused():
    weight = np.array([[1.0], [2.0]])
    indices, offsets, grad_out = np.array([0, 1]), np.array([0]), np.ones((1, 1))
    with pytest.raises(gs.ShapeError, match="output has shape"):
        gs.grad.embedding_bag(grad_out, weight, indices, offsets, "max",
                              output=np.ones((2, 1)))
    with pytest.raises(gs.DTypeError):
        gs.grad.embedding_bag(grad_out, weight, indices, offsets, "max",
                              output=np.ones((1, 1), np.float32))


def test_a_bag_max_changed_in_place_before_its_backward_is_refused():
    torch = torch_or_skip()
    import gatherscatter.torch as gst

    w = torch.tensor([[1.0], [2.0]], requires_grad=True)
    out = gst.embedding_bag(torch.tensor([0, 1]), w, torch.tensor([0]), mode="max")
    out.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
