//! EmbeddingBag (PyTorch's `embedding_bag`): PyTorch's results on one
//! example in every mode, offsets in both forms, padding, per-sample
//! weights, the winning rows of max, every error, a property test
//! against the formula, and one that f32 sums are the same bits (NaNs as
//! NaNs) whichever fold (registers or memory) and thread count computes
//! them.

mod common;
mod pool;

use common::*;
use gatherscatter::tuning::{self, BagFold, Tuning};
use gatherscatter::{Aggregate, DType, EmbeddingBag, ErrorKind, Profile, Tensor, TensorView};
use pool::in_pool;
use proptest::prelude::*;

/// PyTorch's example call: weight = arange(12).view(4, 3),
/// input = [0, 2, 1, 3, 2], offsets = [0, 2, 2].
fn example() -> (Tensor, Tensor, Tensor) {
    let weight = Tensor::new(vec![4, 3], (0..12).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
    (
        weight,
        Tensor::from_vec(vec![0i64, 2, 1, 3, 2]),
        Tensor::from_vec(vec![0i64, 2, 2]),
    )
}

fn bag(op: &EmbeddingBag, offsets: &Tensor, psw: Option<&Tensor>) -> Vec<f32> {
    let (weight, indices, _) = example();
    op.run(
        &weight,
        &indices,
        Some(offsets.into()),
        psw.map(TensorView::from),
    )
    .unwrap()
    .data::<f32>()
    .unwrap()
    .to_vec()
}

// ---- the values torch.nn.functional.embedding_bag prints for the example ----

#[test]
fn sum_mean_and_max_equal_pytorchs_in_both_offset_forms() {
    let (_, _, offsets) = example();
    let with_last = Tensor::from_vec(vec![0i64, 2, 2, 5]);
    let cases: [(Aggregate, [f32; 9]); 3] = [
        (Aggregate::Sum, [6., 8., 10., 0., 0., 0., 18., 21., 24.]),
        (Aggregate::Mean, [3., 4., 5., 0., 0., 0., 6., 7., 8.]),
        (Aggregate::Amax, [6., 7., 8., 0., 0., 0., 9., 10., 11.]),
    ];
    for (mode, expected) in cases {
        let op = EmbeddingBag::new(mode);
        assert_eq!(bag(&op, &offsets, None), expected, "{mode}");
        let op = op.include_last_offset(true);
        assert_eq!(
            bag(&op, &with_last, None),
            expected,
            "{mode}, include_last_offset"
        );
    }
}

#[test]
fn padding_rows_take_no_part_and_count_from_the_end_when_negative() {
    let (_, _, offsets) = example();
    let sum = EmbeddingBag::new(Aggregate::Sum).padding_idx(2);
    assert_eq!(
        bag(&sum, &offsets, None),
        [0., 1., 2., 0., 0., 0., 12., 14., 16.]
    );
    let mean = EmbeddingBag::new(Aggregate::Mean).padding_idx(2);
    assert_eq!(
        bag(&mean, &offsets, None),
        [0., 1., 2., 0., 0., 0., 6., 7., 8.]
    );
    let last = EmbeddingBag::new(Aggregate::Sum).padding_idx(-1);
    assert_eq!(
        bag(&last, &offsets, None),
        [6., 8., 10., 0., 0., 0., 9., 11., 13.]
    );
}

#[test]
fn per_sample_weights_scale_each_row_before_the_sum() {
    let (_, _, offsets) = example();
    let psw = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0]);
    let op = EmbeddingBag::new(Aggregate::Sum);
    assert_eq!(
        bag(&op, &offsets, Some(&psw)),
        [12., 15., 18., 0., 0., 0., 75., 87., 99.]
    );
}

#[test]
fn max_names_the_winning_weight_row_and_rows_for_an_empty_bag() {
    let (weight, indices, offsets) = example();
    let (values, rows) = EmbeddingBag::new(Aggregate::Amax)
        .run_with_arg(&weight, &indices, Some((&offsets).into()), None)
        .unwrap();
    assert_eq!(values.data::<f32>().unwrap()[6..], [9., 10., 11.]);
    // PyTorch's max_indices are [[2, 2, 2], [0, 0, 0], [3, 3, 3]]: its 0
    // for the empty bag is also a real row, so this library writes 4.
    assert_eq!(rows.data(), &[2, 2, 2, 4, 4, 4, 3, 3, 3]);
}

#[test]
fn two_dimensional_indices_are_bags_of_equal_size() {
    let (weight, _, _) = example();
    let indices = Tensor::new(vec![2, 2], vec![0u8, 3, 1, 1]).unwrap();
    let out = EmbeddingBag::new(Aggregate::Mean)
        .run(&weight, &indices, None, None)
        .unwrap();
    assert_eq!(out.shape(), &[2, 3]);
    assert_eq!(out.data::<f32>().unwrap(), &[4.5, 5.5, 6.5, 3., 4., 5.]);
}

