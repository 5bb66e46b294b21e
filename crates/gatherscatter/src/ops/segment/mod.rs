//! Segment reductions over sorted groups of rows, as pytorch_scatter's
//! `segment_csr` / `segment_coo` and `torch.segment_reduce`.
//!
//! With `axis = rank(boundaries) - 1`, `src` seen as `[slabs, rows, inner]`
//! and segment `s` of slab `o` the rows `b[s]..b[s + 1]` of its boundaries:
//! `out[o, s, :] = agg(src[o, b[s], :], ..., src[o, b[s + 1] - 1, :])`,
//! folded in ascending row order; an empty segment gets the fill value.
//! `segment_csr` is given the boundaries (`indptr`); `segment_coo` one
//! sorted segment id per row (`index`), from which they follow.

pub(crate) mod bounds;
pub(crate) mod kernel;

use self::bounds::Bounds;
use self::kernel::Layout;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{with_index_view, IndexElement};
use crate::ops::{alloc_output, check_fill, typed_output};
use crate::profile::Profile;
use crate::reduction::{Aggregate, Combine, CombineKernel};
use crate::shape::{checked_product, SmallDims};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView, TensorViewMut};

/// What both segment operators share: the aggregate, the value of empty
/// segments, the profile.
#[derive(Debug, Clone, PartialEq)]
struct Segmented {
    reduce: Aggregate,
    fill: Option<Tensor>,
    profile: Profile,
}

impl Segmented {
    fn new(reduce: Aggregate) -> Segmented {
        Segmented {
            reduce,
            fill: None,
            profile: Profile::Permissive,
        }
    }

    /// The checks that come before the boundaries are read.
    fn check(&self, op: &str, src_dtype: DType) -> Result<()> {
        if self.profile != Profile::Permissive {
            return Err(Error::unsupported(format!(
                "{op} is pytorch_scatter's operator; profile {} does not define it",
                self.profile
            )));
        }
        self.reduce.check_dtype(src_dtype)?;
        if let Some(fill) = &self.fill {
            check_fill(fill, src_dtype, &format!("{op} on {{}} src"))?;
        }
        Ok(())
    }

    /// The fill value for `T`, if the caller gave one (checked by `check`).
    fn fill_of<T: Element>(&self) -> Option<&T> {
        self.fill
            .as_ref()
            .and_then(|f| f.data::<T>())
            .map(|d| &d[0])
    }

    /// Reduce `src` in the segments `bounds` gives along its axis into `out`
    /// (of the output's length).
    fn fill_out<T: Element>(
        &self,
        src: TypedView<'_, T>,
        bounds: &Bounds,
        out: &mut [T],
    ) -> Result<()> {
        let kernel = Fold {
            src: src.data(),
            layout: layout(src.shape(), bounds.axis),
            bounds,
            fill: self.fill_of::<T>(),
            out,
        };
        T::with_aggregate(self.reduce, kernel)
    }

    /// The values and, for `amax`/`amin`, the winning rows.
    fn with_arg<T: Element>(
        &self,
        src: TypedView<'_, T>,
        bounds: &Bounds,
    ) -> Result<(TypedTensor<T>, TypedTensor<i64>)> {
        if !matches!(self.reduce, Aggregate::Amax | Aggregate::Amin) {
            return Err(Error::BadReduction {
                message: format!(
                    "reduce {} has no argument output; only amax and amin name a winning row",
                    self.reduce
                ),
            });
        }
        let (shape, len) = out_shape(src.shape(), bounds.axis, bounds.segments)?;
        let mut values = alloc_output::<T>(len)?;
        self.fill_out(src, bounds, &mut values)?;
        let mut arg = alloc_output::<i64>(len)?;
        kernel::arg(
            src.data(),
            layout(src.shape(), bounds.axis),
            bounds,
            &values,
            &mut arg,
        );
        Ok((
            TypedTensor::from_parts_unchecked(shape.clone(), values),
            TypedTensor::from_parts_unchecked(shape, arg),
        ))
    }

    /// A new output of `src`'s dtype.
    fn run<T: Element>(&self, src: TypedView<'_, T>, bounds: &Bounds) -> Result<TypedTensor<T>> {
        let (shape, len) = out_shape(src.shape(), bounds.axis, bounds.segments)?;
        let mut out = alloc_output(len)?;
        self.fill_out(src, bounds, &mut out)?;
        Ok(TypedTensor::from_parts_unchecked(shape, out))
    }
}

