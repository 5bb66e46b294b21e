//! Reductions of ScatterElements / ScatterND and their per-dtype rules
//! (spec §2.8–2.9), which the [`Aggregate`]s of ScatterReduce share.

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

pub use crate::aggregate::Aggregate;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ieee;

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

/// `with_aggregate` for types with a mean.
macro_rules! with_mean {
    () => {
        fn with_aggregate<K: CombineKernel<Self>>(
            aggregate: Aggregate,
            kernel: K,
        ) -> Result<K::Output> {
            match aggregate {
                Aggregate::Mean => Ok(kernel.run::<MeanOp>()),
                other => Self::with_combine(other.step(), kernel),
            }
        }
    };
}

/// `Reduce` for types with every reduction, and a mean unless `no mean`.
macro_rules! reduce_all {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            with_mean!();
            reduce_all!(@onnx $t);
        }
    )*};
    (no mean: $t:ty) => {
        impl Reduce for $t {
            reduce_all!(@onnx $t);
        }
    };
    (@onnx $t:ty) => {
        fn dtype_of() -> DType { <$t as crate::Element>::DTYPE }
        fn with_combine<K: CombineKernel<Self>>(reduction: Reduction, kernel: K) -> Result<K::Output> {
            Ok(match reduction {
                Reduction::None => kernel.run::<Overwrite>(),
                Reduction::Add => kernel.run::<AddOp>(),
                Reduction::Mul => kernel.run::<MulOp>(),
                Reduction::Max => kernel.run::<MaxOp>(),
                Reduction::Min => kernel.run::<MinOp>(),
            })
        }
    };
}
reduce_all!(i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64);
// Bool has every ONNX reduction but no mean.
reduce_all!(no mean: bool);

macro_rules! ops_int {
    ($($t:ty),*) => {$(
        impl Sum for $t {
            #[inline] fn add(acc: &mut Self, u: &Self) { *acc = acc.wrapping_add(*u) }
        }
        impl Product for $t {
            #[inline] fn mul(acc: &mut Self, u: &Self) { *acc = acc.wrapping_mul(*u) }
            fn one() -> Self { 1 }
        }
        impl Order for $t {
            #[inline] fn max(acc: &mut Self, u: &Self) { *acc = (*acc).max(*u) }
            #[inline] fn min(acc: &mut Self, u: &Self) { *acc = (*acc).min(*u) }
        }
    )*};
}
ops_int!(i8, i16, i32, i64, u8, u16, u32, u64);

// Floor division of the (wrapped) sum by the exact count, as PyTorch rounds
// an integer mean; the quotient is no larger than the sum, so it fits.
macro_rules! average_int {
    ($($t:ty),*) => {$(
        impl Average for $t {
            #[inline]
            fn average(acc: &mut Self, count: u64) {
                let quotient = i128::from(*acc).div_euclid(i128::from(count.max(1)));
                *acc = <$t>::try_from(quotient).unwrap_or(*acc);
            }
        }
    )*};
}
average_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! ops_float {
    ($($t:ty),*) => {$(
        impl Sum for $t {
            #[inline] fn add(acc: &mut Self, u: &Self) { *acc += *u }
        }
        impl Product for $t {
            #[inline] fn mul(acc: &mut Self, u: &Self) { *acc *= *u }
            fn one() -> Self { 1.0 }
        }
        impl Order for $t {
            #[inline] fn max(acc: &mut Self, u: &Self) { *acc = ieee::maximum(*acc, *u) }
            #[inline] fn min(acc: &mut Self, u: &Self) { *acc = ieee::minimum(*acc, *u) }
        }
    )*};
}
ops_float!(f32, f64);

macro_rules! average_float {
    ($($t:ty),*) => {$(
        impl Average for $t {
            #[inline] fn average(acc: &mut Self, count: u64) { *acc /= count as $t }
            /// Every value divided and the quotient kept where the count is
            /// not 0: no branch, so the loop runs in SIMD registers (a
            /// scalar division each was a sixth of a small mean call).
            /// Counts are exact in the float, so each kept quotient is
            /// `average`'s to the bit.
            #[inline]
            fn average_counted(values: &mut [Self], counts: &[u16], extra: u16) {
                for (value, &count) in values.iter_mut().zip(counts) {
                    let quotient = *value / (u32::from(count) + u32::from(extra)) as $t;
                    *value = if count > 0 { quotient } else { *value };
                }
            }
        }
    )*};
}
average_float!(f32, f64);

