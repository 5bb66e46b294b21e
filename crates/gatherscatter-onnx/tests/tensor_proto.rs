//! TensorProto round trips for every dtype and both encodings, and the
//! errors for messages that disagree with their dims.

use gatherscatter::{bf16, f16, Complex32, Complex64, DType, Tensor};
use gatherscatter_onnx::proto::TensorProto;
use gatherscatter_onnx::{decode_tensor, tensor_from_proto, tensor_to_proto, Encoding, OnnxError};
use prost::Message;

/// One tensor of each of the 16 dtypes, with edge values (extremes, NaN,
/// negative zero, non-ASCII strings) and a shape with a size-1 dim.
fn samples() -> Vec<Tensor> {
    let s = vec![2, 1, 3];
    vec![
        Tensor::new(s.clone(), vec![true, false, true, true, false, false]).unwrap(),
        Tensor::new(s.clone(), vec![i8::MIN, -1, 0, 1, 7, i8::MAX]).unwrap(),
        Tensor::new(s.clone(), vec![i16::MIN, -1, 0, 1, 300, i16::MAX]).unwrap(),
        Tensor::new(s.clone(), vec![i32::MIN, -1, 0, 1, 70000, i32::MAX]).unwrap(),
        Tensor::new(s.clone(), vec![i64::MIN, -1, 0, 1, 1 << 40, i64::MAX]).unwrap(),
        Tensor::new(s.clone(), vec![0u8, 1, 127, 128, 200, u8::MAX]).unwrap(),
        Tensor::new(s.clone(), vec![0u16, 1, 32767, 32768, 60000, u16::MAX]).unwrap(),
        Tensor::new(
            s.clone(),
            vec![0u32, 1, 1 << 31, 3_000_000_000, 7, u32::MAX],
        )
        .unwrap(),
        Tensor::new(s.clone(), vec![0u64, 1, 1 << 63, u64::MAX - 1, 7, u64::MAX]).unwrap(),
        Tensor::new(
            s.clone(),
            vec![
                f16::ZERO,
                f16::NEG_ZERO,
                f16::MAX,
                f16::MIN_POSITIVE_SUBNORMAL,
                f16::NAN,
                f16::NEG_INFINITY,
            ],
        )
        .unwrap(),
        Tensor::new(
            s.clone(),
            vec![
                bf16::ZERO,
                bf16::NEG_ZERO,
                bf16::MAX,
                bf16::from_f32(1.5),
                bf16::NAN,
                bf16::INFINITY,
            ],
        )
        .unwrap(),
        Tensor::new(
            s.clone(),
            vec![
                0.0f32,
                -0.0,
                f32::MAX,
                f32::MIN_POSITIVE,
                f32::NAN,
                f32::NEG_INFINITY,
            ],
        )
        .unwrap(),
        Tensor::new(
            s.clone(),
            vec![0.0f64, -0.0, f64::MAX, 1e-310, f64::NAN, f64::INFINITY],
        )
        .unwrap(),
        Tensor::new(
            s.clone(),
            (0..6)
                .map(|i| Complex32::new(i as f32, -(i as f32) / 3.0))
                .collect::<Vec<_>>(),
        )
        .unwrap(),
        Tensor::new(
            s.clone(),
            (0..6)
                .map(|i| Complex64::new(i as f64 / 7.0, f64::MAX))
                .collect::<Vec<_>>(),
        )
        .unwrap(),
        Tensor::new(
            s,
            ["", "a", "日本語", "zero\0byte", "tab\t", "ünï"]
                .map(String::from)
                .to_vec(),
        )
        .unwrap(),
    ]
}

/// Bit-level equality, so NaN payloads and -0.0 count.
fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype() && a.shape() == b.shape() && format!("{a:?}") == format!("{b:?}")
}

#[test]
fn every_dtype_round_trips_through_both_encodings() {
    let tensors = samples();
    let mut dtypes: Vec<DType> = tensors.iter().map(Tensor::dtype).collect();
    let mut all = DType::ALL.to_vec();
    dtypes.sort_by_key(|d| d.onnx_id());
    all.sort_by_key(|d| d.onnx_id());
    assert_eq!(dtypes, all, "one sample per dtype");
    for tensor in &tensors {
        for encoding in [Encoding::Raw, Encoding::TypedFields] {
            let proto = tensor_to_proto(tensor, "t", encoding).unwrap();
            assert_eq!(proto.data_type, Some(tensor.dtype().onnx_id()));
            let bytes = proto.encode_to_vec();
            let (name, back) = decode_tensor(&bytes, "sample").unwrap();
            assert_eq!(name, "t");
            assert!(
                same_bits(tensor, &back),
                "{encoding:?}: {tensor:?} came back as {back:?}"
            );
        }
    }
}

#[test]
fn float16_and_bfloat16_keep_their_bit_patterns() {
    let bits: Vec<u16> = vec![0x0000, 0x8000, 0x7c00, 0x7e01, 0x0001, 0xfbff];
    let t = Tensor::from_vec(bits.iter().map(|&b| f16::from_bits(b)).collect::<Vec<_>>());
    for encoding in [Encoding::Raw, Encoding::TypedFields] {
        let back = tensor_from_proto(&tensor_to_proto(&t, "h", encoding).unwrap()).unwrap();
        let got: Vec<u16> = back
            .data::<f16>()
            .unwrap()
            .iter()
            .map(|h| h.to_bits())
            .collect();
        assert_eq!(got, bits);
    }
}

