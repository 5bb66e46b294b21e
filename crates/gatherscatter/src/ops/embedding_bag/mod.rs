//! EmbeddingBag: PyTorch's `embedding_bag`, a gather of weight rows folded
//! per bag.
//!
//! With `weight` of shape `[rows, dim]`, bag `b` the entries
//! `indices[o[b]..o[b + 1]]` of the boundaries `o` (from `offsets`, or
//! fixed-size bags of 2-D `indices`), and `P(b)` its entries other than
//! `padding_idx`: `out[b, :] = agg(w[j] * weight[idx(indices[j]), :] for j
//! in P(b))`, folded in bag order (`w[j] = 1` without per-sample weights);
//! a bag without entries gets the fill value.

mod kernel;
mod registers;

use self::kernel::Bags;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{resolve_along_axis, with_index_view, AxisRule, IndexElement, Positions};
use crate::ops::segment::bounds::copy_sorted;
use crate::ops::{alloc_output, check_fill, require_same_dtype, typed_output};
use crate::profile::Profile;
use crate::reduction::{Aggregate, Combine, CombineKernel, Overwrite, Reduction};
use crate::shape::{checked_product, same_dims, SmallDims};
use crate::tensor::{Tensor, TypedTensor, TypedView};
use crate::tensor_view::{with_view, TensorView, TensorViewMut};

/// PyTorch's `embedding_bag`: the weight rows that `indices` names, folded
/// per bag with `sum`, `mean`, `amax` (PyTorch's `max`), or `prod`/`amin`.
///
/// - `weight` is `[rows, dim]`. Either `indices` is 1-D and `offsets` gives
///   the bags, or `indices` is 2-D `[bags, n]` (fixed bags of `n`) and
///   there are no offsets. The output is `[bags, dim]`.
/// - **Offsets, one meaning in every mode:** they are the bags' starts;
///   with `include_last_offset` the last entry is the end of the last bag
///   (`bags = len(offsets) - 1`), else the last bag ends at the end of
///   `indices` (`bags = len(offsets)`). The boundaries start at 0, never
///   decrease and end at `len(indices)`: every index is in exactly one
///   bag. Anything else is a `bad_segments` error naming the offset
///   (PyTorch checks only some of this, differently per mode).
/// - Indices are weight rows in `[-rows, rows)` (negatives count from the
///   end, as everywhere in this library; PyTorch refuses them), all checked
///   before anything is written.
/// - `padding_idx` (in `[-rows, rows)`, resolved the same way) names a row
///   that takes no part: it is not summed, not counted by `mean`, never a
///   winner.
/// - `per_sample_weights` (the shape of `indices`, `weight`'s dtype, `sum`
///   only, as PyTorch) scale each row before it is added; the product is
///   rounded to the dtype first.
/// - A bag without entries gets the fill: 1 for `prod`, else 0 (PyTorch's
///   zeros), or the caller's ([`EmbeddingBag::fill`]).
/// - Dtype rules are the aggregates' ([`Aggregate`]); bit-identical
///   results for any thread count.
///
/// ```
/// use gatherscatter::{Aggregate, EmbeddingBag, Tensor};
///
/// let weight = Tensor::new(vec![4, 2], vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])?;
/// let indices = Tensor::from_vec(vec![0i64, 2, 1, 3, 2]);
/// let offsets = Tensor::from_vec(vec![0i64, 2, 2]); // bags [0, 2], [], [1, 3, 2]
/// let bags = Some((&offsets).into());
/// let sum = EmbeddingBag::new(Aggregate::Sum).run(&weight, &indices, bags, None)?;
/// assert_eq!(sum.shape(), &[3, 2]);
/// assert_eq!(sum.data::<f32>().unwrap(), &[4.0, 6.0, 0.0, 0.0, 12.0, 15.0]);
/// let (max, row) = EmbeddingBag::new(Aggregate::Amax)
///     .padding_idx(3)
///     .run_with_arg(&weight, &indices, bags, None)?;
/// assert_eq!(max.data::<f32>().unwrap(), &[4.0, 5.0, 0.0, 0.0, 4.0, 5.0]);
/// assert_eq!(row.data(), &[2, 2, 4, 4, 2, 2]); // an empty bag's: rows (one past the last)
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingBag {
    /// How a bag's rows aggregate.
    pub mode: Aggregate,
    /// Whether `offsets` ends with the end of the last bag.
    pub include_last_offset: bool,
    /// The weight row that takes no part, if any.
    pub padding_idx: Option<i64>,
    /// The value of empty bags, when not the default.
    pub fill: Option<Tensor>,
    /// Contract the call is validated against: only the permissive one
    /// defines this operator.
    pub profile: Profile,
}

