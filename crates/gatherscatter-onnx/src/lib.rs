//! ONNX I/O for [`gatherscatter`]: `ModelProto` and `TensorProto` reading and
//! writing, graph execution for the gather/scatter family, and the ONNX
//! backend-test layout (`model.onnx` + `test_data_set_N/`).
//!
//! The protobuf types are generated at build time from the official
//! `onnx.proto` (vendored in `proto/`) by `protox` and `prost-build`, both pure
//! Rust: no system `protoc` is needed.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod builder;
pub mod conformance;
pub mod error;
pub mod file;
pub mod model;
mod node;
pub mod tensor_proto;

/// The ONNX protobuf messages, generated from `proto/onnx.proto`.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

pub use error::{OnnxError, OnnxErrorKind, Result};
pub use model::{Model, ValueSpec};
pub use node::{DEFAULT_DIRECTML_FEATURE_LEVEL, DIRECTML_DOMAIN, MINDSPORE_DOMAIN, SUPPORTED_OPS};
pub use tensor_proto::{
    decode_tensor, encode_tensor, read_tensor_file, read_tensor_file_limited, tensor_from_proto,
    tensor_to_proto, Encoding,
};
