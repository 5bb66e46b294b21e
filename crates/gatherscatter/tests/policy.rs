//! Index policies (numpy's and JAX's `mode=`): numpy's examples, the rule
//! for negatives in each mode, which operator takes which mode, and
//! property tests against formulas written per mode.

mod common;

use common::*;
use gatherscatter::{
    Aggregate, DType, ErrorKind, Gather, GatherElements, GatherND, IndexPolicy, Op, Profile,
    Reduction, ScatterElements, ScatterND, ScatterReduce, Tensor, TensorView,
};
use proptest::prelude::*;

fn run(
    policy: IndexPolicy,
    op: impl Into<Op>,
    inputs: &[&Tensor],
) -> gatherscatter::Result<Tensor> {
    let views: Vec<TensorView<'_>> = inputs.iter().map(|&t| t.into()).collect();
    policy.run(&op.into(), &views)
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec())
}

#[test]
fn numpy_take_wrap_and_jax_clip_and_fill_on_one_example() {
    // np.take([4, 3, 5, 7, 6, 8], [0, 1, -7, 6, 13], mode="wrap") = [4, 3, 8, 4, 3].
    let a = Tensor::from_vec(vec![4i32, 3, 5, 7, 6, 8]);
    let indices = i64s(&[0, 1, -7, 6, 13]);
    let wrap = run(IndexPolicy::Wrap, Gather::new(0), &[&a, &indices]).unwrap();
    assert_eq!(wrap.data::<i32>().unwrap(), &[4, 3, 8, 4, 3]);
    // JAX's clip: -7 is below -6, so it clamps to 0; 6 and 13 to 5.
    let clip = run(IndexPolicy::Clip, Gather::new(0), &[&a, &indices]).unwrap();
    assert_eq!(clip.data::<i32>().unwrap(), &[4, 3, 4, 8, 8]);
    // -1 counts from the end under clip (numpy's take would clamp it to 0).
    let last = run(IndexPolicy::Clip, Gather::new(0), &[&a, &i64s(&[-1])]).unwrap();
    assert_eq!(last.data::<i32>().unwrap(), &[8]);
    // JAX's fill: the default for int32 is its most negative value.
    let fill = run(IndexPolicy::Fill(None), Gather::new(0), &[&a, &indices]).unwrap();
    assert_eq!(
        fill.data::<i32>().unwrap(),
        &[4, 3, i32::MIN, i32::MIN, i32::MIN]
    );
}

#[test]
fn fill_fills_whole_slices_of_gather_and_gather_nd() {
    let data = Tensor::new(vec![2, 3], vec![1.0f32, 2., 3., 4., 5., 6.]).unwrap();
    let fill = IndexPolicy::Fill(Some(Tensor::scalar(-1.0f32)));
    let columns = run(fill.clone(), Gather::new(1), &[&data, &i64s(&[2, 3])]).unwrap();
    assert_eq!(columns.data::<f32>().unwrap(), &[3., -1., 6., -1.]);
    let pairs = Tensor::new(vec![2, 2], vec![1i64, -1, 2, 0]).unwrap();
    let nd = run(fill.clone(), GatherND::new(), &[&data, &pairs]).unwrap();
    assert_eq!(nd.data::<f32>().unwrap(), &[6., -1.]);
    let rows = Tensor::new(vec![1, 1], vec![5i64]).unwrap();
    let nd = run(fill, GatherND::new(), &[&data, &rows]).unwrap();
    assert_eq!(nd.data::<f32>().unwrap(), &[-1., -1., -1.]);
    // The default fill of a float is NaN; an empty axis fills everything.
    let empty = Tensor::new(vec![2, 0], Vec::<f32>::new()).unwrap();
    let out = run(
        IndexPolicy::Fill(None),
        Gather::new(1),
        &[&empty, &i64s(&[0])],
    )
    .unwrap();
    assert_eq!(out.shape(), &[2, 1]);
    assert!(out.data::<f32>().unwrap().iter().all(|v| v.is_nan()));
}

