//! `TensorProto` ⇄ [`Tensor`] for all 16 dtypes.
//!
//! Decoding accepts `raw_data` (little-endian) and every typed field ONNX
//! assigns to a dtype: `float_data` (float, complex64 as pairs),
//! `double_data` (double, complex128 as pairs), `int32_data` (int32 and the
//! narrower ints, bool, and float16/bfloat16 bit patterns), `int64_data`,
//! `uint64_data` (uint32, uint64) and `string_data`. Every length is checked
//! against the dims *before* anything is allocated, so a header that claims
//! more elements than the message holds is an error, not an allocation.

use std::path::Path;

use bytemuck::Pod;
use gatherscatter::{bf16, f16, Complex32, Complex64, DType, Element, Tensor, TypedTensor};
use prost::Message;

use crate::error::{OnnxError, Result};
use crate::proto::tensor_proto::{DataLocation, DataType};
use crate::proto::TensorProto;

#[cfg(target_endian = "big")]
compile_error!("gatherscatter-onnx reads raw_data as native little-endian words");

/// How [`tensor_to_proto`] stores the elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// `raw_data` for every numeric dtype, `string_data` for strings: what
    /// `onnx.numpy_helper.from_array` writes.
    #[default]
    Raw,
    /// The typed repeated fields (`float_data`, `int32_data`, ...).
    TypedFields,
}

/// The name ONNX gives a `TensorProto.DataType` number, for messages.
pub fn onnx_type_name(id: i32) -> String {
    match DataType::try_from(id) {
        Ok(t) => t.as_str_name().to_string(),
        Err(_) => format!("data_type {id}"),
    }
}

/// The dtype of a `TensorProto.DataType` number, or an `unsupported` error
/// naming it.
///
/// `UNDEFINED` (0, also what a message without the field decodes to) and
/// numbers that name no ONNX type are malformed, not unsupported: a file
/// with them is not a tensor, whatever else it holds.
pub fn dtype_from_onnx(id: i32) -> Result<DType> {
    if id == DataType::Undefined as i32 || DataType::try_from(id).is_err() {
        return Err(OnnxError::Malformed(format!(
            "data_type is {}, which names no tensor element type (is this a TensorProto?)",
            onnx_type_name(id)
        )));
    }
    DType::from_onnx_id(id).ok_or_else(|| {
        OnnxError::Unsupported(format!(
            "ONNX element type {} is not supported (supported: {})",
            onnx_type_name(id),
            DType::ALL.map(|d| d.name()).join(", ")
        ))
    })
}

/// Decode a `TensorProto` into a tensor.
pub fn tensor_from_proto(proto: &TensorProto) -> Result<Tensor> {
    let name = proto.name();
    let dtype = dtype_from_onnx(proto.data_type())?;
    if proto.data_location == Some(DataLocation::External as i32) {
        return Err(OnnxError::Unsupported(format!(
            "tensor {name:?} keeps its data in an external file, which is not supported"
        )));
    }
    if proto.segment.is_some() {
        return Err(OnnxError::Unsupported(format!(
            "tensor {name:?} is a segment of a larger tensor, which is not supported"
        )));
    }
    let shape = proto
        .dims
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                OnnxError::Malformed(format!("tensor {name:?} has a negative dimension {d}"))
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    let count = gatherscatter::element_count(&shape).ok_or_else(|| {
        OnnxError::Malformed(format!(
            "tensor {name:?}: the element count of dims {shape:?} overflows"
        ))
    })?;
    let decoder = Decoder {
        proto,
        name,
        count,
        shape: &shape,
    };
    match dtype {
        DType::Bool => decoder.bool(),
        DType::I8 => decoder.narrow_int::<i8>(),
        DType::I16 => decoder.narrow_int::<i16>(),
        DType::U8 => decoder.narrow_int::<u8>(),
        DType::U16 => decoder.narrow_int::<u16>(),
        DType::I32 => decoder.plain::<i32>(&proto.int32_data, "int32_data"),
        DType::I64 => decoder.plain::<i64>(&proto.int64_data, "int64_data"),
        DType::U32 => decoder.u32(),
        DType::U64 => decoder.plain::<u64>(&proto.uint64_data, "uint64_data"),
        DType::F16 => decoder.half_bits(f16::from_bits),
        DType::BF16 => decoder.half_bits(bf16::from_bits),
        DType::F32 => decoder.plain::<f32>(&proto.float_data, "float_data"),
        DType::F64 => decoder.plain::<f64>(&proto.double_data, "double_data"),
        DType::Complex64 => decoder.complex(&proto.float_data, "float_data", Complex32::new),
        DType::Complex128 => decoder.complex(&proto.double_data, "double_data", Complex64::new),
        DType::String => decoder.strings(),
        other => Err(OnnxError::Unsupported(format!(
            "dtype {other} has no TensorProto decoding"
        ))),
    }
}

