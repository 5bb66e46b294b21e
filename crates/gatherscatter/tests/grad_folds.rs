//! Gradients of the folds over groups of rows (spec §2.17): SegmentCsr,
//! SegmentCoo and EmbeddingBag, against central finite differences of the
//! library's own forward in f64 for every aggregate, bit-identical for 1,
//! 2, 3 and 5 threads, the tie, zero and padding rules by name, and every
//! error.

mod common;
mod pool;

use common::*;
use gatherscatter::{
    Aggregate, Complex64, EmbeddingBag, ErrorKind, SegmentCoo, SegmentCsr, Tensor, TensorView,
};
use pool::in_pool;
use proptest::prelude::*;

/// A small deterministic generator for the values of a case.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n.max(1) as u64) as usize
    }
}

/// `n` distinct values (gaps of at least 0.37), shuffled: a max never
/// ties across rows, and a step of 1e-4 never changes a winner.
fn distinct(n: usize, seed: u64) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n)
        .map(|i| (i as f64 - n as f64 / 2.0) * 0.37 + 0.11)
        .collect();
    let mut draw = Draw(seed);
    for i in (1..n).rev() {
        v.swap(i, draw.below(i + 1));
    }
    v
}

fn f64s(shape: &[usize], values: Vec<f64>) -> Tensor {
    Tensor::new(shape.to_vec(), values).unwrap()
}

fn i64s(shape: &[usize], values: Vec<i64>) -> Tensor {
    Tensor::new(shape.to_vec(), values).unwrap()
}

/// `Σ grad_out · out`.
fn dot(out: &Tensor, grad_out: &Tensor) -> f64 {
    let (o, g) = (out.data::<f64>().unwrap(), grad_out.data::<f64>().unwrap());
    o.iter().zip(g).map(|(o, g)| o * g).sum()
}

// -- segments

#[derive(Debug, Clone)]
struct SegmentCase {
    src_shape: Vec<usize>,
    /// The boundary tensor's rank: the axis is `rank - 1`.
    rank: usize,
    /// Which leading dims of the boundaries are 1 (broadcast).
    broadcast: Vec<bool>,
    segments: usize,
    reduce: Aggregate,
    seed: u64,
}

fn segment_case() -> impl Strategy<Value = SegmentCase> {
    (
        prop::collection::vec(0usize..4, 1..=3),
        any::<prop::sample::Index>(),
        prop::collection::vec(any::<bool>(), 3),
        0usize..4,
        prop::sample::select(Aggregate::ALL.to_vec()),
        any::<u64>(),
    )
        .prop_map(|(src_shape, rank, broadcast, segments, reduce, seed)| {
            let rank = rank.index(src_shape.len()) + 1;
            SegmentCase {
                broadcast: broadcast[..rank - 1].to_vec(),
                src_shape,
                rank,
                segments,
                reduce,
                seed,
            }
        })
}

impl SegmentCase {
    fn boundary_shape(&self, last: usize) -> Vec<usize> {
        let mut shape: Vec<usize> = (0..self.rank - 1)
            .map(|d| {
                if self.broadcast[d] {
                    1
                } else {
                    self.src_shape[d]
                }
            })
            .collect();
        shape.push(last);
        shape
    }

    /// Non-decreasing boundaries in `[0, rows]`, per boundary row.
    fn indptr(&self) -> Tensor {
        let shape = self.boundary_shape(self.segments + 1);
        let rows = self.src_shape[self.rank - 1];
        let count: usize = shape[..self.rank - 1].iter().product();
        let mut draw = Draw(self.seed ^ 1);
        let mut flat = Vec::new();
        for _ in 0..count {
            let mut row: Vec<i64> = (0..=self.segments)
                .map(|_| draw.below(rows + 1) as i64)
                .collect();
            row.sort();
            flat.extend(row);
        }
        i64s(&shape, flat)
    }

