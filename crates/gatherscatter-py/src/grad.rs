//! The gradients (spec §2.17) for `gatherscatter.grad` and
//! `gatherscatter.torch`: each function takes the forward call's inputs and
//! attributes and `grad_out`, and returns the gradient arrays.

use std::str::FromStr;

use gatherscatter::{
    Aggregate, EmbeddingBag, Gather, GatherElements, GatherND, IndexPolicy, Op, ScatterElements,
    ScatterMode, ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, TensorScatter,
};
use pyo3::prelude::*;

use crate::arrays;
use crate::calls::{read, small, views_of, Runner};
use crate::errors::{self, to_py_err};

/// The gradient of a gather (``op``: ``"gather"``, ``"gather_elements"``
/// or ``"gather_nd"``) with respect to its data, of shape ``data_shape``,
/// given ``grad_out``: the core's scatter-add (spec §2.17). The functions
/// of ``gatherscatter.grad`` call it.
#[pyfunction]
#[pyo3(signature = (op, grad_out, indices, data_shape, axis=0, batch_dims=0, *, mode="raise", threads=None))]
#[allow(clippy::too_many_arguments)]
fn _gather_grad<'py>(
    py: Python<'py>,
    op: &str,
    grad_out: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data_shape: Vec<usize>,
    axis: i64,
    batch_dims: i64,
    mode: &str,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let op: Op = match op {
        "gather" => Gather::new(axis)
            .batch_dims(crate::calls::batch_dims(batch_dims)?)
            .into(),
        "gather_elements" => GatherElements::new(axis).into(),
        "gather_nd" => GatherND::new()
            .batch_dims(crate::calls::batch_dims(batch_dims)?)
            .into(),
        other => {
            return Err(errors::from_kind_now(
                "unsupported",
                &format!("no gradient is defined for {other:?}"),
            ))
        }
    };
    let policy = IndexPolicy::from_str(mode).map_err(to_py_err)?;
    let held = read(&[grad_out, indices], &["grad_out", "indices"])?;
    let views = views_of(&held)?;
    let data_bytes = data_shape
        .iter()
        .try_fold(16usize, |acc, &d| acc.checked_mul(d))
        .unwrap_or(usize::MAX);
    let runner = Runner::new(threads, small(&views, data_bytes))?;
    let tensor = runner
        .work(py, || policy.grad(&op, views[0], views[1], &data_shape))
        .map_err(to_py_err)?;
    arrays::result(py, tensor, None)
}

/// The gradients of a scatter (``op``: ``"scatter_elements"``,
/// ``"scatter_nd"`` or ``"scatter_reduce"``) with respect to ``data`` and
/// ``updates``, given ``grad_out`` (spec §2.17): a pair of arrays. The
/// functions of ``gatherscatter.grad`` call it.
#[pyfunction]
#[pyo3(signature = (op, data, indices, updates, grad_out, axis=0, reduction="none", include_self=true, *, mode="raise", threads=None))]
#[allow(clippy::too_many_arguments)]
fn _scatter_grad<'py>(
    py: Python<'py>,
    op: &str,
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    updates: &Bound<'py, PyAny>,
    grad_out: &Bound<'py, PyAny>,
    axis: i64,
    reduction: &str,
    include_self: bool,
    mode: &str,
    threads: Option<usize>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let op: Op = match op {
        "scatter_elements" => ScatterElements::new(axis)
            .reduction(crate::calls::reduction(reduction)?)
            .into(),
        "scatter_nd" => ScatterND::new()
            .reduction(crate::calls::reduction(reduction)?)
            .into(),
        "scatter_reduce" => {
            let reduce = Aggregate::from_str(reduction).map_err(to_py_err)?;
            ScatterReduce::new(axis, reduce)
                .include_self(include_self)
                .into()
        }
        other => {
            return Err(errors::from_kind_now(
                "unsupported",
                &format!("no scatter gradient is defined for {other:?}"),
            ))
        }
    };
    let policy = IndexPolicy::from_str(mode).map_err(to_py_err)?;
    let held = read(
        &[data, indices, updates, grad_out],
        &["data", "indices", "updates", "grad_out"],
    )?;
    let views = views_of(&held)?;
    let runner = Runner::new(threads, small(&views, arrays::bytes(&views[0])))?;
    let grads = runner
        .work(py, || {
            policy.scatter_grad(&op, views[0], views[1], views[2], views[3])
        })
        .map_err(to_py_err)?;
    Ok((
        arrays::result(py, grads.data, None)?,
        arrays::result(py, grads.updates, None)?,
    ))
}