struct Decoder<'a> {
    proto: &'a TensorProto,
    name: &'a str,
    count: usize,
    shape: &'a [usize],
}

impl Decoder<'_> {
    fn tensor<T: Element>(&self, data: Vec<T>) -> Result<Tensor> {
        Tensor::new(self.shape.to_vec(), data).map_err(|e| OnnxError::Malformed(e.to_string()))
    }

    fn raw(&self) -> Option<&[u8]> {
        self.proto.raw_data.as_deref()
    }

    /// The raw bytes, checked to hold exactly `count` elements of `width` bytes.
    fn raw_checked(&self, raw: &[u8], width: usize, type_name: &str) -> Result<()> {
        let expected = self.count.checked_mul(width);
        if expected != Some(raw.len()) {
            return Err(OnnxError::Malformed(format!(
                "tensor {:?}: raw_data holds {} bytes but {} elements of {type_name} need {}",
                self.name,
                raw.len(),
                self.count,
                expected.map_or("more than usize::MAX".to_string(), |e| e.to_string())
            )));
        }
        Ok(())
    }

    fn field_checked<F>(&self, field: &[F], field_name: &str, per_element: usize) -> Result<()> {
        let expected = self.count.checked_mul(per_element);
        if expected != Some(field.len()) {
            return Err(OnnxError::Malformed(format!(
                "tensor {:?}: {field_name} holds {} values but dims call for {}",
                self.name,
                field.len(),
                expected.map_or("more than usize::MAX".to_string(), |e| e.to_string())
            )));
        }
        Ok(())
    }

    fn raw_pod<T: Pod>(&self, raw: &[u8], type_name: &str) -> Result<Vec<T>> {
        self.raw_checked(raw, std::mem::size_of::<T>(), type_name)?;
        Ok(bytemuck::pod_collect_to_vec(raw))
    }

    fn plain<T: Element + Pod>(&self, field: &[T], field_name: &str) -> Result<Tensor> {
        if let Some(raw) = self.raw() {
            return self.tensor(self.raw_pod::<T>(raw, T::DTYPE.name())?);
        }
        self.field_checked(field, field_name, 1)?;
        self.tensor(field.to_vec())
    }

    fn narrow_int<T: Element + Pod + TryFrom<i32>>(&self) -> Result<Tensor> {
        if let Some(raw) = self.raw() {
            return self.tensor(self.raw_pod::<T>(raw, T::DTYPE.name())?);
        }
        let field = &self.proto.int32_data;
        self.field_checked(field, "int32_data", 1)?;
        let values = field
            .iter()
            .map(|&v| T::try_from(v).map_err(|_| self.out_of_type(v, T::DTYPE)))
            .collect::<Result<Vec<T>>>()?;
        self.tensor(values)
    }

    fn out_of_type(&self, value: impl std::fmt::Display, dtype: DType) -> OnnxError {
        OnnxError::Malformed(format!(
            "tensor {:?}: value {value} does not fit {}",
            self.name,
            dtype.name()
        ))
    }

    fn bool(&self) -> Result<Tensor> {
        let bytes: Vec<u8> = match self.raw() {
            Some(raw) => {
                self.raw_checked(raw, 1, "bool")?;
                raw.to_vec()
            }
            None => {
                let field = &self.proto.int32_data;
                self.field_checked(field, "int32_data", 1)?;
                field
                    .iter()
                    .map(|&v| u8::try_from(v).map_err(|_| self.out_of_type(v, DType::Bool)))
                    .collect::<Result<_>>()?
            }
        };
        let values = bytes
            .into_iter()
            .map(|b| match b {
                0 => Ok(false),
                1 => Ok(true),
                other => Err(self.out_of_type(other, DType::Bool)),
            })
            .collect::<Result<Vec<bool>>>()?;
        self.tensor(values)
    }

    fn u32(&self) -> Result<Tensor> {
        if let Some(raw) = self.raw() {
            return self.tensor(self.raw_pod::<u32>(raw, "uint32")?);
        }
        let field = &self.proto.uint64_data;
        self.field_checked(field, "uint64_data", 1)?;
        let values = field
            .iter()
            .map(|&v| u32::try_from(v).map_err(|_| self.out_of_type(v, DType::U32)))
            .collect::<Result<Vec<u32>>>()?;
        self.tensor(values)
    }

    fn half_bits<T: Element>(&self, from_bits: fn(u16) -> T) -> Result<Tensor> {
        let bits: Vec<u16> = match self.raw() {
            Some(raw) => self.raw_pod::<u16>(raw, "16-bit float")?,
            None => {
                let field = &self.proto.int32_data;
                self.field_checked(field, "int32_data", 1)?;
                field
                    .iter()
                    .map(|&v| u16::try_from(v).map_err(|_| self.out_of_type(v, T::DTYPE)))
                    .collect::<Result<_>>()?
            }
        };
        self.tensor(bits.into_iter().map(from_bits).collect::<Vec<T>>())
    }

    fn complex<F: Pod, C: Element + Pod>(
        &self,
        field: &[F],
        field_name: &str,
        make: fn(F, F) -> C,
    ) -> Result<Tensor> {
        if let Some(raw) = self.raw() {
            return self.tensor(self.raw_pod::<C>(raw, C::DTYPE.name())?);
        }
        self.field_checked(field, field_name, 2)?;
        let values = field
            .chunks_exact(2)
            .map(|p| make(p[0], p[1]))
            .collect::<Vec<C>>();
        self.tensor(values)
    }

    fn strings(&self) -> Result<Tensor> {
        if self.raw().is_some_and(|r| !r.is_empty()) {
            return Err(OnnxError::Malformed(format!(
                "tensor {:?}: a string tensor cannot use raw_data",
                self.name
            )));
        }
        let field = &self.proto.string_data;
        self.field_checked(field, "string_data", 1)?;
        let values = field
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                String::from_utf8(bytes.clone()).map_err(|_| {
                    OnnxError::Unsupported(format!(
                        "tensor {:?}: string element {i} is not UTF-8; only UTF-8 strings are supported",
                        self.name
                    ))
                })
            })
            .collect::<Result<Vec<String>>>()?;
        self.tensor(values)
    }
}

