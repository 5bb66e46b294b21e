//! Test support: naive references written straight from the spec §1 formulas
//! (coordinates computed one by one, no code shared with the kernels), and
//! makers of tensors of every dtype from integer seeds.
#![allow(dead_code)]

pub mod measured;

use gatherscatter::{bf16, f16, Complex32, Complex64, DType, Element, Tensor};

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Flat offset of a coordinate.
pub fn offset(coord: &[usize], shape: &[usize]) -> usize {
    assert_eq!(coord.len(), shape.len());
    coord.iter().zip(strides(shape)).map(|(c, s)| c * s).sum()
}

/// Every coordinate of `shape` in row-major order.
pub fn coordinates(shape: &[usize]) -> Vec<Vec<usize>> {
    let total: usize = shape.iter().product();
    let mut all = Vec::with_capacity(total);
    if total == 0 {
        return all;
    }
    let mut c = vec![0; shape.len()];
    for _ in 0..total {
        all.push(c.clone());
        for d in (0..shape.len()).rev() {
            c[d] += 1;
            if c[d] < shape[d] {
                break;
            }
            c[d] = 0;
        }
    }
    all
}

/// `idx(v)` of spec §1.
pub fn idx(v: i128, s: usize) -> Option<usize> {
    let s = s as i128;
    if (0..s).contains(&v) {
        Some(v as usize)
    } else if (-s..0).contains(&v) {
        Some((v + s) as usize)
    } else {
        None
    }
}

/// spec §1 Gather with batch_dims: `out[b.., a.., i.., j..] = data[b.., a.., idx(indices[b.., i..]), j..]`.
/// `None` when any index is out of range (all are checked, spec §2.1).
pub fn reference_gather<T: Clone>(
    data: &[T],
    data_shape: &[usize],
    indices: &[i128],
    indices_shape: &[usize],
    axis: usize,
    batch_dims: usize,
) -> Option<(Vec<usize>, Vec<T>)> {
    if indices.iter().any(|&v| idx(v, data_shape[axis]).is_none()) {
        return None;
    }
    let q = indices_shape.len();
    let mut out_shape = data_shape[..axis].to_vec();
    out_shape.extend_from_slice(&indices_shape[batch_dims..]);
    out_shape.extend_from_slice(&data_shape[axis + 1..]);
    let mut out = Vec::new();
    for oc in coordinates(&out_shape) {
        let batch = &oc[..batch_dims];
        let a = &oc[batch_dims..axis];
        let i = &oc[axis..axis + q - batch_dims];
        let j = &oc[axis + q - batch_dims..];
        let mut icoord = batch.to_vec();
        icoord.extend_from_slice(i);
        let v = indices[offset(&icoord, indices_shape)];
        let mut dcoord = batch.to_vec();
        dcoord.extend_from_slice(a);
        dcoord.push(idx(v, data_shape[axis])?);
        dcoord.extend_from_slice(j);
        out.push(data[offset(&dcoord, data_shape)].clone());
    }
    Some((out_shape, out))
}

/// Build a value of each dtype from an integer seed, so one random case can
/// be run for every dtype.
pub trait FromSeed: Element + std::fmt::Debug {
    fn from_seed(seed: i64) -> Self;
}

macro_rules! from_seed_cast {
    ($($t:ty),*) => {$(impl FromSeed for $t { fn from_seed(seed: i64) -> Self { seed as $t } })*};
}
from_seed_cast!(i8, i16, i32, u8, u16, u32, u64);

impl FromSeed for i64 {
    /// Large magnitudes, so that a few adds or any multiply overflow and wrap.
    fn from_seed(seed: i64) -> Self {
        seed.wrapping_mul(1 << 53).wrapping_add(seed)
    }
}