fn layout(src_shape: &[usize], axis: usize) -> Layout {
    Layout {
        rows: src_shape[axis],
        // Only used when the output has elements, and then it fits (an
        // empty `src` may have dims whose product does not).
        inner: checked_product(&src_shape[axis + 1..]).unwrap_or(0),
    }
}

/// `src`'s shape with the axis replaced by the segment count, and its
/// element count. Inlined, so the shape is written where the caller keeps
/// it: returned, it was read back in pairs just after its words were
/// written, each read waiting on the writes (a tenth of a small
/// segment_csr call in a profile).
#[inline(always)]
pub(crate) fn out_shape(
    src_shape: &[usize],
    axis: usize,
    segments: usize,
) -> Result<(SmallDims, usize)> {
    let mut shape = SmallDims::from_slice(src_shape);
    shape[axis] = segments;
    match checked_product(&shape) {
        Some(len) => Ok((shape, len)),
        None => Err(Error::SizeOverflow {
            what: "the output",
            shape: shape.into_vec(),
        }),
    }
}

/// The kernel, for [`crate::reduction::Reduce::with_aggregate`] to run with
/// the dtype's rule.
struct Fold<'a, T> {
    src: &'a [T],
    layout: Layout,
    bounds: &'a Bounds,
    fill: Option<&'a T>,
    out: &'a mut [T],
}

impl<T: Element> CombineKernel<T> for Fold<'_, T> {
    type Output = ();

    fn run<C: Combine<T>>(self) {
        let empty = match self.fill {
            Some(value) => value.clone(),
            None => C::empty().unwrap_or_else(T::zero),
        };
        kernel::reduce::<T, C>(self.src, self.layout, self.bounds, &empty, self.out)
    }
}

/// pytorch_scatter's `segment_csr`: `src` reduced over the row ranges
/// `indptr` gives along axis `rank(indptr) - 1`.
///
/// - `indptr` has shape `[..., segments + 1]`, rank from 1 to `src`'s; its
///   dims before the last equal `src`'s or are 1 (broadcast). Segment `s`
///   is rows `indptr[..., s]..indptr[..., s + 1]`; rows outside
///   `indptr[0]..indptr[segments]` take no part.
/// - Every entry in `[0, rows]` and non-decreasing, else a `bad_segments`
///   error naming it (checked before anything is written).
/// - The output is `src`'s shape with the axis replaced by `segments`.
/// - An empty segment gets the fill value: the caller's ([`SegmentCsr::fill`]),
///   else 1 for `prod` and 0 (false, "") for the others, as pytorch_scatter
///   (`torch.segment_reduce` writes the identity: ±inf for max/min, NaN
///   for mean).
/// - Rows fold in ascending order, so results are bit-identical for any
///   thread count. Per-dtype rules: [`Aggregate`].
///
/// ```
/// use gatherscatter::{Aggregate, SegmentCsr, Tensor};
///
/// let src = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0]);
/// let indptr = Tensor::from_vec(vec![0i64, 2, 2, 5]);
/// let sum = SegmentCsr::new(Aggregate::Sum).run(&src, &indptr)?;
/// assert_eq!(sum.data::<f32>().unwrap(), &[3.0, 0.0, 12.0]);
/// let (max, arg) = SegmentCsr::new(Aggregate::Amax)
///     .fill(Tensor::scalar(f32::NEG_INFINITY))
///     .run_with_arg(&src, &indptr)?;
/// assert_eq!(max.data::<f32>().unwrap(), &[2.0, f32::NEG_INFINITY, 5.0]);
/// assert_eq!(arg.data(), &[1, 5, 4]); // an empty segment's arg: one past the last row
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentCsr {
    segmented: Segmented,
}

