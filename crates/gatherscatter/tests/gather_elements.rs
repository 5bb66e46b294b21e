//! GatherElements: the ONNX seed examples, the smaller-off-axis
//! regression, the errors, and a property test
//! against the naive spec §1 reference (small shapes at the edges, and
//! outer-axis shapes large enough for the packed column strips, read by
//! the scalar and the strided vector loop). The other seeds and the
//! profile rules are in `gather_elements_profiles.rs`.

mod common;
mod pool;

use common::*;
use gatherscatter::tuning::{self, Tuning, WordGather};
use gatherscatter::{DType, Element, ErrorKind, GatherElements, Profile, Tensor};
use pool::{in_pool, names_the_first_bad_index_on_any_pool};
use proptest::prelude::*;

// ---- seed 000: ONNX GatherElements 11 / 13 ----

#[test]
fn onnx_example_1() {
    let data = Tensor::new(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let indices = Tensor::new(vec![2, 2], vec![0i64, 0, 1, 0]).unwrap();
    for opset in [11, 13] {
        let out = GatherElements::new(1)
            .profile(Profile::Onnx { opset })
            .run(&data, &indices)
            .unwrap();
        assert_eq!(out.shape(), &[2, 2]);
        assert_eq!(out.data::<f32>().unwrap(), &[1.0, 1.0, 4.0, 3.0]);
    }
}

#[test]
fn onnx_example_2() {
    let data = Tensor::new(vec![3, 3], (1..=9).map(|v| v as f32).collect()).unwrap();
    let indices = Tensor::new(vec![2, 3], vec![1i32, 2, 0, 2, 0, 0]).unwrap();
    for opset in [11, 13] {
        let out = GatherElements::new(0)
            .profile(Profile::Onnx { opset })
            .run(&data, &indices)
            .unwrap();
        assert_eq!(out.shape(), &[2, 3]);
        assert_eq!(out.data::<f32>().unwrap(), &[4.0, 8.0, 3.0, 7.0, 2.0, 3.0]);
    }
}

// ---- spec §2.5 regression ----

#[test]
fn smaller_off_axis_indices_address_data_with_its_own_strides() {
    // data 0..8 of shape [2, 2, 2], indices [[[1], [0]]] (shape [1, 2, 1]), axis 0.
    // out[0, j, 0] = data[idx, j, 0]: data[1, 0, 0] = 4, data[0, 1, 0] = 2.
    let data = Tensor::new(vec![2, 2, 2], (0..8).collect::<Vec<i64>>()).unwrap();
    let indices = Tensor::new(vec![1, 2, 1], vec![1i64, 0]).unwrap();
    let out = GatherElements::new(0).run(&data, &indices).unwrap();
    assert_eq!(out.shape(), &[1, 2, 1]);
    assert_eq!(out.data::<i64>().unwrap(), &[4, 2]);
}

#[test]
fn axis_extent_of_indices_may_exceed_data() {
    let data = Tensor::new(vec![2, 2], vec![1u8, 2, 3, 4]).unwrap();
    let indices = Tensor::new(vec![2, 5], vec![0i8, 1, 1, 0, -1, 1, 1, 1, 0, -2]).unwrap();
    let out = GatherElements::new(1).run(&data, &indices).unwrap();
    assert_eq!(out.data::<u8>().unwrap(), &[1, 2, 2, 1, 2, 4, 4, 4, 3, 3]);
}

// ---- spec §2 errors ----

#[test]
fn errors_name_the_numbers() {
    let data = Tensor::new(vec![2, 3], vec![0.0f32; 6]).unwrap();
    let err = GatherElements::new(1)
        .run(
            &data,
            &Tensor::new(vec![2, 2], vec![0i64, 1, 2, 3]).unwrap(),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "index 3 at indices[1, 1] is out of range [-3, 2] for axis 1 of size 3"
    );

    let err = GatherElements::new(0)
        .run(&data, &Tensor::new(vec![1, 4], vec![0i64; 4]).unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    assert_eq!(
        err.to_string(),
        "indices dimension 1 is 4, larger than data's 3; only the axis 0 may be larger (indices shape [1, 4], data shape [2, 3])"
    );

    let err = GatherElements::new(0)
        .run(&data, &Tensor::from_vec(vec![0i64]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "indices has rank 1, but the rank 2 of data is required"
    );

    let err = GatherElements::new(-3)
        .run(&data, &Tensor::new(vec![1, 1], vec![0i64]).unwrap())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "axis -3 is out of range [-2, 1] for data of rank 2"
    );

    let err = GatherElements::new(0)
        .run(&Tensor::scalar(1i32), &Tensor::scalar(0i64))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RankMismatch);
}

#[test]
fn empty_tensors_are_valid() {
    let data = Tensor::new(vec![2, 0], Vec::<f32>::new()).unwrap();
    let out = GatherElements::new(1)
        .run(&data, &Tensor::new(vec![2, 0], Vec::<i64>::new()).unwrap())
        .unwrap();
    assert_eq!(out.shape(), &[2, 0]);
    // Empty data along the axis with non-empty indices: every value is out of range.
    let err = GatherElements::new(1)
        .run(&data, &Tensor::new(vec![2, 1], vec![0i64, 0]).unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    // Indices empty off the axis: empty output.
    let data = Tensor::new(vec![2, 3], vec![1i8; 6]).unwrap();
    let out = GatherElements::new(0)
        .run(&data, &Tensor::new(vec![4, 0], Vec::<u64>::new()).unwrap())
        .unwrap();
    assert_eq!(out.shape(), &[4, 0]);
}

// ---- property test against the spec §1 reference ----

#[derive(Debug, Clone)]
struct Case {
    data_shape: Vec<usize>,
    axis: usize,
    negative_axis: bool,
    indices_shape: Vec<usize>,
    indices: Vec<i128>,
    seeds: Vec<i64>,
    dtype: DType,
    index_dtype: DType,
}

fn case() -> impl Strategy<Value = Case> {
    (elements_case_shapes(), any::<bool>())
        .prop_flat_map(|((data_shape, axis, indices_shape), negative_axis)| {
            let s = data_shape[axis] as i128;
            let n_idx: usize = indices_shape.iter().product();
            let n_data: usize = data_shape.iter().product();
            (
                Just((data_shape, axis, indices_shape, negative_axis)),
                prop::collection::vec(-s.max(1)..s.max(1), n_idx),
                prop::collection::vec(-1000i64..1000, n_data),
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(DType::INDEX_TYPES.to_vec()),
            )
        })
        .prop_map(
            |(
                (data_shape, axis, indices_shape, negative_axis),
                mut indices,
                seeds,
                dtype,
                index_dtype,
            )| {
                fit_to_index_type(&mut indices, index_dtype, data_shape[axis]);
                Case {
                    data_shape,
                    axis,
                    negative_axis,
                    indices_shape,
                    indices,
                    seeds,
                    dtype,
                    index_dtype,
                }
            },
        )
}

/// [`check_case_once`] on the small-call path and on the general kernels.
fn check_case<T: FromSeed>(case: &Case) -> Result<(), TestCaseError> {
    on_small_and_general_paths(|| check_case_once::<T>(case))
}

fn check_case_once<T: FromSeed>(case: &Case) -> Result<(), TestCaseError> {
    let data: Vec<T> = case.seeds.iter().map(|&s| T::from_seed(s)).collect();
    let reference = reference_gather_elements(
        &data,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        case.axis,
    );
    let axis = if case.negative_axis {
        case.axis as i64 - case.data_shape.len() as i64
    } else {
        case.axis as i64
    };
    let op = GatherElements::new(axis);
    let data_tensor = Tensor::new(case.data_shape.clone(), data).unwrap();
    let result = op.run(
        &data_tensor,
        &index_tensor(case.index_dtype, &case.indices_shape, &case.indices),
    );
    let reference = reference.map(|expected| (case.indices_shape.clone(), expected));
    check_against_reference(result, reference, T::eq)
}

/// Outer-axis cases whose data plane is past 32 KiB (for 4-byte and wider
/// elements) and whose indices cover at least a quarter of the axis, so the
/// kernel packs column strips: one or no leading dim, trailing dims that
/// merge (equal to data's) or do not (a smaller last one), negative
/// indices, and now and then one bad index.
fn strip_case() -> impl Strategy<Value = Case> {
    let trailing = prop_oneof![
        (20usize..=90).prop_map(|c| vec![c]),
        (2usize..=5, 5usize..=20).prop_map(|(a, b)| vec![a, b]),
    ];
    (
        prop::collection::vec(1usize..=2, 0..=1),
        100usize..=400,
        trailing,
        any::<bool>(),
        any::<prop::sample::Index>(),
    )
        .prop_flat_map(|(lead, s, trailing, smaller_last, axis_pick)| {
            let axis = lead.len();
            let data_shape: Vec<usize> = lead
                .iter()
                .copied()
                .chain([s])
                .chain(trailing.clone())
                .collect();
            let mut indices_lead = lead.clone();
            if let Some(first) = indices_lead.first_mut() {
                *first = 1 + axis_pick.index(*first);
            }
            let mut indices_trailing = trailing.clone();
            if smaller_last {
                let last = indices_trailing.last_mut().expect("one trailing dim");
                *last -= 1;
            }
            let indices_shapes = (s / 4..=s + 20).prop_map(move |along| {
                let shape: Vec<usize> = indices_lead
                    .iter()
                    .copied()
                    .chain([along])
                    .chain(indices_trailing.clone())
                    .collect();
                shape
            });
            (Just((data_shape, axis)), indices_shapes)
        })
        .prop_flat_map(|((data_shape, axis), indices_shape)| {
            let s = data_shape[axis] as i128;
            // Index types that can name every position (and one past the end).
            let wide_index_types: Vec<DType> = DType::INDEX_TYPES
                .iter()
                .copied()
                .filter(|&t| index_type_max(t) > s)
                .collect();
            let n_idx: usize = indices_shape.iter().product();
            let n_data: usize = data_shape.iter().product();
            (
                Just((data_shape, axis, indices_shape)),
                prop::collection::vec(-s..s, n_idx),
                prop::collection::vec(-1000i64..1000, n_data),
                prop::sample::select(DType::ALL.to_vec()),
                prop::sample::select(wide_index_types.clone()),
                prop::option::weighted(0.2, any::<prop::sample::Index>()),
            )
        })
        .prop_map(
            |((data_shape, axis, indices_shape), mut indices, seeds, dtype, index_dtype, bad)| {
                let s = data_shape[axis];
                fit_to_index_type(&mut indices, index_dtype, s);
                if let Some(at) = bad {
                    let position = at.index(indices.len());
                    indices[position] = s as i128;
                }
                Case {
                    data_shape,
                    axis,
                    negative_axis: false,
                    indices_shape,
                    indices,
                    seeds,
                    dtype,
                    index_dtype,
                }
            },
        )
}

/// GatherElements along the outer axis of data shaped like W5 (rows of a
/// power-of-two length, the case the packed strips are for) and of a rank-4
/// tensor whose dims after the axis merge: fresh and into a buffer, 1–3
/// threads (which split the columns), three index types, against the naive
/// reference.
#[test]
fn outer_axis_gathers_in_packed_strips_match_reference() {
    let cases: [(&[usize], &[usize], usize); 3] = [
        (&[1024, 512], &[1024, 512], 0),
        // Tiles of 256 columns: two whole ones and a partial one.
        (&[1024, 600], &[700, 590], 0),
        (&[2, 600, 4, 64], &[2, 500, 4, 64], 1),
    ];
    for (data_shape, indices_shape, axis) in cases {
        let n_data: usize = data_shape.iter().product();
        let n_idx: usize = indices_shape.iter().product();
        let values: Vec<f32> = (0..n_data).map(|i| i as f32 * 0.25).collect();
        let data = Tensor::new(data_shape.to_vec(), values.clone()).unwrap();
        let s = data_shape[axis];
        let raw: Vec<i128> = (0..n_idx)
            .map(|k| ((k * 2_654_435_761) % (2 * s)) as i128 - s as i128)
            .collect();
        for index_type in [DType::I64, DType::I32, DType::U32] {
            let mut wide = raw.clone();
            fit_to_index_type(&mut wide, index_type, s);
            let indices = index_tensor(index_type, indices_shape, &wide);
            let want =
                reference_gather_elements(&values, data_shape, &wide, indices_shape, axis).unwrap();
            for threads in [1, 2, 3] {
                let op = GatherElements::new(axis as i64);
                let fresh = in_pool(threads, || op.run(&data, &indices).unwrap());
                let mut into = Tensor::new(indices_shape.to_vec(), vec![-1.0f32; n_idx]).unwrap();
                in_pool(threads, || op.run_into(&data, &indices, &mut into).unwrap());
                for out in [&fresh, &into] {
                    assert!(
                        out.data::<f32>().unwrap() == &want[..],
                        "{data_shape:?} {indices_shape:?} {index_type:?} {threads} threads"
                    );
                }
            }
        }
    }
}

/// Two bad indices in different threads' columns: the first in row-major
/// order is named.
#[test]
fn the_first_bad_index_of_an_outer_axis_gather_is_reported() {
    let (rows, cols) = (1024usize, 512usize);
    let data = Tensor::new(vec![rows, cols], vec![1.0f32; rows * cols]).unwrap();
    let mut raw: Vec<i128> = (0..rows * cols).map(|k| (k % rows) as i128).collect();
    raw[300 * cols + 400] = rows as i128;
    raw[500 * cols + 3] = -(rows as i128) - 1;
    let indices = index_tensor(DType::I64, &[rows, cols], &raw);
    let run = || GatherElements::new(0).run(&data, &indices);
    names_the_first_bad_index_on_any_pool(run, rows as i128, &[300, 400]);
}

/// Last axis, long rows: rows of 8-128 KiB with at least one index per
/// line are read through before the gathers (10,000 f32s, 40,000 bytes);
/// longer ones (40,000 f32s, 160,000 bytes) are gathered in pieces, each
/// after a burst of the next row. A bad index anywhere in a row (also in a
/// later piece, or in the last row, which has no next row) is named at its
/// own position. Narrower indices are read a chunk of 1024 at a time: the
/// bad one is also named past the first chunk.
#[test]
fn a_bad_index_anywhere_in_a_long_row_is_named_where_it_is() {
    for (cols, index_type) in [
        (10_000usize, DType::I64),
        (40_000, DType::I64),
        (10_000, DType::I32),
        (40_000, DType::U16),
    ] {
        let rows = 3usize;
        let data = Tensor::new(vec![rows, cols], vec![1.0f32; rows * cols]).unwrap();
        for bad_at in [[0, cols * 9 / 10], [0, cols / 2 + 3], [2, cols - 1]] {
            let mut raw: Vec<i128> = (0..rows * cols).map(|k| (k % 7) as i128).collect();
            raw[bad_at[0] * cols + bad_at[1]] = cols as i128;
            let indices = index_tensor(index_type, &[rows, cols], &raw);
            let run = || GatherElements::new(1).run(&data, &indices);
            names_the_first_bad_index_on_any_pool(run, cols as i128, &bad_at);
        }
    }
}

/// An outer axis of 4 positions: a column tile spans whole rows of 8192
/// elements, so narrower indices are widened in several chunks per row; a
/// bad one in a later chunk is named, and good ones match the reference.
/// With i16 data the tile is read from a packed strip; with u8 (a 32 KiB
/// plane) in place.
#[test]
fn outer_axis_rows_longer_than_a_widening_chunk_match_the_reference() {
    fn check<T: Element + Copy + PartialEq + std::fmt::Debug>(make: fn(usize) -> T) {
        let (axis, cols) = (4usize, 8192usize);
        let values: Vec<T> = (0..axis * cols).map(make).collect();
        let data = Tensor::new(vec![axis, cols], values.clone()).unwrap();
        let raw: Vec<i128> = (0..3 * cols).map(|k| (k * 7 % 8) as i128 - 4).collect();
        let want = reference_gather_elements(&values, &[axis, cols], &raw, &[3, cols], 0).unwrap();
        for index_type in [DType::I32, DType::I8, DType::I64] {
            let indices = index_tensor(index_type, &[3, cols], &raw);
            for threads in [1, 2, 3] {
                let out = in_pool(threads, || GatherElements::new(0).run(&data, &indices));
                let out = out.unwrap();
                assert!(
                    out.data::<T>().unwrap() == &want[..],
                    "{index_type:?}, {threads}t"
                );
            }
            let mut bad = raw.clone();
            bad[2 * cols + 5000] = 4;
            let indices = index_tensor(index_type, &[3, cols], &bad);
            let run = || GatherElements::new(0).run(&data, &indices);
            names_the_first_bad_index_on_any_pool(run, 4, &[2, 5000]);
        }
    }
    check::<i16>(|k| (k * 31 % 30_011) as i16);
    check::<u8>(|k| (k * 37) as u8);
}

/// Dims of size 1 after the axis are dropped, so the axis is read as the
/// last one: the result and the position of a bad index are still those
/// of the full shape, also when indices have fewer positions than data.
#[test]
fn an_axis_followed_only_by_size_1_dims_is_read_as_the_last_axis() {
    let (outer, size, count) = (6usize, 300usize, 40usize);
    let values: Vec<f32> = (0..outer * size).map(|k| k as f32 * 0.25).collect();
    let data = Tensor::new(vec![outer, size, 1, 1], values.clone()).unwrap();
    let raw: Vec<i128> = (0..outer * count)
        .map(|k| ((k * 7919) % (2 * size)) as i128 - size as i128)
        .collect();
    let shape = [outer, count, 1, 1];
    let want = reference_gather_elements(&values, &[outer, size, 1, 1], &raw, &shape, 1).unwrap();
    let indices = index_tensor(DType::I32, &shape, &raw);
    let out = GatherElements::new(1).run(&data, &indices).unwrap();
    assert_eq!(out.shape(), &shape);
    assert!(out.data::<f32>().unwrap() == &want[..]);
    let mut bad = raw.clone();
    bad[4 * count + 17] = size as i128;
    let indices = index_tensor(DType::I32, &shape, &bad);
    let run = || GatherElements::new(1).run(&data, &indices);
    names_the_first_bad_index_on_any_pool(run, size as i128, &[4, 17, 0, 0]);
}

/// Last axis, rows on both sides of the read-through bounds (8 KiB and
/// 128 KiB, and an index count below the row's lines): 1-, 2-, 4- and
/// 8-byte elements (each with a vector loop), negative indices, int64 and
/// int32 indices, fresh and into a buffer, 1-3 threads, against the naive
/// reference.
#[test]
fn long_last_axis_rows_match_reference_whichever_way_they_are_read() {
    fn check<T: Element + Copy + PartialEq + std::fmt::Debug>(
        make: fn(usize) -> T,
        index_type: DType,
    ) {
        let width = std::mem::size_of::<T>();
        let bytes_per_row = [8 << 10, (8 << 10) - 64, 128 << 10, (128 << 10) + 64];
        for row_bytes in bytes_per_row {
            let cols = row_bytes / width;
            let lines = row_bytes / 64;
            for count in [lines, lines - 1, cols + 5] {
                let rows = 3usize;
                let values: Vec<T> = (0..rows * cols).map(make).collect();
                let data = Tensor::new(vec![rows, cols], values.clone()).unwrap();
                let raw: Vec<i128> = (0..rows * count)
                    .map(|k| ((k * 2_654_435_761) % (2 * cols)) as i128 - cols as i128)
                    .collect();
                let indices = index_tensor(index_type, &[rows, count], &raw);
                let want =
                    reference_gather_elements(&values, &[rows, cols], &raw, &[rows, count], 1)
                        .unwrap();
                for threads in [1, 2, 3] {
                    let op = GatherElements::new(1);
                    let fresh = in_pool(threads, || op.run(&data, &indices).unwrap());
                    let mut into =
                        Tensor::new(vec![rows, count], vec![make(7); rows * count]).unwrap();
                    in_pool(threads, || op.run_into(&data, &indices, &mut into).unwrap());
                    for out in [&fresh, &into] {
                        assert!(
                            out.data::<T>().unwrap() == &want[..],
                            "{row_bytes} bytes, {count} indices, {threads} threads"
                        );
                    }
                }
            }
        }
    }
    check::<f32>(|k| k as f32 * 0.5, DType::I64);
    check::<u64>(
        |k| (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        DType::I32,
    );
    check::<u16>(|k| (k * 40_503) as u16, DType::I32);
    check::<i8>(|k| (k * 131) as i8, DType::I64);
}

/// Many short rows along the last axis (the sweep's shape: rows of 256),
/// read by the scalar loop, which asks for its indices ahead a step at a
/// time: equal to the reference on 1 to 3 threads, fresh and into a buffer,
/// and a bad index named where it is, at a step's first or last position,
/// a task's edge, or the last element. Int8 data always takes the scalar
/// loop; float32 is forced to it.
#[test]
fn short_last_axis_rows_read_by_the_scalar_loop_match_the_reference() {
    fn check<T: Element + Copy + PartialEq + std::fmt::Debug>(make: fn(usize) -> T) {
        let (rows, cols) = (2048usize, 256usize);
        let values: Vec<T> = (0..rows * cols).map(make).collect();
        let data = Tensor::new(vec![rows, cols], values.clone()).unwrap();
        let scalar = Tuning::AUTO.with_word_gather(WordGather::Scalar);
        // Unsigned indices are non-negative, and a bad one too large.
        for (index_type, signed) in [(DType::I64, true), (DType::U32, false), (DType::I16, true)] {
            let low = if signed { cols as i128 } else { 0 };
            let raw: Vec<i128> = (0..rows * cols)
                .map(|k| ((k * 2_654_435_761) % (cols + low as usize)) as i128 - low)
                .collect();
            let want = reference_gather_elements(&values, &[rows, cols], &raw, &[rows, cols], 1);
            let want = want.unwrap();
            let bad_value = if signed {
                -(cols as i128) - 1
            } else {
                cols as i128
            };
            let indices = index_tensor(index_type, &[rows, cols], &raw);
            for threads in [1, 2, 3] {
                let op = GatherElements::new(1);
                let run = || tuning::scoped(scalar, || op.run(&data, &indices).unwrap());
                let fresh = in_pool(threads, run);
                let mut into = Tensor::new(vec![rows, cols], vec![make(7); rows * cols]).unwrap();
                in_pool(threads, || {
                    tuning::scoped(scalar, || op.run_into(&data, &indices, &mut into).unwrap())
                });
                for out in [&fresh, &into] {
                    assert!(
                        out.data::<T>().unwrap() == &want[..],
                        "{index_type:?}, {threads} threads"
                    );
                }
            }
            for bad_at in [
                [0, 0],
                [0, 63],
                [0, 64],
                [5, 200],
                [1023, 255],
                [1024, 0],
                [2047, 255],
            ] {
                let mut bad = raw.clone();
                bad[bad_at[0] * cols + bad_at[1]] = bad_value;
                let indices = index_tensor(index_type, &[rows, cols], &bad);
                let run = || tuning::scoped(scalar, || GatherElements::new(1).run(&data, &indices));
                names_the_first_bad_index_on_any_pool(run, bad_value, &bad_at);
            }
        }
    }
    check::<i8>(|k| (k * 131) as i8);
    check::<f32>(|k| k as f32 * 0.25);
}

proptest! {
    #![proptest_config(proptest_config(48))]

        /// On 1 to 3 threads (the output splits by columns when rows are
    /// long), with the scalar loop and the strided vector one.
    #[test]
    fn outer_axis_strips_match_reference(case in strip_case(), threads in 1usize..=3) {
        for word_gather in [WordGather::Scalar, WordGather::Vector] {
            let tuning = Tuning::AUTO.with_word_gather(word_gather);
            in_pool(threads, || {
                tuning::scoped(tuning, || for_dtype!(case.dtype, check_case(&case)))
            })?;
        }
    }
}

proptest! {
    #![proptest_config(proptest_config(1500))]

    #[test]
    fn gather_elements_matches_reference(case in case()) {
        for_dtype!(case.dtype, check_case(&case))?;
    }

    #[test]
    fn typed_api_matches_dynamic(case in case()) {
        let data = gatherscatter::TypedTensor::new(case.data_shape.clone(), case.seeds.clone()).unwrap();
        let idx: Vec<i64> = case.indices.iter().map(|&v| v as i64).collect();
        let indices = gatherscatter::TypedTensor::new(case.indices_shape.clone(), idx).unwrap();
        let op = GatherElements::new(case.axis as i64);
        let typed = op.run_typed(data.view(), indices.view()).map(Tensor::from);
        let dynamic = op.run(&Tensor::from(data), &Tensor::from(indices));
        prop_assert_eq!(typed, dynamic);
    }
}
