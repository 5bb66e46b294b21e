//! The gathers' gradients: a scatter-add of `grad_out` into zeros of
//! `data`'s shape.

use super::{expect_grad_shape, require_differentiable, reserve};
use crate::error::{Error, Result};
use crate::index::{with_index_view, AxisRule, IndexElement};
use crate::ops::gather::Gather;
use crate::ops::gather_elements::GatherElements;
use crate::ops::gather_nd::GatherND;
use crate::ops::op::Op;
use crate::ops::scatter_elements::ScatterElements;
use crate::ops::scatter_nd::ScatterND;
use crate::ops::zeros_like;
use crate::policy::IndexPolicy;
use crate::reduction::Reduction;
use crate::shape::{checked_product, normalize_axis, unravel};
use crate::tensor::Tensor;
use crate::tensor_view::TensorView;

impl Gather {
    /// The gradient of this Gather with respect to `data` (of shape
    /// `data_shape`), given `grad_out`, the gradient of its output:
    /// `grad_data[a.., idx(indices[i..]), b..] += grad_out[a.., i.., b..]`
    /// (with batch dims, each batch's own indices), duplicates added in
    /// ascending order of `i`.
    ///
    /// ```
    /// use gatherscatter::{Gather, Tensor};
    ///
    /// // out = data[[2, 0, -1]]: data[2] is read twice, data[1] never.
    /// let grad_out = Tensor::from_vec(vec![1.0f32, 10.0, 100.0]);
    /// let indices = Tensor::from_vec(vec![2i64, 0, -1]);
    /// let grad = Gather::new(0).grad(&grad_out, &indices, &[3])?;
    /// assert_eq!(grad.data::<f32>().unwrap(), &[10.0, 0.0, 101.0]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad<'g, 'i>(
        &self,
        grad_out: impl Into<TensorView<'g>>,
        indices: impl Into<TensorView<'i>>,
        data_shape: &[usize],
    ) -> Result<Tensor> {
        let op = Op::from(*self);
        IndexPolicy::Raise.grad(&op, grad_out.into(), indices.into(), data_shape)
    }
}

impl GatherElements {
    /// The gradient of this GatherElements with respect to `data` (of shape
    /// `data_shape`), given `grad_out` (the indices' shape):
    /// `grad_data[p with p[axis] := idx(indices[p])] += grad_out[p]`, in
    /// ascending row-major order of `p`.
    ///
    /// ```
    /// use gatherscatter::{GatherElements, Tensor};
    ///
    /// let grad_out = Tensor::new(vec![2, 2], vec![1.0f64, 2.0, 3.0, 4.0])?;
    /// let indices = Tensor::new(vec![2, 2], vec![1i32, 1, 0, 2])?;
    /// let grad = GatherElements::new(1).grad(&grad_out, &indices, &[2, 3])?;
    /// assert_eq!(grad.data::<f64>().unwrap(), &[0.0, 3.0, 0.0, 3.0, 0.0, 4.0]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad<'g, 'i>(
        &self,
        grad_out: impl Into<TensorView<'g>>,
        indices: impl Into<TensorView<'i>>,
        data_shape: &[usize],
    ) -> Result<Tensor> {
        let op = Op::from(*self);
        IndexPolicy::Raise.grad(&op, grad_out.into(), indices.into(), data_shape)
    }
}

impl GatherND {
    /// The gradient of this GatherND with respect to `data` (of shape
    /// `data_shape`), given `grad_out`: each tuple's slice of `grad_out`
    /// added into the slice of data it names, tuples in row-major order.
    ///
    /// ```
    /// use gatherscatter::{GatherND, Tensor};
    ///
    /// let grad_out = Tensor::from_vec(vec![1.0f32, 2.0, 4.0]);
    /// let indices = Tensor::new(vec![3, 2], vec![0i64, 1, 1, 0, 0, 1])?;
    /// let grad = GatherND::new().grad(&grad_out, &indices, &[2, 2])?;
    /// assert_eq!(grad.data::<f32>().unwrap(), &[0.0, 5.0, 2.0, 0.0]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad<'g, 'i>(
        &self,
        grad_out: impl Into<TensorView<'g>>,
        indices: impl Into<TensorView<'i>>,
        data_shape: &[usize],
    ) -> Result<Tensor> {
        let op = Op::from(*self);
        IndexPolicy::Raise.grad(&op, grad_out.into(), indices.into(), data_shape)
    }
}

