//! Fuzz support: decode arbitrary bytes into an op call (shapes biased to 0
//! and 1, every dtype and index type, hostile index values, every reduction
//! and profile), run it, and check any success against the naive references
//! of the test suite (shared by path, so fuzzing and property tests use the
//! same independent oracle).

pub mod files;

// `macro_use`: the oracle's macros (`for_dtype!`) by textual scope, so the
// module also works inside the test suite's corpus replay.
#[path = "../../crates/gatherscatter/tests/common/mod.rs"]
#[allow(unused_imports, unused_macros)]
#[macro_use]
mod common;

use arbitrary::{Result, Unstructured};
use common::*;
use gatherscatter::{
    Aggregate, DType, ErrorKind, FeatureLevel, Gather, GatherElements, GatherND, Op, Profile,
    Reduction, ScatterElements, ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, Tensor,
    TensorView,
};
use gatherscatter::{EmbeddingBag, IndexPolicy};

/// One decoded call.
#[derive(Debug)]
pub struct Case {
    data_dtype: DType,
    index_dtype: DType,
    data_shape: Vec<usize>,
    indices_shape: Vec<usize>,
    indices: Vec<i128>,
    axis: i64,
    batch_dims: usize,
    reduction: Reduction,
    profile: Profile,
    seed: i64,
}

fn dim(u: &mut Unstructured) -> Result<usize> {
    Ok(match u.int_in_range(0..=9)? {
        0 => 0,
        1 | 2 => 1,
        n => n as usize - 1,
    })
}

fn shape(u: &mut Unstructured, max_rank: usize) -> Result<Vec<usize>> {
    let rank = u.int_in_range(0..=max_rank)?;
    (0..rank).map(|_| dim(u)).collect()
}

fn profile(u: &mut Unstructured) -> Result<Profile> {
    Ok(match u.int_in_range(0..=5)? {
        0 | 1 => Profile::Permissive,
        2 => Profile::Onnx {
            opset: u.int_in_range(0..=26)?,
        },
        3 | 4 => {
            let levels = ["2.1", "3.0", "4.1", "1.0", "6.4"];
            let level: FeatureLevel = u.choose(&levels)?.parse().expect("valid level");
            Profile::DirectMl { level }
        }
        _ => Profile::MindSpore,
    })
}

impl Case {
    /// Decode a call; `indices_like_data` makes the indices' rank equal the
    /// data's (GatherElements, ScatterElements); `tuples` ends the indices'
    /// shape with a tuple length up to the data's rank (GatherND, ScatterND).
    pub fn decode(u: &mut Unstructured, indices_like_data: bool, tuples: bool) -> Result<Case> {
        let data_shape = shape(u, 4)?;
        let mut indices_shape = if indices_like_data {
            data_shape
                .iter()
                .map(|&d| {
                    if u.ratio(1, 4).unwrap_or(false) {
                        d + 1
                    } else {
                        d.min(dim(u).unwrap_or(d))
                    }
                })
                .collect()
        } else {
            shape(u, 3)?
        };
        if tuples {
            indices_shape.push(u.int_in_range(0..=data_shape.len().min(4))?);
        }
        let data_dtype = *u.choose(&DType::ALL)?;
        let index_dtype = if u.ratio(1, 16)? {
            DType::F32
        } else {
            *u.choose(&DType::INDEX_TYPES)?
        };
        let axis = match u.int_in_range(0..=15)? {
            0 => i64::MIN,
            1 => i64::MAX,
            n => n as i64 - 8,
        };
        let count: usize = indices_shape.iter().product();
        let bound = data_shape.iter().copied().max().unwrap_or(1) as i128;
        let (lo, hi) = if index_dtype.is_index_type() {
            (index_type_min(index_dtype), index_type_max(index_dtype))
        } else {
            (-(1 << 24), 1 << 24)
        };
        let indices = (0..count.min(4096))
            .map(|_| {
                let v = match u.int_in_range(0..=11)? {
                    0 => i64::MIN as i128,
                    1 => u64::MAX as i128,
                    2 => -bound - 1,
                    3 => bound,
                    4 => i64::MAX as i128,
                    n => (n as i128 - 8) * bound / 3 + u.int_in_range(-1..=1)? as i128,
                };
                Ok(v.clamp(lo, hi))
            })
            .collect::<Result<Vec<i128>>>()?;
        if indices.len() != count {
            return Err(arbitrary::Error::IncorrectFormat);
        }
        Ok(Case {
            data_dtype,
            index_dtype,
            data_shape,
            indices_shape,
            indices,
            axis,
            batch_dims: u.int_in_range(0..=2)?,
            reduction: *u.choose(&Reduction::ALL)?,
            profile: profile(u)?,
            seed: u.arbitrary()?,
        })
    }

