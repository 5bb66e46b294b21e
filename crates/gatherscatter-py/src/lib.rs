//! `gatherscatter._native`: the core's operators for numpy arrays.
//!
//! Each function takes numpy arrays (or anything `numpy.asarray` takes),
//! builds the core's [`Op`] from its keywords, and runs it with the GIL
//! released on the chosen number of threads. The Python package
//! (`python/gatherscatter`) re-exports these and adds numpy's spellings.

mod arrays;
mod errors;
mod grad;
mod threads;

use std::str::FromStr;

use gatherscatter::tuning::{self};
use gatherscatter::{
    Aggregate, EmbeddingBag, Gather, GatherElements, GatherND, IndexPolicy, Op, Profile, Reduction,
    ScatterElements, ScatterMode, ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, Tensor,
    TensorScatter, TensorView, TypedTensor,
};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::Input;

/// Large fresh results sit on transparent huge pages, as numpy's own arrays
/// do: W1's 64 MiB output otherwise costs 16,384 page faults per call
/// (61 ms on one thread against 17 ms, measured from Python). The package
/// also has it keep freed large blocks (`set_cache_limit`).
#[global_allocator]
static HEAP: gatherscatter_heap::HugePageHeap = gatherscatter_heap::HugePageHeap::enabled();
use crate::errors::to_py_err;

/// Below this many bytes of inputs and output a call runs right here: it
/// keeps the GIL and does not hand the work to a thread pool, which costs
/// more than such a call's work (W9, a 16x16 gather: 10 us through a
/// one-thread pool against 1.2 us inline). The core splits no call this
/// small across threads anyway (its threshold is 256 KiB of output).
const INLINE_MAX_BYTES: usize = 1 << 16;

/// Below this many bytes of inputs and output together a call runs as one
/// task on the calling thread, with the GIL released: handing it to a pool
/// costs about 10 us on the machines measured, more than a second thread
/// saves (a float32 gather of 256 KiB from Python, two threads: 16-18 us
/// through the pool, 5.4 here; of 1 MiB, 15-31 us through the pool, 18
/// here; AMD EPYC family 26 model 2).
const ONE_TASK_MAX_BYTES: usize = 2 << 20;

/// An upper bound of the output's bytes, from the inputs' shapes and data's
/// dtype alone (a gather can be far larger than its inputs; counting 24
/// bytes an element, as it did, sent a 32 KiB float32 gather to the pool:
/// 11.5 us against numpy's 2.1), to decide whether a call is
/// small enough to run inline. Invalid shapes give some bound; the op
/// reports them.
fn output_bytes_bound(op: &Op, views: &[TensorView<'_>]) -> usize {
    let (data, indices) = (&views[0], views.get(1));
    let elements = match (op, indices) {
        (Op::Gather(gather), Some(indices)) => {
            let rank = data.rank() as i64;
            let axis = if gather.axis < 0 {
                gather.axis + rank
            } else {
                gather.axis
            };
            let along = usize::try_from(axis)
                .ok()
                .and_then(|a| data.shape().get(a).copied())
                .unwrap_or(1)
                .max(1);
            (data.len() / along).saturating_mul(indices.len())
        }
        (Op::GatherND(_), Some(indices)) => indices.len().saturating_mul(data.len()),
        (Op::GatherElements(_), Some(indices)) => indices.len(),
        // One row of src per boundary: at most all of src per boundary.
        (Op::SegmentCsr(_), Some(indptr)) => data.len().saturating_mul(indptr.len()),
        // Without `dim_size` the count is the largest id + 1: unbounded here.
        (Op::SegmentCoo(coo), _) => coo
            .segment_count()
            .map_or(usize::MAX, |n| data.len().saturating_mul(n.max(1))),
        // [bags, dim]: at most one bag per offset (or per index).
        (Op::EmbeddingBag(_), Some(indices)) => views
            .get(2)
            .map_or(indices.len(), |offsets| offsets.len() + 1)
            .saturating_mul(data.shape().get(1).copied().unwrap_or(1)),
        _ => data.len(),
    };
    // Every op's output has data's dtype.
    elements.saturating_mul(arrays::element_bytes(data))
}

fn profile(name: Option<&str>) -> PyResult<Profile> {
    name.map_or(Ok(Profile::Permissive), |name| {
        Profile::from_str(name).map_err(to_py_err)
    })
}

fn reduction(name: &str) -> PyResult<Reduction> {
    Reduction::from_str(name).map_err(to_py_err)
}

/// The ONNX operators take only `batch_dims >= 0`.
fn batch_dims(value: i64) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| {
        errors::from_kind_now(
            "bad_attribute",
            &format!("batch_dims must be >= 0, not {value}"),
        )
    })
}

