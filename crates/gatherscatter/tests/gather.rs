//! Gather: the seed examples verbatim, every spec §2 error that applies, the
//! profiles, and a property test against the naive spec §1 reference.

mod common;

use common::*;
use gatherscatter::{bf16, DType, Error, ErrorKind, Gather, Profile, Tensor, TypedTensor};
use proptest::prelude::*;

fn f32_tensor(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), data.to_vec()).unwrap()
}

fn i64_tensor(shape: &[usize], data: &[i64]) -> Tensor {
    Tensor::new(shape.to_vec(), data.to_vec()).unwrap()
}

fn arange(n: usize) -> Vec<f32> {
    (0..n).map(|v| v as f32).collect()
}

// ---- seed 003: ONNX Gather 1 / 11 / 13 ----

#[test]
fn onnx_gather_summary_example_axis_0() {
    // Gather-1 "Example 1", repeated as the axis = 0 example of Gather-11 and -13.
    let data = f32_tensor(&[3, 2], &[1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
    let indices = i64_tensor(&[2, 2], &[0, 1, 1, 2]);
    for opset in [1, 11, 13] {
        let out = Gather::new(0)
            .profile(Profile::Onnx { opset })
            .run(&data, &indices)
            .unwrap();
        assert_eq!(out.shape(), &[2, 2, 2]);
        assert_eq!(
            out.data::<f32>().unwrap(),
            &[1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7]
        );
    }
}

#[test]
fn onnx_gather_summary_example_axis_1() {
    // Gather-13's axis = 1 example: output [[[1.0, 1.9]], [[2.3, 3.9]], [[4.5, 5.9]]].
    // Gather-1's "Example 2" prints the same six values nested as shape [1, 3, 2];
    // spec §4: the semantics are numpy `take` on every opset, whose shape is [3, 1, 2].
    let data = f32_tensor(&[3, 3], &[1.0, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9]);
    let indices = i64_tensor(&[1, 2], &[0, 2]);
    for opset in [1, 11, 13] {
        let out = Gather::new(1)
            .profile(Profile::Onnx { opset })
            .run(&data, &indices)
            .unwrap();
        assert_eq!(out.shape(), &[3, 1, 2]);
        assert_eq!(out.data::<f32>().unwrap(), &[1.0, 1.9, 2.3, 3.9, 4.5, 5.9]);
    }
}

#[test]
fn onnx_test_gather_0() {
    // data (5, 4, 3, 2), indices [0, 1, 3], axis 0: np.take keeps rows 0, 1 and 3.
    let data = f32_tensor(&[5, 4, 3, 2], &arange(120));
    let out = Gather::new(0)
        .profile(Profile::Onnx { opset: 13 })
        .run(&data, &i64_tensor(&[3], &[0, 1, 3]))
        .unwrap();
    assert_eq!(out.shape(), &[3, 4, 3, 2]);
    let expected: Vec<f32> = [0, 1, 3]
        .iter()
        .flat_map(|&row| (row * 24..row * 24 + 24).map(|v| v as f32))
        .collect();
    assert_eq!(out.data::<f32>().unwrap(), &expected[..]);
}

#[test]
fn onnx_test_gather_1() {
    // data (5, 4, 3, 2), indices [0, 1, 3], axis 1: output (5, 3, 3, 2).
    let data = f32_tensor(&[5, 4, 3, 2], &arange(120));
    let out = Gather::new(1)
        .profile(Profile::Onnx { opset: 13 })
        .run(&data, &i64_tensor(&[3], &[0, 1, 3]))
        .unwrap();
    assert_eq!(out.shape(), &[5, 3, 3, 2]);
    let mut expected = Vec::new();
    for a in 0..5 {
        for j in [0, 1, 3] {
            expected.extend((a * 24 + j * 6..a * 24 + j * 6 + 6).map(|v| v as f32));
        }
    }
    assert_eq!(out.data::<f32>().unwrap(), &expected[..]);
}

#[test]
fn onnx_test_gather_2d_indices() {
    // data (3, 3), indices [[0, 2]], axis 1: output (3, 1, 2).
    let data = f32_tensor(&[3, 3], &arange(9));
    let out = Gather::new(1)
        .profile(Profile::Onnx { opset: 13 })
        .run(&data, &i64_tensor(&[1, 2], &[0, 2]))
        .unwrap();
    assert_eq!(out.shape(), &[3, 1, 2]);
    assert_eq!(out.data::<f32>().unwrap(), &[0.0, 2.0, 3.0, 5.0, 6.0, 8.0]);
}

#[test]
fn onnx_test_gather_negative_indices() {
    // data arange(10), indices [0, -9, -10], axis 0: "# [0. 1. 0.]".
    let data = f32_tensor(&[10], &arange(10));
    for opset in [1, 11, 13] {
        let out = Gather::new(0)
            .profile(Profile::Onnx { opset })
            .run(&data, &i64_tensor(&[3], &[0, -9, -10]))
            .unwrap();
        assert_eq!(out.data::<f32>().unwrap(), &[0.0, 1.0, 0.0]);
    }
}

// ---- seed 002: MindSpore Tensor.gather(input_indices, axis, batch_dims) ----

#[test]
fn mindspore_output_shape_rule() {
    // shape = params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]
    // (params shape, indices shape, axis, batch_dims, expected output shape)
    type ShapeCase<'a> = (&'a [usize], &'a [usize], i64, usize, &'a [usize]);
    let cases: &[ShapeCase] = &[
        (&[3, 4], &[2], 0, 0, &[2, 4]),
        (&[3, 4], &[2, 5], 1, 0, &[3, 2, 5]),
        (&[2, 3, 4, 5], &[2, 3, 6, 7], 2, 2, &[2, 3, 6, 7, 5]),
        (&[2, 3, 4], &[2, 6], 1, 1, &[2, 6, 4]),
        (&[2, 3, 4], &[2], 2, 1, &[2, 3]),
    ];
    for &(params_shape, indices_shape, axis, batch_dims, expected) in cases {
        let n: usize = params_shape.iter().product();
        let params = f32_tensor(params_shape, &arange(n));
        let m: usize = indices_shape.iter().product();
        let indices = Tensor::new(indices_shape.to_vec(), vec![0i32; m]).unwrap();
        let out = Gather::new(axis)
            .batch_dims(batch_dims)
            .profile(Profile::MindSpore)
            .run(&params, &indices)
            .unwrap();
        assert_eq!(
            out.shape(),
            expected,
            "params {params_shape:?} indices {indices_shape:?}"
        );
    }
}

#[test]
fn batch_dims_gathers_within_each_batch() {
    // params [[1, 2, 3], [4, 5, 6]], indices [[2, 0], [1, 1]], axis 1, batch_dims 1
    // -> batch 0 takes [3, 1], batch 1 takes [5, 5] (tf.gather semantics).
    let params = Tensor::new(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
    let indices = Tensor::new(vec![2, 2], vec![2i64, 0, 1, 1]).unwrap();
    let out = Gather::new(1).batch_dims(1).run(&params, &indices).unwrap();
    assert_eq!(out.shape(), &[2, 2]);
    assert_eq!(out.data::<i32>().unwrap(), &[3, 1, 5, 5]);
}

// ---- typed API and conversions ----

#[test]
fn typed_and_dynamic_apis_agree() {
    let data = TypedTensor::new(
        vec![2, 3],
        vec!["a", "b", "c", "d", "e", "f"]
            .into_iter()
            .map(String::from)
            .collect(),
    )
    .unwrap();
    let indices = TypedTensor::new(vec![2], vec![2u16, 0]).unwrap();
    let typed = Gather::new(-1)
        .run_typed(data.view(), indices.view())
        .unwrap();
    let dynamic = Gather::new(-1)
        .run(&Tensor::from(data.clone()), &Tensor::from(indices.clone()))
        .unwrap();
    assert_eq!(Tensor::from(typed.clone()), dynamic);
    assert_eq!(typed.data(), &["c", "a", "f", "d"]);
}

#[test]
fn ndarray_round_trip() {
    let array = ndarray::Array::from_shape_vec((2, 3), (0..6).collect::<Vec<i64>>())
        .unwrap()
        .into_dyn();
    let transposed = array.t().to_owned(); // a non-standard layout array copied
    let t = Tensor::from(array.view().permuted_axes(vec![1, 0]));
    assert_eq!(t.shape(), &[3, 2]);
    assert_eq!(t.data::<i64>().unwrap(), &[0, 3, 1, 4, 2, 5]);
    let back = t.clone().into_array::<i64>().unwrap();
    assert_eq!(back, transposed);
    let out = gatherscatter::gather(&Tensor::from(array), &Tensor::scalar(1u8), 0).unwrap();
    assert_eq!(
        out.into_array::<i64>().unwrap(),
        ndarray::arr1(&[3i64, 4, 5]).into_dyn()
    );
}

// ---- spec §2 errors ----

#[test]
fn out_of_range_error_names_value_position_axis_and_range() {
    let data = f32_tensor(&[2, 5], &arange(10));
    let indices = i64_tensor(&[2, 3], &[0, 1, 2, 3, 4, 7]);
    let err = Gather::new(1).run(&data, &indices).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    assert_eq!(
        err.to_string(),
        "index 7 at indices[1, 2] is out of range [-5, 4] for axis 1 of size 5"
    );
    assert_eq!(
        err,
        Error::IndexOutOfRange {
            value: 7,
            position: vec![1, 2],
            axis: 1,
            axis_size: 5,
            negative_allowed: true
        }
    );
}

#[test]
fn out_of_range_below_minus_s_is_an_error() {
    let data = f32_tensor(&[10], &arange(10));
    let err = gatherscatter::gather(&data, &i64_tensor(&[3], &[0, -9, -11]), 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "index -11 at indices[2] is out of range [-10, 9] for axis 0 of size 10"
    );
}

#[test]
fn extreme_index_values_are_out_of_range() {
    let data = f32_tensor(&[4], &arange(4));
    let cases = [
        index_tensor(DType::I64, &[1], &[i64::MIN as i128]),
        index_tensor(DType::I64, &[1], &[i64::MAX as i128]),
        index_tensor(DType::U64, &[1], &[u64::MAX as i128]),
        index_tensor(DType::U64, &[1], &[1i128 << 63]),
        index_tensor(DType::I8, &[1], &[-5]),
        index_tensor(DType::U8, &[1], &[4]),
    ];
    for indices in cases {
        let err = gatherscatter::gather(&data, &indices, 0).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OutOfBounds, "{indices:?}");
    }
    let err = gatherscatter::gather(
        &data,
        &index_tensor(DType::U64, &[1], &[u64::MAX as i128]),
        0,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "index 18446744073709551615 at indices[0] is out of range [-4, 3] for axis 0 of size 4"
    );
}

#[test]
fn scalar_index_position_prints_as_empty_brackets() {
    let data = f32_tensor(&[3], &arange(3));
    let err = gatherscatter::gather(&data, &Tensor::scalar(3i32), 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "index 3 at indices[] is out of range [-3, 2] for axis 0 of size 3"
    );
}

#[test]
fn an_empty_axis_rejects_every_index_but_accepts_empty_indices() {
    let data = Tensor::new(vec![2, 0], Vec::<f32>::new()).unwrap();
    let err = gatherscatter::gather(&data, &i64_tensor(&[1], &[0]), 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "index 0 at indices[0] is out of range: axis 1 has size 0, so no index is valid"
    );
    let out = gatherscatter::gather(&data, &i64_tensor(&[0], &[]), 1).unwrap();
    assert_eq!(out.shape(), &[2, 0]);
}

#[test]
fn bad_axis_names_axis_and_rank() {
    let data = f32_tensor(&[2, 3], &arange(6));
    for axis in [2, -3, i64::MAX, i64::MIN] {
        let err = gatherscatter::gather(&data, &i64_tensor(&[1], &[0]), axis).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadAxis);
        assert_eq!(
            err.to_string(),
            format!("axis {axis} is out of range [-2, 1] for data of rank 2")
        );
    }
}

