//! Segment reductions (pytorch_scatter's `segment_csr` / `segment_coo`):
//! documented examples, empty segments and their fill, the winning rows of
//! amax/amin, every error, and property tests against the formula.

mod common;

use common::*;
use gatherscatter::{
    Aggregate, DType, ErrorKind, Profile, SegmentCoo, SegmentCsr, Tensor, TypedViewMut,
};
use proptest::prelude::*;

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec())
}

// ---- examples ----

/// pytorch_scatter's `segment_csr` example: src [10, 6, 64], indptr
/// [0, 2, 5, 6] viewed as [1, 4] (broadcast over the first dim) gives
/// [10, 3, 64]: rows 0-1, 2-4 and 5 of each slab summed.
#[test]
fn pytorch_scatter_csr_example_reduces_along_the_last_dim_of_indptr() {
    let values: Vec<f32> = (0..10 * 6 * 64).map(|v| (v % 97) as f32).collect();
    let src = f32s(&[10, 6, 64], &values);
    let indptr = Tensor::new(vec![1, 4], vec![0i64, 2, 5, 6]).unwrap();
    let out = SegmentCsr::new(Aggregate::Sum).run(&src, &indptr).unwrap();
    assert_eq!(out.shape(), &[10, 3, 64]);
    let got = out.data::<f32>().unwrap();
    let at = |b: usize, r: usize, c: usize| values[(b * 6 + r) * 64 + c];
    for b in 0..10 {
        for c in 0..64 {
            assert_eq!(got[b * 192 + c], at(b, 0, c) + at(b, 1, c));
            assert_eq!(
                got[b * 192 + 64 + c],
                at(b, 2, c) + at(b, 3, c) + at(b, 4, c)
            );
            assert_eq!(got[b * 192 + 128 + c], at(b, 5, c));
        }
    }
}

/// pytorch_scatter's `segment_coo` example: index [0, 0, 1, 1, 1, 2]
/// (broadcast over the first dim of src [10, 6, 64]) gives the same
/// segments as indptr [0, 2, 5, 6].
#[test]
fn pytorch_scatter_coo_example_equals_the_csr_form() {
    let values: Vec<f32> = (0..10 * 6 * 64).map(|v| (v % 89) as f32 * 0.5).collect();
    let src = f32s(&[10, 6, 64], &values);
    let index = Tensor::new(vec![1, 6], vec![0i64, 0, 1, 1, 1, 2]).unwrap();
    let indptr = Tensor::new(vec![1, 4], vec![0i64, 2, 5, 6]).unwrap();
    for reduce in Aggregate::ALL {
        let coo = SegmentCoo::new(reduce).run(&src, &index).unwrap();
        let csr = SegmentCsr::new(reduce).run(&src, &indptr).unwrap();
        assert_eq!(coo, csr, "{reduce}");
    }
}

/// `torch.segment_reduce(data, reduce, offsets=[0, 2, 2, 5])` on
/// [1, 2, 3, NaN, 5]: the same values where segments are full, and its
/// identities for the empty one when given as the fill.
#[test]
fn torch_segment_reduce_example_with_its_identities_as_fill() {
    let src = f32s(&[5], &[1.0, 2.0, 3.0, f32::NAN, 5.0]);
    let offsets = i64s(&[0, 2, 2, 5]);
    let cases: [(Aggregate, f32, f32); 5] = [
        (Aggregate::Sum, 0.0, 3.0),
        (Aggregate::Mean, f32::NAN, 1.5),
        (Aggregate::Amax, f32::NEG_INFINITY, 2.0),
        (Aggregate::Amin, f32::INFINITY, 1.0),
        (Aggregate::Prod, 1.0, 2.0),
    ];
    for (reduce, identity, first) in cases {
        let out = SegmentCsr::new(reduce)
            .fill(Tensor::scalar(identity))
            .run(&src, &offsets)
            .unwrap();
        let got = out.data::<f32>().unwrap();
        assert_eq!(got[0], first, "{reduce}");
        assert_eq!(got[1].to_bits(), identity.to_bits(), "{reduce}");
        assert!(got[2].is_nan(), "{reduce}: a NaN in the segment propagates");
    }
}

