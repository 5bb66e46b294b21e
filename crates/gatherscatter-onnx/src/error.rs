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

/// What kind of error an [`OnnxError`] is: the library's own kinds (an op
/// refused its inputs, an input disagrees with the graph, a file over its
/// bound is `OutOfMemory`, a feature not offered is `Unsupported`), or one
/// of the file and model kinds this crate adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnnxErrorKind {
    /// A kind of the library's [`ErrorKind`].
    Core(ErrorKind),
    /// A file could not be read or written ([`OnnxError::Io`]).
    Io,
    /// A message that is not valid protobuf or breaks an ONNX rule
    /// ([`OnnxError::Decode`], [`OnnxError::Malformed`]).
    BadModel,
    /// A file whose content is invalid ([`OnnxError::BadFile`]).
    BadFile,
}

impl OnnxErrorKind {
    /// The snake_case name: the library kind's name, or `io`, `bad_model`,
    /// `bad_file`.
    ///
    /// ```
    /// use gatherscatter::ErrorKind;
    /// use gatherscatter_onnx::OnnxErrorKind;
    ///
    /// assert_eq!(OnnxErrorKind::BadModel.as_str(), "bad_model");
    /// assert_eq!(OnnxErrorKind::Core(ErrorKind::OutOfBounds).as_str(), "out_of_bounds");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            OnnxErrorKind::Core(kind) => kind.as_str(),
            OnnxErrorKind::Io => "io",
            OnnxErrorKind::BadModel => "bad_model",
            OnnxErrorKind::BadFile => "bad_file",
        }
    }
}

impl std::fmt::Display for OnnxErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorKind> for OnnxErrorKind {
    fn from(kind: ErrorKind) -> OnnxErrorKind {
        OnnxErrorKind::Core(kind)
    }
}

impl OnnxError {
    /// The error's kind.
    pub fn kind(&self) -> OnnxErrorKind {
        match self {
            OnnxError::Io { .. } => OnnxErrorKind::Io,
            OnnxError::Decode { .. } | OnnxError::Malformed(_) => OnnxErrorKind::BadModel,
            OnnxError::BadFile { .. } => OnnxErrorKind::BadFile,
            OnnxError::TooLarge { .. } => ErrorKind::OutOfMemory.into(),
            OnnxError::Unsupported(_) => ErrorKind::Unsupported.into(),
            OnnxError::Op { source, .. } => source.kind().into(),
            OnnxError::Input { kind, .. } => (*kind).into(),
        }
    }

    /// The kind's name, `kind().as_str()`.
    pub fn kind_name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// True when the cause is something not implemented (an op, attribute or
    /// dtype), as opposed to invalid input.
    pub fn is_unsupported(&self) -> bool {
        self.kind() == OnnxErrorKind::Core(ErrorKind::Unsupported)
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
