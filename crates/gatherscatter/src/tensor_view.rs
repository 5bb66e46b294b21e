//! [`TensorView`]: a borrowed tensor of any dtype.
//!
//! Runtimes and the CLI hold data they do not own (an arena slot, a
//! memory-mapped file); every op's dynamic `run` takes views so such data is
//! never copied just to be read.

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TypedView};

/// A borrowed tensor of any of the 16 dtypes: the view form of [`Tensor`].
///
/// `&Tensor` and any `TypedView<T>` convert into it, so every op's `run`
/// accepts either.
///
/// ```
/// use gatherscatter::{Gather, TensorView, TypedView};
///
/// let shape = [2, 2];
/// let data = [1.5f32, 2.5, 3.5, 4.5];
/// let view = TypedView::new(&shape, &data)?;
/// let indices = TypedView::new(&[1], &[1i64])?;
/// let out = Gather::new(0).run(view, indices)?;
/// assert_eq!(out.data::<f32>(), Some(&[3.5f32, 4.5][..]));
/// assert_eq!(TensorView::from(view).shape(), &[2, 2]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum TensorView<'a> {
    /// `bool` elements.
    Bool(TypedView<'a, bool>),
    /// `i8` elements.
    I8(TypedView<'a, i8>),
    /// `i16` elements.
    I16(TypedView<'a, i16>),
    /// `i32` elements.
    I32(TypedView<'a, i32>),
    /// `i64` elements.
    I64(TypedView<'a, i64>),
    /// `u8` elements.
    U8(TypedView<'a, u8>),
    /// `u16` elements.
    U16(TypedView<'a, u16>),
    /// `u32` elements.
    U32(TypedView<'a, u32>),
    /// `u64` elements.
    U64(TypedView<'a, u64>),
    /// `f16` elements.
    F16(TypedView<'a, f16>),
    /// `bf16` elements.
    BF16(TypedView<'a, bf16>),
    /// `f32` elements.
    F32(TypedView<'a, f32>),
    /// `f64` elements.
    F64(TypedView<'a, f64>),
    /// `Complex<f32>` elements (ONNX complex64).
    Complex64(TypedView<'a, Complex32>),
    /// `Complex<f64>` elements (ONNX complex128).
    Complex128(TypedView<'a, Complex64>),
    /// String elements.
    String(TypedView<'a, String>),
}

/// Run `$body` with `$v` bound to the typed view inside `$view`, whatever its dtype.
macro_rules! with_view {
    ($view:expr, $v:ident => $body:expr) => {
        match $view {
            $crate::TensorView::Bool($v) => $body,
            $crate::TensorView::I8($v) => $body,
            $crate::TensorView::I16($v) => $body,
            $crate::TensorView::I32($v) => $body,
            $crate::TensorView::I64($v) => $body,
            $crate::TensorView::U8($v) => $body,
            $crate::TensorView::U16($v) => $body,
            $crate::TensorView::U32($v) => $body,
            $crate::TensorView::U64($v) => $body,
            $crate::TensorView::F16($v) => $body,
            $crate::TensorView::BF16($v) => $body,
            $crate::TensorView::F32($v) => $body,
            $crate::TensorView::F64($v) => $body,
            $crate::TensorView::Complex64($v) => $body,
            $crate::TensorView::Complex128($v) => $body,
            $crate::TensorView::String($v) => $body,
        }
    };
}
pub(crate) use with_view;

impl<'a> TensorView<'a> {
    /// The element type.
    pub fn dtype(&self) -> DType {
        fn dtype_of<T: Element>(_: &TypedView<'_, T>) -> DType {
            T::DTYPE
        }
        with_view!(self, v => dtype_of(v))
    }

    /// The dimensions.
    pub fn shape(&self) -> &'a [usize] {
        with_view!(self, v => v.shape())
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        with_view!(self, v => v.len())
    }

    /// True if some dimension is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The typed view, or an error naming both dtypes.
    pub fn typed<T: Element>(self) -> Result<TypedView<'a, T>> {
        let dtype = self.dtype();
        T::from_view(self).ok_or_else(|| Error::BadDType {
            what: "tensor",
            dtype,
            context: format!("a view of {} was asked for", T::DTYPE),
            accepted: vec![T::DTYPE],
        })
    }

    /// An owned copy.
    pub fn to_owned(&self) -> Tensor {
        with_view!(self, v => Tensor::from(v.to_owned()))
    }
}

impl<'a> From<&'a Tensor> for TensorView<'a> {
    fn from(tensor: &'a Tensor) -> TensorView<'a> {
        crate::tensor::with_typed!(tensor, t => t.view().into())
    }
}

impl<'a, T: Element> From<TypedView<'a, T>> for TensorView<'a> {
    fn from(view: TypedView<'a, T>) -> TensorView<'a> {
        T::into_view(view)
    }
}

impl<'a, 'b> From<&'b TensorView<'a>> for TensorView<'a> {
    fn from(view: &'b TensorView<'a>) -> TensorView<'a> {
        *view
    }
}
