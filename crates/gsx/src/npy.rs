//! `.npy` files: numpy's format, read with memory mapping for large arrays.
//!
//! Supported element types are those with an ONNX counterpart: `b1`, `i1`..`i8`,
//! `u1`..`u8`, `f2`, `f4`, `f8`, `c8`, `c16`, unicode `U<n>` and bytes `S<n>`
//! (decoded as UTF-8), in either byte order and in C or Fortran order. Object,
//! datetime, structured and other types are reported as unsupported.

use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use gatherscatter::{f16, Complex32, Complex64, DType, Element, Tensor, TensorView, TypedView};
use memmap2::Mmap;

use crate::error::CliError;

/// Data of at least this many bytes is memory-mapped instead of read.
pub const MMAP_THRESHOLD: usize = 1 << 20;

const MAGIC: &[u8] = b"\x93NUMPY";
/// numpy aligns the data of files it writes to 64 bytes.
pub const ALIGN: usize = 64;

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The element type.
    pub kind: ElementKind,
    /// Column-major data.
    pub fortran_order: bool,
    /// The dims.
    pub shape: Vec<usize>,
    /// Where the data starts.
    pub data_offset: usize,
}

/// A numpy element type as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementKind {
    /// A fixed-width number or bool; `big_endian` for `>` descrs.
    Plain {
        /// The dtype.
        dtype: DType,
        /// Stored big-endian.
        big_endian: bool,
    },
    /// `U<n>`: n UCS-4 code points per element.
    Unicode {
        /// Code points per element.
        chars: usize,
        /// Stored big-endian.
        big_endian: bool,
    },
    /// `S<n>`: n bytes per element.
    Bytes {
        /// Bytes per element.
        len: usize,
    },
}

impl ElementKind {
    fn item_size(self) -> Option<usize> {
        match self {
            ElementKind::Plain { dtype, .. } => Some(plain_size(dtype)),
            ElementKind::Unicode { chars, .. } => chars.checked_mul(4),
            ElementKind::Bytes { len } => Some(len),
        }
    }
}

fn plain_size(dtype: DType) -> usize {
    match dtype {
        DType::Bool | DType::I8 | DType::U8 => 1,
        DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
        DType::I32 | DType::U32 | DType::F32 => 4,
        DType::I64 | DType::U64 | DType::F64 | DType::Complex64 => 8,
        DType::Complex128 => 16,
        _ => 0,
    }
}

/// A loaded array: owned, or a view into a memory-mapped file.
#[derive(Debug)]
pub enum Loaded {
    /// Decoded into memory.
    Owned(Tensor),
    /// Little-endian, C-order, aligned data used in place.
    Mapped {
        /// The mapping of the whole file.
        map: Mmap,
        /// Where the data starts.
        offset: usize,
        /// The element type.
        dtype: DType,
        /// The dims.
        shape: Vec<usize>,
    },
}

impl Loaded {
    /// Borrow as a view, without copying.
    pub fn view(&self) -> Result<TensorView<'_>, CliError> {
        match self {
            Loaded::Owned(t) => Ok(t.into()),
            Loaded::Mapped {
                map,
                offset,
                dtype,
                shape,
            } => {
                let bytes = &map[*offset..];
                fn typed<'a, T: Element + bytemuck::Pod>(
                    shape: &'a [usize],
                    bytes: &'a [u8],
                ) -> Result<TensorView<'a>, CliError> {
                    let count: usize = shape.iter().product();
                    let len = count * std::mem::size_of::<T>();
                    let data: &[T] = bytemuck::try_cast_slice(&bytes[..len])
                        .map_err(|e| CliError::internal(format!("mapped data: {e}")))?;
                    Ok(TypedView::new(shape, data)?.into())
                }
                match dtype {
                    DType::I8 => typed::<i8>(shape, bytes),
                    DType::I16 => typed::<i16>(shape, bytes),
                    DType::I32 => typed::<i32>(shape, bytes),
                    DType::I64 => typed::<i64>(shape, bytes),
                    DType::U8 => typed::<u8>(shape, bytes),
                    DType::U16 => typed::<u16>(shape, bytes),
                    DType::U32 => typed::<u32>(shape, bytes),
                    DType::U64 => typed::<u64>(shape, bytes),
                    DType::F16 => typed::<f16>(shape, bytes),
                    DType::F32 => typed::<f32>(shape, bytes),
                    DType::F64 => typed::<f64>(shape, bytes),
                    DType::Complex64 => typed::<Complex32>(shape, bytes),
                    DType::Complex128 => typed::<Complex64>(shape, bytes),
                    other => Err(CliError::internal(format!("{other} is never mapped"))),
                }
            }
        }
    }

    /// True if the data is used in place from a mapping.
    pub fn is_mapped(&self) -> bool {
        matches!(self, Loaded::Mapped { .. })
    }
}

