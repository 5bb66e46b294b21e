//! ScatterElements' row loop under each `stream_fetch` strategy (its index
//! and update streams asked for ahead, or left to the hardware) and under
//! `auto`, which along the last axis times the two on the first calls of
//! each class from 1 MiB of output: every call equals the naive spec §1
//! reference, fresh and into a caller's buffer, on 1-3 threads, and a bad
//! index is named at the same position whichever strategy runs.

mod common;
mod pool;

use common::measured::assert_measured;
use common::*;
use gatherscatter::tuning::{self, StreamFetch, Tuning};
use gatherscatter::{DType, Error, Reduction, ScatterElements, Tensor};
use pool::in_pool;
use proptest::prelude::*;

/// `auto`, then each forced strategy.
const STREAM_TUNINGS: [Tuning; 3] = [
    Tuning::AUTO,
    Tuning::AUTO.with_stream_fetch(StreamFetch::Ahead),
    Tuning::AUTO.with_stream_fetch(StreamFetch::Hardware),
];

/// One scatter: float32 data made from seeds, indices with negatives and
/// duplicates, updates made from seeds.
#[derive(Debug)]
struct Case {
    data_shape: Vec<usize>,
    axis: usize,
    indices_shape: Vec<usize>,
    indices: Vec<i128>,
    index_dtype: DType,
    reduction: Reduction,
    threads: usize,
}

fn seeded(len: usize, scale: f32) -> Vec<f32> {
    (0..len).map(|k| (k % 251) as f32 * scale).collect()
}

/// The reference for `case`, or `None` where an index is out of range.
fn reference(case: &Case, data: &[f32], updates: &[f32]) -> Option<Vec<f32>> {
    let add = case.reduction == Reduction::Add;
    let combine = |a: &f32, b: &f32| if add { a + b } else { *b };
    reference_scatter_elements(
        data,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        updates,
        case.axis,
        combine,
    )
}

/// `case` under every tuning, fresh and into a buffer, equals the reference
/// or fails with the error `auto` gives.
fn check(case: &Case) -> Result<(), TestCaseError> {
    let data_len = case.data_shape.iter().product();
    let data = seeded(data_len, 0.5);
    let updates = seeded(case.indices.len(), 0.25);
    let expected = reference(case, &data, &updates);
    let data_t = Tensor::new(case.data_shape.clone(), data).unwrap();
    let indices = index_tensor(case.index_dtype, &case.indices_shape, &case.indices);
    let updates_t = Tensor::new(case.indices_shape.clone(), updates).unwrap();
    let op = ScatterElements::new(case.axis as i64).reduction(case.reduction);
    let auto = op.run(&data_t, &indices, &updates_t);
    for tuning in STREAM_TUNINGS {
        let (fresh, into) = in_pool(case.threads, || {
            tuning::scoped(tuning, || {
                let mut out = Tensor::new(case.data_shape.clone(), vec![0f32; data_len]).unwrap();
                let into = op.run_into(&data_t, &indices, &updates_t, &mut out);
                (op.run(&data_t, &indices, &updates_t), into.map(|()| out))
            })
        });
        match &expected {
            Some(want) => {
                let fresh = fresh.map_err(|e| TestCaseError::fail(format!("{tuning}: {e}")))?;
                prop_assert_eq!(fresh.data::<f32>().unwrap(), &want[..], "{}", tuning);
                let into = into.map_err(|e| TestCaseError::fail(format!("{tuning}: {e}")))?;
                prop_assert_eq!(into.data::<f32>().unwrap(), &want[..], "{}", tuning);
            }
            None => {
                let auto_error = auto.as_ref().unwrap_err();
                prop_assert_eq!(fresh.as_ref().unwrap_err(), auto_error, "{}", tuning);
                prop_assert_eq!(into.as_ref().unwrap_err(), auto_error, "{}", tuning);
            }
        }
    }
    Ok(())
}

