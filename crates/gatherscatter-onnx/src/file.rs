//! Reading a whole file with a bound: only regular files, never more than
//! a given number of bytes, the buffer allocated fallibly.
//!
//! A path can name a device (`/dev/zero`, `/dev/urandom`), a FIFO or a
//! directory; `std::fs::read` of those reads until memory runs out or never
//! returns. Every model and tensor file goes through [`read_file`] instead.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

use crate::error::{OnnxError, Result};

/// Read the regular file at `path` whole, refusing anything else (a device,
/// a FIFO, a socket, a directory) and any file larger than `max_bytes`.
/// A file that grows or shrinks while it is read is an error too, so the
/// bytes returned are exactly the file as it was when opened.
///
/// ```
/// use gatherscatter_onnx::file::read_file;
///
/// let path = std::env::temp_dir().join(format!("read-file-doc-{}", std::process::id()));
/// std::fs::write(&path, b"four")?;
/// assert_eq!(read_file(&path, 4)?, b"four");
/// assert_eq!(read_file(&path, 3).unwrap_err().kind_name(), "out_of_memory");
/// # std::fs::remove_file(&path)?;
/// # #[cfg(unix)]
/// assert_eq!(read_file("/dev/zero".as_ref(), u64::MAX).unwrap_err().kind_name(), "bad_file");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    let io = |source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    };
    let (mut file, len) = open_regular(path)?;
    if len > max_bytes {
        return Err(OnnxError::TooLarge {
            path: path.to_path_buf(),
            bytes: len,
            limit: max_bytes,
        });
    }
    let too_large = || OnnxError::TooLarge {
        path: path.to_path_buf(),
        bytes: len,
        limit: max_bytes,
    };
    let len = usize::try_from(len).map_err(|_| too_large())?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len).map_err(|_| too_large())?;
    // One byte past the size the file had: a file that grew shows it.
    (&mut file)
        .take(len as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() != len {
        return Err(OnnxError::BadFile {
            path: path.to_path_buf(),
            message: format!(
                "the file changed while it was read ({len} bytes when opened, {}{} read)",
                bytes.len(),
                if bytes.len() > len { " or more" } else { "" }
            ),
        });
    }
    Ok(bytes)
}

/// Open `path` for reading if it is a regular file, with its size; refuse
/// anything else as [`OnnxError::BadFile`] without reading from it. The
/// open does not block: a FIFO with no writer is refused, not waited on.
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    let io = |source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // No effect on a regular file's reads; keeps open(2) of a FIFO
        // from waiting for a writer.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(OnnxError::BadFile {
            path: path.to_path_buf(),
            message: format!(
                "not a regular file ({}); only regular files are read",
                file_type_name(&meta.file_type())
            ),
        });
    }
    Ok((file, meta.len()))
}

/// What kind of file a non-regular file is, for messages.
pub fn file_type_name(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("gs-onnx-file-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri's isolation has no file system")]
    fn a_regular_file_within_the_limit_is_read_whole() {
        let path = temp_file("whole", b"0123456789");
        assert_eq!(read_file(&path, 10).unwrap(), b"0123456789");
        let err = read_file(&path, 9).unwrap_err();
        assert_eq!(err.kind_name(), "out_of_memory");
        assert!(err.to_string().contains("10 bytes"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri's isolation has no file system")]
    fn directories_and_devices_are_refused_without_reading() {
        let err = read_file(&std::env::temp_dir(), u64::MAX).unwrap_err();
        assert_eq!(err.kind_name(), "bad_file");
        assert!(err.to_string().contains("a directory"), "{err}");
        #[cfg(unix)]
        for device in ["/dev/zero", "/dev/urandom"] {
            let err = read_file(Path::new(device), u64::MAX).unwrap_err();
            assert_eq!(err.kind_name(), "bad_file", "{device}");
            assert!(err.to_string().contains("a character device"), "{err}");
        }
    }
}
