"""Every error kind of the core, as the right Python exception classes."""

import numpy as np
import pytest

import gatherscatter as gs


def raises(kind, builtin, call):
    with pytest.raises(gs.Error) as info:
        call()
    assert info.value.kind == kind
    assert isinstance(info.value, builtin)
    assert str(info.value)
    return info.value


def test_an_out_of_range_index_is_an_index_error_naming_it():
    e = raises("out_of_bounds", IndexError, lambda: gs.gather(np.arange(3), np.array([0, 3])))
    assert "3" in str(e)
    raises("out_of_bounds", IndexError, lambda: gs.take(np.arange(3), [-4]))
    raises("out_of_bounds", IndexError,
           lambda: gs.scatter_elements(np.zeros(3), np.array([5]), np.ones(1)))
    raises("out_of_bounds", IndexError, lambda: gs.gather_nd(np.zeros((2, 2)), np.array([[0, 2]])))


def test_a_bad_axis_is_a_value_error_and_an_index_error_as_numpys():
    e = raises("bad_axis", ValueError, lambda: gs.gather(np.zeros((2, 2)), np.array([0]), axis=2))
    assert isinstance(e, IndexError)


def test_shape_and_rank_problems_are_value_errors():
    raises("rank_mismatch", ValueError,
           lambda: gs.gather_elements(np.zeros((2, 2)), np.zeros(2, np.int64)))
    raises("shape_mismatch", ValueError,
           lambda: gs.scatter_elements(np.zeros(3), np.array([0, 1]), np.ones(3)))
    raises("shape_mismatch", ValueError,
           lambda: gs.gather(np.zeros((3, 2)), np.array([0]), out=np.zeros((2, 2))))


def test_dtype_problems_are_type_errors():
    raises("bad_dtype", TypeError, lambda: gs.gather(np.zeros(3), np.array([0.0])))
    raises("bad_dtype", TypeError,
           lambda: gs.gather(np.zeros(3), np.array([0]), out=np.zeros(1, np.float32)))
    raises("bad_dtype", TypeError,
           lambda: gs.scatter_elements(np.zeros(3), np.array([0]), np.ones(1, np.float32)))
    with pytest.raises(TypeError, match="does not take"):
        gs.gather(np.zeros(3, np.longdouble), np.array([0]))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        gs.gather(np.zeros(3), np.array([0]), out=[0.0])


def test_attribute_and_reduction_problems_are_value_errors():
    raises("bad_attribute", ValueError, lambda: gs.gather(np.zeros(3), np.array([0]), profile="onnx:x"))
    raises("bad_attribute", ValueError, lambda: gs.gather_nd(np.zeros(3), np.zeros((1, 1), np.int64),
                                                            batch_dims=-1))
    raises("bad_attribute", ValueError,
           lambda: gs.tensor_scatter(np.zeros((1, 2)), np.zeros((1, 1)), mode="spiral"))
    raises("bad_reduction", ValueError,
           lambda: gs.scatter_nd(np.zeros(2), np.zeros((1, 1), np.int64), np.ones(1), "mean"))
    raises("bad_reduction", ValueError,
           lambda: gs.scatter_nd(np.zeros(2, np.complex64), np.zeros((1, 1), np.int64),
                                 np.ones(1, np.complex64), "max"))


def test_an_operator_outside_the_profile_is_unsupported():
    raises("unsupported", ValueError,
           lambda: gs.scatter_elements(np.zeros((2, 2)), np.zeros((1, 1), np.int64),
                                       np.zeros((1, 1)), profile="mindspore"))


def test_a_failed_gather_leaves_out_as_it_was():
    out = np.full(2, 7.0)
    with pytest.raises(IndexError):
        gs.gather(np.arange(3.0), np.array([0, 9]), out=out)
    np.testing.assert_array_equal(out, [7.0, 7.0])


def test_a_failed_in_place_scatter_leaves_the_array_as_it_was():
    a = np.zeros(3)
    with pytest.raises(IndexError):
        gs.add_at(a, [0, 1, 3], 1.0)
    np.testing.assert_array_equal(a, np.zeros(3))
    b = np.zeros((2, 2))
    with pytest.raises(IndexError):
        gs.put_along_axis(b, np.array([[0], [2]]), 5.0, axis=1)
    np.testing.assert_array_equal(b, np.zeros((2, 2)))


def test_out_must_be_writeable_contiguous_and_apart_from_the_inputs():
    data = np.arange(4.0)
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="cannot be written"):
        gs.gather(data, np.array([0, 1]), out=frozen)
    with pytest.raises(ValueError, match="C-contiguous"):
        gs.gather(data, np.array([0, 1]), out=np.zeros(4)[::2])
    with pytest.raises(ValueError, match="share memory"):
        gs.gather(data, np.array([0, 1, 2, 3]), out=data)


def test_the_base_class_catches_everything_and_numpy_builtins_still_work():
    for call in (lambda: gs.take(np.arange(2), [5]),
                 lambda: gs.gather(np.zeros(2), np.array([0.5]))):
        with pytest.raises(gs.Error):
            call()
