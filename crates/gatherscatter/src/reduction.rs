//! Reductions of ScatterElements / ScatterND and their per-dtype rules
//! (spec §2.8–2.9).

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

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
        let why = match (self, dtype) {
            (Reduction::Max | Reduction::Min, DType::Complex64 | DType::Complex128) => {
                "complex numbers have no order"
            }
            (Reduction::Mul, DType::String) => "strings cannot be multiplied",
            _ => return Ok(()),
        };
        Err(Error::BadReduction {
            message: format!(
                "reduction {} is not defined for {dtype}: {why}",
                self.name()
            ),
        })
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

/// Per-dtype combine rules. Implemented for every [`Element`](crate::Element)
/// type; callers check [`Reduction::check_dtype`] first, so the methods of a
/// reduction a dtype does not define are never reached.
#[doc(hidden)]
pub trait Reduce: Sized {
    /// `*acc = *acc + update` by the dtype's rule.
    fn add(acc: &mut Self, update: &Self);
    /// `*acc = *acc * update` by the dtype's rule.
    fn mul(acc: &mut Self, update: &Self);
    /// `*acc = max(*acc, update)` by the dtype's rule.
    fn max(acc: &mut Self, update: &Self);
    /// `*acc = min(*acc, update)` by the dtype's rule.
    fn min(acc: &mut Self, update: &Self);
}

macro_rules! reduce_int {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            #[inline] fn add(acc: &mut Self, u: &Self) { *acc = acc.wrapping_add(*u) }
            #[inline] fn mul(acc: &mut Self, u: &Self) { *acc = acc.wrapping_mul(*u) }
            #[inline] fn max(acc: &mut Self, u: &Self) { *acc = (*acc).max(*u) }
            #[inline] fn min(acc: &mut Self, u: &Self) { *acc = (*acc).min(*u) }
        }
    )*};
}
reduce_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// IEEE 754-2019 `maximum`: NaN if either is NaN, and +0 above -0.
#[inline]
fn ieee_maximum<F: FloatOrder>(a: F, b: F) -> F {
    if a.is_nan() {
        a
    } else if b.is_nan() || b.gt(a) || (b.eq(a) && a.is_sign_negative()) {
        b
    } else {
        a
    }
}

/// IEEE 754-2019 `minimum`: NaN if either is NaN, and -0 below +0.
#[inline]
fn ieee_minimum<F: FloatOrder>(a: F, b: F) -> F {
    if a.is_nan() {
        a
    } else if b.is_nan() || b.lt(a) || (b.eq(a) && b.is_sign_negative()) {
        b
    } else {
        a
    }
}

trait FloatOrder: Copy {
    fn is_nan(self) -> bool;
    fn is_sign_negative(self) -> bool;
    fn gt(self, other: Self) -> bool;
    fn lt(self, other: Self) -> bool;
    fn eq(self, other: Self) -> bool;
}

macro_rules! float_order {
    ($($t:ty),*) => {$(
        impl FloatOrder for $t {
            #[inline] fn is_nan(self) -> bool { <$t>::is_nan(self) }
            #[inline] fn is_sign_negative(self) -> bool { <$t>::is_sign_negative(self) }
            #[inline] fn gt(self, o: Self) -> bool { self > o }
            #[inline] fn lt(self, o: Self) -> bool { self < o }
            #[inline] fn eq(self, o: Self) -> bool { self == o }
        }
    )*};
}
float_order!(f32, f64, f16, bf16);

macro_rules! reduce_float {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            #[inline] fn add(acc: &mut Self, u: &Self) { *acc += *u }
            #[inline] fn mul(acc: &mut Self, u: &Self) { *acc *= *u }
            #[inline] fn max(acc: &mut Self, u: &Self) { *acc = ieee_maximum(*acc, *u) }
            #[inline] fn min(acc: &mut Self, u: &Self) { *acc = ieee_minimum(*acc, *u) }
        }
    )*};
}
reduce_float!(f32, f64);