    fn indices_tensor(&self) -> Tensor {
        if self.index_dtype.is_index_type() {
            index_tensor(self.index_dtype, &self.indices_shape, &self.indices)
        } else {
            let values: Vec<f32> = self.indices.iter().map(|&v| v as f32).collect();
            Tensor::new(self.indices_shape.clone(), values).expect("shape matches")
        }
    }

    fn axis(&self) -> usize {
        let r = self.data_shape.len() as i64;
        (if self.axis < 0 {
            self.axis + r
        } else {
            self.axis
        }) as usize
    }
}

fn make<T: FromSeed>(shape: &[usize], seed: i64) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<T> = (0..n as i64)
        .map(|i| T::from_seed(seed.wrapping_add(i)))
        .collect();
    Tensor::new(shape.to_vec(), data).expect("shape matches")
}

fn data_tensor(dtype: DType, shape: &[usize], seed: i64) -> Tensor {
    for_dtype!(dtype, make(shape, seed))
}

fn assert_same<T: RefReduce>(out: &Tensor, shape: &[usize], expected: &[T], case: &Case) {
    assert_eq!(out.shape(), shape, "{case:?}");
    let got = out.data::<T>().expect("output dtype is data's");
    assert_eq!(got.len(), expected.len());
    for (k, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(T::same(g, e), "element {k}: {g:?} != {e:?} in {case:?}");
    }
}

/// A success must equal the reference (which then finds every index in
/// range); a permissive out-of-bounds error must mean some index really is
/// out of range (the reference gives `None`).
fn check_outcome<T: RefReduce>(
    result: gatherscatter::Result<Tensor>,
    reference: impl Fn() -> Option<(Vec<usize>, Vec<T>)>,
    case: &Case,
) {
    match result {
        Ok(out) => {
            let (shape, values) = reference().expect("success, so every index is in range");
            assert_same(&out, &shape, &values, case);
        }
        Err(e) => {
            if e.kind() == ErrorKind::OutOfBounds && matches!(case.profile, Profile::Permissive) {
                assert!(reference().is_none(), "spurious {e} for {case:?}");
            }
        }
    }
}

/// The aggregate a case's ONNX reduction picks (none: mean).
fn aggregate_of(reduction: Reduction) -> Aggregate {
    match reduction {
        Reduction::Add => Aggregate::Sum,
        Reduction::Mul => Aggregate::Prod,
        Reduction::Max => Aggregate::Amax,
        Reduction::Min => Aggregate::Amin,
        _ => Aggregate::Mean,
    }
}

/// Every op runs through the library's one operator list, as `gsx` and the
/// model runner call it.
fn run_op(op: impl Into<Op>, inputs: &[&Tensor]) -> gatherscatter::Result<Tensor> {
    let views: Vec<TensorView> = inputs.iter().map(|&t| t.into()).collect();
    op.into().run(&views)
}

fn run_gather<T: RefReduce>(case: &Case) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let result = Gather::new(case.axis)
        .batch_dims(case.batch_dims)
        .profile(case.profile);
    let result = run_op(result, &[&data, &case.indices_tensor()]);
    let reference = || {
        reference_gather(
            data.data::<T>().unwrap(),
            &case.data_shape,
            &case.indices,
            &case.indices_shape,
            case.axis(),
            case.batch_dims,
        )
    };
    check_outcome(result, reference, case);
}

