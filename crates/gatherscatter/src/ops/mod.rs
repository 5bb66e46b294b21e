//! The operators: one module each (a folder for the three with tuned
//! kernels beside their rules), the [`op::Op`] list of them, and the output
//! and shape helpers they share.

pub(crate) mod blocks;
pub mod embedding_bag;
pub mod gather;
pub mod gather_elements;
pub mod gather_nd;
pub mod index_along;
pub mod op;
pub mod scatter_elements;
pub mod scatter_nd;
pub mod scatter_reduce;
pub mod segment;
pub mod tensor_scatter;

use crate::display::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::mem::parallel;
use crate::mem::uninit::Slot;

/// An output buffer of `len` elements, or an error (never an abort) when it
/// cannot be allocated (spec §2.12).
pub(crate) fn alloc_output<T: Element>(len: usize) -> Result<Vec<T>> {
    T::try_zeroed_vec(len).ok_or(Error::Allocation {
        elements: len,
        dtype: T::DTYPE,
    })
}

/// A new vector holding `data`'s values, or an allocation error.
pub(crate) fn copy_of<T: Element>(data: &[T]) -> Result<Vec<T>> {
    let mut copy = crate::shape::reserved(data.len(), T::DTYPE)?;
    copy.extend_from_slice(data);
    Ok(copy)
}

/// Zeros of `like`'s dtype in `shape` (`""` for strings, `false` for bool).
pub(crate) fn zeros_like(like: crate::TensorView<'_>, shape: Vec<usize>) -> Result<crate::Tensor> {
    let len = crate::shape::checked_product(&shape).ok_or_else(|| Error::SizeOverflow {
        what: "the zeros",
        shape: shape.clone(),
    })?;
    crate::tensor_view::with_view!(like, t => zeros_of(t, shape, len))
}

fn zeros_of<T: Element>(
    _: crate::TypedView<'_, T>,
    shape: Vec<usize>,
    len: usize,
) -> Result<crate::Tensor> {
    Ok(crate::Tensor::from(crate::TypedTensor::new(
        shape,
        alloc_output::<T>(len)?,
    )?))
}

/// `out = data` (same length, else a panic). Large copies are split across
/// the pool, whose threads also take the first page faults of a fresh
/// allocation. `out` may be uninitialised: every slot is written.
pub(crate) fn copy_into<W: Clone + Send + Sync, O: Slot<W>>(data: &[W], out: &mut [O]) {
    let per_task = data
        .len()
        .div_ceil(parallel::tasks(std::mem::size_of_val(data), data.len()));
    copy_then(data, out, per_task, |_, _| {});
}

/// `out = data` (same length, else a panic) in chunks of `chunk_len`
/// elements (across the pool when there are several), each task then
/// running `then(start, chunk)` on the chunk it just copied (output
/// elements `start..`), while it is in cache. `out` may be uninitialised:
/// every slot is written before `then` sees it.
pub(crate) fn copy_then<W: Clone + Send + Sync, O: Slot<W>>(
    data: &[W],
    out: &mut [O],
    chunk_len: usize,
    then: impl Fn(usize, &mut [W]) + Sync + Send,
) {
    assert_eq!(
        data.len(),
        out.len(),
        "copy_then: data and output lengths differ"
    );
    let chunk_len = chunk_len.max(1);
    parallel::for_each_chunk(out, chunk_len, |task, chunk| {
        let start = task * chunk_len;
        let len = chunk.len();
        then(start, O::init_from(chunk, &data[start..start + len]));
    });
}

/// Scatter updates must have the data's dtype. `context` holds `{}` where the
/// data dtype goes, e.g. `"ScatterND on {} data"`.
pub(crate) fn require_same_dtype(
    what: &'static str,
    given: DType,
    data: DType,
    context: &str,
) -> Result<()> {
    if given == data {
        return Ok(());
    }
    Err(dtype_mismatch(what, given, data, context))
}

fn dtype_mismatch(what: &'static str, given: DType, data: DType, context: &str) -> Error {
    Error::BadDType {
        what,
        dtype: given,
        context: context.replace("{}", data.name()),
        accepted: vec![data],
    }
}

/// A caller's fill value must be one value of the data's dtype. `context`
/// holds `{}` where the data dtype goes, e.g. `"SegmentCsr on {} src"`.
pub(crate) fn check_fill(fill: &crate::Tensor, dtype: DType, context: &str) -> Result<()> {
    require_same_dtype("fill", fill.dtype(), dtype, context)?;
    if fill.len() != 1 {
        return Err(Error::shape(format!(
            "fill has {} elements; it must be one value",
            fill.len()
        )));
    }
    Ok(())
}

/// A caller's output buffer must have exactly the op's output shape.
pub(crate) fn check_output_shape(op: &str, given: &[usize], expected: &[usize]) -> Result<()> {
    if given == expected {
        return Ok(());
    }
    Err(Error::shape(format!(
        "the output buffer has shape {given_dims}, but {op} produces shape {expected_dims}",
        given_dims = Dims(given),
        expected_dims = Dims(expected)
    )))
}

/// The typed elements of a caller's output buffer (dynamic form), which must
/// have the data's dtype `T` and the op's output shape.
pub(crate) fn typed_output<'o, T: Element>(
    op: &str,
    out: crate::TensorViewMut<'o>,
    expected_shape: &[usize],
) -> Result<&'o mut [T]> {
    let typed = typed_buffer::<T>(op, out)?;
    check_output_shape(op, typed.shape(), expected_shape)?;
    Ok(typed.into_data_mut())
}

/// A caller's buffer as a typed tensor, which must have the data's dtype `T`.
pub(crate) fn typed_buffer<'o, T: Element>(
    op: &str,
    out: crate::TensorViewMut<'o>,
) -> Result<crate::TypedViewMut<'o, T>> {
    let given = out.dtype();
    T::from_view_mut(out)
        .map_err(|_| dtype_mismatch("output", given, T::DTYPE, &format!("{op} on {{}} data")))
}

/// Same rank; off the axis, indices no larger than data (or equal, when
/// `off_axis_equal`): the shape rule of GatherElements and ScatterElements.
pub(crate) fn check_indices_shape(
    data_shape: &[usize],
    indices_shape: &[usize],
    axis: usize,
    off_axis_equal: bool,
) -> Result<()> {
    if indices_shape.len() != data_shape.len() {
        return Err(Error::RankMismatch {
            what: "indices",
            actual: indices_shape.len(),
            expected: format!("the rank {} of data is required", data_shape.len()),
        });
    }
    for (d, (&i, &s)) in indices_shape.iter().zip(data_shape).enumerate() {
        if d == axis {
            continue;
        }
        if off_axis_equal && i != s {
            return Err(Error::shape(format!(
                "indices dimension {d} is {i}, but the active profile requires it to equal data's {s} off the axis {axis} (indices shape {indices_shape_dims}, data shape {data_shape_dims})", indices_shape_dims = Dims(indices_shape), data_shape_dims = Dims(data_shape)
)));
        }
        if i > s {
            return Err(Error::shape(format!(
                "indices dimension {d} is {i}, larger than data's {s}; only the axis {axis} may be larger (indices shape {indices_shape_dims}, data shape {data_shape_dims})", indices_shape_dims = Dims(indices_shape), data_shape_dims = Dims(data_shape)
)));
        }
    }
    Ok(())
}