// Each step in f32, rounded back: equal, bit for bit, to the serial reference.
macro_rules! reduce_half {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            #[inline] fn add(acc: &mut Self, u: &Self) { *acc = <$t>::from_f32(acc.to_f32() + u.to_f32()) }
            #[inline] fn mul(acc: &mut Self, u: &Self) { *acc = <$t>::from_f32(acc.to_f32() * u.to_f32()) }
            #[inline] fn max(acc: &mut Self, u: &Self) { *acc = ieee_maximum(*acc, *u) }
            #[inline] fn min(acc: &mut Self, u: &Self) { *acc = ieee_minimum(*acc, *u) }
        }
    )*};
}
reduce_half!(f16, bf16);

impl Reduce for bool {
    #[inline]
    fn add(acc: &mut Self, u: &Self) {
        *acc |= *u
    }
    #[inline]
    fn mul(acc: &mut Self, u: &Self) {
        *acc &= *u
    }
    #[inline]
    fn max(acc: &mut Self, u: &Self) {
        *acc |= *u
    }
    #[inline]
    fn min(acc: &mut Self, u: &Self) {
        *acc &= *u
    }
}

macro_rules! reduce_complex {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            #[inline] fn add(acc: &mut Self, u: &Self) { *acc += *u }
            #[inline] fn mul(acc: &mut Self, u: &Self) { *acc *= *u }
            // No order: refused by Reduction::check_dtype before any kernel runs.
            fn max(_: &mut Self, _: &Self) {}
            fn min(_: &mut Self, _: &Self) {}
        }
    )*};
}
reduce_complex!(Complex32, Complex64);

impl Reduce for String {
    #[inline]
    fn add(acc: &mut Self, u: &Self) {
        acc.push_str(u)
    }
    // Not defined: refused by Reduction::check_dtype before any kernel runs.
    fn mul(_: &mut Self, _: &Self) {}
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

/// A reduction as a zero-sized strategy, so scatter loops are compiled once
/// per (dtype, reduction) with the combine inlined.
pub(crate) trait Combine<T> {
    fn combine(acc: &mut T, update: &T);
}

pub(crate) struct Overwrite;
pub(crate) struct AddOp;
pub(crate) struct MulOp;
pub(crate) struct MaxOp;
pub(crate) struct MinOp;

impl<T: Clone> Combine<T> for Overwrite {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        acc.clone_from(update)
    }
}
impl<T: Reduce> Combine<T> for AddOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::add(acc, update)
    }
}
impl<T: Reduce> Combine<T> for MulOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::mul(acc, update)
    }
}
impl<T: Reduce> Combine<T> for MaxOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::max(acc, update)
    }
}
impl<T: Reduce> Combine<T> for MinOp {
    #[inline]
    fn combine(acc: &mut T, update: &T) {
        T::min(acc, update)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for r in Reduction::ALL {
            assert_eq!(r.name().parse::<Reduction>().unwrap(), r);
        }
        let err = "sum".parse::<Reduction>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown reduction \"sum\"; expected one of none, add, mul, max, min"
        );
    }

    #[test]
    fn maximum_and_minimum_follow_ieee_754_2019() {
        assert!(ieee_maximum(f32::NAN, 1.0).is_nan());
        assert!(ieee_maximum(1.0, f32::NAN).is_nan());
        assert!(ieee_minimum(f64::NAN, 1.0).is_nan());
        assert!(ieee_minimum(1.0, f64::NAN).is_nan());
        assert!(ieee_maximum(-0.0f32, 0.0).is_sign_positive());
        assert!(ieee_maximum(0.0f32, -0.0).is_sign_positive());
        assert!(ieee_minimum(0.0f32, -0.0).is_sign_negative());
        assert!(ieee_minimum(-0.0f32, 0.0).is_sign_negative());
        assert_eq!(ieee_maximum(2.0f32, 3.0), 3.0);
        assert_eq!(ieee_minimum(2.0f32, 3.0), 2.0);
        assert!(ieee_maximum(f16::NAN, f16::ONE).is_nan());
    }

    #[test]
    fn complex_has_no_order_and_strings_no_product() {
        assert!(Reduction::Max.check_dtype(DType::Complex64).is_err());
        assert!(Reduction::Min.check_dtype(DType::Complex128).is_err());
        assert!(Reduction::Mul.check_dtype(DType::String).is_err());
        assert!(Reduction::Add.check_dtype(DType::String).is_ok());
        assert!(Reduction::Mul.check_dtype(DType::Complex64).is_ok());
    }
}
