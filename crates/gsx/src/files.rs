//! Tensor files by extension (`.npy`, `.pb`), and writes that never leave a
//! partial file or overwrite an input.

use std::io::Write;
use std::path::{Path, PathBuf};

use gatherscatter::Tensor;
use gatherscatter_onnx::{encode_tensor, read_tensor_file};

use crate::error::CliError;
use crate::npy::{self, Loaded};

/// The formats a tensor file can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// numpy `.npy`.
    Npy,
    /// A serialized ONNX `TensorProto`.
    Pb,
}

/// The format a path's extension names.
pub fn format_of(path: &Path) -> Result<Format, CliError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => Ok(Format::Npy),
        Some("pb") => Ok(Format::Pb),
        _ => Err(CliError::usage(format!(
            "{}: a tensor file must end in .npy or .pb",
            path.display()
        ))),
    }
}

/// Read a tensor file; large `.npy` data is memory-mapped.
pub fn load(path: &Path) -> Result<Loaded, CliError> {
    match format_of(path)? {
        Format::Npy => npy::read(path),
        Format::Pb => Ok(Loaded::Owned(read_tensor_file(path)?.1)),
    }
}

/// The bytes of a tensor in the format `path` names.
pub fn encode_for(path: &Path, tensor: &Tensor, name: &str) -> Result<Vec<u8>, CliError> {
    match format_of(path)? {
        Format::Npy => npy::encode(tensor),
        Format::Pb => Ok(encode_tensor(tensor, name)?),
    }
}

/// The path as it will be once it exists: the parent canonicalized.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (parent.canonicalize(), path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => path.to_path_buf(),
    }
}

/// Refuse an output path that names one of `inputs`, however spelled.
pub fn check_not_an_input(path: &Path, inputs: &[PathBuf]) -> Result<(), CliError> {
    let target = resolved(path);
    if inputs.iter().any(|input| resolved(input) == target) {
        return Err(CliError::usage(format!(
            "{}: refusing to overwrite an input file",
            path.display()
        )));
    }
    Ok(())
}

/// Write `bytes` to `path` through a temporary file in the same directory and
/// a rename, so a failure never leaves a partial file; refuse to write over
/// any of `inputs`.
pub fn write_atomic(path: &Path, bytes: &[u8], inputs: &[PathBuf]) -> Result<(), CliError> {
    write_atomic_parts(path, &[bytes], inputs)
}

/// [`write_atomic`] of the concatenation of `parts`, without building it.
pub fn write_atomic_parts(
    path: &Path,
    parts: &[&[u8]],
    inputs: &[PathBuf],
) -> Result<(), CliError> {
    check_not_an_input(path, inputs)?;
    let file_name = path
        .file_name()
        .ok_or_else(|| CliError::usage(format!("{}: not a file name", path.display())))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(file_name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        for part in parts {
            file.write_all(part)?;
        }
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        CliError::io(path, e)
    })
}

/// Encode and write a tensor atomically (see [`write_atomic`]).
pub fn save(path: &Path, tensor: &Tensor, name: &str, inputs: &[PathBuf]) -> Result<(), CliError> {
    if let Format::Npy = format_of(path)? {
        // Header and data written straight from the tensor: no copy of it.
        let (header, body) = npy::encode_parts(tensor)?;
        return write_atomic_parts(path, &[&header, &body], inputs);
    }
    let bytes = encode_for(path, tensor, name)?;
    write_atomic(path, &bytes, inputs)
}
