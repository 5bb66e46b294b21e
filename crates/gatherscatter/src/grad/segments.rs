//! The segment reductions' gradients with respect to `src`: each row of a
//! segment gets its share of the segment's output gradient (the table of
//! [`super::groups`]); rows in no segment get 0.

use super::groups::{member_grads, Groups};
use super::scalar::{on_scalars, OnScalars, Scalar};
use super::{expect_grad_shape, require_differentiable};
use crate::aggregate::Aggregate;
use crate::error::{Error, Result};
use crate::ops::require_same_dtype;
use crate::ops::segment::bounds::Bounds;
use crate::ops::segment::out_shape;
use crate::ops::segment::{SegmentCoo, SegmentCsr};
use crate::shape::checked_product;
use crate::tensor::Tensor;
use crate::tensor_view::TensorView;

impl SegmentCsr {
    /// The gradient of this SegmentCsr with respect to `src`, given
    /// `grad_out` (of the output's shape): row `r` of segment `s` gets
    /// `grad_out[.., s, ..]` (sum), divided by the segment's rows (mean),
    /// times the product of the segment's other rows (prod), or split
    /// evenly among the rows equal to the result (amax, amin: PyTorch's
    /// `segment_reduce` rule; pytorch_scatter gives it all to `arg_out`).
    /// Rows outside every segment get 0. The call is checked as the
    /// forward checks it.
    ///
    /// ```
    /// use gatherscatter::{Aggregate, SegmentCsr, Tensor};
    ///
    /// let src = Tensor::from_vec(vec![1.0f32, 3.0, 3.0, 4.0, 5.0]);
    /// let indptr = Tensor::from_vec(vec![0i64, 3, 3, 4]); // row 4 is in no segment
    /// let grad_out = Tensor::from_vec(vec![1.0f32, 10.0, 100.0]);
    /// let max = SegmentCsr::new(Aggregate::Amax).grad(&src, &indptr, &grad_out)?;
    /// assert_eq!(max.data::<f32>().unwrap(), &[0.0, 0.5, 0.5, 100.0, 0.0]);
    /// let mean = SegmentCsr::new(Aggregate::Mean).grad(&src, &indptr, &grad_out)?;
    /// assert_eq!(mean.data::<f32>().unwrap()[..3], [1.0 / 3.0; 3]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad<'s, 'b, 'g>(
        &self,
        src: impl Into<TensorView<'s>>,
        indptr: impl Into<TensorView<'b>>,
        grad_out: impl Into<TensorView<'g>>,
    ) -> Result<Tensor> {
        let (src, indptr) = (src.into(), indptr.into());
        let bounds = self.plan(src, indptr)?;
        let forward = || self.run(src, indptr);
        segment_grad(
            "SegmentCsr",
            self.reduce(),
            src,
            &bounds,
            grad_out.into(),
            forward,
        )
    }
}

impl SegmentCoo {
    /// The gradient of this SegmentCoo with respect to `src`, given
    /// `grad_out` (of the output's shape): as [`SegmentCsr::grad`], each
    /// row's segment the one its id names.
    ///
    /// ```
    /// use gatherscatter::{Aggregate, SegmentCoo, Tensor};
    ///
    /// let src = Tensor::from_vec(vec![2.0f64, 0.0, 3.0]);
    /// let index = Tensor::from_vec(vec![0i64, 0, 0]);
    /// let grad_out = Tensor::from_vec(vec![1.0f64]);
    /// let prod = SegmentCoo::new(Aggregate::Prod).grad(&src, &index, &grad_out)?;
    /// assert_eq!(prod.data::<f64>().unwrap(), &[0.0, 6.0, 0.0]); // no 0 / 0
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad<'s, 'b, 'g>(
        &self,
        src: impl Into<TensorView<'s>>,
        index: impl Into<TensorView<'b>>,
        grad_out: impl Into<TensorView<'g>>,
    ) -> Result<Tensor> {
        let (src, index) = (src.into(), index.into());
        let bounds = self.plan(src, index)?;
        let forward = || self.run(src, index);
        segment_grad(
            "SegmentCoo",
            self.reduce(),
            src,
            &bounds,
            grad_out.into(),
            forward,
        )
    }
}

/// The gradient of a checked segment call; `forward` runs it (amax and amin
/// read its result to find the winners).
fn segment_grad(
    op: &str,
    reduce: Aggregate,
    src: TensorView<'_>,
    bounds: &Bounds,
    grad_out: TensorView<'_>,
    forward: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    require_differentiable("src", src.dtype(), op)?;
    let axis = bounds.axis;
    let (shape, _) = out_shape(src.shape(), axis, bounds.segments)?;
    expect_grad_shape(&grad_out, &shape, op)?;
    require_same_dtype(
        "grad_out",
        grad_out.dtype(),
        src.dtype(),
        "the gradient of a segment reduction of {} src",
    )?;
    let out = match reduce {
        Aggregate::Amax | Aggregate::Amin => Some(forward()?),
        _ => None,
    };
    // Without the forward's result grad_out stands in: only amax and amin read it.
    let out = out.as_ref().map_or(grad_out, TensorView::from);
    let task = SegmentTask {
        reduce,
        bounds,
        rows: src.shape()[axis],
        // An empty src may have dims whose product does not fit; it has no rows to fill.
        inner: checked_product(&src.shape()[axis + 1..]).unwrap_or(0),
    };
    let mut grads = on_scalars(&[src, out, grad_out], &[src.shape()], &task)?;
    Ok(grads.swap_remove(0))
}

struct SegmentTask<'b> {
    reduce: Aggregate,
    bounds: &'b Bounds,
    rows: usize,
    inner: usize,
}

impl OnScalars for SegmentTask<'_> {
    fn run<T: Scalar>(&self, inputs: &[&[T]]) -> Result<Vec<Vec<T>>> {
        let [src, out, grad_out] = inputs else {
            return Err(Error::unsupported("a segment gradient takes three inputs"));
        };
        let (rows, inner, segments) = (self.rows, self.inner, self.bounds.segments);
        let span = |g: usize| {
            let (slab, s) = (g / segments, g % segments);
            let b = self.bounds.of_slab(slab);
            slab * rows + b[s]..slab * rows + b[s + 1]
        };
        let value = |m: usize| &src[m * inner..(m + 1) * inner];
        let groups = Groups {
            count: grad_out.len().checked_div(inner).unwrap_or(0),
            inner,
            span: &span,
            takes_part: &|_| true,
            value: &value,
        };
        let mut grad_src = super::zeroed(src.len())?;
        member_grads(self.reduce, &groups, out, grad_out, &mut grad_src);
        Ok(vec![grad_src])
    }
}
