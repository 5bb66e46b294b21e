//! index_select, index_add and index_copy (PyTorch's): the examples of
//! PyTorch's documentation, every error, and a property test against the
//! formula on every dim, dtype and index type.

mod common;

use common::*;
use gatherscatter::{index_add, index_copy, index_select, DType, ErrorKind, Tensor};
use proptest::prelude::*;

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

#[test]
fn pytorch_index_add_and_index_copy_examples() {
    let t = f32s(&[3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
    let index = Tensor::from_vec(vec![0i64, 4, 2]);
    let added = index_add(&f32s(&[5, 3], &[1.0; 15]), 0, &index, &t).unwrap();
    assert_eq!(
        added.data::<f32>().unwrap(),
        &[2., 3., 4., 1., 1., 1., 8., 9., 10., 1., 1., 1., 5., 6., 7.]
    );
    let copied = index_copy(&f32s(&[5, 3], &[0.0; 15]), 0, &index, &t).unwrap();
    assert_eq!(
        copied.data::<f32>().unwrap(),
        &[1., 2., 3., 0., 0., 0., 7., 8., 9., 0., 0., 0., 4., 5., 6.]
    );
}

#[test]
fn pytorch_index_select_example_on_both_dims() {
    let x = f32s(&[3, 4], &(0..12).map(|v| v as f32).collect::<Vec<_>>());
    let indices = Tensor::from_vec(vec![0u8, 2]);
    let rows = index_select(&x, 0, &indices).unwrap();
    assert_eq!(rows.shape(), &[2, 4]);
    assert_eq!(
        rows.data::<f32>().unwrap(),
        &[0., 1., 2., 3., 8., 9., 10., 11.]
    );
    let columns = index_select(&x, 1, &indices).unwrap();
    assert_eq!(columns.data::<f32>().unwrap(), &[0., 2., 4., 6., 8., 10.]);
}

#[test]
fn duplicates_add_in_order_and_the_last_copy_wins_on_inner_dims() {
    let data = Tensor::new(vec![2, 2], vec![0i32; 4]).unwrap();
    let index = Tensor::from_vec(vec![1i64, -1, 0]);
    let source = Tensor::new(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
    let added = index_add(&data, 1, &index, &source).unwrap();
    assert_eq!(added.data::<i32>().unwrap(), &[3, 3, 6, 9]);
    let copied = index_copy(&data, -1, &index, &source).unwrap();
    assert_eq!(copied.data::<i32>().unwrap(), &[3, 2, 6, 5]);
}

#[test]
fn bad_index_source_and_dim_are_refused() {
    let data = f32s(&[2, 3], &[0.0; 6]);
    let source = f32s(&[2, 2], &[1.0; 4]);
    let err = index_add(&data, 1, &Tensor::from_vec(vec![0i64, 3]), &source).unwrap_err();
    assert_eq!(
        err.to_string(),
        "index 3 at indices[1] is out of range [-3, 2] for axis 1 of size 3"
    );
    let square = Tensor::new(vec![1, 2], vec![0i64, 1]).unwrap();
    let kind = |r: gatherscatter::Result<Tensor>| r.unwrap_err().kind();
    assert_eq!(
        kind(index_add(&data, 1, &square, &source)),
        ErrorKind::RankMismatch
    );
    assert_eq!(
        kind(index_select(&data, 1, &square)),
        ErrorKind::RankMismatch
    );
    let pair = Tensor::from_vec(vec![0i64, 1]);
    assert_eq!(
        kind(index_copy(&data, 0, &pair, &source)),
        ErrorKind::ShapeMismatch
    );
    assert_eq!(
        kind(index_copy(&data, 2, &pair, &source)),
        ErrorKind::BadAxis
    );
    let doubles = Tensor::new(vec![2, 2], vec![1.0f64; 4]).unwrap();
    assert_eq!(
        kind(index_add(&data, 1, &pair, &doubles)),
        ErrorKind::BadDType
    );
}

#[derive(Debug, Clone)]
struct Case {
    shape: Vec<usize>,
    dim: usize,
    index: Vec<i128>,
    seed: i64,
    dtype: DType,
    index_dtype: DType,
    add: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (shape(1..=3), any::<prop::sample::Index>())
        .prop_flat_map(|(shape, at)| {
            let dim = at.index(shape.len());
            let s = shape[dim] as i128;
            (
                Just((shape, dim)),
                prop::collection::vec(-s - 1..s + 1, 0..5),
                any::<i64>(),
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(DType::INDEX_TYPES.to_vec()),
                any::<bool>(),
            )
        })
        .prop_map(|((shape, dim), mut index, seed, dtype, index_dtype, add)| {
            fit_to_index_type(&mut index, index_dtype, shape[dim]);
            Case {
                shape,
                dim,
                index,
                seed,
                dtype,
                index_dtype,
                add,
            }
        })
}

fn check_case<T: RefReduce>(case: &Case) -> Result<(), TestCaseError> {
    let len: usize = case.shape.iter().product();
    let data: Vec<T> = (0..len)
        .map(|k| T::from_seed(k as i64 % 7 + case.seed % 3))
        .collect();
    let mut source_shape = case.shape.clone();
    source_shape[case.dim] = case.index.len();
    let source: Vec<T> = (0..source_shape.iter().product::<usize>())
        .map(|k| T::from_seed(k as i64 % 5 - 2))
        .collect();
    let index = index_tensor(case.index_dtype, &[case.index.len()], &case.index);
    let data_tensor = Tensor::new(case.shape.clone(), data.clone()).unwrap();
    let source_tensor = Tensor::new(source_shape.clone(), source.clone()).unwrap();
    let s = case.shape[case.dim];
    let in_range = case.index.iter().all(|&v| idx(v, s).is_some());
    // index_select: out[p] = data[p with p[dim] := idx(index[p[dim]])].
    let selected = index_select(&data_tensor, case.dim as i64, &index);
    let expected = in_range.then(|| {
        let values = coordinates(&source_shape)
            .into_iter()
            .map(|p| {
                let mut at = p.clone();
                at[case.dim] = idx(case.index[p[case.dim]], s).unwrap();
                data[offset(&at, &case.shape)].clone()
            })
            .collect();
        (source_shape.clone(), values)
    });
    check_against_reference(selected, expected, T::same)?;
    // index_add / index_copy: the slices of source in ascending order.
    let op = if case.add { index_add } else { index_copy };
    let result = op(&data_tensor, case.dim as i64, &index, &source_tensor);
    if case.add && gatherscatter::Reduction::Add.check_dtype(T::DTYPE).is_err() {
        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::BadReduction);
        return Ok(());
    }
    let expected = in_range.then(|| {
        let mut out = data.clone();
        for (flat, p) in coordinates(&source_shape).into_iter().enumerate() {
            let mut at = p.clone();
            at[case.dim] = idx(case.index[p[case.dim]], s).unwrap();
            let o = offset(&at, &case.shape);
            out[o] = if case.add {
                T::reduce("add", &out[o], &source[flat]).unwrap()
            } else {
                source[flat].clone()
            };
        }
        (case.shape.clone(), out)
    });
    check_against_reference(result, expected, T::same)
}

proptest! {
    #![proptest_config(proptest_config(1500))]

    #[test]
    fn index_select_add_and_copy_match_the_formula(case in case()) {
        for_dtype!(case.dtype, check_case(&case))?;
    }
}
