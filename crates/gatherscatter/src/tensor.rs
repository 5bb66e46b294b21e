//! Tensors: a shape and contiguous row-major data.
//!
//! [`TypedTensor<T>`] and [`TypedView<T>`] are for callers who know the element
//! type; [`Tensor`] is the dynamic form a runtime holds, one variant per dtype.

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::shape::{checked_element_count, SmallDims};

/// An owned tensor of a known element type: shape plus row-major data.
///
/// The invariant `data.len() == product(shape)` holds for every value.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedTensor<T> {
    // Inline up to rank 8: an op's output then makes one allocation, its
    // values (a small call's shape allocation and free were about 150 of
    // its 1,400-2,500 instructions).
    shape: SmallDims,
    data: Vec<T>,
}

/// A borrowed tensor of a known element type: shape plus row-major data.
#[derive(Debug, PartialEq)]
pub struct TypedView<'a, T> {
    shape: &'a [usize],
    data: &'a [T],
}

/// A mutably borrowed tensor of a known element type: shape plus row-major
/// data, for ops that write into a caller's buffer (`run_into`, `run_in_place`)
/// without owning it (a numpy array, an arena slot).
///
/// ```
/// use gatherscatter::{Gather, Tensor, TypedViewMut};
///
/// let data = Tensor::new(vec![3], vec![10i32, 20, 30])?;
/// let indices = Tensor::from_vec(vec![2i64, 0]);
/// let (shape, mut buffer) = ([2], [0i32; 2]);
/// Gather::new(0).run_into(&data, &indices, TypedViewMut::new(&shape, &mut buffer)?)?;
/// assert_eq!(buffer, [30, 10]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, PartialEq)]
pub struct TypedViewMut<'a, T> {
    shape: &'a [usize],
    data: &'a mut [T],
}

// Manual impls: a view is Copy whatever `T` is.
impl<T> Clone for TypedView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for TypedView<'_, T> {}

impl<T> TypedTensor<T> {
    /// A tensor from a shape and row-major data; errors if the lengths disagree.
    ///
    /// ```
    /// # use gatherscatter::TypedTensor;
    /// let t = TypedTensor::new(vec![2, 3], vec![1, 2, 3, 4, 5, 6]).unwrap();
    /// assert_eq!(t.shape(), &[2, 3]);
    /// assert!(TypedTensor::new(vec![2, 3], vec![1, 2]).is_err());
    /// ```
    pub fn new(shape: Vec<usize>, data: Vec<T>) -> Result<Self> {
        check_length("tensor", &shape, data.len())?;
        Ok(TypedTensor {
            shape: shape.into(),
            data,
        })
    }

    /// A rank-0 tensor holding one value.
    pub fn scalar(value: T) -> Self {
        TypedTensor {
            shape: SmallDims::from_slice(&[]),
            data: vec![value],
        }
    }

    /// A rank-1 tensor of the given values.
    pub fn from_vec(data: Vec<T>) -> Self {
        TypedTensor {
            shape: SmallDims::from_slice(&[data.len()]),
            data,
        }
    }

    /// Internal constructor for outputs whose length the op already checked.
    pub(crate) fn from_parts_unchecked(shape: impl Into<SmallDims>, data: Vec<T>) -> Self {
        let shape = shape.into();
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        TypedTensor { shape, data }
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The elements in row-major order.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// Mutable access to the elements (the shape stays fixed).
    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when some dimension is zero.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Borrow as a view.
    pub fn view(&self) -> TypedView<'_, T> {
        TypedView {
            shape: &self.shape,
            data: &self.data,
        }
    }

    /// Split into shape and data.
    pub fn into_parts(self) -> (Vec<usize>, Vec<T>) {
        (self.shape.into_vec(), self.data)
    }
}

impl<'a, T> TypedView<'a, T> {
    /// A view of row-major `data` with the given shape; errors if the lengths disagree.
    pub fn new(shape: &'a [usize], data: &'a [T]) -> Result<Self> {
        check_length("tensor", shape, data.len())?;
        Ok(TypedView { shape, data })
    }

    /// The dimensions.
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// The elements in row-major order.
    pub fn data(&self) -> &'a [T] {
        self.data
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when some dimension is zero.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Copy into an owned tensor.
    pub fn to_owned(&self) -> TypedTensor<T>
    where
        T: Clone,
    {
        TypedTensor {
            shape: SmallDims::from_slice(self.shape),
            data: self.data.to_vec(),
        }
    }
}

impl<'a, T> TypedViewMut<'a, T> {
    /// A mutable view of row-major `data` with the given shape; errors if the lengths disagree.
    pub fn new(shape: &'a [usize], data: &'a mut [T]) -> Result<Self> {
        check_length("tensor", shape, data.len())?;
        Ok(TypedViewMut { shape, data })
    }

    /// The dimensions.
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// The elements in row-major order.
    pub fn data(&self) -> &[T] {
        self.data
    }

