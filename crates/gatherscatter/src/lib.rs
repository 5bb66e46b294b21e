//! # gatherscatter
//!
//! The tensor gather/scatter operator family, exact on every contract:
//! ONNX Gather, GatherElements (with the DirectML and MindSpore contracts),
//! ScatterElements with every reduction and the deprecated Scatter, GatherND,
//! ScatterND and TensorScatter; beyond ONNX, PyTorch's `scatter_reduce`,
//! `embedding_bag` and `index_*`, and pytorch_scatter's segment reductions.
//!
//! - Every one of the 16 ONNX dtypes ([`DType`]) and every integer index type
//!   (`i8`..`i64`, `u8`..`u64`).
//! - Every index is checked. Out-of-range values are an [`Error`] naming the
//!   value, its position, the axis and the valid range — never a panic, a
//!   wrap or a clamp unless the caller asks for one ([`IndexPolicy`]) — and
//!   a failed call returns no output. Gather, GatherND,
//!   ScatterND and TensorScatter check every index before writing;
//!   GatherElements and ScatterElements, whose indices are as large as their
//!   output, check each index as they use it, so their `run_into` may leave
//!   the caller's output buffer partly written on an error (as each
//!   `run_into` documents). A scatter never writes its `data`.
//! - [`Profile`]s check a call against the strict contract of ONNX (by opset),
//!   DirectML (by feature level) or MindSpore.
//!
//! Two APIs share one kernel: the dynamic [`Tensor`] for runtimes, and
//! [`TypedTensor`] / [`TypedView`] for callers who know their element type.
//!
//! ## Gather
//!
//! ```
//! use gatherscatter::{gather, Tensor};
//!
//! let data = Tensor::new(vec![3, 3], vec![1.0f32, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9])?;
//! let indices = Tensor::new(vec![1, 2], vec![0i64, 2])?;
//! let out = gather(&data, &indices, 1)?;
//! assert_eq!(out.shape(), &[3, 1, 2]);
//! assert_eq!(out.data::<f32>().unwrap(), &[1.0, 1.9, 2.3, 3.9, 4.5, 5.9]);
//! # Ok::<(), gatherscatter::Error>(())
//! ```
//!
//! ## GatherElements
//!
//! ```
//! use gatherscatter::{gather_elements, Tensor};
//!
//! let data = Tensor::new(vec![3, 3], (1..=9).collect::<Vec<i32>>())?;
//! let indices = Tensor::new(vec![2, 3], vec![1i64, 2, 0, 2, 0, 0])?;
//! let out = gather_elements(&data, &indices, 0)?;
//! assert_eq!(out.data::<i32>().unwrap(), &[4, 8, 3, 7, 2, 3]);
//! # Ok::<(), gatherscatter::Error>(())
//! ```
//!
//! ## ScatterElements
//!
//! ```
//! use gatherscatter::{Reduction, ScatterElements, Tensor};
//!
//! let data = Tensor::new(vec![1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])?;
//! let indices = Tensor::new(vec![1, 2], vec![1i64, 1])?;
//! let updates = Tensor::new(vec![1, 2], vec![1.1f32, 2.1])?;
//! let out = ScatterElements::new(1)
//!     .reduction(Reduction::Add)
//!     .run(&data, &indices, &updates)?;
//! assert_eq!(out.data::<f32>().unwrap(), &[1.0, 5.2, 3.0, 4.0, 5.0]);
//! # Ok::<(), gatherscatter::Error>(())
//! ```
//!
//! ## GatherND, ScatterND and TensorScatter
//!
//! ```
//! use gatherscatter::{GatherND, Reduction, ScatterND, Tensor, TensorScatter};
//!
//! let data = Tensor::new(vec![2, 2], vec![0i32, 1, 2, 3])?;
//! let pairs = Tensor::new(vec![2, 2], vec![0i64, 0, 1, 1])?;
//! assert_eq!(GatherND::new().run(&data, &pairs)?.data::<i32>().unwrap(), &[0, 3]);
//!
//! let rows = Tensor::new(vec![2, 1], vec![1i64, 1])?;
//! let updates = Tensor::new(vec![2, 2], vec![10i32, 10, 20, 20])?;
//! let out = ScatterND::new().reduction(Reduction::Add).run(&data, &rows, &updates)?;
//! assert_eq!(out.data::<i32>().unwrap(), &[0, 1, 32, 33]);
//!
//! // KV cache [batch 1, seq 3, dim 1]: write one step at position 2.
//! let cache = Tensor::new(vec![1, 3, 1], vec![0.0f32; 3])?;
//! let step = Tensor::new(vec![1, 1, 1], vec![7.0f32])?;
//! let at = Tensor::from_vec(vec![2i64]);
//! let out = TensorScatter::new().run(&cache, &step, Some((&at).into()))?;
//! assert_eq!(out.data::<f32>().unwrap(), &[0.0, 0.0, 7.0]);
//! # Ok::<(), gatherscatter::Error>(())
//! ```
//!
//! ## Large fresh outputs
//!
//! Every op that returns a fresh tensor allocates it through the program's
//! global allocator, and the kernel takes its page faults as it writes. On
//! 4 KiB pages those can cost more than the op: writing a fresh 32 MiB
//! took 12.5 ms on the 2-vCPU VM of the benchmarks against 1.4 ms on 2 MiB
//! pages. Programs that make large outputs can install the workspace's
//! `gatherscatter-heap` crate, as `gsx-bench` and the Python extension do:
//! `#[global_allocator] static HEAP: gatherscatter_heap::HugePageHeap =
//! gatherscatter_heap::HugePageHeap::enabled();` asks for huge pages under
//! every block of 4 MiB or more, as numpy does for its arrays. Or pass a
//! buffer of your own to the ops' `run_into`.
#![deny(missing_docs)]
// `unsafe` is allowed in eight modules only, each a benchmark's finding
// (docs/performance.md): `mem::stream` (x86-64 streaming stores),
// `mem::prefetch` (cache hints), `mem::uninit` (fresh outputs not zeroed
// first), `ops::blocks` (the streaming row copy of Gather and GatherND),
// `ops::gather_elements::avx2` (AVX2 gathers),
// `ops::embedding_bag::registers` (bag sums in AVX2 registers), `ieee`
// (SSE max/min) and `float16` (F16C conversions); elsewhere only to call
// `uninit::new_vec_written` and `uninit::new_vec_of`.
#![deny(unsafe_code)]

