//! The operators, one per file.

pub mod gather;
pub mod gather_elements;
pub mod gather_nd;
pub(crate) mod parallel;
pub mod scatter_elements;
pub mod scatter_nd;
pub mod tensor_scatter;

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};

/// An output buffer of `len` elements, or an error (never an abort) when it
/// cannot be allocated (SPEC §2.12).
pub(crate) fn alloc_output<T: Element>(len: usize) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| Error::Allocation {
        elements: len,
        dtype: T::DTYPE,
    })?;
    out.resize(len, T::zero());
    Ok(out)
}

/// A copy of `data` as the output of a scatter, or an allocation error.
pub(crate) fn copy_of<T: Element>(data: &[T]) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(data.len())
        .map_err(|_| Error::Allocation {
            elements: data.len(),
            dtype: T::DTYPE,
        })?;
    out.extend_from_slice(data);
    Ok(out)
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
    Err(Error::BadDType {
        what,
        dtype: given,
        context: context.replace("{}", data.name()),
        accepted: vec![data],
    })
}
