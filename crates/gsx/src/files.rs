//! Tensor files by extension (`.npy`, `.pb`), and writes that never leave a
//! partial file, never follow a planted link and never replace an input.
//!
//! Reading: only regular files are read (a device, FIFO or directory is
//! refused before a byte is read), within the memory budget.
//!
//! Writing goes through [`Staged`] outputs: each is written to a fresh
//! temporary file in the output's directory, created exclusively under a
//! random name (`O_CREAT | O_EXCL`, so a symlink or file planted at the
//! name is never opened), then renamed over the output by [`commit`] once
//! every output of the command is written. A failure before the renames
//! removes every temporary file; so does SIGINT, SIGTERM or SIGHUP
//! ([`install_signal_cleanup`]), after which gsx exits with 128 + the
//! signal's number, as a shell reports it.

use std::fs::{File, Metadata};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use gatherscatter::Tensor;
use gatherscatter_onnx::{encode_tensor, read_tensor_file_limited};

use crate::budget;
use crate::error::CliError;
use crate::npy;

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

/// Read a tensor file, within the memory budget.
pub fn load(path: &Path) -> Result<Tensor, CliError> {
    match format_of(path)? {
        Format::Npy => npy::read(path),
        Format::Pb => Ok(read_tensor_file_limited(path, budget::budget())?.1),
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

/// The same file on disk (device and inode), for hard links.
#[cfg(unix)]
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &Metadata, _: &Metadata) -> bool {
    false
}

/// Whether two output paths name the same file, however spelled (`./`,
/// `..`, a symlink, another hard link of an existing file).
pub fn same_output(a: &Path, b: &Path) -> bool {
    if resolved(a) == resolved(b) {
        return true;
    }
    matches!(
        (std::fs::metadata(a), std::fs::metadata(b)),
        (Ok(x), Ok(y)) if same_file(&x, &y)
    )
}

/// Refuse an output path that names one of `inputs`, however spelled
/// (`./`, `..`, a symlink to it, or another hard link of the same file),
/// and an existing output that is not a regular file or a symlink.
pub fn check_not_an_input(path: &Path, inputs: &[PathBuf]) -> Result<(), CliError> {
    let target = resolved(path);
    if inputs.iter().any(|input| resolved(input) == target) {
        return Err(CliError::usage(format!(
            "{}: refusing to overwrite an input file",
            path.display()
        )));
    }
    let Ok(existing) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let kind = existing.file_type();
    if !kind.is_file() && !kind.is_symlink() {
        return Err(CliError::usage(format!(
            "{}: exists and is {}; refusing to replace it",
            path.display(),
            gatherscatter_onnx::file::file_type_name(&kind)
        )));
    }
    if kind.is_file() {
        for input in inputs {
            if std::fs::metadata(input).is_ok_and(|m| same_file(&m, &existing)) {
                return Err(CliError::usage(format!(
                    "{}: is another name (a hard link) of the input {}; refusing to replace it",
                    path.display(),
                    input.display()
                )));
            }
        }
    }
    Ok(())
}

/// The temporary files that exist right now, for the signal handler.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temporaries() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// On SIGINT, SIGTERM or SIGHUP, remove every temporary output file and
/// exit with 128 + the signal's number. Call once, early in `main`.
pub fn install_signal_cleanup() -> Result<(), CliError> {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            .map_err(|e| CliError::system(format!("cannot install signal handlers: {e}")))?;
        std::thread::Builder::new()
            .name("gsx-signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    // Held to the end: no new temporary file is made after
                    // this sweep.
                    let list = temporaries();
                    for path in list.iter() {
                        let _ = std::fs::remove_file(path);
                    }
                    std::process::exit(128 + signal);
                }
            })
            .map_err(|e| CliError::system(format!("cannot start the signal thread: {e}")))?;
    }
    Ok(())
}

/// An output written to its temporary file, waiting for [`commit`].
/// Dropped uncommitted, it removes its temporary file.
#[derive(Debug)]
pub struct Staged {
    temp: Option<tempfile::NamedTempFile>,
    target: PathBuf,
}

impl Staged {
    /// Create the temporary file for `target` in its directory, write it
    /// with `write`, and flush it to disk. Refuses a target that names an
    /// input (see [`check_not_an_input`]).
    pub fn write(
        target: &Path,
        inputs: &[PathBuf],
        write: impl FnOnce(&mut BufWriter<&File>) -> std::io::Result<()>,
    ) -> Result<Staged, CliError> {
        check_not_an_input(target, inputs)?;
        let file_name = target
            .file_name()
            .ok_or_else(|| CliError::usage(format!("{}: not a file name", target.display())))?;
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(file_name);
        prefix.push(".");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // The mode a plain create gets: 0666 less the umask.
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let staged = {
            let mut list = temporaries();
            let temp = builder
                .tempfile_in(dir)
                .map_err(|e| CliError::io(target, e))?;
            list.push(temp.path().to_path_buf());
            Staged {
                temp: Some(temp),
                target: target.to_path_buf(),
            }
        };
        if let Some(temp) = &staged.temp {
            let file = temp.as_file();
            let result = (|| {
                let mut writer = BufWriter::with_capacity(npy::CHUNK, file);
                write(&mut writer)?;
                writer.flush()?;
                drop(writer);
                file.sync_all()
            })();
            result.map_err(|e| CliError::io(target, e))?;
        }
        Ok(staged)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(temp) = &self.temp {
            let path = temp.path().to_path_buf();
            temporaries().retain(|p| *p != path);
        }
        // Dropping the NamedTempFile removes the file.
    }
}

/// Rename every staged output over its target, in order. Called only once
/// all of a command's outputs are written, so a failure while writing
/// leaves no output changed. A rename that fails (rare: the directory
/// became unwritable) stops there: the outputs renamed before it are in
/// place, the rest keep their old content, and the error names the one
/// that failed.
pub fn commit(staged: Vec<Staged>) -> Result<(), CliError> {
    for mut output in staged {
        let Some(temp) = output.temp.take() else {
            continue;
        };
        let path = temp.path().to_path_buf();
        let result = temp.persist(&output.target);
        temporaries().retain(|p| *p != path);
        result.map_err(|e| CliError::io(&output.target, e.error))?;
    }
    Ok(())
}

/// Stage a tensor in the format `path` names.
pub fn stage(
    path: &Path,
    tensor: &Tensor,
    name: &str,
    inputs: &[PathBuf],
) -> Result<Staged, CliError> {
    match format_of(path)? {
        Format::Npy => {
            let encoder = npy::Encoder::new(tensor)?;
            Staged::write(path, inputs, |w| encoder.write_to(w))
        }
        Format::Pb => {
            let bytes = encode_tensor(tensor, name)?;
            Staged::write(path, inputs, |w| w.write_all(&bytes))
        }
    }
}

/// Write one tensor atomically: staged, then committed.
pub fn save(path: &Path, tensor: &Tensor, name: &str, inputs: &[PathBuf]) -> Result<(), CliError> {
    commit(vec![stage(path, tensor, name, inputs)?])
}
