//! The error type of model loading and execution.

use std::path::PathBuf;

use gatherscatter::ErrorKind;

/// What went wrong reading or running a model, a tensor file or a test case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Bytes that are not a valid protobuf message of the expected type.
    #[error("{what} is not a valid protobuf message: {source}")]
    Decode {
        /// Which message (and file, when known).
        what: String,
        /// prost's reason.
        source: prost::DecodeError,
    },
    /// A well-formed message that breaks an ONNX rule (a missing field, a
    /// data length that disagrees with the dims, a cycle in the graph).
    #[error("{0}")]
    Malformed(String),
    /// An op, attribute, dtype or feature this implementation does not offer.
    #[error("{0}")]
    Unsupported(String),
    /// A node's op refused its inputs; `source` is the library's error.
    #[error("node {node:?} ({op}): {source}")]
    Op {
        /// The node's name, or its position when unnamed.
        node: String,
        /// `domain::op_type`, or just `op_type` in the default domain.
        op: String,
        /// The op's error (boxed: it is large, and rare).
        source: Box<gatherscatter::Error>,
    },
    /// A value was given as an input whose dtype or shape disagrees with the
    /// graph's declaration, or an input is missing.
    #[error("{message}")]
    Input {
        /// The error kind, `bad_dtype`, `shape_mismatch` or `rank_mismatch`.
        kind: ErrorKind,
        /// What disagrees, naming the input.
        message: String,
    },
    /// A file larger than the caller's bound, or too large to hold in memory.
    #[error("{}: {bytes} bytes do not fit the memory budget of {limit} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The bound it exceeds.
        limit: u64,
    },
    /// A file is longer or shorter than its header claims, or its header is
    /// not what the format allows, or it is not a regular file.
    #[error("{}: {message}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

impl OnnxError {
    /// A short machine-readable name: the library's [`ErrorKind`] name for op
    /// and input errors, else `io`, `bad_model`, `bad_file`, `out_of_memory`
    /// or `unsupported`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            OnnxError::Io { .. } => "io",
            OnnxError::Decode { .. } | OnnxError::Malformed(_) => "bad_model",
            OnnxError::BadFile { .. } => "bad_file",
            OnnxError::TooLarge { .. } => "out_of_memory",
            OnnxError::Unsupported(_) => "unsupported",
            OnnxError::Op { source, .. } => source.kind().as_str(),
            OnnxError::Input { kind, .. } => kind.as_str(),
        }
    }

    /// True when the cause is something not implemented (an op, attribute or
    /// dtype), as opposed to invalid input.
    pub fn is_unsupported(&self) -> bool {
        self.kind_name() == "unsupported"
    }

    /// Attach a file name to an error about the file's content: a decode
    /// or malformed-data error becomes [`OnnxError::BadFile`], and an
    /// unsupported feature of the file names the file too.
    pub fn in_file(self, path: impl Into<PathBuf>) -> OnnxError {
        let path = path.into();
        match self {
            OnnxError::Decode { .. } | OnnxError::Malformed(_) => OnnxError::BadFile {
                path,
                message: self.to_string(),
            },
            OnnxError::Unsupported(message) => {
                OnnxError::Unsupported(format!("{}: {message}", path.display()))
            }
            other => other,
        }
    }
}

/// `Result` with [`OnnxError`].
pub type Result<T, E = OnnxError> = std::result::Result<T, E>;
