//! numpy arrays as the core's tensors, and back, without copying the elements.
//!
//! An input that is a C-contiguous, aligned, native-byte-order numpy array of
//! a supported dtype is read where it lies. Anything else goes through one
//! `numpy.ascontiguousarray` (other layouts, byte orders) or `numpy.asarray`
//! (lists, CPU torch tensors, which `asarray` wraps without a copy). Results
//! are handed to numpy as they are: the core's `Vec` becomes the array's
//! memory. Strings are the exception both ways: numpy's fixed-width UCS4
//! (`U`) and byte (`S`) cells are decoded into the core's `String`s and
//! encoded back, because the core's string tensor holds UTF-8 strings.

use gatherscatter::{bf16, Complex32, Complex64, Tensor, TensorView, TensorViewMut, TypedView};
use gatherscatter::{f16, TypedViewMut};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{
    IntoPyArray, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyReadwriteArrayDyn, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::errors::to_py_err;

/// How a numpy string array stores its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrKind {
    /// `U<n>`: `n` UCS4 code points per cell, trailing NULs not part of the string.
    Unicode,
    /// `S<n>`: `n` bytes per cell; each byte is one char U+0000..U+00FF in
    /// the core (Latin-1), so any bytes survive the trip and concatenation
    /// (string `add`) stays bytewise.
    Bytes,
}

/// The numpy string dtype a string result takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StrType {
    pub kind: StrKind,
    /// Characters per cell of the input (numpy keeps it for gathers).
    pub width: usize,
}

