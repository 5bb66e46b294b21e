//! One Python function per operator: the keywords each takes, turned
//! into the core's op and run through [`crate::calls`].

use std::str::FromStr;

use gatherscatter::{
    Aggregate, EmbeddingBag, Gather, GatherElements, GatherND, ScatterElements, ScatterMode,
    ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, TensorScatter,
};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays;
use crate::calls::{
    batch_dims, policy, profile, reduction, run, run_function, run_policy, run_with_arg, small,
    value, Runner,
};
use crate::errors::to_py_err;

/// PyTorch's ``index_select``: the slices of ``data`` at the 1-D ``index``
/// along ``dim``. The package's ``index_select`` wraps this.
#[pyfunction]
#[pyo3(signature = (data, dim, index, *, threads=None))]
pub(crate) fn _index_select<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    run_function(py, &["data", "index"], &[data, index], threads, |v| {
        gatherscatter::index_select(v[0], dim, v[1])
    })
}

/// PyTorch's ``index_add`` (``alpha`` 1) and ``index_copy`` (``add``
/// false): a copy of ``data`` with ``source``'s slices combined in at
/// ``index`` along ``dim``. The package's functions wrap this.
#[pyfunction]
#[pyo3(signature = (data, dim, index, source, add, *, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _index_scatter<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    add: bool,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let names = ["data", "index", "source"];
    run_function(py, &names, &[data, index, source], threads, |v| {
        if add {
            gatherscatter::index_add(v[0], dim, v[1], v[2])
        } else {
            gatherscatter::index_copy(v[0], dim, v[1], v[2])
        }
    })
}

/// ONNX Gather: ``out[a..., j..., b...] = data[a..., indices[j...], b...]``
/// with ``a`` the dims before ``axis``.
///
/// Negative indices count from the end of ``axis``; any integer dtype may
/// index (int8-64, uint8-64). ``batch_dims`` leading dims of ``data`` and
/// ``indices`` are matched pairwise. Every index is checked before anything
/// is written: an out-of-range index raises ``OutOfBoundsError`` (an
/// ``IndexError``) and ``out`` is left as it was. ``profile`` checks the call
/// against a contract: ``"onnx:13"``, ``"directml:3.0"``, ``"mindspore"``.
/// ``mode`` changes what an out-of-range index does (JAX's modes):
/// ``"clip"`` (negatives count from the end, then clamp), ``"wrap"``
/// (modulo), ``"fill"`` (its slice is ``fill_value``; default NaN, the most
/// negative integer, ...).
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.gather(np.array([10, 20, 30]), np.array([0, 5]), mode="fill", fill_value=-1)
/// array([10, -1])
/// >>> gs.gather(np.array([[1, 2], [3, 4], [5, 6]]), np.array([2, -3]))
/// array([[5, 6],
///        [1, 2]])
#[pyfunction]
#[pyo3(signature = (data, indices, axis=0, batch_dims=0, *, mode="raise", fill_value=None, profile=None, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    axis: i64,
    batch_dims: i64,
    mode: &str,
    fill_value: Option<&Bound<'py, PyAny>>,
    profile: Option<&str>,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = Gather::new(axis)
        .batch_dims(self::batch_dims(batch_dims)?)
        .profile(self::profile(profile)?);
    let policy = policy(py, mode, fill_value, data)?;
    run_policy(py, op.into(), &[data, indices], out, threads, &policy)
}

/// ``numpy.take``: elements of ``a`` at ``indices`` along ``axis``
/// (of the flattened ``a`` when ``axis`` is None).
///
/// ``mode="raise"`` (the default) raises ``OutOfBoundsError``, an
/// ``IndexError``, for an index outside ``[-n, n)``; ``"wrap"`` takes indices
/// modulo ``n``; ``"clip"`` clips them to ``[0, n - 1]`` (negative indices
/// clip to 0, as numpy's; ``gather(mode="clip")`` counts them from the end
/// first, as JAX); ``"fill"`` (JAX's) gives ``fill_value`` (default: NaN,
/// the most negative integer, ...) where an index is out of range. An empty
/// axis has nothing to wrap or clip to: ``OutOfBoundsError``. A 0-d result
/// is returned as a numpy scalar, as numpy does.
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.take(np.array([4, 3, 5, 7, 6, 8]), [0, 1, 4])
/// array([4, 3, 6])
/// >>> gs.take(np.array([4, 3, 5]), [-1, 5], mode="clip")
/// array([4, 5])
/// >>> gs.take(np.array([[1, 2], [3, 4]]), np.array(1), axis=1)
/// array([2, 4])
#[pyfunction]
#[pyo3(signature = (a, indices, axis=None, out=None, mode="raise", *, fill_value=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn take<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    axis: Option<i64>,
    out: Option<&Bound<'py, PyAny>>,
    mode: &str,
    fill_value: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let integer_array = indices
        .cast::<PyUntypedArray>()
        .is_ok_and(|i| matches!(i.dtype().kind(), b'i' | b'u'));
    match axis {
        // The common call runs here: a Python function in front of the
        // kernel cost a tiny take 0.27 us, more than numpy's whole call.
        Some(axis) if mode == "raise" && fill_value.is_none() && integer_array => {
            let result = run(py, Gather::new(axis).into(), &[a, indices], out, threads)?;
            match out {
                None if result.cast::<PyUntypedArray>()?.ndim() == 0 => result.get_item(()),
                _ => Ok(result),
            }
        }
        // Flattening, numpy's clip and list indices: the package's Python.
        _ => {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("fill_value", fill_value)?;
            kwargs.set_item("threads", threads)?;
            py.import(pyo3::intern!(py, "gatherscatter._numpy"))?
                .getattr(pyo3::intern!(py, "take_general"))?
                .call((a, indices, axis, out, mode), Some(&kwargs))
        }
    }
}