/// pytorch_scatter's `segment_coo`: `src` reduced over the rows that share a
/// segment id, `index` holding one sorted id per row along axis
/// `rank(index) - 1`.
///
/// - `index` has rank from 1 to `src`'s, its last dim equal to `src`'s
///   along the axis and its dims before that equal to `src`'s or 1.
/// - Ids are `>= 0` and non-decreasing along the last dim, else a
///   `bad_segments` error naming the first that is not (checked before
///   anything is written).
/// - The segment count is [`SegmentCoo::segments`] when given (every id
///   must be below it), else the largest id + 1 (0 for an empty `index`).
/// - Otherwise as [`SegmentCsr`]: ids with no rows are empty segments.
///
/// ```
/// use gatherscatter::{Aggregate, SegmentCoo, Tensor};
///
/// let src = Tensor::new(vec![4, 2], vec![1i32, 10, 2, 20, 3, 30, 4, 40])?;
/// let index = Tensor::from_vec(vec![0i64, 0, 2, 2]);
/// let out = SegmentCoo::new(Aggregate::Mean).run(&src, &index)?;
/// assert_eq!(out.shape(), &[3, 2]);
/// assert_eq!(out.data::<i32>().unwrap(), &[1, 15, 0, 0, 3, 35]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentCoo {
    segmented: Segmented,
    segments: Option<usize>,
}

/// The builder methods both operators share.
macro_rules! segment_builder {
    ($op:ident, $boundaries:literal) => {
        impl $op {
            /// Set the value of empty segments: a one-element tensor of
            /// `src`'s dtype (checked when the call runs).
            pub fn fill(mut self, value: Tensor) -> $op {
                self.segmented.fill = Some(value);
                self
            }

            /// Set the contract the call is validated against: only the
            /// permissive one defines this operator.
            pub fn profile(mut self, profile: Profile) -> $op {
                self.segmented.profile = profile;
                self
            }

            /// The aggregate.
            pub fn reduce(&self) -> Aggregate {
                self.segmented.reduce
            }

            /// Every rule of a call, without its work: the checked
            /// boundaries, which carry the segment axis.
            pub(crate) fn plan(
                &self,
                src: TensorView<'_>,
                boundaries: TensorView<'_>,
            ) -> Result<Bounds> {
                self.segmented.check(stringify!($op), src.dtype())?;
                with_index_view!(boundaries, stringify!($op), $boundaries, b => {
                    self.bounds(src.shape(), b)
                })
            }

            /// Run on dynamic tensors; the result is a new tensor of `src`'s dtype.
            pub fn run<'s, 'b>(
                &self,
                src: impl Into<TensorView<'s>>,
                boundaries: impl Into<TensorView<'b>>,
            ) -> Result<Tensor> {
                let (src, boundaries) = (src.into(), boundaries.into());
                self.segmented.check(stringify!($op), src.dtype())?;
                with_index_view!(boundaries, stringify!($op), $boundaries, b => {
                    with_view!(src, t => {
                        let bounds = self.bounds(t.shape(), b)?;
                        self.segmented.run(t, &bounds).map(Tensor::from)
                    })
                })
            }

            /// Run on typed views; the same checks and kernel as `run`.
            pub fn run_typed<T: Element, I: IndexElement>(
                &self,
                src: TypedView<'_, T>,
                boundaries: TypedView<'_, I>,
            ) -> Result<TypedTensor<T>> {
                self.segmented.check(stringify!($op), T::DTYPE)?;
                let bounds = self.bounds(src.shape(), boundaries)?;
                self.segmented.run(src, &bounds)
            }

            /// Like `run`, but writes into `out`, a caller's buffer of
            /// `src`'s dtype and the output's shape. Every check comes
            /// first: on an error `out` is untouched.
            pub fn run_into<'s, 'b, 'o>(
                &self,
                src: impl Into<TensorView<'s>>,
                boundaries: impl Into<TensorView<'b>>,
                out: impl Into<TensorViewMut<'o>>,
            ) -> Result<()> {
                let (src, boundaries, out) = (src.into(), boundaries.into(), out.into());
                self.segmented.check(stringify!($op), src.dtype())?;
                with_index_view!(boundaries, stringify!($op), $boundaries, b => {
                    with_view!(src, t => {
                        let bounds = self.bounds(t.shape(), b)?;
                        let (shape, _) = out_shape(t.shape(), bounds.axis, bounds.segments)?;
                        let out = typed_output(stringify!($op), out, &shape)?;
                        self.segmented.fill_out(t, &bounds, out)
                    })
                })
            }

            /// The values and, for `amax`/`amin`, each one's row along the
            /// axis: the first row of its segment that holds the value (NaN
            /// matches NaN, `-0.0` does not match `0.0`), or `rows` (one
            /// past the last) for an empty segment. Other aggregates are a
            /// `bad_reduction` error.
            pub fn run_with_arg<'s, 'b>(
                &self,
                src: impl Into<TensorView<'s>>,
                boundaries: impl Into<TensorView<'b>>,
            ) -> Result<(Tensor, TypedTensor<i64>)> {
                let (src, boundaries) = (src.into(), boundaries.into());
                self.segmented.check(stringify!($op), src.dtype())?;
                with_index_view!(boundaries, stringify!($op), $boundaries, b => {
                    with_view!(src, t => {
                        let bounds = self.bounds(t.shape(), b)?;
                        let (values, arg) = self.segmented.with_arg(t, &bounds)?;
                        Ok((Tensor::from(values), arg))
                    })
                })
            }
        }
    };
}
segment_builder!(SegmentCsr, "indptr");
segment_builder!(SegmentCoo, "index");