#[test]
fn rank_0_data_is_an_error() {
    let err =
        gatherscatter::gather(&Tensor::scalar(1.0f32), &i64_tensor(&[1], &[0]), 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RankMismatch);
    assert_eq!(
        err.to_string(),
        "data has rank 0, but rank >= 1 is required"
    );
}

#[test]
fn non_integer_indices_are_a_dtype_error() {
    let data = f32_tensor(&[3], &arange(3));
    let err = gatherscatter::gather(&data, &f32_tensor(&[1], &[0.0]), 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert!(
        err.to_string()
            .starts_with("indices has dtype float, which Gather does not accept"),
        "{err}"
    );
}

#[test]
fn batch_dims_errors_name_the_numbers() {
    let data = f32_tensor(&[2, 3, 4], &arange(24));
    let err = Gather::new(2)
        .batch_dims(2)
        .run(&data, &i64_tensor(&[2], &[0, 0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
    assert_eq!(
        err.to_string(),
        "batch_dims 2 exceeds the rank 1 of indices"
    );

    let err = Gather::new(1)
        .batch_dims(2)
        .run(&data, &i64_tensor(&[2, 3], &[0; 6]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "batch_dims 2 exceeds axis 1: the gathered axis cannot be a batch dimension"
    );

    let err = Gather::new(1)
        .batch_dims(1)
        .run(&data, &i64_tensor(&[3, 1], &[0; 3]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert_eq!(
        err.to_string(),
        "batch dimension 0 differs: data has 2 (shape [2, 3, 4]), indices have 3 (shape [3, 1])"
    );
}

#[test]
fn output_element_count_overflow_is_an_error() {
    // Empty data (axis size 0) but an output shape whose product overflows.
    let big = 1usize << 40;
    let data = Tensor::new(vec![big, 0, big], Vec::<f32>::new()).unwrap();
    let err = Gather::new(1)
        .run(&data, &i64_tensor(&[1], &[0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SizeOverflow);
    assert_eq!(
        err.to_string(),
        format!("the element count of Gather output with shape [{big}, 1, {big}] overflows usize")
    );
}

#[test]
fn tensor_shape_and_length_must_agree() {
    let err = Tensor::new(vec![2, 3], vec![0.0f32; 5]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert_eq!(
        err.to_string(),
        "tensor has 5 elements, but its shape [2, 3] needs 6"
    );
    let err = Tensor::new(vec![usize::MAX, 2], vec![0.0f32; 5]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SizeOverflow);
}

// ---- profiles ----

#[test]
fn onnx_profile_bf16_only_from_opset_13() {
    let data = Tensor::new(vec![2], vec![bf16::from_f32(1.0), bf16::from_f32(2.0)]).unwrap();
    let indices = i64_tensor(&[1], &[1]);
    for opset in [1, 11, 12] {
        let err = Gather::new(0)
            .profile(Profile::Onnx { opset })
            .run(&data, &indices)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadDType);
        assert!(err.to_string().contains("bfloat16"), "{err}");
        assert!(
            err.to_string().contains(&format!("(opset {opset})")),
            "{err}"
        );
    }
    let out = Gather::new(0)
        .profile(Profile::Onnx { opset: 13 })
        .run(&data, &indices)
        .unwrap();
    assert_eq!(out.data::<bf16>().unwrap(), &[bf16::from_f32(2.0)]);
}

#[test]
fn onnx_profile_accepts_only_int32_and_int64_indices() {
    let data = f32_tensor(&[3], &arange(3));
    for dtype in DType::INDEX_TYPES {
        let result = Gather::new(0)
            .profile(Profile::Onnx { opset: 13 })
            .run(&data, &index_tensor(dtype, &[1], &[1]));
        if matches!(dtype, DType::I32 | DType::I64) {
            assert!(result.is_ok(), "{dtype}");
        } else {
            let err = result.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::BadDType, "{dtype}");
            assert_eq!(
                err.to_string(),
                format!("indices has dtype {dtype}, which ONNX Gather-13 (opset 13) does not accept (accepted: int32, int64)")
            );
        }
        // The permissive default accepts every integer type.
        assert!(Gather::new(0)
            .run(&data, &index_tensor(dtype, &[1], &[1]))
            .is_ok());
    }
}

#[test]
fn onnx_profile_refuses_batch_dims_and_opset_0() {
    let data = f32_tensor(&[2, 2], &arange(4));
    let indices = i64_tensor(&[2, 1], &[0, 1]);
    let err = Gather::new(1)
        .batch_dims(1)
        .profile(Profile::Onnx { opset: 13 })
        .run(&data, &indices)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
    assert!(Gather::new(1).batch_dims(1).run(&data, &indices).is_ok());
    let err = Gather::new(0)
        .profile(Profile::Onnx { opset: 0 })
        .run(&data, &indices)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert_eq!(
        err.to_string(),
        "ONNX Gather does not exist at opset 0 (first defined at opset 1)"
    );
}

#[test]
fn mindspore_profile_refuses_negative_indices() {
    let data = f32_tensor(&[5], &arange(5));
    let indices = Tensor::new(vec![2], vec![0i32, -1]).unwrap();
    let err = Gather::new(0)
        .profile(Profile::MindSpore)
        .run(&data, &indices)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    assert_eq!(
        err.to_string(),
        "index -1 at indices[1] is out of range [0, 4] for axis 0 of size 5 (negative indices are not allowed by the active profile)"
    );
    let ok = Tensor::new(vec![2], vec![0i32, 4]).unwrap();
    assert!(Gather::new(0)
        .profile(Profile::MindSpore)
        .run(&data, &ok)
        .is_ok());
}

#[test]
fn mindspore_profile_index_and_data_types() {
    let data = f32_tensor(&[5], &arange(5));
    let err = Gather::new(0)
        .profile(Profile::MindSpore)
        .run(&data, &index_tensor(DType::U32, &[1], &[1]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    let strings = Tensor::from_vec(vec![String::from("x")]);
    let err = Gather::new(0)
        .profile(Profile::MindSpore)
        .run(&strings, &index_tensor(DType::I32, &[1], &[0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
}

#[test]
fn mindspore_profile_axis_must_not_be_below_batch_dims() {
    let data = f32_tensor(&[2, 3], &arange(6));
    let indices = Tensor::new(vec![2, 1], vec![0i32, 0]).unwrap();
    let err = Gather::new(0)
        .batch_dims(1)
        .profile(Profile::MindSpore)
        .run(&data, &indices)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
    assert_eq!(
        err.to_string(),
        "axis 0 must be >= batch_dims 1 in MindSpore Tensor.gather(input_indices, axis, batch_dims)"
    );
}

#[test]
fn directml_profile_does_not_cover_gather() {
    let data = f32_tensor(&[3], &arange(3));
    let err = Gather::new(0)
        .profile("directml:4.1".parse().unwrap())
        .run(&data, &i64_tensor(&[1], &[0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
}

// ---- property test against the spec §1 reference ----

#[derive(Debug, Clone)]
struct Case {
    data_shape: Vec<usize>,
    axis: i64,
    batch_dims: usize,
    indices_shape: Vec<usize>,
    indices: Vec<i128>,
    seeds: Vec<i64>,
    dtype: DType,
    index_dtype: DType,
}

fn case() -> impl Strategy<Value = Case> {
    (shape(1..=6), any::<prop::sample::Index>(), any::<bool>())
        .prop_flat_map(|(data_shape, axis_pick, negative_axis)| {
            let r = data_shape.len();
            let axis = axis_pick.index(r);
            let max_b = axis.min(2);
            (
                Just(data_shape),
                Just(axis),
                Just(negative_axis),
                0..=max_b,
                shape(0..=3),
            )
        })
        .prop_flat_map(|(data_shape, axis, negative_axis, batch_dims, tail)| {
            let mut indices_shape = data_shape[..batch_dims].to_vec();
            indices_shape.extend(tail);
            let n_idx: usize = indices_shape.iter().product();
            let n_data: usize = data_shape.iter().product();
            let s = data_shape[axis] as i128;
            let axis_attr = if negative_axis {
                axis as i64 - data_shape.len() as i64
            } else {
                axis as i64
            };
            (
                Just(data_shape),
                Just(axis_attr),
                Just(batch_dims),
                Just(indices_shape),
                prop::collection::vec(-s.max(1)..s.max(1), n_idx),
                prop::collection::vec(-1000i64..1000, n_data),
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(DType::INDEX_TYPES.to_vec()),
            )
        })
        .prop_map(
            |(
                data_shape,
                axis,
                batch_dims,
                indices_shape,
                mut indices,
                seeds,
                dtype,
                index_dtype,
            )| {
                let s = data_shape[(axis.rem_euclid(data_shape.len() as i64)) as usize];
                fit_to_index_type(&mut indices, index_dtype, s);
                Case {
                    data_shape,
                    axis,
                    batch_dims,
                    indices_shape,
                    indices,
                    seeds,
                    dtype,
                    index_dtype,
                }
            },
        )
}

/// [`check_case_once`] on the small-call path and on the general kernels.
fn check_case<T: FromSeed>(case: &Case) -> Result<(), TestCaseError> {
    on_small_and_general_paths(|| check_case_once::<T>(case))
}

/// The fresh output and a caller's buffer both against the reference.
fn check_case_once<T: FromSeed>(case: &Case) -> Result<(), TestCaseError> {
    let data: Vec<T> = case.seeds.iter().map(|&s| T::from_seed(s)).collect();
    let axis = case.axis.rem_euclid(case.data_shape.len() as i64) as usize;
    let reference = reference_gather(
        &data,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        axis,
        case.batch_dims,
    );

    let indices = index_tensor(case.index_dtype, &case.indices_shape, &case.indices);
    let data_tensor = Tensor::new(case.data_shape.clone(), data).unwrap();
    let op = Gather::new(case.axis).batch_dims(case.batch_dims);
    if let Some((shape, expected)) = &reference {
        let mut out = Tensor::new(shape.clone(), vec![T::from_seed(0); expected.len()]).unwrap();
        op.run_into(&data_tensor, &indices, &mut out)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = out.data::<T>().unwrap();
        prop_assert!(
            got.iter().zip(expected).all(|(a, b)| T::eq(a, b)),
            "into a buffer: {got:?} against {expected:?}"
        );
    }
    let result = op.run(&data_tensor, &indices);
    check_against_reference(result, reference, T::eq)
}

proptest! {
    #![proptest_config(proptest_config(1500))]

    #[test]
    fn gather_matches_reference(case in case()) {
        for_dtype!(case.dtype, check_case(&case))?;
    }

    #[test]
    fn one_bad_index_anywhere_is_reported_at_its_position(case in case(), pick in any::<prop::sample::Index>(), above in any::<bool>()) {
        prop_assume!(!case.indices.is_empty());
        let axis = case.axis.rem_euclid(case.data_shape.len() as i64) as usize;
        let s = case.data_shape[axis] as i128;
        let mut indices = case.indices.clone();
        let at = pick.index(indices.len());
        let bad = if above || !case.index_dtype.is_signed_integer() { s } else { -s - 1 };
        prop_assume!(bad <= index_type_max(case.index_dtype) && bad >= index_type_min(case.index_dtype));
        indices[at] = bad;
        let data = Tensor::new(case.data_shape.clone(), case.seeds.clone()).unwrap();
        let err = Gather::new(case.axis)
            .batch_dims(case.batch_dims)
            .run(&data, &index_tensor(case.index_dtype, &case.indices_shape, &indices))
            .unwrap_err();
        // The first bad value in row-major order is the one reported.
        let first = indices.iter().position(|&v| idx(v, s as usize).is_none()).unwrap();
        let mut expected_position = vec![0; case.indices_shape.len()];
        let mut rest = first;
        for d in (0..case.indices_shape.len()).rev() {
            expected_position[d] = rest % case.indices_shape[d];
            rest /= case.indices_shape[d];
        }
        prop_assert_eq!(err, Error::IndexOutOfRange {
            value: indices[first],
            position: expected_position,
            axis,
            axis_size: s as usize,
            negative_allowed: true,
        });
    }
}