impl FromSeed for bool {
    fn from_seed(seed: i64) -> Self {
        seed % 2 != 0
    }
}
impl FromSeed for f32 {
    fn from_seed(seed: i64) -> Self {
        seed as f32 * 0.25
    }
}
impl FromSeed for f64 {
    fn from_seed(seed: i64) -> Self {
        seed as f64 * 0.125
    }
}
impl FromSeed for f16 {
    fn from_seed(seed: i64) -> Self {
        f16::from_f32((seed % 512) as f32 * 0.5)
    }
}
impl FromSeed for bf16 {
    fn from_seed(seed: i64) -> Self {
        bf16::from_f32((seed % 128) as f32 * 0.5)
    }
}
impl FromSeed for Complex32 {
    fn from_seed(seed: i64) -> Self {
        Complex32::new(seed as f32, -(seed as f32) * 0.5)
    }
}
impl FromSeed for Complex64 {
    fn from_seed(seed: i64) -> Self {
        Complex64::new(seed as f64 * 0.5, seed as f64)
    }
}
impl FromSeed for String {
    fn from_seed(seed: i64) -> Self {
        format!("s{seed}")
    }
}

/// Call `$f::<T>($args)` for the Rust type of `$dtype`.
#[macro_export]
macro_rules! for_dtype {
    ($dtype:expr, $f:ident ( $($args:expr),* )) => {
        match $dtype {
            DType::Bool => $f::<bool>($($args),*),
            DType::I8 => $f::<i8>($($args),*),
            DType::I16 => $f::<i16>($($args),*),
            DType::I32 => $f::<i32>($($args),*),
            DType::I64 => $f::<i64>($($args),*),
            DType::U8 => $f::<u8>($($args),*),
            DType::U16 => $f::<u16>($($args),*),
            DType::U32 => $f::<u32>($($args),*),
            DType::U64 => $f::<u64>($($args),*),
            DType::F16 => $f::<gatherscatter::f16>($($args),*),
            DType::BF16 => $f::<gatherscatter::bf16>($($args),*),
            DType::F32 => $f::<f32>($($args),*),
            DType::F64 => $f::<f64>($($args),*),
            DType::Complex64 => $f::<gatherscatter::Complex32>($($args),*),
            DType::Complex128 => $f::<gatherscatter::Complex64>($($args),*),
            DType::String => $f::<String>($($args),*),
            other => panic!("no Rust type for {other}"),
        }
    };
}

/// An index tensor of the given integer dtype holding `values` (which must fit).
pub fn index_tensor(dtype: DType, shape: &[usize], values: &[i128]) -> Tensor {
    fn make<T: Element + TryFrom<i128>>(shape: &[usize], values: &[i128]) -> Tensor {
        let data: Vec<T> = values
            .iter()
            .map(|&v| T::try_from(v).unwrap_or_else(|_| panic!("{v} does not fit {}", T::DTYPE)))
            .collect();
        Tensor::new(shape.to_vec(), data).unwrap()
    }
    match dtype {
        DType::I8 => make::<i8>(shape, values),
        DType::I16 => make::<i16>(shape, values),
        DType::I32 => make::<i32>(shape, values),
        DType::I64 => make::<i64>(shape, values),
        DType::U8 => make::<u8>(shape, values),
        DType::U16 => make::<u16>(shape, values),
        DType::U32 => make::<u32>(shape, values),
        DType::U64 => make::<u64>(shape, values),
        other => panic!("{other} is not an index type"),
    }
}

/// Smallest value an index dtype can hold, as i128.
pub fn index_type_min(dtype: DType) -> i128 {
    match dtype {
        DType::I8 => i8::MIN as i128,
        DType::I16 => i16::MIN as i128,
        DType::I32 => i32::MIN as i128,
        DType::I64 => i64::MIN as i128,
        _ => 0,
    }
}

/// Largest value an index dtype can hold, as i128.
pub fn index_type_max(dtype: DType) -> i128 {
    match dtype {
        DType::I8 => i8::MAX as i128,
        DType::I16 => i16::MAX as i128,
        DType::I32 => i32::MAX as i128,
        DType::I64 => i64::MAX as i128,
        DType::U8 => u8::MAX as i128,
        DType::U16 => u16::MAX as i128,
        DType::U32 => u32::MAX as i128,
        DType::U64 => u64::MAX as i128,
        other => panic!("{other} is not an index type"),
    }
}

