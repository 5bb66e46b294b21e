//! TensorScatter: the ONNX node tests verbatim, errors, the opset profile,
//! and a property test against the ONNX pseudocode.

mod common;

use common::*;
use gatherscatter::tuning::{self, Stores, Tuning};
use gatherscatter::{
    DType, Error, ErrorKind, Profile, ScatterMode, Tensor, TensorScatter, TensorView, TypedTensor,
};
use proptest::prelude::*;

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

fn rows(rows: &[[f32; 5]]) -> Vec<f32> {
    rows.concat()
}

const PAST_ROWS: [[f32; 5]; 4] = [
    [1., 2., 3., 4., 5.],
    [5., 6., 7., 8., 9.],
    [8., 7., 6., 5., 4.],
    [4., 3., 2., 1., 0.],
];

fn past_2x1x4x5() -> Tensor {
    f32s(
        &[2, 1, 4, 5],
        &[rows(&PAST_ROWS), rows(&PAST_ROWS)].concat(),
    )
}

#[test]
fn onnx_test_tensorscatter() {
    let update = f32s(&[2, 1, 1, 5], &[[5.; 5], [1.; 5]].concat());
    let write = Tensor::from_vec(vec![1i64, 2]);
    let out = TensorScatter::new()
        .profile(Profile::Onnx { opset: 24 })
        .run(&past_2x1x4x5(), &update, Some(TensorView::from(&write)))
        .unwrap();
    let [r0, r1, r2, r3] = PAST_ROWS;
    let expected = rows(&[r0, [5.; 5], r2, r3, r0, r1, [1.; 5], r3]);
    assert_eq!(out.shape(), &[2, 1, 4, 5]);
    assert_eq!(out.data::<f32>().unwrap(), &expected[..]);
}

#[test]
fn onnx_test_tensorscatter_circular() {
    let update = f32s(
        &[2, 1, 2, 5],
        &[[5.; 5], [6.; 5], [1.; 5], [2.; 5]].concat(),
    );
    let write = Tensor::from_vec(vec![1i64, 3]);
    let out = TensorScatter::new()
        .mode(ScatterMode::Circular)
        .profile(Profile::Onnx { opset: 24 })
        .run(&past_2x1x4x5(), &update, Some(TensorView::from(&write)))
        .unwrap();
    let [r0, r1, r2, r3] = PAST_ROWS;
    let expected = rows(&[r0, [5.; 5], [6.; 5], r3, [2.; 5], r1, r2, [1.; 5]]);
    assert_eq!(out.data::<f32>().unwrap(), &expected[..]);
}

#[test]
fn onnx_test_tensorscatter_3d() {
    let past_rows: [[f32; 6]; 4] = [
        [1., 2., 3., 4., 5., 6.],
        [5., 6., 7., 8., 9., 10.],
        [8., 7., 6., 5., 4., 3.],
        [5., 4., 3., 2., 1., 0.],
    ];
    let past: Vec<f32> = [past_rows.concat(), past_rows.concat(), past_rows.concat()].concat();
    let update: Vec<f32> = [4., 5., 6., 7., 2., 3.]
        .iter()
        .flat_map(|&v| [v; 6])
        .collect();
    let write = Tensor::from_vec(vec![1i64, 2, 0]);
    let out = TensorScatter::new()
        .profile(Profile::Onnx { opset: 24 })
        .run(
            &f32s(&[3, 4, 6], &past),
            &f32s(&[3, 2, 6], &update),
            Some(TensorView::from(&write)),
        )
        .unwrap();
    let [p0, p1, p2, p3] = past_rows;
    let expected: Vec<f32> = [
        p0, [4.; 6], [5.; 6], p3, p0, p1, [6.; 6], [7.; 6], [2.; 6], [3.; 6], p2, p3,
    ]
    .concat();
    assert_eq!(out.data::<f32>().unwrap(), &expected[..]);
}

#[test]
fn missing_write_indices_mean_zero() {
    let past = f32s(&[2, 3, 1], &[0., 1., 2., 3., 4., 5.]);
    let update = f32s(&[2, 1, 1], &[9., 8.]);
    let out = TensorScatter::new().run(&past, &update, None).unwrap();
    assert_eq!(out.data::<f32>().unwrap(), &[9., 1., 2., 8., 4., 5.]);
}