/// The checked call: the boundaries of the bags, the resolved padding row.
pub(crate) struct Plan {
    pub bounds: SmallDims,
    pub padding: Option<usize>,
    pub out_shape: SmallDims,
    pub out_len: usize,
}

impl EmbeddingBag {
    /// Fold each bag with `mode`; offsets without the last, no padding row.
    pub fn new(mode: Aggregate) -> EmbeddingBag {
        EmbeddingBag {
            mode,
            include_last_offset: false,
            padding_idx: None,
            fill: None,
            profile: Profile::Permissive,
        }
    }

    /// Set whether `offsets` ends with the end of the last bag.
    pub fn include_last_offset(mut self, include: bool) -> EmbeddingBag {
        self.include_last_offset = include;
        self
    }

    /// Set the weight row that takes no part (negative counts from the end).
    pub fn padding_idx(mut self, row: i64) -> EmbeddingBag {
        self.padding_idx = Some(row);
        self
    }

    /// Set the value of empty bags: a one-element tensor of `weight`'s dtype.
    pub fn fill(mut self, value: Tensor) -> EmbeddingBag {
        self.fill = Some(value);
        self
    }

    /// Set the contract the call is validated against.
    pub fn profile(mut self, profile: Profile) -> EmbeddingBag {
        self.profile = profile;
        self
    }

    /// Run on dynamic tensors; the result is a new `[bags, dim]` tensor.
    pub fn run<'w, 'i, 'o, 's>(
        &self,
        weight: impl Into<TensorView<'w>>,
        indices: impl Into<TensorView<'i>>,
        offsets: Option<TensorView<'o>>,
        per_sample_weights: Option<TensorView<'s>>,
    ) -> Result<Tensor> {
        let (weight, indices) = (weight.into(), indices.into());
        let (offsets, psw) = (offsets, per_sample_weights);
        let (plan, entries) = self.check(weight, indices, offsets, psw)?;
        with_view!(weight, t => {
            let mut out = alloc_output(plan.out_len)?;
            self.fill_out(t, &entries, psw, &plan, &mut out)?;
            Ok(Tensor::from(TypedTensor::from_parts_unchecked(plan.out_shape, out)))
        })
    }

