//! Gradients of the gathers (spec §2.17): against a scatter-add written from
//! the formula (bit for bit: the same ascending order), against central
//! finite differences of the library's own forward in f64, under every index
//! policy, bit-identical for 1, 2, 3 and 5 threads, and every error.

mod common;
mod pool;

use common::*;
use gatherscatter::{
    DType, ErrorKind, Gather, GatherElements, GatherND, IndexPolicy, Op, Tensor, TensorView,
};
use pool::in_pool;
use proptest::prelude::*;

const POLICIES: [&str; 4] = ["raise", "clip", "wrap", "fill"];

fn policy(name: &str) -> IndexPolicy {
    name.parse().unwrap()
}

/// The forward's policy: fill with 0, so a filled position adds a constant
/// to the finite differences, never a NaN.
fn forward_policy(name: &str) -> IndexPolicy {
    match name {
        "fill" => IndexPolicy::Fill(Some(Tensor::scalar(0.0f64))),
        other => policy(other),
    }
}

/// Where index `v` reads on an axis of `s` under `policy`, from spec §2.16.
fn read(policy: &str, v: i128, s: usize) -> Option<usize> {
    let s_wide = s as i128;
    match policy {
        "clip" if s > 0 => {
            let from_end = if (-s_wide..0).contains(&v) {
                v + s_wide
            } else {
                v
            };
            Some(from_end.clamp(0, s_wide - 1) as usize)
        }
        "wrap" if s > 0 => Some(v.rem_euclid(s_wide) as usize),
        _ => idx(v, s),
    }
}

/// What each op reads: for output position `p` (row-major in the output
/// shape), the data offset it reads, or `None` (a fill position).
struct Reads {
    out_shape: Vec<usize>,
    sources: Vec<Option<usize>>,
}

fn gather_reads(
    policy: &str,
    data_shape: &[usize],
    indices: &[i128],
    idx_shape: &[usize],
    axis: usize,
    b: usize,
) -> Reads {
    let mut out_shape = data_shape[..axis].to_vec();
    out_shape.extend_from_slice(&idx_shape[b..]);
    out_shape.extend_from_slice(&data_shape[axis + 1..]);
    let m = idx_shape.len() - b;
    let sources = coordinates(&out_shape)
        .iter()
        .map(|p| {
            let mut at = p[..b].to_vec();
            at.extend_from_slice(&p[axis..axis + m]);
            let t = read(policy, indices[offset(&at, idx_shape)], data_shape[axis])?;
            let mut src = p[..axis].to_vec();
            src.push(t);
            src.extend_from_slice(&p[axis + m..]);
            Some(offset(&src, data_shape))
        })
        .collect();
    Reads { out_shape, sources }
}

fn elements_reads(
    policy: &str,
    data_shape: &[usize],
    indices: &[i128],
    idx_shape: &[usize],
    axis: usize,
) -> Reads {
    let sources = coordinates(idx_shape)
        .iter()
        .enumerate()
        .map(|(flat, p)| {
            let mut src = p.clone();
            src[axis] = read(policy, indices[flat], data_shape[axis])?;
            Some(offset(&src, data_shape))
        })
        .collect();
    Reads {
        out_shape: idx_shape.to_vec(),
        sources,
    }
}

fn nd_reads(
    policy: &str,
    data_shape: &[usize],
    indices: &[i128],
    idx_shape: &[usize],
    b: usize,
) -> Reads {
    let q = idx_shape.len();
    let k = idx_shape[q - 1];
    let mut out_shape = idx_shape[..q - 1].to_vec();
    out_shape.extend_from_slice(&data_shape[b + k..]);
    let sources = coordinates(&out_shape)
        .iter()
        .map(|p| {
            let tuple = offset(&p[..q - 1], &idx_shape[..q - 1]);
            let mut src = p[..b].to_vec();
            for j in 0..k {
                src.push(read(policy, indices[tuple * k + j], data_shape[b + j])?);
            }
            src.extend_from_slice(&p[q - 1..]);
            Some(offset(&src, data_shape))
        })
        .collect();
    Reads { out_shape, sources }
}