    /// Sorted ids below `segments`, one per row (no ids when there are no
    /// segments: then only zero rows fit).
    fn index(&self) -> Option<Tensor> {
        let rows = self.src_shape[self.rank - 1];
        if self.segments == 0 && rows > 0 {
            return None;
        }
        let shape = self.boundary_shape(rows);
        let count: usize = shape[..self.rank - 1].iter().product();
        let mut draw = Draw(self.seed ^ 2);
        let mut flat = Vec::new();
        for _ in 0..count {
            let mut row: Vec<i64> = (0..rows)
                .map(|_| draw.below(self.segments) as i64)
                .collect();
            row.sort();
            flat.extend(row);
        }
        Some(i64s(&shape, flat))
    }
}

/// The gradient against central differences of `Σ grad_out · forward(src)`.
fn check_segment_fd(
    what: &str,
    src: &Tensor,
    grad: impl Fn(&Tensor, &Tensor) -> gatherscatter::Result<Tensor>,
    forward: impl Fn(&Tensor) -> Tensor,
    seed: u64,
) -> Result<(), TestCaseError> {
    let out = forward(src);
    let grad_out = f64s(out.shape(), distinct(out.len(), seed ^ 3));
    let analytic = grad(src, &grad_out).map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    prop_assert_eq!(analytic.shape(), src.shape());
    check_finite_differences(
        what,
        src.data::<f64>().unwrap(),
        analytic.data::<f64>().unwrap(),
        1e-4,
        1e-5,
        |v| dot(&forward(&f64s(src.shape(), v.to_vec())), &grad_out),
    )
}

proptest! {
    #![proptest_config(proptest_config(200))]

    #[test]
    fn segment_gradients_are_the_finite_differences(case in segment_case()) {
        let len: usize = case.src_shape.iter().product();
        let src = f64s(&case.src_shape, distinct(len, case.seed));
        let csr = SegmentCsr::new(case.reduce);
        let indptr = case.indptr();
        check_segment_fd(
            &format!("csr {:?}", case.reduce),
            &src,
            |s, g| csr.grad(s, &indptr, g),
            |s| csr.run(s, &indptr).unwrap(),
            case.seed,
        )?;
        if let Some(index) = case.index() {
            let coo = SegmentCoo::new(case.reduce).segments(case.segments);
            check_segment_fd(
                &format!("coo {:?}", case.reduce),
                &src,
                |s, g| coo.grad(s, &index, g),
                |s| coo.run(s, &index).unwrap(),
                case.seed,
            )?;
        }
    }
}

#[test]
fn tied_rows_of_a_segment_max_share_its_gradient_and_nan_results_go_to_the_nans() {
    let src = f64s(&[5], vec![3.0, 1.0, 3.0, f64::NAN, 2.0]);
    let indptr = i64s(&[3], vec![0, 3, 5]);
    let grad_out = f64s(&[2], vec![1.0, 10.0]);
    let grad = SegmentCsr::new(Aggregate::Amax)
        .grad(&src, &indptr, &grad_out)
        .unwrap();
    assert_eq!(grad.data::<f64>().unwrap(), &[0.5, 0.0, 0.5, 10.0, 0.0]);
}

#[test]
fn a_segment_product_with_zeros_has_exact_gradients() {
    let src = f64s(&[4], vec![2.0, 0.0, 3.0, 0.0]);
    let index = i64s(&[4], vec![0, 0, 0, 1]);
    let grad_out = f64s(&[2], vec![1.0, 5.0]);
    let grad = SegmentCoo::new(Aggregate::Prod)
        .grad(&src, &index, &grad_out)
        .unwrap();
    // Segment 0 = 2·0·3: only the zero's derivative is non-zero; segment 1 = src[3].
    assert_eq!(grad.data::<f64>().unwrap(), &[0.0, 6.0, 0.0, 5.0]);
}

#[test]
fn a_complex_product_passes_the_conjugate_of_the_others() {
    let (a, b) = (Complex64::new(1.0, 2.0), Complex64::new(3.0, -1.0));
    let src = Tensor::from_vec(vec![a, b]);
    let indptr = i64s(&[2], vec![0, 2]);
    let g = Complex64::new(0.5, 1.0);
    let grad = SegmentCsr::new(Aggregate::Prod)
        .grad(&src, &indptr, &Tensor::from_vec(vec![g]))
        .unwrap();
    assert_eq!(
        grad.data::<Complex64>().unwrap(),
        &[g * b.conj(), g * a.conj()]
    );
}

