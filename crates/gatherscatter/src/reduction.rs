//! Reductions of ScatterElements / ScatterND and their per-dtype rules
//! (spec §2.8–2.9), which the [`Aggregate`]s of ScatterReduce share.

use std::fmt;
use std::str::FromStr;

pub use crate::aggregate::Aggregate;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// How an update combines with the value already in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Reduction {
    /// Overwrite; with duplicates, the last update in row-major order wins.
    #[default]
    None,
    /// `out += update` (bool: OR; string: concatenation; integers wrap).
    Add,
    /// `out *= update` (bool: AND; integers wrap; not for strings).
    Mul,
    /// `out = max(out, update)` (NaN propagates; bool: OR; strings by bytes; not for complex).
    Max,
    /// `out = min(out, update)` (NaN propagates; bool: AND; strings by bytes; not for complex).
    Min,
}

impl Reduction {
    /// Every reduction.
    pub const ALL: [Reduction; 5] = [
        Reduction::None,
        Reduction::Add,
        Reduction::Mul,
        Reduction::Max,
        Reduction::Min,
    ];

    /// The ONNX attribute value: `none`, `add`, `mul`, `max`, `min`.
    pub fn name(self) -> &'static str {
        match self {
            Reduction::None => "none",
            Reduction::Add => "add",
            Reduction::Mul => "mul",
            Reduction::Max => "max",
            Reduction::Min => "min",
        }
    }

    /// `Ok` if `dtype` defines this reduction, else a `BadReduction` error saying why not.
    pub fn check_dtype(self, dtype: DType) -> Result<()> {
        let Some(why) = self.why_undefined(dtype) else {
            return Ok(());
        };
        Err(Error::BadReduction {
            message: format!(
                "reduction {} is not defined for {dtype}: {why}",
                self.name()
            ),
        })
    }

    /// Why `dtype` does not define this reduction, or `None` when it does.
    pub(crate) fn why_undefined(self, dtype: DType) -> Option<&'static str> {
        match (self, dtype) {
            (Reduction::Max | Reduction::Min, DType::Complex64 | DType::Complex128) => {
                Some("complex numbers have no order")
            }
            (Reduction::Mul, DType::String) => Some("strings cannot be multiplied"),
            _ => None,
        }
    }
}

/// The reductions ONNX allows for ScatterElements and ScatterND at a given
/// operator version: none only before 16, add/mul from 16, max/min from 18.
pub(crate) fn check_onnx_reduction(
    reduction: Reduction,
    version: u32,
    context: &str,
) -> Result<()> {
    let allowed: &[Reduction] = match version {
        ..=15 => &[Reduction::None],
        16..=17 => &[Reduction::None, Reduction::Add, Reduction::Mul],
        _ => &Reduction::ALL,
    };
    if allowed.contains(&reduction) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|r| r.name()).collect();
    Err(Error::BadReduction {
        message: format!(
            "reduction {reduction} is not allowed by {context} (allowed: {})",
            names.join(", ")
        ),
    })
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Reduction {
    type Err = Error;
    fn from_str(s: &str) -> Result<Reduction> {
        Reduction::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| Error::BadReduction {
                message: format!(
                    "unknown reduction {s:?}; expected one of none, add, mul, max, min"
                ),
            })
    }
}

/// The reductions a dtype defines, by construction: each dtype's impl names
/// the combine rules it has, and a rule it lacks (max of complex numbers, a
/// product of strings) is not a [`Combine`] of that type, so no kernel can be
/// compiled to apply it. Implemented for every [`Element`](crate::Element)
/// type.
#[doc(hidden)]
pub trait Reduce: Sized {
    /// Run `kernel` with the combine rule of `reduction` for this dtype, or
    /// return the `bad_reduction` error of [`Reduction::check_dtype`] when
    /// the dtype does not define it.
    fn with_combine<K: CombineKernel<Self>>(reduction: Reduction, kernel: K) -> Result<K::Output>;

    /// Run `kernel` with the rule of `aggregate` ([`MeanOp`] for `mean`),
    /// or return the error of [`Aggregate::check_dtype`].
    fn with_aggregate<K: CombineKernel<Self>>(
        aggregate: Aggregate,
        kernel: K,
    ) -> Result<K::Output> {
        match aggregate {
            Aggregate::Mean => Err(undefined_aggregate(aggregate, Self::dtype_of())),
            other => Self::with_combine(other.step(), kernel),
        }
    }

    /// The dtype, for error messages of the default methods.
    fn dtype_of() -> DType;
}

/// A kernel generic over its combine rule, run by [`Reduce::with_combine`].
#[doc(hidden)]
pub trait CombineKernel<T> {
    /// What the kernel returns.
    type Output;
    /// Run with the combine rule `C`.
    fn run<C: Combine<T>>(self) -> Self::Output;
}

