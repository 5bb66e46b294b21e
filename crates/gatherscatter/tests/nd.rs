//! GatherND and ScatterND: the ONNX examples verbatim, the per-dimension
//! bounds check, errors, opset profiles, and property tests against naive
//! references (under each forced `stores` as well).

mod common;

use common::*;
use gatherscatter::tuning::{self, Tuning};
use gatherscatter::{
    bf16, DType, Element, Error, ErrorKind, GatherND, Profile, Reduction, ScatterND, Tensor,
};
use proptest::prelude::*;

fn i32s(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

fn i64s(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

fn onnx(opset: u32) -> Profile {
    Profile::Onnx { opset }
}

// ---- ONNX GatherND examples 1-5 ----

#[test]
fn onnx_gather_nd_examples() {
    let d2 = i32s(&[2, 2], &[0, 1, 2, 3]);
    let d3 = i32s(&[2, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7]);
    // (data, indices, batch_dims, expected shape, expected values)
    type Case<'a> = (&'a Tensor, Tensor, usize, &'a [usize], &'a [i32]);
    let cases: Vec<Case> = vec![
        (&d2, i64s(&[2, 2], &[0, 0, 1, 1]), 0, &[2], &[0, 3]),
        (&d2, i64s(&[2, 1], &[1, 0]), 0, &[2, 2], &[2, 3, 0, 1]),
        (&d3, i64s(&[2, 2], &[0, 1, 1, 0]), 0, &[2, 2], &[2, 3, 4, 5]),
        (
            &d3,
            i64s(&[2, 1, 2], &[0, 1, 1, 0]),
            0,
            &[2, 1, 2],
            &[2, 3, 4, 5],
        ),
        (&d3, i64s(&[2, 1], &[1, 0]), 1, &[2, 2], &[2, 3, 4, 5]),
    ];
    for (n, (data, indices, b, shape, values)) in cases.into_iter().enumerate() {
        for opset in [12, 13] {
            let out = GatherND::new()
                .batch_dims(b)
                .profile(onnx(opset))
                .run(data, &indices)
                .unwrap();
            assert_eq!(out.shape(), shape, "example {}", n + 1);
            assert_eq!(out.data::<i32>().unwrap(), values, "example {}", n + 1);
        }
    }
}

// ---- ONNX ScatterND examples and node tests ----

fn scatter_nd_4x4x4() -> Tensor {
    let block_a = [1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1];
    let block_b = [8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6, 7, 8];
    let v: Vec<f32> = [block_a, block_a, block_b, block_b]
        .concat()
        .into_iter()
        .map(|x| x as f32)
        .collect();
    f32s(&[4, 4, 4], &v)
}

fn scatter_nd_updates() -> Tensor {
    let v: Vec<f32> = [5, 6, 7, 8, 1, 2, 3, 4]
        .iter()
        .flat_map(|&x| [x as f32; 4])
        .collect();
    f32s(&[2, 4, 4], &v)
}

#[test]
fn onnx_scatter_nd_example_1() {
    let data = f32s(&[8], &[1., 2., 3., 4., 5., 6., 7., 8.]);
    let out = ScatterND::new()
        .profile(onnx(11))
        .run(
            &data,
            &i64s(&[4, 1], &[4, 3, 1, 7]),
            &f32s(&[4], &[9., 10., 11., 12.]),
        )
        .unwrap();
    assert_eq!(
        out.data::<f32>().unwrap(),
        &[1., 11., 3., 10., 9., 6., 7., 12.]
    );
}

#[test]
fn onnx_scatter_nd_example_2() {
    let data = scatter_nd_4x4x4();
    let out = ScatterND::new()
        .profile(onnx(11))
        .run(&data, &i64s(&[2, 1], &[0, 2]), &scatter_nd_updates())
        .unwrap();
    let d = data.data::<f32>().unwrap();
    let u = scatter_nd_updates();
    let u = u.data::<f32>().unwrap();
    let expected: Vec<f32> = [&u[..16], &d[16..32], &u[16..], &d[48..]].concat();
    assert_eq!(out.data::<f32>().unwrap(), &expected[..]);
}

#[test]
fn onnx_scatter_nd_reduction_node_tests() {
    // test_scatternd_add / _multiply / _max / _min: indices [[0], [0]] hit slice 0 twice.
    // (The "Expecting output" comments in ONNX's scatternd.py also show slice 2
    // replaced; that text is stale: the test data comes from scatter_nd_impl,
    // which only touches slice 0.)
    let data = scatter_nd_4x4x4();
    let expected_slice0: [(Reduction, [f32; 16]); 4] = [
        (
            Reduction::Add,
            [
                7., 8., 9., 10., 13., 14., 15., 16., 18., 17., 16., 15., 16., 15., 14., 13.,
            ],
        ),
        (
            Reduction::Mul,
            [
                5., 10., 15., 20., 60., 72., 84., 96., 168., 147., 126., 105., 128., 96., 64., 32.,
            ],
        ),
        (
            Reduction::Max,
            [
                5., 5., 5., 5., 6., 6., 7., 8., 8., 7., 7., 7., 8., 8., 8., 8.,
            ],
        ),
        (
            Reduction::Min,
            [
                1., 1., 1., 1., 2., 2., 2., 2., 3., 3., 3., 3., 4., 3., 2., 1.,
            ],
        ),
    ];
    let d = data.data::<f32>().unwrap();
    for (reduction, slice0) in expected_slice0 {
        let out = ScatterND::new()
            .reduction(reduction)
            .profile(onnx(18))
            .run(&data, &i64s(&[2, 1], &[0, 0]), &scatter_nd_updates())
            .unwrap();
        let expected: Vec<f32> = [&slice0[..], &d[16..]].concat();
        assert_eq!(out.data::<f32>().unwrap(), &expected[..], "{reduction}");
    }
}

#[test]
fn onnx_scatter_nd_max_min_with_element_indices() {
    let data = f32s(&[2, 2], &[1., 2., 3., 4.]);
    let indices = i64s(&[2, 2], &[0, 0, 1, 1]);
    let updates = f32s(&[2], &[5., 1.]);
    let max = ScatterND::new()
        .reduction(Reduction::Max)
        .profile(onnx(18))
        .run(&data, &indices, &updates)
        .unwrap();
    assert_eq!(max.data::<f32>().unwrap(), &[5., 2., 3., 4.]);
    let min = ScatterND::new()
        .reduction(Reduction::Min)
        .profile(onnx(18))
        .run(&data, &indices, &updates)
        .unwrap();
    assert_eq!(min.data::<f32>().unwrap(), &[1., 2., 3., 1.]);
}

// ---- per-dimension bounds check (regression) ----

#[test]
fn each_tuple_component_is_checked_against_its_own_dimension() {
    // (0, 5) in a [3, 4] tensor: 0 * 4 + 5 = 5 is inside the 12 elements,
    // but 5 is outside axis 1. A flattened check would read element [1, 1].
    let data = i32s(&[3, 4], &(0..12).collect::<Vec<i32>>());
    let indices = i64s(&[1, 2], &[0, 5]);
    let expected = Error::IndexOutOfRange {
        value: 5,
        position: vec![0, 1],
        axis: 1,
        axis_size: 4,
        negative_allowed: true,
    };
    assert_eq!(GatherND::new().run(&data, &indices).unwrap_err(), expected);
    let err = ScatterND::new()
        .run(&data, &indices, &i32s(&[1], &[99]))
        .unwrap_err();
    assert_eq!(err, expected);
    assert_eq!(
        err.to_string(),
        "index 5 at indices[0, 1] is out of range [-4, 3] for axis 1 of size 4"
    );
    // With batch_dims the axis named is the data axis.
    let data3 = i32s(&[2, 3, 4], &(0..24).collect::<Vec<i32>>());
    let err = GatherND::new()
        .batch_dims(1)
        .run(&data3, &i64s(&[2, 2], &[0, 1, 3, 0]))
        .unwrap_err();
    assert_eq!(
        err,
        Error::IndexOutOfRange {
            value: 3,
            position: vec![1, 0],
            axis: 1,
            axis_size: 3,
            negative_allowed: true
        }
    );
}

#[test]
fn few_tuples_and_many_name_the_same_first_bad_component() {
    // Up to 16 tuples resolve inline on the calling thread, more on the
    // general path: both report the first bad component in row-major
    // order, here tuple n/2's second (4, for an axis of 4) ahead of the
    // last tuple's first (-4, for an axis of 3) when that is a later one.
    let data = i32s(&[3, 4], &(0..12).collect::<Vec<i32>>());
    for n in [1usize, 2, 15, 16, 17, 40] {
        let mut values = vec![1i64; 2 * n];
        values[2 * (n / 2) + 1] = 4;
        if n - 1 > n / 2 {
            values[2 * (n - 1)] = -4;
        }
        let indices = i64s(&[n, 2], &values);
        let expected = Error::IndexOutOfRange {
            value: 4,
            position: vec![n / 2, 1],
            axis: 1,
            axis_size: 4,
            negative_allowed: true,
        };
        let gathered = GatherND::new().run(&data, &indices).unwrap_err();
        assert_eq!(gathered, expected, "GatherND, {n} tuples");
        let updates = i32s(&[n], &vec![7; n]);
        let scattered = ScatterND::new().run(&data, &indices, &updates).unwrap_err();
        assert_eq!(scattered, expected, "ScatterND, {n} tuples");
    }
}

/// Past 16 tuples, tuples of one to three components resolve in groups
/// of 64 whose bounds are checked after the group; tuples of four go
/// component by component. Every width gives the offsets written out by
/// hand here, negatives counted from the end, and names the first bad
/// component in row-major order wherever in a group it falls.
#[test]
fn many_tuples_of_each_width_resolve_and_fail_as_written_out() {
    let dims = [3usize, 4, 5, 2];
    let data = i32s(&dims, &(0..120).collect::<Vec<i32>>());
    let n = 150;
    for k in 1..=4 {
        let block: usize = dims[k..].iter().product();
        // Components cycle through every value of [-dim, dim).
        let values: Vec<i64> = (0..n * k)
            .map(|e| {
                let dim = dims[e % k] as i64;
                (e as i64 * 7 + e as i64 / 3) % (2 * dim) - dim
            })
            .collect();
        let mut expected = Vec::new();
        for tuple in values.chunks_exact(k) {
            let mut position = 0;
            for (&v, &dim) in tuple.iter().zip(&dims) {
                let p = if v < 0 { v + dim as i64 } else { v };
                position = position * dim + p as usize;
            }
            expected.extend((position * block..(position + 1) * block).map(|x| x as i32));
        }
        let indices = i64s(&[n, k], &values);
        let out = GatherND::new().run(&data, &indices).unwrap();
        assert_eq!(out.data::<i32>().unwrap(), &expected[..], "{k} components");
        // Unsigned indices (here 0 and 1) as the same values signed.
        let small: Vec<i64> = values.iter().map(|&v| v.rem_euclid(2)).collect();
        let unsigned = Tensor::new(vec![n, k], small.iter().map(|&v| v as u64).collect()).unwrap();
        assert_eq!(
            GatherND::new().run(&data, &unsigned).unwrap(),
            GatherND::new().run(&data, &i64s(&[n, k], &small)).unwrap(),
            "{k} components, u64"
        );
        // A bad component in the group's first tuple, its last, the next
        // group's first and the last tuple: each the first bad one.
        for bad_tuple in [0, 63, 64, 149] {
            for (bad_value, j) in [(dims[k - 1] as i64, k - 1), (-(dims[0] as i64) - 1, 0)] {
                if bad_tuple == n - 1 && j > 0 {
                    continue;
                }
                // A later bad component too, which must not be the one named.
                let mut bad = values.clone();
                bad[(n - 1) * k] = -100;
                bad[bad_tuple * k + j] = bad_value;
                let err = GatherND::new()
                    .run(&data, &i64s(&[n, k], &bad))
                    .unwrap_err();
                let expected = Error::IndexOutOfRange {
                    value: i128::from(bad_value),
                    position: vec![bad_tuple, j],
                    axis: j,
                    axis_size: dims[j],
                    negative_allowed: true,
                };
                assert_eq!(err, expected, "{k} components, tuple {bad_tuple}");
            }
        }
        // A u64 component past i64::MAX is out of range, not wrapped.
        let mut huge = vec![0u64; n * k];
        huge[70 * k] = u64::MAX;
        let err = GatherND::new()
            .run(&data, &Tensor::new(vec![n, k], huge).unwrap())
            .unwrap_err();
        let expected = Error::IndexOutOfRange {
            value: i128::from(u64::MAX),
            position: vec![70, 0],
            axis: 0,
            axis_size: dims[0],
            negative_allowed: true,
        };
        assert_eq!(err, expected, "{k} components");
    }
}

#[test]
fn negative_tuple_components_count_from_the_end() {
    let data = i32s(&[3, 4], &(0..12).collect::<Vec<i32>>());
    let out = GatherND::new()
        .run(&data, &i64s(&[2, 2], &[-1, -1, -3, 0]))
        .unwrap();
    assert_eq!(out.data::<i32>().unwrap(), &[11, 0]);
}

// ---- errors ----

#[test]
fn gather_nd_shape_errors() {
    let data = i32s(&[2, 3], &[0; 6]);
    let err = GatherND::new()
        .run(&data, &i64s(&[1, 3], &[0, 0, 0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert_eq!(
        err.to_string(),
        "indices.shape[-1] is 3, but it must be in [1, 2] (rank 2 of data minus batch_dims 0)"
    );
    let err = GatherND::new().run(&data, &i64s(&[1, 0], &[])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let err = GatherND::new()
        .batch_dims(1)
        .run(&data, &i64s(&[2], &[0, 0]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "batch_dims 1 must be less than both the rank 1 of indices and the rank 2 of data"
    );
    let err = GatherND::new()
        .batch_dims(1)
        .run(&data, &i64s(&[3, 1], &[0; 3]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let err = GatherND::new()
        .run(&data, &Tensor::scalar(0i64))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RankMismatch);
}

#[test]
fn scatter_nd_errors_leave_data_untouched() {
    let data = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let before = data.clone();
    let err = ScatterND::new()
        .run(&data, &i64s(&[2, 1], &[0, 1]), &f32s(&[2, 2], &[0.; 4]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "updates shape [2, 2] must be indices.shape[:-1] + data.shape[1:] = [2, 3]"
    );
    for bad_at in 0..3 {
        let mut v = vec![0i64, 1, -2];
        v[bad_at] = 2;
        let err = ScatterND::new()
            .reduction(Reduction::Add)
            .run(&data, &i64s(&[3, 1], &v), &f32s(&[3, 3], &[9.; 9]))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OutOfBounds);
        assert_eq!(data, before);
    }
    let err = ScatterND::new()
        .run(&data, &i64s(&[1, 3], &[0, 0, 0]), &f32s(&[1], &[0.]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let err = ScatterND::new()
        .run(&data, &i64s(&[1, 1], &[0]), &i64s(&[1, 3], &[0; 3]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);
}

#[test]
fn scatter_nd_reduction_rules_follow_the_dtype() {
    let c = Tensor::new(vec![1], vec![gatherscatter::Complex64::new(1.0, 1.0)]).unwrap();
    let err = ScatterND::new()
        .reduction(Reduction::Max)
        .run(&c, &i64s(&[1, 1], &[0]), &c)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadReduction);
    let s = Tensor::from_vec(vec![String::from("a")]);
    let err = ScatterND::new()
        .reduction(Reduction::Mul)
        .run(&s, &i64s(&[1, 1], &[0]), &s)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadReduction);
    let out = ScatterND::new()
        .reduction(Reduction::Add)
        .run(
            &s,
            &i64s(&[2, 1], &[0, 0]),
            &Tensor::from_vec(vec![String::from("b"), String::from("c")]),
        )
        .unwrap();
    assert_eq!(out.data::<String>().unwrap(), &["abc"]);
}

// ---- profiles ----

#[test]
fn onnx_profiles_by_opset() {
    let data = i32s(&[2, 2], &[0, 1, 2, 3]);
    let err = GatherND::new()
        .batch_dims(1)
        .profile(onnx(11))
        .run(&data, &i64s(&[2, 1], &[0, 1]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadAttribute);
    assert!(GatherND::new()
        .batch_dims(1)
        .profile(onnx(12))
        .run(&data, &i64s(&[2, 1], &[0, 1]))
        .is_ok());
    assert_eq!(
        GatherND::new()
            .profile(onnx(10))
            .run(&data, &i64s(&[1, 1], &[0]))
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
    let i32_idx = i32s(&[1, 1], &[0]);
    assert_eq!(
        GatherND::new()
            .profile(onnx(13))
            .run(&data, &i32_idx)
            .unwrap_err()
            .kind(),
        ErrorKind::BadDType
    );
    assert!(GatherND::new().run(&data, &i32_idx).is_ok());
    let bf = Tensor::new(vec![1], vec![bf16::ONE]).unwrap();
    assert_eq!(
        GatherND::new()
            .profile(onnx(12))
            .run(&bf, &i64s(&[1, 1], &[0]))
            .unwrap_err()
            .kind(),
        ErrorKind::BadDType
    );
    assert!(GatherND::new()
        .profile(onnx(13))
        .run(&bf, &i64s(&[1, 1], &[0]))
        .is_ok());

    let idx = i64s(&[1, 1], &[0]);
    let upd = i32s(&[1, 2], &[5, 5]);
    let allowed = |opset: u32, r: Reduction| {
        ScatterND::new()
            .reduction(r)
            .profile(onnx(opset))
            .run(&data, &idx, &upd)
            .is_ok()
    };
    assert!(allowed(11, Reduction::None) && !allowed(13, Reduction::Add));
    assert!(allowed(16, Reduction::Mul) && !allowed(16, Reduction::Max));
    assert!(allowed(18, Reduction::Max) && allowed(18, Reduction::Min));
    assert_eq!(
        ScatterND::new()
            .profile(Profile::MindSpore)
            .run(&data, &idx, &upd)
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
}

#[test]
fn scatter_nd_onnx_profile_bf16_from_13_and_int64_indices() {
    let bf = Tensor::new(vec![1], vec![bf16::ONE]).unwrap();
    let idx = i64s(&[1, 1], &[0]);
    let run = |opset: u32, idx: &Tensor| ScatterND::new().profile(onnx(opset)).run(&bf, idx, &bf);
    assert_eq!(run(11, &idx).unwrap_err().kind(), ErrorKind::BadDType);
    assert!(run(13, &idx).is_ok());
    let idx32 = i32s(&[1, 1], &[0]);
    assert_eq!(run(18, &idx32).unwrap_err().kind(), ErrorKind::BadDType);
    assert!(ScatterND::new().run(&bf, &idx32, &bf).is_ok());
}

// ---- property tests ----

#[derive(Debug, Clone)]
struct NdCase {
    data_shape: Vec<usize>,
    batch_dims: usize,
    indices_shape: Vec<usize>,
    indices: Vec<i128>,
    seeds: Vec<i64>,
    update_seeds: Vec<i64>,
    dtype: DType,
    index_dtype: DType,
    reduction: Reduction,
}

/// `scatter` cases have no batch dims and may have k = 0.
fn nd_case(scatter: bool) -> impl Strategy<Value = NdCase> {
    (
        shape(1..=5),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        shape(0..=2),
    )
        .prop_flat_map(move |(data_shape, b_pick, k_pick, tail)| {
            let r = data_shape.len();
            let b = if scatter { 0 } else { b_pick.index(r.min(3)) };
            let k = if scatter {
                k_pick.index(r + 1)
            } else {
                1 + k_pick.index(r - b)
            };
            let mut indices_shape = data_shape[..b].to_vec();
            indices_shape.extend(tail);
            indices_shape.push(k);
            let n_idx: usize = indices_shape.iter().product();
            let n_data: usize = data_shape.iter().product();
            let mut updates_shape = indices_shape[..indices_shape.len() - 1].to_vec();
            updates_shape.extend_from_slice(&data_shape[k..]);
            let n_upd: usize = updates_shape.iter().product();
            (
                Just((data_shape, b, indices_shape)),
                prop::collection::vec(-8i128..8, n_idx),
                prop::collection::vec(-300i64..300, n_data),
                prop::collection::vec(-300i64..300, n_upd),
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(DType::INDEX_TYPES.to_vec()),
                prop::sample::select(Reduction::ALL.to_vec()),
            )
        })
        .prop_map(
            |(
                (data_shape, batch_dims, indices_shape),
                mut indices,
                seeds,
                update_seeds,
                dtype,
                index_dtype,
                reduction,
            )| {
                let k = indices_shape[indices_shape.len() - 1];
                fit_tuples(
                    &mut indices,
                    &data_shape[batch_dims..batch_dims + k],
                    index_dtype,
                );
                NdCase {
                    data_shape,
                    batch_dims,
                    indices_shape,
                    indices,
                    seeds,
                    update_seeds,
                    dtype,
                    index_dtype,
                    reduction,
                }
            },
        )
}

/// [`check_gather_nd_once`] under `auto` and each forced `stores`: a
/// streamed output is written by Gather's block copy, whatever its size.
fn check_gather_nd<T: FromSeed>(case: &NdCase) -> Result<(), TestCaseError> {
    for stores in ["auto", "streaming", "cached"] {
        let forced = Tuning::parse(&format!("stores={stores}")).unwrap();
        tuning::scoped(forced, || check_gather_nd_once::<T>(case))
            .map_err(|e| TestCaseError::fail(format!("stores={stores}: {e}")))?;
    }
    Ok(())
}

fn check_gather_nd_once<T: FromSeed>(case: &NdCase) -> Result<(), TestCaseError> {
    let data: Vec<T> = case.seeds.iter().map(|&s| T::from_seed(s)).collect();
    let reference = reference_gather_nd(
        &data,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        case.batch_dims,
    );
    let op = GatherND::new().batch_dims(case.batch_dims);
    let data = Tensor::new(case.data_shape.clone(), data).unwrap();
    let indices = index_tensor(case.index_dtype, &case.indices_shape, &case.indices);
    let result = op.run(&data, &indices);
    // Into a caller's buffer: the same values, or the same error with the
    // buffer untouched.
    let (q, b) = (case.indices_shape.len(), case.batch_dims);
    let k = case.indices_shape[q - 1];
    let out_shape: Vec<usize> = case.indices_shape[..q - 1]
        .iter()
        .chain(&case.data_shape[b + k..])
        .copied()
        .collect();
    let filler = vec![T::from_seed(7); out_shape.iter().product()];
    let mut buffer = Tensor::new(out_shape, filler.clone()).unwrap();
    let into = op.run_into(&data, &indices, &mut buffer);
    check_into(&result, into, &buffer, &filler, T::eq)?;
    check_against_reference(result, reference, T::eq)
}

/// `run_into` agrees with `run`: on success the buffer holds `run`'s
/// output (by `same`, which takes NaN as equal to NaN); on error the kind is
/// the same and the buffer still holds `filler`.
fn check_into<T: Element>(
    run: &Result<Tensor, Error>,
    into: Result<(), Error>,
    buffer: &Tensor,
    filler: &[T],
    same: impl Fn(&T, &T) -> bool,
) -> Result<(), TestCaseError> {
    match (run, into) {
        (Ok(out), Ok(())) => {
            let (want, got) = (out.data::<T>().unwrap(), buffer.data::<T>().unwrap());
            prop_assert_eq!(out.shape(), buffer.shape());
            prop_assert!(
                want.iter().zip(got).all(|(a, b)| same(a, b)),
                "run_into wrote {:?}",
                got
            );
        }
        (Err(e), Err(f)) => {
            prop_assert_eq!(e.kind(), f.kind());
            prop_assert!(buffer.data::<T>().unwrap() == filler, "written on error");
        }
        (run, into) => prop_assert!(false, "run {:?} but run_into {:?}", run, into),
    }
    Ok(())
}

/// [`check_scatter_nd_once`] under `auto` and each forced `stores`: a
/// streamed overwrite is written as a gather of slices, whatever its size.
fn check_scatter_nd<T: RefReduce>(case: &NdCase) -> Result<(), TestCaseError> {
    for stores in ["auto", "streaming", "cached"] {
        let forced = Tuning::parse(&format!("stores={stores}")).unwrap();
        tuning::scoped(forced, || check_scatter_nd_once::<T>(case))
            .map_err(|e| TestCaseError::fail(format!("stores={stores}: {e}")))?;
    }
    Ok(())
}

fn check_scatter_nd_once<T: RefReduce>(case: &NdCase) -> Result<(), TestCaseError> {
    let data: Vec<T> = case.seeds.iter().map(|&s| T::from_seed(s)).collect();
    let updates: Vec<T> = case.update_seeds.iter().map(|&s| T::from_seed(s)).collect();
    let q = case.indices_shape.len();
    let k = case.indices_shape[q - 1];
    let mut updates_shape = case.indices_shape[..q - 1].to_vec();
    updates_shape.extend_from_slice(&case.data_shape[k..]);
    let name = case.reduction.name();
    let data_tensor = Tensor::new(case.data_shape.clone(), data.clone()).unwrap();
    let op = ScatterND::new().reduction(case.reduction);
    let indices = index_tensor(case.index_dtype, &case.indices_shape, &case.indices);
    let updates_tensor = Tensor::new(updates_shape, updates.clone()).unwrap();
    let result = op.run(&data_tensor, &indices, &updates_tensor);
    let filler = vec![T::from_seed(7); data.len()];
    let mut buffer = Tensor::new(case.data_shape.clone(), filler.clone()).unwrap();
    let into = op.run_into(&data_tensor, &indices, &updates_tensor, &mut buffer);
    check_into(&result, into, &buffer, &filler, T::same)?;
    if T::reduce(name, &T::from_seed(1), &T::from_seed(2)).is_none() {
        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::BadReduction);
        return Ok(());
    }
    let reference = reference_scatter_nd(
        &data,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        &updates,
        |a, b| T::reduce(name, a, b).unwrap(),
    );
    let reference = reference.map(|v| (case.data_shape.clone(), v));
    check_against_reference(result, reference, T::same)
}

/// A caller's buffer must have the data's dtype and the output's shape;
/// the typed forms write what the dynamic ones do.
#[test]
fn nd_ops_into_a_buffer() {
    let data = i32s(&[2, 2], &[0, 1, 2, 3]);
    let indices = i64s(&[2, 2], &[0, 0, 1, 1]);
    let gather = GatherND::new();
    let mut wrong_shape = i32s(&[3], &[0; 3]);
    let err = gather
        .run_into(&data, &indices, &mut wrong_shape)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let mut wrong_dtype = f32s(&[2], &[0.0; 2]);
    let err = gather
        .run_into(&data, &indices, &mut wrong_dtype)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadDType);

    let typed_data = gatherscatter::TypedTensor::new(vec![2, 2], vec![0i32, 1, 2, 3]).unwrap();
    let typed_indices = gatherscatter::TypedTensor::new(vec![2, 2], vec![0i64, 0, 1, 1]).unwrap();
    let mut typed_out = gatherscatter::TypedTensor::new(vec![2], vec![9i32; 2]).unwrap();
    gather
        .run_typed_into(typed_data.view(), typed_indices.view(), &mut typed_out)
        .unwrap();
    assert_eq!(typed_out.data(), &[0, 3]);
    let mut typed_wrong = gatherscatter::TypedTensor::new(vec![1], vec![9i32]).unwrap();
    let err = gather
        .run_typed_into(typed_data.view(), typed_indices.view(), &mut typed_wrong)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);

    let scatter = ScatterND::new().reduction(Reduction::Mul);
    let tuples = i64s(&[2, 1], &[1, 1]);
    let updates = i32s(&[2, 2], &[2, 3, 4, 5]);
    let mut out = i32s(&[2, 2], &[0; 4]);
    scatter
        .run_into(&data, &tuples, &updates, &mut out)
        .unwrap();
    assert_eq!(out.data::<i32>().unwrap(), &[0, 1, 16, 45]);
    let mut wrong_shape = i32s(&[4], &[0; 4]);
    let err = scatter
        .run_into(&data, &tuples, &updates, &mut wrong_shape)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let typed_tuples = gatherscatter::TypedTensor::new(vec![2, 1], vec![1i64, 1]).unwrap();
    let typed_updates = gatherscatter::TypedTensor::new(vec![2, 2], vec![2i32, 3, 4, 5]).unwrap();
    let mut typed_out = gatherscatter::TypedTensor::new(vec![2, 2], vec![0i32; 4]).unwrap();
    scatter
        .run_typed_into(
            typed_data.view(),
            typed_tuples.view(),
            typed_updates.view(),
            &mut typed_out,
        )
        .unwrap();
    assert_eq!(typed_out.data(), &[0, 1, 16, 45]);
}

proptest! {
    #![proptest_config(proptest_config(1500))]

    #[test]
    fn gather_nd_matches_reference(case in nd_case(false)) {
        for_dtype!(case.dtype, check_gather_nd(&case))?;
    }

    #[test]
    fn scatter_nd_matches_serial_reference(case in nd_case(true)) {
        for_dtype!(case.dtype, check_scatter_nd(&case))?;
    }
}
