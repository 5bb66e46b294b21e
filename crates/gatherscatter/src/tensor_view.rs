//! [`TensorView`]: a borrowed tensor of any dtype.
//!
//! Runtimes and the CLI hold data they do not own (an arena slot, a
//! memory-mapped file); every op's dynamic `run` takes views so such data is
//! never copied just to be read.

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TypedTensor, TypedView, TypedViewMut};

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
    /// The same elements under `shape` (of the same element count), no copy.
    pub(crate) fn reshaped(self, shape: &'a [usize]) -> Result<TensorView<'a>> {
        with_view!(self, v => Ok(TensorView::from(TypedView::new(shape, v.data())?)))
    }

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

/// A mutably borrowed tensor of any of the 16 dtypes: where an op writes its
/// result (`run_into`) or updates a tensor in place (`run_in_place`).
///
/// `&mut Tensor` and any `TypedViewMut<T>` convert into it, so those entry
/// points take an owned tensor or a caller's borrowed buffer alike.
///
/// ```
/// use gatherscatter::{Gather, Tensor, TensorViewMut, TypedViewMut};
///
/// let data = Tensor::new(vec![2, 2], vec![1u8, 2, 3, 4])?;
/// let indices = Tensor::from_vec(vec![1i64]);
/// let (shape, mut buffer) = ([1, 2], [0u8; 2]);
/// let out = TensorViewMut::from(TypedViewMut::new(&shape, &mut buffer)?);
/// assert_eq!(out.shape(), &[1, 2]);
/// Gather::new(0).run_into(&data, &indices, out)?;
/// assert_eq!(buffer, [3, 4]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, PartialEq)]
#[non_exhaustive]
pub enum TensorViewMut<'a> {
    /// `bool` elements.
    Bool(TypedViewMut<'a, bool>),
    /// `i8` elements.
    I8(TypedViewMut<'a, i8>),
    /// `i16` elements.
    I16(TypedViewMut<'a, i16>),
    /// `i32` elements.
    I32(TypedViewMut<'a, i32>),
    /// `i64` elements.
    I64(TypedViewMut<'a, i64>),
    /// `u8` elements.
    U8(TypedViewMut<'a, u8>),
    /// `u16` elements.
    U16(TypedViewMut<'a, u16>),
    /// `u32` elements.
    U32(TypedViewMut<'a, u32>),
    /// `u64` elements.
    U64(TypedViewMut<'a, u64>),
    /// `f16` elements.
    F16(TypedViewMut<'a, f16>),
    /// `bf16` elements.
    BF16(TypedViewMut<'a, bf16>),
    /// `f32` elements.
    F32(TypedViewMut<'a, f32>),
    /// `f64` elements.
    F64(TypedViewMut<'a, f64>),
    /// `Complex<f32>` elements (ONNX complex64).
    Complex64(TypedViewMut<'a, Complex32>),
    /// `Complex<f64>` elements (ONNX complex128).
    Complex128(TypedViewMut<'a, Complex64>),
    /// String elements.
    String(TypedViewMut<'a, String>),
}

/// Run `$body` with `$v` bound to the typed mutable view inside `$view`.
macro_rules! with_view_mut {
    ($view:expr, $v:ident => $body:expr) => {
        match $view {
            $crate::TensorViewMut::Bool($v) => $body,
            $crate::TensorViewMut::I8($v) => $body,
            $crate::TensorViewMut::I16($v) => $body,
            $crate::TensorViewMut::I32($v) => $body,
            $crate::TensorViewMut::I64($v) => $body,
            $crate::TensorViewMut::U8($v) => $body,
            $crate::TensorViewMut::U16($v) => $body,
            $crate::TensorViewMut::U32($v) => $body,
            $crate::TensorViewMut::U64($v) => $body,
            $crate::TensorViewMut::F16($v) => $body,
            $crate::TensorViewMut::BF16($v) => $body,
            $crate::TensorViewMut::F32($v) => $body,
            $crate::TensorViewMut::F64($v) => $body,
            $crate::TensorViewMut::Complex64($v) => $body,
            $crate::TensorViewMut::Complex128($v) => $body,
            $crate::TensorViewMut::String($v) => $body,
        }
    };
}
pub(crate) use with_view_mut;

impl<'a> TensorViewMut<'a> {
    /// The element type.
    pub fn dtype(&self) -> DType {
        fn dtype_of<T: Element>(_: &TypedViewMut<'_, T>) -> DType {
            T::DTYPE
        }
        with_view_mut!(self, v => dtype_of(v))
    }

    /// The dimensions.
    pub fn shape(&self) -> &'a [usize] {
        with_view_mut!(self, v => v.shape())
    }

    /// A read-only view of the same elements.
    pub fn view(&self) -> TensorView<'_> {
        with_view_mut!(self, v => v.view().into())
    }

    /// The typed mutable view, or an error naming both dtypes.
    pub fn typed<T: Element>(self) -> Result<TypedViewMut<'a, T>> {
        let dtype = self.dtype();
        T::from_view_mut(self).map_err(|_| Error::BadDType {
            what: "tensor",
            dtype,
            context: format!("a view of {} was asked for", T::DTYPE),
            accepted: vec![T::DTYPE],
        })
    }
}

impl<'a> From<&'a mut Tensor> for TensorViewMut<'a> {
    fn from(tensor: &'a mut Tensor) -> TensorViewMut<'a> {
        crate::tensor::with_typed!(tensor, t => TypedViewMut::from(t).into())
    }
}

impl<'a, T: Element> From<TypedViewMut<'a, T>> for TensorViewMut<'a> {
    fn from(view: TypedViewMut<'a, T>) -> TensorViewMut<'a> {
        T::into_view_mut(view)
    }
}

impl<'a, T: Element> From<&'a mut TypedTensor<T>> for TensorViewMut<'a> {
    fn from(tensor: &'a mut TypedTensor<T>) -> TensorViewMut<'a> {
        T::into_view_mut(TypedViewMut::from(tensor))
    }
}
