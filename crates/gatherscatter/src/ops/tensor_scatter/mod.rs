//! TensorScatter (ONNX 24): the KV-cache update.
//!
//! `present = copy of past_cache`; then for each prefix `p` of the dims before
//! `axis` and each `s < sequence_length`,
//! `present[p, w + s, ..] = update[p, s, ..]` with `w = write_indices[p[0]]`
//! (0 when absent), taken modulo `max_sequence_length` in circular mode.

use std::fmt;
use std::str::FromStr;

use crate::display::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::IndexElement;
use crate::profile::{self, Profile};
use crate::shape::{checked_product, normalize_axis, require_rank_at_least_1, SmallDims};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView};
use crate::{TensorViewMut, TypedViewMut};

mod write;

use self::write::{fill, fresh, write_windows_in_place};

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

impl Plan {
    /// Elements of one cache row: `max_sequence_length` positions of `inner`.
    fn cache_row(&self) -> usize {
        self.max_sequence_length * self.inner
    }

    /// An empty cache, update or prefix: no window is written.
    fn writes_nothing(&self) -> bool {
        self.cache_row() == 0 || self.sequence_length * self.inner == 0 || self.per_batch == 0
    }
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
        let (plan, positions) = self.prepare(&past_cache, &update, write_indices)?;
        with_view!(past_cache, t => {
            let out = fresh(t, update.typed()?, &positions, &plan)?;
            Ok(TypedTensor::from_parts_unchecked(t.shape(), out).into())
        })
    }

    /// Like [`TensorScatter::run`], but writes the result into `out`, a
    /// caller's buffer of the cache's dtype and shape. Every check comes
    /// first: on an error `out` is unchanged.
    ///
    /// ```
    /// use gatherscatter::{Tensor, TensorScatter};
    ///
    /// let past = Tensor::new(vec![1, 4], vec![1.0f32, 2.0, 3.0, 4.0])?;
    /// let step = Tensor::new(vec![1, 1], vec![9.0f32])?;
    /// let at = Tensor::from_vec(vec![2i64]);
    /// let mut present = Tensor::new(vec![1, 4], vec![0.0f32; 4])?;
    /// TensorScatter::new().axis(1).run_into(&past, &step, Some((&at).into()), &mut present)?;
    /// assert_eq!(present.data::<f32>().unwrap(), &[1.0, 2.0, 9.0, 4.0]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_into<'c, 'u, 'o>(
        &self,
        past_cache: impl Into<TensorView<'c>>,
        update: impl Into<TensorView<'u>>,
        write_indices: Option<TensorView<'_>>,
        out: impl Into<TensorViewMut<'o>>,
    ) -> Result<()> {
        let out = out.into();
        let (past_cache, update) = (past_cache.into(), update.into());
        let (plan, positions) = self.prepare(&past_cache, &update, write_indices)?;
        with_view!(past_cache, t => {
            let out = super::typed_output("TensorScatter", out, t.shape())?;
            fill(t, update.typed()?, &positions, &plan, out);
            Ok(())
        })
    }

    /// Update `cache` where it is: only the windows of `update` are written,
    /// the rest of the cache keeps its values. This is the output of
    /// [`TensorScatter::run`] with `cache` as `past_cache`, without copying
    /// the cache (runtimes that keep a KV cache in one buffer). Every check
    /// comes first: on an error `cache` is unchanged.
    ///
    /// ```
    /// use gatherscatter::{ScatterMode, Tensor, TensorScatter};
    ///
    /// let mut cache = Tensor::new(vec![1, 3], vec![1i32, 2, 3])?;
    /// let step = Tensor::new(vec![1, 2], vec![8i32, 9])?;
    /// let at = Tensor::from_vec(vec![2i64]);
    /// TensorScatter::new()
    ///     .axis(1)
    ///     .mode(ScatterMode::Circular)
    ///     .run_in_place(&mut cache, &step, Some((&at).into()))?;
    /// assert_eq!(cache.data::<i32>().unwrap(), &[9, 2, 8]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_in_place<'c, 'u>(
        &self,
        cache: impl Into<TensorViewMut<'c>>,
        update: impl Into<TensorView<'u>>,
        write_indices: Option<TensorView<'_>>,
    ) -> Result<()> {
        let (cache, update) = (cache.into(), update.into());
        let (plan, positions) = self.prepare(&cache.view(), &update, write_indices)?;
        with_view!(update, u => {
            let mut cache = super::typed_buffer("TensorScatter", cache)?;
            write_windows_in_place(cache.data_mut(), u, &positions, &plan);
            Ok(())
        })
    }

    /// Run on typed views (`None::<TypedView<i64>>` for no write indices).
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        past_cache: TypedView<'_, T>,
        update: TypedView<'_, T>,
        write_indices: Option<TypedView<'_, I>>,
    ) -> Result<TypedTensor<T>> {
        let (plan, positions) =
            self.prepare_typed(past_cache.shape(), update.shape(), T::DTYPE, write_indices)?;
        let out = fresh(past_cache, update, &positions, &plan)?;
        Ok(TypedTensor::from_parts_unchecked(past_cache.shape(), out))
    }

    /// Typed form of [`TensorScatter::run_into`].
    pub fn run_typed_into<'o, T: Element, I: IndexElement>(
        &self,
        past_cache: TypedView<'_, T>,
        update: TypedView<'_, T>,
        write_indices: Option<TypedView<'_, I>>,
        out: impl Into<TypedViewMut<'o, T>>,
    ) -> Result<()> {
        let mut out = out.into();
        let (plan, positions) =
            self.prepare_typed(past_cache.shape(), update.shape(), T::DTYPE, write_indices)?;
        super::check_output_shape("TensorScatter", out.shape(), past_cache.shape())?;
        fill(past_cache, update, &positions, &plan, out.data_mut());
        Ok(())
    }

    /// Typed form of [`TensorScatter::run_in_place`].
    pub fn run_typed_in_place<'c, T: Element, I: IndexElement>(
        &self,
        cache: impl Into<TypedViewMut<'c, T>>,
        update: TypedView<'_, T>,
        write_indices: Option<TypedView<'_, I>>,
    ) -> Result<()> {
        let mut cache = cache.into();
        let (plan, positions) =
            self.prepare_typed(cache.shape(), update.shape(), T::DTYPE, write_indices)?;
        write_windows_in_place(cache.data_mut(), update, &positions, &plan);
        Ok(())
    }

    /// Checks of a dynamic call: the plan and each batch entry's first
    /// write position.
    fn prepare(
        &self,
        past_cache: &TensorView<'_>,
        update: &TensorView<'_>,
        write_indices: Option<TensorView<'_>>,
    ) -> Result<(Plan, SmallDims)> {
        let dtype = past_cache.dtype();
        super::require_same_dtype(
            "update",
            update.dtype(),
            dtype,
            "TensorScatter on a {} cache",
        )?;
        let plan = self.plan(
            past_cache.shape(),
            dtype,
            update.shape(),
            write_indices.map(|w| (w.shape(), w.dtype())),
        )?;
        let positions = match write_indices {
            None => first_positions(plan.batch)?,
            Some(w) => {
                crate::index::with_index_view!(w, "TensorScatter write_indices", v => self.resolve(v, &plan)?)
            }
        };
        Ok((plan, positions))
    }

    /// For each element of `update` (row-major), the flat offset of the
    /// cache element it is written to; the call's checks and errors first.
    pub(crate) fn written_offsets(
        &self,
        past_cache: &TensorView<'_>,
        update: &TensorView<'_>,
        write_indices: Option<TensorView<'_>>,
    ) -> Result<Vec<usize>> {
        let (plan, positions) = self.prepare(past_cache, update, write_indices)?;
        let mut offsets = Vec::new();
        offsets
            .try_reserve_exact(update.len())
            .map_err(|_| Error::Allocation {
                elements: update.len(),
                dtype: DType::U64,
            })?;
        for (b, &start) in positions.iter().enumerate() {
            for m in 0..plan.per_batch {
                for s in 0..plan.sequence_length {
                    let position = match self.mode {
                        ScatterMode::Linear => start + s,
                        ScatterMode::Circular => (start + s) % plan.max_sequence_length,
                    };
                    let row = (b * plan.per_batch + m) * plan.max_sequence_length + position;
                    offsets.extend(row * plan.inner..(row + 1) * plan.inner);
                }
            }
        }
        Ok(offsets)
    }

    /// Checks of a typed call, as [`TensorScatter::prepare`].
    fn prepare_typed<I: IndexElement>(
        &self,
        past_shape: &[usize],
        update_shape: &[usize],
        dtype: DType,
        write_indices: Option<TypedView<'_, I>>,
    ) -> Result<(Plan, SmallDims)> {
        let plan = self.plan(
            past_shape,
            dtype,
            update_shape,
            write_indices.map(|w| (w.shape(), I::DTYPE)),
        )?;
        let positions = match write_indices {
            None => first_positions(plan.batch)?,
            Some(w) => self.resolve(w, &plan)?,
        };
        Ok((plan, positions))
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
                    "update dimension {d} is {u}, but it must {rule} past_cache's {p} (update shape {update_shape_dims}, past_cache shape {past_shape_dims}, axis {axis})", update_shape_dims = Dims(update_shape), past_shape_dims = Dims(past_shape)
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
                    "write_indices has shape {shape_dims}, but it must be [{batch}] (the batch size of past_cache)", shape_dims = Dims(shape)
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
    ) -> Result<SmallDims> {
        let (max, seq) = (
            plan.max_sequence_length as i128,
            plan.sequence_length as i128,
        );
        let circular = self.mode == ScatterMode::Circular;
        let mut positions = SmallDims::try_filled(0, write_indices.len())?;
        for (batch, (position, &w)) in positions.iter_mut().zip(write_indices.data()).enumerate() {
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
            *position = if circular && max > 0 {
                (v % max) as usize
            } else {
                v as usize
            };
        }
        Ok(positions)
    }
}

