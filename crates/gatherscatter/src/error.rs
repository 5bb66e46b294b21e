//! The one error type of the library.
//!
//! Every variant carries the numbers a caller needs to fix the call: the
//! offending value, where it is, and what would have been valid.

use std::fmt;

use crate::display::Dims;
use crate::dtype::DType;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a gather/scatter call.
///
/// Each variant maps to a short stable [`ErrorKind`] name (`out_of_bounds`,
/// `bad_axis`, ...) that tools can match on; the `Display` text is for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An index value lies outside the valid range of its axis.
    #[error("{}", describe_out_of_range(*.value, .position, *.axis, *.axis_size, *.negative_allowed))]
    IndexOutOfRange {
        /// The index value as written (unsigned values above `i64::MAX` kept exact).
        value: i128,
        /// Multi-dimensional position of the value in the indices tensor.
        position: Vec<usize>,
        /// Normalized data axis the index addresses.
        axis: usize,
        /// Size of that axis.
        axis_size: usize,
        /// Whether negative indices are allowed by the active profile.
        negative_allowed: bool,
    },
    /// A TensorScatter write index that does not place its update inside the cache.
    #[error("{}", describe_write_index(*.value, *.batch, *.axis, *.max_sequence_length, *.sequence_length, *.circular))]
    WriteIndexOutOfRange {
        /// The write index as given.
        value: i128,
        /// Its position in `write_indices` (the batch entry).
        batch: usize,
        /// The sequence axis of the cache.
        axis: usize,
        /// Size of the sequence axis of the cache.
        max_sequence_length: usize,
        /// Size of the sequence axis of the update.
        sequence_length: usize,
        /// Whether the mode is circular (indices wrap) rather than linear.
        circular: bool,
    },
    /// An axis attribute outside `[-rank, rank - 1]`.
    #[error("axis {axis} is out of range [{}, {}] for {what} of rank {rank}", -(*.rank as i128), *.rank as i128 - 1)]
    BadAxis {
        /// The axis as given.
        axis: i64,
        /// Rank of the tensor the axis refers to.
        rank: usize,
        /// Which tensor (`"data"`, ...).
        what: &'static str,
    },
    /// A tensor's rank is not one the operator accepts.
    #[error("{what} has rank {actual}, but {expected}")]
    RankMismatch {
        /// Which tensor.
        what: &'static str,
        /// Its rank.
        actual: usize,
        /// What was required, in words (`"rank >= 1 is required"`).
        expected: String,
    },
    /// Two shapes that must agree do not.
    #[error("{message}")]
    ShapeMismatch {
        /// The full explanation, naming both shapes and the dimension.
        message: String,
    },
    /// An element type the operator (or the active profile) does not accept.
    #[error("{what} has dtype {dtype}, which {context} does not accept (accepted: {})", list_dtypes(.accepted))]
    BadDType {
        /// Which tensor.
        what: &'static str,
        /// Its element type.
        dtype: DType,
        /// The operator or profile that refused it.
        context: String,
        /// The element types that would have been accepted.
        accepted: Vec<DType>,
    },
    /// An attribute value (other than the axis) that is invalid.
    #[error("{message}")]
    BadAttribute {
        /// The explanation, naming the attribute and its value.
        message: String,
    },
    /// A reduction that is unknown, or that the dtype or profile does not support.
    #[error("{message}")]
    BadReduction {
        /// The explanation, naming the reduction and why it is refused.
        message: String,
    },
    /// The buffer handed in does not hold the number of elements the shape claims.
    #[error("{what} has {actual} elements, but its shape {} needs {expected}", Dims(.shape))]
    DataLength {
        /// Which tensor.
        what: &'static str,
        /// Its shape.
        shape: Vec<usize>,
        /// Elements the shape needs.
        expected: usize,
        /// Elements the buffer holds.
        actual: usize,
    },
    /// An element count or byte count that does not fit in `usize`.
    #[error("the element count of {what} with shape {} overflows usize", Dims(.shape))]
    SizeOverflow {
        /// Which tensor.
        what: &'static str,
        /// The shape whose product overflows.
        shape: Vec<usize>,
    },
    /// Segment boundaries that do not describe segments: an `indptr` that
    /// decreases or leaves its axis, or a segment `index` that is unsorted,
    /// negative or past the segment count.
    #[error("{message}")]
    BadSegments {
        /// The explanation, naming the value, its position and the rule.
        message: String,
    },
    /// The output could not be allocated.
    #[error("cannot allocate {elements} elements of {dtype} for the output")]
    Allocation {
        /// Elements requested.
        elements: usize,
        /// Their element type.
        dtype: DType,
    },
    /// The operator does not exist in the requested profile (opset, feature level).
    #[error("{message}")]
    Unsupported {
        /// The explanation.
        message: String,
    },
}

