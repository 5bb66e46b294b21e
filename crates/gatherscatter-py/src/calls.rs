//! How one call runs: its keywords parsed into the core's settings, its
//! arrays read, and where it runs (inline with the GIL held, on the
//! calling thread without it, or on the pool).

use std::str::FromStr;

use gatherscatter::{IndexPolicy, Op, Profile, Reduction, Tensor, TensorView, TypedTensor};
use pyo3::prelude::*;

use crate::arrays::{self, Input};
use crate::errors::{self, to_py_err};
use crate::threads;

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

pub(crate) fn profile(name: Option<&str>) -> PyResult<Profile> {
    name.map_or(Ok(Profile::Permissive), |name| {
        Profile::from_str(name).map_err(to_py_err)
    })
}

pub(crate) fn reduction(name: &str) -> PyResult<Reduction> {
    Reduction::from_str(name).map_err(to_py_err)
}

/// The ONNX operators take only `batch_dims >= 0`.
pub(crate) fn batch_dims(value: i64) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| {
        errors::from_kind_now(
            "bad_attribute",
            &format!("batch_dims must be >= 0, not {value}"),
        )
    })
}

/// Run `op` on `inputs` (named `names` in messages), into `out` if given.
pub(crate) fn run<'py>(
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
pub(crate) fn run_policy<'py>(
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
pub(crate) fn policy(
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
pub(crate) fn run_function<'py>(
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

/// Run `op`'s `run_with_arg` on `inputs` (a segment reduction's `src` and
/// boundaries): the values and the winning rows, as two arrays. Both are
/// fresh: a caller's `out` is refused rather than left unwritten.
pub(crate) fn run_with_arg<'py>(
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
pub(crate) fn value(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Tensor> {
    Ok(arrays::input(obj, what)?.view()?.to_owned())
}

/// The arguments read as core tensors (`names` name them in messages).
pub(crate) fn read<'py>(
    inputs: &[&Bound<'py, PyAny>],
    names: &[&str],
) -> PyResult<Vec<Input<'py>>> {
    inputs
        .iter()
        .zip(names)
        .map(|(obj, name)| arrays::input(obj, name))
        .collect()
}

pub(crate) fn views_of<'a>(held: &'a [Input<'_>]) -> PyResult<Vec<TensorView<'a>>> {
    held.iter().map(Input::view).collect()
}

/// How large a call is, from its inputs and `output_bound` (an upper bound
/// of its output's bytes).
pub(crate) fn small(views: &[TensorView<'_>], output_bound: usize) -> Size {
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
pub(crate) enum Size {
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
pub(crate) enum Runner {
    Inline,
    CallingThread,
    Pool(Option<std::sync::Arc<rayon::ThreadPool>>),
}

impl Runner {
    pub(crate) fn new(threads: Option<usize>, size: Size) -> PyResult<Runner> {
        // Only a large call looks up a pool (a lock and a lookup).
        threads::check(threads)?;
        Ok(match size {
            Size::Inline => Runner::Inline,
            Size::OneTask => Runner::CallingThread,
            Size::Large if threads::count(threads)? == 1 => Runner::CallingThread,
            Size::Large => Runner::Pool(threads::pool(threads)?),
        })
    }

    pub(crate) fn work<R: Send>(&self, py: Python<'_>, f: impl FnOnce() -> R + Send) -> R {
        match self {
            Runner::Inline => f(),
            Runner::CallingThread => py.detach(|| gatherscatter::on_calling_thread(f)),
            Runner::Pool(pool) => py.detach(|| threads::run(pool.as_deref(), f)),
        }
    }
}