impl SegmentCsr {
    /// Reduce each segment with `reduce`; empty segments get the default fill.
    pub fn new(reduce: Aggregate) -> SegmentCsr {
        SegmentCsr {
            segmented: Segmented::new(reduce),
        }
    }

    /// Inlined with [`bounds::from_indptr`], so the boundaries are built
    /// where the call keeps them.
    #[inline(always)]
    fn bounds<I: IndexElement>(
        &self,
        src_shape: &[usize],
        indptr: TypedView<'_, I>,
    ) -> Result<Bounds> {
        bounds::from_indptr(indptr.data(), indptr.shape(), src_shape)
    }
}

impl SegmentCoo {
    /// Reduce each segment with `reduce`; the segment count is the largest
    /// id + 1 unless [`SegmentCoo::segments`] sets it.
    pub fn new(reduce: Aggregate) -> SegmentCoo {
        SegmentCoo {
            segmented: Segmented::new(reduce),
            segments: None,
        }
    }

    /// Set the segment count (pytorch_scatter's `dim_size`): the output's
    /// size along the axis; every id must be below it.
    pub fn segments(mut self, count: usize) -> SegmentCoo {
        self.segments = Some(count);
        self
    }

    /// The segment count set by [`SegmentCoo::segments`], if any.
    pub fn segment_count(&self) -> Option<usize> {
        self.segments
    }

    /// Inlined as [`SegmentCsr`]'s.
    #[inline(always)]
    fn bounds<I: IndexElement>(
        &self,
        src_shape: &[usize],
        index: TypedView<'_, I>,
    ) -> Result<Bounds> {
        bounds::from_index(index.data(), index.shape(), src_shape, self.segments)
    }
}

/// [`SegmentCsr`] with `reduce` and the default fill.
///
/// ```
/// use gatherscatter::{segment_csr, Aggregate, Tensor};
///
/// let src = Tensor::new(vec![2, 3], vec![1u8, 2, 3, 4, 5, 6])?;
/// let indptr = Tensor::new(vec![2, 3], vec![0u32, 1, 3, 0, 0, 3])?;
/// let out = segment_csr(&src, &indptr, Aggregate::Prod)?; // per row of src
/// assert_eq!(out.data::<u8>().unwrap(), &[1, 6, 1, 120]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn segment_csr<'s, 'b>(
    src: impl Into<TensorView<'s>>,
    indptr: impl Into<TensorView<'b>>,
    reduce: Aggregate,
) -> Result<Tensor> {
    SegmentCsr::new(reduce).run(src, indptr)
}

/// [`SegmentCoo`] with `reduce`, the default fill and as many segments as
/// the largest id + 1.
///
/// ```
/// use gatherscatter::{segment_coo, Aggregate, Tensor};
///
/// let src = Tensor::from_vec(vec![5.0f64, 1.0, 7.0]);
/// let index = Tensor::from_vec(vec![1i32, 1, 1]);
/// let out = segment_coo(&src, &index, Aggregate::Amin)?;
/// assert_eq!(out.data::<f64>().unwrap(), &[0.0, 1.0]); // segment 0 is empty
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn segment_coo<'s, 'b>(
    src: impl Into<TensorView<'s>>,
    index: impl Into<TensorView<'b>>,
    reduce: Aggregate,
) -> Result<Tensor> {
    SegmentCoo::new(reduce).run(src, index)
}