/// Where the header ends, from the first 12 bytes, if they say.
fn header_end(prefix: &[u8]) -> Option<usize> {
    match prefix.get(6)? {
        1 => Some(10 + usize::from(u16::from_le_bytes([*prefix.get(8)?, *prefix.get(9)?]))),
        2 | 3 => {
            let len: [u8; 4] = prefix.get(8..12)?.try_into().ok()?;
            Some(12usize.saturating_add(u32::from_le_bytes(len) as usize))
        }
        _ => None,
    }
}

fn alignment(dtype: DType) -> usize {
    match dtype {
        DType::Complex64 => 4,
        DType::Complex128 => 8,
        other => plain_size(other).max(1),
    }
}

/// Parse the header at the start of `bytes` (which must hold at least the
/// whole header). Errors name `path`.
pub fn parse_header(bytes: &[u8], path: &Path) -> Result<Header, CliError> {
    let bad = |message: String| CliError::bad_file(path, message);
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("not a .npy file (no \\x93NUMPY magic)".into()));
    }
    let (len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("truncated header".into()));
            }
            let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (len as usize, 12)
        }
        v => return Err(bad(format!(".npy format version {v} is not supported"))),
    };
    let end = start + len;
    if bytes.len() < end {
        return Err(bad(format!(
            "the header claims {len} bytes, the file holds {}",
            bytes.len() - start
        )));
    }
    let text = std::str::from_utf8(&bytes[start..end])
        .map_err(|_| bad("the header is not text".into()))?;
    let dict = HeaderDict::parse(text).map_err(|m| bad(format!("bad header {text:?}: {m}")))?;
    let kind = parse_descr(&dict.descr)
        .map_err(|m| CliError::unsupported(format!("{}: {m}", path.display())))?;
    Ok(Header {
        kind,
        fortran_order: dict.fortran_order,
        shape: dict.shape,
        data_offset: end,
    })
}