/// The formula: `grad[t] = Σ grad_out[p]` over the p that read t, in
/// ascending p.
fn reference_grad(reads: &Reads, grad_out: &[f64], data_len: usize) -> Vec<f64> {
    let mut grad = vec![0.0; data_len];
    for (g, source) in grad_out.iter().zip(&reads.sources) {
        if let Some(t) = source {
            grad[*t] += g;
        }
    }
    grad
}

fn values(len: usize, seed: u64) -> Vec<f64> {
    (0..len as u64)
        .map(|i| (((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed) % 2001) as f64 / 64.0 - 15.6)
        .collect()
}

/// Checks the gradient against the formula (bit for bit) and against central
/// differences of `forward` (the library's gather under the same policy).
fn check(
    grad: gatherscatter::Result<Tensor>,
    reads: &Reads,
    grad_out: &[f64],
    data_shape: &[usize],
    forward: impl Fn(&Tensor) -> Tensor,
) -> Result<(), TestCaseError> {
    let data_len: usize = data_shape.iter().product();
    let grad = grad.map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(grad.shape(), data_shape);
    let want = reference_grad(reads, grad_out, data_len);
    let got = grad.data::<f64>().unwrap();
    prop_assert_eq!(format!("{got:?}"), format!("{want:?}"));
    let data = values(data_len, 7);
    let dot = |d: &[f64]| -> f64 {
        let out = forward(&Tensor::new(data_shape.to_vec(), d.to_vec()).unwrap());
        out.data::<f64>()
            .unwrap()
            .iter()
            .zip(grad_out)
            .map(|(o, g)| o * g)
            .sum()
    };
    // f is linear in data: any step is exact up to rounding.
    check_finite_differences("grad_data", &data, got, 0.5, 1e-9, dot)
}

fn run_forward(policy: &IndexPolicy, op: &Op, data: &Tensor, indices: &Tensor) -> Tensor {
    policy.run(op, &[data.into(), indices.into()]).unwrap()
}

fn index_values(len: usize, low: i128, high: i128, seed: u64) -> Vec<i128> {
    let span = (high - low).max(1) as u64;
    (0..len as u64)
        .map(|i| low + (((i + 3).wrapping_mul(0xD1B5_4A32_D192_ED03) ^ seed) % span) as i128)
        .collect()
}

fn gather_case() -> impl Strategy<Value = (Vec<usize>, usize, usize, Vec<usize>, u64, &'static str)>
{
    (
        shape(1..=3),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        shape(0..=2),
        any::<u64>(),
        prop::sample::select(POLICIES.to_vec()),
    )
        .prop_map(|(data_shape, axis, b, extra, seed, policy)| {
            let axis = axis.index(data_shape.len());
            let b = b.index(axis + 1);
            let mut idx_shape = data_shape[..b].to_vec();
            idx_shape.extend(extra);
            (data_shape, axis, b, idx_shape, seed, policy)
        })
}

proptest! {
    #![proptest_config(proptest_config(200))]

    #[test]
    fn gather_grad_is_the_formula_and_the_finite_difference((data_shape, axis, b, idx_shape, seed, name) in gather_case()) {
        let s = data_shape[axis] as i128;
        let (low, high) = if name == "raise" { (-s, s) } else { (-2 * s - 1, 2 * s + 2) };
        let n: usize = idx_shape.iter().product();
        if name == "raise" && s == 0 && n > 0 { return Ok(()); }
        if (name == "clip" || name == "wrap") && s == 0 && n > 0 { return Ok(()); }
        let raw = index_values(n, low, high, seed);
        let indices = index_tensor(DType::I64, &idx_shape, &raw);
        let reads = gather_reads(name, &data_shape, &raw, &idx_shape, axis, b);
        let grad_out = values(reads.out_shape.iter().product(), seed);
        let g = Tensor::new(reads.out_shape.clone(), grad_out.clone()).unwrap();
        let op = Op::from(Gather::new(axis as i64).batch_dims(b));
        let p = policy(name);
        let grad = p.grad(&op, (&g).into(), (&indices).into(), &data_shape);
        check(grad, &reads, &grad_out, &data_shape, |d| run_forward(&forward_policy(name), &op, d, &indices))?;
    }

    #[test]
    fn gather_elements_grad_is_the_formula_and_the_finite_difference(
        (data_shape, axis) in shape(1..=3).prop_flat_map(|s| { let r = s.len(); (Just(s), 0..r) }),
        shrink in proptest::collection::vec(0usize..=1, 3), along in 0usize..=4, seed in any::<u64>(),
        name in prop::sample::select(POLICIES.to_vec()),
    ) {
        let idx_shape: Vec<usize> = data_shape.iter().enumerate()
            .map(|(d, &n)| if d == axis { along } else { n.saturating_sub(shrink[d]) }).collect();
        let s = data_shape[axis] as i128;
        let n: usize = idx_shape.iter().product();
        if name != "fill" && s == 0 && n > 0 { return Ok(()); }
        let (low, high) = if name == "raise" { (-s, s) } else { (-2 * s - 1, 2 * s + 2) };
        let raw = index_values(n, low, high, seed);
        let indices = index_tensor(DType::I32, &idx_shape, &raw);
        let reads = elements_reads(name, &data_shape, &raw, &idx_shape, axis);
        let grad_out = values(n, seed);
        let g = Tensor::new(idx_shape.clone(), grad_out.clone()).unwrap();
        let op = Op::from(GatherElements::new(axis as i64));
        let p = policy(name);
        let grad = p.grad(&op, (&g).into(), (&indices).into(), &data_shape);
        check(grad, &reads, &grad_out, &data_shape, |d| run_forward(&forward_policy(name), &op, d, &indices))?;
    }

    #[test]
    fn gather_nd_grad_is_the_formula_and_the_finite_difference(
        data_shape in shape(1..=4), b in 0usize..=1, k in 0usize..=3, lead in shape(0..=2), seed in any::<u64>(),
        name in prop::sample::select(POLICIES.to_vec()),
    ) {
        if data_shape.len() < 2 && b == 1 { return Ok(()); }
        let b = b.min(data_shape.len() - 1);
        let k = k.clamp(1, data_shape.len() - b);
        let mut idx_shape = data_shape[..b].to_vec();
        idx_shape.extend(lead);
        idx_shape.push(k);
        let n: usize = idx_shape.iter().product();
        let mut raw = vec![0i128; n];
        for (flat, v) in raw.iter_mut().enumerate() {
            let s = data_shape[b + flat % k.max(1)] as i128;
            let (low, high) = if name == "raise" { (-s, s) } else { (-2 * s - 1, 2 * s + 2) };
            *v = index_values(1, low, high, seed ^ flat as u64)[0];
        }
        let empty_axis = (0..k).any(|j| data_shape[b + j] == 0);
        if name != "fill" && empty_axis && n > 0 { return Ok(()); }
        let indices = index_tensor(DType::I64, &idx_shape, &raw);
        let reads = nd_reads(name, &data_shape, &raw, &idx_shape, b);
        let grad_out = values(reads.out_shape.iter().product(), seed);
        let g = Tensor::new(reads.out_shape.clone(), grad_out.clone()).unwrap();
        let op = Op::from(GatherND::new().batch_dims(b));
        let p = policy(name);
        let grad = p.grad(&op, (&g).into(), (&indices).into(), &data_shape);
        check(grad, &reads, &grad_out, &data_shape, |d| run_forward(&forward_policy(name), &op, d, &indices))?;
    }
}

#[test]
fn gradients_with_heavy_duplicates_are_bit_identical_for_every_thread_count() {
    let rows = 64;
    let data_shape = [rows, 300];
    let n = 5000;
    let raw = index_values(n, -(rows as i128), rows as i128, 11);
    let indices = index_tensor(DType::I64, &[n], &raw);
    let grad_out: Vec<f32> = values(n * 300, 5).iter().map(|&v| v as f32 * 1e3).collect();
    let g = Tensor::new(vec![n, 300], grad_out).unwrap();
    let cases: Vec<(Op, Tensor, Tensor)> = vec![
        (Gather::new(0).into(), indices.clone(), g.clone()),
        (
            Gather::new(1).into(),
            index_tensor(DType::I32, &[700], &index_values(700, -300, 300, 3)),
            Tensor::new(
                vec![rows, 700],
                values(rows * 700, 9).iter().map(|&v| v as f32).collect(),
            )
            .unwrap(),
        ),
        (
            GatherElements::new(0).into(),
            index_tensor(
                DType::I64,
                &[n, 300],
                &index_values(n * 300, -(rows as i128), rows as i128, 4),
            ),
            g.clone(),
        ),
        (
            GatherND::new().into(),
            index_tensor(DType::I64, &[n, 1], &raw),
            g.clone(),
        ),
    ];
    for (op, indices, grad_out) in &cases {
        let shape: &[usize] = &data_shape;
        let run = || {
            IndexPolicy::Raise
                .grad(op, grad_out.into(), indices.into(), shape)
                .unwrap()
        };
        let one = in_pool(1, run);
        for threads in [2, 3, 5] {
            let many = in_pool(threads, run);
            assert_eq!(
                format!("{many:?}"),
                format!("{one:?}"),
                "{} on {threads} threads",
                op.name()
            );
        }
    }
}

#[test]
fn a_grad_out_of_the_wrong_shape_is_named() {
    let g = Tensor::from_vec(vec![1.0f32, 2.0]);
    let indices = Tensor::from_vec(vec![0i64, 1, 2]);
    let err = Gather::new(0).grad(&g, &indices, &[4]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert_eq!(
        err.to_string(),
        "grad_out has shape [2], but the output of Gather has shape [3]"
    );
}

#[test]
fn integer_gradients_are_refused() {
    let g = Tensor::from_vec(vec![1i32, 2]);
    let indices = Tensor::from_vec(vec![0i64, 1]);
    let err = GatherElements::new(0).grad(&g, &indices, &[2]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
    assert!(
        err.to_string().starts_with("grad_out has dtype int32"),
        "{err}"
    );
}

#[test]
fn an_out_of_range_index_is_the_forward_error() {
    let indices = Tensor::new(vec![2, 1], vec![0i64, 3]).unwrap();
    let data = Tensor::new(vec![3, 2], vec![0.0f64; 6]).unwrap();
    let forward = Gather::new(0).run(&data, &indices).unwrap_err();
    let grad_out = Tensor::new(vec![2, 1, 2], vec![1.0f64; 4]).unwrap();
    let grad = Gather::new(0)
        .grad(&grad_out, &indices, &[3, 2])
        .unwrap_err();
    assert_eq!(grad.kind(), ErrorKind::OutOfBounds);
    assert_eq!(grad.to_string(), forward.to_string());
}

#[test]
fn drop_and_non_gathers_are_refused() {
    let g = Tensor::from_vec(vec![1.0f32]);
    let indices = Tensor::from_vec(vec![0i64]);
    let op = Op::from(Gather::new(0));
    let err = IndexPolicy::Drop
        .grad(&op, (&g).into(), (&indices).into(), &[1])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
    let scatter = Op::from(gatherscatter::ScatterElements::new(0));
    let err = IndexPolicy::Raise
        .grad(&scatter, TensorView::from(&g), (&indices).into(), &[1])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
}

// -- the scatters' gradients

/// `n` distinct values (gaps of at least 0.37), so a max or min never ties
/// and a finite-difference step never changes the winner.
fn distinct(n: usize, seed: u64) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n)
        .map(|i| (i as f64 - n as f64 / 2.0) * 0.37 + 0.11)
        .collect();
    for i in (1..n).rev() {
        let j = ((i as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ seed) as usize % (i + 1);
        v.swap(i, j);
    }
    v
}

fn scatter_ops(axis: i64, k_dims: bool) -> Vec<(String, Op)> {
    use gatherscatter::{Aggregate, Reduction, ScatterElements, ScatterND, ScatterReduce};
    let reductions = [
        Reduction::None,
        Reduction::Add,
        Reduction::Mul,
        Reduction::Max,
        Reduction::Min,
    ];
    let mut ops: Vec<(String, Op)> = Vec::new();
    for r in reductions {
        if k_dims {
            ops.push((
                format!("ScatterND {r:?}"),
                ScatterND::new().reduction(r).into(),
            ));
        } else {
            ops.push((
                format!("ScatterElements {r:?}"),
                ScatterElements::new(axis).reduction(r).into(),
            ));
        }
    }
    if !k_dims {
        for a in Aggregate::ALL {
            for include_self in [true, false] {
                let op = ScatterReduce::new(axis, a).include_self(include_self);
                ops.push((
                    format!("ScatterReduce {a:?} self={include_self}"),
                    op.into(),
                ));
            }
        }
    }
    ops
}

/// Central differences of `Σ grad_out · forward(data, updates)` against
/// the scatter's gradients, every element of both.
fn check_scatter_fd(
    name: &str,
    policy: &IndexPolicy,
    op: &Op,
    data: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
    seed: u64,
) -> Result<(), TestCaseError> {
    let grad_out = Tensor::new(
        data.shape().to_vec(),
        values(data.shape().iter().product(), seed),
    )
    .unwrap();
    let grads = policy
        .scatter_grad(
            op,
            data.into(),
            indices.into(),
            updates.into(),
            (&grad_out).into(),
        )
        .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
    prop_assert_eq!(grads.data.shape(), data.shape());
    prop_assert_eq!(grads.updates.shape(), updates.shape());
    let f = |d: &Tensor, u: &Tensor| -> f64 {
        let out = policy
            .run(op, &[d.into(), indices.into(), u.into()])
            .unwrap();
        out.data::<f64>()
            .unwrap()
            .iter()
            .zip(grad_out.data::<f64>().unwrap())
            .map(|(o, g)| o * g)
            .sum()
    };
    let what = |which: &str| format!("{name}: d/d{which}");
    check_finite_differences(
        &what("data"),
        data.data::<f64>().unwrap(),
        grads.data.data::<f64>().unwrap(),
        1e-3,
        1e-6,
        |v| {
            f(
                &Tensor::new(data.shape().to_vec(), v.to_vec()).unwrap(),
                updates,
            )
        },
    )?;
    check_finite_differences(
        &what("updates"),
        updates.data::<f64>().unwrap(),
        grads.updates.data::<f64>().unwrap(),
        1e-3,
        1e-6,
        |v| {
            f(
                data,
                &Tensor::new(updates.shape().to_vec(), v.to_vec()).unwrap(),
            )
        },
    )
}

proptest! {
    #![proptest_config(proptest_config(60))]

    #[test]
    fn scatter_elements_and_scatter_reduce_gradients_are_the_finite_differences(
        (data_shape, axis) in proptest::collection::vec(1usize..=3, 1..=3).prop_flat_map(|s| { let r = s.len(); (Just(s), 0..r) }),
        along in 0usize..=4, seed in any::<u64>(), name in prop::sample::select(vec!["raise", "clip", "wrap", "drop"]),
    ) {
        let idx_shape: Vec<usize> = data_shape.iter().enumerate().map(|(d, &n)| if d == axis { along } else { n }).collect();
        let n_idx: usize = idx_shape.iter().product();
        let s = data_shape[axis] as i128;
        let (low, high) = if name == "raise" { (-s, s) } else { (-2 * s - 1, 2 * s + 2) };
        let indices = index_tensor(DType::I64, &idx_shape, &index_values(n_idx, low, high, seed));
        let data_len: usize = data_shape.iter().product();
        let pool = distinct(data_len + n_idx, seed);
        let data = Tensor::new(data_shape.clone(), pool[..data_len].to_vec()).unwrap();
        let updates = Tensor::new(idx_shape.clone(), pool[data_len..].to_vec()).unwrap();
        for (label, op) in scatter_ops(axis as i64, false) {
            check_scatter_fd(&format!("{label} {name}"), &policy(name), &op, &data, &indices, &updates, seed)?;
        }
    }

    #[test]
    fn scatter_nd_gradients_are_the_finite_differences(
        data_shape in proptest::collection::vec(1usize..=3, 1..=3), k in 1usize..=3, lead in proptest::collection::vec(0usize..=3, 0..=2),
        seed in any::<u64>(), name in prop::sample::select(vec!["raise", "clip", "wrap", "drop"]),
    ) {
        let k = k.min(data_shape.len());
        let mut idx_shape = lead.clone();
        idx_shape.push(k);
        let n: usize = idx_shape.iter().product();
        let raw: Vec<i128> = (0..n).map(|flat| {
            let s = data_shape[flat % k] as i128;
            let (low, high) = if name == "raise" { (-s, s) } else { (-2 * s - 1, 2 * s + 2) };
            index_values(1, low, high, seed ^ flat as u64)[0]
        }).collect();
        let indices = index_tensor(DType::I64, &idx_shape, &raw);
        let mut upd_shape = lead.clone();
        upd_shape.extend_from_slice(&data_shape[k..]);
        let data_len: usize = data_shape.iter().product();
        let upd_len: usize = upd_shape.iter().product();
        let pool = distinct(data_len + upd_len, seed);
        let data = Tensor::new(data_shape.clone(), pool[..data_len].to_vec()).unwrap();
        let updates = Tensor::new(upd_shape, pool[data_len..].to_vec()).unwrap();
        for (label, op) in scatter_ops(0, true) {
            check_scatter_fd(&format!("{label} {name}"), &policy(name), &op, &data, &indices, &updates, seed)?;
        }
    }
}

fn scatter_grads(
    op: impl Into<Op>,
    data: &[f64],
    indices: &[i64],
    updates: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let (data, indices, updates) = (
        Tensor::from_vec(data.to_vec()),
        Tensor::from_vec(indices.to_vec()),
        Tensor::from_vec(updates.to_vec()),
    );
    let grad_out = Tensor::from_vec(vec![1.0f64; data.len()]);
    let grads = IndexPolicy::Raise
        .scatter_grad(
            &op.into(),
            (&data).into(),
            (&indices).into(),
            (&updates).into(),
            (&grad_out).into(),
        )
        .unwrap();
    (
        grads.data.data::<f64>().unwrap().to_vec(),
        grads.updates.data::<f64>().unwrap().to_vec(),
    )
}

#[test]
fn tied_winners_of_a_max_share_the_gradient_evenly_self_included() {
    use gatherscatter::{Aggregate, ScatterReduce};
    let op = ScatterReduce::new(0, Aggregate::Amax);
    let (data, updates) = scatter_grads(op, &[3.0, 1.0], &[0, 0, 0, 1], &[3.0, 2.0, 3.0, 0.5]);
    assert_eq!(data, [1.0 / 3.0, 1.0]); // self ties at 3 with two updates; element 1 keeps its 1.0
    assert_eq!(updates, [1.0 / 3.0, 0.0, 1.0 / 3.0, 0.0]);
    let (data, updates) = scatter_grads(
        op.include_self(false),
        &[3.0, 1.0],
        &[0, 0, 0, 1],
        &[3.0, 2.0, 3.0, 0.5],
    );
    assert_eq!(data, [0.0, 0.0]);
    assert_eq!(updates, [0.5, 0.0, 0.5, 1.0]);
}

#[test]
fn a_nan_result_sends_its_gradient_to_the_nans() {
    use gatherscatter::{Reduction, ScatterElements};
    let op = ScatterElements::new(0).reduction(Reduction::Max);
    let (data, updates) = scatter_grads(op, &[1.0], &[0, 0], &[f64::NAN, 2.0]);
    assert_eq!((data, updates), (vec![0.0], vec![1.0, 0.0]));
}

#[test]
fn products_with_zero_factors_have_exact_gradients() {
    use gatherscatter::{Reduction, ScatterElements};
    let op = ScatterElements::new(0).reduction(Reduction::Mul);
    // out = 2 * 0 * 0 * 5: every factor's "others" holds a zero but none is divided by.
    let (data, updates) = scatter_grads(op, &[2.0], &[0, 0, 0], &[0.0, 0.0, 5.0]);
    assert_eq!(data, [0.0]);
    assert_eq!(updates, [0.0, 0.0, 0.0]);
    let (data, updates) = scatter_grads(op, &[2.0], &[0, 0], &[0.0, 5.0]);
    assert_eq!(data, [0.0]);
    assert_eq!(updates, [10.0, 0.0]);
}

#[test]
fn the_last_duplicate_of_a_plain_scatter_takes_the_gradient() {
    use gatherscatter::ScatterElements;
    let (data, updates) = scatter_grads(
        ScatterElements::new(0),
        &[1.0, 1.0, 1.0],
        &[2, 0, 2],
        &[4.0, 5.0, 6.0],
    );
    assert_eq!(data, [0.0, 1.0, 0.0]);
    assert_eq!(updates, [0.0, 1.0, 1.0]);
}

#[test]
fn scatter_gradients_with_heavy_duplicates_are_bit_identical_for_every_thread_count() {
    let (rows, cols, n) = (50, 40, 6000);
    let data = Tensor::new(
        vec![rows, cols],
        values(rows * cols, 1).iter().map(|&v| v as f32).collect(),
    )
    .unwrap();
    let indices = index_tensor(
        DType::I64,
        &[n, cols],
        &index_values(n * cols, -(rows as i128), rows as i128, 2),
    );
    let updates = Tensor::new(
        vec![n, cols],
        values(n * cols, 3)
            .iter()
            .map(|&v| (v as f32).round())
            .collect(),
    )
    .unwrap();
    let grad_out = Tensor::new(
        vec![rows, cols],
        values(rows * cols, 4).iter().map(|&v| v as f32).collect(),
    )
    .unwrap();
    for (label, op) in scatter_ops(0, false) {
        let run = || {
            let g = IndexPolicy::Raise
                .scatter_grad(
                    &op,
                    (&data).into(),
                    (&indices).into(),
                    (&updates).into(),
                    (&grad_out).into(),
                )
                .unwrap();
            format!("{:?} {:?}", g.data, g.updates)
        };
        let one = in_pool(1, run);
        for threads in [2, 3, 5] {
            assert_eq!(in_pool(threads, run), one, "{label} on {threads} threads");
        }
    }
}

#[test]
fn a_scatters_gradient_fails_with_the_forwards_error() {
    use gatherscatter::{Aggregate, Reduction, ScatterElements, ScatterND, ScatterReduce};
    let data = Tensor::new(vec![3, 2], vec![1.0f64; 6]).unwrap();
    let grad_out = data.clone();
    let cases: Vec<(Op, Tensor, Tensor)> = vec![
        // an index out of range, a sum and a max (which runs the forward anyway)
        (
            ScatterReduce::new(0, Aggregate::Sum).into(),
            Tensor::new(vec![2, 2], vec![0i64, 1, 3, 0]).unwrap(),
            Tensor::new(vec![2, 2], vec![1.0f64; 4]).unwrap(),
        ),
        (
            ScatterReduce::new(0, Aggregate::Amax).into(),
            Tensor::new(vec![2, 2], vec![0i64, 1, -4, 0]).unwrap(),
            Tensor::new(vec![2, 2], vec![1.0f64; 4]).unwrap(),
        ),
        // updates of the wrong shape
        (
            ScatterElements::new(1).reduction(Reduction::Add).into(),
            Tensor::new(vec![3, 1], vec![0i64, 1, 0]).unwrap(),
            Tensor::new(vec![3, 2], vec![1.0f64; 6]).unwrap(),
        ),
        // tuples longer than data's rank
        (
            ScatterND::new().reduction(Reduction::Mul).into(),
            Tensor::new(vec![1, 3], vec![0i64, 0, 0]).unwrap(),
            Tensor::from_vec(vec![1.0f64]),
        ),
        // indices of a float dtype
        (
            ScatterElements::new(0).into(),
            Tensor::new(vec![1, 2], vec![0.0f32, 1.0]).unwrap(),
            Tensor::new(vec![1, 2], vec![1.0f64; 2]).unwrap(),
        ),
    ];
    for (op, indices, updates) in &cases {
        let forward = op
            .run(&[(&data).into(), indices.into(), updates.into()])
            .unwrap_err();
        let grad = IndexPolicy::Raise
            .scatter_grad(
                op,
                (&data).into(),
                indices.into(),
                updates.into(),
                (&grad_out).into(),
            )
            .unwrap_err();
        assert_eq!(grad.to_string(), forward.to_string(), "{}", op.name());
    }
}

proptest! {
    #![proptest_config(proptest_config(100))]

    #[test]
    fn tensor_scatter_gradients_are_the_finite_differences(
        shape in proptest::collection::vec(1usize..=3, 2..=4), axis in 1usize..=3, len in 1usize..=4,
        circular in any::<bool>(), seed in any::<u64>(),
    ) {
        use gatherscatter::{ScatterMode, TensorScatter};
        let axis = axis.min(shape.len() - 1);
        let mut cache_shape = shape.clone();
        cache_shape[axis] = len + 1;
        let mut update_shape = shape.clone();
        update_shape[axis] = shape[axis].min(len + 1);
        let room = (cache_shape[axis] - update_shape[axis]) as i128;
        let high = if circular { cache_shape[axis] as i128 } else { room + 1 };
        let at = index_tensor(DType::I64, &[cache_shape[0]], &index_values(cache_shape[0], 0, high, seed));
        let mode = if circular { ScatterMode::Circular } else { ScatterMode::Linear };
        let op = TensorScatter::new().axis(axis as i64).mode(mode);
        let cache_len: usize = cache_shape.iter().product();
        let update_len: usize = update_shape.iter().product();
        let pool = values(cache_len + update_len, seed);
        let cache = Tensor::new(cache_shape.clone(), pool[..cache_len].to_vec()).unwrap();
        let update = Tensor::new(update_shape.clone(), pool[cache_len..].to_vec()).unwrap();
        let grad_out = Tensor::new(cache_shape.clone(), values(cache_len, seed ^ 1)).unwrap();
        let grads = op.grad((&cache).into(), (&update).into(), Some((&at).into()), (&grad_out).into()).unwrap();
        let f = |c: &Tensor, u: &Tensor| -> f64 {
            let out = op.run(c, u, Some((&at).into())).unwrap();
            out.data::<f64>().unwrap().iter().zip(grad_out.data::<f64>().unwrap()).map(|(o, g)| o * g).sum()
        };
        // f is linear in both: any step is exact up to rounding.
        let as_cache = |v: &[f64]| Tensor::new(cache_shape.clone(), v.to_vec()).unwrap();
        let as_update = |v: &[f64]| Tensor::new(update_shape.clone(), v.to_vec()).unwrap();
        check_finite_differences("past_cache", cache.data::<f64>().unwrap(), grads.data.data::<f64>().unwrap(), 0.5, 1e-9, |v| f(&as_cache(v), &update))?;
        check_finite_differences("update", update.data::<f64>().unwrap(), grads.updates.data::<f64>().unwrap(), 0.5, 1e-9, |v| f(&cache, &as_update(v)))?;
    }
}