    /// The elements in row-major order, to write.
    pub fn data_mut(&mut self) -> &mut [T] {
        self.data
    }

    /// The elements, for as long as the view borrowed them.
    pub fn into_data_mut(self) -> &'a mut [T] {
        self.data
    }

    /// A read-only view of the same elements.
    pub fn view(&self) -> TypedView<'_, T> {
        TypedView {
            shape: self.shape,
            data: self.data,
        }
    }

    /// A shorter-lived mutable view of the same elements.
    pub fn reborrow(&mut self) -> TypedViewMut<'_, T> {
        TypedViewMut {
            shape: self.shape,
            data: self.data,
        }
    }
}

impl<'a, T> From<&'a mut TypedTensor<T>> for TypedViewMut<'a, T> {
    fn from(tensor: &'a mut TypedTensor<T>) -> TypedViewMut<'a, T> {
        TypedViewMut {
            shape: &tensor.shape,
            data: &mut tensor.data,
        }
    }
}

fn wrong_dtype<T: Element>(actual: DType) -> Error {
    Error::BadDType {
        what: "tensor",
        dtype: actual,
        context: format!("a typed access as {}", T::DTYPE),
        accepted: vec![T::DTYPE],
    }
}

fn check_length(what: &'static str, shape: &[usize], len: usize) -> Result<()> {
    let expected = checked_element_count(what, shape)?;
    if expected != len {
        return Err(Error::DataLength {
            what,
            shape: shape.to_vec(),
            expected,
            actual: len,
        });
    }
    Ok(())
}

/// A tensor of any of the 16 dtypes, as a runtime holds it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Tensor {
    /// `bool` elements.
    Bool(TypedTensor<bool>),
    /// `i8` elements.
    I8(TypedTensor<i8>),
    /// `i16` elements.
    I16(TypedTensor<i16>),
    /// `i32` elements.
    I32(TypedTensor<i32>),
    /// `i64` elements.
    I64(TypedTensor<i64>),
    /// `u8` elements.
    U8(TypedTensor<u8>),
    /// `u16` elements.
    U16(TypedTensor<u16>),
    /// `u32` elements.
    U32(TypedTensor<u32>),
    /// `u64` elements.
    U64(TypedTensor<u64>),
    /// `f16` elements.
    F16(TypedTensor<f16>),
    /// `bf16` elements.
    BF16(TypedTensor<bf16>),
    /// `f32` elements.
    F32(TypedTensor<f32>),
    /// `f64` elements.
    F64(TypedTensor<f64>),
    /// `Complex<f32>` elements (ONNX complex64).
    Complex64(TypedTensor<Complex32>),
    /// `Complex<f64>` elements (ONNX complex128).
    Complex128(TypedTensor<Complex64>),
    /// String elements.
    String(TypedTensor<String>),
}

/// Run `$body` with `$t` bound to the typed tensor inside `$tensor`, whatever its dtype.
macro_rules! with_typed {
    ($tensor:expr, $t:ident => $body:expr) => {
        match $tensor {
            $crate::Tensor::Bool($t) => $body,
            $crate::Tensor::I8($t) => $body,
            $crate::Tensor::I16($t) => $body,
            $crate::Tensor::I32($t) => $body,
            $crate::Tensor::I64($t) => $body,
            $crate::Tensor::U8($t) => $body,
            $crate::Tensor::U16($t) => $body,
            $crate::Tensor::U32($t) => $body,
            $crate::Tensor::U64($t) => $body,
            $crate::Tensor::F16($t) => $body,
            $crate::Tensor::BF16($t) => $body,
            $crate::Tensor::F32($t) => $body,
            $crate::Tensor::F64($t) => $body,
            $crate::Tensor::Complex64($t) => $body,
            $crate::Tensor::Complex128($t) => $body,
            $crate::Tensor::String($t) => $body,
        }
    };
}
pub(crate) use with_typed;

impl Tensor {
    /// The same elements under `shape` (of the same element count), no copy.
    pub(crate) fn reshaped(self, shape: Vec<usize>) -> Result<Tensor> {
        with_typed!(self, t => {
            let (_, values) = t.into_parts();
            Tensor::new(shape, values)
        })
    }

    /// A tensor from a shape and row-major data of any element type.
    ///
    /// ```
    /// # use gatherscatter::{DType, Tensor};
    /// let t = Tensor::new(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    /// assert_eq!(t.dtype(), DType::F32);
    /// ```
    pub fn new<T: Element>(shape: Vec<usize>, data: Vec<T>) -> Result<Tensor> {
        Ok(T::into_tensor(TypedTensor::new(shape, data)?))
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        T::into_tensor(TypedTensor::scalar(value))
    }

    /// A rank-1 tensor.
    pub fn from_vec<T: Element>(data: Vec<T>) -> Tensor {
        T::into_tensor(TypedTensor::from_vec(data))
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        fn dtype_of<T: Element>(_: &TypedTensor<T>) -> DType {
            T::DTYPE
        }
        with_typed!(self, t => dtype_of(t))
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        with_typed!(self, t => t.shape())
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_typed!(self, t => t.len())
    }