/// A reduction as a zero-sized strategy, so scatter loops are compiled once
/// per (dtype, reduction) with the combine inlined.
#[doc(hidden)]
pub trait Combine<T> {
    /// `*acc = f(*acc, update)`.
    fn combine(acc: &mut T, update: &T);

    /// The last step once all `count` contributions are in `acc`: nothing,
    /// except for [`MeanOp`], which divides by `count` (at least 1).
    #[inline]
    fn finish(_acc: &mut T, _count: u64) {}

    /// [`Combine::finish`] of each of `values` that has a count: value `k`
    /// with `counts[k] + extra` where `counts[k] > 0`; the rest as they are.
    #[inline]
    fn finish_counted(values: &mut [T], counts: &[u16], extra: u16) {
        for (value, &count) in values.iter_mut().zip(counts) {
            if count > 0 {
                Self::finish(value, u64::from(count) + u64::from(extra));
            }
        }
    }

    /// Whether [`Combine::finish`] does anything, so kernels can skip the pass.
    const FINISHES: bool = false;

    /// Whether [`Combine::combine`] is the dtype's addition (`add` and
    /// `mean`; for `f32`, `*acc += update`), so a kernel may add in SIMD
    /// registers instead.
    const ADDS: bool = false;

    /// Whether a run of updates may be cut in pieces, each folded into its
    /// own copy of the starting values, and the copies combined in order,
    /// with the serial fold's result bit for bit. True for `max` and `min`:
    /// they are associative, and folding the starting values in a second
    /// time changes nothing (a NaN result is the first NaN of the run, and
    /// the starting value comes first in both).
    const SPLITS: bool = false;

    /// The value of an empty segment when the caller gives none: the
    /// product's identity (1) for [`MulOp`], else `None` for zero (what
    /// pytorch_scatter writes for sum, mean, max and min).
    #[inline]
    fn empty() -> Option<T> {
        None
    }
}

/// Types with a sum (`add`): every dtype (bool: OR; strings: concatenation).
trait Sum {
    fn add(acc: &mut Self, update: &Self);
}

/// Types with a product (`mul`): all but strings (bool: AND).
trait Product: Sized {
    fn mul(acc: &mut Self, update: &Self);
    fn one() -> Self;
}

/// Types with an order (`max`, `min`): all but complex numbers.
trait Order {
    fn max(acc: &mut Self, update: &Self);
    fn min(acc: &mut Self, update: &Self);
}

#[doc(hidden)]
pub struct Overwrite;
#[doc(hidden)]
pub struct AddOp;
#[doc(hidden)]
pub struct MulOp;
#[doc(hidden)]
pub struct MaxOp;
#[doc(hidden)]
pub struct MinOp;
/// `mean`: adds, then divides by the count in [`Combine::finish`].
#[doc(hidden)]
pub struct MeanOp;

/// Types with a mean: a sum divided by a count.
trait Average: Sized {
    fn average(acc: &mut Self, count: u64);

    /// [`Combine::finish_counted`] of the mean.
    #[inline]
    fn average_counted(values: &mut [Self], counts: &[u16], extra: u16) {
        for (value, &count) in values.iter_mut().zip(counts) {
            if count > 0 {
                Self::average(value, u64::from(count) + u64::from(extra));
            }
        }
    }
}

impl<T: Clone> Combine<T> for Overwrite {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        acc.clone_from(update)
    }
}
impl<T: Sum> Combine<T> for AddOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::add(acc, update)
    }
    const ADDS: bool = true;
}
impl<T: Product> Combine<T> for MulOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::mul(acc, update)
    }
    fn empty() -> Option<T> {
        Some(T::one())
    }
}
impl<T: Order> Combine<T> for MaxOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::max(acc, update)
    }
    const SPLITS: bool = true;
}
impl<T: Order> Combine<T> for MinOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::min(acc, update)
    }
    const SPLITS: bool = true;
}
impl<T: Sum + Average> Combine<T> for MeanOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::add(acc, update)
    }
    const ADDS: bool = true;
    #[inline]
    fn finish(acc: &mut T, count: u64) {
        T::average(acc, count)
    }
    #[inline]
    fn finish_counted(values: &mut [T], counts: &[u16], extra: u16) {
        T::average_counted(values, counts, extra)
    }
    const FINISHES: bool = true;
}

/// The `bad_reduction` error for a reduction `dtype` does not define.
fn undefined(reduction: Reduction, dtype: DType) -> Error {
    reduction
        .check_dtype(dtype)
        .err()
        .unwrap_or_else(|| Error::BadReduction {
            message: format!("reduction {reduction} is not defined for {dtype}"),
        })
}

/// The `bad_reduction` error for an aggregate `dtype` does not define.
fn undefined_aggregate(aggregate: Aggregate, dtype: DType) -> Error {
    aggregate
        .check_dtype(dtype)
        .err()
        .unwrap_or_else(|| Error::BadReduction {
            message: format!("reduce {aggregate} is not defined for {dtype}"),
        })
}

mod dtypes;

#[cfg(test)]
mod tests;
