"""Every example in the package's docstrings runs and prints what it shows,
the native functions' (written in Rust) included, and every operator has one."""

import doctest
import importlib

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


def module_functions():
    """The functions of the submodules: grad, and torch and dask when installed."""
    found = [(f"grad.{name}", getattr(gs.grad, name)) for name in gs.grad.__all__]
    for module in ("dask", "torch"):
        try:
            imported = importlib.import_module(f"gatherscatter.{module}")
        except ImportError:  # optional dependencies
            continue
        found += [(f"{module}.{name}", getattr(imported, name)) for name in imported.__all__]
    return found


@pytest.mark.parametrize("name,function", module_functions())
def test_submodule_docstring_examples_run(name, function):
    assert ">>> " in (function.__doc__ or ""), name
    test_docstring_examples_run(name, function)


@pytest.mark.parametrize("name", OPERATORS)
def test_every_operator_has_an_example(name):
    assert ">>> " in (getattr(gs, name).__doc__ or ""), name
