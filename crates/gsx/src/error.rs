//! The CLI's error: a typed kind, a message, and the exit status the kind
//! maps to.

use std::fmt;
use std::path::Path;

use gatherscatter::ErrorKind;
use gatherscatter_onnx::{OnnxError, OnnxErrorKind};

/// Exit status for invalid input: a bad index, shape, dtype, file.
pub const EXIT_INVALID: u8 = 1;
/// Exit status for a usage error (clap's convention).
pub const EXIT_USAGE: u8 = 2;
/// Exit status for an internal error, a bug in gsx (sysexits'
/// EX_SOFTWARE); a panic is reported with it too.
pub const EXIT_INTERNAL: u8 = 70;
/// Exit status for an op, attribute or dtype that is not supported (the
/// automake convention for "skipped").
pub const EXIT_UNSUPPORTED: u8 = 77;

/// What kind of error gsx reports: the library's and the ONNX crate's
/// kinds, and the command line's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CliErrorKind {
    /// A kind of the library, the ONNX crate or the files
    /// (`out_of_bounds`, `bad_file`, `io`, ...).
    Onnx(OnnxErrorKind),
    /// A command line that makes no sense.
    Usage,
    /// A bug in gsx.
    Internal,
    /// Conformance cases that failed.
    Conformance,
}

impl CliErrorKind {
    /// The name printed as `error[NAME]`.
    pub fn as_str(self) -> &'static str {
        match self {
            CliErrorKind::Onnx(kind) => kind.as_str(),
            CliErrorKind::Usage => "usage",
            CliErrorKind::Internal => "internal",
            CliErrorKind::Conformance => "conformance",
        }
    }

    /// The exit status: 77 for `unsupported`, 2 for `usage`, 70 for
    /// `internal`, 1 for every other kind (spec §5).
    pub fn exit_code(self) -> u8 {
        match self {
            CliErrorKind::Onnx(OnnxErrorKind::Core(ErrorKind::Unsupported)) => EXIT_UNSUPPORTED,
            CliErrorKind::Usage => EXIT_USAGE,
            CliErrorKind::Internal => EXIT_INTERNAL,
            _ => EXIT_INVALID,
        }
    }
}

impl fmt::Display for CliErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorKind> for CliErrorKind {
    fn from(kind: ErrorKind) -> CliErrorKind {
        CliErrorKind::Onnx(OnnxErrorKind::Core(kind))
    }
}

impl From<OnnxErrorKind> for CliErrorKind {
    fn from(kind: OnnxErrorKind) -> CliErrorKind {
        CliErrorKind::Onnx(kind)
    }
}

/// An error as gsx reports it: `error[KIND]: MESSAGE` on stderr and the
/// kind's exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// What kind of error.
    pub kind: CliErrorKind,
    /// The explanation.
    pub message: String,
}

impl CliError {
    /// An error of `kind`.
    pub fn new(kind: impl Into<CliErrorKind>, message: String) -> CliError {
        CliError {
            kind: kind.into(),
            message,
        }
    }

    /// The exit status gsx ends with.
    pub fn exit_code(&self) -> u8 {
        self.kind.exit_code()
    }

    /// The operating system refused: a file could not be read or written,
    /// or threads could not be started.
    pub fn io(path: &Path, error: std::io::Error) -> CliError {
        CliError::new(OnnxErrorKind::Io, format!("{}: {error}", path.display()))
    }

    /// The operating system refused something other than a file.
    pub fn system(message: String) -> CliError {
        CliError::new(OnnxErrorKind::Io, message)
    }

    /// More memory than the budget allows (see [`crate::budget`]).
    pub fn out_of_memory(message: String) -> CliError {
        CliError::new(ErrorKind::OutOfMemory, message)
    }

    /// A file's content is invalid; the message is prefixed with its name.
    pub fn bad_file(path: &Path, message: String) -> CliError {
        CliError::new(
            OnnxErrorKind::BadFile,
            format!("{}: {message}", path.display()),
        )
    }

    /// Something gsx does not implement.
    pub fn unsupported(message: String) -> CliError {
        CliError::new(ErrorKind::Unsupported, message)
    }

    /// A command line that makes no sense.
    pub fn usage(message: String) -> CliError {
        CliError::new(CliErrorKind::Usage, message)
    }

    /// A bug in gsx.
    pub fn internal(message: String) -> CliError {
        CliError::new(CliErrorKind::Internal, message)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error[{}]: {}", self.kind, self.message)
    }
}

impl std::error::Error for CliError {}

impl From<gatherscatter::Error> for CliError {
    fn from(e: gatherscatter::Error) -> CliError {
        CliError::new(e.kind(), e.to_string())
    }
}

impl From<OnnxError> for CliError {
    fn from(e: OnnxError) -> CliError {
        CliError::new(e.kind(), e.to_string())
    }
}