/// ONNX GatherElements: ``out[p] = data[p with p[axis] := indices[p]]``;
/// ``out`` has the shape of ``indices``.
///
/// ``indices`` has ``data``'s rank; off ``axis`` its dims are at most
/// ``data``'s. Negative indices count from the end. An out-of-range index
/// raises ``OutOfBoundsError`` (an ``IndexError``); ``out`` is left as it was.
/// ``mode="clip"``, ``"wrap"`` or ``"fill"`` (with ``fill_value``) change
/// that, as for ``gather``.
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.gather_elements(np.array([[1, 2], [3, 4]]), np.array([[0, 0], [1, 0]]), axis=1)
/// array([[1, 1],
///        [4, 3]])
#[pyfunction]
#[pyo3(signature = (data, indices, axis=0, *, mode="raise", fill_value=None, profile=None, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_elements<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    axis: i64,
    mode: &str,
    fill_value: Option<&Bound<'py, PyAny>>,
    profile: Option<&str>,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = GatherElements::new(axis).profile(self::profile(profile)?);
    let policy = policy(py, mode, fill_value, data)?;
    run_policy(py, op.into(), &[data, indices], out, threads, &policy)
}

/// ONNX ScatterElements: ``out = data.copy()``; then for each position ``p``
/// of ``indices`` in row-major order,
/// ``out[p with p[axis] := indices[p]] = f(out[...], updates[p])``.
///
/// ``reduction`` is ``"none"`` (overwrite), ``"add"``, ``"mul"``, ``"max"`` or
/// ``"min"``. Duplicates: with ``"none"`` the last update in row-major order
/// wins; reductions apply in row-major order, so results are the same on any
/// thread count, run after run. ``data`` is never written. On an
/// out-of-range index an ``OutOfBoundsError`` is raised; a caller's ``out``
/// may then be partly written (indices are checked as they are applied).
/// ``mode="drop"`` (JAX's) skips the updates whose index is out of range;
/// ``"clip"`` and ``"wrap"`` move them into range.
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.scatter_elements(np.zeros(3), np.array([0, 7]), np.array([1., 2.]), mode="drop")
/// array([1., 0., 0.])
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.scatter_elements(np.zeros(3), np.array([0, 0, 2]), np.array([1., 2., 3.]), reduction="add")
/// array([3., 0., 3.])
#[pyfunction]
#[pyo3(signature = (data, indices, updates, axis=0, reduction="none", *, mode="raise", profile=None, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_elements<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    updates: &Bound<'py, PyAny>,
    axis: i64,
    reduction: &str,
    mode: &str,
    profile: Option<&str>,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = ScatterElements::new(axis)
        .reduction(self::reduction(reduction)?)
        .profile(self::profile(profile)?);
    let policy = policy(py, mode, None, data)?;
    run_policy(
        py,
        op.into(),
        &[data, indices, updates],
        out,
        threads,
        &policy,
    )
}