struct HeaderDict {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

impl HeaderDict {
    /// The Python dict literal numpy writes, e.g.
    /// `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`.
    fn parse(text: &str) -> Result<HeaderDict, String> {
        let body = text
            .trim()
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or("not a dict")?;
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        let mut rest = body.trim_start();
        while !rest.is_empty() {
            let (key, after) = take_string(rest)?;
            let after = after
                .trim_start()
                .strip_prefix(':')
                .ok_or("expected ':'")?
                .trim_start();
            let after = match key.as_str() {
                "descr" => {
                    if after.starts_with('[') {
                        return Err("structured dtypes are not supported".into());
                    }
                    let (value, after) = take_string(after)?;
                    descr = Some(value);
                    after
                }
                "fortran_order" => {
                    if let Some(a) = after.strip_prefix("True") {
                        fortran = Some(true);
                        a
                    } else if let Some(a) = after.strip_prefix("False") {
                        fortran = Some(false);
                        a
                    } else {
                        return Err("fortran_order is not True or False".into());
                    }
                }
                "shape" => {
                    let inner_end = after.find(')').ok_or("shape is not a tuple")?;
                    let inner = after.strip_prefix('(').ok_or("shape is not a tuple")?;
                    let dims = inner[..inner_end - 1]
                        .split(',')
                        .map(str::trim)
                        .filter(|d| !d.is_empty())
                        .map(|d| {
                            d.trim_end_matches('L')
                                .parse::<usize>()
                                .map_err(|_| format!("bad dim {d:?}"))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    shape = Some(dims);
                    &after[inner_end + 1..]
                }
                other => return Err(format!("unexpected key {other:?}")),
            };
            let after = after.trim_start();
            rest = after.strip_prefix(',').unwrap_or(after).trim_start();
        }
        Ok(HeaderDict {
            descr: descr.ok_or("no descr")?,
            fortran_order: fortran.ok_or("no fortran_order")?,
            shape: shape.ok_or("no shape")?,
        })
    }
}

fn take_string(text: &str) -> Result<(String, &str), String> {
    let quote = text
        .chars()
        .next()
        .filter(|c| *c == '\'' || *c == '"')
        .ok_or("expected a string")?;
    let body = &text[1..];
    let end = body.find(quote).ok_or("unterminated string")?;
    Ok((body[..end].to_string(), &body[end + 1..]))
}

fn parse_descr(descr: &str) -> Result<ElementKind, String> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let big_endian = order == '>' || (order == '=' && cfg!(target_endian = "big"));
    let plain = |dtype| Ok(ElementKind::Plain { dtype, big_endian });
    match code {
        "b1" | "?" => plain(DType::Bool),
        "i1" => plain(DType::I8),
        "i2" => plain(DType::I16),
        "i4" => plain(DType::I32),
        "i8" => plain(DType::I64),
        "u1" => plain(DType::U8),
        "u2" => plain(DType::U16),
        "u4" => plain(DType::U32),
        "u8" => plain(DType::U64),
        "f2" => plain(DType::F16),
        "f4" => plain(DType::F32),
        "f8" => plain(DType::F64),
        "c8" => plain(DType::Complex64),
        "c16" => plain(DType::Complex128),
        _ => {
            let number = |s: &str| s.parse::<usize>().map_err(|_| unsupported_descr(descr));
            if let Some(n) = code.strip_prefix('U') {
                Ok(ElementKind::Unicode {
                    chars: number(n)?,
                    big_endian,
                })
            } else if let Some(n) = code.strip_prefix('S') {
                Ok(ElementKind::Bytes { len: number(n)? })
            } else {
                Err(unsupported_descr(descr))
            }
        }
    }
}

fn unsupported_descr(descr: &str) -> String {
    format!(
        "numpy dtype {descr:?} has no ONNX counterpart here (supported: bool, int8..int64, \
         uint8..uint64, float16/32/64, complex64/128, unicode U and bytes S strings)"
    )
}

/// Read a `.npy` file. Large little-endian C-order numeric data is
/// memory-mapped and used in place; the rest is decoded into memory. A file
/// whose data is shorter or longer than its header claims is an error naming
/// the file.
pub fn read(path: &Path) -> Result<Loaded, CliError> {
    let mut file = File::open(path).map_err(|e| CliError::io(path, e))?;
    let file_len = file.metadata().map_err(|e| CliError::io(path, e))?.len();
    let file_len = usize::try_from(file_len)
        .map_err(|_| CliError::bad_file(path, "larger than this machine's address space".into()))?;
    let mut prefix = vec![0u8; file_len.min(12)];
    file.read_exact(&mut prefix)
        .map_err(|e| CliError::io(path, e))?;
    let header_end = header_end(&prefix).unwrap_or(prefix.len()).min(file_len);
    prefix.resize(header_end, 0);
    file.read_exact(&mut prefix[12.min(header_end)..])
        .map_err(|e| CliError::io(path, e))?;
    let header = parse_header(&prefix, path)?;
    let count = header
        .shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| CliError::bad_file(path, format!("shape {:?} overflows", header.shape)))?;
    let item = header.kind.item_size().unwrap_or(usize::MAX);
    let data_len = count.checked_mul(item).ok_or_else(|| {
        CliError::bad_file(path, format!("shape {:?} is too large", header.shape))
    })?;
    let held = file_len - header.data_offset;
    if held != data_len {
        return Err(CliError::bad_file(
            path,
            format!(
                "the header claims shape {:?} ({data_len} bytes of data) but the file holds {held}",
                header.shape
            ),
        ));
    }
    if let ElementKind::Plain {
        dtype,
        big_endian: false,
    } = header.kind
    {
        let mappable = dtype != DType::Bool
            && !header.fortran_order
            && data_len >= MMAP_THRESHOLD
            // The mapping starts on a page boundary, so the data is aligned
            // if its offset is; numpy pads headers to 64 bytes.
            && header.data_offset % alignment(dtype) == 0;
        if mappable {
            // SAFETY: the mapping is read-only and private to this process.
            // Another process truncating or rewriting the file while it is
            // mapped could change or remove the bytes under us; that is the
            // documented risk of every file mapping, accepted because gsx
            // reads files the user names and does not share them.
            #[allow(unsafe_code)]
            let map = unsafe { Mmap::map(&file) }.map_err(|e| CliError::io(path, e))?;
            if map.len() == file_len {
                return Ok(Loaded::Mapped {
                    map,
                    offset: header.data_offset,
                    dtype,
                    shape: header.shape,
                });
            }
        }
    }
    let mut bytes = prefix;
    bytes.reserve_exact(file_len - bytes.len());
    file.read_to_end(&mut bytes)
        .map_err(|e| CliError::io(path, e))?;
    if bytes.len() != file_len {
        return Err(CliError::bad_file(
            path,
            "the file changed while it was read".into(),
        ));
    }
    decode(&bytes[header.data_offset..], &header, path).map(Loaded::Owned)
}

/// Decode the data of an array into memory.
pub fn decode(data: &[u8], header: &Header, path: &Path) -> Result<Tensor, CliError> {
    let shape = header.shape.clone();
    let tensor = match header.kind {
        ElementKind::Plain { dtype, big_endian } => {
            let swap = big_endian;
            match dtype {
                DType::Bool => {
                    let values = data
                        .iter()
                        .enumerate()
                        .map(|(i, &b)| match b {
                            0 => Ok(false),
                            1 => Ok(true),
                            other => Err(CliError::bad_file(
                                path,
                                format!("bool element {i} holds byte {other}, not 0 or 1"),
                            )),
                        })
                        .collect::<Result<Vec<bool>, _>>()?;
                    Tensor::new(shape, values)?
                }
                DType::I8 => Tensor::new(shape, pod_vec::<i8>(data, swap))?,
                DType::I16 => Tensor::new(shape, pod_vec::<i16>(data, swap))?,
                DType::I32 => Tensor::new(shape, pod_vec::<i32>(data, swap))?,
                DType::I64 => Tensor::new(shape, pod_vec::<i64>(data, swap))?,
                DType::U8 => Tensor::new(shape, pod_vec::<u8>(data, swap))?,
                DType::U16 => Tensor::new(shape, pod_vec::<u16>(data, swap))?,
                DType::U32 => Tensor::new(shape, pod_vec::<u32>(data, swap))?,
                DType::U64 => Tensor::new(shape, pod_vec::<u64>(data, swap))?,
                DType::F16 => Tensor::new(shape, pod_vec::<f16>(data, swap))?,
                DType::F32 => Tensor::new(shape, pod_vec::<f32>(data, swap))?,
                DType::F64 => Tensor::new(shape, pod_vec::<f64>(data, swap))?,
                // A complex number is two floats, each swapped on its own.
                DType::Complex64 => {
                    let parts = pod_vec::<f32>(data, swap);
                    let values: Vec<Complex32> = parts
                        .chunks_exact(2)
                        .map(|p| Complex32::new(p[0], p[1]))
                        .collect();
                    Tensor::new(shape, values)?
                }
                DType::Complex128 => {
                    let parts = pod_vec::<f64>(data, swap);
                    let values: Vec<Complex64> = parts
                        .chunks_exact(2)
                        .map(|p| Complex64::new(p[0], p[1]))
                        .collect();
                    Tensor::new(shape, values)?
                }
                other => return Err(CliError::unsupported(format!("npy has no {other}"))),
            }
        }
        ElementKind::Unicode { chars, big_endian } => {
            if chars == 0 {
                let count = shape.iter().product();
                return finish(Tensor::new(shape, vec![String::new(); count])?, header);
            }
            let values = data
                .chunks_exact(4 * chars)
                .enumerate()
                .map(|(i, item)| {
                    item.chunks_exact(4)
                        .map(|c| {
                            let c: [u8; 4] = [c[0], c[1], c[2], c[3]];
                            if big_endian {
                                u32::from_be_bytes(c)
                            } else {
                                u32::from_le_bytes(c)
                            }
                        })
                        .take_while(|&c| c != 0)
                        .map(|c| {
                            char::from_u32(c).ok_or_else(|| {
                                CliError::bad_file(
                                    path,
                                    format!("string element {i} holds {c:#x}, not a code point"),
                                )
                            })
                        })
                        .collect::<Result<String, _>>()
                })
                .collect::<Result<Vec<String>, _>>()?;
            Tensor::new(shape, values)?
        }
        ElementKind::Bytes { len } => {
            let count: usize = shape.iter().product();
            let values = (0..count)
                .map(|i| {
                    let item = &data[i * len..(i + 1) * len];
                    let end = item.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
                    String::from_utf8(item[..end].to_vec()).map_err(|_| {
                        CliError::unsupported(format!(
                            "{}: bytes element {i} is not UTF-8; only UTF-8 strings are supported",
                            path.display()
                        ))
                    })
                })
                .collect::<Result<Vec<String>, _>>()?;
            Tensor::new(shape, values)?
        }
    };
    finish(tensor, header)
}

fn finish(tensor: Tensor, header: &Header) -> Result<Tensor, CliError> {
    if header.fortran_order {
        to_c_order(tensor)
    } else {
        Ok(tensor)
    }
}

fn pod_vec<T: bytemuck::Pod>(data: &[u8], swap: bool) -> Vec<T> {
    if !swap {
        return bytemuck::pod_collect_to_vec(data);
    }
    let size = std::mem::size_of::<T>();
    let swapped: Vec<u8> = data
        .chunks_exact(size)
        .flat_map(|c| c.iter().rev().copied())
        .collect();
    bytemuck::pod_collect_to_vec(&swapped)
}

/// Reorder column-major data (as a Fortran-order file stores it) to row-major.
fn to_c_order(tensor: Tensor) -> Result<Tensor, CliError> {
    fn permute<T: Element>(t: gatherscatter::TypedTensor<T>) -> Result<Tensor, CliError> {
        let (shape, data) = t.into_parts();
        if shape.len() < 2 {
            return Ok(Tensor::new(shape, data)?);
        }
        // Column-major strides: the first dim varies fastest.
        let mut f_strides = vec![1usize; shape.len()];
        for d in 1..shape.len() {
            f_strides[d] = f_strides[d - 1] * shape[d - 1];
        }
        let mut index = vec![0usize; shape.len()];
        let mut out = Vec::with_capacity(data.len());
        for _ in 0..data.len() {
            let offset: usize = index.iter().zip(&f_strides).map(|(i, s)| i * s).sum();
            out.push(data[offset].clone());
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(Tensor::new(shape, out)?)
    }
    match tensor {
        Tensor::Bool(t) => permute(t),
        Tensor::I8(t) => permute(t),
        Tensor::I16(t) => permute(t),
        Tensor::I32(t) => permute(t),
        Tensor::I64(t) => permute(t),
        Tensor::U8(t) => permute(t),
        Tensor::U16(t) => permute(t),
        Tensor::U32(t) => permute(t),
        Tensor::U64(t) => permute(t),
        Tensor::F16(t) => permute(t),
        Tensor::BF16(t) => permute(t),
        Tensor::F32(t) => permute(t),
        Tensor::F64(t) => permute(t),
        Tensor::Complex64(t) => permute(t),
        Tensor::Complex128(t) => permute(t),
        Tensor::String(t) => permute(t),
        other => Ok(other),
    }
}

/// The `.npy` bytes of a tensor (format 1.0, little-endian, C order).
/// bfloat16 has no numpy dtype and is refused as unsupported.
pub fn encode(tensor: &Tensor) -> Result<Vec<u8>, CliError> {
    let (header, body) = encode_parts(tensor)?;
    let mut out = Vec::with_capacity(header.len() + body.len());
    out.extend_from_slice(&header);
    out.extend_from_slice(&body);
    Ok(out)
}

/// [`encode`] as its header and its data, the data borrowed from the tensor
/// where its bytes already are the file's (every plain dtype), so saving a
/// large output costs no copy of it.
pub fn encode_parts(tensor: &Tensor) -> Result<(Vec<u8>, Cow<'_, [u8]>), CliError> {
    fn raw<T: bytemuck::Pod>(data: &[T]) -> Cow<'_, [u8]> {
        Cow::Borrowed(bytemuck::cast_slice(data))
    }
    let (descr, data): (String, Cow<'_, [u8]>) = match tensor {
        Tensor::Bool(t) => (
            "|b1".into(),
            Cow::Owned(t.data().iter().map(|&b| u8::from(b)).collect()),
        ),
        Tensor::I8(t) => ("|i1".into(), raw(t.data())),
        Tensor::U8(t) => ("|u1".into(), raw(t.data())),
        Tensor::I16(t) => ("<i2".into(), raw(t.data())),
        Tensor::U16(t) => ("<u2".into(), raw(t.data())),
        Tensor::I32(t) => ("<i4".into(), raw(t.data())),
        Tensor::U32(t) => ("<u4".into(), raw(t.data())),
        Tensor::I64(t) => ("<i8".into(), raw(t.data())),
        Tensor::U64(t) => ("<u8".into(), raw(t.data())),
        Tensor::F16(t) => ("<f2".into(), raw(t.data())),
        Tensor::F32(t) => ("<f4".into(), raw(t.data())),
        Tensor::F64(t) => ("<f8".into(), raw(t.data())),
        Tensor::Complex64(t) => ("<c8".into(), raw(t.data())),
        Tensor::Complex128(t) => ("<c16".into(), raw(t.data())),
        Tensor::String(t) => {
            let chars = t
                .data()
                .iter()
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
                .max(1);
            let mut data = Vec::with_capacity(t.len() * chars * 4);
            for s in t.data() {
                let mut n = 0;
                for c in s.chars() {
                    data.extend_from_slice(&u32::from(c).to_le_bytes());
                    n += 1;
                }
                data.resize(data.len() + (chars - n) * 4, 0);
            }
            (format!("<U{chars}"), Cow::Owned(data))
        }
        other => {
            return Err(CliError::unsupported(format!(
                "numpy has no {} dtype; write a .pb file instead",
                other.dtype()
            )))
        }
    };
    let shape = match tensor.shape() {
        [one] => format!("({one},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    let padded = unpadded.div_ceil(ALIGN) * ALIGN;
    header.push_str(&" ".repeat(padded - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(padded);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    let header_len = u16::try_from(header.len())
        .map_err(|_| CliError::unsupported("the .npy header would exceed 64 KiB".into()))?;
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    Ok((out, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exercises the mapping (the crate's one `unsafe` block) and the
    /// aligned cast of the mapped bytes. Miri cannot run it: it has no
    /// file-backed mappings.
    #[test]
    #[cfg_attr(miri, ignore = "Miri does not support file-backed memory mappings")]
    fn large_arrays_are_mapped_and_read_in_place() {
        let values: Vec<u64> = (0..(MMAP_THRESHOLD / 8) as u64).map(|i| i * 3).collect();
        let tensor = Tensor::new(vec![values.len()], values).unwrap();
        let path = std::env::temp_dir().join(format!("gsx-npy-map-{}.npy", std::process::id()));
        std::fs::write(&path, encode(&tensor).unwrap()).unwrap();
        let loaded = read(&path).unwrap();
        let view = loaded.view().unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(loaded.is_mapped());
        let data = view.typed::<u64>().unwrap().data();
        assert_eq!(data.len(), MMAP_THRESHOLD / 8);
        assert_eq!(
            (data[0], data[1], data[data.len() - 1]),
            (0, 3, 3 * (data.len() as u64 - 1))
        );
    }
}
