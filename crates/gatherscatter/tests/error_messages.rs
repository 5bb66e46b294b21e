//! The error-text table of docs/design.md, message for message: every kind names
//! the numbers a user needs (value, position, axis, size, valid range, dtype,
//! opset). If a message changes, this test and docs/design.md change together.

use gatherscatter::{
    ErrorKind, FeatureLevel, Gather, GatherElements, Profile, Reduction, ScatterElements, Tensor,
    TensorScatter, TensorView,
};

fn t_f32(shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::new(shape.to_vec(), vec![0.5f32; n]).unwrap()
}

fn t_i64(shape: &[usize], values: &[i64]) -> Tensor {
    Tensor::new(shape.to_vec(), values.to_vec()).unwrap()
}

/// (kind, message) for one representative call of each kind.
fn table() -> Vec<(ErrorKind, String)> {
    let data = t_f32(&[3, 5]);
    let cases: Vec<gatherscatter::Error> = vec![
        Gather::new(1)
            .run(&data, &t_i64(&[2, 3], &[0, 1, 2, 3, 4, 7]))
            .unwrap_err(),
        Gather::new(0)
            .profile(Profile::MindSpore)
            .run(&data, &t_i64(&[1], &[-1]))
            .unwrap_err(),
        TensorScatter::new()
            .axis(1)
            .run(
                &t_f32(&[2, 4]),
                &t_f32(&[2, 2]),
                Some(TensorView::from(&t_i64(&[2], &[0, 3]))),
            )
            .unwrap_err(),
        Gather::new(2).run(&data, &t_i64(&[1], &[0])).unwrap_err(),
        GatherElements::new(0)
            .run(&data, &t_i64(&[2], &[0, 1]))
            .unwrap_err(),
        GatherElements::new(0)
            .run(&data, &t_i64(&[2, 6], &[0; 12]))
            .unwrap_err(),
        Gather::new(0).run(&data, &t_f32(&[1])).unwrap_err(),
        Gather::new(0)
            .profile(Profile::Onnx { opset: 11 })
            .run(&data, &Tensor::from_vec(vec![0u8]))
            .unwrap_err(),
        GatherElements::new(0)
            .profile(Profile::DirectMl {
                level: "2.1".parse::<FeatureLevel>().unwrap(),
            })
            .run(
                &t_f32(&[1, 1, 2, 2]),
                &Tensor::new(vec![1, 1, 2, 2], vec![0i32; 4]).unwrap(),
            )
            .unwrap_err(),
        Gather::new(0)
            .batch_dims(1)
            .run(&data, &t_i64(&[3, 1], &[0, 0, 0]))
            .unwrap_err(),
        ScatterElements::new(0)
            .reduction(Reduction::Max)
            .profile(Profile::Onnx { opset: 16 })
            .run(&data, &t_i64(&[1, 5], &[0; 5]), &t_f32(&[1, 5]))
            .unwrap_err(),
        gatherscatter::SegmentCsr::new(gatherscatter::Aggregate::Sum)
            .run(&t_f32(&[4]), &t_i64(&[3], &[0, 3, 2]))
            .unwrap_err(),
        Gather::new(1)
            .run(
                &Tensor::new(vec![1 << 40, 0, 1 << 40], Vec::<f32>::new()).unwrap(),
                &t_i64(&[1], &[0]),
            )
            .unwrap_err(),
        ScatterElements::new(0)
            .profile(Profile::MindSpore)
            .run(&data, &t_i64(&[1, 5], &[0; 5]), &t_f32(&[1, 5]))
            .unwrap_err(),
    ];
    cases
        .into_iter()
        .map(|e| (e.kind(), e.to_string()))
        .collect()
}

#[test]
fn every_error_kind_names_its_numbers() {
    let expected: Vec<(&str, &str)> = vec![
        ("out_of_bounds", "index 7 at indices[1, 2] is out of range [-5, 4] for axis 1 of size 5"),
        ("out_of_bounds", "index -1 at indices[0] is out of range [0, 2] for axis 0 of size 3 (negative indices are not allowed by the active profile)"),
        ("out_of_bounds", "write index 3 at write_indices[1] is out of range [0, 2]: an update of length 2 must fit inside axis 1 of size 4 in linear mode"),
        ("bad_axis", "axis 2 is out of range [-2, 1] for data of rank 2"),
        ("rank_mismatch", "indices has rank 1, but the rank 2 of data is required"),
        ("shape_mismatch", "indices dimension 1 is 6, larger than data's 5; only the axis 0 may be larger (indices shape [2, 6], data shape [3, 5])"),
        ("bad_dtype", "indices has dtype float, which Gather does not accept (accepted: int8, int16, int32, int64, uint8, uint16, uint32, uint64)"),
        ("bad_dtype", "indices has dtype uint8, which ONNX Gather-11 (opset 11) does not accept (accepted: int32, int64)"),
        ("bad_dtype", "indices has dtype int32, which DirectML GatherElements at feature level 2.1 does not accept (accepted: uint32)"),
        ("bad_attribute", "batch_dims 1 exceeds axis 0: the gathered axis cannot be a batch dimension"),
        ("bad_reduction", "reduction max is not allowed by ONNX ScatterElements-16 (opset 16) (allowed: none, add, mul)"),
        ("bad_segments", "indptr decreases at indptr[2]: 2 after 3; it must be non-decreasing"),
        ("size_overflow", "the element count of Gather output with shape [1099511627776, 1, 1099511627776] overflows usize"),
        ("unsupported", "ScatterElements is not part of the mindspore profile"),
    ];
    let got = table();
    assert_eq!(got.len(), expected.len());
    for ((kind, message), (want_kind, want)) in got.iter().zip(&expected) {
        assert_eq!(kind.as_str(), *want_kind, "{message}");
        assert_eq!(message, want);
    }
}