fn run_gather_elements<T: RefReduce>(case: &Case) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let op = GatherElements::new(case.axis).profile(case.profile);
    let result = run_op(op, &[&data, &case.indices_tensor()]);
    let reference = || {
        reference_gather_elements(
            data.data::<T>().unwrap(),
            &case.data_shape,
            &case.indices,
            &case.indices_shape,
            case.axis(),
        )
    };
    check_outcome(
        result,
        || reference().map(|v| (case.indices_shape.clone(), v)),
        case,
    );
}

fn run_scatter_reduce<T: RefReduce>(case: &Case) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let before = data.clone();
    let updates = data_tensor(case.data_dtype, &case.indices_shape, case.seed ^ 0x5eed);
    // The case's ONNX reduction picks the aggregate (none: mean), its seed
    // whether data's values count.
    let reduce = aggregate_of(case.reduction);
    let include_self = case.seed % 2 == 0;
    let op = ScatterReduce::new(case.axis, reduce)
        .include_self(include_self)
        .profile(case.profile);
    let result = run_op(op, &[&data, &case.indices_tensor(), &updates]);
    assert_eq!(
        format!("{data:?}"),
        format!("{before:?}"),
        "data is never written"
    );
    let reference = || {
        reference_scatter_reduce(
            data.data::<T>().unwrap(),
            &case.data_shape,
            &case.indices,
            &case.indices_shape,
            updates.data::<T>().unwrap(),
            case.axis(),
            aggregate_step(reduce),
            reduce == Aggregate::Mean,
            include_self,
        )
        .map(|values| values.expect("a defined aggregate succeeded"))
    };
    check_outcome(
        result,
        || reference().map(|v| (case.data_shape.clone(), v)),
        case,
    );
}

fn run_segment<T: RefReduce>(case: &Case) {
    let src = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let before = src.clone();
    let reduce = aggregate_of(case.reduction);
    let rank = case.indices_shape.len();
    let axis = rank.saturating_sub(1);
    let rows = case.data_shape.get(axis).copied().unwrap_or(0);
    // The same values sorted along the last dim and clamped: boundaries in
    // [0, rows] for csr, ids in [0, last dim] for coo.
    let mut repaired = case.indices.clone();
    let width = case.indices_shape.last().copied().unwrap_or(1).max(1);
    for row in repaired.chunks_mut(width) {
        for v in row.iter_mut() {
            *v = (*v).clamp(0, rows as i128);
        }
        row.sort();
    }
    for values in [&case.indices, &repaired] {
        let boundaries = if case.index_dtype.is_index_type() {
            index_tensor(case.index_dtype, &case.indices_shape, values)
        } else {
            case.indices_tensor()
        };
        let lead = case.indices_shape[..axis.min(rank)].to_vec();
        let csr = SegmentCsr::new(reduce).profile(case.profile);
        let result = run_op(csr.clone(), &[&src, &boundaries]);
        let members = |slab: &[usize], s: usize| -> Vec<usize> {
            let row = broadcast_row(slab, &lead) * width;
            (values[row + s] as usize..values[row + s + 1] as usize).collect()
        };
        check_segments::<T>(
            result,
            &src,
            axis,
            width.saturating_sub(1),
            members,
            reduce,
            case,
        );
        let count = values
            .iter()
            .copied()
            .max()
            .map_or(0, |m| m.clamp(0, 64) as usize + 1);
        let coo = SegmentCoo::new(reduce)
            .profile(case.profile)
            .segments(count);
        let result = run_op(coo.clone(), &[&src, &boundaries]);
        let members = |slab: &[usize], s: usize| -> Vec<usize> {
            let row = broadcast_row(slab, &lead) * rows;
            (0..rows)
                .filter(|&r| values[row + r] == s as i128)
                .collect()
        };
        check_segments::<T>(result, &src, axis, count, members, reduce, case);
        // The gradients of the same calls, with their own output as grad_out
        // (the shape they ask for) or src: errors are fine, panics are not.
        for grad_out in [csr.run(&src, &boundaries).ok(), Some(src.clone())]
            .into_iter()
            .flatten()
        {
            let _ = csr.grad(&src, &boundaries, &grad_out);
        }
        for grad_out in [coo.run(&src, &boundaries).ok(), Some(src.clone())]
            .into_iter()
            .flatten()
        {
            let _ = coo.grad(&src, &boundaries, &grad_out);
        }
        if matches!(reduce, Aggregate::Amax | Aggregate::Amin) {
            let views = [TensorView::from(&src), TensorView::from(&boundaries)];
            if let (Ok(values), Ok((again, _))) = (
                csr.run(views[0], views[1]),
                csr.run_with_arg(views[0], views[1]),
            ) {
                assert_eq!(format!("{values:?}"), format!("{again:?}"), "{case:?}");
            }
        }
    }
    assert_eq!(
        format!("{src:?}"),
        format!("{before:?}"),
        "src is never written"
    );
}

