//! The CLI's error: a kind name, a message and the exit status it maps to.

use std::fmt;
use std::path::Path;

use gatherscatter_onnx::OnnxError;

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

/// An error as gsx reports it: `error[KIND]: MESSAGE` on stderr and an exit
/// status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// The kind's name: the library's (`out_of_bounds`, `bad_dtype`, ...) or
    /// `io`, `bad_file`, `bad_model`, `out_of_memory`, `usage`,
    /// `unsupported`, `internal`.
    pub kind: &'static str,
    /// The explanation.
    pub message: String,
    /// The exit status.
    pub exit_code: u8,
}

impl CliError {
    fn new(kind: &'static str, message: String) -> CliError {
        let exit_code = match kind {
            "unsupported" => EXIT_UNSUPPORTED,
            "usage" => EXIT_USAGE,
            "internal" => EXIT_INTERNAL,
            _ => EXIT_INVALID,
        };
        CliError {
            kind,
            message,
            exit_code,
        }
    }

    /// The operating system refused: a file could not be read or written,
    /// or threads could not be started.
    pub fn io(path: &Path, error: std::io::Error) -> CliError {
        CliError::new("io", format!("{}: {error}", path.display()))
    }

    /// The operating system refused something other than a file.
    pub fn system(message: String) -> CliError {
        CliError::new("io", message)
    }

    /// More memory than the budget allows (see [`crate::budget`]).
    pub fn out_of_memory(message: String) -> CliError {
        CliError::new("out_of_memory", message)
    }

    /// A file's content is invalid; the message is prefixed with its name.
    pub fn bad_file(path: &Path, message: String) -> CliError {
        CliError::new("bad_file", format!("{}: {message}", path.display()))
    }

    /// Something gsx does not implement.
    pub fn unsupported(message: String) -> CliError {
        CliError::new("unsupported", message)
    }

    /// A command line that makes no sense.
    pub fn usage(message: String) -> CliError {
        CliError::new("usage", message)
    }

    /// A bug in gsx.
    pub fn internal(message: String) -> CliError {
        CliError::new("internal", message)
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
        CliError::new(e.kind().as_str(), e.to_string())
    }
}

impl From<OnnxError> for CliError {
    fn from(e: OnnxError) -> CliError {
        CliError::new(e.kind_name(), e.to_string())
    }
}