#[test]
fn half_precision_gradients_are_the_f32_ones_rounded_once() {
    use gatherscatter::{bf16, f16};
    let values = [0.3f32, 1.7, -2.2, 0.9, 4.1, 0.25];
    let indptr = i64s(&[3], vec![0, 4, 6]);
    let grad_out = [0.7f32, -1.3];
    for reduce in Aggregate::ALL {
        let op = SegmentCsr::new(reduce);
        let wide = op
            .grad(
                &Tensor::from_vec(values.to_vec()),
                &indptr,
                &Tensor::from_vec(grad_out.to_vec()),
            )
            .unwrap();
        let wide = wide.data::<f32>().unwrap();
        let half = op
            .grad(
                &Tensor::from_vec(values.map(f16::from_f32).to_vec()),
                &indptr,
                &Tensor::from_vec(grad_out.map(f16::from_f32).to_vec()),
            )
            .unwrap();
        let brain = op
            .grad(
                &Tensor::from_vec(values.map(bf16::from_f32).to_vec()),
                &indptr,
                &Tensor::from_vec(grad_out.map(bf16::from_f32).to_vec()),
            )
            .unwrap();
        // The inputs are rounded to the half type first, so compare with
        // the f32 gradient of the rounded inputs.
        let rounded = |round: fn(f32) -> f32| {
            op.grad(
                &Tensor::from_vec(values.map(round).to_vec()),
                &indptr,
                &Tensor::from_vec(grad_out.map(round).to_vec()),
            )
            .unwrap()
            .data::<f32>()
            .unwrap()
            .to_vec()
        };
        let via_f16: Vec<f16> = rounded(|x| f16::from_f32(x).to_f32())
            .into_iter()
            .map(f16::from_f32)
            .collect();
        let via_bf16: Vec<bf16> = rounded(|x| bf16::from_f32(x).to_f32())
            .into_iter()
            .map(bf16::from_f32)
            .collect();
        assert_eq!(half.data::<f16>().unwrap(), &via_f16[..], "{reduce:?}");
        assert_eq!(brain.data::<bf16>().unwrap(), &via_bf16[..], "{reduce:?}");
        assert_eq!(wide.len(), values.len());
    }
}

#[test]
fn segment_gradient_errors_are_the_forwards_or_name_grad_out() {
    let src = f64s(&[3], vec![1.0, 2.0, 3.0]);
    let grad_out = f64s(&[2], vec![1.0, 1.0]);
    let op = SegmentCsr::new(Aggregate::Sum);
    let decreasing = i64s(&[3], vec![0, 2, 1]);
    let err = op.grad(&src, &decreasing, &grad_out).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadSegments, "{err}");
    assert_eq!(
        err.to_string(),
        op.run(&src, &decreasing).unwrap_err().to_string()
    );
    let indptr = i64s(&[3], vec![0, 1, 3]);
    let wrong_shape = op.grad(&src, &indptr, &f64s(&[3], vec![0.0; 3]));
    assert_eq!(wrong_shape.unwrap_err().kind(), ErrorKind::ShapeMismatch);
    let wrong_dtype = op.grad(&src, &indptr, &Tensor::from_vec(vec![1.0f32, 1.0]));
    assert_eq!(wrong_dtype.unwrap_err().kind(), ErrorKind::BadDType);
    let ints = Tensor::from_vec(vec![1i32, 2, 3]);
    let err = op.grad(&ints, &indptr, &Tensor::from_vec(vec![1i32, 1]));
    assert_eq!(err.unwrap_err().kind(), ErrorKind::BadDType);
    let bad_id = SegmentCoo::new(Aggregate::Sum).grad(&src, &i64s(&[3], vec![1, 0, 0]), &grad_out);
    assert_eq!(bad_id.unwrap_err().kind(), ErrorKind::BadSegments);
}

// -- EmbeddingBag