/// Dimensions biased to the edges: 0 and 1 often, a few larger ones.
pub fn dim() -> impl proptest::strategy::Strategy<Value = usize> {
    use proptest::prelude::*;
    prop_oneof![1 => Just(0usize), 3 => Just(1usize), 6 => 2usize..=4]
}

/// A shape of the given rank range, with `dim()` dimensions.
pub fn shape(
    rank: std::ops::RangeInclusive<usize>,
) -> impl proptest::strategy::Strategy<Value = Vec<usize>> {
    proptest::collection::vec(dim(), rank)
}

/// spec §1 GatherElements: `out[p] = data[p with p[axis] := idx(indices[p])]`.
/// `None` when any index is out of range.
pub fn reference_gather_elements<T: Clone>(
    data: &[T],
    data_shape: &[usize],
    indices: &[i128],
    indices_shape: &[usize],
    axis: usize,
) -> Option<Vec<T>> {
    let mut out = Vec::new();
    for (flat, p) in coordinates(indices_shape).into_iter().enumerate() {
        let mut q = p.clone();
        q[axis] = idx(indices[flat], data_shape[axis])?;
        out.push(data[offset(&q, data_shape)].clone());
    }
    // Indices of an empty output are still all checked (spec §2.1).
    if indices.iter().any(|&v| idx(v, data_shape[axis]).is_none()) {
        return None;
    }
    Some(out)
}

/// Indices shape for GatherElements / ScatterElements cases: off the axis no
/// larger than data (often smaller), along the axis anything in 0..=4.
pub fn elements_case_shapes(
) -> impl proptest::strategy::Strategy<Value = (Vec<usize>, usize, Vec<usize>)> {
    use proptest::prelude::*;
    (shape(1..=6), any::<prop::sample::Index>()).prop_flat_map(|(data_shape, pick)| {
        let axis = pick.index(data_shape.len());
        let dims: Vec<BoxedStrategy<usize>> = data_shape
            .iter()
            .enumerate()
            .map(|(d, &s)| {
                if d == axis {
                    (0usize..=4).boxed()
                } else {
                    // Equal most of the time, smaller often.
                    prop_oneof![2 => Just(s), 1 => 0..=s].boxed()
                }
            })
            .collect();
        (Just(data_shape), Just(axis), dims)
    })
}

/// spec §1 ScatterElements: a copy of data, then for each position `p` of
/// indices in row-major order `out[t] = f(out[t], updates[p])`.
/// `None` when any index is out of range.
pub fn reference_scatter_elements<T: Clone>(
    data: &[T],
    data_shape: &[usize],
    indices: &[i128],
    indices_shape: &[usize],
    updates: &[T],
    axis: usize,
    f: impl Fn(&T, &T) -> T,
) -> Option<Vec<T>> {
    if indices.iter().any(|&v| idx(v, data_shape[axis]).is_none()) {
        return None;
    }
    let mut out = data.to_vec();
    for (flat, p) in coordinates(indices_shape).into_iter().enumerate() {
        let mut t = p.clone();
        t[axis] = idx(indices[flat], data_shape[axis])?;
        let o = offset(&t, data_shape);
        out[o] = f(&out[o], &updates[flat]);
    }
    Some(out)
}

/// The reference reduction (`add`, `mul`, `max`, `min`) an aggregate
/// folds its values with; `mean` adds, then divides.
pub fn aggregate_step(aggregate: gatherscatter::Aggregate) -> &'static str {
    use gatherscatter::Aggregate;
    match aggregate {
        Aggregate::Prod => "mul",
        Aggregate::Amax => "max",
        Aggregate::Amin => "min",
        _ => "add",
    }
}