/// Run `op` on `inputs` (named `names` in messages), into `out` if given.
fn run<'py>(
    py: Python<'py>,
    op: Op,
    inputs: &[&Bound<'py, PyAny>],
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    run_policy(py, op, inputs, out, threads, &IndexPolicy::Raise)
}

/// [`run`] under an index policy: with any but `raise`, the result is
/// computed fresh and then copied into `out` when one is given.
fn run_policy<'py>(
    py: Python<'py>,
    op: Op,
    inputs: &[&Bound<'py, PyAny>],
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
    policy: &IndexPolicy,
) -> PyResult<Bound<'py, PyAny>> {
    let held = read(inputs, op.inputs())?;
    let views = views_of(&held)?;
    let runner = Runner::new(threads, small(&views, output_bytes_bound(&op, &views)))?;
    if *policy != IndexPolicy::Raise {
        let tensor = runner
            .work(py, || policy.run(&op, &views))
            .map_err(to_py_err)?;
        let result = arrays::result(py, tensor, held[0].str_type())?;
        return match out {
            None => Ok(result),
            Some(out_obj) => {
                let np = py.import("numpy")?;
                np.call_method1("copyto", (out_obj, &result))?;
                Ok(out_obj.clone())
            }
        };
    }
    match out {
        None => {
            let tensor = runner.work(py, || op.run(&views)).map_err(to_py_err)?;
            arrays::result(py, tensor, held[0].str_type())
        }
        Some(out_obj) => {
            let mut target = arrays::output(out_obj)?;
            let shape = target.shape();
            let view = target.view_mut(&shape)?;
            runner
                .work(py, || op.run_into(&views, view))
                .map_err(to_py_err)?;
            Ok(out_obj.clone())
        }
    }
}

/// `mode=` (and `fill_value=`, cast to `data`'s dtype as the package's
/// fill values are) as an index policy.
fn policy(
    py: Python<'_>,
    mode: &str,
    fill_value: Option<&Bound<'_, PyAny>>,
    data: &Bound<'_, PyAny>,
) -> PyResult<IndexPolicy> {
    let parsed = IndexPolicy::from_str(mode).map_err(to_py_err)?;
    match (parsed, fill_value) {
        (IndexPolicy::Fill(_), Some(value)) => {
            let np = py.import("numpy")?;
            let data = np.call_method1("asarray", (data,))?;
            let cast = py
                .import("gatherscatter._segments")?
                .call_method1("_fill_value", (value, data))?;
            Ok(IndexPolicy::Fill(Some(self::value(&cast, "fill_value")?)))
        }
        (_, Some(_)) => Err(errors::from_kind_now(
            "bad_attribute",
            &format!("fill_value is only used with mode='fill', not mode={mode:?}"),
        )),
        (parsed, None) => Ok(parsed),
    }
}

/// Run `f` on `inputs` (named `names`) with the GIL released, as [`run`]
/// does an [`Op`]: for the entry points that are functions over ops.
fn run_function<'py>(
    py: Python<'py>,
    names: &[&str],
    inputs: &[&Bound<'py, PyAny>],
    threads: Option<usize>,
    f: impl Fn(&[TensorView<'_>]) -> gatherscatter::Result<Tensor> + Send + Sync,
) -> PyResult<Bound<'py, PyAny>> {
    let held = read(inputs, names)?;
    let views = views_of(&held)?;
    let runner = Runner::new(threads, small(&views, 0))?;
    let tensor = runner.work(py, || f(&views)).map_err(to_py_err)?;
    arrays::result(py, tensor, held[0].str_type())
}

/// PyTorch's ``index_select``: the slices of ``data`` at the 1-D ``index``
/// along ``dim``. The package's ``index_select`` wraps this.
#[pyfunction]
#[pyo3(signature = (data, dim, index, *, threads=None))]
fn _index_select<'py>(
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
fn _index_scatter<'py>(
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

/// Run `op`'s `run_with_arg` on `inputs` (a segment reduction's `src` and
/// boundaries): the values and the winning rows, as two arrays. Both are
/// fresh: a caller's `out` is refused rather than left unwritten.
fn run_with_arg<'py>(
    py: Python<'py>,
    op: &Op,
    inputs: &[&Bound<'py, PyAny>],
    out: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    if out.is_some() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{}: out= cannot be given with return_arg=True",
            op.name()
        )));
    }
    let held = read(inputs, op.inputs())?;
    let views = views_of(&held)?;
    let runner = Runner::new(threads, small(&views, 0))?;
    let call = || -> gatherscatter::Result<(Tensor, TypedTensor<i64>)> {
        match op {
            Op::SegmentCsr(csr) => csr.run_with_arg(views[0], views[1]),
            Op::SegmentCoo(coo) => coo.run_with_arg(views[0], views[1]),
            Op::EmbeddingBag(bag) => bag.run_with_arg(
                views[0],
                views[1],
                views.get(2).copied(),
                views.get(3).copied(),
            ),
            other => Err(gatherscatter::Error::BadReduction {
                message: format!("{} has no argument output", other.name()),
            }),
        }
    };
    let (values, arg) = runner.work(py, call).map_err(to_py_err)?;
    let values = arrays::result(py, values, held[0].str_type())?;
    let arg = arrays::result(py, arg.into(), None)?;
    Ok((values, arg).into_pyobject(py)?.into_any())
}