/// Encode a tensor as a `TensorProto` named `name`.
///
/// Errors only for a dtype a newer `gatherscatter` adds and this crate does
/// not know yet.
pub fn tensor_to_proto(tensor: &Tensor, name: &str, encoding: Encoding) -> Result<TensorProto> {
    let mut proto = TensorProto {
        dims: tensor.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(tensor.dtype().onnx_id()),
        name: Some(name.to_string()),
        ..TensorProto::default()
    };
    if let Tensor::String(t) = tensor {
        proto.string_data = t.data().iter().map(|s| s.as_bytes().to_vec()).collect();
        return Ok(proto);
    }
    let stored = match encoding {
        Encoding::Raw => raw_bytes(tensor).map(|raw| proto.raw_data = Some(raw)),
        Encoding::TypedFields => fill_typed_fields(tensor, &mut proto),
    };
    stored.ok_or_else(|| {
        OnnxError::Unsupported(format!(
            "dtype {} has no TensorProto encoding",
            tensor.dtype()
        ))
    })?;
    Ok(proto)
}

fn raw_bytes(tensor: &Tensor) -> Option<Vec<u8>> {
    fn bytes<T: Pod>(data: &[T]) -> Vec<u8> {
        bytemuck::cast_slice(data).to_vec()
    }
    Some(match tensor {
        Tensor::Bool(t) => t.data().iter().map(|&b| u8::from(b)).collect(),
        Tensor::I8(t) => bytes(t.data()),
        Tensor::I16(t) => bytes(t.data()),
        Tensor::I32(t) => bytes(t.data()),
        Tensor::I64(t) => bytes(t.data()),
        Tensor::U8(t) => bytes(t.data()),
        Tensor::U16(t) => bytes(t.data()),
        Tensor::U32(t) => bytes(t.data()),
        Tensor::U64(t) => bytes(t.data()),
        Tensor::F16(t) => bytes(t.data()),
        Tensor::BF16(t) => bytes(t.data()),
        Tensor::F32(t) => bytes(t.data()),
        Tensor::F64(t) => bytes(t.data()),
        Tensor::Complex64(t) => bytes(t.data()),
        Tensor::Complex128(t) => bytes(t.data()),
        _ => return None,
    })
}

