"""Every example in the package's docstrings runs and prints what it shows,
the native functions' (written in Rust) included, and every operator has one."""

import doctest

import numpy as np
import pytest

import gatherscatter as gs
from gatherscatter import _native

OPERATORS = ["gather", "gather_elements", "scatter_elements", "gather_nd", "scatter_nd",
             "tensor_scatter", "scatter_reduce", "segment_csr", "segment_coo"]


def documented():
    functions = {name: getattr(gs, name) for name in gs.__all__
                 if callable(getattr(gs, name)) and not isinstance(getattr(gs, name), type)}
    # The native functions the package wraps keep their own (Rust) docstrings.
    functions.update({name: getattr(_native, name) for name in dir(_native)
                      if name.startswith("_s") and callable(getattr(_native, name))})
    return sorted(functions.items())


@pytest.mark.parametrize("name,function", documented())
def test_docstring_examples_run(name, function):
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(function, name, globs={"np": np, "gs": gs}):
        runner.run(test)
    assert runner.failures == 0, f"{name}: {runner.failures} failing example(s)"


def dask_functions():
    try:
        import gatherscatter.dask as gsd
    except ImportError:  # dask is optional
        return []
    return [(f"dask.{name}", getattr(gsd, name)) for name in gsd.__all__]


@pytest.mark.parametrize("name,function", dask_functions())
def test_dask_docstring_examples_run(name, function):
    test_docstring_examples_run(name, function)


@pytest.mark.parametrize("name", OPERATORS)
def test_every_operator_has_an_example(name):
    assert ">>> " in (getattr(gs, name).__doc__ or ""), name