#[test]
fn zero_sized_and_scalar_tensors_round_trip() {
    for tensor in [
        Tensor::new(vec![0, 3], Vec::<f32>::new()).unwrap(),
        Tensor::new(vec![2, 0], Vec::<String>::new()).unwrap(),
        Tensor::scalar(7i64),
        Tensor::scalar(String::from("s")),
    ] {
        for encoding in [Encoding::Raw, Encoding::TypedFields] {
            let back =
                tensor_from_proto(&tensor_to_proto(&tensor, "z", encoding).unwrap()).unwrap();
            assert_eq!(back, tensor);
        }
    }
}

fn proto(dtype: DType, dims: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: Some(dtype.onnx_id()),
        name: Some("bad".into()),
        ..TensorProto::default()
    }
}

fn message(e: OnnxError) -> String {
    e.to_string()
}

#[test]
fn data_that_disagrees_with_the_dims_is_an_error() {
    // raw_data shorter than the dims claim: no allocation of the claimed size.
    let mut p = proto(DType::F32, &[1 << 40, 1 << 20]);
    p.raw_data = Some(vec![0; 8]);
    let e = message(tensor_from_proto(&p).unwrap_err());
    assert!(e.contains("raw_data holds 8 bytes"), "{e}");
    // Element count overflow.
    let mut p = proto(DType::F64, &[i64::MAX, i64::MAX]);
    p.raw_data = Some(vec![]);
    assert!(message(tensor_from_proto(&p).unwrap_err()).contains("overflows"));
    // A typed field of the wrong length.
    let mut p = proto(DType::I64, &[3]);
    p.int64_data = vec![1, 2];
    assert!(message(tensor_from_proto(&p).unwrap_err())
        .contains("int64_data holds 2 values but dims call for 3"));
    // Complex pairs: an odd count.
    let mut p = proto(DType::Complex64, &[2]);
    p.float_data = vec![1.0, 2.0, 3.0];
    assert!(tensor_from_proto(&p).is_err());
    // Values that do not fit the narrow type.
    let mut p = proto(DType::I8, &[1]);
    p.int32_data = vec![300];
    assert!(message(tensor_from_proto(&p).unwrap_err()).contains("300 does not fit int8"));
    let mut p = proto(DType::Bool, &[1]);
    p.raw_data = Some(vec![2]);
    assert!(tensor_from_proto(&p).is_err());
    // Negative dims.
    let p = proto(DType::U8, &[-1]);
    assert!(message(tensor_from_proto(&p).unwrap_err()).contains("negative dimension"));
}

#[test]
fn unsupported_types_and_layouts_say_so() {
    let mut p = proto(DType::F32, &[1]);
    p.data_type = Some(17); // FLOAT8E4M3FN
    let e = tensor_from_proto(&p).unwrap_err();
    assert!(e.is_unsupported());
    assert!(e.to_string().contains("FLOAT8E4M3FN"), "{e}");
    let mut p = proto(DType::F32, &[1]);
    p.data_location = Some(1);
    assert!(tensor_from_proto(&p)
        .unwrap_err()
        .to_string()
        .contains("external"));
}

#[test]
fn arbitrary_bytes_are_an_error_not_a_panic() {
    for bytes in [
        &b"\xff\xff\xff"[..],
        b"\x0a\x05abc",
        b"",
        b"\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80",
    ] {
        let _ = decode_tensor(bytes, "junk");
    }
    assert!(decode_tensor(b"\xff\xff\xff", "junk").is_err());
}

#[test]
fn a_message_without_a_data_type_is_malformed_not_unsupported() {
    // An empty file decodes as a TensorProto with every field unset.
    let err = decode_tensor(&[], "TensorProto").unwrap_err();
    assert_eq!(err.kind_name(), "bad_model", "{err}");
    assert!(err.to_string().contains("UNDEFINED"), "{err}");
    // Named in a file, it is a bad file (exit 1 in gsx), not unsupported.
    let err = err.in_file("x.pb");
    assert_eq!(err.kind_name(), "bad_file");
    assert!(err.to_string().starts_with("x.pb: "), "{err}");
    // A number that names no ONNX type at all is malformed too.
    let proto = TensorProto {
        data_type: Some(999),
        ..TensorProto::default()
    };
    let err = tensor_from_proto(&proto).unwrap_err();
    assert_eq!(err.kind_name(), "bad_model", "{err}");
}

#[test]
fn an_unsupported_element_type_in_a_file_names_the_file() {
    // FLOAT8E4M3FN (17) is an ONNX type this library does not implement.
    let proto = TensorProto {
        data_type: Some(17),
        ..TensorProto::default()
    };
    let err = tensor_from_proto(&proto).unwrap_err().in_file("f8.pb");
    assert!(err.is_unsupported(), "{err}");
    assert!(err.to_string().starts_with("f8.pb: "), "{err}");
}
