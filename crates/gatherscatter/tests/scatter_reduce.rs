//! ScatterReduce (PyTorch's `scatter_reduce`): PyTorch's documented
//! examples verbatim, the `include_self` and `mean` rules, every error, and
//! a property test against a reference written from the formula.

mod common;

use common::*;
use gatherscatter::{
    Aggregate, Complex32, DType, ErrorKind, Profile, ScatterReduce, Tensor, TensorView,
};
use proptest::prelude::*;

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec())
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec())
}

fn run(
    reduce: Aggregate,
    include_self: bool,
    data: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
) -> Tensor {
    ScatterReduce::new(0, reduce)
        .include_self(include_self)
        .run(data, indices, updates)
        .unwrap()
}

// ---- the examples of torch.Tensor.scatter_reduce's documentation ----

#[test]
fn pytorch_sum_example_with_and_without_self() {
    let src = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let index = i64s(&[0, 1, 0, 1, 2, 1]);
    let input = f32s(&[1.0, 2.0, 3.0, 4.0]);
    let with = run(Aggregate::Sum, true, &input, &index, &src);
    assert_eq!(with.data::<f32>().unwrap(), &[5.0, 14.0, 8.0, 4.0]);
    let without = run(Aggregate::Sum, false, &input, &index, &src);
    assert_eq!(without.data::<f32>().unwrap(), &[4.0, 12.0, 5.0, 4.0]);
}

#[test]
fn pytorch_amax_example_with_and_without_self() {
    let src = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let index = i64s(&[0, 1, 0, 1, 2, 1]);
    let input = f32s(&[5.0, 4.0, 3.0, 2.0]);
    let with = run(Aggregate::Amax, true, &input, &index, &src);
    assert_eq!(with.data::<f32>().unwrap(), &[5.0, 6.0, 5.0, 2.0]);
    let without = run(Aggregate::Amax, false, &input, &index, &src);
    assert_eq!(without.data::<f32>().unwrap(), &[3.0, 6.0, 5.0, 2.0]);
}

// ---- mean ----