#[test]
fn empty_segments_get_zero_or_one_for_prod_by_default() {
    let src = Tensor::from_vec(vec![3i16, 4]);
    let indptr = i64s(&[0, 0, 2, 2]);
    for (reduce, expected) in [
        (Aggregate::Sum, [0i16, 7, 0]),
        (Aggregate::Prod, [1, 12, 1]),
        (Aggregate::Mean, [0, 3, 0]),
        (Aggregate::Amax, [0, 4, 0]),
        (Aggregate::Amin, [0, 3, 0]),
    ] {
        let out = SegmentCsr::new(reduce).run(&src, &indptr).unwrap();
        assert_eq!(out.data::<i16>().unwrap(), &expected, "{reduce}");
    }
}

#[test]
fn integer_mean_rounds_down() {
    let src = Tensor::from_vec(vec![-7i32, 0, 5, -2]);
    let out = SegmentCsr::new(Aggregate::Mean)
        .run(&src, &i64s(&[0, 2, 4]))
        .unwrap();
    assert_eq!(out.data::<i32>().unwrap(), &[-4, 1]);
}

#[test]
fn rows_outside_the_first_and_last_boundary_take_no_part() {
    let src = Tensor::from_vec(vec![100u8, 1, 2, 200]);
    let out = SegmentCsr::new(Aggregate::Sum)
        .run(&src, &i64s(&[1, 3]))
        .unwrap();
    assert_eq!(out.data::<u8>().unwrap(), &[3]);
}

