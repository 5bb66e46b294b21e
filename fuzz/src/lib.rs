//! Fuzz support: decode arbitrary bytes into an op call (shapes biased to 0
//! and 1, every dtype and index type, hostile index values, every reduction
//! and profile), run it, and check any success against the naive references
//! of the test suite (shared by path, so fuzzing and property tests use the
//! same independent oracle).

pub mod files;

#[path = "../../crates/gatherscatter/tests/common/mod.rs"]
#[allow(dead_code, unused_imports, unused_macros)]
mod common;

use arbitrary::{Result, Unstructured};
use common::*;
use gatherscatter::{
    DType, ErrorKind, FeatureLevel, Gather, GatherElements, GatherND, Profile, Reduction,
    ScatterElements, ScatterND, Tensor,
};

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

fn run_gather<T: RefReduce>(case: &Case) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let result = Gather::new(case.axis)
        .batch_dims(case.batch_dims)
        .profile(case.profile)
        .run(&data, &case.indices_tensor());
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
    let result = GatherElements::new(case.axis)
        .profile(case.profile)
        .run(&data, &case.indices_tensor());
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

fn run_scatter_elements<T: RefReduce>(case: &Case) {
    let data = data_tensor(case.data_dtype, &case.data_shape, case.seed);
    let before = data.clone();
    let updates = data_tensor(case.data_dtype, &case.indices_shape, case.seed ^ 0x5eed);
    let result = ScatterElements::new(case.axis)
        .reduction(case.reduction)
        .profile(case.profile)
        .run(&data, &case.indices_tensor(), &updates);
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
    let result = GatherND::new()
        .batch_dims(case.batch_dims)
        .profile(case.profile)
        .run(&data, &case.indices_tensor());
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
    let result = ScatterND::new()
        .reduction(case.reduction)
        .profile(case.profile)
        .run(&data, &case.indices_tensor(), &updates);
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