/// Position 0 for each of `batches`: the writes without write_indices.
/// The count comes from the shapes alone (an empty cache may claim any
/// number of batches), so memory refused is an error, not an abort.
/// Inline up to 8 batches: a small call allocates only its output.
fn first_positions(batches: usize) -> Result<SmallDims> {
    SmallDims::try_filled(0, batches)
}

#[cfg(test)]
mod tests {
    use crate::{ScatterMode, Tensor, TensorScatter};

    /// Fresh outputs are not zeroed first: under Miri, a slot the copy of
    /// the past cache skipped would be read uninitialised by the comparison.
    #[test]
    fn fresh_outputs_hold_the_past_with_the_windows_written() {
        let past =
            Tensor::new(vec![2, 4, 1], (0..8).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
        let update = Tensor::new(vec![2, 2, 1], vec![10.0f32, 11.0, 20.0, 21.0]).unwrap();
        let write = Tensor::from_vec(vec![3i64, 1]);
        let out = TensorScatter::new()
            .mode(ScatterMode::Circular)
            .run(&past, &update, Some((&write).into()))
            .unwrap();
        let expected = [11.0, 1.0, 2.0, 10.0, 4.0, 20.0, 21.0, 7.0];
        assert_eq!(out.data::<f32>().unwrap(), &expected);
        let nothing = Tensor::new(vec![2, 0, 1], Vec::<f32>::new()).unwrap();
        let out = TensorScatter::new().run(&past, &nothing, None).unwrap();
        assert_eq!(out.data::<f32>().unwrap(), past.data::<f32>().unwrap());
    }
}