/// The gradients of ``tensor_scatter`` with respect to ``past_cache`` and
/// ``update``, given ``grad_out``: a pair of arrays (spec §2.17).
#[pyfunction]
#[pyo3(signature = (grad_out, past_cache, update, write_indices=None, axis=-2, mode="linear", *, threads=None))]
#[allow(clippy::too_many_arguments)]
fn _tensor_scatter_grad<'py>(
    py: Python<'py>,
    grad_out: &Bound<'py, PyAny>,
    past_cache: &Bound<'py, PyAny>,
    update: &Bound<'py, PyAny>,
    write_indices: Option<&Bound<'py, PyAny>>,
    axis: i64,
    mode: &str,
    threads: Option<usize>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let op = TensorScatter::new()
        .axis(axis)
        .mode(ScatterMode::from_str(mode).map_err(to_py_err)?);
    let mut inputs = vec![past_cache, update, grad_out];
    let mut names = vec!["past_cache", "update", "grad_out"];
    if let Some(w) = write_indices {
        inputs.push(w);
        names.push("write_indices");
    }
    let held = read(&inputs, &names)?;
    let views = views_of(&held)?;
    let runner = Runner::new(threads, small(&views, arrays::bytes(&views[0])))?;
    let grads = runner
        .work(py, || {
            op.grad(views[0], views[1], views.get(3).copied(), views[2])
        })
        .map_err(to_py_err)?;
    Ok((
        arrays::result(py, grads.data, None)?,
        arrays::result(py, grads.updates, None)?,
    ))
}

/// The gradient of ``segment_csr`` (``op="segment_csr"``, ``boundaries`` the
/// indptr) or ``segment_coo`` (``boundaries`` the sorted index) with respect
/// to ``src``, given ``grad_out`` (spec §2.17).
#[pyfunction]
#[pyo3(signature = (op, src, boundaries, grad_out, reduce="sum", dim_size=None, *, threads=None))]
#[allow(clippy::too_many_arguments)]
fn _segment_grad<'py>(
    py: Python<'py>,
    op: &str,
    src: &Bound<'py, PyAny>,
    boundaries: &Bound<'py, PyAny>,
    grad_out: &Bound<'py, PyAny>,
    reduce: &str,
    dim_size: Option<usize>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let reduce = Aggregate::from_str(reduce).map_err(to_py_err)?;
    let held = read(
        &[src, boundaries, grad_out],
        &["src", "boundaries", "grad_out"],
    )?;
    let views = views_of(&held)?;
    let runner = Runner::new(threads, small(&views, arrays::bytes(&views[0])))?;
    let grad = match op {
        "segment_csr" => {
            let csr = SegmentCsr::new(reduce);
            runner.work(py, || csr.grad(views[0], views[1], views[2]))
        }
        "segment_coo" => {
            let coo = match dim_size {
                Some(count) => SegmentCoo::new(reduce).segments(count),
                None => SegmentCoo::new(reduce),
            };
            runner.work(py, || coo.grad(views[0], views[1], views[2]))
        }
        other => {
            return Err(errors::from_kind_now(
                "unsupported",
                &format!("no segment gradient is defined for {other:?}"),
            ))
        }
    };
    arrays::result(py, grad.map_err(to_py_err)?, None)
}

/// The gradients of ``embedding_bag`` with respect to ``weight`` and, when
/// given, ``per_sample_weights`` (else ``None``), given ``grad_out``; with
/// ``output`` (the forward's result) max and min do not run the forward again.
#[pyfunction]
#[pyo3(signature = (weight, indices, offsets, grad_out, mode="mean", per_sample_weights=None, include_last_offset=false, padding_idx=None, *, output=None, threads=None))]
#[allow(clippy::too_many_arguments)]
fn _embedding_bag_grad<'py>(
    py: Python<'py>,
    weight: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    offsets: Option<&Bound<'py, PyAny>>,
    grad_out: &Bound<'py, PyAny>,
    mode: &str,
    per_sample_weights: Option<&Bound<'py, PyAny>>,
    include_last_offset: bool,
    padding_idx: Option<i64>,
    output: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
    let mut op = EmbeddingBag::new(Aggregate::from_str(mode).map_err(to_py_err)?)
        .include_last_offset(include_last_offset);
    if let Some(row) = padding_idx {
        op = op.padding_idx(row);
    }
    let mut inputs = vec![weight, indices, grad_out];
    let mut names = vec!["weight", "indices", "grad_out"];
    for (given, name) in [
        (offsets, "offsets"),
        (per_sample_weights, "per_sample_weights"),
        (output, "output"),
    ] {
        if let Some(given) = given {
            inputs.push(given);
            names.push(name);
        }
    }
    let held = read(&inputs, &names)?;
    let views = views_of(&held)?;
    let named = |name: &str| names.iter().position(|n| *n == name).map(|k| views[k]);
    let (offsets, psw) = (named("offsets"), named("per_sample_weights"));
    let output = named("output");
    let runner = Runner::new(threads, small(&views, arrays::bytes(&views[0])))?;
    let grads = runner
        .work(py, || {
            op.grad_with_output(views[0], views[1], offsets, psw, output, views[2])
        })
        .map_err(to_py_err)?;
    let psw = match grads.per_sample_weights {
        Some(g) => Some(arrays::result(py, g, None)?),
        None => None,
    };
    Ok((arrays::result(py, grads.weight, None)?, psw))
}

/// Adds the gradient functions to the `_native` module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_gather_grad, m)?)?;
    m.add_function(wrap_pyfunction!(_scatter_grad, m)?)?;
    m.add_function(wrap_pyfunction!(_tensor_scatter_grad, m)?)?;
    m.add_function(wrap_pyfunction!(_segment_grad, m)?)?;
    m.add_function(wrap_pyfunction!(_embedding_bag_grad, m)?)?;
    Ok(())
}