impl IndexPolicy {
    /// The gradient with respect to `data` (of shape `data_shape`) of the
    /// gather `op` (Gather, GatherElements or GatherND) run under this
    /// policy (`raise`, `clip`, `wrap` or `fill`), given `grad_out`, the
    /// gradient of its output. A `fill` position sends no gradient; `clip`
    /// and `wrap` send it to the position they read. The op's profile is
    /// not consulted: the forward call was checked against it.
    ///
    /// ```
    /// use gatherscatter::{Gather, IndexPolicy, Op, Tensor, TensorView};
    ///
    /// let grad_out = Tensor::from_vec(vec![1.0f32, 10.0, 100.0]);
    /// let indices = Tensor::from_vec(vec![5i64, 0, 1]);
    /// let gather = Op::from(Gather::new(0));
    /// let (g, i) = (TensorView::from(&grad_out), TensorView::from(&indices));
    /// let clip = IndexPolicy::Clip.grad(&gather, g, i, &[2])?;
    /// assert_eq!(clip.data::<f32>().unwrap(), &[10.0, 101.0]);
    /// let fill = IndexPolicy::Fill(None).grad(&gather, g, i, &[2])?;
    /// assert_eq!(fill.data::<f32>().unwrap(), &[10.0, 100.0]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad(
        &self,
        op: &Op,
        grad_out: TensorView<'_>,
        indices: TensorView<'_>,
        data_shape: &[usize],
    ) -> Result<Tensor> {
        require_differentiable("grad_out", grad_out.dtype(), op.name())?;
        if *self == IndexPolicy::Drop {
            return Err(Error::attribute(
                "mode drop is a scatter's; the gradient of a gather takes raise, clip, wrap or fill",
            ));
        }
        match op {
            Op::Gather(g) => gather_grad(g, self, grad_out, indices, data_shape),
            Op::GatherElements(g) => {
                let expected = g.checked_output_shape(
                    data_shape,
                    grad_out.dtype(),
                    indices.shape(),
                    indices.dtype(),
                )?;
                expect_grad_shape(&grad_out, &expected, "GatherElements")?;
                let zeros = zeros_like(grad_out, data_shape.to_vec())?;
                let scatter = Op::from(ScatterElements::new(g.axis).reduction(Reduction::Add));
                let inputs = [TensorView::from(&zeros), indices, grad_out];
                self.for_scatter().run(&scatter, &inputs)
            }
            Op::GatherND(g) => gather_nd_grad(g, self, grad_out, indices, data_shape),
            other => Err(Error::unsupported(format!(
                "the gradient of {} is not implemented (gathers only: Gather, GatherElements, GatherND)",
                other.name()
            ))),
        }
    }

    /// The policy of the scatter that carries a gather's gradient: a fill
    /// position's gradient is dropped.
    fn for_scatter(&self) -> IndexPolicy {
        match self {
            IndexPolicy::Fill(_) => IndexPolicy::Drop,
            other => other.clone(),
        }
    }
}

/// Where each index reads on its axis under `policy` (`None`: a fill
/// position); an index the forward refused is the forward's error.
fn positions(
    policy: &IndexPolicy,
    value: i128,
    rule: AxisRule,
    at: impl Fn() -> Vec<usize>,
) -> Result<Option<usize>> {
    let position = match policy {
        IndexPolicy::Raise => rule.resolve(value),
        _ => policy.resolve(value, rule.size),
    };
    match (position, policy) {
        (None, IndexPolicy::Fill(_)) | (Some(_), _) => Ok(position),
        (None, _) => Err(rule.out_of_range(value, at())),
    }
}

/// A sentinel out of range for an axis of `size`: the scatter under `drop` skips it.
fn or_dropped(position: Option<usize>, size: usize) -> i64 {
    position.map_or(size as i64, |p| p as i64)
}

