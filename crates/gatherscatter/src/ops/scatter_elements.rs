//! ScatterElements (ONNX 11, 13, 16, 18) and its deprecated alias Scatter (ONNX 9, 11).
//!
//! Output = copy of `data`; then for each position `p` of `indices` in
//! row-major order, `out[t] = f(out[t], updates[p])` with
//! `t = p with p[axis] := idx(indices[p])`.

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{resolve_along_axis, resolve_tensor_along_axis, AxisRule, IndexElement};
use crate::ops::gather_elements::check_indices_shape;
use crate::profile::{self, Profile};
use crate::reduction::{self, AddOp, Combine, MaxOp, MinOp, MulOp, Overwrite, Reduction};
use crate::shape::{normalize_axis, require_rank_at_least_1, strides, RowBases};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView};

/// The ScatterElements operator: axis, reduction, and the contract it is checked against.
///
/// - `data`, `indices` and `updates` have the same rank `r >= 1`;
///   `updates.shape == indices.shape`; off the axis `indices.shape[d] <=
///   data.shape[d]` (SPEC §2.5); along the axis any size.
/// - Every index is checked before the output exists: an out-of-range value
///   is an error and no partial result is produced. `data` is only read.
/// - Duplicates: with [`Reduction::None`] the update that comes last in
///   row-major order of `indices` wins; other reductions are applied in
///   ascending row-major order, so results are bit-identical to a serial loop.
/// - Per-dtype rules: see [`Reduction`] (bool OR/AND, f16/bf16 in f32 per
///   step, complex add/mul only, string add = concatenation, integers wrap,
///   NaN propagates under max/min).
///
/// ```
/// use gatherscatter::{Reduction, ScatterElements, Tensor};
///
/// // ONNX scatter_elements_with_duplicate_indices.
/// let data = Tensor::new(vec![1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])?;
/// let indices = Tensor::new(vec![1, 2], vec![1i64, 1])?;
/// let updates = Tensor::new(vec![1, 2], vec![1.1f32, 2.1])?;
/// let out = ScatterElements::new(1).reduction(Reduction::Add).run(&data, &indices, &updates)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[1.0, 2.0 + 1.1 + 2.1, 3.0, 4.0, 5.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScatterElements {
    /// Axis of `data` to scatter along, in `[-r, r-1]`.
    pub axis: i64,
    /// How updates combine with the output.
    pub reduction: Reduction,
    /// Contract the call is validated against.
    pub profile: Profile,
}

/// The deprecated ONNX Scatter (opsets 9 and 11): ScatterElements without a
/// reduction, validated against Scatter's own opset history.
///
/// ```
/// use gatherscatter::{Profile, Scatter, Tensor};
///
/// let data = Tensor::new(vec![1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])?;
/// let indices = Tensor::new(vec![1, 2], vec![1i64, 3])?;
/// let updates = Tensor::new(vec![1, 2], vec![1.1f32, 2.1])?;
/// let out = Scatter::new(1).profile(Profile::Onnx { opset: 9 }).run(&data, &indices, &updates)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[1.0, 1.1, 3.0, 2.1, 5.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scatter {
    /// Axis of `data` to scatter along, in `[-r, r-1]`.
    pub axis: i64,
    /// Contract the call is validated against.
    pub profile: Profile,
}

impl Scatter {
    /// Scatter along `axis` under the permissive profile.
    pub fn new(axis: i64) -> Scatter {
        Scatter {
            axis,
            ..Scatter::default()
        }
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> Scatter {
        self.profile = profile;
        self
    }

    /// Run on dynamic tensors.
    pub fn run<'d, 'i, 'u>(
        &self,
        data: impl Into<TensorView<'d>>,
        indices: impl Into<TensorView<'i>>,
        updates: impl Into<TensorView<'u>>,
    ) -> Result<Tensor> {
        let (data, indices, updates) = (data.into(), indices.into(), updates.into());
        self.as_scatter_elements(data.dtype(), indices.dtype())?
            .run(data, indices, updates)
    }