/// ScatterReduce's formula: each target collects its values in row-major
/// order of indices (`data[t]` first when `include_self`), folds them with
/// the reduction `step` (`add`, `mul`, `max`, `min`) and, for a mean,
/// divides by their count; targets no index names keep data. `None` when an
/// index is out of range; `Some(None)` when the dtype lacks the aggregate.
#[allow(clippy::too_many_arguments)]
pub fn reference_scatter_reduce<T: RefReduce>(
    data: &[T],
    data_shape: &[usize],
    indices: &[i128],
    indices_shape: &[usize],
    updates: &[T],
    axis: usize,
    step: &str,
    mean: bool,
    include_self: bool,
) -> Option<Option<Vec<T>>> {
    let s = data_shape[axis];
    if indices.iter().any(|&v| idx(v, s).is_none()) {
        return None;
    }
    let mut values: Vec<Vec<T>> = data.iter().map(|_| Vec::new()).collect();
    for (flat, p) in coordinates(indices_shape).into_iter().enumerate() {
        let mut t = p.clone();
        t[axis] = idx(indices[flat], s)?;
        values[offset(&t, data_shape)].push(updates[flat].clone());
    }
    let mut out = Vec::with_capacity(data.len());
    for (own, mut list) in data.iter().zip(values) {
        if list.is_empty() {
            out.push(own.clone());
            continue;
        }
        if include_self {
            list.insert(0, own.clone());
        }
        let mut acc = list[0].clone();
        for v in &list[1..] {
            match T::reduce(step, &acc, v) {
                Some(next) => acc = next,
                None => return Some(None),
            }
        }
        if mean {
            match T::mean(&acc, list.len() as u64) {
                Some(quotient) => acc = quotient,
                None => return Some(None),
            }
        }
        out.push(acc);
    }
    Some(Some(out))
}

/// Reductions per spec §2.8–2.9, written from the text independently of the
/// library; `None` where the dtype does not define the reduction.
pub trait RefReduce: FromSeed {
    fn reduce(name: &str, a: &Self, b: &Self) -> Option<Self>;
    /// `sum / count` as a mean (integers: floor division); `None` where the
    /// dtype has no mean.
    fn mean(sum: &Self, count: u64) -> Option<Self>;
    /// Bitwise equality, except that any NaN equals any NaN (payloads are not specified).
    fn same(a: &Self, b: &Self) -> bool;
    /// The product's identity (strings, which have no product: empty).
    fn one() -> Self;
}

macro_rules! ref_int {
    ($($t:ty),*) => {$(impl RefReduce for $t {
        fn reduce(name: &str, a: &Self, b: &Self) -> Option<Self> {
            Some(match name {
                "none" => *b,
                "add" => a.wrapping_add(*b),
                "mul" => a.wrapping_mul(*b),
                "max" => if b > a { *b } else { *a },
                "min" => if b < a { *b } else { *a },
                _ => return None,
            })
        }
        fn mean(sum: &Self, count: u64) -> Option<Self> {
            let quotient = (*sum as i128).div_euclid(count as i128);
            Some(quotient as $t)
        }
        fn same(a: &Self, b: &Self) -> bool { a == b }
        fn one() -> Self { 1 }
    })*};
}
ref_int!(i8, i16, i32, i64, u8, u16, u32, u64);

impl RefReduce for bool {
    fn reduce(name: &str, a: &Self, b: &Self) -> Option<Self> {
        Some(match name {
            "none" => *b,
            "add" | "max" => *a || *b,
            "mul" | "min" => *a && *b,
            _ => return None,
        })
    }
    fn mean(_sum: &Self, _count: u64) -> Option<Self> {
        None
    }
    fn same(a: &Self, b: &Self) -> bool {
        a == b
    }
    fn one() -> Self {
        true
    }
}

/// max/min of two values given as f64 with NaN propagation and signed zeros.
fn ref_float_pick(name: &str, a: f64, b: f64) -> Option<bool> {
    // Some(true) = take b, Some(false) = keep a.
    if a.is_nan() {
        return Some(false);
    }
    if b.is_nan() {
        return Some(true);
    }
    match name {
        "max" => {
            Some(b > a || (a == 0.0 && b == 0.0 && a.is_sign_negative() && b.is_sign_positive()))
        }
        "min" => {
            Some(b < a || (a == 0.0 && b == 0.0 && a.is_sign_positive() && b.is_sign_negative()))
        }
        _ => None,
    }
}