    /// Like [`EmbeddingBag::run`], but writes into `out`, a caller's buffer
    /// of `weight`'s dtype and the output's shape. Every check comes first:
    /// on an error `out` is untouched.
    pub fn run_into<'w, 'i, 'o, 's, 'b>(
        &self,
        weight: impl Into<TensorView<'w>>,
        indices: impl Into<TensorView<'i>>,
        offsets: Option<TensorView<'o>>,
        per_sample_weights: Option<TensorView<'s>>,
        out: impl Into<TensorViewMut<'b>>,
    ) -> Result<()> {
        let (weight, indices, out) = (weight.into(), indices.into(), out.into());
        let (offsets, psw) = (offsets, per_sample_weights);
        let (plan, entries) = self.check(weight, indices, offsets, psw)?;
        with_view!(weight, t => {
            let out = typed_output("EmbeddingBag", out, &plan.out_shape)?;
            self.fill_out(t, &entries, psw, &plan, out)
        })
    }

    /// The values and, for `amax`/`amin`, each one's weight row: the first
    /// member of its bag whose column holds the value (NaN matches NaN,
    /// `-0.0` does not match `0.0`), or `rows` (one past the last) for an
    /// empty bag. Other modes are a `bad_reduction` error.
    pub fn run_with_arg<'w, 'i, 'o, 's>(
        &self,
        weight: impl Into<TensorView<'w>>,
        indices: impl Into<TensorView<'i>>,
        offsets: Option<TensorView<'o>>,
        per_sample_weights: Option<TensorView<'s>>,
    ) -> Result<(Tensor, TypedTensor<i64>)> {
        if !matches!(self.mode, Aggregate::Amax | Aggregate::Amin) {
            return Err(Error::BadReduction {
                message: format!(
                    "mode {} has no argument output; only amax and amin name a winning row",
                    self.mode
                ),
            });
        }
        let (weight, indices) = (weight.into(), indices.into());
        let (offsets, psw) = (offsets, per_sample_weights);
        let (plan, entries) = self.check(weight, indices, offsets, psw)?;
        with_view!(weight, t => {
            let mut values = alloc_output(plan.out_len)?;
            self.fill_out(t, &entries, psw, &plan, &mut values)?;
            let mut arg = alloc_output::<i64>(plan.out_len)?;
            kernel::arg(&self.bags(t, &entries, None, &plan), &values, &mut arg);
            Ok((
                Tensor::from(TypedTensor::from_parts_unchecked(plan.out_shape.clone(), values)),
                TypedTensor::from_parts_unchecked(plan.out_shape, arg),
            ))
        })
    }

    fn bags<'a, T: Element>(
        &self,
        weight: TypedView<'a, T>,
        entries: &'a [usize],
        per_sample_weights: Option<&'a [T]>,
        plan: &'a Plan,
    ) -> Bags<'a, T> {
        Bags {
            weight: weight.data(),
            dim: weight.shape()[1],
            entries,
            bounds: &plan.bounds,
            padding: plan.padding,
            per_sample_weights,
        }
    }

    fn fill_out<T: Element>(
        &self,
        weight: TypedView<'_, T>,
        entries: &[usize],
        per_sample_weights: Option<TensorView<'_>>,
        plan: &Plan,
        out: &mut [T],
    ) -> Result<()> {
        let psw = match per_sample_weights {
            Some(view) => Some(view.typed::<T>()?.data()),
            None => None,
        };
        let kernel = Fold {
            bags: self.bags(weight, entries, psw, plan),
            fill: self
                .fill
                .as_ref()
                .and_then(|f| f.data::<T>())
                .map(|d| &d[0]),
            mode: self.mode,
            out,
        };
        match psw {
            // Rows scaled by their weights: the dtype's product first.
            Some(_) => T::with_combine(Reduction::Mul, kernel)?,
            None => kernel.run::<Overwrite>(),
        }
    }

    /// Every rule, before anything is written: the plan and every entry
    /// resolved to its weight row. Inlined, so the plan is built where the
    /// caller keeps it (returned, its lists were written in words and read
    /// back in pairs, each read waiting on the writes).
    #[inline]
    pub(crate) fn check(
        &self,
        weight: TensorView<'_>,
        indices: TensorView<'_>,
        offsets: Option<TensorView<'_>>,
        per_sample_weights: Option<TensorView<'_>>,
    ) -> Result<(Plan, Positions)> {
        if self.profile != Profile::Permissive {
            return Err(Error::unsupported(format!(
                "EmbeddingBag is PyTorch's operator; profile {} does not define it",
                self.profile
            )));
        }
        let dtype = weight.dtype();
        self.mode.check_dtype(dtype)?;
        if weight.rank() != 2 {
            return Err(Error::RankMismatch {
                what: "weight",
                actual: weight.rank(),
                expected: "rank 2 ([rows, dim]) is required".into(),
            });
        }
        let (rows, dim) = (weight.shape()[0], weight.shape()[1]);
        if let Some(fill) = &self.fill {
            check_fill(fill, dtype, "EmbeddingBag on {} weight")?;
        }
        if let Some(psw) = per_sample_weights {
            self.check_per_sample_weights(psw, dtype, indices.shape())?;
        }
        let (bags, bounds) = match (indices.rank(), offsets) {
            (1, Some(offsets)) => {
                let (rank, len, last) = (offsets.rank(), indices.len(), self.include_last_offset);
                with_index_view!(offsets, "EmbeddingBag", "offsets", v => {
                    bag_bounds(v.data(), rank, len, last)?
                })
            }
            (2, None) => {
                let (bags, n) = (indices.shape()[0], indices.shape()[1]);
                // `[bags, 0]` indices exist for any count of bags.
                let count = bags.saturating_add(1);
                let mut bounds = SmallDims::try_filled(0, count)?;
                for (b, bound) in bounds.iter_mut().enumerate() {
                    *bound = b * n;
                }
                (bags, bounds)
            }
            (1, None) => return Err(Error::shape(
                "indices is 1-D but no offsets were given; give offsets, or 2-D indices [bags, n] for bags of n",
            )),
            (2, Some(_)) => return Err(Error::shape(
                "indices is 2-D (bags of equal size), so offsets must not be given",
            )),
            (rank, _) => return Err(Error::RankMismatch {
                what: "indices",
                actual: rank,
                expected: "rank 1 (with offsets) or 2 ([bags, n]) is required".into(),
            }),
        };
        let rule = AxisRule {
            axis: 0,
            size: rows,
            negative_allowed: true,
        };
        let padding = match self.padding_idx {
            None => None,
            Some(p) => Some(rule.resolve(i128::from(p)).ok_or_else(|| {
                Error::attribute(format!(
                    "padding_idx {p} is out of range [{}, {}] for weight with {rows} rows",
                    -(rows as i128),
                    rows as i128 - 1
                ))
            })?),
        };
        let entries = with_index_view!(indices, "EmbeddingBag", idx => {
            resolve_along_axis(idx, rule)?
        });
        let out_shape = SmallDims::from_slice(&[bags, dim]);
        let out_len = checked_product(&out_shape).ok_or_else(|| Error::SizeOverflow {
            what: "EmbeddingBag output",
            shape: out_shape.to_vec(),
        })?;
        Ok((
            Plan {
                bounds,
                padding,
                out_shape,
                out_len,
            },
            entries,
        ))
    }

    fn check_per_sample_weights(
        &self,
        psw: TensorView<'_>,
        dtype: DType,
        indices_shape: &[usize],
    ) -> Result<()> {
        if self.mode != Aggregate::Sum {
            return Err(Error::attribute(format!(
                "per_sample_weights are only defined for mode sum (as PyTorch), not {}",
                self.mode
            )));
        }
        Reduction::Mul.check_dtype(dtype)?;
        require_same_dtype(
            "per_sample_weights",
            psw.dtype(),
            dtype,
            "EmbeddingBag on {} weight",
        )?;
        if !same_dims(psw.shape(), indices_shape) {
            return Err(Error::shape(format!(
                "per_sample_weights has shape {}, but indices has shape {}; they must be equal",
                crate::Dims(psw.shape()),
                crate::Dims(indices_shape)
            )));
        }
        Ok(())
    }
}