#[test]
fn batches_past_the_inline_eight_write_and_fail_as_the_first_eight_do() {
    // Up to 8 batches' write positions are kept inline, more on the heap.
    for batches in [1usize, 8, 9, 12] {
        let past = f32s(&[batches, 4, 1], &vec![0.0; batches * 4]);
        let steps: Vec<f32> = (0..batches).map(|b| b as f32 + 1.0).collect();
        let update = f32s(&[batches, 1, 1], &steps);
        let positions: Vec<i64> = (0..batches as i64).map(|b| b % 4).collect();
        let write = Tensor::new(vec![batches], positions.clone()).unwrap();
        let op = TensorScatter::new().axis(1);
        let out = op.run(&past, &update, Some((&write).into())).unwrap();
        let mut expected = vec![0.0; batches * 4];
        for (b, &step) in steps.iter().enumerate() {
            expected[b * 4 + b % 4] = step;
        }
        assert_eq!(
            out.data::<f32>().unwrap(),
            &expected[..],
            "{batches} batches"
        );
        // Without write indices every batch writes at position 0.
        let out = op.run(&past, &update, None).unwrap();
        let mut expected = vec![0.0; batches * 4];
        for (b, &step) in steps.iter().enumerate() {
            expected[b * 4] = step;
        }
        assert_eq!(
            out.data::<f32>().unwrap(),
            &expected[..],
            "{batches} batches"
        );
        // A window past the end in the last batch is named.
        let mut bad = positions;
        bad[batches - 1] = 4;
        let bad = Tensor::new(vec![batches], bad).unwrap();
        let err = op.run(&past, &update, Some((&bad).into())).unwrap_err();
        assert!(
            matches!(err, Error::WriteIndexOutOfRange { value: 4, batch, .. } if batch == batches - 1),
            "{batches} batches: {err}"
        );
    }
}

