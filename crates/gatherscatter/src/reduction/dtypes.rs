//! Each dtype's rules for the reductions (spec §2.8–2.9): which of them
//! it defines, and how [`Sum`], [`Product`], [`Order`] and [`Average`]
//! work on it; the traits and the combine steps are in [`super`].

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use super::*;
use crate::dtype::DType;
use crate::error::Result;
use crate::ieee;

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
