//! TensorScatter (ONNX 24): the KV-cache update.
//!
//! `present = copy of past_cache`; then for each prefix `p` of the dims before
//! `axis` and each `s < sequence_length`,
//! `present[p, w + s, ..] = update[p, s, ..]` with `w = write_indices[p[0]]`
//! (0 when absent), taken modulo `max_sequence_length` in circular mode.

use std::fmt;
use std::str::FromStr;

use super::parallel;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::IndexElement;
use crate::profile::{self, Profile};
use crate::shape::{checked_product, normalize_axis, require_rank_at_least_1};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView};

/// Where a TensorScatter update goes when it reaches the end of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ScatterMode {
    /// The update must fit: `write_index + sequence_length <= max_sequence_length`.
    #[default]
    Linear,
    /// Positions wrap around: `(write_index + s) % max_sequence_length`.
    Circular,
}

impl fmt::Display for ScatterMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScatterMode::Linear => "linear",
            ScatterMode::Circular => "circular",
        })
    }
}

impl FromStr for ScatterMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<ScatterMode> {
        match s {
            "linear" => Ok(ScatterMode::Linear),
            "circular" => Ok(ScatterMode::Circular),
            other => Err(Error::attribute(format!(
                "unknown TensorScatter mode {other:?}; expected linear or circular"
            ))),
        }
    }
}

/// The TensorScatter operator (ONNX 24).
///
/// - `past_cache` has rank `r >= 2`; `axis` (default -2) is the sequence
///   axis and may not be 0, the batch axis.
/// - `update` equals `past_cache` in shape except along `axis`, where it may
///   be shorter (`sequence_length <= max_sequence_length`).
/// - `write_indices` (optional, shape `[batch]`) gives each batch entry's
///   first write position: in linear mode in `[0, max - sequence_length]`,
///   in circular mode any value `>= 0`, taken modulo `max_sequence_length`.
///   All are checked before the output exists.
///
/// ```
/// use gatherscatter::{ScatterMode, Tensor, TensorScatter};
///
/// // A [batch 1, seq 4, dim 1] cache; write 2 steps at position 3, circularly.
/// let past = Tensor::new(vec![1, 4, 1], vec![0.0f32, 1.0, 2.0, 3.0])?;
/// let update = Tensor::new(vec![1, 2, 1], vec![10.0f32, 11.0])?;
/// let write = Tensor::from_vec(vec![3i64]);
/// let out = TensorScatter::new().mode(ScatterMode::Circular).run(&past, &update, Some((&write).into()))?;
/// assert_eq!(out.data::<f32>().unwrap(), &[11.0, 1.0, 2.0, 10.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorScatter {
    /// The sequence axis, in `[-r, r-1]`, never the batch axis 0. Default -2.
    pub axis: i64,
    /// Linear or circular writes.
    pub mode: ScatterMode,
    /// Contract the call is validated against.
    pub profile: Profile,
}

impl Default for TensorScatter {
    fn default() -> Self {
        TensorScatter {
            axis: -2,
            mode: ScatterMode::Linear,
            profile: Profile::Permissive,
        }
    }
}

struct Plan {
    axis: usize,
    batch: usize,
    /// Product of the dims between the batch axis and the sequence axis.
    per_batch: usize,
    max_sequence_length: usize,
    sequence_length: usize,
    inner: usize,
}

impl TensorScatter {
    /// Linear mode along axis -2, permissive profile.
    pub fn new() -> TensorScatter {
        TensorScatter::default()
    }

    /// Set the sequence axis.
    pub fn axis(mut self, axis: i64) -> TensorScatter {
        self.axis = axis;
        self
    }

    /// Set the mode.
    pub fn mode(mut self, mode: ScatterMode) -> TensorScatter {
        self.mode = mode;
        self
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> TensorScatter {
        self.profile = profile;
        self
    }

    /// Run on dynamic tensors. `past_cache` is only read.
    pub fn run<'c, 'u>(
        &self,
        past_cache: impl Into<TensorView<'c>>,
        update: impl Into<TensorView<'u>>,
        write_indices: Option<TensorView<'_>>,
    ) -> Result<Tensor> {
        let (past_cache, update) = (past_cache.into(), update.into());
        super::require_same_dtype(
            "update",
            update.dtype(),
            past_cache.dtype(),
            "TensorScatter on a {} cache",
        )?;
        let plan = self.plan(
            past_cache.shape(),
            past_cache.dtype(),
            update.shape(),
            write_indices.map(|w| (w.shape(), w.dtype())),
        )?;
        let positions = match write_indices {
            None => vec![0; plan.batch],
            Some(w) => {
                crate::index::with_index_view!(w, "TensorScatter write_indices", v => self.resolve(v, &plan)?)
            }
        };
        with_view!(past_cache, t => execute(t, update.typed()?, &positions, &plan).map(Tensor::from))
    }

    /// Run on typed views (`None::<TypedView<i64>>` for no write indices).
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        past_cache: TypedView<'_, T>,
        update: TypedView<'_, T>,
        write_indices: Option<TypedView<'_, I>>,
    ) -> Result<TypedTensor<T>> {
        let plan = self.plan(
            past_cache.shape(),
            T::DTYPE,
            update.shape(),
            write_indices.map(|w| (w.shape(), I::DTYPE)),
        )?;
        let positions = match write_indices {
            None => vec![0; plan.batch],
            Some(w) => self.resolve(w, &plan)?,
        };
        execute(past_cache, update, &positions, &plan)
    }