/// Stable short names for the error variants, for tools and exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`Error::IndexOutOfRange`].
    OutOfBounds,
    /// [`Error::BadAxis`].
    BadAxis,
    /// [`Error::RankMismatch`].
    RankMismatch,
    /// [`Error::ShapeMismatch`] and [`Error::DataLength`].
    ShapeMismatch,
    /// [`Error::BadDType`].
    BadDType,
    /// [`Error::BadAttribute`].
    BadAttribute,
    /// [`Error::BadReduction`].
    BadReduction,
    /// [`Error::BadSegments`].
    BadSegments,
    /// [`Error::SizeOverflow`].
    SizeOverflow,
    /// [`Error::Allocation`]: the memory for the output or a working
    /// buffer could not be had.
    OutOfMemory,
    /// [`Error::Unsupported`].
    Unsupported,
}

impl ErrorKind {
    /// The snake_case name (`"out_of_bounds"`, `"bad_axis"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::OutOfBounds => "out_of_bounds",
            ErrorKind::BadAxis => "bad_axis",
            ErrorKind::RankMismatch => "rank_mismatch",
            ErrorKind::ShapeMismatch => "shape_mismatch",
            ErrorKind::BadDType => "bad_dtype",
            ErrorKind::BadAttribute => "bad_attribute",
            ErrorKind::BadReduction => "bad_reduction",
            ErrorKind::BadSegments => "bad_segments",
            ErrorKind::SizeOverflow => "size_overflow",
            ErrorKind::OutOfMemory => "out_of_memory",
            ErrorKind::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// The stable kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::IndexOutOfRange { .. } | Error::WriteIndexOutOfRange { .. } => {
                ErrorKind::OutOfBounds
            }
            Error::BadAxis { .. } => ErrorKind::BadAxis,
            Error::RankMismatch { .. } => ErrorKind::RankMismatch,
            Error::ShapeMismatch { .. } | Error::DataLength { .. } => ErrorKind::ShapeMismatch,
            Error::BadDType { .. } => ErrorKind::BadDType,
            Error::BadAttribute { .. } => ErrorKind::BadAttribute,
            Error::BadReduction { .. } => ErrorKind::BadReduction,
            Error::BadSegments { .. } => ErrorKind::BadSegments,
            Error::SizeOverflow { .. } => ErrorKind::SizeOverflow,
            Error::Allocation { .. } => ErrorKind::OutOfMemory,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
        }
    }

    pub(crate) fn shape(message: impl Into<String>) -> Error {
        Error::ShapeMismatch {
            message: message.into(),
        }
    }

    pub(crate) fn attribute(message: impl Into<String>) -> Error {
        Error::BadAttribute {
            message: message.into(),
        }
    }

    pub(crate) fn segments(message: impl Into<String>) -> Error {
        Error::BadSegments {
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> Error {
        Error::Unsupported {
            message: message.into(),
        }
    }
}

fn describe_out_of_range(
    value: i128,
    position: &[usize],
    axis: usize,
    axis_size: usize,
    negative_allowed: bool,
) -> String {
    let at = format_position(position);
    if axis_size == 0 {
        return format!(
            "index {value} at indices{at} is out of range: axis {axis} has size 0, so no index is valid"
        );
    }
    let size = axis_size as i128;
    if negative_allowed {
        format!(
            "index {value} at indices{at} is out of range [{}, {}] for axis {axis} of size {axis_size}",
            -size,
            size - 1
        )
    } else {
        format!(
            "index {value} at indices{at} is out of range [0, {}] for axis {axis} of size {axis_size} (negative indices are not allowed by the active profile)",
            size - 1
        )
    }
}

fn describe_write_index(
    value: i128,
    batch: usize,
    axis: usize,
    max_sequence_length: usize,
    sequence_length: usize,
    circular: bool,
) -> String {
    if circular {
        format!(
            "write index {value} at write_indices[{batch}] is negative; circular mode takes indices >= 0, modulo the size {max_sequence_length} of axis {axis}"
        )
    } else {
        format!(
            "write index {value} at write_indices[{batch}] is out of range [0, {}]: an update of length {sequence_length} must fit inside axis {axis} of size {max_sequence_length} in linear mode",
            max_sequence_length as i128 - sequence_length as i128
        )
    }
}

/// `[1, 2]` for a position, `[]` for the single element of a scalar; a
/// position of very high rank is elided as [`Dims`] elides shapes.
pub(crate) fn format_position(position: &[usize]) -> String {
    Dims(position).to_string()
}

fn list_dtypes(dtypes: &[DType]) -> String {
    let names: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
    names.join(", ")
}