#[derive(Debug, Clone)]
struct BagCase {
    rows: usize,
    dim: usize,
    entries: usize,
    bags: usize,
    mode: Aggregate,
    padding: Option<i64>,
    weighted: bool,
    include_last_offset: bool,
    seed: u64,
}

fn bag_case() -> impl Strategy<Value = BagCase> {
    (
        (1usize..5, 0usize..4, 0usize..9, 1usize..5),
        prop::sample::select(Aggregate::ALL.to_vec()),
        prop::option::of(-4i64..4),
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |((rows, dim, entries, bags), mode, padding, weighted, include_last_offset, seed)| {
                BagCase {
                    rows,
                    dim,
                    entries,
                    bags,
                    mode,
                    padding: padding.map(|p| p.rem_euclid(2 * rows as i64) - rows as i64),
                    weighted: weighted && mode == Aggregate::Sum,
                    include_last_offset,
                    seed,
                }
            },
        )
}

impl BagCase {
    fn op(&self) -> EmbeddingBag {
        let op = EmbeddingBag::new(self.mode).include_last_offset(self.include_last_offset);
        match self.padding {
            Some(p) => op.padding_idx(p),
            None => op,
        }
    }

    /// Indices in `[-rows, rows)` (duplicates likely), and offsets that
    /// start at 0 and never decrease.
    fn indices_and_offsets(&self) -> (Tensor, Tensor) {
        let mut draw = Draw(self.seed ^ 5);
        let rows = self.rows as i64;
        let indices: Vec<i64> = (0..self.entries)
            .map(|_| draw.below(2 * self.rows) as i64 - rows)
            .collect();
        let mut starts: Vec<i64> = (0..self.bags)
            .map(|b| {
                if b == 0 {
                    0
                } else {
                    draw.below(self.entries + 1) as i64
                }
            })
            .collect();
        starts.sort();
        if self.include_last_offset {
            starts.push(self.entries as i64);
        }
        let offsets_len = starts.len();
        (i64s(&[self.entries], indices), i64s(&[offsets_len], starts))
    }
}

proptest! {
    #![proptest_config(proptest_config(300))]

    #[test]
    fn embedding_bag_gradients_are_the_finite_differences(case in bag_case()) {
        let (indices, offsets) = case.indices_and_offsets();
        let op = case.op();
        let shape = [case.rows, case.dim];
        let weight = f64s(&shape, distinct(case.rows * case.dim, case.seed));
        let psw = case.weighted.then(|| f64s(&[case.entries], distinct(case.entries, case.seed ^ 7)));
        let forward = |w: &Tensor, p: Option<&Tensor>| {
            op.run(w, &indices, Some((&offsets).into()), p.map(TensorView::from)).unwrap()
        };
        let out = forward(&weight, psw.as_ref());
        let grad_out = f64s(out.shape(), distinct(out.len(), case.seed ^ 3));
        let grads = op
            .grad(&weight, &indices, Some((&offsets).into()), psw.as_ref().map(TensorView::from), &grad_out)
            .map_err(|e| TestCaseError::fail(format!("{case:?}: {e}")))?;
        prop_assert_eq!(grads.weight.shape(), &shape[..]);
        // The forward's result handed in gives the same gradients, bit for bit.
        let given = op
            .grad_with_output(&weight, &indices, Some((&offsets).into()), psw.as_ref().map(TensorView::from), Some((&out).into()), &grad_out)
            .map_err(|e| TestCaseError::fail(format!("{case:?}: {e}")))?;
        prop_assert_eq!(&given, &grads);
        let what = format!("{:?} weight", case.mode);
        check_finite_differences(&what, weight.data::<f64>().unwrap(), grads.weight.data::<f64>().unwrap(), 1e-4, 1e-5, |v| {
            dot(&forward(&f64s(&shape, v.to_vec()), psw.as_ref()), &grad_out)
        })?;
        match &psw {
            Some(p) => {
                let analytic = grads.per_sample_weights.as_ref().unwrap();
                prop_assert_eq!(analytic.shape(), p.shape());
                check_finite_differences("per_sample_weights", p.data::<f64>().unwrap(), analytic.data::<f64>().unwrap(), 1e-4, 1e-5, |v| {
                    dot(&forward(&weight, Some(&f64s(p.shape(), v.to_vec()))), &grad_out)
                })?;
            }
            None => prop_assert!(grads.per_sample_weights.is_none()),
        }
        if let Some(p) = case.padding {
            let row = p.rem_euclid(case.rows as i64) as usize;
            let grad = grads.weight.data::<f64>().unwrap();
            prop_assert!(grad[row * case.dim..(row + 1) * case.dim].iter().all(|&g| g == 0.0));
        }
    }
}