#[test]
fn drop_skips_out_of_range_updates_and_keeps_the_order_of_the_rest() {
    let data = Tensor::from_vec(vec![0i64; 4]);
    let indices = i64s(&[1, 9, 1, -1, -5]);
    let updates = i64s(&[10, 20, 30, 40, 50]);
    let none = ScatterElements::new(0);
    let out = run(IndexPolicy::Drop, none, &[&data, &indices, &updates]).unwrap();
    assert_eq!(out.data::<i64>().unwrap(), &[0, 30, 0, 40]); // the last in-range write wins
    let add = ScatterElements::new(0).reduction(Reduction::Add);
    let out = run(IndexPolicy::Drop, add, &[&data, &indices, &updates]).unwrap();
    assert_eq!(out.data::<i64>().unwrap(), &[0, 40, 0, 40]);
    let mean = ScatterReduce::new(0, Aggregate::Mean).include_self(false);
    let out = run(IndexPolicy::Drop, mean, &[&data, &indices, &updates]).unwrap();
    assert_eq!(out.data::<i64>().unwrap(), &[0, 20, 0, 40]);
    let tuples = Tensor::new(vec![3, 1], vec![3i64, 4, 0]).unwrap();
    let rows = i64s(&[7, 8, 9]);
    let out = run(
        IndexPolicy::Drop,
        ScatterND::new(),
        &[&data, &tuples, &rows],
    )
    .unwrap();
    assert_eq!(out.data::<i64>().unwrap(), &[9, 0, 0, 7]);
}