    /// Run on typed views.
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
    ) -> Result<TypedTensor<T>> {
        self.as_scatter_elements(T::DTYPE, I::DTYPE)?
            .run_typed(data, indices, updates)
    }

    /// Checks Scatter's own profile, then hands over to the permissive
    /// ScatterElements (Scatter-9 and -11 compute exactly ScatterElements-11).
    fn as_scatter_elements(
        &self,
        data_dtype: DType,
        index_dtype: DType,
    ) -> Result<ScatterElements> {
        match self.profile {
            Profile::Permissive => {}
            Profile::Onnx { opset } => {
                let version = profile::onnx_since_version("Scatter", opset, &[9, 11])?;
                let context = || format!("ONNX Scatter-{version} (opset {opset})");
                // Scatter never gained bfloat16: it was deprecated before opset 13.
                profile::require_dtype("data", data_dtype, &profile::onnx_data_types(11), context)?;
                profile::require_dtype(
                    "indices",
                    index_dtype,
                    &profile::ONNX_INDEX_TYPES,
                    context,
                )?;
            }
            other => {
                return Err(Error::unsupported(format!(
                    "Scatter is an ONNX operator; profile {other} does not define it"
                )))
            }
        }
        Ok(ScatterElements::new(self.axis))
    }
}

struct ScatterPlan {
    axis: usize,
    rule: AxisRule,
}

impl ScatterElements {
    /// ScatterElements along `axis`, reduction `none`, permissive profile.
    pub fn new(axis: i64) -> ScatterElements {
        ScatterElements {
            axis,
            ..ScatterElements::default()
        }
    }

    /// Set the reduction.
    pub fn reduction(mut self, reduction: Reduction) -> ScatterElements {
        self.reduction = reduction;
        self
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> ScatterElements {
        self.profile = profile;
        self
    }

    /// Run on dynamic tensors. `data` is only read; the result is a new tensor.
    pub fn run<'d, 'i, 'u>(
        &self,
        data: impl Into<TensorView<'d>>,
        indices: impl Into<TensorView<'i>>,
        updates: impl Into<TensorView<'u>>,
    ) -> Result<Tensor> {
        let (data, indices, updates) = (data.into(), indices.into(), updates.into());
        super::require_same_dtype(
            "updates",
            updates.dtype(),
            data.dtype(),
            "ScatterElements on {} data",
        )?;
        let plan = self.plan(
            data.shape(),
            data.dtype(),
            indices.shape(),
            indices.dtype(),
            updates.shape(),
        )?;
        let resolved = resolve_tensor_along_axis(indices, plan.rule, "ScatterElements")?;
        with_view!(data, t => {
            let updates = updates.typed()?;
            self.execute(t, indices.shape(), &resolved, updates, plan.axis).map(Tensor::from)
        })
    }

    /// Run on typed views; the same checks and kernel as [`ScatterElements::run`].
    ///
    /// ```
    /// use gatherscatter::{Reduction, ScatterElements, TypedTensor};
    ///
    /// let data = TypedTensor::new(vec![3], vec![1i8, 2, 3])?;
    /// let indices = TypedTensor::new(vec![3], vec![0u8, 0, 2])?;
    /// let updates = TypedTensor::new(vec![3], vec![100i8, 100, 5])?;
    /// let out = ScatterElements::new(0)
    ///     .reduction(Reduction::Add)
    ///     .run_typed(data.view(), indices.view(), updates.view())?;
    /// assert_eq!(out.data(), &[-55, 2, 8]); // 1 + 100 + 100 wraps to -55
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_typed<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
    ) -> Result<TypedTensor<T>> {
        let plan = self.plan(
            data.shape(),
            T::DTYPE,
            indices.shape(),
            I::DTYPE,
            updates.shape(),
        )?;
        let resolved = resolve_along_axis(indices, plan.rule)?;
        self.execute(data, indices.shape(), &resolved, updates, plan.axis)
    }

    fn plan(
        &self,
        data_shape: &[usize],
        data_dtype: DType,
        indices_shape: &[usize],
        index_dtype: DType,
        updates_shape: &[usize],
    ) -> Result<ScatterPlan> {
        require_rank_at_least_1("data", data_shape.len())?;
        let axis = normalize_axis(self.axis, data_shape.len(), "data")?;
        self.check_profile(data_dtype, index_dtype)?;
        self.reduction.check_dtype(data_dtype)?;
        if !index_dtype.is_index_type() {
            return Err(crate::index::not_an_index_type(
                index_dtype,
                "ScatterElements",
            ));
        }
        check_indices_shape(data_shape, indices_shape, axis, false)?;
        if updates_shape != indices_shape {
            return Err(Error::shape(format!(
                "updates shape {updates_shape:?} differs from indices shape {indices_shape:?}; they must be equal"
            )));
        }
        Ok(ScatterPlan {
            axis,
            rule: AxisRule {
                axis,
                size: data_shape[axis],
                negative_allowed: true,
            },
        })
    }

    fn check_profile(&self, data_dtype: DType, index_dtype: DType) -> Result<()> {
        match self.profile {
            Profile::Permissive => Ok(()),
            Profile::Onnx { opset } => {
                let version =
                    profile::onnx_since_version("ScatterElements", opset, &[11, 13, 16, 18])?;
                let context = || format!("ONNX ScatterElements-{version} (opset {opset})");
                reduction::check_onnx_reduction(self.reduction, version, &context())?;
                profile::require_dtype(
                    "data",
                    data_dtype,
                    &profile::onnx_data_types(version),
                    context,
                )?;
                profile::require_dtype("indices", index_dtype, &profile::ONNX_INDEX_TYPES, context)
            }
            other => Err(Error::unsupported(format!(
                "ScatterElements is not part of the {other} profile"
            ))),
        }
    }

    fn execute<T: Element>(
        &self,
        data: TypedView<'_, T>,
        indices_shape: &[usize],
        resolved: &[usize],
        updates: TypedView<'_, T>,
        axis: usize,
    ) -> Result<TypedTensor<T>> {
        let mut out = super::copy_of(data.data())?;
        if !resolved.is_empty() {
            let geometry = Geometry {
                data_shape: data.shape(),
                indices_shape,
                axis,
            };
            let updates = updates.data();
            match self.reduction {
                // Plain overwrite moves words: f32/i32/u32 share one loop.
                Reduction::None => scatter_rows::<T::Word, Overwrite>(
                    T::as_words_mut(&mut out),
                    &geometry,
                    resolved,
                    T::as_words(updates),
                ),
                Reduction::Add => scatter_rows::<T, AddOp>(&mut out, &geometry, resolved, updates),
                Reduction::Mul => scatter_rows::<T, MulOp>(&mut out, &geometry, resolved, updates),
                Reduction::Max => scatter_rows::<T, MaxOp>(&mut out, &geometry, resolved, updates),
                Reduction::Min => scatter_rows::<T, MinOp>(&mut out, &geometry, resolved, updates),
            }
        }
        Ok(TypedTensor::from_parts_unchecked(
            data.shape().to_vec(),
            out,
        ))
    }
}