/// One input array, borrowed from numpy (or decoded, for strings).
pub(crate) enum Input<'py> {
    Bool(PyReadonlyArrayDyn<'py, bool>),
    I8(PyReadonlyArrayDyn<'py, i8>),
    I16(PyReadonlyArrayDyn<'py, i16>),
    I32(PyReadonlyArrayDyn<'py, i32>),
    I64(PyReadonlyArrayDyn<'py, i64>),
    U8(PyReadonlyArrayDyn<'py, u8>),
    U16(PyReadonlyArrayDyn<'py, u16>),
    U32(PyReadonlyArrayDyn<'py, u32>),
    U64(PyReadonlyArrayDyn<'py, u64>),
    F16(PyReadonlyArrayDyn<'py, f16>),
    /// `ml_dtypes.bfloat16`, read through a `uint16` view of the same memory.
    BF16(PyReadonlyArrayDyn<'py, u16>),
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
    C64(PyReadonlyArrayDyn<'py, Complex32>),
    C128(PyReadonlyArrayDyn<'py, Complex64>),
    Strings {
        shape: Vec<usize>,
        values: Vec<String>,
        dtype: StrType,
    },
}

fn typed<'a, T>(array: &'a PyReadonlyArrayDyn<'_, T>) -> PyResult<TensorView<'a>>
where
    T: numpy::Element + gatherscatter::Element,
{
    let view = TypedView::new(array.shape(), array.as_slice()?).map_err(to_py_err)?;
    Ok(view.into())
}

impl Input<'_> {
    /// The array as the core's borrowed tensor.
    pub(crate) fn view(&self) -> PyResult<TensorView<'_>> {
        match self {
            Input::Bool(a) => typed(a),
            Input::I8(a) => typed(a),
            Input::I16(a) => typed(a),
            Input::I32(a) => typed(a),
            Input::I64(a) => typed(a),
            Input::U8(a) => typed(a),
            Input::U16(a) => typed(a),
            Input::U32(a) => typed(a),
            Input::U64(a) => typed(a),
            Input::F16(a) => typed(a),
            Input::BF16(a) => {
                let values: &[bf16] = bytemuck::cast_slice(a.as_slice()?);
                Ok(TypedView::new(a.shape(), values).map_err(to_py_err)?.into())
            }
            Input::F32(a) => typed(a),
            Input::F64(a) => typed(a),
            Input::C64(a) => typed(a),
            Input::C128(a) => typed(a),
            Input::Strings { shape, values, .. } => {
                Ok(TypedView::new(shape, values).map_err(to_py_err)?.into())
            }
        }
    }

    /// The numpy string dtype, for string inputs.
    pub(crate) fn str_type(&self) -> Option<StrType> {
        match self {
            Input::Strings { dtype, .. } => Some(*dtype),
            _ => None,
        }
    }
}

/// Bytes of a view's elements (a string counts as its `String` header), to
/// decide when a call is large enough to leave the calling thread.
pub(crate) fn bytes(view: &TensorView<'_>) -> usize {
    view.len().saturating_mul(element_bytes(view))
}

/// The bytes of one of `view`'s elements (a `String`'s header for strings).
pub(crate) fn element_bytes(view: &TensorView<'_>) -> usize {
    use gatherscatter::DType::*;
    match view.dtype() {
        Bool | I8 | U8 => 1,
        I16 | U16 | F16 | BF16 => 2,
        I32 | U32 | F32 => 4,
        I64 | U64 | F64 | Complex64 => 8,
        Complex128 => 16,
        _ => std::mem::size_of::<std::string::String>(),
    }
}

fn numpy_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NUMPY
        .get_or_try_init(py, || py.import("numpy").map(Bound::unbind))
        .map(|m| m.bind(py))
}

/// `ml_dtypes.bfloat16`, if that package is installed.
fn bfloat16_type(py: Python<'_>) -> Option<&Bound<'_, PyAny>> {
    static BF16: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();
    BF16.get_or_init(py, || {
        py.import("ml_dtypes")
            .and_then(|m| m.getattr("bfloat16"))
            .ok()
            .map(Bound::unbind)
    })
    .as_ref()
    .map(|t| t.bind(py))
}

/// A numpy array for any object `numpy.asarray` accepts.
fn as_ndarray<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(array) = obj.cast::<PyUntypedArray>() {
        return Ok(array.clone());
    }
    let array = numpy_module(obj.py())?
        .getattr(intern!(obj.py(), "asarray"))?
        .call1((obj,))?;
    Ok(array.cast_into::<PyUntypedArray>()?)
}

/// Whether the array can be read in place: C order and native bytes
/// (alignment is checked once the element type is known, in [`readonly`]).
fn readable_in_place(array: &Bound<'_, PyUntypedArray>) -> bool {
    array.is_c_contiguous() && array.dtype().is_native_byteorder() != Some(false)
}

/// One C-contiguous, native-byte-order copy (only when the array is not).
fn contiguous<'py>(array: Bound<'py, PyUntypedArray>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if readable_in_place(&array) {
        return Ok(array);
    }
    let py = array.py();
    let native = array
        .dtype()
        .call_method1(intern!(py, "newbyteorder"), ("=",))?;
    let copy = numpy_module(py)?
        .getattr(intern!(py, "ascontiguousarray"))?
        .call1((array, native))?;
    Ok(copy.cast_into::<PyUntypedArray>()?)
}

fn readonly<'py, T: numpy::Element>(
    array: &Bound<'py, PyUntypedArray>,
) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    let mut typed = array.cast::<PyArrayDyn<T>>()?.clone();
    if !is_aligned(&typed) {
        // A view into a byte buffer at an odd offset: one aligned copy.
        typed = typed
            .call_method0(intern!(array.py(), "copy"))?
            .cast_into()?;
    }
    typed
        .try_readonly()
        .map_err(|e| PyValueError::new_err(format!("cannot read the array: {e}")))
}

fn is_aligned<T: numpy::Element>(array: &Bound<'_, PyArrayDyn<T>>) -> bool {
    (array.data() as usize).is_multiple_of(std::mem::align_of::<T>())
}

/// Borrow (or, for other layouts, copy once) an argument as a core tensor.
/// `what` names the argument in error messages.
pub(crate) fn input<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Input<'py>> {
    let array = contiguous(as_ndarray(obj)?)?;
    let py = array.py();
    let dtype = array.dtype();
    let (kind, size) = (dtype.kind(), dtype.itemsize());
    Ok(match (kind, size) {
        (b'b', 1) => Input::Bool(readonly(&array)?),
        (b'i', 1) => Input::I8(readonly(&array)?),
        (b'i', 2) => Input::I16(readonly(&array)?),
        (b'i', 4) => Input::I32(readonly(&array)?),
        (b'i', 8) => Input::I64(readonly(&array)?),
        (b'u', 1) => Input::U8(readonly(&array)?),
        (b'u', 2) => Input::U16(readonly(&array)?),
        (b'u', 4) => Input::U32(readonly(&array)?),
        (b'u', 8) => Input::U64(readonly(&array)?),
        (b'f', 2) => Input::F16(readonly(&array)?),
        (b'f', 4) => Input::F32(readonly(&array)?),
        (b'f', 8) => Input::F64(readonly(&array)?),
        (b'c', 8) => Input::C64(readonly(&array)?),
        (b'c', 16) => Input::C128(readonly(&array)?),
        (b'U', _) | (b'S', _) => strings(&array, kind == b'U')?,
        _ if is_bfloat16(py, &dtype)? => {
            let words = array.call_method1(intern!(py, "view"), (intern!(py, "uint16"),))?;
            Input::BF16(readonly(&words.cast_into::<PyUntypedArray>()?)?)
        }
        _ => {
            return Err(PyTypeError::new_err(format!(
                "{what} has dtype {}, which gatherscatter does not take (bool, int8-64, uint8-64, \
                 float16/32/64, complex64/128, str_, bytes_, ml_dtypes.bfloat16)",
                dtype.str()?
            )))
        }
    })
}

fn is_bfloat16(py: Python<'_>, dtype: &Bound<'_, numpy::PyArrayDescr>) -> PyResult<bool> {
    match bfloat16_type(py) {
        Some(bf16_type) => dtype.eq(bf16_type),
        None => Ok(false),
    }
}

/// Decode a `U`/`S` array's cells into the core's strings.
fn strings<'py>(array: &Bound<'py, PyUntypedArray>, unicode: bool) -> PyResult<Input<'py>> {
    let py = array.py();
    let shape = array.shape().to_vec();
    let count: usize = shape.iter().product();
    let itemsize = array.dtype().itemsize();
    let (kind, width) = if unicode {
        (StrKind::Unicode, itemsize / 4)
    } else {
        (StrKind::Bytes, itemsize)
    };
    let mut values = Vec::with_capacity(count);
    if width > 0 && count > 0 {
        let word = if unicode { "uint32" } else { "uint8" };
        let flat = array
            .call_method1(intern!(py, "reshape"), (-1,))?
            .call_method1(intern!(py, "view"), (word,))?
            .cast_into::<PyUntypedArray>()?;
        if unicode {
            let codes: PyReadonlyArrayDyn<'_, u32> = readonly(&flat)?;
            for cell in codes.as_slice()?.chunks_exact(width) {
                values.push(decode_ucs4(cell)?);
            }
        } else {
            let bytes: PyReadonlyArrayDyn<'_, u8> = readonly(&flat)?;
            for cell in bytes.as_slice()?.chunks_exact(width) {
                values.push(decode_bytes(cell));
            }
        }
    } else {
        values.resize(count, String::new());
    }
    Ok(Input::Strings {
        shape,
        values,
        dtype: StrType { kind, width },
    })
}

fn decode_ucs4(cell: &[u32]) -> PyResult<String> {
    let used = cell
        .iter()
        .rposition(|&c| c != 0)
        .map_or(0, |last| last + 1);
    cell[..used]
        .iter()
        .map(|&c| {
            char::from_u32(c).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "a str_ cell holds {c:#x}, which is not a Unicode scalar value"
                ))
            })
        })
        .collect()
}