mod aggregate;
mod display;
pub mod dtype;
pub mod error;
mod float16;
mod grad;
mod ieee;
pub mod index;
mod mem;
pub mod ops;
mod policy;
pub mod profile;
pub mod reduction;
mod shape;
pub mod tensor;
pub mod tensor_view;
pub mod tuning;

pub use display::Dims;
pub use dtype::{DType, Element};
pub use error::{Error, ErrorKind, Result};
pub use grad::{EmbeddingBagGrads, ScatterGrads};
pub use index::IndexElement;
pub use mem::parallel::on_calling_thread;
pub use ops::embedding_bag::{embedding_bag, EmbeddingBag};
pub use ops::gather::{gather, Gather};
pub use ops::gather_elements::{gather_elements, GatherElements};
pub use ops::gather_nd::{gather_nd, GatherND};
pub use ops::index_along::{index_add, index_copy, index_select};
pub use ops::op::Op;
pub use ops::scatter_elements::{scatter_elements, Scatter, ScatterElements};
pub use ops::scatter_nd::{scatter_nd, ScatterND};
pub use ops::scatter_reduce::{scatter_reduce, ScatterReduce};
pub use ops::segment::{segment_coo, segment_csr, SegmentCoo, SegmentCsr};
pub use ops::tensor_scatter::{ScatterMode, TensorScatter};
pub use policy::IndexPolicy;
pub use profile::{FeatureLevel, Profile};
pub use reduction::{Aggregate, Reduction};
pub use shape::element_count;
pub use tensor::{Tensor, TypedTensor, TypedView, TypedViewMut};
pub use tensor_view::{TensorView, TensorViewMut};

pub use half::{bf16, f16};
pub use num_complex::{Complex32, Complex64};

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