/// A segment reduction's success must equal the formula over `members`.
fn check_segments<T: RefReduce>(
    result: gatherscatter::Result<Tensor>,
    src: &Tensor,
    axis: usize,
    segments: usize,
    members: impl Fn(&[usize], usize) -> Vec<usize>,
    reduce: Aggregate,
    case: &Case,
) {
    let Ok(out) = result else {
        return;
    };
    let fill = if reduce == Aggregate::Prod {
        T::one()
    } else {
        T::zero()
    };
    let (shape, expected) = reference_segment(
        src.data::<T>().unwrap(),
        &case.data_shape,
        axis,
        segments,
        members,
        aggregate_step(reduce),
        reduce == Aggregate::Mean,
        &fill,
    )
    .expect("a defined aggregate succeeded");
    assert_same(&out, &shape, &expected, case);
}

fn run_policy<T: RefReduce>(case: &Case, tuples: bool) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let before = data.clone();
    let indices = case.indices_tensor();
    let updates = data_tensor(case.data_dtype, &case.indices_shape, case.seed ^ 0x5eed);
    let policy = match case.seed.rem_euclid(5) {
        0 => IndexPolicy::Clip,
        1 => IndexPolicy::Wrap,
        2 => IndexPolicy::Fill(None),
        3 => IndexPolicy::Drop,
        _ => IndexPolicy::Raise,
    };
    let ops: Vec<Op> = if tuples {
        vec![
            GatherND::new()
                .batch_dims(case.batch_dims)
                .profile(case.profile)
                .into(),
            ScatterND::new()
                .reduction(case.reduction)
                .profile(case.profile)
                .into(),
        ]
    } else {
        vec![
            Gather::new(case.axis).profile(case.profile).into(),
            GatherElements::new(case.axis).profile(case.profile).into(),
            ScatterElements::new(case.axis)
                .reduction(case.reduction)
                .profile(case.profile)
                .into(),
        ]
    };
    for op in &ops {
        let views = [
            TensorView::from(&data),
            TensorView::from(&indices),
            TensorView::from(&updates),
        ];
        let _ = policy.run(op, &views[..op.inputs().len().min(3)]);
        // The gradients of the same hostile calls: errors are fine, panics
        // are not. A gather's with its own output as grad_out (the shape it
        // needs) and with the updates (usually not); a scatter's with data.
        if op.inputs().len() == 2 {
            if let Ok(out) = policy.run(op, &views[..2]) {
                let _ = policy.grad(op, (&out).into(), views[1], &case.data_shape);
            }
            let _ = policy.grad(op, views[2], views[1], &case.data_shape);
        } else {
            let _ = policy.scatter_grad(op, views[0], views[1], views[2], views[0]);
        }
    }
    if !tuples {
        let aggregate = gatherscatter::Aggregate::ALL[case.seed.rem_euclid(5) as usize];
        let op = Op::from(
            gatherscatter::ScatterReduce::new(case.axis, aggregate)
                .include_self(case.seed % 2 == 0),
        );
        let views = [
            TensorView::from(&data),
            TensorView::from(&indices),
            TensorView::from(&updates),
        ];
        let _ = policy.scatter_grad(&op, views[0], views[1], views[2], views[0]);
    }
    // GatherElements under clip / wrap: the reference on moved indices.
    if !tuples && matches!(policy, IndexPolicy::Clip | IndexPolicy::Wrap) {
        let op = Op::from(GatherElements::new(case.axis).profile(case.profile));
        let result = policy.run(&op, &[TensorView::from(&data), TensorView::from(&indices)]);
        if let Ok(out) = result {
            let s = case.data_shape[case.axis()] as i128;
            let moved: Vec<i128> = case
                .indices
                .iter()
                .map(|&v| match policy {
                    IndexPolicy::Clip => {
                        (if (-s..0).contains(&v) { v + s } else { v }).clamp(0, s - 1)
                    }
                    _ => v.rem_euclid(s),
                })
                .collect();
            let expected = reference_gather_elements(
                data.data::<T>().unwrap(),
                &case.data_shape,
                &moved,
                &case.indices_shape,
                case.axis(),
            )
            .expect("moved indices are in range");
            assert_same(&out, &case.indices_shape, &expected, case);
        }
    }
    // EmbeddingBag: data as the weight, the indices as one flat list in
    // bags cut at the first index values (clamped), every mode.
    let flat: Vec<i64> = case
        .indices
        .iter()
        .map(|&v| v.clamp(-99, 99) as i64)
        .collect();
    let n = flat.len() as i64;
    let mut offsets: Vec<i64> = flat.iter().take(3).map(|v| v.rem_euclid(n + 1)).collect();
    offsets.sort();
    let list = Tensor::from_vec(flat);
    let offsets = Tensor::from_vec(offsets);
    for mode in Aggregate::ALL {
        let bag = EmbeddingBag::new(mode)
            .include_last_offset(case.seed % 2 == 0)
            .padding_idx(case.seed % 3);
        let out = bag.run(&data, &list, Some((&offsets).into()), None);
        let _ = bag.run_with_arg(&data, &list, Some((&offsets).into()), None);
        let grad_out = out.unwrap_or_else(|_| data.clone());
        let _ = bag.grad(&data, &list, Some((&offsets).into()), None, &grad_out);
    }
    assert_eq!(
        format!("{data:?}"),
        format!("{before:?}"),
        "data is never written"
    );
}