#[test]
fn errors_name_the_numbers_and_leave_the_cache_untouched() {
    let past = f32s(&[2, 4, 1], &[0.; 8]);
    let before = past.clone();
    let update = f32s(&[2, 2, 1], &[1.; 4]);
    let err = TensorScatter::new()
        .run(
            &past,
            &update,
            Some(TensorView::from(&Tensor::from_vec(vec![0i64, 3]))),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    assert_eq!(
        err.to_string(),
        "write index 3 at write_indices[1] is out of range [0, 2]: an update of length 2 must fit inside axis 1 of size 4 in linear mode"
    );
    let err = TensorScatter::new()
        .mode(ScatterMode::Circular)
        .run(
            &past,
            &update,
            Some(TensorView::from(&Tensor::from_vec(vec![-1i64, 3]))),
        )
        .unwrap_err();
    assert_eq!(
        err,
        Error::WriteIndexOutOfRange {
            value: -1,
            batch: 0,
            axis: 1,
            max_sequence_length: 4,
            sequence_length: 2,
            circular: true
        }
    );
    // Circular accepts any non-negative index, modulo the axis.
    let out = TensorScatter::new()
        .mode(ScatterMode::Circular)
        .run(
            &past,
            &update,
            Some(TensorView::from(&Tensor::from_vec(vec![7i64, 4]))),
        )
        .unwrap();
    assert_eq!(
        out.data::<f32>().unwrap(),
        &[1., 0., 0., 1., 1., 1., 0., 0.]
    );
    assert_eq!(past, before);

    let err = TensorScatter::new()
        .axis(0)
        .run(&past, &update, None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
    let err = TensorScatter::new()
        .run(&past, &f32s(&[2, 5, 1], &[0.; 10]), None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let err = TensorScatter::new()
        .run(&past, &f32s(&[1, 2, 1], &[0.; 2]), None)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "update dimension 0 is 1, but it must equal past_cache's 2 (update shape [1, 2, 1], past_cache shape [2, 4, 1], axis 1)"
    );
    let err = TensorScatter::new()
        .run(
            &past,
            &update,
            Some(TensorView::from(&Tensor::from_vec(vec![0i64]))),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let err = TensorScatter::new()
        .run(
            &past,
            &Tensor::new(vec![2, 2, 1], vec![1i32; 4]).unwrap(),
            None,
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert!("ring".parse::<ScatterMode>().is_err());
}

#[test]
fn into_and_in_place_check_everything_before_writing() {
    let past = f32s(&[2, 4, 1], &[0.; 8]);
    let update = f32s(&[2, 2, 1], &[1.; 4]);
    let bad_write = Tensor::from_vec(vec![0i64, 3]);
    let op = TensorScatter::new();

    let mut out = f32s(&[2, 4, 1], &[7.; 8]);
    let err = op
        .run_into(&past, &update, Some(TensorView::from(&bad_write)), &mut out)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    assert_eq!(out, f32s(&[2, 4, 1], &[7.; 8]));
    let mut cache = past.clone();
    let err = op
        .run_in_place(&mut cache, &update, Some(TensorView::from(&bad_write)))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    assert_eq!(cache, past);

    // The output must have the cache's shape and dtype.
    let mut wrong_shape = f32s(&[8], &[7.; 8]);
    let err = op
        .run_into(&past, &update, None, &mut wrong_shape)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let mut wrong_dtype = Tensor::new(vec![2, 4, 1], vec![7i32; 8]).unwrap();
    let err = op
        .run_into(&past, &update, None, &mut wrong_dtype)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    // In place, the update must have the cache's dtype.
    let mut int_cache = Tensor::new(vec![2, 4, 1], vec![7i32; 8]).unwrap();
    let err = op.run_in_place(&mut int_cache, &update, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert_eq!(
        int_cache,
        Tensor::new(vec![2, 4, 1], vec![7i32; 8]).unwrap()
    );
}

#[test]
fn typed_into_and_in_place_match_run() {
    let past = TypedTensor::new(vec![2, 3], vec![1u16, 2, 3, 4, 5, 6]).unwrap();
    let update = TypedTensor::new(vec![2, 2], vec![10u16, 11, 20, 21]).unwrap();
    let write = TypedTensor::new(vec![2], vec![2u8, 1]).unwrap();
    let op = TensorScatter::new().axis(1).mode(ScatterMode::Circular);
    let expected = [11u16, 2, 10, 4, 20, 21];
    let out = op
        .run_typed(past.view(), update.view(), Some(write.view()))
        .unwrap();
    assert_eq!(out.data(), &expected);
    let mut into = TypedTensor::new(vec![2, 3], vec![0u16; 6]).unwrap();
    op.run_typed_into(past.view(), update.view(), Some(write.view()), &mut into)
        .unwrap();
    assert_eq!(into.data(), &expected);
    let mut cache = past.clone();
    op.run_typed_in_place(&mut cache, update.view(), Some(write.view()))
        .unwrap();
    assert_eq!(cache.data(), &expected);
    let mut short = TypedTensor::new(vec![3, 2], vec![0u16; 6]).unwrap();
    let err = op
        .run_typed_into(past.view(), update.view(), Some(write.view()), &mut short)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert_eq!(short.data(), &[0u16; 6]);
}

#[test]
fn onnx_profile_needs_opset_24_and_int64_write_indices() {
    let past = f32s(&[1, 2, 1], &[0., 0.]);
    let update = f32s(&[1, 1, 1], &[1.]);
    let err = TensorScatter::new()
        .profile(Profile::Onnx { opset: 23 })
        .run(&past, &update, None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    let w32 = Tensor::from_vec(vec![1i32]);
    let err = TensorScatter::new()
        .profile(Profile::Onnx { opset: 24 })
        .run(&past, &update, Some(TensorView::from(&w32)))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert!(TensorScatter::new()
        .run(&past, &update, Some(TensorView::from(&w32)))
        .is_ok());
}

// ---- property test against the ONNX pseudocode ----

fn check<T: FromSeed>(
    shape: &[usize],
    axis: usize,
    seq: usize,
    write: &[i128],
    circular: bool,
    index_dtype: DType,
) -> Result<(), TestCaseError> {
    let n: usize = shape.iter().product();
    let mut update_shape = shape.to_vec();
    update_shape[axis] = seq;
    let m: usize = update_shape.iter().product();
    let past: Vec<T> = (0..n as i64).map(T::from_seed).collect();
    let update: Vec<T> = (1000..1000 + m as i64).map(T::from_seed).collect();
    let expected =
        reference_tensor_scatter(&past, shape, &update, &update_shape, write, axis, circular)
            .expect("the property test draws valid write indices");
    let mode = if circular {
        ScatterMode::Circular
    } else {
        ScatterMode::Linear
    };
    let op = TensorScatter::new().axis(axis as i64).mode(mode);
    let past = Tensor::new(shape.to_vec(), past).unwrap();
    let update = Tensor::new(update_shape, update).unwrap();
    let write = index_tensor(index_dtype, &[shape[0]], write);
    let fail = |e: Error| TestCaseError::fail(e.to_string());
    let each_way = || {
        let out = op
            .run(&past, &update, Some(TensorView::from(&write)))
            .map_err(fail)?;
        prop_assert_eq!(out.data::<T>().unwrap(), &expected[..]);
        // Into a buffer holding other values: every element is written.
        let other: Vec<T> = (5000..5000 + n as i64).map(T::from_seed).collect();
        let mut into = Tensor::new(shape.to_vec(), other).unwrap();
        op.run_into(&past, &update, Some(TensorView::from(&write)), &mut into)
            .map_err(fail)?;
        prop_assert_eq!(into.data::<T>().unwrap(), &expected[..]);
        let mut cache = past.clone();
        op.run_in_place(&mut cache, &update, Some(TensorView::from(&write)))
            .map_err(fail)?;
        prop_assert_eq!(cache.data::<T>().unwrap(), &expected[..]);
        Ok(())
    };
    // Whichever stores `auto` would take: the copy then the windows, and
    // each row streamed once in order.
    each_way()?;
    for stores in [Stores::Cached, Stores::Streaming] {
        tuning::scoped(Tuning::AUTO.with_stores(stores), each_way)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(proptest_config(500))]

    #[test]
    fn tensor_scatter_matches_onnx_pseudocode(
        shape in shape(2..=5),
        axis_pick in any::<prop::sample::Index>(),
        seq_pick in any::<prop::sample::Index>(),
        raw in prop::collection::vec(0i128..20, 5),
        circular in any::<bool>(),
        dtype in prop::sample::select(DType::ALL.to_vec()),
        index_dtype in prop::sample::select(DType::INDEX_TYPES.to_vec()),
    ) {
        let axis = 1 + axis_pick.index(shape.len() - 1);
        let max = shape[axis];
        let seq = seq_pick.index(max + 1);
        let write: Vec<i128> = (0..shape[0])
            .map(|b| if circular { raw[b % raw.len()] } else { raw[b % raw.len()] % (max - seq + 1) as i128 })
            .collect();
        for_dtype!(dtype, check(&shape, axis, seq, &write, circular, index_dtype))?;
    }
}