macro_rules! ref_float {
    ($t:ty, $to:expr, $from:expr, $bits:expr) => {
        impl RefReduce for $t {
            fn reduce(name: &str, a: &Self, b: &Self) -> Option<Self> {
                let (x, y): (f64, f64) = ($to(*a), $to(*b));
                Some(match name {
                    "none" => *b,
                    "add" => $from(x, y, |x: f64, y: f64| x + y),
                    "mul" => $from(x, y, |x: f64, y: f64| x * y),
                    "max" | "min" => {
                        if ref_float_pick(name, x, y)? {
                            *b
                        } else {
                            *a
                        }
                    }
                    _ => return None,
                })
            }
            fn mean(sum: &Self, count: u64) -> Option<Self> {
                Some($from($to(*sum), count as f64, |x: f64, y: f64| x / y))
            }
            fn same(a: &Self, b: &Self) -> bool {
                let (x, y): (f64, f64) = ($to(*a), $to(*b));
                (x.is_nan() && y.is_nan()) || $bits(*a) == $bits(*b)
            }
            fn one() -> Self {
                $from(1.0, 1.0, |x: f64, y: f64| x * y)
            }
        }
    };
}
// f32 and f64 compute natively; f16 and bf16 compute in f32 and round each step.
ref_float!(
    f32,
    |v: f32| v as f64,
    |x: f64, y: f64, op: fn(f64, f64) -> f64| native_f32(x as f32, y as f32, op),
    |v: f32| v.to_bits() as u64
);
ref_float!(
    f64,
    |v: f64| v,
    |x: f64, y: f64, op: fn(f64, f64) -> f64| op(x, y),
    |v: f64| v.to_bits()
);
ref_float!(
    gatherscatter::f16,
    |v: gatherscatter::f16| v.to_f64(),
    |x: f64, y: f64, op: fn(f64, f64) -> f64| gatherscatter::f16::from_f32(native_f32(
        x as f32, y as f32, op
    )),
    |v: gatherscatter::f16| v.to_bits() as u64
);
ref_float!(
    gatherscatter::bf16,
    |v: gatherscatter::bf16| v.to_f64(),
    |x: f64, y: f64, op: fn(f64, f64) -> f64| gatherscatter::bf16::from_f32(native_f32(
        x as f32, y as f32, op
    )),
    |v: gatherscatter::bf16| v.to_bits() as u64
);

/// The f32 result of `op` (+ or *) on two f32 values: computed in f64 and
/// rounded once, which equals the correctly rounded f32 operation because
/// f64 has more than 2 * 24 + 2 bits of precision.
fn native_f32(x: f32, y: f32, op: fn(f64, f64) -> f64) -> f32 {
    op(x as f64, y as f64) as f32
}

macro_rules! ref_complex {
    ($($t:ty),*) => {$(impl RefReduce for $t {
        fn reduce(name: &str, a: &Self, b: &Self) -> Option<Self> {
            Some(match name {
                "none" => *b,
                "add" => <$t>::new(a.re + b.re, a.im + b.im),
                "mul" => <$t>::new(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re),
                _ => return None,
            })
        }
        fn mean(sum: &Self, count: u64) -> Option<Self> {
            let c = <$t>::new(count as f64 as _, 0.0).re;
            Some(<$t>::new(sum.re / c, sum.im / c))
        }
        fn same(a: &Self, b: &Self) -> bool {
            let eq = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
            eq(a.re as f64, b.re as f64) && eq(a.im as f64, b.im as f64)
        }
        fn one() -> Self { <$t>::new(1.0, 0.0) }
    })*};
}
ref_complex!(Complex32, Complex64);

impl RefReduce for String {
    fn reduce(name: &str, a: &Self, b: &Self) -> Option<Self> {
        Some(match name {
            "none" => b.clone(),
            "add" => format!("{a}{b}"),
            "max" => {
                if b.as_bytes() > a.as_bytes() {
                    b.clone()
                } else {
                    a.clone()
                }
            }
            "min" => {
                if b.as_bytes() < a.as_bytes() {
                    b.clone()
                } else {
                    a.clone()
                }
            }
            _ => return None,
        })
    }
    fn mean(_sum: &Self, _count: u64) -> Option<Self> {
        None
    }
    fn same(a: &Self, b: &Self) -> bool {
        a == b
    }
    fn one() -> Self {
        String::new()
    }
}