fn run_scatter_elements<T: RefReduce>(case: &Case) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let before = data.clone();
    let updates = data_tensor(case.data_dtype, &case.indices_shape, case.seed ^ 0x5eed);
    let op = ScatterElements::new(case.axis)
        .reduction(case.reduction)
        .profile(case.profile);
    let result = run_op(op, &[&data, &case.indices_tensor(), &updates]);
    assert_eq!(
        format!("{data:?}"),
        format!("{before:?}"),
        "data is never written"
    );
    let name = case.reduction.name();
    let reference = || {
        reference_scatter_elements(
            data.data::<T>().unwrap(),
            &case.data_shape,
            &case.indices,
            &case.indices_shape,
            updates.data::<T>().unwrap(),
            case.axis(),
            |a, b| T::reduce(name, a, b).expect("supported reduction"),
        )
    };
    check_outcome(
        result,
        || reference().map(|v| (case.data_shape.clone(), v)),
        case,
    );
}

fn run_gather_nd<T: RefReduce>(case: &Case) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let op = GatherND::new()
        .batch_dims(case.batch_dims)
        .profile(case.profile);
    let result = run_op(op, &[&data, &case.indices_tensor()]);
    let reference = || {
        reference_gather_nd(
            data.data::<T>().unwrap(),
            &case.data_shape,
            &case.indices,
            &case.indices_shape,
            case.batch_dims,
        )
    };
    check_outcome(result, reference, case);
}