#[test]
fn integer_bags_wrap_and_their_means_round_down() {
    let weight = Tensor::new(vec![2, 1], vec![-7i8, 100]).unwrap();
    let indices = Tensor::from_vec(vec![0i32, 1, 1, 1]);
    let offsets = Tensor::from_vec(vec![0i32, 2]);
    let run = |mode| {
        EmbeddingBag::new(mode)
            .run(&weight, &indices, Some((&offsets).into()), None)
            .unwrap()
    };
    assert_eq!(run(Aggregate::Sum).data::<i8>().unwrap(), &[93, -56]);
    assert_eq!(run(Aggregate::Mean).data::<i8>().unwrap(), &[46, -28]);
}

// ---- errors ----

#[test]
fn offsets_must_start_at_zero_never_decrease_and_end_at_the_last_index() {
    let (weight, indices, _) = example();
    let run = |offsets: Vec<i64>, include_last: bool| {
        let offsets = Tensor::from_vec(offsets);
        let err = EmbeddingBag::new(Aggregate::Sum)
            .include_last_offset(include_last)
            .run(&weight, &indices, Some((&offsets).into()), None)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadSegments);
        err.to_string()
    };
    assert_eq!(
        run(vec![0, 3, 2], false),
        "offsets decreases at offsets[2]: 2 after 3; it must be non-decreasing"
    );
    assert_eq!(
        run(vec![1, 3], false),
        "the first bag starts at 1, not 0: every index must be in a bag (offsets[0] must be 0)"
    );
    assert_eq!(
        run(vec![0, 6], false),
        "offsets[1] = 6 is out of range [0, 5]: indices has 5 entries"
    );
    assert_eq!(
        run(vec![0, 2, 4], true),
        "the last offset is 4, but indices has 5 entries: with include_last_offset it must be the end of indices"
    );
    assert_eq!(
        run(vec![], true),
        "offsets is empty, but with include_last_offset it needs bags + 1 >= 1 entries"
    );
    // No bags at all and no indices: an empty result.
    let none = Tensor::from_vec(Vec::<i64>::new());
    let out = EmbeddingBag::new(Aggregate::Sum)
        .run(&weight, &none, Some((&none).into()), None)
        .unwrap();
    assert_eq!(out.shape(), &[0, 3]);
}

#[test]
fn bad_indices_padding_weights_and_shapes_are_refused_before_anything_is_written() {
    let (weight, indices, offsets) = example();
    let sum = EmbeddingBag::new(Aggregate::Sum);
    let kind = |r: gatherscatter::Result<Tensor>| r.unwrap_err().kind();
    let with = |op: &EmbeddingBag, indices: &Tensor, psw: Option<&Tensor>| {
        op.run(
            &weight,
            indices,
            Some((&offsets).into()),
            psw.map(TensorView::from),
        )
    };
    let far = Tensor::from_vec(vec![0i64, 2, 1, 3, 4]);
    let err = with(&sum, &far, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "index 4 at indices[4] is out of range [-4, 3] for axis 0 of size 4"
    );
    assert_eq!(
        kind(with(&sum.clone().padding_idx(4), &indices, None)),
        ErrorKind::BadAttribute
    );
    let psw = Tensor::from_vec(vec![1.0f32; 5]);
    let mean = EmbeddingBag::new(Aggregate::Mean);
    assert_eq!(
        kind(with(&mean, &indices, Some(&psw))),
        ErrorKind::BadAttribute
    );
    let short = Tensor::from_vec(vec![1.0f32; 4]);
    assert_eq!(
        kind(with(&sum, &indices, Some(&short))),
        ErrorKind::ShapeMismatch
    );
    let doubles = Tensor::from_vec(vec![1.0f64; 5]);
    assert_eq!(
        kind(with(&sum, &indices, Some(&doubles))),
        ErrorKind::BadDType
    );
    // Shapes: weight of rank 1, 1-D indices without offsets, 2-D with them.
    let flat = Tensor::from_vec(vec![1.0f32; 4]);
    assert_eq!(
        kind(sum.run(&flat, &indices, Some((&offsets).into()), None)),
        ErrorKind::RankMismatch
    );
    assert_eq!(
        kind(sum.run(&weight, &indices, None, None)),
        ErrorKind::ShapeMismatch
    );
    let square = Tensor::new(vec![1, 1], vec![0i64]).unwrap();
    assert_eq!(kind(with(&sum, &square, None)), ErrorKind::ShapeMismatch);
    // Winning rows of a sum, an ONNX profile, a mean of booleans.
    let arg = sum.run_with_arg(&weight, &indices, Some((&offsets).into()), None);
    assert_eq!(arg.unwrap_err().kind(), ErrorKind::BadReduction);
    let onnx = sum.clone().profile(Profile::Onnx { opset: 18 });
    assert_eq!(kind(with(&onnx, &indices, None)), ErrorKind::Unsupported);
    let flags = Tensor::new(vec![1, 1], vec![true]).unwrap();
    let zero = Tensor::from_vec(vec![0i64]);
    assert_eq!(
        kind(mean.run(&flags, &zero, Some((&zero).into()), None)),
        ErrorKind::BadReduction
    );
}