/// Property-test settings shared by the op suites; failures are kept beside
/// the test file as named regression seeds.
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("regressions"),
        )),
        ..proptest::test_runner::Config::default()
    }
}

/// Run `check` under `auto`, then again with a knob forced (cached stores,
/// which `auto` also picks for outputs this small): a forced knob turns the
/// small-call paths off, so small shapes reach both those paths and the
/// general kernels.
pub fn on_small_and_general_paths(
    mut check: impl FnMut() -> Result<(), proptest::test_runner::TestCaseError>,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use gatherscatter::tuning::{self, Stores, Tuning};
    check()?;
    tuning::scoped(Tuning::AUTO.with_stores(Stores::Cached), check)
}

/// The op's result must equal the reference's (by `same`, element by
/// element), or be an out-of-bounds error where the reference rejects.
pub fn check_against_reference<T: Element>(
    result: Result<Tensor, gatherscatter::Error>,
    reference: Option<(Vec<usize>, Vec<T>)>,
    same: impl Fn(&T, &T) -> bool,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::prelude::*;
    match reference {
        Some((shape, expected)) => {
            let out = result.map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(out.shape(), &shape[..]);
            let got = out.data::<T>().unwrap();
            prop_assert_eq!(got.len(), expected.len());
            for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
                prop_assert!(same(g, e), "element {}: got {:?}, expected {:?}", k, g, e);
            }
        }
        None => prop_assert_eq!(
            result.unwrap_err().kind(),
            gatherscatter::ErrorKind::OutOfBounds
        ),
    }
    Ok(())
}

/// Unsigned index types cannot hold the negative form of an index: replace
/// each negative value by its positive equivalent along an axis of size `s`.
pub fn fit_to_index_type(indices: &mut [i128], dtype: DType, s: usize) {
    if !dtype.is_signed_integer() {
        let s = (s as i128).max(1);
        indices.iter_mut().for_each(|v| *v = v.rem_euclid(s));
    }
}

/// ONNX GatherND: for each tuple position `t` of `indices.shape[:-1]` and each
/// trailing coordinate `rest`, `out[t, rest] = data[t[:b], idx(tuple_0), ..,
/// idx(tuple_{k-1}), rest]`. `None` when any component is out of range.
pub fn reference_gather_nd<T: Clone>(
    data: &[T],
    data_shape: &[usize],
    indices: &[i128],
    indices_shape: &[usize],
    b: usize,
) -> Option<(Vec<usize>, Vec<T>)> {
    let q = indices_shape.len();
    let k = indices_shape[q - 1];
    for (flat, c) in coordinates(indices_shape).into_iter().enumerate() {
        idx(indices[flat], data_shape[b + c[q - 1]])?;
    }
    let rest_shape = &data_shape[b + k..];
    let mut out_shape = indices_shape[..q - 1].to_vec();
    out_shape.extend_from_slice(rest_shape);
    let mut out = Vec::new();
    for t in coordinates(&indices_shape[..q - 1]) {
        let mut prefix = t[..b].to_vec();
        for j in 0..k {
            let mut ic = t.clone();
            ic.push(j);
            prefix.push(idx(indices[offset(&ic, indices_shape)], data_shape[b + j])?);
        }
        for rest in coordinates(rest_shape) {
            let mut dc = prefix.clone();
            dc.extend_from_slice(&rest);
            out.push(data[offset(&dc, data_shape)].clone());
        }
    }
    Some((out_shape, out))
}