fn gather_grad(
    g: &Gather,
    policy: &IndexPolicy,
    grad_out: TensorView<'_>,
    indices: TensorView<'_>,
    data_shape: &[usize],
) -> Result<Tensor> {
    let expected = g.checked_output_shape(
        data_shape,
        grad_out.dtype(),
        indices.shape(),
        indices.dtype(),
    )?;
    let axis = normalize_axis(g.axis, data_shape.len(), "data")?;
    let b = g.batch_dims;
    expect_grad_shape(&grad_out, &expected, "Gather")?;

    let size = data_shape[axis];
    let rule = AxisRule {
        axis,
        size,
        negative_allowed: true,
    };
    let read: Vec<Option<usize>> = with_index_view!(indices, "the gradient of Gather", idx => {
        let mut read = reserve(idx.len())?;
        for (flat, v) in idx.data().iter().enumerate() {
            read.push(positions(policy, v.to_i128(), rule, || unravel(flat, idx.shape()))?);
        }
        read
    });
    let scatter_policy = if read.iter().any(Option::is_none) {
        IndexPolicy::Drop
    } else {
        IndexPolicy::Raise
    };
    let zeros = zeros_like(grad_out, data_shape.to_vec())?;

    if b == 0 && axis == 0 {
        // Whole rows of data: one ScatterND 1-tuple per index.
        let tuples: Vec<i64> = read.iter().map(|&p| or_dropped(p, size)).collect();
        let tuples = Tensor::new(vec![read.len(), 1], tuples)?;
        let rows: Vec<usize> = std::iter::once(read.len())
            .chain(data_shape[1..].iter().copied())
            .collect();
        let scatter = Op::from(ScatterND::new().reduction(Reduction::Add));
        let inputs = [
            TensorView::from(&zeros),
            TensorView::from(&tuples),
            grad_out.reshaped(&rows)?,
        ];
        return scatter_policy.run(&scatter, &inputs);
    }
    // Elsewhere ScatterElements along the axis, each index spread over the
    // slice of grad_out it produced (the index dims seen as one).
    let per_batch = checked_product(&indices.shape()[b..]).unwrap_or(0);
    let mut spread_shape = data_shape[..axis].to_vec();
    spread_shape.push(per_batch);
    spread_shape.extend_from_slice(&data_shape[axis + 1..]);
    let inner: usize = data_shape[axis + 1..].iter().product::<usize>().max(1);
    let between: usize = data_shape[b..axis].iter().product::<usize>().max(1);
    let mut spread = reserve(grad_out.len())?;
    for flat in 0..grad_out.len() {
        let j = flat / inner % per_batch;
        let batch = flat / inner / per_batch / between;
        spread.push(or_dropped(read[batch * per_batch + j], size));
    }
    let spread = Tensor::new(spread_shape.clone(), spread)?;
    let scatter = Op::from(ScatterElements::new(axis as i64).reduction(Reduction::Add));
    let inputs = [
        TensorView::from(&zeros),
        TensorView::from(&spread),
        grad_out.reshaped(&spread_shape)?,
    ];
    scatter_policy.run(&scatter, &inputs)
}

fn gather_nd_grad(
    g: &GatherND,
    policy: &IndexPolicy,
    grad_out: TensorView<'_>,
    indices: TensorView<'_>,
    data_shape: &[usize],
) -> Result<Tensor> {
    let expected = g.checked_output_shape(
        data_shape,
        grad_out.dtype(),
        indices.shape(),
        indices.dtype(),
    )?;
    let q = indices.rank();
    let b = g.batch_dims;
    let k = indices.shape()[q - 1];
    expect_grad_shape(&grad_out, &expected, "GatherND")?;

    let scatter = Op::from(ScatterND::new().reduction(Reduction::Add));
    if b == 0 {
        let zeros = zeros_like(grad_out, data_shape.to_vec())?;
        let inputs = [TensorView::from(&zeros), indices, grad_out];
        return policy.for_scatter().run(&scatter, &inputs);
    }
    // Batch dims: (batch, tuple..) tuples into data seen as [batches, data[b..]].
    let batches = checked_product(&data_shape[..b]).unwrap_or(0);
    let tuples = checked_product(&indices.shape()[..q - 1]).unwrap_or(0);
    let per_batch = tuples.checked_div(batches).unwrap_or(0);
    let mut dropped = false;
    let widened: Vec<i64> = with_index_view!(indices, "the gradient of GatherND", idx => {
        let mut widened = reserve(tuples * (k + 1))?;
        for t in 0..tuples {
            let start = widened.len();
            widened.push((t / per_batch.max(1)) as i64);
            let mut kept = true;
            for j in 0..k {
                let rule = AxisRule { axis: b + j, size: data_shape[b + j], negative_allowed: true };
                let flat = t * k + j;
                let p = positions(policy, idx.data()[flat].to_i128(), rule, || unravel(flat, idx.shape()))?;
                kept &= p.is_some();
                widened.push(p.map_or(0, |p| p as i64));
            }
            if !kept {
                widened[start] = batches as i64; // out of range: dropped
                dropped = true;
            }
        }
        widened
    });
    let widened = Tensor::new(vec![tuples, k + 1], widened)?;
    let mut flat_data = vec![batches];
    flat_data.extend_from_slice(&data_shape[b..]);
    let mut flat_grad = vec![tuples];
    flat_grad.extend_from_slice(&data_shape[b + k..]);
    let zeros = zeros_like(grad_out, flat_data)?;
    let inputs = [
        TensorView::from(&zeros),
        TensorView::from(&widened),
        grad_out.reshaped(&flat_grad)?,
    ];
    let scatter_policy = if dropped {
        IndexPolicy::Drop
    } else {
        IndexPolicy::Raise
    };
    scatter_policy
        .run(&scatter, &inputs)?
        .reshaped(data_shape.to_vec())
}
