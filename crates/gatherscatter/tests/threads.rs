//! Results are bit-identical whatever the thread count: every kernel splits
//! the output into disjoint ranges, and scatters apply updates in row-major
//! order. Sizes are above the parallel threshold, with shapes chosen so task
//! boundaries fall mid-slab and mid-row.

mod common;
mod pool;

use common::*;
use gatherscatter::{
    Gather, GatherElements, GatherND, Reduction, ScatterElements, ScatterMode, ScatterND, Tensor,
    TensorScatter, TensorView,
};
use pool::in_pool;
use proptest::prelude::*;

/// Runs `f` with 1, 2, 3 and 5 threads and checks every result equals the
/// single-threaded one, bit for bit.
fn same_for_every_thread_count(f: impl Fn() -> Tensor + Send + Sync) -> Tensor {
    let one = in_pool(1, &f);
    for threads in [2, 3, 5] {
        let many = in_pool(threads, &f);
        assert_eq!(exact(&many), exact(&one), "{threads} threads");
    }
    one
}

/// A tensor's shape and values as text that tells every bit apart: float
/// values by their bits, as Debug prints every NaN alike.
fn exact(t: &Tensor) -> String {
    match (t.data::<f32>(), t.data::<f64>()) {
        (Some(v), _) => format!(
            "{:?} {:?}",
            t.shape(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        ),
        (_, Some(v)) => format!(
            "{:?} {:?}",
            t.shape(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        ),
        _ => format!("{t:?}"),
    }
}

fn floats(len: usize, seed: u64) -> Vec<f32> {
    (0..len as u64)
        .map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed)) % 1000) as f32 / 7.0 - 50.0)
        .collect()
}