/// PyTorch's ``scatter_reduce`` on arrays: ``out = data.copy()``; every
/// target ``t = p with p[axis] := indices[p]`` aggregates the updates aimed
/// at it (and ``data[t]`` when ``include_self``) with ``reduce``: ``"sum"``,
/// ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``. Targets no update
/// reaches keep ``data``'s value.
///
/// ``updates`` has the shape of ``indices`` (``scatter_reduce`` in the
/// package also takes PyTorch's larger ``src``). ``mean`` divides by the
/// number of values aggregated; integers round down (floor division, as
/// PyTorch). Duplicates apply in row-major order on any thread count, so
/// results are bit-identical run after run. Negative indices count from the
/// end. An out-of-range index raises ``OutOfBoundsError``; a caller's ``out``
/// may then be partly written.
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.scatter_reduce(np.zeros(3), 0, np.array([0, 0, 2]), np.array([1., 2., 3.]), "mean", include_self=False)
/// array([1.5, 0. , 3. ])
#[pyfunction]
#[pyo3(signature = (data, indices, updates, axis=0, reduce="sum", *, include_self=true, mode="raise", out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _scatter_reduce<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    updates: &Bound<'py, PyAny>,
    axis: i64,
    reduce: &str,
    include_self: bool,
    mode: &str,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let reduce = Aggregate::from_str(reduce).map_err(to_py_err)?;
    let op = ScatterReduce::new(axis, reduce).include_self(include_self);
    let policy = policy(py, mode, None, data)?;
    run_policy(
        py,
        op.into(),
        &[data, indices, updates],
        out,
        threads,
        &policy,
    )
}

/// pytorch_scatter's ``segment_csr``: ``src`` reduced over row ranges along
/// axis ``indptr.ndim - 1``; segment ``s`` is rows ``indptr[..., s]`` to
/// ``indptr[..., s + 1]``. The package's ``segment_csr`` wraps this.
#[pyfunction]
#[pyo3(signature = (src, indptr, reduce="sum", fill=None, return_arg=false, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _segment_csr<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    indptr: &Bound<'py, PyAny>,
    reduce: &str,
    fill: Option<&Bound<'py, PyAny>>,
    return_arg: bool,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut op = SegmentCsr::new(Aggregate::from_str(reduce).map_err(to_py_err)?);
    if let Some(fill) = fill {
        op = op.fill(value(fill, "fill")?);
    }
    if return_arg {
        return run_with_arg(py, &op.into(), &[src, indptr], out, threads);
    }
    run(py, op.into(), &[src, indptr], out, threads)
}

/// pytorch_scatter's ``segment_coo``: ``src`` reduced over the rows sharing
/// a sorted segment id along axis ``index.ndim - 1``. The package's
/// ``segment_coo`` wraps this.
#[pyfunction]
#[pyo3(signature = (src, index, reduce="sum", dim_size=None, fill=None, return_arg=false, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _segment_coo<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    index: &Bound<'py, PyAny>,
    reduce: &str,
    dim_size: Option<usize>,
    fill: Option<&Bound<'py, PyAny>>,
    return_arg: bool,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut op = SegmentCoo::new(Aggregate::from_str(reduce).map_err(to_py_err)?);
    if let Some(count) = dim_size {
        op = op.segments(count);
    }
    if let Some(fill) = fill {
        op = op.fill(value(fill, "fill")?);
    }
    if return_arg {
        return run_with_arg(py, &op.into(), &[src, index], out, threads);
    }
    run(py, op.into(), &[src, index], out, threads)
}

/// PyTorch's ``embedding_bag`` with 1-D ``indices`` and ``offsets`` (the
/// package's ``embedding_bag`` turns 2-D bags into that form and wraps
/// this).
#[pyfunction]
#[pyo3(signature = (weight, indices, offsets, mode="mean", per_sample_weights=None, include_last_offset=false, padding_idx=None, fill=None, return_arg=false, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _embedding_bag<'py>(
    py: Python<'py>,
    weight: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    mode: &str,
    per_sample_weights: Option<&Bound<'py, PyAny>>,
    include_last_offset: bool,
    padding_idx: Option<i64>,
    fill: Option<&Bound<'py, PyAny>>,
    return_arg: bool,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut op = EmbeddingBag::new(Aggregate::from_str(mode).map_err(to_py_err)?)
        .include_last_offset(include_last_offset);
    if let Some(row) = padding_idx {
        op = op.padding_idx(row);
    }
    if let Some(fill) = fill {
        op = op.fill(value(fill, "fill")?);
    }
    let mut inputs = vec![weight, indices, offsets];
    inputs.extend(per_sample_weights);
    if return_arg {
        return run_with_arg(py, &op.into(), &inputs, out, threads);
    }
    run(py, op.into(), &inputs, out, threads)
}

