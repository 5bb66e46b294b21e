//! Gradients (spec §2.17): vector-Jacobian products of the gathers with
//! respect to `data`, of the scatters with respect to `data` and
//! `updates`, and of the folds over groups of rows (segment reductions,
//! EmbeddingBag) with respect to their rows, given `grad_out`, the
//! gradient of the output.
//!
//! ```text
//! grad_data[t] = Σ grad_out[p]   over the output positions p that read data[t]
//! ```
//!
//! A gather reads `data[t]` once for every output position whose index
//! names `t`, so its gradient is a scatter-add of `grad_out` into zeros of
//! `data`'s shape (ScatterND for rows and GatherND, ScatterElements
//! elsewhere), the terms added in ascending row-major order of `p`:
//! bit-identical for any thread count. Under an index policy the gradient
//! goes where the forward read: `clip` and `wrap` to the position the index
//! was moved to, a `fill` position nowhere. The indices get no gradient:
//! they are integers. A fold passes each row its share of its group's
//! gradient ([`groups`]); EmbeddingBag then adds the shares into the weight
//! rows they came from, in ascending entry order. Gradients are defined for
//! the floating and complex dtypes.

mod embedding_bag;
mod gathers;
mod groups;
mod scalar;
mod scatters;
mod segments;
mod targets;

pub use embedding_bag::EmbeddingBagGrads;
pub use scatters::ScatterGrads;

use crate::aggregate::Aggregate;
use crate::display::Dims;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::reduction::Reduction;
use crate::tensor_view::TensorView;

/// The dtypes a gradient is defined for.
const DIFFERENTIABLE: [DType; 6] = [
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::Complex64,
    DType::Complex128,
];

fn require_differentiable(what: &'static str, dtype: DType, op: &str) -> Result<()> {
    if DIFFERENTIABLE.contains(&dtype) {
        return Ok(());
    }
    Err(Error::BadDType {
        what,
        dtype,
        context: format!("the gradient of {op}"),
        accepted: DIFFERENTIABLE.to_vec(),
    })
}

fn expect_grad_shape(grad_out: &TensorView<'_>, expected: &[usize], op: &str) -> Result<()> {
    expect_output_shape("grad_out", grad_out, expected, op)
}

/// `given` (named `what`) has the shape of `op`'s output, `expected`.
fn expect_output_shape(
    what: &str,
    given: &TensorView<'_>,
    expected: &[usize],
    op: &str,
) -> Result<()> {
    if given.shape() == expected {
        return Ok(());
    }
    Err(Error::shape(format!(
        "{what} has shape {}, but the output of {op} has shape {}",
        Dims(given.shape()),
        Dims(expected)
    )))
}

fn reserve<T>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::Allocation {
        elements: len,
        dtype: DType::I64,
    })?;
    Ok(v)
}

/// `len` zeros, from memory the system hands out zeroed (no write pass),
/// or an allocation error.
fn zeroed<T: bytemuck::Zeroable>(len: usize) -> Result<Vec<T>> {
    bytemuck::allocation::try_zeroed_slice_box::<T>(len)
        .map(Vec::from)
        .map_err(|_| Error::Allocation {
            elements: len,
            dtype: DType::I64,
        })
}

/// `len` copies of `value`, or an allocation error.
fn filled<T: Clone>(len: usize, value: T) -> Result<Vec<T>> {
    let mut v = reserve(len)?;
    v.resize(len, value);
    Ok(v)
}

/// What a scatter or fold does with the values aimed at one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Replace,
    Sum,
    Mean,
    Prod,
    Extreme,
}

impl From<Reduction> for Kind {
    fn from(reduction: Reduction) -> Kind {
        match reduction {
            Reduction::None => Kind::Replace,
            Reduction::Add => Kind::Sum,
            Reduction::Mul => Kind::Prod,
            Reduction::Max | Reduction::Min => Kind::Extreme,
        }
    }
}

impl From<Aggregate> for Kind {
    fn from(aggregate: Aggregate) -> Kind {
        match aggregate {
            Aggregate::Sum => Kind::Sum,
            Aggregate::Prod => Kind::Prod,
            Aggregate::Mean => Kind::Mean,
            Aggregate::Amax | Aggregate::Amin => Kind::Extreme,
        }
    }
}