fn indices(len: usize, modulo: usize, seed: u64) -> Vec<i64> {
    (0..len as u64)
        .map(|i| {
            let v = (i.wrapping_mul(40503).wrapping_add(seed) % modulo as u64) as i64;
            if i % 3 == 0 {
                v - modulo as i64 // negative form of the same index
            } else {
                v
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(proptest_config(12))]

    #[test]
    fn gather_is_identical_for_every_thread_count(
        rows in 300usize..2000, cols in 1usize..70, n in 500usize..3000, axis in 0usize..2, seed in any::<u64>()
    ) {
        let shape = [rows, cols];
        let data = Tensor::new(shape.to_vec(), floats(rows * cols, seed)).unwrap();
        let idx_values = indices(n, shape[axis], seed);
        let idx = Tensor::new(vec![n], idx_values.clone()).unwrap();
        let out = same_for_every_thread_count(|| Gather::new(axis as i64).run(&data, &idx).unwrap());
        let wide: Vec<i128> = idx_values.iter().map(|&v| v as i128).collect();
        let (shape_ref, values) = reference_gather(data.data::<f32>().unwrap(), &shape, &wide, &[n], axis, 0).unwrap();
        prop_assert_eq!(out, Tensor::new(shape_ref, values).unwrap());
    }

    /// Batched gathers large enough to prefetch (64 KiB and up), with slabs
    /// small and dense (next-slab prefetch) or large and sparse (block
    /// lookahead), every fixed block length and a few others, and tasks that
    /// start mid-slab and mid-batch.
    #[test]
    fn batched_gather_matches_the_reference_for_every_thread_count(
        batch in 1usize..4,
        outer in 1usize..5,
        axis_size in 1usize..400,
        inner in prop::sample::select(vec![1usize, 2, 3, 4, 5, 8, 16, 17]),
        n in 200usize..1500,
        seed in any::<u64>(),
    ) {
        let shape = [batch, outer, axis_size, inner];
        let len = shape.iter().product();
        let data = Tensor::new(shape.to_vec(), floats(len, seed)).unwrap();
        let idx_values = indices(batch * n, axis_size, seed);
        let idx = Tensor::new(vec![batch, n], idx_values.clone()).unwrap();
        let out = same_for_every_thread_count(|| {
            Gather::new(2).batch_dims(1).run(&data, &idx).unwrap()
        });
        let wide: Vec<i128> = idx_values.iter().map(|&v| v as i128).collect();
        let (shape_ref, values) =
            reference_gather(data.data::<f32>().unwrap(), &shape, &wide, &[batch, n], 2, 1).unwrap();
        prop_assert_eq!(out, Tensor::new(shape_ref, values).unwrap());
    }

    #[test]
    fn gather_elements_is_identical_for_every_thread_count(
        a in 50usize..400, b in 1usize..300, axis in 0usize..2, seed in any::<u64>()
    ) {
        let shape = [a, b];
        let data = Tensor::new(shape.to_vec(), floats(a * b, seed)).unwrap();
        let idx_values = indices(a * b, shape[axis], seed);
        let idx = Tensor::new(shape.to_vec(), idx_values.clone()).unwrap();
        let out = same_for_every_thread_count(|| GatherElements::new(axis as i64).run(&data, &idx).unwrap());
        let wide: Vec<i128> = idx_values.iter().map(|&v| v as i128).collect();
        let values = reference_gather_elements(data.data::<f32>().unwrap(), &shape, &wide, &shape, axis).unwrap();
        prop_assert_eq!(out, Tensor::new(shape.to_vec(), values).unwrap());
    }

    #[test]
    fn scatters_with_duplicates_are_identical_for_every_thread_count(
        a in 100usize..400, b in 3usize..300, seed in any::<u64>()
    ) {
        let data = Tensor::new(vec![a, b], floats(a * b, seed)).unwrap();
        // Few distinct targets: heavy fan-in, order-sensitive float sums.
        let idx = Tensor::new(vec![a, b], indices(a * b, 3, seed)).unwrap();
        let updates = Tensor::new(vec![a, b], floats(a * b, seed ^ 1)).unwrap();
        for reduction in Reduction::ALL {
            same_for_every_thread_count(|| {
                ScatterElements::new(1).reduction(reduction).run(&data, &idx, &updates).unwrap()
            });
            let nd_idx = Tensor::new(vec![a, 1], indices(a, 4, seed)).unwrap();
            let nd_upd = Tensor::new(vec![a, b], floats(a * b, seed ^ 2)).unwrap();
            same_for_every_thread_count(|| {
                ScatterND::new().reduction(reduction).run(&data, &nd_idx, &nd_upd).unwrap()
            });
        }
        let nd = Tensor::new(vec![a, 2], indices(2 * a, b.min(a), seed)).unwrap();
        same_for_every_thread_count(|| GatherND::new().run(&data, &nd).unwrap());
    }
}

/// One slab (a 1-D tensor above the parallel threshold, and one short row
/// per slab along the last axis): no split by slabs or columns applies, so
/// the whole output is copied, then every update is applied in order. Fresh
/// outputs take that path too, from uninitialised memory.
#[test]
fn scatters_too_few_slabs_to_split_match_the_reference() {
    for shape in [vec![70_000], vec![2, 40_000]] {
        let len: usize = shape.iter().product();
        let axis = shape.len() - 1;
        let data = Tensor::new(shape.clone(), floats(len, 7)).unwrap();
        let mut idx_shape = shape.clone();
        idx_shape[axis] = 9_000;
        let n: usize = idx_shape.iter().product();
        let idx_values = indices(n, shape[axis], 11);
        let upd_values = floats(n, 13);
        let idx = Tensor::new(idx_shape.clone(), idx_values.clone()).unwrap();
        let updates = Tensor::new(idx_shape.clone(), upd_values.clone()).unwrap();
        for reduction in Reduction::ALL {
            let out = same_for_every_thread_count(|| {
                ScatterElements::new(axis as i64)
                    .reduction(reduction)
                    .run(&data, &idx, &updates)
                    .unwrap()
            });
            let expected =
                reference_scatter(&data, &idx_values, &idx_shape, &upd_values, axis, reduction);
            assert_eq!(
                format!("{out:?}"),
                format!("{expected:?}"),
                "{shape:?}, {reduction:?}"
            );
        }
    }
}

/// One slab along axis 0 with rows too short for a column task per
/// quarter thread but long enough for two or three (192 and 130 columns,
/// tasks of at least 64): the columns split among as many tasks as they
/// allow, each walking every index row; on one thread one column task.
/// Every reduction against the reference, bit for bit on 1, 2, 3 and 5
/// threads, and a bad index in the last task's columns named where a
/// serial loop meets it.
#[test]
fn scatters_along_axis_0_onto_rows_of_a_few_column_tasks_match_the_reference() {
    for shape in [vec![64, 8, 192], vec![48, 12, 130]] {
        let len: usize = shape.iter().product();
        let data = Tensor::new(shape.clone(), floats(len, 5)).unwrap();
        let idx_shape = vec![shape[0] * 2, shape[1], shape[2]];
        let n: usize = idx_shape.iter().product();
        let idx_values = indices(n, shape[0], 17);
        let upd_values = floats(n, 23);
        let idx = Tensor::new(idx_shape.clone(), idx_values.clone()).unwrap();
        let updates = Tensor::new(idx_shape.clone(), upd_values.clone()).unwrap();
        for reduction in Reduction::ALL {
            let out = same_for_every_thread_count(|| {
                ScatterElements::new(0)
                    .reduction(reduction)
                    .run(&data, &idx, &updates)
                    .unwrap()
            });
            let expected =
                reference_scatter(&data, &idx_values, &idx_shape, &upd_values, 0, reduction);
            assert_eq!(exact(&out), exact(&expected), "{shape:?}, {reduction:?}");
        }
        let mut bad = idx_values.clone();
        let (row, column) = (shape[0] + 3, shape[2] - 2);
        let at = (row * shape[1] + 1) * shape[2] + column;
        bad[at] = shape[0] as i64;
        let bad = Tensor::new(idx_shape.clone(), bad).unwrap();
        for threads in [1, 2, 3] {
            let err = in_pool(threads, || {
                ScatterElements::new(0)
                    .reduction(Reduction::Add)
                    .run(&data, &bad, &updates)
                    .unwrap_err()
            });
            let message = err.to_string();
            assert!(
                message.contains(&format!("indices[{row}, 1, {column}]")),
                "{shape:?}, {threads} threads: {message}"
            );
        }
    }
}

/// Short index rows (under 64) along a middle axis, split by slabs: rows
/// that share a data plane are applied as one run. More index rows than
/// axis positions (duplicates), index rows shorter than data's and fewer
/// slabs than data has; every reduction bit for bit against the reference
/// on 1, 2, 3 and 5 threads, and a bad index named where a serial loop
/// meets it.
#[test]
fn scatters_of_short_rows_along_a_middle_axis_match_the_reference() {
    let shape = vec![300, 40, 12];
    let idx_shape = vec![280, 45, 10];
    let len: usize = shape.iter().product();
    let data = Tensor::new(shape.clone(), floats(len, 29)).unwrap();
    let n: usize = idx_shape.iter().product();
    let idx_values = indices(n, shape[1], 31);
    let upd_values = floats(n, 37);
    let idx = Tensor::new(idx_shape.clone(), idx_values.clone()).unwrap();
    let updates = Tensor::new(idx_shape.clone(), upd_values.clone()).unwrap();
    for reduction in Reduction::ALL {
        let out = same_for_every_thread_count(|| {
            ScatterElements::new(1)
                .reduction(reduction)
                .run(&data, &idx, &updates)
                .unwrap()
        });
        let expected = reference_scatter(&data, &idx_values, &idx_shape, &upd_values, 1, reduction);
        assert_eq!(exact(&out), exact(&expected), "{reduction:?}");
    }
    let mut bad = idx_values.clone();
    let at = (200 * 45 + 44) * 10 + 7;
    bad[at] = 40;
    let bad = Tensor::new(idx_shape.clone(), bad).unwrap();
    for threads in [1, 2, 3] {
        let err = in_pool(threads, || {
            ScatterElements::new(1)
                .run(&data, &bad, &updates)
                .unwrap_err()
        });
        let message = err.to_string();
        assert!(
            message.contains("indices[200, 44, 7]"),
            "{threads} threads: {message}"
        );
    }
}

/// Max and min with many more updates than output elements, on one slab:
/// tasks fold runs of the updates into copies of data and merge them.
/// NaNs with distinct payloads and both zeros in data and updates: the
/// first NaN a target meets is its result, +0 beats -0, on every thread
/// count, along the last axis and along axis 0 of short rows.
#[test]
fn max_and_min_split_among_tasks_match_the_reference() {
    for (shape, axis) in [(vec![2_000], 0), (vec![2_000, 3], 0)] {
        let len: usize = shape.iter().product();
        let data = Tensor::new(shape.clone(), with_specials(floats(len, 3), 5)).unwrap();
        let mut idx_shape = shape.clone();
        idx_shape[axis] = 150_000;
        let n: usize = idx_shape.iter().product();
        // Hashed, so that targets meet NaNs from more than one task's run.
        let idx_values = hashed_indices(n, shape[axis]);
        let upd_values = with_specials(floats(n, 19), 7);
        let idx = Tensor::new(idx_shape.clone(), idx_values.clone()).unwrap();
        let updates = Tensor::new(idx_shape.clone(), upd_values.clone()).unwrap();
        for reduction in [Reduction::Max, Reduction::Min] {
            let out = same_for_every_thread_count(|| {
                ScatterElements::new(axis as i64)
                    .reduction(reduction)
                    .run(&data, &idx, &updates)
                    .unwrap()
            });
            let expected =
                reference_scatter(&data, &idx_values, &idx_shape, &upd_values, axis, reduction);
            assert_eq!(exact(&out), exact(&expected), "{shape:?}, {reduction:?}");
        }
    }
}

/// ScatterReduce amax and amin without `self` split the same way, each
/// task with its own cells: a target takes the first value that reaches
/// it, then folds the rest in order; one that no update reaches keeps
/// data's value. Against a naive loop, NaN payloads and zeros included.
#[test]
fn scatter_reduce_max_and_min_without_self_split_among_tasks_match_the_reference() {
    use gatherscatter::{Aggregate, ScatterReduce};
    let size = 3_000;
    let data_values = with_specials(floats(size, 3), 5);
    let data = Tensor::new(vec![size], data_values.clone()).unwrap();
    // Enough updates for five tasks on five threads.
    let n = 400_000;
    // Targets 3 mod 4 are never named, so they keep data's value; targets
    // 2 mod 4 only in the second half, so the first tasks never reach them
    // and later tasks' values meet in the merge.
    let idx_values: Vec<i64> = hashed_indices(n, size)
        .into_iter()
        .enumerate()
        .map(|(k, v)| match v.rem_euclid(size as i64) % 4 {
            3 => v - 2,
            2 if k < n / 2 => v - 1,
            _ => v,
        })
        .collect();
    let upd_values = with_specials(floats(n, 19), 7);
    let idx = Tensor::new(vec![n], idx_values.clone()).unwrap();
    let updates = Tensor::new(vec![n], upd_values.clone()).unwrap();
    for (reduce, name) in [(Aggregate::Amax, "max"), (Aggregate::Amin, "min")] {
        let op = ScatterReduce::new(0, reduce).include_self(false);
        let out = same_for_every_thread_count(|| op.run(&data, &idx, &updates).unwrap());
        let mut expected = data_values.clone();
        let mut reached = vec![false; size];
        for (&v, u) in idx_values.iter().zip(&upd_values) {
            let t = v.rem_euclid(size as i64) as usize;
            expected[t] = if std::mem::replace(&mut reached[t], true) {
                f32::reduce(name, &expected[t], u).unwrap()
            } else {
                *u
            };
        }
        let expected = Tensor::new(vec![size], expected).unwrap();
        assert_eq!(exact(&out), exact(&expected), "{name}");
    }
}

/// ScatterReduce onto one slab along the last axis, each value and its
/// count side by side: targets named more than 65,535 times (past a 16-bit
/// cell, so counts spill) and a target never named (it keeps data's
/// value). The mean and sum, with and without `self`, equal a serial loop
/// written from the formula, bit for bit, on 1, 2, 3 and 5 threads; a bad
/// index is named where a serial loop meets it.
#[test]
fn scatter_reduce_counts_past_a_16_bit_cell_match_the_formula() {
    use gatherscatter::{Aggregate, ScatterReduce};
    let size = 5;
    let data_values = floats(size, 3);
    let data = Tensor::new(vec![1, size], data_values.clone()).unwrap();
    let n = 300_000;
    // Targets 0-3 only (about 75,000 each), every third in its negative
    // form; target 4 never.
    let idx_values: Vec<i64> = hashed_indices(n, 4)
        .into_iter()
        .enumerate()
        .map(|(k, v)| v.rem_euclid(4) - if k % 3 == 0 { size as i64 } else { 0 })
        .collect();
    let upd_values = floats(n, 19);
    let idx = Tensor::new(vec![1, n], idx_values.clone()).unwrap();
    let updates = Tensor::new(vec![1, n], upd_values.clone()).unwrap();
    for (reduce, include_self) in [
        (Aggregate::Mean, true),
        (Aggregate::Mean, false),
        (Aggregate::Sum, false),
    ] {
        let op = ScatterReduce::new(1, reduce).include_self(include_self);
        let out = same_for_every_thread_count(|| op.run(&data, &idx, &updates).unwrap());
        let mut sums = data_values.clone();
        let mut counts = vec![u64::from(include_self); size];
        for (&v, &u) in idx_values.iter().zip(&upd_values) {
            let t = v.rem_euclid(size as i64) as usize;
            sums[t] = if counts[t] == 0 { u } else { sums[t] + u };
            counts[t] += 1;
        }
        let expected: Vec<f32> = sums
            .iter()
            .zip(&counts)
            .zip(&data_values)
            .map(|((&s, &c), &d)| match (reduce, c) {
                (_, 0) => d,
                (Aggregate::Mean, c) => s / c as f32,
                _ => s,
            })
            .collect();
        assert!(counts[..4].iter().all(|&c| c > 65_535), "{counts:?}");
        let expected = Tensor::new(vec![1, size], expected).unwrap();
        assert_eq!(
            exact(&out),
            exact(&expected),
            "{reduce:?} self {include_self}"
        );
    }
    // A bad index late, and two bad ones: every thread count names the
    // first in order.
    for bad in [vec![299_000], vec![150_000, 250_000]] {
        let mut values = idx_values.clone();
        for &p in &bad {
            values[p] = size as i64 + p as i64;
        }
        let idx = Tensor::new(vec![1, n], values).unwrap();
        for threads in [1, 2, 3] {
            let err = in_pool(threads, || {
                ScatterReduce::new(1, Aggregate::Mean)
                    .run(&data, &idx, &updates)
                    .unwrap_err()
            });
            let message = err.to_string();
            assert!(
                message.contains(&format!("indices[0, {}]", bad[0])),
                "{threads} threads, bad at {bad:?}: {message}"
            );
        }
    }
}

/// An out-of-range index in a later run of a split scatter, or in several
/// runs, is reported at the first position a serial loop meets.
#[test]
fn a_split_scatter_names_the_first_bad_index_in_order() {
    let data = Tensor::new(vec![1000], floats(1000, 1)).unwrap();
    let n = 600_000;
    for bad in [vec![590_000], vec![200_000, 450_000], vec![10, 599_999]] {
        let mut values = indices(n, 1000, 3);
        for &p in &bad {
            values[p] = 1000 + p as i64;
        }
        let idx = Tensor::new(vec![n], values).unwrap();
        let updates = Tensor::new(vec![n], floats(n, 2)).unwrap();
        for threads in [1, 2, 3] {
            let err = in_pool(threads, || {
                ScatterElements::new(0)
                    .reduction(Reduction::Max)
                    .run(&data, &idx, &updates)
                    .unwrap_err()
            });
            let message = err.to_string();
            assert!(
                message.contains(&(1000 + bad[0]).to_string()),
                "{threads} threads, bad at {bad:?}: {message}"
            );
        }
    }
}

/// Every index type through ScatterElements' kernels, on indices large
/// enough to be widened by several tasks (int8, int16, uint8 and uint16
/// into `i32`, uint32 and uint64 into `i64`) or read in place (int32,
/// int64): the same output as the int64 indices, bit for bit on 1, 2, 3
/// and 5 threads, and a bad index near the end named where it is.
#[test]
fn scatters_on_every_index_type_match_the_int64_result() {
    // 60,000 indices: 300 KB of uint8 and their int32 copy, past the
    // parallel threshold.
    let shape = vec![100, 6, 100];
    let len: usize = shape.iter().product();
    let data = Tensor::new(shape.clone(), floats(len, 5)).unwrap();
    let updates = Tensor::new(shape.clone(), floats(len, 9)).unwrap();
    // Non-negative and below 100, so every index type holds them; 120 is
    // out of range on both axes.
    let wide: Vec<i64> = (0..len as i64).map(|i| (i * 7919) % 100).collect();
    for axis in [0usize, 2] {
        let mut values = wide.clone();
        for v in values.iter_mut() {
            *v %= shape[axis] as i64;
        }
        let as_i64 = Tensor::new(shape.clone(), values.clone()).unwrap();
        for reduction in [Reduction::None, Reduction::Add] {
            let op = ScatterElements::new(axis as i64).reduction(reduction);
            let expected = exact(&op.run(&data, &as_i64, &updates).unwrap());
            for index_dtype in gatherscatter::DType::INDEX_TYPES {
                let wide128: Vec<i128> = values.iter().map(|&v| i128::from(v)).collect();
                let idx = index_tensor(index_dtype, &shape, &wide128);
                let out = same_for_every_thread_count(|| op.run(&data, &idx, &updates).unwrap());
                assert_eq!(
                    exact(&out),
                    expected,
                    "axis {axis}, {index_dtype:?}, {reduction:?}"
                );
                let mut bad = wide128.clone();
                bad[len - 3] = 120;
                let bad = index_tensor(index_dtype, &shape, &bad);
                for threads in [1, 2, 3] {
                    let err = in_pool(threads, || op.run(&data, &bad, &updates).unwrap_err());
                    assert!(
                        err.to_string().contains("120"),
                        "axis {axis}, {index_dtype:?}, {threads} threads: {err}"
                    );
                }
            }
        }
    }
}

#[test]
fn gather_nd_tuples_resolved_by_several_tasks_match_the_reference_and_name_the_first_bad_one() {
    // 200,000 pairs (3.2 MB of indices, several tasks) into 300 x 500.
    let (rows, cols, n) = (300usize, 500usize, 200_000usize);
    let data = Tensor::new(vec![rows, cols], floats(rows * cols, 4)).unwrap();
    let pairs: Vec<i64> = hashed_indices(n, rows)
        .into_iter()
        .zip(hashed_indices(n + 7, cols).into_iter().skip(7))
        .flat_map(|(r, c)| [r, c])
        .collect();
    let idx = Tensor::new(vec![n, 2], pairs.clone()).unwrap();
    let out = same_for_every_thread_count(|| GatherND::new().run(&data, &idx).unwrap());
    let values = data.data::<f32>().unwrap();
    let expected: Vec<u32> = pairs
        .chunks_exact(2)
        .map(|p| {
            let r = (p[0] + rows as i64) as usize % rows;
            let c = (p[1] + cols as i64) as usize % cols;
            values[r * cols + c].to_bits()
        })
        .collect();
    let got: Vec<u32> = out
        .data::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(got, expected);
    // Bad components late, in two tasks' ranges, and in a tuple's second slot.
    for bad in [vec![399_999], vec![120_001, 300_000], vec![7, 399_998]] {
        let mut broken = pairs.clone();
        for &p in &bad {
            broken[p] = 10_000 + p as i64;
        }
        let idx = Tensor::new(vec![n, 2], broken).unwrap();
        for threads in [1, 2, 3] {
            let err = in_pool(threads, || GatherND::new().run(&data, &idx).unwrap_err());
            let message = err.to_string();
            let first = bad[0];
            let position = format!("[{}, {}]", first / 2, first % 2);
            assert!(
                message.contains(&(10_000 + first).to_string()) && message.contains(&position),
                "{threads} threads, bad at {bad:?}: {message}"
            );
        }
    }
}

/// `len` indices in `[-size, size)`, hashed (splitmix64).
fn hashed_indices(len: usize, size: usize) -> Vec<i64> {
    (0..len as u64)
        .map(|i| {
            let mut z = i.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z % (2 * size as u64)) as i64 - size as i64
        })
        .collect()
}

/// `values` with every `every`-th element replaced in turn by a quiet NaN
/// of one of two payloads, +0 or -0.
fn with_specials(mut values: Vec<f32>, every: usize) -> Vec<f32> {
    let specials = [
        f32::from_bits(0x7fc0_0001),
        f32::from_bits(0xffc0_0002),
        0.0,
        -0.0,
    ];
    for (k, v) in values
        .iter_mut()
        .enumerate()
        .filter(|(k, _)| k % every == 0)
    {
        // Sparse NaNs: most targets end on a number, some on each payload.
        let pick = (k / every) % 97;
        if pick < 4 {
            *v = specials[pick];
        } else if pick < 40 {
            *v = specials[2 + pick % 2];
        }
    }
    values
}

/// Naive-reference scatter with `reduction` on f32.
fn reference_scatter(
    data: &Tensor,
    idx: &[i64],
    idx_shape: &[usize],
    updates: &[f32],
    axis: usize,
    reduction: Reduction,
) -> Tensor {
    let wide: Vec<i128> = idx.iter().map(|&v| v as i128).collect();
    let values = reference_scatter_elements(
        data.data::<f32>().unwrap(),
        data.shape(),
        &wide,
        idx_shape,
        updates,
        axis,
        |a, b| f32::reduce(reduction.name(), a, b).unwrap(),
    )
    .unwrap();
    Tensor::new(data.shape().to_vec(), values).unwrap()
}

proptest! {
    #![proptest_config(proptest_config(10))]

    /// Rank 3, every axis, indices smaller than data off the axis: covers
    /// the split by slabs (dims before the axis), the split by columns of
    /// the last dim (few slabs, long rows) and the serial path.
    #[test]
    fn rank3_scatters_match_the_reference_for_every_thread_count(
        p in 1usize..4, a in 30usize..70, q in 600usize..1400,
        shrink in (0usize..3, 0usize..3, 0usize..200), axis in 0usize..3, seed in any::<u64>()
    ) {
        let shape = [p, a, q];
        let mut idx_shape = [p - shrink.0.min(p - 1), a - shrink.1, q - shrink.2];
        idx_shape[axis] = shape[axis] + 3; // more updates than the axis holds: duplicates
        let n: usize = idx_shape.iter().product();
        let data = Tensor::new(shape.to_vec(), floats(p * a * q, seed)).unwrap();
        let idx_values = indices(n, shape[axis].min(5), seed);
        let idx = Tensor::new(idx_shape.to_vec(), idx_values.clone()).unwrap();
        let upd_values = floats(n, seed ^ 3);
        let updates = Tensor::new(idx_shape.to_vec(), upd_values.clone()).unwrap();
        for reduction in Reduction::ALL {
            let out = same_for_every_thread_count(|| {
                ScatterElements::new(axis as i64).reduction(reduction).run(&data, &idx, &updates).unwrap()
            });
            let expected = reference_scatter(&data, &idx_values, &idx_shape, &upd_values, axis, reduction);
            prop_assert_eq!(format!("{out:?}"), format!("{expected:?}"));
        }
    }

    /// A long gathered axis makes GatherElements walk several column tiles.
    #[test]
    fn gather_elements_over_a_long_outer_axis_matches_the_reference(
        a in 33_000usize..40_000, b in 33usize..60, rows in 1usize..50, seed in any::<u64>()
    ) {
        let data = Tensor::new(vec![a, b], floats(a * b, seed)).unwrap();
        let idx_values = indices(rows * b, a, seed);
        let idx = Tensor::new(vec![rows, b], idx_values.clone()).unwrap();
        let out = same_for_every_thread_count(|| GatherElements::new(0).run(&data, &idx).unwrap());
        let wide: Vec<i128> = idx_values.iter().map(|&v| v as i128).collect();
        let values = reference_gather_elements(data.data::<f32>().unwrap(), &[a, b], &wide, &[rows, b], 0).unwrap();
        prop_assert_eq!(out, Tensor::new(vec![rows, b], values).unwrap());
    }

    /// Outer-axis GatherElements with long rows is split by columns across
    /// tasks (at least 64 per task): rank 3, every outer axis, indices
    /// smaller off the axis, and a bad index reported at the same (first)
    /// position whatever the thread count.
    #[test]
    fn gather_elements_split_by_columns_matches_the_reference(
        d0 in 2usize..6, d1 in 40usize..90, last in 600usize..1200, axis in 0usize..2,
        shrink in 0usize..3, seed in any::<u64>(), bad in proptest::option::of(any::<prop::sample::Index>())
    ) {
        let data_shape = [d0, d1, last];
        let mut idx_shape = data_shape;
        idx_shape[1 - axis] = data_shape[1 - axis] - shrink.min(data_shape[1 - axis] - 1);
        idx_shape[2] = last - shrink * 7;
        let count: usize = idx_shape.iter().product();
        let data = Tensor::new(data_shape.to_vec(), floats(d0 * d1 * last, seed)).unwrap();
        let mut idx_values = indices(count, data_shape[axis], seed);
        if let Some(at) = &bad {
            idx_values[at.index(count)] = data_shape[axis] as i64;
        }
        let idx = Tensor::new(idx_shape.to_vec(), idx_values.clone()).unwrap();
        let run = || format!("{:?}", GatherElements::new(axis as i64).run(&data, &idx));
        let one = in_pool(1, run);
        for threads in [2, 3, 5] {
            prop_assert_eq!(&in_pool(threads, run), &one, "{} threads", threads);
        }
        let wide: Vec<i128> = idx_values.iter().map(|&v| v as i128).collect();
        match reference_gather_elements(data.data::<f32>().unwrap(), &data_shape, &wide, &idx_shape, axis) {
            Some(values) => {
                let expected = Tensor::new(idx_shape.to_vec(), values).unwrap();
                prop_assert_eq!(one, format!("{:?}", Ok::<_, gatherscatter::Error>(expected)));
            }
            None => {
                let first = wide.iter().position(|&v| v == data_shape[axis] as i128).unwrap();
                prop_assert!(bad.is_some());
                let err = GatherElements::new(axis as i64).run(&data, &idx).unwrap_err();
                let mut coord = vec![0usize; 3];
                let mut rest = first;
                for k in (0..3).rev() {
                    coord[k] = rest % idx_shape[k];
                    rest /= idx_shape[k];
                }
                prop_assert!(err.to_string().contains(&format!("{coord:?}")), "{} vs {:?}", err, coord);
            }
        }
    }

    /// GatherND: slices (k = 1, outputs of 120 KiB to 2 MiB, mostly above
    /// the parallel threshold) and element tuples (k = 2), batch_dims 0 and 1.
    #[test]
    fn gather_nd_is_identical_for_every_thread_count_and_matches_the_reference(
        batch in 2usize..4, rows in 10usize..30, cols in 100usize..200, n in 30usize..80,
        k in 1usize..3, batch_dims in 0usize..2, seed in any::<u64>()
    ) {
        let data_shape = [batch, rows, cols];
        let data = Tensor::new(data_shape.to_vec(), floats(batch * rows * cols, seed)).unwrap();
        // Tuples index dims batch_dims.. of data; indices [batch, n, k] when batched.
        let dims = &data_shape[batch_dims..batch_dims + k];
        // Batched outputs are [batch, n, ..]: more tuples keep them above the
        // threshold, so tasks start mid-batch.
        let mut idx_shape = if batch_dims == 1 { vec![batch, 8 * n] } else { vec![n] };
        idx_shape.push(k);
        let count: usize = idx_shape.iter().product();
        let mut raw: Vec<i128> = indices(count, 1 << 20, seed).iter().map(|&v| v as i128).collect();
        fit_tuples(&mut raw, dims, gatherscatter::DType::I64);
        let values: Vec<i64> = raw.iter().map(|&v| v as i64).collect();
        let idx = Tensor::new(idx_shape.clone(), values).unwrap();
        let out = same_for_every_thread_count(|| {
            GatherND::new().batch_dims(batch_dims).run(&data, &idx).unwrap()
        });
        let (shape, expected) = reference_gather_nd(
            data.data::<f32>().unwrap(), &data_shape, &raw, &idx_shape, batch_dims,
        ).unwrap();
        prop_assert_eq!(out, Tensor::new(shape, expected).unwrap());
    }

    /// ScatterND with slices (k = 1, 2) and element tuples (k = 3), heavy
    /// duplicates and negative components, every reduction, outputs of 300
    /// KiB to 2 MiB: tasks own output slice ranges and each walks every tuple.
    #[test]
    fn scatter_nd_matches_the_reference_for_every_thread_count(
        a in 200usize..400, b in 6usize..16, c in 64usize..100, n in 50usize..600,
        k in 1usize..4, distinct in 1usize..6, seed in any::<u64>()
    ) {
        let data_shape = [a, b, c];
        let data = Tensor::new(data_shape.to_vec(), floats(a * b * c, seed)).unwrap();
        let n = if k == 3 { n * 64 } else { n };
        let idx_shape = [n, k];
        // Tuples drawn from a few values per dim: many repeat.
        let mut raw: Vec<i128> = indices(n * k, distinct, seed).iter().map(|&v| v as i128).collect();
        fit_tuples(&mut raw, &data_shape[..k], gatherscatter::DType::I64);
        let idx = Tensor::new(idx_shape.to_vec(), raw.iter().map(|&v| v as i64).collect::<Vec<_>>()).unwrap();
        let block: usize = data_shape[k..].iter().product();
        let mut upd_shape = vec![n];
        upd_shape.extend_from_slice(&data_shape[k..]);
        let upd_values = floats(n * block, seed ^ 5);
        let updates = Tensor::new(upd_shape, upd_values.clone()).unwrap();
        for reduction in Reduction::ALL {
            let out = same_for_every_thread_count(|| {
                ScatterND::new().reduction(reduction).run(&data, &idx, &updates).unwrap()
            });
            let expected = reference_scatter_nd(
                data.data::<f32>().unwrap(), &data_shape, &raw, &idx_shape, &upd_values,
                |x, y| f32::reduce(reduction.name(), x, y).unwrap(),
            ).unwrap();
            let expected = Tensor::new(data_shape.to_vec(), expected).unwrap();
            prop_assert_eq!(format!("{out:?}"), format!("{expected:?}"));
        }
    }

    /// TensorScatter on caches of 300 KiB and up: tasks own ranges of cache
    /// rows, which start mid-batch when the axis is 2.
    #[test]
    fn tensor_scatter_matches_the_reference_for_every_thread_count(
        batch in 2usize..5, heads in 1usize..4, max in 40usize..80, inner in 200usize..300,
        seq_pick in any::<prop::sample::Index>(), axis in 1usize..3, circular in any::<bool>(),
        seed in any::<u64>()
    ) {
        // [batch, heads, max, inner] along axis 2; [batch, max, heads, inner] along 1.
        let shape = if axis == 2 { [batch, heads, max, inner] } else { [batch, max, heads, inner] };
        let seq = seq_pick.index(max + 1);
        let mut update_shape = shape;
        update_shape[axis] = seq;
        let past_values = floats(shape.iter().product(), seed);
        let update_values = floats(update_shape.iter().product(), seed ^ 7);
        let write: Vec<i64> = (0..batch as u64)
            .map(|b| {
                let w = (seed.wrapping_add(b * 7919) % (max as u64 + 1)) as usize;
                if circular { w as i64 } else { w.min(max - seq) as i64 }
            })
            .collect();
        let past = Tensor::new(shape.to_vec(), past_values.clone()).unwrap();
        let update = Tensor::new(update_shape.to_vec(), update_values.clone()).unwrap();
        let write_tensor = Tensor::new(vec![batch], write.clone()).unwrap();
        let mode = if circular { ScatterMode::Circular } else { ScatterMode::Linear };
        let out = same_for_every_thread_count(|| {
            TensorScatter::new()
                .axis(axis as i64)
                .mode(mode)
                .run(&past, &update, Some(TensorView::from(&write_tensor)))
                .unwrap()
        });
        // In place, tasks are sized by the update rather than the cache.
        let in_place = same_for_every_thread_count(|| {
            let mut cache = past.clone();
            TensorScatter::new()
                .axis(axis as i64)
                .mode(mode)
                .run_in_place(&mut cache, &update, Some(TensorView::from(&write_tensor)))
                .unwrap();
            cache
        });
        prop_assert_eq!(&in_place, &out);
        // present[p, w + s, ..] = update[p, s, ..], positions modulo max when circular.
        let mut expected = past_values;
        for coord in coordinates(&update_shape) {
            let mut pos = write[coord[0]] as usize + coord[axis];
            if circular {
                pos %= max;
            }
            let mut target = coord.clone();
            target[axis] = pos;
            expected[offset(&target, &shape)] = update_values[offset(&coord, &update_shape)];
        }
        prop_assert_eq!(out, Tensor::new(shape.to_vec(), expected).unwrap());
    }
}

/// ScatterReduce on one slab (one task, or for max and min without `self`
/// runs of the updates folded apart and merged) and on many slabs (each
/// task owns whole slabs):
/// the same bits for every thread count and aggregate, with and without
/// `self`, and equal to the one-thread formula where exact.
#[test]
fn scatter_reduce_is_identical_for_every_thread_count() {
    use gatherscatter::{Aggregate, ScatterReduce};
    for (shape, axis) in [(vec![70_000], 0), (vec![300, 400], 1), (vec![2, 40_000], 0)] {
        let len: usize = shape.iter().product();
        let data = Tensor::new(shape.clone(), floats(len, 11)).unwrap();
        let mut idx_shape = shape.clone();
        idx_shape[axis] *= 3;
        let n: usize = idx_shape.iter().product();
        let idx = Tensor::new(idx_shape.clone(), indices(n, shape[axis], 5)).unwrap();
        let updates = Tensor::new(idx_shape.clone(), floats(n, 3)).unwrap();
        for reduce in Aggregate::ALL {
            for include_self in [true, false] {
                let op = ScatterReduce::new(axis as i64, reduce).include_self(include_self);
                same_for_every_thread_count(|| op.run(&data, &idx, &updates).unwrap());
            }
        }
    }
}

/// Segment reductions split the output rows among tasks: the same bits for
/// every thread count, aggregate and segment shape (long and empty
/// segments, one column and many), with the winning rows of amax/amin.
#[test]
fn segment_reductions_are_identical_for_every_thread_count() {
    use gatherscatter::{Aggregate, SegmentCoo, SegmentCsr};
    for (shape, segments) in [(vec![200_000], 1000usize), (vec![3_000, 64], 37)] {
        let len: usize = shape.iter().product();
        let src = Tensor::new(shape.clone(), floats(len, 7)).unwrap();
        let rows = shape[0];
        // Uneven segments, some empty: boundaries at squares.
        let mut indptr: Vec<i64> = (0..=segments)
            .map(|s| ((s * s) as f64 / (segments * segments) as f64 * rows as f64) as i64)
            .collect();
        indptr[segments / 2 + 1] = indptr[segments / 2];
        let ids: Vec<i64> = (0..rows)
            .map(|r| indptr.partition_point(|&b| b <= r as i64) as i64 - 1)
            .collect();
        let (indptr, ids) = (Tensor::from_vec(indptr), Tensor::from_vec(ids));
        for reduce in Aggregate::ALL {
            let csr = SegmentCsr::new(reduce);
            let coo = SegmentCoo::new(reduce).segments(segments);
            let once = same_for_every_thread_count(|| csr.run(&src, &indptr).unwrap());
            // Debug text, so that NaN matches NaN.
            let from_ids = coo.run(&src, &ids).unwrap();
            assert_eq!(format!("{from_ids:?}"), format!("{once:?}"), "{reduce}");
            if matches!(reduce, Aggregate::Amax | Aggregate::Amin) {
                same_for_every_thread_count(|| {
                    Tensor::from(csr.run_with_arg(&src, &indptr).unwrap().1)
                });
            }
        }
    }
}

/// EmbeddingBag splits the bags among tasks: the same bits for every thread
/// count and mode, with padding, per-sample weights and the winning rows.
#[test]
fn embedding_bag_is_identical_for_every_thread_count() {
    use gatherscatter::{Aggregate, EmbeddingBag, TensorView};
    let (rows, dim, n) = (5_000, 32, 60_000);
    let weight = Tensor::new(vec![rows, dim], floats(rows * dim, 3)).unwrap();
    let indices = Tensor::from_vec(indices(n, rows, 9));
    // Bags of 0 to 6 entries.
    let mut offsets = vec![0i64];
    while *offsets.last().unwrap() < n as i64 {
        let next = offsets.last().unwrap() + (offsets.len() as i64 * 5) % 7;
        offsets.push(next.min(n as i64));
    }
    offsets.pop();
    let offsets = Tensor::from_vec(offsets);
    let psw = Tensor::from_vec(floats(n, 5));
    for mode in Aggregate::ALL {
        let op = EmbeddingBag::new(mode).padding_idx(17);
        let weights = (mode == Aggregate::Sum).then(|| TensorView::from(&psw));
        same_for_every_thread_count(|| {
            op.run(&weight, &indices, Some((&offsets).into()), weights)
                .unwrap()
        });
        if matches!(mode, Aggregate::Amax | Aggregate::Amin) {
            same_for_every_thread_count(|| {
                let run = op.run_with_arg(&weight, &indices, Some((&offsets).into()), None);
                Tensor::from(run.unwrap().1)
            });
        }
    }
}