/// A one-value argument (a segment reduction's fill) as an owned tensor.
fn value(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Tensor> {
    Ok(arrays::input(obj, what)?.view()?.to_owned())
}

/// The arguments read as core tensors (`names` name them in messages).
fn read<'py>(inputs: &[&Bound<'py, PyAny>], names: &[&str]) -> PyResult<Vec<Input<'py>>> {
    inputs
        .iter()
        .zip(names)
        .map(|(obj, name)| arrays::input(obj, name))
        .collect()
}

fn views_of<'a>(held: &'a [Input<'_>]) -> PyResult<Vec<TensorView<'a>>> {
    held.iter().map(Input::view).collect()
}

/// How large a call is, from its inputs and `output_bound` (an upper bound
/// of its output's bytes).
fn small(views: &[TensorView<'_>], output_bound: usize) -> Size {
    let inputs = views.iter().map(arrays::bytes).sum::<usize>();
    if inputs < INLINE_MAX_BYTES && output_bound < INLINE_MAX_BYTES {
        Size::Inline
    } else if inputs.saturating_add(output_bound) < ONE_TASK_MAX_BYTES {
        Size::OneTask
    } else {
        Size::Large
    }
}

/// How large a call is, for where it runs.
#[derive(Clone, Copy)]
enum Size {
    /// Small enough to keep the GIL.
    Inline,
    /// Too small for the core to split: a pool would only hand it over.
    OneTask,
    /// Split across the call's threads.
    Large,
}

/// Where a call runs: here, holding the GIL, when it is small; else
/// without the GIL, here when it takes one task or one thread (a pool's
/// hand-off cost a 32 KiB float32 gather 11 us, and a 1 MiB one on one
/// thread 42-57 us against 18 here: a wake-up, and the caller's cached
/// inputs when the worker ran on another core), else on the chosen pool
/// (the global one when `None`).
enum Runner {
    Inline,
    CallingThread,
    Pool(Option<std::sync::Arc<rayon::ThreadPool>>),
}

impl Runner {
    fn new(threads: Option<usize>, size: Size) -> PyResult<Runner> {
        // Only a large call looks up a pool (a lock and a lookup).
        threads::check(threads)?;
        Ok(match size {
            Size::Inline => Runner::Inline,
            Size::OneTask => Runner::CallingThread,
            Size::Large if threads::count(threads)? == 1 => Runner::CallingThread,
            Size::Large => Runner::Pool(threads::pool(threads)?),
        })
    }

    fn work<R: Send>(&self, py: Python<'_>, f: impl FnOnce() -> R + Send) -> R {
        match self {
            Runner::Inline => f(),
            Runner::CallingThread => py.detach(|| gatherscatter::on_calling_thread(f)),
            Runner::Pool(pool) => py.detach(|| threads::run(pool.as_deref(), f)),
        }
    }
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
fn gather<'py>(
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
fn take<'py>(
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
fn gather_elements<'py>(
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
fn scatter_elements<'py>(
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
fn _scatter_reduce<'py>(
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
fn _segment_csr<'py>(
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
fn _segment_coo<'py>(
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
fn _embedding_bag<'py>(
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
fn gather_nd<'py>(
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
fn scatter_nd<'py>(
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
fn _scatter_nd_in_place<'py>(
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
fn tensor_scatter<'py>(
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

/// Set how many threads calls without ``threads=`` use (default: all cores).
#[pyfunction]
fn set_num_threads(threads: usize) -> PyResult<()> {
    threads::set_default(threads)
}

/// How many threads calls without ``threads=`` use.
#[pyfunction]
fn get_num_threads() -> usize {
    threads::default()
}

/// Force kernel strategies for the whole process (docs/performance.md,
/// "Strategies"): each of ``stores`` (``"cached"``, ``"streaming"``),
/// ``word_gather`` (``"scalar"``, ``"vector"``), ``block_order``
/// (``"output"``, ``"source"``), ``bag_fold`` (``"memory"``,
/// ``"registers"``) and ``row_fetch`` (``"read"``, ``"prefetch"``) given,
/// else ``"auto"``. Results are the same
/// under every strategy; only the speed differs. Returns the tuning now in
/// force, in the text form ``GATHERSCATTER_TUNING`` takes.
#[pyfunction]
#[pyo3(signature = (*, stores = None, word_gather = None, block_order = None, bag_fold = None, row_fetch = None))]
fn set_tuning(
    stores: Option<&str>,
    word_gather: Option<&str>,
    block_order: Option<&str>,
    bag_fold: Option<&str>,
    row_fetch: Option<&str>,
) -> PyResult<String> {
    let knobs = [
        ("stores", stores),
        ("word_gather", word_gather),
        ("block_order", block_order),
        ("bag_fold", bag_fold),
        ("row_fetch", row_fetch),
    ];
    let text: Vec<String> = knobs
        .iter()
        .filter_map(|(knob, value)| value.map(|v| format!("{knob}={v}")))
        .collect();
    let parsed = tuning::Tuning::parse(&text.join(",")).map_err(to_py_err)?;
    tuning::set_global(parsed);
    Ok(parsed.to_string())
}

/// The tuning in force, in the text form ``GATHERSCATTER_TUNING`` takes.
#[pyfunction]
fn get_tuning() -> String {
    tuning::global().to_string()
}

/// One line on what the ``auto`` strategies choose on this CPU (cache
/// size, thresholds, the word-gather measurement), for benchmark headers.
#[pyfunction]
fn tuning_report(py: Python<'_>) -> String {
    py.detach(|| tuning::report().to_string())
}

/// Keep freed results (and the core's scratch blocks) of at least 4 MiB,
/// up to ``max_bytes`` in all, for the next result of the same size: a loop
/// that makes a large fresh result per call then writes into memory that is
/// already mapped instead of paying the kernel's page faults every time.
/// 0 keeps none and gives back what is kept now.
#[pyfunction]
fn set_cache_limit(max_bytes: usize) {
    HEAP.keep_freed_blocks(max_bytes);
}

/// ``{"limit": bytes, "held": bytes}`` of the cache of freed results.
#[pyfunction]
fn cache_info(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let info = pyo3::types::PyDict::new(py);
    info.set_item("limit", HEAP.kept_limit())?;
    info.set_item("held", HEAP.kept_bytes())?;
    Ok(info)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The kernels would read a bad GATHERSCATTER_TUNING as unset: the
    // import fails instead, naming it.
    tuning::Tuning::from_env().map_err(to_py_err)?;
    gatherscatter_threads::pinning_from_env().map_err(pyo3::exceptions::PyValueError::new_err)?;
    // Another copy of this module in the process may have started the
    // global pool already; it then stays as it is.
    let _ = gatherscatter_threads::configure_global();
    m.add_function(wrap_pyfunction!(gather, m)?)?;
    m.add_function(wrap_pyfunction!(gather_elements, m)?)?;
    m.add_function(wrap_pyfunction!(take, m)?)?;
    m.add_function(wrap_pyfunction!(scatter_elements, m)?)?;
    m.add_function(wrap_pyfunction!(gather_nd, m)?)?;
    m.add_function(wrap_pyfunction!(scatter_nd, m)?)?;
    m.add_function(wrap_pyfunction!(tensor_scatter, m)?)?;
    m.add_function(wrap_pyfunction!(_scatter_reduce, m)?)?;
    grad::register(m)?;
    m.add_function(wrap_pyfunction!(_segment_csr, m)?)?;
    m.add_function(wrap_pyfunction!(_segment_coo, m)?)?;
    m.add_function(wrap_pyfunction!(_embedding_bag, m)?)?;
    m.add_function(wrap_pyfunction!(_index_select, m)?)?;
    m.add_function(wrap_pyfunction!(_index_scatter, m)?)?;
    m.add_function(wrap_pyfunction!(_scatter_nd_in_place, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(set_tuning, m)?)?;
    m.add_function(wrap_pyfunction!(get_tuning, m)?)?;
    m.add_function(wrap_pyfunction!(tuning_report, m)?)?;
    m.add_function(wrap_pyfunction!(set_cache_limit, m)?)?;
    m.add_function(wrap_pyfunction!(cache_info, m)?)?;
    m.add("OPERATORS", Op::NAMES.to_vec())?;
    Ok(())
}
