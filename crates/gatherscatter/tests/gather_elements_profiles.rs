//! GatherElements under each contract: the DirectML and MindSpore seed
//! examples and every ONNX and DirectML profile rule (dtypes and index
//! types per opset and feature level, ranks, negative indices, sizes off
//! the axis).

mod common;

use common::*;
use gatherscatter::{f16, DType, Error, ErrorKind, FeatureLevel, GatherElements, Profile, Tensor};
fn dml(level: &str) -> Profile {
    Profile::DirectMl {
        level: level.parse().unwrap(),
    }
}

// ---- seed 001: DirectML GatherElements ----

#[test]
fn directml_example_uint32_indices() {
    // InputTensor {3,3} FLOAT32, IndicesTensor {2,3} UINT32, Axis 0.
    let input = Tensor::new(vec![3, 3], (1..=9).map(|v| v as f32).collect()).unwrap();
    let indices = Tensor::new(vec![2, 3], vec![1u32, 2, 0, 2, 0, 0]).unwrap();
    for level in ["3.0", "4.1"] {
        let out = GatherElements::new(0)
            .profile(dml(level))
            .run(&input, &indices)
            .unwrap();
        assert_eq!(out.shape(), &[2, 3]);
        assert_eq!(out.data::<f32>().unwrap(), &[4.0, 8.0, 3.0, 7.0, 2.0, 3.0]);
    }
    // At 2.1 the same call must be rank 4: {1,1,3,3} with {1,1,2,3} indices, Axis 2.
    let input4 = Tensor::new(vec![1, 1, 3, 3], (1..=9).map(|v| v as f32).collect()).unwrap();
    let indices4 = Tensor::new(vec![1, 1, 2, 3], vec![1u32, 2, 0, 2, 0, 0]).unwrap();
    let out = GatherElements::new(2)
        .profile(dml("2.1"))
        .run(&input4, &indices4)
        .unwrap();
    assert_eq!(out.data::<f32>().unwrap(), &[4.0, 8.0, 3.0, 7.0, 2.0, 3.0]);
}

// ---- seed 002: MindSpore Tensor.gather(dim, index) ----

