//! The element types gradients are computed in: f32, f64 and the complex
//! types, with f16 and bf16 widened to f32 and rounded once at the end.

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TypedView};
use crate::tensor_view::TensorView;

/// The element type the gradients are computed in.
pub(super) trait Scalar:
    Element
    + bytemuck::Zeroable
    + Copy
    + PartialEq
    + std::ops::Mul<Output = Self>
    + std::ops::Add<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn conj(self) -> Self;
    fn over(self, count: usize) -> Self;
    /// Equal as a max or min's result: NaN equals NaN.
    fn ties(self, result: Self) -> bool;
}

macro_rules! real {
    ($t:ty) => {
        impl Scalar for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            fn conj(self) -> $t {
                self
            }
            fn over(self, count: usize) -> $t {
                self / count as $t
            }
            fn ties(self, result: $t) -> bool {
                self == result || (self.is_nan() && result.is_nan())
            }
        }
    };
}
real!(f32);
real!(f64);

macro_rules! complex {
    ($t:ty, $f:ty) => {
        impl Scalar for $t {
            const ZERO: $t = <$t>::new(0.0, 0.0);
            const ONE: $t = <$t>::new(1.0, 0.0);
            fn conj(self) -> $t {
                <$t>::conj(&self)
            }
            fn over(self, count: usize) -> $t {
                self / count as $f
            }
            fn ties(self, result: $t) -> bool {
                self == result
            }
        }
    };
}
complex!(Complex32, f32);
complex!(Complex64, f64);

/// f16 and bf16 are computed in f32 and rounded once.
pub(super) fn wide<T: Copy + Into<f32>>(v: TypedView<'_, T>) -> Vec<f32> {
    v.data().iter().map(|&x| x.into()).collect()
}

pub(super) fn narrow<T>(values: Vec<f32>, round: fn(f32) -> T) -> Vec<T> {
    values.into_iter().map(round).collect()
}

/// A gradient computation, written once for every [`Scalar`].
pub(super) trait OnScalars {
    /// The outputs' elements from the inputs', in the order given to
    /// [`on_scalars`].
    fn run<T: Scalar>(&self, inputs: &[&[T]]) -> Result<Vec<Vec<T>>>;
}

/// Run `task` on `inputs` (one differentiable dtype, checked by the
/// caller) in their dtype, or (f16, bf16) in f32 with each output rounded
/// once; output `k` gets `shapes[k]`.
pub(super) fn on_scalars(
    inputs: &[TensorView<'_>],
    shapes: &[&[usize]],
    task: &impl OnScalars,
) -> Result<Vec<Tensor>> {
    fn exact<T: Scalar>(inputs: &[TensorView<'_>], task: &impl OnScalars) -> Result<Vec<Vec<T>>> {
        let typed: Vec<&[T]> = inputs
            .iter()
            .map(|v| v.typed::<T>().map(|t| t.data()))
            .collect::<Result<_>>()?;
        task.run(&typed)
    }
    fn widened<H: Element + Copy + Into<f32>>(
        inputs: &[TensorView<'_>],
        task: &impl OnScalars,
        round: fn(f32) -> H,
    ) -> Result<Vec<Vec<H>>> {
        let wide: Vec<Vec<f32>> = inputs
            .iter()
            .map(|v| v.typed::<H>().map(self::wide))
            .collect::<Result<_>>()?;
        let slices: Vec<&[f32]> = wide.iter().map(Vec::as_slice).collect();
        let outputs = task.run(&slices)?;
        Ok(outputs.into_iter().map(|o| narrow(o, round)).collect())
    }
    fn tensors<T: Element>(outputs: Vec<Vec<T>>, shapes: &[&[usize]]) -> Result<Vec<Tensor>> {
        outputs
            .into_iter()
            .zip(shapes)
            .map(|(data, shape)| Tensor::new(shape.to_vec(), data))
            .collect()
    }
    match inputs.first().map(TensorView::dtype) {
        Some(DType::F32) => tensors(exact::<f32>(inputs, task)?, shapes),
        Some(DType::F64) => tensors(exact::<f64>(inputs, task)?, shapes),
        Some(DType::Complex64) => tensors(exact::<Complex32>(inputs, task)?, shapes),
        Some(DType::Complex128) => tensors(exact::<Complex64>(inputs, task)?, shapes),
        Some(DType::F16) => tensors(widened(inputs, task, f16::from_f32)?, shapes),
        Some(DType::BF16) => tensors(widened(inputs, task, bf16::from_f32)?, shapes),
        _ => Err(Error::unsupported("a gradient of a dtype that has none")),
    }
}
