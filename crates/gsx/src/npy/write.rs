//! Writing `.npy` files: the header built and the size checked first, then
//! the data streamed from the tensor.

use std::io::{self, Write};

use gatherscatter::Tensor;

use super::{ALIGN, CHUNK, MAGIC};
use crate::budget;
use crate::error::CliError;

/// A tensor ready to be written as `.npy` (format 1.0, or 2.0 when the
/// header needs more than 64 KiB, as numpy does; little-endian, C order):
/// its header built and its size checked, its data still the tensor's.
#[derive(Debug)]
pub struct Encoder<'a> {
    header: Vec<u8>,
    tensor: &'a Tensor,
    /// Code points per element for strings (the longest, at least 1).
    chars: usize,
}

impl<'a> Encoder<'a> {
    /// Check that the tensor can be written and build its header. bfloat16
    /// has no numpy dtype and is refused as unsupported; strings, padded to
    /// the longest, must fit the memory budget (whoever loads the file
    /// needs that much).
    pub fn new(tensor: &'a Tensor) -> Result<Encoder<'a>, CliError> {
        let mut chars = 0;
        let descr = match tensor {
            Tensor::Bool(_) => "|b1".to_string(),
            Tensor::I8(_) => "|i1".into(),
            Tensor::U8(_) => "|u1".into(),
            Tensor::I16(_) => "<i2".into(),
            Tensor::U16(_) => "<u2".into(),
            Tensor::I32(_) => "<i4".into(),
            Tensor::U32(_) => "<u4".into(),
            Tensor::I64(_) => "<i8".into(),
            Tensor::U64(_) => "<u8".into(),
            Tensor::F16(_) => "<f2".into(),
            Tensor::F32(_) => "<f4".into(),
            Tensor::F64(_) => "<f8".into(),
            Tensor::Complex64(_) => "<c8".into(),
            Tensor::Complex128(_) => "<c16".into(),
            Tensor::String(t) => {
                chars = t
                    .data()
                    .iter()
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(1);
                let padded = t.len() as u128 * chars as u128 * 4;
                budget::check(
                    || {
                        format!(
                            "as .npy, {} strings padded to the longest ({chars} code points, \
                             4 bytes each; .pb stores each at its own length)",
                            t.len()
                        )
                    },
                    padded,
                )?;
                format!("<U{chars}")
            }
            other => {
                return Err(CliError::unsupported(format!(
                    "numpy has no {} dtype; write a .pb file instead",
                    other.dtype()
                )))
            }
        };
        Ok(Encoder {
            header: header_bytes(&descr, tensor.shape()),
            tensor,
            chars,
        })
    }

    /// Write the header and the data.
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        fn raw<T: bytemuck::Pod>(w: &mut impl Write, data: &[T]) -> io::Result<()> {
            w.write_all(bytemuck::cast_slice(data))
        }
        w.write_all(&self.header)?;
        match self.tensor {
            Tensor::Bool(t) => {
                for piece in t.data().chunks(CHUNK) {
                    let bytes: Vec<u8> = piece.iter().map(|&b| u8::from(b)).collect();
                    w.write_all(&bytes)?;
                }
                Ok(())
            }
            Tensor::I8(t) => raw(w, t.data()),
            Tensor::U8(t) => raw(w, t.data()),
            Tensor::I16(t) => raw(w, t.data()),
            Tensor::U16(t) => raw(w, t.data()),
            Tensor::I32(t) => raw(w, t.data()),
            Tensor::U32(t) => raw(w, t.data()),
            Tensor::I64(t) => raw(w, t.data()),
            Tensor::U64(t) => raw(w, t.data()),
            Tensor::F16(t) => raw(w, t.data()),
            Tensor::F32(t) => raw(w, t.data()),
            Tensor::F64(t) => raw(w, t.data()),
            Tensor::Complex64(t) => raw(w, t.data()),
            Tensor::Complex128(t) => raw(w, t.data()),
            Tensor::String(t) => {
                let mut piece = Vec::with_capacity(CHUNK + 4);
                for s in t.data() {
                    let mut n = 0;
                    for c in s.chars() {
                        piece.extend_from_slice(&u32::from(c).to_le_bytes());
                        n += 1;
                        if piece.len() >= CHUNK {
                            w.write_all(&piece)?;
                            piece.clear();
                        }
                    }
                    let mut padding = (self.chars - n) * 4;
                    while padding > 0 {
                        let take = padding.min(CHUNK + 4 - piece.len());
                        piece.resize(piece.len() + take, 0);
                        padding -= take;
                        if piece.len() >= CHUNK {
                            w.write_all(&piece)?;
                            piece.clear();
                        }
                    }
                }
                w.write_all(&piece)
            }
            // `new` accepted only the dtypes above.
            _ => Err(io::Error::other("no .npy encoding for this dtype")),
        }
    }
}

/// The magic, version, header length and the padded header dict.
fn header_bytes(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims = match shape {
        [one] => format!("({one},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    // Version 1.0 has a 2-byte header length; past that numpy writes 2.0.
    let fits_v1 = (MAGIC.len() + 4 + dict.len() + 1).div_ceil(ALIGN) * ALIGN - MAGIC.len() - 4
        <= usize::from(u16::MAX);
    let preamble = if fits_v1 {
        MAGIC.len() + 4
    } else {
        MAGIC.len() + 6
    };
    let unpadded = preamble + dict.len() + 1;
    let padded = unpadded.div_ceil(ALIGN) * ALIGN;
    let header_len = padded - preamble;
    let mut out = Vec::with_capacity(padded);
    out.extend_from_slice(MAGIC);
    if fits_v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(padded - 1, b' ');
    out.push(b'\n');
    out
}

/// The `.npy` bytes of a tensor (see [`Encoder`]).
pub fn encode(tensor: &Tensor) -> Result<Vec<u8>, CliError> {
    let encoder = Encoder::new(tensor)?;
    let mut out = Vec::new();
    encoder
        .write_to(&mut out)
        .map_err(|e| CliError::internal(format!("writing to memory: {e}")))?;
    Ok(out)
}
