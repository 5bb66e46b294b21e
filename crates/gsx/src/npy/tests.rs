use super::*;

fn round_trip(tensor: &Tensor) -> Tensor {
    let bytes = encode(tensor).unwrap();
    read_from(
        &mut bytes.as_slice(),
        bytes.len() as u64,
        Path::new("t.npy"),
    )
    .unwrap()
}

#[test]
fn every_numpy_dtype_round_trips() {
    let tensors = [
        Tensor::new(vec![2, 2], vec![true, false, false, true]).unwrap(),
        Tensor::new(vec![3], vec![-1i8, 0, 7]).unwrap(),
        Tensor::new(vec![1, 2], vec![u64::MAX, 3]).unwrap(),
        Tensor::new(vec![2], vec![f16::from_f32(1.5), f16::NAN]).unwrap(),
        Tensor::new(
            vec![2],
            vec![Complex64::new(1.0, -2.0), Complex64::new(0.5, 3.0)],
        )
        .unwrap(),
        Tensor::new(
            vec![3],
            vec!["a".to_string(), String::new(), "héllo".into()],
        )
        .unwrap(),
        Tensor::new(vec![0, 4], Vec::<f32>::new()).unwrap(),
        Tensor::scalar(2.5f64),
    ];
    for t in &tensors {
        let back = round_trip(t);
        assert_eq!(back.shape(), t.shape());
        assert_eq!(format!("{back:?}"), format!("{t:?}"));
    }
}

#[test]
fn strings_keep_inner_nuls_and_lose_trailing_ones_as_numpy_reads_them() {
    let t = Tensor::new(vec![2], vec!["a\0b".to_string(), "\0\u{4}".into()]).unwrap();
    assert_eq!(round_trip(&t), t);
    let trailing = Tensor::new(vec![1], vec!["ab\0\0".to_string()]).unwrap();
    assert_eq!(round_trip(&trailing).data::<String>().unwrap(), ["ab"]);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a 90 KB header or 512 KB of text is minutes under Miri; safe code, run natively"
)]
fn a_header_over_64_kib_is_written_as_version_2() {
    let shape = vec![1usize; 30_000];
    let t = Tensor::new(shape.clone(), vec![9u8]).unwrap();
    let bytes = encode(&t).unwrap();
    assert_eq!(bytes[6], 2, "version 2.0");
    assert_eq!(round_trip(&t).shape(), shape.as_slice());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a 90 KB header or 512 KB of text is minutes under Miri; safe code, run natively"
)]
fn strings_longer_than_a_chunk_are_written_in_pieces() {
    let long: String = "ab".repeat(CHUNK);
    let t = Tensor::new(vec![3], vec![String::new(), long.clone(), "x".into()]).unwrap();
    let back = round_trip(&t);
    assert_eq!(
        back.data::<String>().unwrap(),
        [String::new(), long, "x".into()]
    );
}

#[test]
fn a_reader_that_yields_more_or_fewer_bytes_than_claimed_is_an_error() {
    let bytes = encode(&Tensor::new(vec![4], vec![1i32, 2, 3, 4]).unwrap()).unwrap();
    let path = Path::new("t.npy");
    let short = read_from(&mut &bytes[..bytes.len() - 1], bytes.len() as u64, path);
    assert!(short
        .unwrap_err()
        .message
        .contains("changed while it was read"));
    let mut longer = bytes.clone();
    longer.push(0);
    let long = read_from(&mut longer.as_slice(), bytes.len() as u64, path);
    assert!(long
        .unwrap_err()
        .message
        .contains("changed while it was read"));
}