/// Shapes of rank 1-3 whose rows along the axis run from 1 to a few
/// hundred elements, indices mostly in range (negatives included), one in
/// about 40 cases with an index past either end.
fn case() -> impl Strategy<Value = Case> {
    let shape = prop::collection::vec(prop_oneof![1usize..4, 1usize..40, 200usize..300], 1..=3);
    (shape, any::<prop::sample::Index>())
        .prop_flat_map(|(data_shape, axis)| {
            let axis = axis.index(data_shape.len());
            let mut indices_shape = data_shape.clone();
            indices_shape[axis] = (data_shape[axis] / 2).max(1);
            let count: usize = indices_shape.iter().product();
            let size = data_shape[axis] as i128;
            (
                Just((data_shape, axis, indices_shape)),
                prop::collection::vec(-size..size, count),
                prop::option::weighted(0.025, (any::<prop::sample::Index>(), prop::bool::ANY)),
                prop::sample::select(vec![DType::I64, DType::I32, DType::U16]),
                prop::sample::select(vec![Reduction::None, Reduction::Add]),
                1usize..=3,
            )
        })
        .prop_map(
            |(
                (data_shape, axis, indices_shape),
                mut indices,
                bad,
                index_dtype,
                reduction,
                threads,
            )| {
                let size = data_shape[axis];
                fit_to_index_type(&mut indices, index_dtype, size);
                if let Some((at, past_end)) = bad {
                    let at = at.index(indices.len());
                    indices[at] = if past_end || index_dtype == DType::U16 {
                        size as i128
                    } else {
                        -(size as i128) - 1
                    };
                }
                Case {
                    data_shape,
                    axis,
                    indices_shape,
                    indices,
                    index_dtype,
                    reduction,
                    threads,
                }
            },
        )
}

proptest! {
    #![proptest_config(proptest_config(300))]

    #[test]
    fn scatter_elements_gives_the_reference_under_every_stream_fetch(case in case()) {
        check(&case)?;
    }
}

/// Last-axis scatters from 1 MiB of output, where `auto` times both
/// strategies on the first calls of a class: six calls fresh and six into
/// one buffer, on one thread and then two, each equal to the reference, and
/// the report names the class with both timed and one kept.
#[test]
fn last_axis_scatters_whose_stream_fetch_is_measured_equal_the_reference_on_every_call() {
    let (rows, len) = (512usize, 640usize);
    let data_shape = [rows, len];
    let data = seeded(rows * len, 0.5);
    let raw: Vec<i128> = (0..rows * len)
        .map(|k| ((k * 7919) % (2 * len)) as i128 - len as i128)
        .collect();
    let updates = seeded(rows * len, 0.25);
    let case = Case {
        data_shape: data_shape.to_vec(),
        axis: 1,
        indices_shape: data_shape.to_vec(),
        indices: raw,
        index_dtype: DType::I32,
        reduction: Reduction::Add,
        threads: 1,
    };
    let expected = reference(&case, &data, &updates).unwrap();
    let data = Tensor::new(data_shape.to_vec(), data).unwrap();
    let indices = index_tensor(DType::I32, &data_shape, &case.indices);
    let updates = Tensor::new(data_shape.to_vec(), updates).unwrap();
    let op = ScatterElements::new(1).reduction(Reduction::Add);
    for threads in [1, 2] {
        in_pool(threads, || {
            let mut into = op.run(&data, &indices, &updates).unwrap();
            for call in 0..6 {
                let fresh = op.run(&data, &indices, &updates).unwrap();
                assert_eq!(fresh.data::<f32>().unwrap(), &expected[..], "call {call}");
                op.run_into(&data, &indices, &updates, &mut into).unwrap();
                assert_eq!(into.data::<f32>().unwrap(), &expected[..], "call {call}");
            }
        });
    }
    assert_measured(
        "stream_fetch",
        "4-byte elements by 4-byte indices in rows of up to 1024, one task",
    );
}

/// A bad index deep in a long last-axis scatter is named where it is,
/// whichever strategy fetches the streams.
#[test]
fn a_bad_index_is_named_at_its_position_under_every_stream_fetch() {
    let (rows, len) = (600usize, 512usize);
    let data = Tensor::new(vec![rows, len], seeded(rows * len, 1.0)).unwrap();
    let mut raw: Vec<i64> = (0..rows * len).map(|k| (k % len) as i64).collect();
    raw[401 * len + 77] = len as i64;
    let indices = Tensor::new(vec![rows, len], raw).unwrap();
    let updates = Tensor::new(vec![rows, len], seeded(rows * len, 0.5)).unwrap();
    for tuning in STREAM_TUNINGS {
        for threads in [1, 2, 3] {
            let err = in_pool(threads, || {
                tuning::scoped(tuning, || {
                    ScatterElements::new(1).run(&data, &indices, &updates)
                })
            })
            .unwrap_err();
            let Error::IndexOutOfRange {
                value, position, ..
            } = err
            else {
                panic!("{tuning}: {err:?}")
            };
            assert_eq!(
                (value, &position[..]),
                (len as i128, &[401, 77][..]),
                "{tuning}"
            );
        }
    }
}