#[test]
fn mindspore_dim_index_rules() {
    let input = Tensor::new(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
    let ms = GatherElements::new(1).profile(Profile::MindSpore);
    // index.shape[axis] <= shape[axis] off dim; values in [-shape[dim], shape[dim]).
    let index = Tensor::new(vec![1, 4], vec![-3i64, 2, 0, -1]).unwrap();
    let out = ms.run(&input, &index).unwrap();
    assert_eq!(out.shape(), &[1, 4]);
    assert_eq!(out.data::<i32>().unwrap(), &[1, 3, 1, 3]);
    // dim outside [-rank, rank): ValueError -> bad_axis.
    let err = GatherElements::new(2)
        .profile(Profile::MindSpore)
        .run(&input, &index)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAxis);
    // index rank != self rank: ValueError -> rank_mismatch.
    let err = ms.run(&input, &Tensor::from_vec(vec![0i64])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RankMismatch);
    // index.shape[0] = 3 > shape[0] = 2: ValueError -> shape_mismatch.
    let err = ms
        .run(&input, &Tensor::new(vec![3, 1], vec![0i64; 3]).unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    // value -4 outside [-3, 3): ValueError -> out_of_bounds.
    let err = ms
        .run(&input, &Tensor::new(vec![1, 1], vec![-4i64]).unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    // index dtype other than int32/int64: TypeError -> bad_dtype.
    let err = ms
        .run(&input, &Tensor::new(vec![1, 1], vec![0u8]).unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert!(ms
        .run(&input, &Tensor::new(vec![1, 1], vec![0i32]).unwrap())
        .is_ok());
}

// ---- profiles ----

#[test]
fn onnx_profile_bf16_from_13_and_int32_int64_indices() {
    let data = Tensor::new(vec![1], vec![gatherscatter::bf16::ONE]).unwrap();
    let indices = Tensor::new(vec![1], vec![0i64]).unwrap();
    let err = GatherElements::new(0)
        .profile(Profile::Onnx { opset: 12 })
        .run(&data, &indices)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert!(GatherElements::new(0)
        .profile(Profile::Onnx { opset: 13 })
        .run(&data, &indices)
        .is_ok());
    let err = GatherElements::new(0)
        .profile(Profile::Onnx { opset: 13 })
        .run(&data, &Tensor::new(vec![1], vec![0u32]).unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    let err = GatherElements::new(0)
        .profile(Profile::Onnx { opset: 10 })
        .run(&data, &indices)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
}

fn rank4_f32() -> Tensor {
    Tensor::new(vec![1, 1, 2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap()
}

#[test]
fn directml_2_1_requires_rank_4_and_uint32_indices() {
    let p = GatherElements::new(3).profile(dml("2.1"));
    let idx_u32 = Tensor::new(vec![1, 1, 2, 1], vec![1u32, 0]).unwrap();
    assert_eq!(
        p.run(&rank4_f32(), &idx_u32)
            .unwrap()
            .data::<f32>()
            .unwrap(),
        &[2.0, 3.0]
    );
    for dtype in [DType::I32, DType::I64, DType::U64] {
        let err = p
            .run(&rank4_f32(), &index_tensor(dtype, &[1, 1, 2, 1], &[1, 0]))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadDType, "{dtype}");
    }
    let rank2 = Tensor::new(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let err = GatherElements::new(1)
        .profile(dml("2.1"))
        .run(&rank2, &Tensor::new(vec![2, 1], vec![0u32, 0]).unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RankMismatch);
    assert_eq!(
        err.to_string(),
        "data has rank 2, but DirectML feature level 2.1 supports exactly 4 dimensions"
    );
}

#[test]
fn directml_ranks_1_to_8_from_3_0() {
    for level in ["3.0", "4.1"] {
        for rank in 1..=9usize {
            let shape = vec![1; rank];
            let data = Tensor::new(shape.clone(), vec![7i32]).unwrap();
            let indices = Tensor::new(shape, vec![0u32]).unwrap();
            let result = GatherElements::new(0)
                .profile(dml(level))
                .run(&data, &indices);
            assert_eq!(result.is_ok(), rank <= 8, "level {level} rank {rank}");
        }
    }
}

#[test]
fn directml_data_types_per_level() {
    let data_of = |dtype: DType| -> Tensor {
        match dtype {
            DType::F64 => Tensor::new(vec![1], vec![1.0f64]).unwrap(),
            DType::I64 => Tensor::new(vec![1], vec![1i64]).unwrap(),
            DType::U64 => Tensor::new(vec![1], vec![1u64]).unwrap(),
            DType::F16 => Tensor::new(vec![1], vec![f16::ONE]).unwrap(),
            DType::Bool => Tensor::new(vec![1], vec![true]).unwrap(),
            DType::BF16 => Tensor::new(vec![1], vec![gatherscatter::bf16::ONE]).unwrap(),
            other => panic!("{other}"),
        }
    };
    let idx = Tensor::new(vec![1], vec![0u32]).unwrap();
    for dtype in [DType::F64, DType::I64, DType::U64] {
        let at_3_0 = GatherElements::new(0)
            .profile(dml("3.0"))
            .run(&data_of(dtype), &idx);
        assert_eq!(
            at_3_0.unwrap_err().kind(),
            ErrorKind::BadDType,
            "{dtype} at 3.0"
        );
        assert!(
            GatherElements::new(0)
                .profile(dml("4.1"))
                .run(&data_of(dtype), &idx)
                .is_ok(),
            "{dtype} at 4.1"
        );
    }
    assert!(GatherElements::new(0)
        .profile(dml("3.0"))
        .run(&data_of(DType::F16), &idx)
        .is_ok());
    for dtype in [DType::Bool, DType::BF16] {
        let err = GatherElements::new(0)
            .profile(dml("4.1"))
            .run(&data_of(dtype), &idx)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadDType, "{dtype}");
    }
    let err = GatherElements::new(0)
        .profile(Profile::DirectMl {
            level: FeatureLevel::new(2, 0),
        })
        .run(&data_of(DType::F16), &idx)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
}

#[test]
fn directml_negative_indices_from_3_0_signed_types_only() {
    let data = Tensor::new(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let negative = Tensor::new(vec![1], vec![-1i32]).unwrap();
    let out = GatherElements::new(0)
        .profile(dml("3.0"))
        .run(&data, &negative)
        .unwrap();
    assert_eq!(out.data::<f32>().unwrap(), &[3.0]);
    // At 2.1 only UINT32 exists, so a negative value cannot even be written; a
    // huge UINT32 is simply out of range, never negative.
    let data4 = Tensor::new(vec![1, 1, 1, 3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let huge = Tensor::new(vec![1, 1, 1, 1], vec![u32::MAX]).unwrap();
    let err = GatherElements::new(3)
        .profile(dml("2.1"))
        .run(&data4, &huge)
        .unwrap_err();
    assert_eq!(
        err,
        Error::IndexOutOfRange {
            value: u32::MAX as i128,
            position: vec![0, 0, 0, 0],
            axis: 3,
            axis_size: 3,
            negative_allowed: false
        }
    );
    let huge64 = Tensor::new(vec![1], vec![u64::MAX]).unwrap();
    let err = GatherElements::new(0)
        .profile(dml("4.1"))
        .run(&data, &huge64)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
}

#[test]
fn directml_requires_equal_sizes_off_the_axis() {
    let data = Tensor::new(vec![2, 3], vec![0i16; 6]).unwrap();
    let smaller = Tensor::new(vec![2, 2], vec![0u32; 4]).unwrap();
    let err = GatherElements::new(0)
        .profile(dml("4.1"))
        .run(&data, &smaller)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert!(
        err.to_string().contains("requires it to equal data's 3"),
        "{err}"
    );
    // Along the axis any size is fine.
    let longer = Tensor::new(vec![5, 3], vec![1u32; 15]).unwrap();
    assert!(GatherElements::new(0)
        .profile(dml("4.1"))
        .run(&data, &longer)
        .is_ok());
    // The permissive default accepts the smaller one.
    assert!(GatherElements::new(0).run(&data, &smaller).is_ok());
}

#[test]
fn directml_axis_is_unsigned() {
    let data = Tensor::new(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let idx = Tensor::new(vec![1], vec![0u32]).unwrap();
    let err = GatherElements::new(-1)
        .profile(dml("4.1"))
        .run(&data, &idx)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
}

#[test]
fn directml_index_types_from_3_0_are_int32_int64_uint32_uint64() {
    let data = Tensor::new(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap();
    for level in ["3.0", "4.1"] {
        for dtype in DType::INDEX_TYPES {
            let result = GatherElements::new(0)
                .profile(dml(level))
                .run(&data, &index_tensor(dtype, &[1], &[2]));
            let accepted = matches!(dtype, DType::I32 | DType::I64 | DType::U32 | DType::U64);
            match result {
                Ok(out) => {
                    assert!(accepted, "{dtype} at {level} should be refused");
                    assert_eq!(out.data::<f32>().unwrap(), &[3.0]);
                }
                Err(err) => {
                    assert!(!accepted, "{dtype} at {level} should be accepted: {err}");
                    assert_eq!(err.kind(), ErrorKind::BadDType);
                }
            }
        }
    }
}
