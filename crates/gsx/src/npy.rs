//! `.npy` files: numpy's format.
//!
//! Supported element types are those with an ONNX counterpart: `b1`, `i1`..`i8`,
//! `u1`..`u8`, `f2`, `f4`, `f8`, `c8`, `c16`, unicode `U<n>` and bytes `S<n>`
//! (decoded as UTF-8), in either byte order and in C or Fortran order. Object,
//! datetime, structured and other types are reported as unsupported.
//!
//! **Reading** trusts nothing a header claims (docs/spec.md, "Files"):
//! - the data must be exactly as long as the shape and dtype say, and every
//!   element must take at least one byte of the file (so `<U0`/`|S0` with
//!   elements are refused: a 128-byte file cannot claim 10^9 strings);
//! - the memory the decoded tensor needs is computed first and checked
//!   against the budget ([`crate::budget`]), then allocated fallibly;
//! - the data is read into memory with `read(2)`, never memory-mapped, so a
//!   file truncated or rewritten while `gsx` reads it is an error
//!   (`the file changed while it was read`), never a SIGBUS.
//!
//! **Writing** ([`write`]) streams: plain data is written straight from the tensor,
//! strings and bools in pieces of [`CHUNK`] bytes, so saving costs no copy
//! of the output, and a string tensor padded to its longest element is
//! checked against the budget before a byte is written.

use std::io::{self, Read};
use std::path::Path;

use gatherscatter::{f16, Complex32, Complex64, DType, Dims, Element, Tensor};

use crate::budget;
use crate::error::CliError;

mod write;

pub use write::{encode, Encoder};

