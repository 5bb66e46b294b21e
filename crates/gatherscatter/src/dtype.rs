//! The 16 ONNX element types and the trait that ties a Rust type to one.

use std::fmt;

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use crate::tensor::{Tensor, TypedTensor, TypedView, TypedViewMut};
use crate::tensor_view::{TensorView, TensorViewMut};

/// Element type of a tensor: the 16 ONNX tensor types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DType {
    /// `bool`
    Bool,
    /// `i8`
    I8,
    /// `i16`
    I16,
    /// `i32`
    I32,
    /// `i64`
    I64,
    /// `u8`
    U8,
    /// `u16`
    U16,
    /// `u32`
    U32,
    /// `u64`
    U64,
    /// IEEE 754 half precision ([`half::f16`]).
    F16,
    /// bfloat16 ([`half::bf16`]).
    BF16,
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// Complex of two `f32` ([`num_complex::Complex32`]).
    Complex64,
    /// Complex of two `f64` ([`num_complex::Complex64`]).
    Complex128,
    /// UTF-8 string.
    String,
}

impl DType {
    /// Every dtype, in ONNX's `TensorProto.DataType` order of first appearance.
    pub const ALL: [DType; 16] = [
        DType::F32,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::String,
        DType::Bool,
        DType::F16,
        DType::F64,
        DType::U32,
        DType::U64,
        DType::Complex64,
        DType::Complex128,
        DType::BF16,
    ];