fn fill_typed_fields(tensor: &Tensor, proto: &mut TensorProto) -> Option<()> {
    fn widen<T: Copy + Into<i32>>(t: &TypedTensor<T>) -> Vec<i32> {
        t.data().iter().map(|&v| v.into()).collect()
    }
    match tensor {
        Tensor::Bool(t) => proto.int32_data = t.data().iter().map(|&b| i32::from(b)).collect(),
        Tensor::I8(t) => proto.int32_data = widen(t),
        Tensor::I16(t) => proto.int32_data = widen(t),
        Tensor::U8(t) => proto.int32_data = widen(t),
        Tensor::U16(t) => proto.int32_data = widen(t),
        Tensor::I32(t) => proto.int32_data = t.data().to_vec(),
        Tensor::F16(t) => proto.int32_data = t.data().iter().map(|v| v.to_bits().into()).collect(),
        Tensor::BF16(t) => proto.int32_data = t.data().iter().map(|v| v.to_bits().into()).collect(),
        Tensor::I64(t) => proto.int64_data = t.data().to_vec(),
        Tensor::U32(t) => proto.uint64_data = t.data().iter().map(|&v| v.into()).collect(),
        Tensor::U64(t) => proto.uint64_data = t.data().to_vec(),
        Tensor::F32(t) => proto.float_data = t.data().to_vec(),
        Tensor::F64(t) => proto.double_data = t.data().to_vec(),
        Tensor::Complex64(t) => {
            proto.float_data = t.data().iter().flat_map(|c| [c.re, c.im]).collect()
        }
        Tensor::Complex128(t) => {
            proto.double_data = t.data().iter().flat_map(|c| [c.re, c.im]).collect()
        }
        _ => return None,
    }
    Some(())
}

/// Decode a serialized `TensorProto`; `what` names it in errors.
pub fn decode_tensor(bytes: &[u8], what: &str) -> Result<(String, Tensor)> {
    let proto = TensorProto::decode(bytes).map_err(|source| OnnxError::Decode {
        what: what.to_string(),
        source,
    })?;
    Ok((proto.name().to_string(), tensor_from_proto(&proto)?))
}

/// Serialize a tensor as a `TensorProto` (raw_data encoding).
pub fn encode_tensor(tensor: &Tensor, name: &str) -> Result<Vec<u8>> {
    Ok(tensor_to_proto(tensor, name, Encoding::Raw)?.encode_to_vec())
}

/// Read a `.pb` file holding one `TensorProto`: its name and its tensor.
/// Errors name the file.
/// Errors name the file; only a regular file is read (see
/// [`crate::file::read_file`]).
pub fn read_tensor_file(path: &Path) -> Result<(String, Tensor)> {
    read_tensor_file_limited(path, u64::MAX)
}

/// [`read_tensor_file`] of a file of at most `max_bytes` bytes.
pub fn read_tensor_file_limited(path: &Path, max_bytes: u64) -> Result<(String, Tensor)> {
    let bytes = crate::file::read_file(path, max_bytes)?;
    decode_tensor(&bytes, "TensorProto").map_err(|e| e.in_file(path))
}