fn run_scatter_nd<T: RefReduce>(case: &Case) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let before = data.clone();
    let q = case.indices_shape.len();
    let k = case.indices_shape[q - 1];
    let mut updates_shape = case.indices_shape[..q - 1].to_vec();
    updates_shape.extend_from_slice(&case.data_shape[k.min(case.data_shape.len())..]);
    // k = 0 updates the whole tensor per tuple: cap the harness's own work so
    // the fuzzer keeps its pace (the op itself is linear in updates).
    if updates_shape.iter().product::<usize>() > 1 << 16 {
        return;
    }
    let updates = data_tensor(case.data_dtype, &updates_shape, case.seed ^ 0x5eed);
    let op = ScatterND::new()
        .reduction(case.reduction)
        .profile(case.profile);
    let result = run_op(op, &[&data, &case.indices_tensor(), &updates]);
    assert_eq!(
        format!("{data:?}"),
        format!("{before:?}"),
        "data is never written"
    );
    let name = case.reduction.name();
    let reference = || {
        reference_scatter_nd(
            data.data::<T>().unwrap(),
            &case.data_shape,
            &case.indices,
            &case.indices_shape,
            updates.data::<T>().unwrap(),
            |a, b| T::reduce(name, a, b).expect("supported reduction"),
        )
    };
    check_outcome(
        result,
        || reference().map(|v| (case.data_shape.clone(), v)),
        case,
    );
}

/// A fuzz target's body: any bytes in, a panic only for a bug.
pub type Body = fn(&[u8]);

/// Every fuzz target's name (its `fuzz_targets/NAME.rs` and
/// `corpus/NAME/`) and body: the one list that the corpus replay of the
/// test suite (`crates/gsx/tests/fuzz_corpus.rs`) walks.
pub const TARGETS: &[(&str, Body)] = &[
    ("gather", fuzz_gather),
    ("gather_elements", fuzz_gather_elements),
    ("scatter_elements", fuzz_scatter_elements),
    ("scatter_reduce", fuzz_scatter_reduce),
    ("segment", fuzz_segment),
    ("policy", fuzz_policy),
    ("gather_nd", fuzz_gather_nd),
    ("scatter_nd", fuzz_scatter_nd),
    ("tensor_scatter", fuzz_tensor_scatter),
    ("onnx_model", fuzz_onnx_model),
    ("onnx_tensor", fuzz_onnx_tensor),
    ("npy_reader", files::fuzz_npy_reader),
    ("npy_writer", files::fuzz_npy_writer),
    ("file_layer", files::fuzz_file_layer),
];

/// The fuzz entry points, one per op.
pub fn fuzz_gather(bytes: &[u8]) {
    if let Ok(case) = Case::decode(&mut Unstructured::new(bytes), false, false) {
        for_dtype!(case.data_dtype, run_gather(&case))
    }
}

/// GatherElements.
pub fn fuzz_gather_elements(bytes: &[u8]) {
    if let Ok(case) = Case::decode(&mut Unstructured::new(bytes), true, false) {
        for_dtype!(case.data_dtype, run_gather_elements(&case))
    }
}

/// ScatterElements, every reduction.
pub fn fuzz_scatter_elements(bytes: &[u8]) {
    if let Ok(case) = Case::decode(&mut Unstructured::new(bytes), true, false) {
        for_dtype!(case.data_dtype, run_scatter_elements(&case))
    }
}

/// ScatterReduce, every aggregate, with and without self.
pub fn fuzz_scatter_reduce(bytes: &[u8]) {
    if let Ok(case) = Case::decode(&mut Unstructured::new(bytes), true, false) {
        for_dtype!(case.data_dtype, run_scatter_reduce(&case))
    }
}