#[test]
fn run_into_leaves_the_buffer_untouched_on_an_error() {
    let (weight, indices, _) = example();
    let mut buffer = [-1.0f32; 6];
    let shape = [2, 3];
    let bad = Tensor::from_vec(vec![0i64, 9]);
    let out = gatherscatter::TypedViewMut::new(&shape, &mut buffer).unwrap();
    let err = EmbeddingBag::new(Aggregate::Sum)
        .run_into(&weight, &indices, Some((&bad).into()), None, out)
        .unwrap_err();
    assert_eq!((err.kind(), buffer), (ErrorKind::BadSegments, [-1.0; 6]));
}

// ---- property test against the formula ----

#[derive(Debug, Clone)]
struct Case {
    rows: usize,
    dim: usize,
    indices: Vec<i128>,
    /// Bag starts (sorted, from 0).
    starts: Vec<usize>,
    include_last: bool,
    padding: Option<i64>,
    weighted: bool,
    seed: i64,
    dtype: DType,
    index_dtype: DType,
    mode: Aggregate,
}

fn case() -> impl Strategy<Value = Case> {
    (0usize..5, dim(), 0usize..9)
        .prop_flat_map(|(rows, dim, n)| {
            let r = rows as i128;
            (
                Just((rows, dim)),
                prop::collection::vec(-r - 1..r + 1, n),
                prop::collection::vec(0..=n, 0..5),
                any::<bool>(),
                prop::option::of(-(rows as i64)..(rows as i64).max(1)),
                any::<bool>(),
                any::<i64>(),
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(DType::INDEX_TYPES.to_vec()),
                prop::sample::select(Aggregate::ALL.to_vec()),
            )
        })
        .prop_map(
            |(
                (rows, dim),
                mut indices,
                mut starts,
                include_last,
                padding,
                weighted,
                seed,
                dtype,
                index_dtype,
                mode,
            )| {
                fit_to_index_type(&mut indices, index_dtype, rows);
                starts.push(0);
                starts.sort();
                Case {
                    rows,
                    dim,
                    indices,
                    starts,
                    include_last,
                    padding,
                    weighted,
                    seed,
                    dtype,
                    index_dtype,
                    mode,
                }
            },
        )
}

fn check_case<T: RefReduce>(case: &Case) -> Result<(), TestCaseError> {
    let weight: Vec<T> = (0..case.rows * case.dim)
        .map(|k| T::from_seed((k as i64 * 7 + case.seed % 5) % 9 - 4))
        .collect();
    let weight_tensor = Tensor::new(vec![case.rows, case.dim], weight.clone()).unwrap();
    let n = case.indices.len();
    let indices = index_tensor(case.index_dtype, &[n], &case.indices);
    let mut offsets: Vec<i128> = case.starts.iter().map(|&s| s as i128).collect();
    if case.include_last {
        offsets.push(n as i128);
    }
    let offsets_tensor = index_tensor(case.index_dtype, &[offsets.len()], &offsets);
    let psw: Vec<T> = (0..n).map(|j| T::from_seed(j as i64 % 3 + 1)).collect();
    let psw_tensor = Tensor::from_vec(psw.clone());
    let weighted = case.weighted && case.mode == Aggregate::Sum;
    let mut op = EmbeddingBag::new(case.mode).include_last_offset(case.include_last);
    if let Some(p) = case.padding {
        op = op.padding_idx(p);
    }
    let result = op.run(
        &weight_tensor,
        &indices,
        Some((&offsets_tensor).into()),
        weighted.then(|| TensorView::from(&psw_tensor)),
    );
    if case.mode.check_dtype(T::DTYPE).is_err()
        || (weighted && gatherscatter::Reduction::Mul.check_dtype(T::DTYPE).is_err())
    {
        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::BadReduction);
        return Ok(());
    }
    if case.padding.is_some() && case.rows == 0 {
        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::BadAttribute);
        return Ok(());
    }
    let padding = case.padding.map(|p| idx(p as i128, case.rows).unwrap());
    let mut bounds = case.starts.clone();
    bounds.push(n);
    let fill = if case.mode == Aggregate::Prod {
        T::one()
    } else {
        T::zero()
    };
    let expected = reference_embedding_bag(
        &weight,
        case.rows,
        case.dim,
        &case.indices,
        &bounds,
        padding,
        weighted.then_some(&psw[..]),
        aggregate_step(case.mode),
        case.mode == Aggregate::Mean,
        &fill,
    );
    let expected = expected.map(|values| (vec![bounds.len() - 1, case.dim], values));
    check_against_reference(result, expected, T::same)
}

