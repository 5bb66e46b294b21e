//! The core's errors as Python exceptions of `gatherscatter._errors`:
//! one class per error kind, each a `gatherscatter.Error` (with `.kind`) and
//! the builtin a numpy user expects (`IndexError` for out-of-range indices,
//! `ValueError` for shapes and attributes, `TypeError` for dtypes).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// The exception for a core error, carrying its kind and message.
pub(crate) fn to_py_err(err: gatherscatter::Error) -> PyErr {
    Python::attach(|py| from_kind(py, err.kind().as_str(), &err.to_string()))
}

/// The exception of `kind` (a core `ErrorKind` name) with `message`.
pub(crate) fn from_kind(py: Python<'_>, kind: &str, message: &str) -> PyErr {
    static FACTORY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let exception = FACTORY
        .get_or_try_init(py, || {
            py.import("gatherscatter._errors")
                .and_then(|m| m.getattr("_from_kind"))
                .map(Bound::unbind)
        })
        .and_then(|factory| factory.bind(py).call1((kind, message)));
    match exception {
        Ok(exception) => PyErr::from_value(exception),
        Err(failed) => failed,
    }
}

/// [`from_kind`] for code that does not hold a `Python` token.
pub(crate) fn from_kind_now(kind: &str, message: &str) -> PyErr {
    Python::attach(|py| from_kind(py, kind, message))
}