/// SegmentCsr and SegmentCoo on hostile boundaries, and on the same ones
/// sorted and clamped into range (so that most calls succeed), every
/// aggregate: a success must equal the formula, and `src` is never written.
pub fn fuzz_segment(bytes: &[u8]) {
    if let Ok(case) = Case::decode(&mut Unstructured::new(bytes), false, false) {
        for_dtype!(case.data_dtype, run_segment(&case))
    }
}

/// Index policies on every gather and scatter, and EmbeddingBag, on hostile
/// indices, with their gradients: never a panic, `data` never written; GatherElements under
/// `clip` / `wrap` equals the reference on indices moved into range by the
/// policy's formula.
pub fn fuzz_policy(bytes: &[u8]) {
    let mut u = Unstructured::new(bytes);
    let Ok(tuples) = u.arbitrary::<bool>() else {
        return;
    };
    if let Ok(case) = Case::decode(&mut u, !tuples, tuples) {
        for_dtype!(case.data_dtype, run_policy(&case, tuples))
    }
}

/// GatherND.
pub fn fuzz_gather_nd(bytes: &[u8]) {
    if let Ok(case) = Case::decode(&mut Unstructured::new(bytes), false, true) {
        for_dtype!(case.data_dtype, run_gather_nd(&case))
    }
}

/// ScatterND, every reduction.
pub fn fuzz_scatter_nd(bytes: &[u8]) {
    if let Ok(case) = Case::decode(&mut Unstructured::new(bytes), false, true) {
        for_dtype!(case.data_dtype, run_scatter_nd(&case))
    }
}

/// Arbitrary bytes as a model: load, and if it loads, run it on small
/// inputs of the declared dtypes; errors are fine, panics are not.
pub fn fuzz_onnx_model(bytes: &[u8]) {
    let Ok(model) = gatherscatter_onnx::Model::from_bytes(bytes) else {
        return;
    };
    let inputs: Vec<Tensor> = model
        .inputs()
        .iter()
        .map(|spec| {
            let dtype = spec.dtype.unwrap_or(DType::I64);
            let shape: Vec<usize> = match &spec.shape {
                Some(dims) => dims.iter().map(|d| d.unwrap_or(1).min(4)).collect(),
                None => vec![2],
            };
            data_tensor(dtype, &shape, 1)
        })
        .collect();
    let views: Vec<gatherscatter::TensorView<'_>> = inputs.iter().map(Into::into).collect();
    let _ = model.run(&views);
}

/// Arbitrary bytes as a TensorProto: decode, and if it decodes, re-encode
/// and decode again to the same tensor.
pub fn fuzz_onnx_tensor(bytes: &[u8]) {
    if let Ok((name, tensor)) = gatherscatter_onnx::decode_tensor(bytes, "fuzz") {
        let again =
            gatherscatter_onnx::encode_tensor(&tensor, &name).expect("every decoded dtype encodes");
        let (_, back) = gatherscatter_onnx::decode_tensor(&again, "again").expect("re-decodes");
        assert_eq!(format!("{back:?}"), format!("{tensor:?}"));
    }
}

/// TensorScatter: a cache of rank 2 to 4, an update no longer than it on
/// the sequence axis (or longer, to be refused), hostile write indices of
/// every index type, both modes; a success must equal the reference, an
/// out-of-bounds error must mean a write index really puts an update outside
/// the cache, and the cache is never written.
pub fn fuzz_tensor_scatter(bytes: &[u8]) {
    let mut u = Unstructured::new(bytes);
    let Ok(case) = TensorScatterCase::decode(&mut u) else {
        return;
    };
    for_dtype!(case.dtype, run_tensor_scatter(&case))
}

#[derive(Debug)]
struct TensorScatterCase {
    dtype: DType,
    index_dtype: Option<DType>,
    shape: Vec<usize>,
    update_len: usize,
    axis: i64,
    write: Vec<i128>,
    circular: bool,
    seed: i64,
}