const MAGIC: &[u8] = b"\x93NUMPY";
/// numpy aligns the data of files it writes to 64 bytes.
pub const ALIGN: usize = 64;
/// Strings and bools are read and written in pieces of about this size.
pub const CHUNK: usize = 1 << 16;

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
    /// Bytes per element in the file.
    fn item_size(self) -> Option<usize> {
        match self {
            ElementKind::Plain { dtype, .. } => Some(plain_size(dtype)),
            ElementKind::Unicode { chars, .. } => chars.checked_mul(4),
            ElementKind::Bytes { len } => Some(len),
        }
    }

    /// Bytes per element in memory once decoded, at most: a `String` and
    /// its text (UTF-8 takes no more bytes than UCS-4 or the raw bytes).
    fn decoded_size(self) -> Option<usize> {
        match self {
            ElementKind::Plain { dtype, .. } => Some(plain_size(dtype)),
            other => other
                .item_size()?
                .checked_add(std::mem::size_of::<String>()),
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

/// Parse the header at the start of `bytes` (which must hold at least the
/// whole header). Errors name `path`.
pub fn parse_header(bytes: &[u8], path: &Path) -> Result<Header, CliError> {
    let bad = |message: String| CliError::bad_file(path, message);
    if !bytes.starts_with(MAGIC) {
        return Err(bad("not a .npy file (no \\x93NUMPY magic)".into()));
    }
    if bytes.len() < 10 {
        return Err(bad(format!(
            "truncated header: {} bytes, fewer than the 10 of a .npy preamble",
            bytes.len()
        )));
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

/// Read a `.npy` file. Only a regular file is read (a device or FIFO is
/// refused before any byte is); see the module docs for what is checked.
pub fn read(path: &Path) -> Result<Tensor, CliError> {
    let (mut file, len) = gatherscatter_onnx::file::open_regular(path)?;
    read_from(&mut file, len, path)
}

/// Decode a `.npy` of `file_len` bytes from `reader`; `path` names it in
/// errors. The reader must yield exactly `file_len` bytes: fewer or more is
/// `the file changed while it was read`.
pub fn read_from(reader: &mut impl Read, file_len: u64, path: &Path) -> Result<Tensor, CliError> {
    let file_len = usize::try_from(file_len)
        .map_err(|_| CliError::bad_file(path, "larger than this machine's address space".into()))?;
    let mut prefix = vec![0u8; file_len.min(12)];
    read_exact(reader, &mut prefix, path)?;
    // A header is text the file holds, so its size is bounded by the file.
    let header_end = header_end(&prefix).unwrap_or(prefix.len()).min(file_len);
    let mut head = Vec::new();
    head.try_reserve_exact(header_end).map_err(|_| {
        budget::over_budget(
            format!("{}: the header", path.display()),
            header_end as u128,
        )
    })?;
    head.extend_from_slice(&prefix);
    head.resize(header_end.max(prefix.len()), 0);
    read_exact(reader, &mut head[prefix.len()..], path)?;
    let header = parse_header(&head, path)?;
    drop(head);
    let shape = Dims(&header.shape);
    let count = gatherscatter::element_count(&header.shape)
        .ok_or_else(|| CliError::bad_file(path, format!("shape {shape} overflows")))?;
    let item = header.kind.item_size().unwrap_or(usize::MAX);
    if item == 0 && count > 0 {
        return Err(CliError::bad_file(
            path,
            format!(
                "zero-width elements cannot make up shape {shape} ({count} elements): every \
                 element must take at least one byte of the file"
            ),
        ));
    }
    let data_len = count
        .checked_mul(item)
        .ok_or_else(|| CliError::bad_file(path, format!("shape {shape} is too large")))?;
    let held = file_len - header.data_offset;
    if held != data_len {
        return Err(CliError::bad_file(
            path,
            format!(
                "the header claims shape {shape} ({data_len} bytes of data) but the file holds {held}"
            ),
        ));
    }
    // Known only now that the file's size bounds the count: the memory the
    // decoded tensor takes, twice over for Fortran order (reordered copy).
    let decoded = (count as u128) * header.kind.decoded_size().unwrap_or(usize::MAX) as u128;
    let decoded = if header.fortran_order {
        2 * decoded
    } else {
        decoded
    };
    budget::check(
        || format!("{}: decoding shape {shape}", path.display()),
        decoded,
    )?;
    let tensor = decode(reader, &header, count, path)?;
    // Nothing may follow the data.
    let mut probe = [0u8; 1];
    match reader.read(&mut probe) {
        Ok(0) => {}
        Ok(_) => return Err(changed(path)),
        Err(e) => return Err(CliError::io(path, e)),
    }
    if header.fortran_order {
        to_c_order(tensor)
    } else {
        Ok(tensor)
    }
}

/// The error for a file whose size differs from the one it had when opened.
fn changed(path: &Path) -> CliError {
    CliError::bad_file(path, "the file changed while it was read".into())
}

/// `read_exact`, with a file that ends early reported as [`changed`].
fn read_exact(reader: &mut dyn Read, buf: &mut [u8], path: &Path) -> Result<(), CliError> {
    reader.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => changed(path),
        _ => CliError::io(path, e),
    })
}

/// A vector of `count` elements, or `out_of_memory` naming the file.
fn try_vec<T>(count: usize, path: &Path) -> Result<Vec<T>, CliError> {
    let mut v = Vec::new();
    v.try_reserve_exact(count).map_err(|_| {
        budget::over_budget(
            format!("{}: {count} elements", path.display()),
            count as u128 * std::mem::size_of::<T>() as u128,
        )
    })?;
    Ok(v)
}

/// Decode the `count` elements that follow the header.
fn decode(
    reader: &mut impl Read,
    header: &Header,
    count: usize,
    path: &Path,
) -> Result<Tensor, CliError> {
    // Read `count` plain elements straight into their vector, then put
    // each `unit`-byte number in native order (a complex number is two).
    fn pod<T: bytemuck::Pod>(
        reader: &mut dyn Read,
        count: usize,
        swap_unit: Option<usize>,
        path: &Path,
    ) -> Result<Vec<T>, CliError> {
        let mut values: Vec<T> = try_vec(count, path)?;
        values.resize(count, T::zeroed());
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut values);
        read_exact(reader, bytes, path)?;
        if let Some(unit) = swap_unit {
            bytes.chunks_exact_mut(unit).for_each(<[u8]>::reverse);
        }
        Ok(values)
    }
    let shape = header.shape.clone();
    let tensor = match header.kind {
        ElementKind::Plain { dtype, big_endian } => {
            let swap = |unit: usize| (big_endian && unit > 1).then_some(unit);
            macro_rules! plain {
                ($t:ty) => {
                    Tensor::new(
                        shape,
                        pod::<$t>(reader, count, swap(std::mem::size_of::<$t>()), path)?,
                    )?
                };
            }
            match dtype {
                DType::Bool => {
                    let mut values: Vec<bool> = try_vec(count, path)?;
                    let mut buf = vec![0u8; CHUNK.min(count)];
                    while values.len() < count {
                        let n = buf.len().min(count - values.len());
                        read_exact(reader, &mut buf[..n], path)?;
                        for &b in &buf[..n] {
                            values.push(match b {
                                0 => false,
                                1 => true,
                                other => {
                                    return Err(CliError::bad_file(
                                        path,
                                        format!(
                                            "bool element {} holds byte {other}, not 0 or 1",
                                            values.len()
                                        ),
                                    ))
                                }
                            });
                        }
                    }
                    Tensor::new(shape, values)?
                }
                DType::I8 => plain!(i8),
                DType::I16 => plain!(i16),
                DType::I32 => plain!(i32),
                DType::I64 => plain!(i64),
                DType::U8 => plain!(u8),
                DType::U16 => plain!(u16),
                DType::U32 => plain!(u32),
                DType::U64 => plain!(u64),
                DType::F16 => plain!(f16),
                DType::F32 => plain!(f32),
                DType::F64 => plain!(f64),
                // A complex number is two floats, each swapped on its own.
                DType::Complex64 => {
                    Tensor::new(shape, pod::<Complex32>(reader, count, swap(4), path)?)?
                }
                DType::Complex128 => {
                    Tensor::new(shape, pod::<Complex64>(reader, count, swap(8), path)?)?
                }
                other => return Err(CliError::unsupported(format!("npy has no {other}"))),
            }
        }
        kind @ (ElementKind::Unicode { .. } | ElementKind::Bytes { .. }) => {
            let item = kind.item_size().unwrap_or(usize::MAX);
            let mut values: Vec<String> = try_vec(count, path)?;
            // Whole elements per piece; one element when it is larger.
            let per_piece = (CHUNK / item.max(1)).max(1);
            let mut buf = Vec::new();
            while values.len() < count {
                let n = per_piece.min(count - values.len());
                buf.resize(n * item, 0);
                read_exact(reader, &mut buf, path)?;
                for element in buf.chunks_exact(item) {
                    let i = values.len();
                    values.push(decode_string(kind, element, i, path)?);
                }
            }
            Tensor::new(shape, values)?
        }
    };
    Ok(tensor)
}

/// One `U<n>` or `S<n>` element as a string without its trailing NULs,
/// as numpy reads both (a NUL inside a string stays).
fn decode_string(
    kind: ElementKind,
    item: &[u8],
    i: usize,
    path: &Path,
) -> Result<String, CliError> {
    match kind {
        ElementKind::Unicode { big_endian, .. } => {
            let unit = |c: &[u8]| {
                let c: [u8; 4] = [c[0], c[1], c[2], c[3]];
                if big_endian {
                    u32::from_be_bytes(c)
                } else {
                    u32::from_le_bytes(c)
                }
            };
            let len = item
                .chunks_exact(4)
                .rposition(|c| unit(c) != 0)
                .map_or(0, |p| p + 1);
            item[..4 * len]
                .chunks_exact(4)
                .map(|c| {
                    let c = unit(c);
                    char::from_u32(c).ok_or_else(|| {
                        CliError::bad_file(
                            path,
                            format!("string element {i} holds {c:#x}, not a code point"),
                        )
                    })
                })
                .collect()
        }
        _ => {
            let end = item.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            String::from_utf8(item[..end].to_vec()).map_err(|_| {
                CliError::unsupported(format!(
                    "{}: bytes element {i} is not UTF-8; only UTF-8 strings are supported",
                    path.display()
                ))
            })
        }
    }
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

#[cfg(test)]
mod tests;