    fn plan(
        &self,
        past_shape: &[usize],
        dtype: DType,
        update_shape: &[usize],
        write_indices: Option<(&[usize], DType)>,
    ) -> Result<Plan> {
        let r = past_shape.len();
        require_rank_at_least_1("past_cache", r)?;
        let axis = normalize_axis(self.axis, r, "past_cache")?;
        if axis == 0 {
            return Err(Error::attribute(format!(
                "TensorScatter axis {} is the batch axis 0; the sequence axis must be another one",
                self.axis
            )));
        }
        if let Profile::Onnx { opset } = self.profile {
            let version = profile::onnx_since_version("TensorScatter", opset, &[24])?;
            let context = || format!("ONNX TensorScatter-{version} (opset {opset})");
            profile::require_dtype("past_cache", dtype, &DType::ALL, context)?;
            if let Some((_, index_dtype)) = write_indices {
                profile::require_dtype("write_indices", index_dtype, &[DType::I64], context)?;
            }
        } else if self.profile != Profile::Permissive {
            return Err(Error::unsupported(format!(
                "TensorScatter is not part of the {} profile",
                self.profile
            )));
        }
        if update_shape.len() != r {
            return Err(Error::RankMismatch {
                what: "update",
                actual: update_shape.len(),
                expected: format!("the rank {r} of past_cache is required"),
            });
        }
        for d in 0..r {
            let (u, p) = (update_shape[d], past_shape[d]);
            if (d != axis && u != p) || (d == axis && u > p) {
                let rule = if d == axis { "be at most" } else { "equal" };
                return Err(Error::shape(format!(
                    "update dimension {d} is {u}, but it must {rule} past_cache's {p} (update shape {update_shape:?}, past_cache shape {past_shape:?}, axis {axis})"
                )));
            }
        }
        let batch = past_shape[0];
        if let Some((shape, index_dtype)) = write_indices {
            if !index_dtype.is_index_type() {
                return Err(crate::index::not_an_index_type(
                    index_dtype,
                    "TensorScatter write_indices",
                ));
            }
            if shape != [batch] {
                return Err(Error::shape(format!(
                    "write_indices has shape {shape:?}, but it must be [{batch}] (the batch size of past_cache)"
                )));
            }
        }
        let total = checked_product(past_shape).unwrap_or(0);
        let part = |dims: &[usize]| {
            if total == 0 {
                0
            } else {
                checked_product(dims).unwrap_or(0)
            }
        };
        Ok(Plan {
            axis,
            batch,
            per_batch: part(&past_shape[1..axis]),
            max_sequence_length: past_shape[axis],
            sequence_length: update_shape[axis],
            inner: part(&past_shape[axis + 1..]),
        })
    }

    /// Each batch entry's first write position, checked for the mode.
    fn resolve<I: IndexElement>(
        &self,
        write_indices: TypedView<'_, I>,
        plan: &Plan,
    ) -> Result<Vec<usize>> {
        let (max, seq) = (
            plan.max_sequence_length as i128,
            plan.sequence_length as i128,
        );
        let circular = self.mode == ScatterMode::Circular;
        let mut positions = Vec::with_capacity(write_indices.len());
        for (batch, &w) in write_indices.data().iter().enumerate() {
            let v = w.to_i128();
            let ok = if circular {
                v >= 0
            } else {
                v >= 0 && v + seq <= max
            };
            if !ok {
                return Err(Error::WriteIndexOutOfRange {
                    value: v,
                    batch,
                    axis: plan.axis,
                    max_sequence_length: plan.max_sequence_length,
                    sequence_length: plan.sequence_length,
                    circular,
                });
            }
            // Circular with an empty cache has an empty update: nothing is written.
            positions.push(if circular && max > 0 {
                (v % max) as usize
            } else {
                v as usize
            });
        }
        Ok(positions)
    }
}

fn execute<T: Element>(
    past: TypedView<'_, T>,
    update: TypedView<'_, T>,
    positions: &[usize],
    plan: &Plan,
) -> Result<TypedTensor<T>> {
    let mut out = super::alloc_output::<T>(past.len())?;
    copy_and_write_windows(
        T::as_words(past.data()),
        T::as_words_mut(&mut out),
        T::as_words(update.data()),
        positions,
        plan,
    );
    Ok(TypedTensor::from_parts_unchecked(
        past.shape().to_vec(),
        out,
    ))
}

/// `out = past`, then each cache row (one prefix `p`: `max_sequence_length`
/// positions of `inner` elements) gets its window of `update`. Rows are
/// independent, so each task owns a range of them, copies it and writes its
/// windows. Positions are distinct within a window (`sequence_length <=
/// max_sequence_length`), so the order of writes does not matter.
fn copy_and_write_windows<W: Clone + Send + Sync>(
    past: &[W],
    out: &mut [W],
    update: &[W],
    positions: &[usize],
    plan: &Plan,
) {
    let (max, seq, inner) = (plan.max_sequence_length, plan.sequence_length, plan.inner);
    let cache_row = max * inner;
    let update_row = seq * inner;
    if cache_row == 0 || update_row == 0 || plan.per_batch == 0 {
        super::copy_into(past, out);
        return;
    }
    let rows = out.len() / cache_row;
    let rows_per_task = rows.div_ceil(parallel::tasks(std::mem::size_of_val(out), rows));
    super::copy_then(past, out, rows_per_task * cache_row, |offset, owned| {
        let first = offset / cache_row;
        for (k, cache) in owned.chunks_exact_mut(cache_row).enumerate() {
            let p = first + k;
            let start = positions[p / plan.per_batch];
            let window = &update[p * update_row..(p + 1) * update_row];
            for (s, src) in window.chunks_exact(inner).enumerate() {
                let pos = (start + s) % max;
                cache[pos * inner..(pos + 1) * inner].clone_from_slice(src);
            }
        }
    });
}