/// ScatterElements along `axis` with `reduction`, permissive profile.
///
/// ```
/// use gatherscatter::{scatter_elements, Reduction, Tensor};
///
/// let data = Tensor::new(vec![3, 3], vec![0.0f32; 9])?;
/// let indices = Tensor::new(vec![2, 3], vec![1i64, 0, 2, 0, 2, 1])?;
/// let updates = Tensor::new(vec![2, 3], vec![1.0f32, 1.1, 1.2, 2.0, 2.1, 2.2])?;
/// let out = scatter_elements(&data, &indices, &updates, 0, Reduction::None)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn scatter_elements<'d, 'i, 'u>(
    data: impl Into<TensorView<'d>>,
    indices: impl Into<TensorView<'i>>,
    updates: impl Into<TensorView<'u>>,
    axis: i64,
    reduction: Reduction,
) -> Result<Tensor> {
    ScatterElements::new(axis)
        .reduction(reduction)
        .run(data, indices, updates)
}

struct Geometry<'a> {
    data_shape: &'a [usize],
    indices_shape: &'a [usize],
    axis: usize,
}

/// Applies updates in row-major order of `indices`, which is what makes
/// duplicates deterministic (SPEC §2.6–2.7). Requires non-empty indices,
/// resolved into `[0, data_shape[axis])`, with a checked shape.
///
/// Two updates can only meet at a target if they share every coordinate off
/// the axis; so a split of the off-axis coordinates across workers, each
/// walking its share in this same ascending order, gives the same result for
/// any number of threads.
fn scatter_rows<W, C: Combine<W>>(
    out: &mut [W],
    g: &Geometry<'_>,
    resolved: &[usize],
    updates: &[W],
) {
    let rank = g.indices_shape.len();
    let row_len = g.indices_shape[rank - 1];
    let rows = RowBases::new(g.indices_shape, g.data_shape, g.axis);
    let chunks = resolved
        .chunks_exact(row_len)
        .zip(updates.chunks_exact(row_len));
    if g.axis == rank - 1 {
        for (base, (idx, upd)) in rows.zip(chunks) {
            for (&i, u) in idx.iter().zip(upd) {
                C::combine(&mut out[base + i], u);
            }
        }
    } else {
        let axis_stride = strides(g.data_shape)[g.axis];
        for (base, (idx, upd)) in rows.zip(chunks) {
            for (j, (&i, u)) in idx.iter().zip(upd).enumerate() {
                C::combine(&mut out[base + i * axis_stride + j], u);
            }
        }
    }
}
