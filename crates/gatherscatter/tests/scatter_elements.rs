//! ScatterElements and Scatter: the seed examples verbatim, the per-dtype
//! reduction rules, errors that leave the caller's data untouched, the opset
//! profiles, and a property test against the naive serial reference.

mod common;
mod pool;

use common::*;
use gatherscatter::{
    bf16, f16, Complex32, DType, Error, ErrorKind, Profile, Reduction, Scatter, ScatterElements,
    Tensor,
};
use pool::{in_pool, names_the_first_bad_index_on_any_pool};
use proptest::prelude::*;

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

fn i64s(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

fn onnx(opset: u32) -> Profile {
    Profile::Onnx { opset }
}

// ---- seed 004: ONNX ScatterElements 11 / 13 / 16 ----

#[test]
fn onnx_example_1_and_scatter_elements_without_axis() {
    let data = f32s(&[3, 3], &[0.0; 9]);
    let indices = i64s(&[2, 3], &[1, 0, 2, 0, 2, 1]);
    let updates = f32s(&[2, 3], &[1.0, 1.1, 1.2, 2.0, 2.1, 2.2]);
    for opset in [11, 13, 16, 18] {
        let out = ScatterElements::default()
            .profile(onnx(opset))
            .run(&data, &indices, &updates)
            .unwrap();
        assert_eq!(out.shape(), &[3, 3]);
        assert_eq!(
            out.data::<f32>().unwrap(),
            &[2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2]
        );
    }
}

#[test]
fn onnx_example_2_and_scatter_elements_with_axis() {
    let data = f32s(&[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let out = ScatterElements::new(1)
        .profile(onnx(16))
        .run(&data, &i64s(&[1, 2], &[1, 3]), &f32s(&[1, 2], &[1.1, 2.1]))
        .unwrap();
    assert_eq!(out.data::<f32>().unwrap(), &[1.0, 1.1, 3.0, 2.1, 5.0]);
}

#[test]
fn onnx_scatter_elements_with_negative_indices() {
    let data = f32s(&[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let out = ScatterElements::new(1)
        .profile(onnx(16))
        .run(&data, &i64s(&[1, 2], &[1, -3]), &f32s(&[1, 2], &[1.1, 2.1]))
        .unwrap();
    assert_eq!(out.data::<f32>().unwrap(), &[1.0, 1.1, 2.1, 4.0, 5.0]);
}

#[test]
fn onnx_scatter_elements_with_duplicate_indices() {
    // "# [[1.0, 5.2, 3.0, 4.0, 5.0]]": 2.0 + 1.1 + 2.1 in float32, in that order.
    let data = f32s(&[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let out = ScatterElements::new(1)
        .reduction(Reduction::Add)
        .profile(onnx(16))
        .run(&data, &i64s(&[1, 2], &[1, 1]), &f32s(&[1, 2], &[1.1, 2.1]))
        .unwrap();
    assert_eq!(out.data::<f32>().unwrap(), &[1.0, 5.2, 3.0, 4.0, 5.0]);
    assert_eq!(out.data::<f32>().unwrap()[1], (2.0f32 + 1.1) + 2.1);
}

#[test]
fn scatter_9_and_11_behave_as_scatter_elements_11() {
    let data = f32s(&[3, 3], &[0.0; 9]);
    let indices = i64s(&[2, 3], &[1, 0, 2, 0, 2, 1]);
    let updates = f32s(&[2, 3], &[1.0, 1.1, 1.2, 2.0, 2.1, 2.2]);
    let expected = ScatterElements::default()
        .profile(onnx(11))
        .run(&data, &indices, &updates)
        .unwrap();
    for opset in [9, 10, 11] {
        assert_eq!(
            Scatter::new(0)
                .profile(onnx(opset))
                .run(&data, &indices, &updates)
                .unwrap(),
            expected
        );
    }
    let err = Scatter::new(0)
        .profile(onnx(8))
        .run(&data, &indices, &updates)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    let bf = Tensor::new(vec![1], vec![bf16::ONE]).unwrap();
    let err = Scatter::new(0)
        .profile(onnx(11))
        .run(&bf, &i64s(&[1], &[0]), &bf)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
}

// ---- spec §2.8–2.9: reductions by dtype ----

#[test]
fn bool_add_is_or_mul_is_and_max_is_or_min_is_and() {
    let data = Tensor::new(vec![4], vec![false, true, false, true]).unwrap();
    let indices = i64s(&[4], &[0, 1, 2, 3]);
    let updates = Tensor::new(vec![4], vec![false, false, true, true]).unwrap();
    let run = |r| {
        ScatterElements::new(0)
            .reduction(r)
            .run(&data, &indices, &updates)
            .unwrap()
    };
    assert_eq!(
        run(Reduction::Add).data::<bool>().unwrap(),
        &[false, true, true, true]
    );
    assert_eq!(
        run(Reduction::Max).data::<bool>().unwrap(),
        &[false, true, true, true]
    );
    assert_eq!(
        run(Reduction::Mul).data::<bool>().unwrap(),
        &[false, false, false, true]
    );
    assert_eq!(
        run(Reduction::Min).data::<bool>().unwrap(),
        &[false, false, false, true]
    );
}

#[test]
fn f16_and_bf16_round_after_every_step() {
    // 2048 + 1 + 1 in f16: each step rounds back to 2048 (f16 spacing is 2
    // there), while summing the updates first would give 2050.
    let data = Tensor::new(vec![1], vec![f16::from_f32(2048.0)]).unwrap();
    let updates = Tensor::new(vec![2], vec![f16::ONE, f16::ONE]).unwrap();
    let out = ScatterElements::new(0)
        .reduction(Reduction::Add)
        .run(&data, &i64s(&[2], &[0, 0]), &updates)
        .unwrap();
    assert_eq!(out.data::<f16>().unwrap(), &[f16::from_f32(2048.0)]);
    // bf16: 256 + 1 + 1 stays 256 for the same reason.
    let data = Tensor::new(vec![1], vec![bf16::from_f32(256.0)]).unwrap();
    let updates = Tensor::new(vec![2], vec![bf16::ONE, bf16::ONE]).unwrap();
    let out = ScatterElements::new(0)
        .reduction(Reduction::Add)
        .run(&data, &i64s(&[2], &[0, 0]), &updates)
        .unwrap();
    assert_eq!(out.data::<bf16>().unwrap(), &[bf16::from_f32(256.0)]);
}

#[test]
fn integers_wrap_on_overflow() {
    let data = Tensor::new(vec![2], vec![i64::MAX, i64::MIN]).unwrap();
    let updates = Tensor::new(vec![2], vec![1i64, 2]).unwrap();
    let indices = i64s(&[2], &[0, 1]);
    let add = ScatterElements::new(0)
        .reduction(Reduction::Add)
        .run(&data, &indices, &updates)
        .unwrap();
    assert_eq!(add.data::<i64>().unwrap(), &[i64::MIN, i64::MIN + 2]);
    let mul = ScatterElements::new(0)
        .reduction(Reduction::Mul)
        .run(&data, &indices, &updates)
        .unwrap();
    assert_eq!(mul.data::<i64>().unwrap(), &[i64::MAX, 0]);
    let data = Tensor::new(vec![1], vec![250u8]).unwrap();
    let out = ScatterElements::new(0)
        .reduction(Reduction::Add)
        .run(
            &data,
            &i64s(&[2], &[0, 0]),
            &Tensor::new(vec![2], vec![5u8, 5]).unwrap(),
        )
        .unwrap();
    assert_eq!(out.data::<u8>().unwrap(), &[4]);
}

#[test]
fn nan_propagates_under_max_and_min_from_either_side() {
    let nan = f32::NAN;
    for r in [Reduction::Max, Reduction::Min] {
        // NaN in data, number in updates; number in data, NaN in updates.
        let data = f32s(&[2], &[nan, 1.0]);
        let updates = f32s(&[2], &[5.0, nan]);
        let out = ScatterElements::new(0)
            .reduction(r)
            .run(&data, &i64s(&[2], &[0, 1]), &updates)
            .unwrap();
        let v = out.data::<f32>().unwrap();
        assert!(v[0].is_nan() && v[1].is_nan(), "{r}: {v:?}");
        // A NaN update followed by a number at the same target stays NaN.
        let out = ScatterElements::new(0)
            .reduction(r)
            .run(
                &f32s(&[1], &[0.0]),
                &i64s(&[2], &[0, 0]),
                &f32s(&[2], &[nan, 3.0]),
            )
            .unwrap();
        assert!(out.data::<f32>().unwrap()[0].is_nan(), "{r}");
        let data = Tensor::new(vec![1], vec![f64::NAN]).unwrap();
        let out = ScatterElements::new(0)
            .reduction(r)
            .run(
                &data,
                &i64s(&[1], &[0]),
                &Tensor::new(vec![1], vec![1.0f64]).unwrap(),
            )
            .unwrap();
        assert!(out.data::<f64>().unwrap()[0].is_nan(), "{r}");
    }
}

#[test]
fn complex_refuses_max_and_min_but_adds_and_multiplies() {
    let data = Tensor::new(vec![1], vec![Complex32::new(1.0, 2.0)]).unwrap();
    let updates = Tensor::new(vec![1], vec![Complex32::new(3.0, -1.0)]).unwrap();
    let idx = i64s(&[1], &[0]);
    for r in [Reduction::Max, Reduction::Min] {
        let err = ScatterElements::new(0)
            .reduction(r)
            .run(&data, &idx, &updates)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadReduction);
        assert_eq!(
            err.to_string(),
            format!("reduction {r} is not defined for complex64: complex numbers have no order")
        );
    }
    let add = ScatterElements::new(0)
        .reduction(Reduction::Add)
        .run(&data, &idx, &updates)
        .unwrap();
    assert_eq!(
        add.data::<Complex32>().unwrap(),
        &[Complex32::new(4.0, 1.0)]
    );
    let mul = ScatterElements::new(0)
        .reduction(Reduction::Mul)
        .run(&data, &idx, &updates)
        .unwrap();
    assert_eq!(
        mul.data::<Complex32>().unwrap(),
        &[Complex32::new(5.0, 5.0)]
    );
}

#[test]
fn strings_concatenate_compare_by_bytes_and_refuse_mul() {
    let s = |v: &[&str]| {
        Tensor::new(
            vec![v.len()],
            v.iter().map(|x| x.to_string()).collect::<Vec<_>>(),
        )
        .unwrap()
    };
    let data = s(&["a", "m"]);
    let idx = i64s(&[3], &[0, 0, 1]);
    let updates = s(&["b", "c", "Z"]);
    let run = |r| {
        ScatterElements::new(0)
            .reduction(r)
            .run(&data, &idx, &updates)
    };
    assert_eq!(run(Reduction::None).unwrap(), s(&["c", "Z"]));
    assert_eq!(run(Reduction::Add).unwrap(), s(&["abc", "mZ"]));
    assert_eq!(run(Reduction::Max).unwrap(), s(&["c", "m"]));
    assert_eq!(run(Reduction::Min).unwrap(), s(&["a", "Z"]));
    let err = run(Reduction::Mul).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadReduction);
    assert_eq!(
        err.to_string(),
        "reduction mul is not defined for string: strings cannot be multiplied"
    );
}

#[test]
fn duplicates_without_reduction_keep_the_last_in_row_major_order() {
    // Axis 0 of a [2, 2] target, indices [[1, 0], [1, 0]]: row 1 of updates comes last.
    let data = i64s(&[2, 2], &[0, 0, 0, 0]);
    let out = ScatterElements::new(0)
        .run(
            &data,
            &i64s(&[2, 2], &[1, 0, 1, 0]),
            &i64s(&[2, 2], &[10, 20, 30, 40]),
        )
        .unwrap();
    assert_eq!(out.data::<i64>().unwrap(), &[0, 40, 30, 0]);
}

// ---- spec §2.1: errors before any write, data untouched ----

#[test]
fn out_of_range_anywhere_errors_and_leaves_data_untouched() {
    let data = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let before = data.clone();
    for (at, position) in [(0usize, vec![0usize, 0]), (2, vec![1, 0]), (3, vec![1, 1])] {
        let mut values = vec![0i64, 1, 2, 0];
        values[at] = 3;
        let err = ScatterElements::new(1)
            .reduction(Reduction::Add)
            .run(&data, &i64s(&[2, 2], &values), &f32s(&[2, 2], &[9.0; 4]))
            .unwrap_err();
        assert_eq!(
            err,
            Error::IndexOutOfRange {
                value: 3,
                position,
                axis: 1,
                axis_size: 3,
                negative_allowed: true
            }
        );
        assert_eq!(data, before);
    }
}

#[test]
fn shape_and_dtype_errors_name_the_numbers() {
    let data = f32s(&[2, 3], &[0.0; 6]);
    let err = ScatterElements::new(0)
        .run(&data, &i64s(&[1, 2], &[0, 0]), &f32s(&[2, 1], &[0.0; 2]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert_eq!(
        err.to_string(),
        "updates shape [2, 1] differs from indices shape [1, 2]; they must be equal"
    );
    let err = ScatterElements::new(0)
        .run(&data, &i64s(&[1, 4], &[0; 4]), &f32s(&[1, 4], &[0.0; 4]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let err = ScatterElements::new(0)
        .run(&data, &i64s(&[1, 2], &[0, 0]), &i64s(&[1, 2], &[0, 0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert_eq!(err.to_string(), "updates has dtype int64, which ScatterElements on float data does not accept (accepted: float)");
    let err = ScatterElements::new(2)
        .run(&data, &i64s(&[1, 2], &[0, 0]), &f32s(&[1, 2], &[0.0; 2]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAxis);
    let err = ScatterElements::new(0)
        .run(&data, &i64s(&[2], &[0, 0]), &f32s(&[2], &[0.0; 2]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RankMismatch);
    let err = ScatterElements::new(0)
        .run(&data, &f32s(&[1, 1], &[0.0]), &f32s(&[1, 1], &[0.0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
}

#[test]
fn empty_indices_return_data_unchanged() {
    let data = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = ScatterElements::new(1)
        .reduction(Reduction::Mul)
        .run(&data, &i64s(&[2, 0], &[]), &f32s(&[2, 0], &[]))
        .unwrap();
    assert_eq!(out, data);
    let empty = f32s(&[0, 3], &[]);
    let out = ScatterElements::new(0)
        .run(&empty, &i64s(&[0, 3], &[]), &f32s(&[0, 3], &[]))
        .unwrap();
    assert_eq!(out, empty);
}

// ---- profiles ----

#[test]
fn onnx_reductions_by_opset() {
    let data = f32s(&[2], &[1.0, 2.0]);
    let idx = i64s(&[1], &[0]);
    let upd = f32s(&[1], &[5.0]);
    let allowed = |opset: u32, r: Reduction| {
        ScatterElements::new(0)
            .reduction(r)
            .profile(onnx(opset))
            .run(&data, &idx, &upd)
            .is_ok()
    };
    for opset in [11, 13, 15] {
        assert!(allowed(opset, Reduction::None));
        for r in [
            Reduction::Add,
            Reduction::Mul,
            Reduction::Max,
            Reduction::Min,
        ] {
            assert!(!allowed(opset, r), "opset {opset} {r}");
        }
    }
    for opset in [16, 17] {
        for r in [Reduction::None, Reduction::Add, Reduction::Mul] {
            assert!(allowed(opset, r), "opset {opset} {r}");
        }
        assert!(!allowed(opset, Reduction::Max) && !allowed(opset, Reduction::Min));
    }
    for r in Reduction::ALL {
        assert!(allowed(18, r), "opset 18 {r}");
    }
    let err = ScatterElements::new(0)
        .reduction(Reduction::Max)
        .profile(onnx(16))
        .run(&data, &idx, &upd)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadReduction);
    assert_eq!(
        err.to_string(),
        "reduction max is not allowed by ONNX ScatterElements-16 (opset 16) (allowed: none, add, mul)"
    );
}

#[test]
fn onnx_bf16_from_13_and_index_types() {
    let data = Tensor::new(vec![1], vec![bf16::ONE]).unwrap();
    let idx = i64s(&[1], &[0]);
    assert_eq!(
        ScatterElements::new(0)
            .profile(onnx(11))
            .run(&data, &idx, &data)
            .unwrap_err()
            .kind(),
        ErrorKind::BadDType
    );
    assert!(ScatterElements::new(0)
        .profile(onnx(13))
        .run(&data, &idx, &data)
        .is_ok());
    let u16_idx = Tensor::new(vec![1], vec![0u16]).unwrap();
    assert_eq!(
        ScatterElements::new(0)
            .profile(onnx(18))
            .run(&data, &u16_idx, &data)
            .unwrap_err()
            .kind(),
        ErrorKind::BadDType
    );
    assert!(ScatterElements::new(0).run(&data, &u16_idx, &data).is_ok());
    assert_eq!(
        ScatterElements::new(0)
            .profile(Profile::MindSpore)
            .run(&data, &idx, &data)
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
}

// ---- property test against the serial spec §1 reference ----

#[derive(Debug, Clone)]
struct Case {
    data_shape: Vec<usize>,
    axis: usize,
    indices_shape: Vec<usize>,
    indices: Vec<i128>,
    seeds: Vec<i64>,
    update_seeds: Vec<i64>,
    dtype: DType,
    index_dtype: DType,
    reduction: Reduction,
}

fn case() -> impl Strategy<Value = Case> {
    elements_case_shapes()
        .prop_flat_map(|(data_shape, axis, indices_shape)| {
            let s = data_shape[axis] as i128;
            let n_idx: usize = indices_shape.iter().product();
            let n_data: usize = data_shape.iter().product();
            (
                Just((data_shape, axis, indices_shape)),
                // A narrow value range along a short axis: many duplicates.
                prop::collection::vec(-s.max(1)..s.max(1), n_idx),
                prop::collection::vec(-300i64..300, n_data),
                prop::collection::vec(-300i64..300, n_idx),
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(DType::INDEX_TYPES.to_vec()),
                prop::sample::select(Reduction::ALL.to_vec()),
            )
        })
        .prop_map(
            |(
                (data_shape, axis, indices_shape),
                mut indices,
                seeds,
                update_seeds,
                dtype,
                index_dtype,
                reduction,
            )| {
                fit_to_index_type(&mut indices, index_dtype, data_shape[axis]);
                Case {
                    data_shape,
                    axis,
                    indices_shape,
                    indices,
                    seeds,
                    update_seeds,
                    dtype,
                    index_dtype,
                    reduction,
                }
            },
        )
}

/// [`check_case_once`] on the small-call path and on the general kernels.
fn check_case<T: RefReduce>(case: &Case) -> Result<(), TestCaseError> {
    on_small_and_general_paths(|| check_case_once::<T>(case))
}

fn check_case_once<T: RefReduce>(case: &Case) -> Result<(), TestCaseError> {
    let data: Vec<T> = case.seeds.iter().map(|&s| T::from_seed(s)).collect();
    let updates: Vec<T> = case.update_seeds.iter().map(|&s| T::from_seed(s)).collect();
    let name = case.reduction.name();
    let defined = T::reduce(name, &T::from_seed(1), &T::from_seed(2)).is_some();
    let op = ScatterElements::new(case.axis as i64).reduction(case.reduction);
    let data_tensor = Tensor::new(case.data_shape.clone(), data.clone()).unwrap();
    let before = data_tensor.clone();
    let result = op.run(
        &data_tensor,
        &index_tensor(case.index_dtype, &case.indices_shape, &case.indices),
        &Tensor::new(case.indices_shape.clone(), updates.clone()).unwrap(),
    );
    // The caller's data is never written (seeds hold no NaN, so == is exact).
    prop_assert_eq!(&data_tensor, &before);
    if !defined {
        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::BadReduction);
        return Ok(());
    }
    let reference = reference_scatter_elements(
        &data,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        &updates,
        case.axis,
        |a, b| T::reduce(name, a, b).unwrap(),
    );
    let reference = reference.map(|expected| (case.data_shape.clone(), expected));
    check_against_reference(result, reference, T::same)
}

proptest! {
    #![proptest_config(proptest_config(2000))]

    #[test]
    fn scatter_elements_matches_serial_reference(case in case()) {
        for_dtype!(case.dtype, check_case(&case))?;
    }
}

/// Regression (found by the property test): an empty output along an empty
/// axis still checks its indices, which can only be out of range.
#[test]
fn indices_into_an_empty_axis_are_out_of_range() {
    let data = Tensor::new(vec![0, 3], Vec::<f32>::new()).unwrap();
    let indices = Tensor::new(vec![1, 3], vec![0i64, 0, 0]).unwrap();
    let updates = Tensor::new(vec![1, 3], vec![1.0f32; 3]).unwrap();
    let err = ScatterElements::new(0)
        .run(&data, &indices, &updates)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
}

/// Trailing size-1 dims after the axis (in data and indices alike) change
/// no flat position: the axis is walked as the last one. Against the
/// reference, with negative and repeated indices, none and add, on 1-3
/// threads (600 KiB of output, split across tasks), and a bad index named
/// where it is.
#[test]
fn an_axis_followed_only_by_size_1_dims_is_walked_as_the_last_axis() {
    let (outer, size, count) = (512usize, 300usize, 40usize);
    let data_shape = [outer, size, 1, 1];
    let shape = [outer, count, 1, 1];
    let values: Vec<f32> = (0..outer * size).map(|k| k as f32 * 0.25).collect();
    let data = Tensor::new(data_shape.to_vec(), values.clone()).unwrap();
    let raw: Vec<i128> = (0..outer * count)
        .map(|k| ((k * 7919) % (2 * size)) as i128 - size as i128)
        .collect();
    let upd: Vec<f32> = (0..outer * count).map(|k| (k % 97) as f32).collect();
    let updates = Tensor::new(shape.to_vec(), upd.clone()).unwrap();
    let indices = index_tensor(DType::I32, &shape, &raw);
    for (reduction, f) in [
        (
            Reduction::None,
            (|_: &f32, u: &f32| *u) as fn(&f32, &f32) -> f32,
        ),
        (Reduction::Add, |a: &f32, u: &f32| a + u),
    ] {
        let want =
            reference_scatter_elements(&values, &data_shape, &raw, &shape, &upd, 1, f).unwrap();
        for threads in [1, 2, 3] {
            let op = ScatterElements::new(1).reduction(reduction);
            let out = in_pool(threads, || op.run(&data, &indices, &updates).unwrap());
            assert_eq!(out.shape(), &data_shape);
            assert!(
                out.data::<f32>().unwrap() == &want[..],
                "{reduction:?}, {threads} threads"
            );
        }
    }
    let mut bad = raw.clone();
    bad[400 * count + 17] = size as i128;
    let indices = index_tensor(DType::I32, &shape, &bad);
    let run = || ScatterElements::new(1).run(&data, &indices, &updates);
    names_the_first_bad_index_on_any_pool(run, size as i128, &[400, 17, 0, 0]);
}

#[test]
fn small_last_axis_calls_walk_row_by_row_and_name_the_first_bad_index_as_the_general_path_does() {
    use gatherscatter::{Aggregate, GatherElements, ScatterReduce};
    let data = Tensor::new(vec![3, 4], (0..12).map(|v| v as f32).collect()).unwrap();
    let updates = Tensor::new(vec![3, 2], vec![10.0f32, 20.0, 30.0, 40.0, 50.0, 60.0]).unwrap();
    // Negative indices wrap within each row; the second row's -1 is its 3.
    let good = Tensor::new(vec![3, 2], vec![0i64, 3, -1, 1, 2, 2]).unwrap();
    // Flat position 3 (row 1, column 1) is the first bad one; 5 is bad too.
    let bad = Tensor::new(vec![3, 2], vec![0i64, 3, -1, 4, 2, -5]).unwrap();
    let calls = |indices: &Tensor| {
        [
            GatherElements::new(1).run(&data, indices),
            ScatterElements::new(1).run(&data, indices, &updates),
            ScatterElements::new(1)
                .reduction(Reduction::Add)
                .run(&data, indices, &updates),
            ScatterReduce::new(1, Aggregate::Mean).run(&data, indices, &updates),
        ]
    };
    let expected: [&[f32]; 4] = [
        &[0.0, 3.0, 7.0, 5.0, 10.0, 10.0],
        &[
            10.0, 1.0, 2.0, 20.0, 4.0, 40.0, 6.0, 30.0, 8.0, 9.0, 60.0, 11.0,
        ],
        &[
            10.0, 1.0, 2.0, 23.0, 4.0, 45.0, 6.0, 37.0, 8.0, 9.0, 120.0, 11.0,
        ],
        &[
            5.0, 1.0, 2.0, 11.5, 4.0, 22.5, 6.0, 18.5, 8.0, 9.0, 40.0, 11.0,
        ],
    ];
    on_small_and_general_paths(|| {
        for (got, want) in calls(&good).into_iter().zip(expected) {
            let out = got.unwrap();
            prop_assert_eq!(out.data::<f32>().unwrap(), want);
        }
        for got in calls(&bad) {
            let err = got.unwrap_err();
            prop_assert_eq!(err.kind(), ErrorKind::OutOfBounds);
            prop_assert!(err.to_string().contains("[1, 1]"), "{}", err);
        }
        Ok(())
    })
    .unwrap();
}