    /// The integer types accepted as indices (spec §2.3).
    pub const INDEX_TYPES: [DType; 8] = [
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// Lower-case name as ONNX spells it in `tensor(...)`: `float`, `int64`, `bfloat16`, ...
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float",
            DType::F64 => "double",
            DType::Complex64 => "complex64",
            DType::Complex128 => "complex128",
            DType::String => "string",
        }
    }

    /// The `TensorProto.DataType` number ONNX assigns to this type.
    pub fn onnx_id(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::String => 8,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::Complex64 => 14,
            DType::Complex128 => 15,
            DType::BF16 => 16,
        }
    }

    /// Inverse of [`DType::onnx_id`]; `None` for ids outside the 16 supported types.
    pub fn from_onnx_id(id: i32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.onnx_id() == id)
    }

    /// True for the integer types that may serve as indices.
    pub fn is_index_type(self) -> bool {
        DType::INDEX_TYPES.contains(&self)
    }

    /// True for the signed integer types.
    pub fn is_signed_integer(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that can be the element of a [`Tensor`]: one per [`DType`].
///
/// The trait is sealed; its implementors are `bool`, `i8`..`i64`, `u8`..`u64`,
/// [`half::f16`], [`half::bf16`], `f32`, `f64`, [`Complex32`], [`Complex64`]
/// and `String`.
pub trait Element:
    Clone + PartialEq + fmt::Debug + Send + Sync + 'static + sealed::Sealed + crate::reduction::Reduce
{
    /// The dtype this Rust type represents.
    const DTYPE: DType;

    /// A plain type of the same size that copy-only kernels move instead of
    /// `Self`, so that `f32`, `i32` and `u32` share one compiled kernel.
    #[doc(hidden)]
    type Word: Clone + Send + Sync + 'static;

    /// View a slice of elements as words of the same size (no copy).
    #[doc(hidden)]
    fn as_words(elements: &[Self]) -> &[Self::Word];

    /// Mutable version of [`Element::as_words`].
    #[doc(hidden)]
    fn as_words_mut(elements: &mut [Self]) -> &mut [Self::Word];

    /// The elements' bytes, for plain types (`None` for `bool` and `String`).
    #[doc(hidden)]
    fn as_bytes(elements: &[Self]) -> Option<&[u8]>;

    /// Mutable version of [`Element::as_bytes`].
    #[doc(hidden)]
    fn as_bytes_mut(elements: &mut [Self]) -> Option<&mut [u8]>;

    /// A value that preallocated outputs are filled with before the kernel
    /// writes them (zero, false, the empty string).
    fn zero() -> Self;

    /// A vector of `len` zero values, or `None` when it cannot be allocated.
    /// Plain types past 4 KiB take zeroed pages straight
    /// from the allocator, so a large output is first touched by the kernel
    /// threads that write it rather than by a serial fill.
    #[doc(hidden)]
    fn try_zeroed_vec(len: usize) -> Option<Vec<Self>>;

    /// Wrap a typed tensor into the dynamic [`Tensor`].
    fn into_tensor(tensor: TypedTensor<Self>) -> Tensor;

    /// Borrow the typed tensor inside a dynamic one of this dtype.
    fn from_tensor(tensor: &Tensor) -> Option<&TypedTensor<Self>>;

    /// Mutable version of [`Element::from_tensor`].
    fn from_tensor_mut(tensor: &mut Tensor) -> Option<&mut TypedTensor<Self>>;

    /// Take the typed tensor out of a dynamic one of this dtype, or give it back.
    fn from_tensor_owned(tensor: Tensor) -> Result<TypedTensor<Self>, Tensor>;

    /// Wrap a typed view into the dynamic [`TensorView`].
    fn into_view(view: TypedView<'_, Self>) -> TensorView<'_>;

    /// The typed view inside a dynamic one of this dtype.
    fn from_view(view: TensorView<'_>) -> Option<TypedView<'_, Self>>;

    /// Wrap a typed mutable view into the dynamic [`TensorViewMut`].
    fn into_view_mut(view: TypedViewMut<'_, Self>) -> TensorViewMut<'_>;

    /// The typed mutable view inside a dynamic one of this dtype, or the
    /// dynamic one back.
    fn from_view_mut(view: TensorViewMut<'_>) -> Result<TypedViewMut<'_, Self>, TensorViewMut<'_>>;
}

/// Zeroed vectors up to this size are allocated and zeroed in line:
/// `calloc`'s call and its `memset` cost a small call more (callgrind).
const SMALL_ZEROED_BYTES: usize = 4096;

macro_rules! element {
    ($ty:ty, $variant:ident, $word:ty, $zero:expr, words: pod) => {
        element!(@impl $ty, $variant, $word, $zero, s => bytemuck::cast_slice(s), bytemuck::cast_slice_mut(s), Some(bytemuck::cast_slice(s)), Some(bytemuck::cast_slice_mut(s)), zeroed: calloc);
    };
    ($ty:ty, $variant:ident, $zero:expr, words: self, zeroed: $zeroed:ident) => {
        element!(@impl $ty, $variant, $ty, $zero, s => s, s, { let _ = s; None }, { let _ = s; None }, zeroed: $zeroed);
    };
    (@zeroed calloc, $ty:ty, $len:ident) => {
        if $len <= SMALL_ZEROED_BYTES / std::mem::size_of::<$ty>() {
            element!(@zeroed fill, $ty, $len)
        } else {
            bytemuck::allocation::try_zeroed_slice_box::<$ty>($len).ok().map(Vec::from)
        }
    };
    (@zeroed fill, $ty:ty, $len:ident) => {{
        let mut v = Vec::new();
        v.try_reserve_exact($len).ok()?;
        v.resize($len, <$ty as Element>::zero());
        Some(v)
    }};
    (@impl $ty:ty, $variant:ident, $word:ty, $zero:expr, $s:ident => $words:expr, $words_mut:expr, $bytes:expr, $bytes_mut:expr, zeroed: $zeroed:ident) => {
        impl sealed::Sealed for $ty {}
        impl Element for $ty {
            const DTYPE: DType = DType::$variant;
            type Word = $word;
            #[inline]
            fn as_words($s: &[Self]) -> &[$word] {
                $words
            }
            #[inline]
            fn as_words_mut($s: &mut [Self]) -> &mut [$word] {
                $words_mut
            }
            #[inline]
            fn as_bytes($s: &[Self]) -> Option<&[u8]> {
                $bytes
            }
            #[inline]
            fn as_bytes_mut($s: &mut [Self]) -> Option<&mut [u8]> {
                $bytes_mut
            }
            #[inline]
            fn zero() -> Self {
                $zero
            }
            fn try_zeroed_vec(len: usize) -> Option<Vec<Self>> {
                element!(@zeroed $zeroed, $ty, len)
            }
            fn into_tensor(tensor: TypedTensor<Self>) -> Tensor {
                Tensor::$variant(tensor)
            }
            fn from_tensor(tensor: &Tensor) -> Option<&TypedTensor<Self>> {
                match tensor {
                    Tensor::$variant(t) => Some(t),
                    _ => None,
                }
            }
            fn from_tensor_mut(tensor: &mut Tensor) -> Option<&mut TypedTensor<Self>> {
                match tensor {
                    Tensor::$variant(t) => Some(t),
                    _ => None,
                }
            }
            fn from_tensor_owned(tensor: Tensor) -> Result<TypedTensor<Self>, Tensor> {
                match tensor {
                    Tensor::$variant(t) => Ok(t),
                    other => Err(other),
                }
            }
            fn into_view(view: TypedView<'_, Self>) -> TensorView<'_> {
                TensorView::$variant(view)
            }
            fn from_view(view: TensorView<'_>) -> Option<TypedView<'_, Self>> {
                match view {
                    TensorView::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn into_view_mut(view: TypedViewMut<'_, Self>) -> TensorViewMut<'_> {
                TensorViewMut::$variant(view)
            }
            fn from_view_mut(view: TensorViewMut<'_>) -> Result<TypedViewMut<'_, Self>, TensorViewMut<'_>> {
                match view {
                    TensorViewMut::$variant(v) => Ok(v),
                    other => Err(other),
                }
            }
        }
    };
}

// bool is not Pod (only 0 and 1 are valid), so it keeps its own kernel.
element!(bool, Bool, false, words: self, zeroed: calloc);
element!(i8, I8, u8, 0, words: pod);
element!(u8, U8, u8, 0, words: pod);
element!(i16, I16, u16, 0, words: pod);
element!(u16, U16, u16, 0, words: pod);
element!(f16, F16, u16, f16::ZERO, words: pod);
element!(bf16, BF16, u16, bf16::ZERO, words: pod);
element!(i32, I32, u32, 0, words: pod);
element!(u32, U32, u32, 0, words: pod);
element!(f32, F32, u32, 0.0, words: pod);
element!(i64, I64, u64, 0, words: pod);
element!(u64, U64, u64, 0, words: pod);
element!(f64, F64, u64, 0.0, words: pod);
// Complex32 is 4-byte aligned: a u64 word could be misaligned, [u32; 2] never is.
element!(Complex32, Complex64, [u32; 2], Complex32::new(0.0, 0.0), words: pod);
element!(Complex64, Complex128, [u64; 2], Complex64::new(0.0, 0.0), words: pod);
element!(String, String, String::new(), words: self, zeroed: fill);
