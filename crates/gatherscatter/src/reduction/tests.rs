use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

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
fn complex_has_no_order_and_strings_no_product() {
    assert!(Reduction::Max.check_dtype(DType::Complex64).is_err());
    assert!(Reduction::Min.check_dtype(DType::Complex128).is_err());
    assert!(Reduction::Mul.check_dtype(DType::String).is_err());
    assert!(Reduction::Add.check_dtype(DType::String).is_ok());
    assert!(Reduction::Mul.check_dtype(DType::Complex64).is_ok());
}

/// What the kernels can run (each dtype's `Reduce` impl) and what the
/// plan accepts (`Reduction::check_dtype`) agree for every dtype and
/// reduction: a refused reduction is refused with the same message.
#[test]
fn every_dtype_runs_exactly_the_reductions_check_dtype_accepts() {
    struct Probe;
    impl<T> CombineKernel<T> for Probe {
        type Output = ();
        fn run<C: Combine<T>>(self) {}
    }
    fn runs<T: crate::Element>(reduction: Reduction) -> Result<()> {
        T::with_combine(reduction, Probe)
    }
    type Runs = fn(Reduction) -> Result<()>;
    let kernels: [(DType, Runs); 16] = [
        (DType::Bool, runs::<bool>),
        (DType::I8, runs::<i8>),
        (DType::I16, runs::<i16>),
        (DType::I32, runs::<i32>),
        (DType::I64, runs::<i64>),
        (DType::U8, runs::<u8>),
        (DType::U16, runs::<u16>),
        (DType::U32, runs::<u32>),
        (DType::U64, runs::<u64>),
        (DType::F16, runs::<f16>),
        (DType::BF16, runs::<bf16>),
        (DType::F32, runs::<f32>),
        (DType::F64, runs::<f64>),
        (DType::Complex64, runs::<Complex32>),
        (DType::Complex128, runs::<Complex64>),
        (DType::String, runs::<String>),
    ];
    for (dtype, runs) in kernels {
        for r in Reduction::ALL {
            let (ran, checked) = (runs(r), r.check_dtype(dtype));
            assert_eq!(
                ran.as_ref().err().map(ToString::to_string),
                checked.as_ref().err().map(ToString::to_string),
                "{r} on {dtype}"
            );
        }
    }
}