    /// True when some dimension is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Borrow the typed tensor, if the dtype is `T`'s.
    pub fn as_typed<T: Element>(&self) -> Option<&TypedTensor<T>> {
        T::from_tensor(self)
    }

    /// Take the typed tensor out, or get `self` back if the dtype is not `T`'s.
    pub fn into_typed<T: Element>(self) -> Result<TypedTensor<T>, Tensor> {
        T::from_tensor_owned(self)
    }

    /// A typed view, or an error naming both dtypes.
    pub fn view<T: Element>(&self) -> Result<TypedView<'_, T>> {
        self.as_typed::<T>()
            .map(TypedTensor::view)
            .ok_or_else(|| wrong_dtype::<T>(self.dtype()))
    }

    /// The elements as a slice, if the dtype is `T`'s.
    pub fn data<T: Element>(&self) -> Option<&[T]> {
        self.as_typed::<T>().map(TypedTensor::data)
    }
}

impl<T: Element> From<TypedTensor<T>> for Tensor {
    fn from(t: TypedTensor<T>) -> Tensor {
        T::into_tensor(t)
    }
}

#[cfg(feature = "ndarray")]
mod ndarray_conversions {
    use ndarray::{ArrayD, ArrayViewD, IxDyn};

    use super::*;

    impl<T: Element> From<ArrayD<T>> for TypedTensor<T> {
        /// Takes the buffer as it is when the array is in standard layout, copies otherwise.
        fn from(array: ArrayD<T>) -> Self {
            let shape = SmallDims::from_slice(array.shape());
            let len = array.len();
            let data = if array.is_standard_layout() {
                // Standard layout: the `len` elements are contiguous from `offset`.
                let (mut data, offset) = array.into_raw_vec_and_offset();
                data.drain(..offset.unwrap_or(0));
                data.truncate(len);
                data
            } else {
                array.iter().cloned().collect()
            };
            TypedTensor { shape, data }
        }
    }

    impl<T: Element> From<ArrayViewD<'_, T>> for TypedTensor<T> {
        /// Copies the viewed elements in row-major order.
        fn from(view: ArrayViewD<'_, T>) -> Self {
            TypedTensor {
                shape: SmallDims::from_slice(view.shape()),
                data: view.iter().cloned().collect(),
            }
        }
    }

    impl<T: Element> From<ArrayD<T>> for Tensor {
        fn from(array: ArrayD<T>) -> Self {
            T::into_tensor(TypedTensor::from(array))
        }
    }

    impl<T: Element> From<ArrayViewD<'_, T>> for Tensor {
        fn from(view: ArrayViewD<'_, T>) -> Self {
            T::into_tensor(TypedTensor::from(view))
        }
    }

    impl<T> TypedTensor<T> {
        /// Convert into an `ndarray` array (no copy).
        ///
        /// Fails only for shapes `ndarray` cannot represent: a product of the
        /// non-zero dimensions above `isize::MAX`, possible with a zero dimension.
        pub fn into_array(self) -> Result<ArrayD<T>> {
            let shape = self.shape.into_vec();
            ArrayD::from_shape_vec(IxDyn(&shape), self.data).map_err(|_| Error::SizeOverflow {
                what: "ndarray shape",
                shape,
            })
        }

        /// Borrow as an `ndarray` view (no copy); fails as [`TypedTensor::into_array`] does.
        pub fn as_array_view(&self) -> Result<ArrayViewD<'_, T>> {
            self.view().as_array_view()
        }
    }

    impl<'a, T> TypedView<'a, T> {
        /// Borrow as an `ndarray` view (no copy); fails as [`TypedTensor::into_array`] does.
        pub fn as_array_view(&self) -> Result<ArrayViewD<'a, T>> {
            ArrayViewD::from_shape(IxDyn(self.shape), self.data).map_err(|_| Error::SizeOverflow {
                what: "ndarray shape",
                shape: self.shape.to_vec(),
            })
        }

        /// View a standard-layout `ndarray` view; `None` if it is strided.
        pub fn from_array_view(view: &'a ArrayViewD<'a, T>) -> Option<Self> {
            let data = view.to_slice()?;
            Some(TypedView {
                shape: view.shape(),
                data,
            })
        }
    }

    impl Tensor {
        /// Convert into an `ndarray` array of element type `T`.
        pub fn into_array<T: Element>(self) -> Result<ArrayD<T>> {
            let dtype = self.dtype();
            match self.into_typed::<T>() {
                Ok(t) => t.into_array(),
                Err(_) => Err(wrong_dtype::<T>(dtype)),
            }
        }

        /// Borrow as an `ndarray` view of element type `T`.
        pub fn as_array_view<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
            self.view::<T>()?.as_array_view()
        }
    }
}