impl TensorScatterCase {
    fn decode(u: &mut Unstructured) -> Result<TensorScatterCase> {
        let rank = u.int_in_range(2..=4)?;
        let shape: Vec<usize> = (0..rank).map(|_| dim(u)).collect::<Result<_>>()?;
        let axis =
            u.int_in_range(1..=rank - 1)? as i64 - if u.arbitrary()? { rank as i64 } else { 0 };
        let normal = axis.rem_euclid(rank as i64) as usize;
        let update_len = u.int_in_range(0..=shape[normal] + 1)?;
        let index_dtype = match u.int_in_range(0..=8)? {
            0 => None,
            k => Some(DType::INDEX_TYPES[k as usize - 1]),
        };
        let write = (0..shape[0])
            .map(|_| {
                Ok(match u.int_in_range(0..=5)? {
                    0 => -1,
                    1 => i64::MAX as i128,
                    2 => shape[normal] as i128,
                    _ => u.int_in_range(0..=shape[normal] as i64)? as i128,
                })
            })
            .collect::<Result<_>>()?;
        Ok(TensorScatterCase {
            dtype: DType::ALL[u.int_in_range(0..=DType::ALL.len() - 1)?],
            index_dtype,
            shape,
            update_len,
            axis,
            write,
            circular: u.arbitrary()?,
            seed: u.arbitrary()?,
        })
    }
}

fn run_tensor_scatter<T: RefReduce>(case: &TensorScatterCase) {
    let rank = case.shape.len() as i64;
    let axis = case.axis.rem_euclid(rank) as usize;
    let mut update_shape = case.shape.clone();
    update_shape[axis] = case.update_len;
    let past = data_tensor(case.dtype, &case.shape, case.seed);
    let before = past.clone();
    let update = data_tensor(case.dtype, &update_shape, case.seed ^ 0x5eed);
    // A write index of i64::MAX does not fit the narrower types: clamp it
    // to the type's range, as the value it stands for.
    let write = case.index_dtype.map(|d| {
        let values: Vec<i128> = case.write.iter().map(|&w| clamp_to(d, w)).collect();
        (index_tensor(d, &[values.len()], &values), values)
    });
    let mode = if case.circular {
        gatherscatter::ScatterMode::Circular
    } else {
        gatherscatter::ScatterMode::Linear
    };
    let op = gatherscatter::TensorScatter::new()
        .axis(case.axis)
        .mode(mode);
    let mut inputs = vec![&past, &update];
    inputs.extend(write.as_ref().map(|(t, _)| t));
    let result = run_op(op, &inputs);
    assert_eq!(
        format!("{past:?}"),
        format!("{before:?}"),
        "the cache is never written"
    );
    let zeros = vec![0i128; case.shape[0]];
    let values = write.as_ref().map_or(&zeros, |(_, v)| v);
    let reference = || {
        reference_tensor_scatter(
            past.data::<T>().unwrap(),
            &case.shape,
            update.data::<T>().unwrap(),
            &update_shape,
            values,
            axis,
            case.circular,
        )
    };
    match result {
        Ok(out) => {
            let expected = reference().expect("success, so every write index fits");
            let got = out.data::<T>().expect("the cache's dtype");
            assert_eq!(out.shape(), case.shape.as_slice(), "{case:?}");
            for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
                assert!(T::same(g, e), "element {k}: {g:?} != {e:?} in {case:?}");
            }
        }
        Err(e) if e.kind() == ErrorKind::OutOfBounds && case.update_len <= case.shape[axis] => {
            let empty = past.is_empty() || update.is_empty();
            assert!(empty || reference().is_none(), "spurious {e} for {case:?}");
        }
        Err(_) => {}
    }
}

/// `w` as the nearest value of index type `dtype`.
fn clamp_to(dtype: DType, w: i128) -> i128 {
    let (lo, hi): (i128, i128) = match dtype {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        _ => (0, u64::MAX.into()),
    };
    w.clamp(lo, hi)
}