#[test]
fn mean_counts_self_only_when_included() {
    let data = f32s(&[1.0, 2.0, 3.0, 4.0]);
    let index = i64s(&[0, 1, 0, 1, 2, 1]);
    let src = f32s(&[2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let with = run(Aggregate::Mean, true, &data, &index, &src);
    assert_eq!(
        with.data::<f32>().unwrap(),
        &[7.0 / 3.0, 17.0 / 4.0, 9.0 / 2.0, 4.0]
    );
    let without = run(Aggregate::Mean, false, &data, &index, &src);
    assert_eq!(without.data::<f32>().unwrap(), &[3.0, 5.0, 6.0, 4.0]);
}

#[test]
fn integer_mean_rounds_down_for_negative_sums() {
    let data = Tensor::from_vec(vec![-7i32, 5, 9]);
    let index = i64s(&[0, 1]);
    let src = Tensor::from_vec(vec![0i32, -2]);
    let out = run(Aggregate::Mean, true, &data, &index, &src);
    // (-7 + 0) / 2 = -3.5 -> -4; (5 - 2) / 2 = 1.5 -> 1; 9 untouched.
    assert_eq!(out.data::<i32>().unwrap(), &[-4, 1, 9]);
}

#[test]
fn integer_mean_divides_by_the_exact_count_even_past_the_dtype_range() {
    // 200 contributions of 1 into an i8 with self = 0: the sum wraps (as
    // every integer sum here), the count does not: 200 wraps to -56 in i8,
    // and 201 (with self) to -55. PyTorch counts in the data's dtype.
    let data = Tensor::from_vec(vec![0i8]);
    let index = Tensor::from_vec(vec![0i64; 200]);
    let src = Tensor::from_vec(vec![1i8; 200]);
    let out = run(Aggregate::Mean, false, &data, &index, &src);
    assert_eq!(out.data::<i8>().unwrap(), &[(-56i32).div_euclid(200) as i8]);
}

#[test]
fn complex_mean_divides_both_parts() {
    let data = Tensor::from_vec(vec![Complex32::new(1.0, 2.0)]);
    let index = i64s(&[0, 0, 0]);
    let src = Tensor::from_vec(vec![Complex32::new(2.0, -2.0); 3]);
    let out = run(Aggregate::Mean, true, &data, &index, &src);
    assert_eq!(
        out.data::<Complex32>().unwrap(),
        &[Complex32::new(7.0 / 4.0, -1.0)]
    );
}

// ---- include_self = false ----

#[test]
fn without_self_a_sum_of_negative_zeros_stays_negative_zero() {
    let data = f32s(&[5.0, 5.0]);
    let out = run(
        Aggregate::Sum,
        false,
        &data,
        &i64s(&[0, 0]),
        &f32s(&[-0.0, -0.0]),
    );
    let values = out.data::<f32>().unwrap();
    assert!(values[0] == 0.0 && values[0].is_sign_negative());
    assert_eq!(values[1], 5.0);
}

#[test]
fn without_self_untouched_targets_keep_data_under_every_aggregate() {
    let data = Tensor::from_vec(vec![3i64, 4, 5]);
    for reduce in Aggregate::ALL {
        let out = run(reduce, false, &data, &i64s(&[1]), &i64s(&[10]));
        assert_eq!(out.data::<i64>().unwrap(), &[3, 10, 5], "{reduce}");
    }
}

#[test]
fn strings_concatenate_and_compare_by_bytes() {
    let s = |v: &[&str]| Tensor::from_vec(v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
    let data = s(&["a", "m"]);
    let index = i64s(&[0, 1, 0]);
    let src = s(&["b", "z", "c"]);
    let sum = run(Aggregate::Sum, true, &data, &index, &src);
    assert_eq!(sum.data::<String>().unwrap(), &["abc", "mz"]);
    let amin = run(Aggregate::Amin, false, &data, &index, &src);
    assert_eq!(amin.data::<String>().unwrap(), &["b", "z"]);
}

// ---- errors ----

#[test]
fn aggregates_a_dtype_does_not_define_are_refused_naming_why() {
    let cases: [(Tensor, Aggregate, &str); 4] = [
        (
            Tensor::from_vec(vec![true]),
            Aggregate::Mean,
            "booleans have no mean",
        ),
        (
            Tensor::from_vec(vec![String::new()]),
            Aggregate::Mean,
            "strings have no mean",
        ),
        (
            Tensor::from_vec(vec![String::new()]),
            Aggregate::Prod,
            "strings cannot be multiplied",
        ),
        (
            Tensor::from_vec(vec![Complex32::new(0.0, 0.0)]),
            Aggregate::Amax,
            "complex numbers have no order",
        ),
    ];
    for (data, reduce, why) in cases {
        let err = ScatterReduce::new(0, reduce)
            .run(&data, &i64s(&[0]), &data)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadReduction);
        assert!(err.to_string().contains(why), "{err}");
    }
}

#[test]
fn an_out_of_range_index_is_named_and_no_output_is_produced() {
    let data = f32s(&[0.0; 4]);
    let err = ScatterReduce::new(0, Aggregate::Mean)
        .run(&data, &i64s(&[1, 3, 4, 0]), &f32s(&[1.0; 4]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    assert!(err.to_string().contains("4"), "{err}");
    let err = ScatterReduce::new(0, Aggregate::Sum)
        .run(&data, &i64s(&[-5]), &f32s(&[1.0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
}

#[test]
fn negative_indices_count_from_the_end() {
    let out = run(
        Aggregate::Sum,
        true,
        &f32s(&[0.0; 3]),
        &i64s(&[-1, 2, -3]),
        &f32s(&[1.0, 2.0, 4.0]),
    );
    assert_eq!(out.data::<f32>().unwrap(), &[4.0, 0.0, 3.0]);
}

#[test]
fn shape_dtype_axis_and_profile_errors_are_refused() {
    let data = f32s(&[0.0; 4]);
    let op = ScatterReduce::new(0, Aggregate::Sum);
    let shape = op.run(&data, &i64s(&[0, 1]), &f32s(&[1.0])).unwrap_err();
    assert_eq!(shape.kind(), ErrorKind::ShapeMismatch);
    let dtype = op.run(&data, &i64s(&[0]), &i64s(&[1])).unwrap_err();
    assert_eq!(dtype.kind(), ErrorKind::BadDType);
    let float_index = op.run(&data, &f32s(&[0.0]), &f32s(&[1.0])).unwrap_err();
    assert_eq!(float_index.kind(), ErrorKind::BadDType);
    let axis = ScatterReduce::new(1, Aggregate::Sum)
        .run(&data, &i64s(&[0]), &f32s(&[1.0]))
        .unwrap_err();
    assert_eq!(axis.kind(), ErrorKind::BadAxis);
    let profile = op
        .profile(Profile::Onnx { opset: 18 })
        .run(&data, &i64s(&[0]), &f32s(&[1.0]))
        .unwrap_err();
    assert_eq!(profile.kind(), ErrorKind::Unsupported);
    let scalar = Tensor::new(vec![], vec![1.0f32]).unwrap();
    assert!(op.run(&scalar, &i64s(&[0]), &f32s(&[1.0])).is_err());
}

#[test]
fn names_parse_with_pytorch_and_pytorch_scatter_spellings() {
    for (name, aggregate) in [
        ("sum", Aggregate::Sum),
        ("add", Aggregate::Sum),
        ("prod", Aggregate::Prod),
        ("mul", Aggregate::Prod),
        ("mean", Aggregate::Mean),
        ("amax", Aggregate::Amax),
        ("max", Aggregate::Amax),
        ("amin", Aggregate::Amin),
        ("min", Aggregate::Amin),
    ] {
        assert_eq!(name.parse::<Aggregate>().unwrap(), aggregate);
    }
    let err = "median".parse::<Aggregate>().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadReduction);
}

#[test]
fn run_into_writes_the_result_into_a_callers_buffer() {
    let data = f32s(&[1.0, 2.0, 3.0, 4.0]);
    let index = i64s(&[0, 1, 0, 1, 2, 1]);
    let src = f32s(&[2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let mut out = f32s(&[9.0; 4]);
    ScatterReduce::new(0, Aggregate::Amin)
        .run_into(&data, &index, &src, &mut out)
        .unwrap();
    assert_eq!(out.data::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    let mut wrong = f32s(&[0.0; 3]);
    let err = ScatterReduce::new(0, Aggregate::Sum)
        .run_into(&data, &index, &src, &mut wrong)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
}

// ---- property test against the formula ----

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
    reduce: Aggregate,
    include_self: bool,
}

fn case() -> impl Strategy<Value = Case> {
    elements_case_shapes()
        .prop_flat_map(|(data_shape, axis, indices_shape)| {
            let s = data_shape[axis] as i128;
            let n_idx: usize = indices_shape.iter().product();
            let n_data: usize = data_shape.iter().product();
            (
                Just((data_shape, axis, indices_shape)),
                // A narrow range, one past each end now and then: many
                // duplicates, and out-of-range indices.
                prop::collection::vec(-s - 1..s + 1, n_idx),
                prop::collection::vec(-300i64..300, n_data),
                prop::collection::vec(-300i64..300, n_idx),
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(DType::INDEX_TYPES.to_vec()),
                prop::sample::select(Aggregate::ALL.to_vec()),
                any::<bool>(),
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
                reduce,
                include_self,
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
                    reduce,
                    include_self,
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
    let data_tensor = Tensor::new(case.data_shape.clone(), data.clone()).unwrap();
    let before = data_tensor.clone();
    let result = ScatterReduce::new(case.axis as i64, case.reduce)
        .include_self(case.include_self)
        .run(
            &data_tensor,
            &index_tensor(case.index_dtype, &case.indices_shape, &case.indices),
            &Tensor::new(case.indices_shape.clone(), updates.clone()).unwrap(),
        );
    prop_assert_eq!(&data_tensor, &before);
    if case.reduce.check_dtype(T::DTYPE).is_err() {
        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::BadReduction);
        return Ok(());
    }
    let reference = reference_scatter_reduce(
        &data,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        &updates,
        case.axis,
        aggregate_step(case.reduce),
        case.reduce == Aggregate::Mean,
        case.include_self,
    );
    let expected = match reference {
        None => None,
        Some(Some(values)) => Some((case.data_shape.clone(), values)),
        Some(None) => return Err(TestCaseError::fail("reference lacks the aggregate")),
    };
    check_against_reference(result, expected, T::same)
}

proptest! {
    #![proptest_config(proptest_config(2000))]

    #[test]
    fn scatter_reduce_matches_the_formula(case in case()) {
        for_dtype!(case.dtype, check_case(&case))?;
    }
}

#[test]
fn the_dynamic_and_typed_entry_points_agree() {
    let data = gatherscatter::TypedTensor::new(vec![3], vec![1u32, 2, 3]).unwrap();
    let index = gatherscatter::TypedTensor::new(vec![4], vec![2u16, 0, 2, 2]).unwrap();
    let src = gatherscatter::TypedTensor::new(vec![4], vec![7u32, 1, 9, 8]).unwrap();
    let op = ScatterReduce::new(-1, Aggregate::Mean).include_self(false);
    let typed = op.run_typed(data.view(), index.view(), src.view()).unwrap();
    let dynamic = op
        .run(
            TensorView::from(data.view()),
            TensorView::from(index.view()),
            TensorView::from(src.view()),
        )
        .unwrap();
    assert_eq!(typed.data(), &[1, 2, 8]);
    assert_eq!(dynamic.data::<u32>().unwrap(), typed.data());
}

/// Counts are kept in 16 bits beside each target and spill over: 140,000
/// values into one target (two overflows) still divide by the exact count.
#[test]
fn a_mean_over_more_values_than_sixteen_bits_count_is_exact() {
    let n = 140_000;
    let data = Tensor::from_vec(vec![n as i64 + 1, 7]);
    let index = Tensor::from_vec(vec![0u8; n]);
    let src = Tensor::from_vec((0..n as i64).collect::<Vec<_>>());
    let sum: i64 = (0..n as i64).sum();
    let without = run(Aggregate::Mean, false, &data, &index, &src);
    assert_eq!(
        without.data::<i64>().unwrap(),
        &[sum.div_euclid(n as i64), 7]
    );
    let with = run(Aggregate::Mean, true, &data, &index, &src);
    let with_self = (sum + n as i64 + 1).div_euclid(n as i64 + 1);
    assert_eq!(with.data::<i64>().unwrap(), &[with_self, 7]);
}