/// ONNX ScatterND: a copy of data, then for each tuple position `t` in
/// row-major order and each trailing coordinate `rest`,
/// `out[tuple, rest] = f(out[tuple, rest], updates[t, rest])`.
pub fn reference_scatter_nd<T: Clone>(
    data: &[T],
    data_shape: &[usize],
    indices: &[i128],
    indices_shape: &[usize],
    updates: &[T],
    f: impl Fn(&T, &T) -> T,
) -> Option<Vec<T>> {
    let q = indices_shape.len();
    let k = indices_shape[q - 1];
    for (flat, c) in coordinates(indices_shape).into_iter().enumerate() {
        idx(indices[flat], data_shape[c[q - 1]])?;
    }
    let rest_shape = &data_shape[k..];
    let mut updates_shape = indices_shape[..q - 1].to_vec();
    updates_shape.extend_from_slice(rest_shape);
    let mut out = data.to_vec();
    for t in coordinates(&indices_shape[..q - 1]) {
        let mut prefix = Vec::new();
        for (j, &s) in data_shape[..k].iter().enumerate() {
            let mut ic = t.clone();
            ic.push(j);
            prefix.push(idx(indices[offset(&ic, indices_shape)], s)?);
        }
        for rest in coordinates(rest_shape) {
            let mut dc = prefix.clone();
            dc.extend_from_slice(&rest);
            let mut uc = t.clone();
            uc.extend_from_slice(&rest);
            let o = offset(&dc, data_shape);
            out[o] = f(&out[o], &updates[offset(&uc, &updates_shape)]);
        }
    }
    Some(out)
}

/// Map raw values into `[-s, s)` of the dimension each tuple component
/// addresses (leaving them as they are, hence out of range, when `s == 0`),
/// then fit them to the index dtype.
pub fn fit_tuples(raw: &mut [i128], dims: &[usize], dtype: DType) {
    let k = dims.len();
    if k == 0 {
        return;
    }
    for (n, v) in raw.iter_mut().enumerate() {
        let s = dims[n % k] as i128;
        if s > 0 {
            *v = v.rem_euclid(2 * s) - s;
            if !dtype.is_signed_integer() {
                *v = v.rem_euclid(s);
            }
        } else if !dtype.is_signed_integer() {
            *v = v.abs();
        }
    }
}

/// TensorScatter from the ONNX pseudocode: for each batch entry `b` (the
/// first dim) and each step `s` of the update's sequence axis, the update's
/// slice goes to position `write[b] + s` of the cache's axis (modulo its
/// size when `circular`). `None` when a write index puts an update outside
/// the cache (negative, or past the end in linear mode).
pub fn reference_tensor_scatter<T: Clone>(
    past: &[T],
    shape: &[usize],
    update: &[T],
    update_shape: &[usize],
    write: &[i128],
    axis: usize,
    circular: bool,
) -> Option<Vec<T>> {
    let max = shape[axis] as i128;
    for &w in write {
        let fits = if circular {
            w >= 0
        } else {
            w >= 0 && w + update_shape[axis] as i128 <= max
        };
        // An empty cache or update writes nothing, whatever the index.
        if !fits && !past.is_empty() && !update.is_empty() {
            return None;
        }
    }
    let mut out = past.to_vec();
    if update.is_empty() {
        return Some(out);
    }
    for prefix in coordinates(&shape[..axis]) {
        for s in 0..update_shape[axis] {
            let mut pos = write[prefix[0]] + s as i128;
            if circular {
                pos %= max;
            }
            for rest in coordinates(&shape[axis + 1..]) {
                let cache: Vec<usize> = prefix
                    .iter()
                    .copied()
                    .chain([pos as usize])
                    .chain(rest.iter().copied())
                    .collect();
                let upd: Vec<usize> = prefix
                    .iter()
                    .copied()
                    .chain([s])
                    .chain(rest.iter().copied())
                    .collect();
                out[offset(&cache, shape)] = update[offset(&upd, update_shape)].clone();
            }
        }
    }
    Some(out)
}