/// ONNX GatherND: each index tuple ``indices[b..., j..., :]`` (its last dim
/// ``k`` long) selects ``data[b..., t_0, ..., t_(k-1)]``, a slice of the dims
/// after the tuple; ``out.shape = indices.shape[:-1] + data.shape[batch_dims + k:]``.
///
/// Negative tuple entries count from the end of their dim; out-of-range
/// tuples raise ``OutOfBoundsError`` before anything is written, or with
/// ``mode="clip"``/``"wrap"`` are moved into range per entry, or with
/// ``mode="fill"`` give ``fill_value`` for their whole slice.
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.gather_nd(np.array([[0, 1], [2, 3]]), np.array([[1, 0], [0, 1]]))
/// array([2, 1])
#[pyfunction]
#[pyo3(signature = (data, indices, batch_dims=0, *, mode="raise", fill_value=None, profile=None, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_nd<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    batch_dims: i64,
    mode: &str,
    fill_value: Option<&Bound<'py, PyAny>>,
    profile: Option<&str>,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = GatherND::new()
        .batch_dims(self::batch_dims(batch_dims)?)
        .profile(self::profile(profile)?);
    let policy = policy(py, mode, fill_value, data)?;
    run_policy(py, op.into(), &[data, indices], out, threads, &policy)
}

/// ONNX ScatterND: ``out = data.copy()``; then for each tuple
/// ``indices[j..., :]`` in row-major order,
/// ``out[tuple] = f(out[tuple], updates[j...])`` (a slice when the tuple is
/// shorter than ``data``'s rank).
///
/// ``updates.shape == indices.shape[:-1] + data.shape[k:]``. Duplicates
/// resolve in row-major order under every reduction (``"none"``: the last
/// wins), so results never depend on threads. Every tuple is checked before
/// anything is written; ``mode="drop"`` skips a tuple with an entry out of
/// range, ``"clip"``/``"wrap"`` move its entries into range.
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.scatter_nd(np.zeros(4, np.int32), np.array([[1], [1], [3]]), np.array([5, 6, 7], np.int32), reduction="add")
/// array([ 0, 11,  0,  7], dtype=int32)
#[pyfunction]
#[pyo3(signature = (data, indices, updates, reduction="none", *, mode="raise", profile=None, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_nd<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    updates: &Bound<'py, PyAny>,
    reduction: &str,
    mode: &str,
    profile: Option<&str>,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = ScatterND::new()
        .reduction(self::reduction(reduction)?)
        .profile(self::profile(profile)?);
    let policy = policy(py, mode, None, data)?;
    run_policy(
        py,
        op.into(),
        &[data, indices, updates],
        out,
        threads,
        &policy,
    )
}

/// ScatterND applied to ``data`` where it lies (no copy of ``data``): the
/// engine of ``add_at`` and its siblings. Every tuple is checked first; on an
/// error ``data`` is unchanged. Updates apply on the calling thread in
/// row-major order.
#[pyfunction]
#[pyo3(signature = (data, indices, updates, reduction="none"))]
pub(crate) fn _scatter_nd_in_place<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    updates: &Bound<'py, PyAny>,
    reduction: &str,
) -> PyResult<()> {
    let op = ScatterND::new().reduction(self::reduction(reduction)?);
    let (indices, updates) = (
        arrays::input(indices, "indices")?,
        arrays::input(updates, "updates")?,
    );
    let mut target = arrays::output(data)?;
    let shape = target.shape();
    let view = target.view_mut(&shape)?;
    let (iv, uv) = (indices.view()?, updates.view()?);
    // Serial work: the pool would only add a hand-over.
    let runner = Runner::new(Some(1), small(&[iv, uv], 0))?;
    runner
        .work(py, || op.run_in_place(view, iv, uv))
        .map_err(to_py_err)
}

/// ONNX TensorScatter (opset 24), a KV-cache update: ``out = past_cache.copy()``;
/// for each batch entry ``b`` the ``update`` window of ``sequence_length``
/// positions is written along ``axis`` (default -2) from position
/// ``write_indices[b]`` (0 when ``write_indices`` is None). ``mode="linear"``
/// requires the window to fit; ``"circular"`` wraps modulo the cache length.
///
/// >>> import numpy as np, gatherscatter as gs
/// >>> gs.tensor_scatter(np.zeros((1, 4), np.float32), np.ones((1, 2), np.float32), np.array([1]), axis=1)
/// array([[0., 1., 1., 0.]], dtype=float32)
#[pyfunction]
#[pyo3(signature = (past_cache, update, write_indices=None, axis=-2, mode="linear", *, profile=None, out=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn tensor_scatter<'py>(
    py: Python<'py>,
    past_cache: &Bound<'py, PyAny>,
    update: &Bound<'py, PyAny>,
    write_indices: Option<&Bound<'py, PyAny>>,
    axis: i64,
    mode: &str,
    profile: Option<&str>,
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = TensorScatter::new()
        .axis(axis)
        .mode(ScatterMode::from_str(mode).map_err(to_py_err)?)
        .profile(self::profile(profile)?);
    match write_indices {
        Some(w) => run(py, op.into(), &[past_cache, update, w], out, threads),
        None => run(py, op.into(), &[past_cache, update], out, threads),
    }
}