#[test]
fn the_padding_row_and_its_entries_get_no_gradient() {
    let weight = f64s(&[3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let indices = i64s(&[2, 3], vec![0, 2, 2, 1, -1, 0]);
    let psw = f64s(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let grad_out = f64s(&[2, 2], vec![1.0, 10.0, 100.0, 1000.0]);
    let grads = EmbeddingBag::new(Aggregate::Sum)
        .padding_idx(2)
        .grad(&weight, &indices, None, Some((&psw).into()), &grad_out)
        .unwrap();
    assert_eq!(
        grads.weight.data::<f64>().unwrap(),
        &[601.0, 6010.0, 400.0, 4000.0, 0.0, 0.0]
    );
    let grad_psw = grads.per_sample_weights.unwrap();
    assert_eq!(grad_psw.shape(), &[2, 3]);
    assert_eq!(
        grad_psw.data::<f64>().unwrap(),
        &[21.0, 0.0, 0.0, 4300.0, 0.0, 2100.0]
    );
}

#[test]
fn a_bag_max_splits_ties_evenly_and_counts_a_repeated_row_twice() {
    // Bag 0 reads row 0 twice and row 1 once; column 0 ties between rows 0 and 1.
    let weight = f64s(&[2, 2], vec![5.0, 1.0, 5.0, 0.0]);
    let indices = i64s(&[1, 3], vec![0, 1, 0]);
    let grad_out = f64s(&[1, 2], vec![3.0, 6.0]);
    let grads = EmbeddingBag::new(Aggregate::Amax)
        .grad(&weight, &indices, None, None, &grad_out)
        .unwrap();
    // Column 0: three tying entries share 3 (two are row 0). Column 1: row 0's two entries share 6.
    assert_eq!(grads.weight.data::<f64>().unwrap(), &[2.0, 6.0, 1.0, 0.0]);
}

#[test]
fn a_bag_max_given_its_output_reads_ties_from_it_and_refuses_another_shape_or_dtype() {
    let weight = f64s(&[2, 2], vec![5.0, 1.0, 5.0, 0.0]);
    let indices = i64s(&[1, 3], vec![0, 1, 0]);
    let grad_out = f64s(&[1, 2], vec![3.0, 6.0]);
    let op = EmbeddingBag::new(Aggregate::Amax);
    let given = |output: &Tensor| {
        op.grad_with_output(
            &weight,
            &indices,
            None,
            None,
            Some(output.into()),
            &grad_out,
        )
    };
    let output = op.run(&weight, &indices, None, None).unwrap();
    let grads = given(&output).unwrap();
    assert_eq!(grads.weight.data::<f64>().unwrap(), &[2.0, 6.0, 1.0, 0.0]);
    // Values no entry ties take no gradient: column 1's 7.0 is nobody's.
    let grads = given(&f64s(&[1, 2], vec![5.0, 7.0])).unwrap();
    assert_eq!(grads.weight.data::<f64>().unwrap(), &[2.0, 0.0, 1.0, 0.0]);
    let err = given(&f64s(&[2, 1], vec![5.0, 1.0])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert!(err.to_string().contains("output has shape [2, 1]"), "{err}");
    let err = given(&Tensor::new(vec![1, 2], vec![5.0f32, 1.0]).unwrap()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
}

#[test]
fn embedding_bag_gradient_errors_are_the_forwards_or_name_grad_out() {
    let weight = f64s(&[3, 2], vec![0.0; 6]);
    let indices = i64s(&[3], vec![0, 1, 2]);
    let grad_out = f64s(&[2, 2], vec![0.0; 4]);
    let op = EmbeddingBag::new(Aggregate::Mean);
    let bad_offsets = i64s(&[2], vec![0, 4]);
    let err = op
        .grad(
            &weight,
            &indices,
            Some((&bad_offsets).into()),
            None,
            &grad_out,
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadSegments);
    let offsets = i64s(&[2], vec![0, 2]);
    let out_of_range = i64s(&[3], vec![0, 3, 1]);
    let err = op
        .grad(
            &weight,
            &out_of_range,
            Some((&offsets).into()),
            None,
            &grad_out,
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    let err = op
        .grad(
            &weight,
            &indices,
            Some((&offsets).into()),
            None,
            &f64s(&[3, 2], vec![0.0; 6]),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let ints = Tensor::new(vec![3, 2], vec![0i32; 6]).unwrap();
    let err = op
        .grad(
            &ints,
            &indices,
            Some((&offsets).into()),
            None,
            &Tensor::new(vec![2, 2], vec![0i32; 4]).unwrap(),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
}

// -- determinism

#[test]
fn fold_gradients_with_heavy_duplicates_are_bit_identical_for_every_thread_count() {
    let (rows, dim, entries, bags) = (2000, 64, 200_000, 10_000);
    let mut draw = Draw(11);
    let weight = Tensor::new(
        vec![rows, dim],
        (0..rows * dim)
            .map(|_| draw.below(1000) as f32 / 37.0 - 13.0)
            .collect::<Vec<f32>>(),
    )
    .unwrap();
    let indices = i64s(
        &[entries],
        (0..entries).map(|_| draw.below(rows) as i64).collect(),
    );
    let mut starts: Vec<i64> = (0..bags)
        .map(|b| {
            if b == 0 {
                0
            } else {
                draw.below(entries) as i64
            }
        })
        .collect();
    starts.sort();
    let offsets = i64s(&[bags], starts);
    let psw = Tensor::from_vec(
        (0..entries)
            .map(|_| draw.below(100) as f32 / 7.0)
            .collect::<Vec<f32>>(),
    );
    let grad_out = Tensor::new(
        vec![bags, dim],
        (0..bags * dim)
            .map(|_| draw.below(1000) as f32 / 3.0 - 100.0)
            .collect::<Vec<f32>>(),
    )
    .unwrap();
    let segment_src = Tensor::new(
        vec![entries, 4],
        (0..entries * 4)
            .map(|_| draw.below(50) as f32 / 8.0)
            .collect::<Vec<f32>>(),
    )
    .unwrap();
    let indptr = i64s(&[bags + 1], {
        let mut b: Vec<i64> = (0..=bags).map(|_| draw.below(entries + 1) as i64).collect();
        b.sort();
        b
    });
    let segment_grad_out = Tensor::new(
        vec![bags, 4],
        grad_out.data::<f32>().unwrap()[..bags * 4].to_vec(),
    )
    .unwrap();
    let run = || {
        let mut bits = Vec::new();
        for mode in Aggregate::ALL {
            let op = EmbeddingBag::new(mode);
            let psw = (mode == Aggregate::Sum).then_some(TensorView::from(&psw));
            let grads = op
                .grad(&weight, &indices, Some((&offsets).into()), psw, &grad_out)
                .unwrap();
            bits.push(format!("{:?}", grads.weight.data::<f32>().unwrap()));
            bits.push(format!("{:?}", grads.per_sample_weights));
            let seg = SegmentCsr::new(mode)
                .grad(&segment_src, &indptr, &segment_grad_out)
                .unwrap();
            bits.push(format!("{:?}", seg.data::<f32>().unwrap()));
        }
        bits
    };
    let one = in_pool(1, run);
    for threads in [2, 3, 5] {
        let many = in_pool(threads, run);
        for (k, (a, b)) in one.iter().zip(&many).enumerate() {
            assert!(a == b, "output {k} differs on {threads} threads");
        }
    }
}