/// The segment reductions' formula: output element `p` (of `src`'s shape
/// with the axis replaced by `segments`) folds, with the reduction `step`,
/// the values `src[p with p[axis] := r]` for the rows `r` that
/// `members(p[..axis], p[axis])` lists in ascending order (a mean then
/// divides by their count); a segment without rows gets `fill`.
/// `None` when the dtype lacks the aggregate.
#[allow(clippy::too_many_arguments)]
pub fn reference_segment<T: RefReduce>(
    src: &[T],
    src_shape: &[usize],
    axis: usize,
    segments: usize,
    members: impl Fn(&[usize], usize) -> Vec<usize>,
    step: &str,
    mean: bool,
    fill: &T,
) -> Option<(Vec<usize>, Vec<T>)> {
    let mut out_shape = src_shape.to_vec();
    out_shape[axis] = segments;
    let mut out = Vec::new();
    for p in coordinates(&out_shape) {
        let rows = members(&p[..axis], p[axis]);
        let value = |r: usize| {
            let mut at = p.clone();
            at[axis] = r;
            src[offset(&at, src_shape)].clone()
        };
        let Some((&first, rest)) = rows.split_first() else {
            out.push(fill.clone());
            continue;
        };
        let mut acc = value(first);
        for &r in rest {
            acc = T::reduce(step, &acc, &value(r))?;
        }
        if mean {
            acc = T::mean(&acc, rows.len() as u64)?;
        }
        out.push(acc);
    }
    Some((out_shape, out))
}

/// The position in a boundary tensor of leading shape `lead_shape` that
/// serves the slab at `slab` (a dim of size 1 broadcasts).
pub fn broadcast_row(slab: &[usize], lead_shape: &[usize]) -> usize {
    let at: Vec<usize> = slab
        .iter()
        .zip(lead_shape)
        .map(|(&c, &n)| if n == 1 { 0 } else { c })
        .collect();
    offset(&at, lead_shape)
}

/// EmbeddingBag's formula: bag `b` folds, with `step`, the weight rows
/// `weight[idx(indices[j])]` (each times `per_sample_weights[j]` when
/// given, the product rounded to the dtype) for `j` in
/// `bounds[b]..bounds[b + 1]` whose row is not `padding`, in order; a mean
/// divides by their count; a bag without rows gets `fill`. `None` when an
/// index is out of range or the dtype lacks the aggregate.
#[allow(clippy::too_many_arguments)]
pub fn reference_embedding_bag<T: RefReduce>(
    weight: &[T],
    rows: usize,
    dim: usize,
    indices: &[i128],
    bounds: &[usize],
    padding: Option<usize>,
    per_sample_weights: Option<&[T]>,
    step: &str,
    mean: bool,
    fill: &T,
) -> Option<Vec<T>> {
    let mut out = Vec::new();
    for b in 0..bounds.len().saturating_sub(1) {
        let mut members = Vec::new();
        let first = bounds[b];
        for (k, &value) in indices[first..bounds[b + 1]].iter().enumerate() {
            let row = idx(value, rows)?;
            if Some(row) != padding {
                members.push((first + k, row));
            }
        }
        for c in 0..dim {
            let value = |&(j, row): &(usize, usize)| -> Option<T> {
                let x = weight[row * dim + c].clone();
                match per_sample_weights {
                    Some(w) => T::reduce("mul", &x, &w[j]),
                    None => Some(x),
                }
            };
            let Some((first, rest)) = members.split_first() else {
                out.push(fill.clone());
                continue;
            };
            let mut acc = value(first)?;
            for m in rest {
                acc = T::reduce(step, &acc, &value(m)?)?;
            }
            if mean {
                acc = T::mean(&acc, members.len() as u64)?;
            }
            out.push(acc);
        }
    }
    Some(out)
}

/// Central differences of `f` at `base`, one element at a time with step
/// `h`, against the `analytic` gradient: equal within `tol` relative to
/// `1 + |value|`.
pub fn check_finite_differences(
    what: &str,
    base: &[f64],
    analytic: &[f64],
    h: f64,
    tol: f64,
    f: impl Fn(&[f64]) -> f64,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::prelude::*;
    prop_assert_eq!(base.len(), analytic.len(), "{}: gradient length", what);
    for (t, &exact) in analytic.iter().enumerate() {
        let (mut up, mut down) = (base.to_vec(), base.to_vec());
        up[t] += h;
        down[t] -= h;
        let numeric = (f(&up) - f(&down)) / (2.0 * h);
        let scale = 1.0 + numeric.abs().max(exact.abs());
        prop_assert!(
            (numeric - exact).abs() <= tol * scale,
            "{}[{}]: finite difference {} vs gradient {}",
            what,
            t,
            numeric,
            exact
        );
    }
    Ok(())
}