/// The bags' boundaries from `offsets` (1-D): the starts, and the end of
/// the last bag when `include_last`, else `len` appended. They must start
/// at 0, never decrease and end at `len`. Always inlined (once per index
/// type), as [`EmbeddingBag::check`]: returned, the bounds were read back
/// in pairs just after their words were written (a tenth of a 4-bag
/// call's time in a profile).
#[inline(always)]
fn bag_bounds<I: IndexElement>(
    offsets: &[I],
    rank: usize,
    len: usize,
    include_last: bool,
) -> Result<(usize, SmallDims)> {
    if rank != 1 {
        return Err(Error::RankMismatch {
            what: "offsets",
            actual: rank,
            expected: "rank 1 is required".into(),
        });
    }
    if include_last && offsets.is_empty() {
        return Err(Error::segments(
            "offsets is empty, but with include_last_offset it needs bags + 1 >= 1 entries",
        ));
    }
    // Room for the starts, and `len` already in place as the end when the
    // last offset is not given. Inline up to 8 bounds: a small call's
    // allocation cost more than its checks.
    let count = offsets.len() + usize::from(!include_last);
    let mut bounds = SmallDims::try_filled(len, count)?;
    // One `i64` pass (the exact loop cost 220 instructions for 4 offsets).
    if !copy_sorted(offsets, len, &mut bounds) {
        checked_offsets(offsets, len, &mut bounds)?;
    }
    if bounds[0] != 0 {
        return Err(Error::segments(format!(
            "the first bag starts at {}, not 0: every index must be in a bag (offsets[0] must be 0)",
            bounds[0]
        )));
    }
    let last = bounds[bounds.len() - 1];
    if last != len {
        return Err(Error::segments(format!(
            "the last offset is {last}, but indices has {len} entries: with include_last_offset it must be the end of indices"
        )));
    }
    Ok((bounds.len() - 1, bounds))
}