#[test]
fn each_slab_may_have_its_own_boundaries() {
    // indptr [2, 3] against src [2, 4]: row 0 splits 0..1 | 1..4, row 1 0..3 | 3..4.
    let src = Tensor::new(vec![2, 4], vec![1i64, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let indptr = Tensor::new(vec![2, 3], vec![0u16, 1, 4, 0, 3, 4]).unwrap();
    let out = SegmentCsr::new(Aggregate::Sum).run(&src, &indptr).unwrap();
    assert_eq!(out.data::<i64>().unwrap(), &[1, 9, 18, 8]);
}

#[test]
fn coo_segment_count_defaults_to_the_largest_id_plus_one_and_can_be_set() {
    let src = Tensor::from_vec(vec![1.0f64, 2.0, 3.0]);
    let index = Tensor::from_vec(vec![1u8, 1, 3]);
    let out = SegmentCoo::new(Aggregate::Sum).run(&src, &index).unwrap();
    assert_eq!(out.data::<f64>().unwrap(), &[0.0, 3.0, 0.0, 3.0]);
    let out = SegmentCoo::new(Aggregate::Sum)
        .segments(6)
        .run(&src, &index)
        .unwrap();
    assert_eq!(out.data::<f64>().unwrap(), &[0.0, 3.0, 0.0, 3.0, 0.0, 0.0]);
    let empty = Tensor::from_vec(Vec::<i64>::new());
    let out = SegmentCoo::new(Aggregate::Sum)
        .run(&Tensor::from_vec(Vec::<f64>::new()), &empty)
        .unwrap();
    assert_eq!(out.shape(), &[0]);
}

#[test]
fn strings_concatenate_and_bool_sums_are_or() {
    let src = Tensor::from_vec(vec!["a".to_string(), "b".into(), "c".into()]);
    let out = SegmentCsr::new(Aggregate::Sum)
        .run(&src, &i64s(&[0, 2, 3, 3]))
        .unwrap();
    assert_eq!(
        out.data::<String>().unwrap(),
        &["ab".to_string(), "c".into(), "".into()]
    );
    let flags = Tensor::from_vec(vec![false, true, false]);
    let out = SegmentCsr::new(Aggregate::Amin)
        .run(&flags, &i64s(&[0, 2, 3]))
        .unwrap();
    assert_eq!(out.data::<bool>().unwrap(), &[false, false]);
}

// ---- the winning rows of amax / amin ----

#[test]
fn arg_names_the_first_row_holding_the_value_and_rows_for_an_empty_segment() {
    let src = f32s(
        &[6, 2],
        &[1.0, 9.0, 5.0, 9.0, 5.0, 0.0, 2.0, 2.0, 7.0, 1.0, 3.0, 8.0],
    );
    let indptr = i64s(&[0, 3, 3, 6]);
    let (max, arg) = SegmentCsr::new(Aggregate::Amax)
        .run_with_arg(&src, &indptr)
        .unwrap();
    assert_eq!(max.data::<f32>().unwrap(), &[5.0, 9.0, 0.0, 0.0, 7.0, 8.0]);
    assert_eq!(arg.data(), &[1, 0, 6, 6, 4, 5]);
    let (min, arg) = SegmentCsr::new(Aggregate::Amin)
        .run_with_arg(&src, &indptr)
        .unwrap();
    assert_eq!(min.data::<f32>().unwrap(), &[1.0, 0.0, 0.0, 0.0, 2.0, 1.0]);
    assert_eq!(arg.data(), &[0, 2, 6, 6, 3, 4]);
}

#[test]
fn arg_follows_nan_and_tells_signed_zeros_apart() {
    let src = f32s(&[4], &[-0.0, 0.0, f32::NAN, 1.0]);
    let (max, arg) = SegmentCsr::new(Aggregate::Amax)
        .run_with_arg(&src, &i64s(&[0, 2, 4]))
        .unwrap();
    let max = max.data::<f32>().unwrap();
    assert_eq!(
        (max[0].to_bits(), max[1].is_nan()),
        (0.0f32.to_bits(), true)
    );
    assert_eq!(arg.data(), &[1, 2]);
}

#[test]
fn arg_is_refused_for_aggregates_without_a_winner() {
    let src = f32s(&[2], &[1.0, 2.0]);
    for reduce in [Aggregate::Sum, Aggregate::Prod, Aggregate::Mean] {
        let err = SegmentCsr::new(reduce)
            .run_with_arg(&src, &i64s(&[0, 2]))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadReduction, "{reduce}");
    }
}

// ---- errors ----

fn csr_error(src: &Tensor, indptr: &Tensor) -> gatherscatter::Error {
    SegmentCsr::new(Aggregate::Sum)
        .run(src, indptr)
        .unwrap_err()
}

#[test]
fn bad_indptr_is_refused_naming_the_entry() {
    let src = f32s(&[4], &[1.0; 4]);
    let cases = [
        (
            i64s(&[0, 3, 2]),
            "indptr decreases at indptr[2]: 2 after 3; it must be non-decreasing",
        ),
        (
            i64s(&[0, 5]),
            "indptr[1] = 5 is out of range [0, 4]: src has 4 rows along axis 0",
        ),
        (
            i64s(&[-1, 2]),
            "indptr[0] = -1 is out of range [0, 4]: src has 4 rows along axis 0",
        ),
        (
            i64s(&[]),
            "indptr has shape [0]: its last dim is empty, but it needs segments + 1 >= 1 entries",
        ),
    ];
    for (indptr, message) in cases {
        let err = csr_error(&src, &indptr);
        assert_eq!(
            (err.kind(), err.to_string()),
            (ErrorKind::BadSegments, message.into())
        );
    }
    let huge = Tensor::from_vec(vec![0u64, u64::MAX]);
    assert_eq!(csr_error(&src, &huge).kind(), ErrorKind::BadSegments);
}

#[test]
fn bad_coo_index_is_refused_naming_the_id() {
    let src = f32s(&[4], &[1.0; 4]);
    let run = |index: &[i64], segments: Option<usize>| {
        let mut op = SegmentCoo::new(Aggregate::Sum);
        if let Some(n) = segments {
            op = op.segments(n);
        }
        let err = op.run(&src, &i64s(index)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadSegments);
        err.to_string()
    };
    assert_eq!(
        run(&[0, 2, 1, 3], None),
        "index is not sorted: index[2] = 1 after 2; segment_coo needs ids non-decreasing along the last dim"
    );
    assert_eq!(
        run(&[-1, 0, 0, 0], None),
        "index[0] = -1 is negative; segment ids are >= 0"
    );
    assert_eq!(
        run(&[0, 0, 1, 3], Some(3)),
        "index[3] = 3 is out of range [0, 2]: there are 3 segments"
    );
}

#[test]
fn coo_order_errors_come_before_count_errors_and_huge_unsigned_ids_stay_exact() {
    let src = f32s(&[4], &[1.0; 4]);
    let run = |index: Vec<u64>, segments: Option<usize>| {
        let mut op = SegmentCoo::new(Aggregate::Sum);
        if let Some(n) = segments {
            op = op.segments(n);
        }
        op.run(&src, &Tensor::from_vec(index))
            .unwrap_err()
            .to_string()
    };
    // Past the count at [1], out of order at [3]: the order is reported.
    assert_eq!(
        run(vec![0, 5, 5, 1], Some(3)),
        "index is not sorted: index[3] = 1 after 5; segment_coo needs ids non-decreasing along the last dim"
    );
    // Ids beyond i64's range compare exactly, not as one saturated value.
    assert_eq!(
        run(vec![0, 1, u64::MAX, u64::MAX - 1], None),
        "index is not sorted: index[3] = 18446744073709551614 after 18446744073709551615; segment_coo needs ids non-decreasing along the last dim"
    );
    assert_eq!(
        run(vec![0, 1, 2, u64::MAX], Some(3)),
        "index[3] = 18446744073709551615 is out of range [0, 2]: there are 3 segments"
    );
    assert_eq!(
        run(vec![0, 1, 2, u64::MAX], None),
        "index holds 18446744073709551615, too large a segment count"
    );
}

#[test]
fn coo_ids_are_sorted_within_each_row_and_counted_over_all_rows() {
    // Two rows of ids: the second starts lower than the first ends (allowed)
    // and holds the largest id, which sets the segment count.
    let src = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let index = Tensor::new(vec![2, 3], vec![1i64, 1, 2, 0, 3, 3]).unwrap();
    let out = SegmentCoo::new(Aggregate::Sum).run(&src, &index).unwrap();
    assert_eq!(out.shape(), &[2, 4]);
    assert_eq!(
        out.data::<f32>().unwrap(),
        &[0.0, 3.0, 3.0, 0.0, 4.0, 0.0, 0.0, 11.0]
    );
    // Out of order in the second row: named with its full position.
    let bad = Tensor::new(vec![2, 3], vec![0i64, 1, 2, 1, 3, 2]).unwrap();
    let err = SegmentCoo::new(Aggregate::Sum).run(&src, &bad).unwrap_err();
    assert_eq!(
        err.to_string(),
        "index is not sorted: index[1, 2] = 2 after 3; segment_coo needs ids non-decreasing along the last dim"
    );
}

#[test]
fn shape_rank_dtype_and_profile_errors_are_refused() {
    let src = f32s(&[2, 3], &[1.0; 6]);
    let sum = SegmentCsr::new(Aggregate::Sum);
    let kind = |r: gatherscatter::Result<Tensor>| r.unwrap_err().kind();
    // indptr of rank 0, and of a rank above src's.
    assert_eq!(
        kind(sum.run(&src, &Tensor::scalar(0i64))),
        ErrorKind::RankMismatch
    );
    let deep = Tensor::new(vec![2, 3, 1], vec![0i64; 6]).unwrap();
    assert_eq!(kind(sum.run(&src, &deep)), ErrorKind::RankMismatch);
    // indptr [3, 2] against src [2, 3]: its first dim is neither 2 nor 1.
    let wide = Tensor::new(vec![3, 2], vec![0i64; 6]).unwrap();
    assert_eq!(kind(sum.run(&src, &wide)), ErrorKind::ShapeMismatch);
    // A coo index must have one id per row along the axis.
    let short = i64s(&[0]);
    assert_eq!(
        kind(SegmentCoo::new(Aggregate::Sum).run(&src, &short)),
        ErrorKind::ShapeMismatch
    );
    // Float boundaries, a fill of another dtype or more than one value.
    let err = sum.run(&src, &f32s(&[2], &[0.0, 1.0])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert!(
        err.to_string().starts_with("indptr has dtype float"),
        "{err}"
    );
    let fill = sum.clone().fill(Tensor::scalar(0i32));
    assert_eq!(kind(fill.run(&src, &i64s(&[0, 2]))), ErrorKind::BadDType);
    let fill = sum.clone().fill(Tensor::from_vec(vec![0.0f32, 1.0]));
    assert_eq!(
        kind(fill.run(&src, &i64s(&[0, 2]))),
        ErrorKind::ShapeMismatch
    );
    // Aggregates the dtype lacks; profiles that have no such operator.
    let bools = Tensor::from_vec(vec![true]);
    assert_eq!(
        kind(SegmentCsr::new(Aggregate::Mean).run(&bools, &i64s(&[0, 1]))),
        ErrorKind::BadReduction
    );
    let onnx = sum.clone().profile(Profile::Onnx { opset: 18 });
    assert_eq!(kind(onnx.run(&src, &i64s(&[0, 2]))), ErrorKind::Unsupported);
}

#[test]
fn run_into_writes_a_callers_buffer_and_leaves_it_untouched_on_an_error() {
    let src = Tensor::from_vec(vec![1u32, 2, 3, 4]);
    let mut buffer = [7u32; 2];
    let shape = [2];
    SegmentCsr::new(Aggregate::Amax)
        .run_into(
            &src,
            &i64s(&[0, 1, 4]),
            TypedViewMut::new(&shape, &mut buffer).unwrap(),
        )
        .unwrap();
    assert_eq!(buffer, [1, 4]);
    let mut buffer = [7u32; 2];
    let err = SegmentCsr::new(Aggregate::Amax)
        .run_into(
            &src,
            &i64s(&[0, 5, 4]),
            TypedViewMut::new(&shape, &mut buffer).unwrap(),
        )
        .unwrap_err();
    assert_eq!((err.kind(), buffer), (ErrorKind::BadSegments, [7, 7]));
}

// ---- property tests against the formula ----

#[derive(Debug, Clone)]
struct Case {
    src_shape: Vec<usize>,
    axis: usize,
    /// Per dim before the axis: whether the boundaries broadcast there.
    broadcast: Vec<bool>,
    segments: usize,
    seed: u64,
    /// 0: valid; else which rule the boundaries break.
    corrupt: u8,
    dtype: DType,
    index_dtype: DType,
    reduce: Aggregate,
    fill: bool,
}

fn case() -> impl Strategy<Value = Case> {
    shape(1..=3)
        .prop_flat_map(|src_shape| {
            let rank = src_shape.len();
            (
                Just(src_shape),
                0..rank,
                prop::collection::vec(any::<bool>(), rank),
                0usize..5,
                any::<u64>(),
                prop_oneof![6 => Just(0u8), 1 => 1u8..4],
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(DType::INDEX_TYPES.to_vec()),
                prop::sample::select(Aggregate::ALL.to_vec()),
                any::<bool>(),
            )
        })
        .prop_map(
            |(
                src_shape,
                axis,
                mut broadcast,
                segments,
                seed,
                corrupt,
                dtype,
                index_dtype,
                reduce,
                fill,
            )| {
                broadcast.truncate(axis);
                Case {
                    src_shape,
                    axis,
                    broadcast,
                    segments,
                    seed,
                    corrupt,
                    dtype,
                    index_dtype,
                    reduce,
                    fill,
                }
            },
        )
}

/// A small deterministic generator, so one seed gives every value.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

impl Case {
    fn lead_shape(&self) -> Vec<usize> {
        self.src_shape[..self.axis]
            .iter()
            .zip(&self.broadcast)
            .map(|(&n, &b)| if b { 1 } else { n })
            .collect()
    }

    fn src<T: FromSeed>(&self) -> Vec<T> {
        let mut rng = Rng(self.seed ^ 0x5eed);
        let len: usize = self.src_shape.iter().product();
        // Few distinct values: ties for amax/amin and repeated sums.
        (0..len)
            .map(|_| T::from_seed(rng.below(7) as i64 - 3))
            .collect()
    }

    /// Boundary rows (`indptr`), each sorted in `[0, rows]`, and the
    /// corruption if any: a decrease, or an entry past either end.
    fn indptr(&self) -> Vec<i128> {
        let rows = self.src_shape[self.axis];
        let mut rng = Rng(self.seed);
        let lead: usize = self.lead_shape().iter().product();
        let width = self.segments + 1;
        let mut flat = Vec::new();
        for _ in 0..lead {
            let mut row: Vec<i128> = (0..width).map(|_| rng.below(rows + 1) as i128).collect();
            row.sort();
            flat.extend(row);
        }
        let signed = index_type_min(self.index_dtype) < 0;
        if !flat.is_empty() {
            let at = rng.below(flat.len());
            match self.corrupt {
                1 if flat.len() >= 2 && flat.iter().any(|&v| v > 0) => {
                    // A decrease: the largest entry moved first.
                    let row = at / width * width;
                    if width >= 2 && flat[row..row + width].iter().any(|&v| v > flat[row]) {
                        let top = *flat[row..row + width].iter().max().unwrap();
                        flat[row] = top;
                        flat[row + width - 1] = 0;
                    }
                }
                2 => flat[at] = rows as i128 + 1,
                3 if signed => flat[at] = -1,
                _ => {}
            }
        }
        flat
    }

    /// One segment id per row, sorted, in `[0, segments)` (`segments >= 1`),
    /// and the corruption if any: unsorted, negative, or past the count.
    fn index(&self) -> Vec<i128> {
        let rows = self.src_shape[self.axis];
        let mut rng = Rng(self.seed);
        let lead: usize = self.lead_shape().iter().product();
        let mut flat = Vec::new();
        for _ in 0..lead {
            let mut row: Vec<i128> = (0..rows)
                .map(|_| rng.below(self.segments) as i128)
                .collect();
            row.sort();
            flat.extend(row);
        }
        let signed = index_type_min(self.index_dtype) < 0;
        if !flat.is_empty() {
            let at = rng.below(flat.len());
            match self.corrupt {
                1 if rows >= 2 && self.segments >= 2 => {
                    let row = at / rows * rows;
                    flat[row] = self.segments as i128 - 1;
                    flat[row + rows - 1] = 0;
                }
                2 => flat[at] = self.segments as i128,
                3 if signed => flat[at] = -1,
                _ => {}
            }
        }
        flat
    }

    fn boundary_shape(&self, last: usize) -> Vec<usize> {
        let mut shape = self.lead_shape();
        shape.push(last);
        shape
    }
}

fn valid_indptr(flat: &[i128], width: usize, rows: usize) -> bool {
    flat.chunks(width.max(1)).all(|row| {
        row.iter().all(|&v| (0..=rows as i128).contains(&v)) && row.windows(2).all(|w| w[0] <= w[1])
    })
}

fn valid_index(flat: &[i128], rows: usize, segments: usize) -> bool {
    flat.chunks(rows.max(1)).all(|row| {
        row.iter().all(|&v| (0..segments as i128).contains(&v))
            && row.windows(2).all(|w| w[0] <= w[1])
    })
}

/// What `run_with_arg` returns.
type WithArg = gatherscatter::Result<(Tensor, gatherscatter::TypedTensor<i64>)>;

/// The op's values and, for amax/amin, its winning rows against the formula.
fn check_result<T: RefReduce>(
    case: &Case,
    src: &[T],
    op_result: (gatherscatter::Result<Tensor>, Option<WithArg>),
    valid: bool,
    members: impl Fn(&[usize], usize) -> Vec<usize>,
) -> Result<(), TestCaseError> {
    let (values, with_arg) = op_result;
    if case.reduce.check_dtype(T::DTYPE).is_err() {
        prop_assert_eq!(values.unwrap_err().kind(), ErrorKind::BadReduction);
        return Ok(());
    }
    if !valid {
        prop_assert_eq!(values.unwrap_err().kind(), ErrorKind::BadSegments);
        return Ok(());
    }
    let fill = if case.fill {
        T::from_seed(77)
    } else if case.reduce == Aggregate::Prod {
        T::one()
    } else {
        T::zero()
    };
    let Some((shape, expected)) = reference_segment(
        src,
        &case.src_shape,
        case.axis,
        case.segments,
        &members,
        aggregate_step(case.reduce),
        case.reduce == Aggregate::Mean,
        &fill,
    ) else {
        return Err(TestCaseError::fail("reference lacks the aggregate"));
    };
    let got = values.map_err(|e| TestCaseError::fail(e.to_string()))?;
    check_against_reference(
        Ok(got.clone()),
        Some((shape.clone(), expected.clone())),
        T::same,
    )?;
    if let Some(with_arg) = with_arg {
        let (again, arg) = with_arg.map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&again, &got);
        let rows = case.src_shape[case.axis];
        for (k, p) in coordinates(&shape).into_iter().enumerate() {
            let first = members(&p[..case.axis], p[case.axis])
                .into_iter()
                .find(|&r| {
                    let mut at = p.clone();
                    at[case.axis] = r;
                    T::same(&src[offset(&at, &case.src_shape)], &expected[k])
                });
            prop_assert_eq!(
                arg.data()[k],
                first.unwrap_or(rows) as i64,
                "arg at {:?}",
                p
            );
        }
    }
    Ok(())
}

fn check_csr<T: RefReduce>(case: &Case) -> Result<(), TestCaseError> {
    let src = case.src::<T>();
    let src_tensor = Tensor::new(case.src_shape.clone(), src.clone()).unwrap();
    let width = case.segments + 1;
    let flat = case.indptr();
    let indptr = index_tensor(case.index_dtype, &case.boundary_shape(width), &flat);
    let mut op = SegmentCsr::new(case.reduce);
    if case.fill {
        op = op.fill(Tensor::scalar(T::from_seed(77)));
    }
    let arg = matches!(case.reduce, Aggregate::Amax | Aggregate::Amin)
        .then(|| op.run_with_arg(&src_tensor, &indptr));
    let valid = valid_indptr(&flat, width, case.src_shape[case.axis]);
    let lead = case.lead_shape();
    let members = |slab: &[usize], s: usize| {
        let row = broadcast_row(slab, &lead) * width;
        (flat[row + s] as usize..flat[row + s + 1] as usize).collect()
    };
    check_result(
        case,
        &src,
        (op.run(&src_tensor, &indptr), arg),
        valid,
        members,
    )
}

fn check_coo<T: RefReduce>(case: &Case) -> Result<(), TestCaseError> {
    let segments = case.segments.max(1);
    let case = Case {
        segments,
        ..case.clone()
    };
    let src = case.src::<T>();
    let src_tensor = Tensor::new(case.src_shape.clone(), src.clone()).unwrap();
    let rows = case.src_shape[case.axis];
    let flat = case.index();
    let index = index_tensor(case.index_dtype, &case.boundary_shape(rows), &flat);
    let mut op = SegmentCoo::new(case.reduce).segments(segments);
    if case.fill {
        op = op.fill(Tensor::scalar(T::from_seed(77)));
    }
    let arg = matches!(case.reduce, Aggregate::Amax | Aggregate::Amin)
        .then(|| op.run_with_arg(&src_tensor, &index));
    let valid = valid_index(&flat, rows, segments);
    let lead = case.lead_shape();
    let members = |slab: &[usize], s: usize| {
        let row = broadcast_row(slab, &lead) * rows;
        (0..rows).filter(|&r| flat[row + r] == s as i128).collect()
    };
    check_result(
        &case,
        &src,
        (op.run(&src_tensor, &index), arg),
        valid,
        members,
    )
}

proptest! {
    #![proptest_config(proptest_config(1500))]

    #[test]
    fn segment_csr_matches_the_formula(case in case()) {
        for_dtype!(case.dtype, check_csr(&case))?;
    }

    #[test]
    fn segment_coo_matches_the_formula(case in case()) {
        for_dtype!(case.dtype, check_coo(&case))?;
    }
}

#[test]
fn a_segment_count_too_large_for_memory_is_an_allocation_error_not_an_abort() {
    // 2^40 segments: their boundaries alone would take 8 TiB.
    let src = f32s(&[2], &[1.0, 2.0]);
    let err = SegmentCoo::new(Aggregate::Sum)
        .segments(1 << 40)
        .run(&src, &i64s(&[0, 1]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfMemory);
}

#[test]
fn an_output_too_large_to_count_is_a_size_overflow_not_a_panic() {
    // src [2, 0, 2^62, 4] holds nothing, but one segment per slab would
    // make the output [2, 1, 2^62, 4].
    let src = Tensor::new(vec![2, 0, 1 << 62, 4], Vec::<f32>::new()).unwrap();
    let indptr = Tensor::new(vec![2, 2], vec![0i64; 4]).unwrap();
    let err = SegmentCsr::new(Aggregate::Sum)
        .run(&src, &indptr)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SizeOverflow);
    let index = Tensor::new(vec![2, 0], Vec::<i64>::new()).unwrap();
    let err = SegmentCoo::new(Aggregate::Sum)
        .segments(1)
        .run(&src, &index)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SizeOverflow);
    // With no segments the output is empty.
    let none = Tensor::new(vec![2, 1], vec![0i64; 2]).unwrap();
    let out = SegmentCsr::new(Aggregate::Sum).run(&src, &none).unwrap();
    assert_eq!(out.shape(), &[2, 0, 1 << 62, 4]);
}