proptest! {
    #![proptest_config(proptest_config(2000))]

    #[test]
    fn embedding_bag_matches_the_formula(case in case()) {
        for_dtype!(case.dtype, check_case(&case))?;
    }
}

/// f32 rows of a multiple of 8 columns (the register fold's), any values
/// (NaNs, infinities, signed zeros, subnormals), bags past the 16-entry
/// prefetch, padding, sum and mean.
#[derive(Debug)]
struct FoldCase {
    dim: usize,
    values: Vec<f32>,
    rows: usize,
    indices: Vec<i64>,
    starts: Vec<usize>,
    padding: Option<i64>,
    mean: bool,
    threads: usize,
}

fn fold_case() -> impl Strategy<Value = FoldCase> {
    (
        (1usize..=34).prop_map(|k| 8 * k),
        prop::collection::vec(any::<f32>(), 1..48),
        1usize..10,
        prop::collection::vec(any::<prop::sample::Index>(), 0..70),
        prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        prop::option::of(any::<prop::sample::Index>()),
        any::<bool>(),
        1usize..=3,
    )
        .prop_map(|(dim, values, rows, picks, cuts, padding, mean, threads)| {
            let n = picks.len();
            let mut starts: Vec<usize> = cuts.iter().map(|c| c.index(n + 1)).collect();
            starts.push(0);
            starts.sort();
            FoldCase {
                dim,
                values,
                rows,
                indices: picks.iter().map(|p| p.index(rows) as i64).collect(),
                starts,
                padding: padding.map(|p| p.index(2 * rows) as i64 - rows as i64),
                mean,
                threads,
            }
        })
}

fn check_fold_case(case: &FoldCase) -> Result<(), TestCaseError> {
    let weight: Vec<f32> = (0..case.rows * case.dim)
        .map(|k| case.values[k % case.values.len()] * (1.0 + (k % 5) as f32 / 8.0))
        .collect();
    let weight_tensor = Tensor::new(vec![case.rows, case.dim], weight.clone()).unwrap();
    let indices = Tensor::from_vec(case.indices.clone());
    let offsets: Vec<i64> = case.starts.iter().map(|&s| s as i64).collect();
    let offsets = Tensor::from_vec(offsets);
    let mode = if case.mean {
        Aggregate::Mean
    } else {
        Aggregate::Sum
    };
    let mut op = EmbeddingBag::new(mode);
    if let Some(p) = case.padding {
        op = op.padding_idx(p);
    }
    let run = |fold: BagFold| {
        in_pool(case.threads, || {
            tuning::scoped(Tuning::AUTO.with_bag_fold(fold), || {
                op.run(&weight_tensor, &indices, Some((&offsets).into()), None)
            })
        })
        .map(|t| {
            t.data::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>()
        })
    };
    let registers = run(BagFold::Registers).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let memory = run(BagFold::Memory).map_err(|e| TestCaseError::fail(e.to_string()))?;
    // A NaN as any NaN: Rust leaves a computed NaN's bits unspecified.
    let canonical = |bits: &Vec<u32>| -> Vec<u32> {
        let nan = |b: u32| f32::from_bits(b).is_nan();
        bits.iter()
            .map(|&b| if nan(b) { f32::NAN.to_bits() } else { b })
            .collect()
    };
    prop_assert_eq!(canonical(&registers), canonical(&memory));
    let padding = case.padding.map(|p| idx(p as i128, case.rows).unwrap());
    let mut bounds = case.starts.clone();
    bounds.push(case.indices.len());
    let indices: Vec<i128> = case.indices.iter().map(|&i| i as i128).collect();
    let expected = reference_embedding_bag(
        &weight, case.rows, case.dim, &indices, &bounds, padding, None, "add", case.mean, &0.0f32,
    )
    .unwrap();
    let got: Vec<f32> = registers.iter().map(|&b| f32::from_bits(b)).collect();
    for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
        prop_assert!(
            g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan()),
            "element {}: {} against the formula's {}",
            k,
            g,
            e
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(proptest_config(200))]

    #[test]
    fn f32_sums_are_the_same_bits_in_registers_in_memory_and_in_the_formula(case in fold_case()) {
        check_fold_case(&case)?;
    }
}