/// [`copy_sorted`] of the offsets exactly, in `i128`, with the error for the first
/// offset out of range or below the one before it.
fn checked_offsets<I: IndexElement>(offsets: &[I], len: usize, bounds: &mut [usize]) -> Result<()> {
    for (k, &offset) in offsets.iter().enumerate() {
        let v = offset.to_i128();
        let b = usize::try_from(v)
            .ok()
            .filter(|&b| b <= len)
            .ok_or_else(|| {
                Error::segments(format!(
                    "offsets[{k}] = {v} is out of range [0, {len}]: indices has {len} entries"
                ))
            })?;
        if let Some(&before) = k.checked_sub(1).map(|j| &bounds[j]) {
            if b < before {
                return Err(Error::segments(format!(
                    "offsets decreases at offsets[{k}]: {v} after {before}; it must be non-decreasing"
                )));
            }
        }
        bounds[k] = b;
    }
    Ok(())
}

/// The kernel, run with the weights' product `M`, then with `mode`'s rule.
struct Fold<'a, T> {
    bags: Bags<'a, T>,
    fill: Option<&'a T>,
    mode: Aggregate,
    out: &'a mut [T],
}

impl<T: Element> CombineKernel<T> for Fold<'_, T> {
    type Output = Result<()>;

    fn run<M: Combine<T>>(self) -> Result<()> {
        T::with_aggregate(
            self.mode,
            Aggregated::<T, M> {
                fold: self,
                product: std::marker::PhantomData,
            },
        )
    }
}

/// [`Fold`] with its product chosen, for the aggregate's dispatch.
struct Aggregated<'a, T, M> {
    fold: Fold<'a, T>,
    product: std::marker::PhantomData<M>,
}

impl<T: Element, M: Combine<T>> CombineKernel<T> for Aggregated<'_, T, M> {
    type Output = ();

    fn run<C: Combine<T>>(self) {
        let fold = self.fold;
        let empty = match fold.fill {
            Some(value) => value.clone(),
            None => C::empty().unwrap_or_else(T::zero),
        };
        kernel::reduce::<T, C, M>(&fold.bags, &empty, fold.out)
    }
}

/// [`EmbeddingBag`] with `mode`, offsets without the last, no padding row
/// and no per-sample weights.
///
/// ```
/// use gatherscatter::{embedding_bag, Aggregate, Tensor};
///
/// let weight = Tensor::new(vec![3, 1], vec![1i32, 10, 100])?;
/// let bags = Tensor::new(vec![2, 2], vec![0i64, 2, 1, 1])?; // two bags of two
/// let out = embedding_bag(&weight, &bags, None, Aggregate::Mean)?;
/// assert_eq!(out.data::<i32>().unwrap(), &[50, 10]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn embedding_bag<'w, 'i, 'o>(
    weight: impl Into<TensorView<'w>>,
    indices: impl Into<TensorView<'i>>,
    offsets: Option<TensorView<'o>>,
    mode: Aggregate,
) -> Result<Tensor> {
    EmbeddingBag::new(mode).run(weight, indices, offsets, None)
}