fn decode_bytes(cell: &[u8]) -> String {
    let used = cell
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    cell[..used].iter().map(|&b| char::from(b)).collect()
}

/// A caller's `out=` array, borrowed for writing.
pub(crate) enum Output<'py> {
    Bool(PyReadwriteArrayDyn<'py, bool>),
    I8(PyReadwriteArrayDyn<'py, i8>),
    I16(PyReadwriteArrayDyn<'py, i16>),
    I32(PyReadwriteArrayDyn<'py, i32>),
    I64(PyReadwriteArrayDyn<'py, i64>),
    U8(PyReadwriteArrayDyn<'py, u8>),
    U16(PyReadwriteArrayDyn<'py, u16>),
    U32(PyReadwriteArrayDyn<'py, u32>),
    U64(PyReadwriteArrayDyn<'py, u64>),
    F16(PyReadwriteArrayDyn<'py, f16>),
    BF16(PyReadwriteArrayDyn<'py, u16>),
    F32(PyReadwriteArrayDyn<'py, f32>),
    F64(PyReadwriteArrayDyn<'py, f64>),
    C64(PyReadwriteArrayDyn<'py, Complex32>),
    C128(PyReadwriteArrayDyn<'py, Complex64>),
}

fn readwrite<'py, T: numpy::Element>(
    array: &Bound<'py, PyUntypedArray>,
) -> PyResult<PyReadwriteArrayDyn<'py, T>> {
    let typed = array.cast::<PyArrayDyn<T>>()?;
    if !is_aligned(typed) {
        return Err(PyValueError::new_err("out is not aligned for its dtype"));
    }
    typed.try_readwrite().map_err(|e| {
        PyValueError::new_err(format!(
            "out cannot be written: {e} (is it read-only, or does it share memory with an input?)"
        ))
    })
}

/// Borrow `out=` for writing: a writeable, C-contiguous numpy array of a
/// numeric dtype (the core then checks its dtype and shape).
pub(crate) fn output<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Output<'py>> {
    let py = obj.py();
    let array = obj.cast::<PyUntypedArray>().map_err(|_| {
        PyTypeError::new_err(format!(
            "out must be a numpy.ndarray, not {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    if !array.is_c_contiguous() || array.dtype().is_native_byteorder() == Some(false) {
        return Err(PyValueError::new_err(
            "out must be C-contiguous and in native byte order: results are written into it directly",
        ));
    }
    let dtype = array.dtype();
    Ok(match (dtype.kind(), dtype.itemsize()) {
        (b'b', 1) => Output::Bool(readwrite(array)?),
        (b'i', 1) => Output::I8(readwrite(array)?),
        (b'i', 2) => Output::I16(readwrite(array)?),
        (b'i', 4) => Output::I32(readwrite(array)?),
        (b'i', 8) => Output::I64(readwrite(array)?),
        (b'u', 1) => Output::U8(readwrite(array)?),
        (b'u', 2) => Output::U16(readwrite(array)?),
        (b'u', 4) => Output::U32(readwrite(array)?),
        (b'u', 8) => Output::U64(readwrite(array)?),
        (b'f', 2) => Output::F16(readwrite(array)?),
        (b'f', 4) => Output::F32(readwrite(array)?),
        (b'f', 8) => Output::F64(readwrite(array)?),
        (b'c', 8) => Output::C64(readwrite(array)?),
        (b'c', 16) => Output::C128(readwrite(array)?),
        _ if is_bfloat16(py, &dtype)? => {
            let words = array.call_method1(intern!(py, "view"), (intern!(py, "uint16"),))?;
            Output::BF16(readwrite(&words.cast_into::<PyUntypedArray>()?)?)
        }
        _ => {
            return Err(PyTypeError::new_err(format!(
                "out has dtype {}; out= takes the numeric dtypes and bfloat16 (string results are always fresh arrays)",
                dtype.str()?
            )))
        }
    })
}

impl Output<'_> {
    /// The array as the core's mutable tensor, with `shape` (a copy of the
    /// array's own shape, kept by the caller for the borrow's length).
    pub(crate) fn view_mut<'a>(&'a mut self, shape: &'a [usize]) -> PyResult<TensorViewMut<'a>> {
        fn typed_out<'a, T>(
            array: &'a mut PyReadwriteArrayDyn<'_, T>,
            shape: &'a [usize],
        ) -> PyResult<TensorViewMut<'a>>
        where
            T: numpy::Element + gatherscatter::Element,
        {
            let data = array.as_slice_mut()?;
            Ok(TypedViewMut::new(shape, data)
                .map_err(crate::errors::to_py_err)?
                .into())
        }
        match self {
            Output::Bool(a) => typed_out(a, shape),
            Output::I8(a) => typed_out(a, shape),
            Output::I16(a) => typed_out(a, shape),
            Output::I32(a) => typed_out(a, shape),
            Output::I64(a) => typed_out(a, shape),
            Output::U8(a) => typed_out(a, shape),
            Output::U16(a) => typed_out(a, shape),
            Output::U32(a) => typed_out(a, shape),
            Output::U64(a) => typed_out(a, shape),
            Output::F16(a) => typed_out(a, shape),
            Output::BF16(a) => {
                let words = a.as_slice_mut()?;
                let values: &mut [bf16] = bytemuck::cast_slice_mut(words);
                Ok(TypedViewMut::new(shape, values)
                    .map_err(crate::errors::to_py_err)?
                    .into())
            }
            Output::F32(a) => typed_out(a, shape),
            Output::F64(a) => typed_out(a, shape),
            Output::C64(a) => typed_out(a, shape),
            Output::C128(a) => typed_out(a, shape),
        }
    }

    /// The array's shape.
    pub(crate) fn shape(&self) -> Vec<usize> {
        match self {
            Output::Bool(a) => a.shape().to_vec(),
            Output::I8(a) => a.shape().to_vec(),
            Output::I16(a) => a.shape().to_vec(),
            Output::I32(a) => a.shape().to_vec(),
            Output::I64(a) => a.shape().to_vec(),
            Output::U8(a) => a.shape().to_vec(),
            Output::U16(a) | Output::BF16(a) => a.shape().to_vec(),
            Output::U32(a) => a.shape().to_vec(),
            Output::U64(a) => a.shape().to_vec(),
            Output::F16(a) => a.shape().to_vec(),
            Output::F32(a) => a.shape().to_vec(),
            Output::F64(a) => a.shape().to_vec(),
            Output::C64(a) => a.shape().to_vec(),
            Output::C128(a) => a.shape().to_vec(),
        }
    }
}

/// Hand a fresh result to numpy: the tensor's `Vec` becomes the array's memory.
pub(crate) fn result<'py>(
    py: Python<'py>,
    tensor: Tensor,
    strings: Option<StrType>,
) -> PyResult<Bound<'py, PyAny>> {
    fn array<'py, T>(
        py: Python<'py>,
        shape: Vec<usize>,
        data: Vec<T>,
    ) -> PyResult<Bound<'py, PyAny>>
    where
        T: numpy::Element,
    {
        let array = ArrayD::from_shape_vec(IxDyn(&shape), data)
            .map_err(|e| PyValueError::new_err(format!("internal shape error: {e}")))?;
        Ok(array.into_pyarray(py).into_any())
    }
    macro_rules! numeric {
        ($t:expr) => {{
            let (shape, data) = $t.into_parts();
            array(py, shape, data)
        }};
    }
    match tensor {
        Tensor::Bool(t) => numeric!(t),
        Tensor::I8(t) => numeric!(t),
        Tensor::I16(t) => numeric!(t),
        Tensor::I32(t) => numeric!(t),
        Tensor::I64(t) => numeric!(t),
        Tensor::U8(t) => numeric!(t),
        Tensor::U16(t) => numeric!(t),
        Tensor::U32(t) => numeric!(t),
        Tensor::U64(t) => numeric!(t),
        Tensor::F16(t) => numeric!(t),
        Tensor::F32(t) => numeric!(t),
        Tensor::F64(t) => numeric!(t),
        Tensor::Complex64(t) => numeric!(t),
        Tensor::Complex128(t) => numeric!(t),
        Tensor::BF16(t) => {
            let (shape, data) = t.into_parts();
            let words: Vec<u16> = bytemuck::allocation::cast_vec(data);
            let words = array(py, shape, words)?;
            let bf16_type = bfloat16_type(py)
                .ok_or_else(|| PyTypeError::new_err("a bfloat16 result needs ml_dtypes"))?;
            words.call_method1(intern!(py, "view"), (bf16_type,))
        }
        Tensor::String(t) => {
            let (shape, values) = t.into_parts();
            let dtype = strings.unwrap_or(StrType {
                kind: StrKind::Unicode,
                width: 0,
            });
            encode_strings(py, &shape, &values, dtype)
        }
        other => Err(PyTypeError::new_err(format!(
            "a result of dtype {} has no numpy form",
            other.dtype()
        ))),
    }
}

/// numpy's `U`/`S` array of the strings, as wide as the input or the
/// longest string (a concatenating `add` can grow them), at least 1.
fn encode_strings<'py>(
    py: Python<'py>,
    shape: &[usize],
    values: &[String],
    dtype: StrType,
) -> PyResult<Bound<'py, PyAny>> {
    let longest = values.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    let width = dtype.width.max(longest).max(1);
    let np = numpy_module(py)?;
    let (name, cells) = match dtype.kind {
        StrKind::Unicode => {
            let mut codes = vec![0u32; values.len() * width];
            for (cell, s) in codes.chunks_exact_mut(width).zip(values) {
                for (slot, c) in cell.iter_mut().zip(s.chars()) {
                    *slot = c as u32;
                }
            }
            (format!("U{width}"), codes.into_pyarray(py).into_any())
        }
        StrKind::Bytes => {
            let mut bytes = vec![0u8; values.len() * width];
            for (cell, s) in bytes.chunks_exact_mut(width).zip(values) {
                for (slot, c) in cell.iter_mut().zip(s.chars()) {
                    // Every char came from one byte (Latin-1), so it fits.
                    *slot = u8::try_from(u32::from(c)).unwrap_or(b'?');
                }
            }
            (format!("S{width}"), bytes.into_pyarray(py).into_any())
        }
    };
    let dtype = np.getattr(intern!(py, "dtype"))?.call1((name,))?;
    cells
        .call_method1(intern!(py, "view"), (dtype,))?
        .call_method1(intern!(py, "reshape"), (shape.to_vec(),))
}