/// The 16-bit floats' steps in f32: float16 through `float16` (F16C
/// inline, or inline arithmetic: `half` checks the CPU and calls out on
/// every value), bfloat16 by `half`'s shifts.
trait F32Steps: Copy {
    fn widen(self) -> f32;
    fn narrow(f: f32) -> Self;
    fn add(self, u: Self) -> Self {
        Self::narrow(self.widen() + u.widen())
    }
    fn mul(self, u: Self) -> Self {
        Self::narrow(self.widen() * u.widen())
    }
}
impl F32Steps for f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        crate::float16::to_f32(self)
    }
    #[inline(always)]
    fn narrow(f: f32) -> Self {
        crate::float16::from_f32(f)
    }
    #[inline(always)]
    fn add(self, u: Self) -> Self {
        crate::float16::add(self, u)
    }
    #[inline(always)]
    fn mul(self, u: Self) -> Self {
        crate::float16::mul(self, u)
    }
}
impl F32Steps for bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn narrow(f: f32) -> Self {
        bf16::from_f32(f)
    }
}

// Each step in f32, rounded back: equal, bit for bit, to the serial reference.
macro_rules! ops_half {
    ($($t:ty),*) => {$(
        impl Sum for $t {
            #[inline] fn add(acc: &mut Self, u: &Self) { *acc = F32Steps::add(*acc, *u) }
        }
        impl Product for $t {
            #[inline] fn mul(acc: &mut Self, u: &Self) { *acc = F32Steps::mul(*acc, *u) }
            fn one() -> Self { <$t>::ONE }
        }
        impl Order for $t {
            #[inline] fn max(acc: &mut Self, u: &Self) { *acc = ieee::maximum(*acc, *u) }
            #[inline] fn min(acc: &mut Self, u: &Self) { *acc = ieee::minimum(*acc, *u) }
        }
    )*};
}
ops_half!(f16, bf16);

macro_rules! average_half {
    ($($t:ty),*) => {$(
        impl Average for $t {
            #[inline] fn average(acc: &mut Self, count: u64) { *acc = <$t>::narrow(acc.widen() / count as f32) }
        }
    )*};
}
average_half!(f16, bf16);

impl Sum for bool {
    #[inline]
    fn add(acc: &mut Self, u: &Self) {
        *acc |= *u
    }
}
impl Product for bool {
    #[inline]
    fn mul(acc: &mut Self, u: &Self) {
        *acc &= *u
    }
    fn one() -> Self {
        true
    }
}
impl Order for bool {
    #[inline]
    fn max(acc: &mut Self, u: &Self) {
        *acc |= *u
    }
    #[inline]
    fn min(acc: &mut Self, u: &Self) {
        *acc &= *u
    }
}

// Complex numbers have no order: no `max` or `min`.
macro_rules! reduce_complex {
    ($($t:ty => $dtype:ident, $real:ty),*) => {$(
        impl Sum for $t {
            #[inline] fn add(acc: &mut Self, u: &Self) { *acc += *u }
        }
        impl Product for $t {
            #[inline] fn mul(acc: &mut Self, u: &Self) { *acc *= *u }
            fn one() -> Self { <$t>::new(1.0, 0.0) }
        }
        impl Average for $t {
            #[inline] fn average(acc: &mut Self, count: u64) { *acc /= count as $real }
        }
        impl Reduce for $t {
            fn dtype_of() -> DType { DType::$dtype }
            with_mean!();
            fn with_combine<K: CombineKernel<Self>>(reduction: Reduction, kernel: K) -> Result<K::Output> {
                match reduction {
                    Reduction::None => Ok(kernel.run::<Overwrite>()),
                    Reduction::Add => Ok(kernel.run::<AddOp>()),
                    Reduction::Mul => Ok(kernel.run::<MulOp>()),
                    Reduction::Max | Reduction::Min => Err(undefined(reduction, DType::$dtype)),
                }
            }
        }
    )*};
}
reduce_complex!(Complex32 => Complex64, f32, Complex64 => Complex128, f64);

// Strings have no product.
impl Sum for String {
    #[inline]
    fn add(acc: &mut Self, u: &Self) {
        acc.push_str(u)
    }
}
impl Order for String {
    #[inline]
    fn max(acc: &mut Self, u: &Self) {
        if u.as_bytes() > acc.as_bytes() {
            acc.clone_from(u)
        }
    }
    #[inline]
    fn min(acc: &mut Self, u: &Self) {
        if u.as_bytes() < acc.as_bytes() {
            acc.clone_from(u)
        }
    }
}
impl Reduce for String {
    fn dtype_of() -> DType {
        DType::String
    }
    fn with_combine<K: CombineKernel<Self>>(reduction: Reduction, kernel: K) -> Result<K::Output> {
        match reduction {
            Reduction::None => Ok(kernel.run::<Overwrite>()),
            Reduction::Add => Ok(kernel.run::<AddOp>()),
            Reduction::Max => Ok(kernel.run::<MaxOp>()),
            Reduction::Min => Ok(kernel.run::<MinOp>()),
            Reduction::Mul => Err(undefined(reduction, DType::String)),
        }
    }
}

#[cfg(test)]
mod tests;