#[test]
fn each_operator_takes_only_its_modes_and_strict_profiles_take_none() {
    let data = Tensor::from_vec(vec![1.0f32, 2.0]);
    let indices = i64s(&[0]);
    let err = run(IndexPolicy::Drop, Gather::new(0), &[&data, &indices]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
    let updates = Tensor::from_vec(vec![5.0f32]);
    let fill = IndexPolicy::Fill(None);
    let err = run(fill, ScatterElements::new(0), &[&data, &indices, &updates]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
    let onnx = Gather::new(0).profile(Profile::Onnx { opset: 13 });
    let err = run(IndexPolicy::Clip, onnx, &[&data, &indices]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    let wrong = IndexPolicy::Fill(Some(Tensor::scalar(0i32)));
    let err = run(wrong, Gather::new(0), &[&data, &indices]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    // An empty axis has nothing to clip or wrap to.
    let empty = Tensor::from_vec(Vec::<f32>::new());
    let err = run(IndexPolicy::Wrap, Gather::new(0), &[&empty, &indices]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    // Raise is the operators' own rule; names parse.
    let err = run(IndexPolicy::Raise, Gather::new(0), &[&data, &i64s(&[2])]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    for name in ["raise", "clip", "wrap", "fill", "drop"] {
        assert_eq!(name.parse::<IndexPolicy>().unwrap().name(), name);
    }
    assert_eq!(
        "nearest".parse::<IndexPolicy>().unwrap_err().kind(),
        ErrorKind::BadAttribute
    );
    // Drop still checks the scatter's shapes.
    let long = Tensor::from_vec(vec![1.0f32, 2.0]);
    let err = run(
        IndexPolicy::Drop,
        ScatterElements::new(0),
        &[&data, &i64s(&[7]), &long],
    );
    assert_eq!(err.unwrap_err().kind(), ErrorKind::ShapeMismatch);
}

// ---- property tests: each mode's formula ----

/// Shapes (data, axis, indices), index values, a seed, the dtype, the mode.
type ElementsCase = (
    (Vec<usize>, usize, Vec<usize>),
    Vec<i128>,
    i64,
    DType,
    &'static str,
);

/// The position a mode reads for `v` on an axis of size `s` (`None`: fill / drop).
fn position(mode: &str, v: i128, s: usize) -> Option<usize> {
    let s = s as i128;
    if s == 0 {
        return None;
    }
    let from_end = if v < 0 && v >= -s { v + s } else { v };
    match mode {
        "clip" => Some(from_end.max(0).min(s - 1) as usize),
        "wrap" => Some((((v % s) + s) % s) as usize),
        _ => (from_end >= 0 && from_end < s).then_some(from_end as usize),
    }
}

fn policy(mode: &str) -> IndexPolicy {
    match mode {
        "fill" => IndexPolicy::Fill(None),
        other => other.parse().unwrap(),
    }
}

fn elements_case() -> impl Strategy<Value = ElementsCase> {
    elements_case_shapes().prop_flat_map(|(data_shape, axis, indices_shape)| {
        let s = data_shape[axis] as i128;
        let n: usize = indices_shape.iter().product();
        (
            Just((data_shape, axis, indices_shape)),
            prop::collection::vec(-2 * s - 2..2 * s + 2, n),
            any::<i64>(),
            prop::sample::select(vec![
                DType::F32,
                DType::I16,
                DType::U8,
                DType::String,
                DType::Bool,
            ]),
            prop::sample::select(vec!["clip", "wrap", "fill", "drop"]),
        )
    })
}

fn check_elements<T: RefReduce>(case: &ElementsCase) -> Result<(), TestCaseError> {
    let ((data_shape, axis, indices_shape), values, seed, _, mode) = case;
    let (axis, s) = (*axis, data_shape[*axis]);
    let data: Vec<T> = (0..data_shape.iter().product::<usize>())
        .map(|k| T::from_seed(k as i64 * 3 + seed % 7))
        .collect();
    let data_tensor = Tensor::new(data_shape.clone(), data.clone()).unwrap();
    let indices = Tensor::new(
        indices_shape.clone(),
        values.iter().map(|&v| v as i64).collect::<Vec<_>>(),
    )
    .unwrap();
    let empty_axis = s == 0 && !values.is_empty();
    if *mode == "drop" {
        // ScatterElements (none) with the out-of-range updates skipped.
        let updates: Vec<T> = (0..values.len())
            .map(|k| T::from_seed(k as i64 - 9))
            .collect();
        let updates_tensor = Tensor::new(indices_shape.clone(), updates.clone()).unwrap();
        let result = run(
            policy(mode),
            ScatterElements::new(axis as i64),
            &[&data_tensor, &indices, &updates_tensor],
        );
        let mut out = data.clone();
        for (flat, p) in coordinates(indices_shape).into_iter().enumerate() {
            if let Some(t) = position(mode, values[flat], s) {
                let mut at = p.clone();
                at[axis] = t;
                out[offset(&at, data_shape)] = updates[flat].clone();
            }
        }
        return check_against_reference(result, Some((data_shape.clone(), out)), T::same);
    }
    // GatherElements: out[p] = data[p with p[axis] := position], or the fill.
    let result = run(
        policy(mode),
        GatherElements::new(axis as i64),
        &[&data_tensor, &indices],
    );
    if empty_axis && *mode != "fill" {
        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::OutOfBounds);
        return Ok(());
    }
    let expected: Vec<T> = coordinates(indices_shape)
        .into_iter()
        .enumerate()
        .map(|(flat, p)| match position(mode, values[flat], s) {
            Some(t) => {
                let mut at = p.clone();
                at[axis] = t;
                data[offset(&at, data_shape)].clone()
            }
            None => default_fill::<T>(),
        })
        .collect();
    check_against_reference(result, Some((indices_shape.clone(), expected)), T::same)
}

/// JAX's default fill, written out per type.
fn default_fill<T: RefReduce>() -> T {
    let any: Box<dyn std::any::Any> = match T::DTYPE {
        DType::F32 => Box::new(f32::NAN),
        DType::I16 => Box::new(i16::MIN),
        DType::U8 => Box::new(u8::MAX),
        DType::Bool => Box::new(true),
        _ => Box::new(String::new()),
    };
    *any.downcast::<T>().unwrap()
}

fn check_elements_case(case: &ElementsCase) -> Result<(), TestCaseError> {
    match case.3 {
        DType::F32 => check_elements::<f32>(case),
        DType::I16 => check_elements::<i16>(case),
        DType::U8 => check_elements::<u8>(case),
        DType::Bool => check_elements::<bool>(case),
        _ => check_elements::<String>(case),
    }
}

proptest! {
    #![proptest_config(proptest_config(1500))]

    #[test]
    fn element_gathers_and_scatters_follow_each_modes_formula(case in elements_case()) {
        check_elements_case(&case)?;
    }

    #[test]
    fn gather_follows_each_modes_formula(
        (data_shape, axis) in shape(1..=3).prop_flat_map(|s| { let r = s.len(); (Just(s), 0..r) }),
        raw in prop::collection::vec(-9i128..9, 0..5),
        mode in prop::sample::select(vec!["clip", "wrap", "fill"]),
    ) {
        let s = data_shape[axis];
        let data: Vec<i32> = (0..data_shape.iter().product::<usize>() as i32).collect();
        let data_tensor = Tensor::new(data_shape.clone(), data.clone()).unwrap();
        let indices = Tensor::from_vec(raw.iter().map(|&v| v as i64).collect::<Vec<_>>());
        let result = run(policy(mode), Gather::new(axis as i64), &[&data_tensor, &indices]);
        if s == 0 && !raw.is_empty() && mode != "fill" {
            prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::OutOfBounds);
            return Ok(());
        }
        // out[a.., j, c..] = data[a.., position(indices[j]), c..], or the fill.
        let mut out_shape = data_shape.clone();
        out_shape[axis] = raw.len();
        let expected: Vec<i32> = coordinates(&out_shape)
            .into_iter()
            .map(|p| match position(mode, raw[p[axis]], s) {
                Some(t) => {
                    let mut at = p.clone();
                    at[axis] = t;
                    data[offset(&at, &data_shape)]
                }
                None => i32::MIN,
            })
            .collect();
        check_against_reference(result, Some((out_shape, expected)), |a: &i32, b: &i32| a == b)?;
    }
}
