//! Gathers, last-axis GatherElements, GatherND, ScatterND overwrites and TensorScatter large enough for the streaming path (outputs of 8 MiB or more,
//! blocks of a cache line or more): fresh outputs that are never zeroed,
//! caller buffers, rows whose length is not a multiple of 16 bytes, sources
//! of 16 MiB or more (copied in source order), and 1–3 threads, checked against the formula `out[r] = data[idx(indices[r])]`
//! and the naive reference.

mod common;
mod pool;

use common::*;
use gatherscatter::{
    DType, Element, ErrorKind, Gather, GatherElements, GatherND, Reduction, ScatterND, Tensor,
};
use half::f16;
use num_complex::Complex64;
use pool::{in_pool, names_the_first_bad_index_on_any_pool};

const MIB: usize = 1 << 20;

/// Row numbers in `[-rows, rows)`, with negatives and many repeats.
fn row_indices(n: usize, rows: usize) -> Vec<i128> {
    (0..n)
        .map(|i| {
            let v = (i.wrapping_mul(2_654_435_761) % rows) as i128;
            if i % 5 == 0 {
                v - rows as i128
            } else {
                v
            }
        })
        .collect()
}

/// Gathers `n` rows of `row_len` elements from `rows` rows along axis 0,
/// fresh and into a buffer, with 1, 2 and 3 threads and each index type,
/// and checks every output row against the data row its index names.
fn check_rows<T: Element>(rows: usize, row_len: usize, n: usize, value: impl Fn(usize) -> T) {
    let bytes = n * row_len * std::mem::size_of::<T>();
    assert!(bytes >= 8 * MIB, "the case must reach the streaming path");
    let values: Vec<T> = (0..rows * row_len).map(&value).collect();
    let data = Tensor::new(vec![rows, row_len], values.clone()).unwrap();
    let wide = row_indices(n, rows);
    for index_type in [DType::I64, DType::I32, DType::U64] {
        let mut wide = wide.clone();
        fit_to_index_type(&mut wide, index_type, rows);
        let indices = index_tensor(index_type, &[n], &wide);
        for threads in [1, 2, 3] {
            let fresh = in_pool(threads, || Gather::new(0).run(&data, &indices).unwrap());
            let mut into = Tensor::new(vec![n, row_len], vec![value(0); n * row_len]).unwrap();
            in_pool(threads, || {
                Gather::new(0).run_into(&data, &indices, &mut into).unwrap()
            });
            for out in [&fresh, &into] {
                assert_eq!(out.shape(), &[n, row_len]);
                let got = out.data::<T>().unwrap();
                for (r, &v) in wide.iter().enumerate() {
                    let source = idx(v, rows).expect("index in range");
                    let want = &values[source * row_len..(source + 1) * row_len];
                    assert!(
                        got[r * row_len..(r + 1) * row_len] == *want,
                        "{:?} row {r} (index {v}), {threads} threads, {index_type:?}",
                        T::DTYPE
                    );
                }
            }
        }
    }
}

#[test]
fn f32_rows_of_one_kib() {
    check_rows(4096, 256, 8192, |i| i as f32 * 0.5 - 3.0);
}

#[test]
fn f32_rows_of_one_kib_from_a_source_past_the_cache() {
    // 20,000 rows of 1 KiB: a 19.5 MiB source, so on one thread rows are
    // copied grouped by where they sit in the source.
    check_rows(20_000, 256, 8192, |i| i as f32 * 0.25 + 1.0);
}

#[test]
fn f16_rows_of_512_bytes() {
    check_rows(3000, 256, 16400, |i| f16::from_f32((i % 2048) as f32));
}

#[test]
fn u8_rows_of_67_bytes_misaligned() {
    // 67-byte rows: every output row starts at a different offset mod 16,
    // so the streaming copy's unaligned head and tail are exercised.
    check_rows(1000, 67, 130_000, |i| (i * 31 % 251) as u8);
}

#[test]
fn complex_rows_of_80_bytes() {
    check_rows(700, 5, 110_000, |i| Complex64::new(i as f64, -(i as f64)));
}

#[test]
fn batched_inner_axis_gather_matches_the_reference() {
    // data [2, 4, 1000, 16] f64 (128-byte blocks), axis 2, batch_dims 1:
    // blocks are taken from a different slab for each (batch, outer) pair.
    let shape = [2usize, 4, 1000, 16];
    let count: usize = shape.iter().product();
    let values: Vec<f64> = (0..count).map(|i| i as f64).collect();
    let data = Tensor::new(shape.to_vec(), values.clone()).unwrap();
    let wide = row_indices(2 * 8192, 1000);
    let indices = index_tensor(DType::I64, &[2, 8192], &wide);
    let (ref_shape, ref_values) =
        reference_gather(&values, &shape, &wide, &[2, 8192], 2, 1).unwrap();
    for threads in [1, 2, 3] {
        let out = in_pool(threads, || {
            Gather::new(2).batch_dims(1).run(&data, &indices).unwrap()
        });
        assert!(out.data::<f64>().unwrap().len() * 8 >= 8 * MIB);
        assert_eq!(out.shape(), &ref_shape[..]);
        assert!(
            out.data::<f64>().unwrap() == &ref_values[..],
            "{threads} threads"
        );
    }
}

#[test]
fn batched_gather_from_a_source_past_the_cache_matches_the_reference() {
    // data [2, 2, 1300, 512] f64 (4 KiB blocks, 20.3 MiB), axis 2,
    // batch_dims 1: on one thread, source order spans four slabs of two
    // index batches.
    let shape = [2usize, 2, 1300, 512];
    let count: usize = shape.iter().product();
    let values: Vec<f64> = (0..count).map(|i| i as f64).collect();
    let data = Tensor::new(shape.to_vec(), values.clone()).unwrap();
    let wide = row_indices(2 * 600, 1300);
    let indices = index_tensor(DType::I32, &[2, 600], &wide);
    let (ref_shape, ref_values) =
        reference_gather(&values, &shape, &wide, &[2, 600], 2, 1).unwrap();
    for threads in [1, 2, 3] {
        let out = in_pool(threads, || {
            Gather::new(2).batch_dims(1).run(&data, &indices).unwrap()
        });
        assert_eq!(out.shape(), &ref_shape[..]);
        assert!(
            out.data::<f64>().unwrap() == &ref_values[..],
            "{threads} threads"
        );
    }
}

#[test]
fn a_bad_index_in_a_large_gather_is_an_error() {
    let data = Tensor::new(vec![4096, 256], vec![1.0f32; 4096 * 256]).unwrap();
    let mut values = row_indices(8192, 4096);
    values[8000] = 4096;
    let indices = index_tensor(DType::I64, &[8192], &values);
    let err = Gather::new(0).run(&data, &indices).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    let mut out = Tensor::new(vec![8192, 256], vec![0.0f32; 8192 * 256]).unwrap();
    let err = Gather::new(0)
        .run_into(&data, &indices, &mut out)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
}

/// GatherElements along the last axis of `[rows, cols]` into an output of
/// 8 MiB or more (the vector loop with streaming stores), fresh and into a
/// buffer, 1–3 threads, every 4- and 8-byte word type's index types,
/// checked against the naive reference.
fn check_last_axis_elements<T: Element>(rows: usize, cols: usize, value: impl Fn(usize) -> T) {
    let shape = [rows, cols];
    let values: Vec<T> = (0..rows * cols).map(&value).collect();
    let data = Tensor::new(shape.to_vec(), values.clone()).unwrap();
    assert!(rows * cols * std::mem::size_of::<T>() >= 8 * MIB);
    let raw: Vec<i128> = (0..rows * cols)
        .map(|k| ((k * 2_654_435_761) % (2 * cols)) as i128 - cols as i128)
        .collect();
    for index_type in [DType::I64, DType::I32, DType::U32] {
        let mut wide = raw.clone();
        fit_to_index_type(&mut wide, index_type, cols);
        let indices = index_tensor(index_type, &shape, &wide);
        let want = reference_gather_elements(&values, &shape, &wide, &shape, 1).unwrap();
        for threads in [1, 2, 3] {
            let fresh = in_pool(threads, || {
                GatherElements::new(1).run(&data, &indices).unwrap()
            });
            let mut into = Tensor::new(shape.to_vec(), vec![value(1); rows * cols]).unwrap();
            in_pool(threads, || {
                GatherElements::new(-1)
                    .run_into(&data, &indices, &mut into)
                    .unwrap()
            });
            for out in [&fresh, &into] {
                assert!(
                    out.data::<T>().unwrap() == &want[..],
                    "{:?} {index_type:?} {threads} threads",
                    T::DTYPE
                );
            }
        }
    }
}

#[test]
fn f32_gather_elements_along_the_last_axis() {
    check_last_axis_elements(520, 4096, |i| i as f32 - 7.5);
}

#[test]
fn f64_gather_elements_along_a_short_last_axis() {
    // Rows of 37: vectors of four, then a scalar tail in every row.
    check_last_axis_elements(30_000, 37, |i| i as f64 * 0.5);
}

#[test]
fn the_first_bad_index_of_a_large_last_axis_gather_elements_is_reported() {
    let (rows, cols) = (520usize, 4096usize);
    let data = Tensor::new(vec![rows, cols], vec![1.0f32; rows * cols]).unwrap();
    let mut raw: Vec<i128> = (0..rows * cols).map(|k| (k % cols) as i128).collect();
    // Two bad values in different tasks' rows: the first in row-major order wins.
    raw[300 * cols + 13] = cols as i128;
    raw[500 * cols + 2] = -(cols as i128) - 1;
    let indices = index_tensor(DType::I64, &[rows, cols], &raw);
    let run = || GatherElements::new(1).run(&data, &indices);
    names_the_first_bad_index_on_any_pool(run, cols as i128, &[300, 13]);
}

/// ScatterND `none` of `n` slices of `row_len` elements into `[rows,
/// row_len]` (8 MiB or more: written as a gather of slices with streaming
/// stores), tuples with negatives and repeats, fresh and into a buffer,
/// 1–3 threads, against the naive reference (the last duplicate wins).
fn check_scatter_nd_rows<T: Element>(
    rows: usize,
    row_len: usize,
    n: usize,
    value: impl Fn(usize) -> T,
) {
    assert!(rows * row_len * std::mem::size_of::<T>() >= 8 * MIB);
    let values: Vec<T> = (0..rows * row_len).map(&value).collect();
    let updates: Vec<T> = (0..n * row_len)
        .map(|i| value(i + 3 * rows * row_len))
        .collect();
    let data = Tensor::new(vec![rows, row_len], values.clone()).unwrap();
    let update_tensor = Tensor::new(vec![n, row_len], updates.clone()).unwrap();
    let wide = row_indices(n, rows);
    let want = reference_scatter_nd(
        &values,
        &[rows, row_len],
        &wide,
        &[n, 1],
        &updates,
        |_, u| u.clone(),
    )
    .unwrap();
    for index_type in [DType::I64, DType::I32] {
        let indices = index_tensor(index_type, &[n, 1], &wide);
        let inputs = [&data, &indices, &update_tensor];
        check_fresh_and_into(
            &ScatterND::new(),
            inputs,
            &want,
            value(1),
            &format!("{index_type:?}"),
        );
    }
}

/// `op` on `[data, indices, updates]` on 1–3 threads, fresh and into a
/// buffer first filled with `filler`, gives `want`.
fn check_fresh_and_into<T: Element>(
    op: &ScatterND,
    [data, indices, updates]: [&Tensor; 3],
    want: &[T],
    filler: T,
    what: &str,
) {
    for threads in [1, 2, 3] {
        let fresh = in_pool(threads, || op.run(data, indices, updates).unwrap());
        let mut into =
            Tensor::new(data.shape().to_vec(), vec![filler.clone(); data.len()]).unwrap();
        in_pool(threads, || {
            op.run_into(data, indices, updates, &mut into).unwrap()
        });
        for out in [&fresh, &into] {
            assert!(
                out.data::<T>().unwrap() == want,
                "{:?} {what} {threads} threads",
                T::DTYPE
            );
        }
    }
}

#[test]
fn scatter_nd_overwrites_of_one_kib_rows() {
    // A quarter of the rows written, some twice: runs of untouched rows
    // between them come from data.
    check_scatter_nd_rows(8192, 256, 2048, |i| i as f32 * 0.25);
}

#[test]
fn scatter_nd_overwrites_of_odd_rows_of_300_bytes() {
    // Rows that are not a multiple of 16 bytes: each slice has a head and
    // a tail of ordinary stores; more tuples than rows.
    check_scatter_nd_rows(30_000, 300, 40_000, |i| i as u8);
}

#[test]
fn a_bad_tuple_in_a_large_scatter_nd_leaves_the_buffer_untouched() {
    let (rows, row_len) = (8192usize, 256usize);
    let data = Tensor::new(vec![rows, row_len], vec![1.0f32; rows * row_len]).unwrap();
    let mut wide = row_indices(4096, rows);
    wide[3000] = rows as i128;
    let indices = index_tensor(DType::I64, &[4096, 1], &wide);
    let updates = Tensor::new(vec![4096, row_len], vec![2.0f32; 4096 * row_len]).unwrap();
    let err = ScatterND::new().run(&data, &indices, &updates).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    let mut out = Tensor::new(vec![rows, row_len], vec![5.0f32; rows * row_len]).unwrap();
    let err = ScatterND::new()
        .run_into(&data, &indices, &updates, &mut out)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    assert!(out.data::<f32>().unwrap().iter().all(|&v| v == 5.0));
}

/// GatherND of slices of `data_shape[batch_dims + 1..]` by one-component
/// tuples (with negatives and repeats) into an output of 8 MiB or more
/// (Gather's streamed block copy), fresh and into a buffer, 1–3 threads,
/// against the naive reference.
fn check_gather_nd_slices<T: Element>(
    data_shape: &[usize],
    batch_dims: usize,
    value: impl Fn(usize) -> T,
) {
    let len: usize = data_shape.iter().product();
    let values: Vec<T> = (0..len).map(&value).collect();
    let data = Tensor::new(data_shape.to_vec(), values.clone()).unwrap();
    let mut indices_shape = data_shape[..batch_dims + 1].to_vec();
    indices_shape.push(1);
    let tuples: usize = indices_shape.iter().product();
    let wide = row_indices(tuples, data_shape[batch_dims]);
    let (want_shape, want) =
        reference_gather_nd(&values, data_shape, &wide, &indices_shape, batch_dims).unwrap();
    assert_eq!(want_shape, data_shape);
    assert!(want.len() * std::mem::size_of::<T>() >= 8 * MIB);
    for index_type in [DType::I64, DType::I32] {
        let indices = index_tensor(index_type, &indices_shape, &wide);
        let op = GatherND::new().batch_dims(batch_dims);
        for threads in [1, 2, 3] {
            let fresh = in_pool(threads, || op.run(&data, &indices).unwrap());
            let mut into = Tensor::new(data_shape.to_vec(), vec![value(1); len]).unwrap();
            in_pool(threads, || op.run_into(&data, &indices, &mut into).unwrap());
            for out in [&fresh, &into] {
                assert_eq!(out.shape(), data_shape);
                assert!(
                    out.data::<T>().unwrap() == &want[..],
                    "{:?} {index_type:?} {threads} threads",
                    T::DTYPE
                );
            }
        }
    }
}

#[test]
fn gather_nd_of_one_kib_rows() {
    check_gather_nd_slices(&[8192, 256], 0, |i| i as f32 + 0.5);
}

#[test]
fn gather_nd_of_rows_within_their_batch() {
    // Three batches of rows of 200 bytes: a task's first slice may start
    // mid-batch, and every source row is read from its own batch.
    check_gather_nd_slices(&[3, 14_000, 100], 1, |i| i as u16);
}

/// ScatterND with `reduction` of `n` slices of `row_len` elements into
/// `[rows, row_len]` (8 MiB or more: each slice folded from data and its
/// tuples in order, then streamed), tuples with negatives and repeats,
/// fresh and into a buffer, 1–3 threads, against the naive reference,
/// which folds in the same order (so floats match to the bit).
fn check_scatter_nd_reduction<T: Element>(
    reduction: Reduction,
    (rows, row_len, n): (usize, usize, usize),
    value: impl Fn(usize) -> T,
    combine: impl Fn(&T, &T) -> T,
) {
    assert!(rows * row_len * std::mem::size_of::<T>() >= 8 * MIB);
    let values: Vec<T> = (0..rows * row_len).map(&value).collect();
    let updates: Vec<T> = (0..n * row_len).map(|i| value(i * 7 + 1)).collect();
    let data = Tensor::new(vec![rows, row_len], values.clone()).unwrap();
    let update_tensor = Tensor::new(vec![n, row_len], updates.clone()).unwrap();
    let wide = row_indices(n, rows);
    let want =
        reference_scatter_nd(&values, &[rows, row_len], &wide, &[n, 1], &updates, combine).unwrap();
    let indices = index_tensor(DType::I64, &[n, 1], &wide);
    let op = ScatterND::new().reduction(reduction);
    let inputs = [&data, &indices, &update_tensor];
    check_fresh_and_into(&op, inputs, &want, value(1), &format!("{reduction:?}"));
}

#[test]
fn scatter_nd_adds_of_one_kib_rows_with_duplicates_fold_in_order() {
    // More tuples than rows: most rows take several updates, some none.
    let shape = (8192, 256, 12_000);
    check_scatter_nd_reduction(
        Reduction::Add,
        shape,
        |i| (i % 1000) as f32 * 0.1,
        |a, b| a + b,
    );
}

#[test]
fn scatter_nd_max_of_long_rows_folds_each_row_in_pieces() {
    // Rows of 16 KiB: each is folded in pieces of 4 KiB.
    let shape = (1024, 2048, 1500);
    check_scatter_nd_reduction(
        Reduction::Max,
        shape,
        |i| (i * 37 % 1001) as i64 - 500,
        |a, b| *a.max(b),
    );
}

/// TensorScatter of a KV cache of 8 MiB (the streamed rows), circular, one
/// batch's window wrapping past the end: fresh and into a buffer, 1-3
/// threads, every element against `present[b, h, (w_b + s) % max, d] =
/// update[b, h, s, d]`, past elsewhere.
#[test]
fn tensor_scatter_streams_a_cache_of_eight_mib_with_a_wrapped_window() {
    use gatherscatter::tuning::{self, Stores, Tuning};
    use gatherscatter::{ScatterMode, TensorScatter, TensorView};
    let (batch, heads, max, seq, dim) = (2, 4, 1024, 16, 256);
    let n = batch * heads * max * dim;
    assert!(n * 4 >= 8 * MIB, "the case must reach the streaming path");
    let past_values: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let update_values: Vec<f32> = (0..batch * heads * seq * dim)
        .map(|i| -(i as f32) - 1.0)
        .collect();
    let past = Tensor::new(vec![batch, heads, max, dim], past_values.clone()).unwrap();
    let update = Tensor::new(vec![batch, heads, seq, dim], update_values.clone()).unwrap();
    let starts = [1020_i64, 5];
    let write = Tensor::new(vec![batch], starts.to_vec()).unwrap();
    let mut expected = past_values;
    for (b, &start) in starts.iter().enumerate() {
        for h in 0..heads {
            for s in 0..seq {
                let pos = (start as usize + s) % max;
                let to = ((b * heads + h) * max + pos) * dim;
                let from = ((b * heads + h) * seq + s) * dim;
                expected[to..to + dim].copy_from_slice(&update_values[from..from + dim]);
            }
        }
    }
    let op = TensorScatter::new().mode(ScatterMode::Circular);
    // Under `auto` (which may measure both stores on a CPU whose cache
    // holds the call) and forced to stream.
    let streaming = Tuning::AUTO.with_stores(Stores::Streaming);
    for (tuning, threads) in [Tuning::AUTO, streaming]
        .into_iter()
        .flat_map(|t| [1, 2, 3].map(|n| (t, n)))
    {
        let fresh = in_pool(threads, || {
            tuning::scoped(tuning, || {
                op.run(&past, &update, Some(TensorView::from(&write)))
                    .unwrap()
            })
        });
        let mut into = Tensor::new(vec![batch, heads, max, dim], vec![7.0_f32; n]).unwrap();
        in_pool(threads, || {
            tuning::scoped(tuning, || {
                op.run_into(&past, &update, Some(TensorView::from(&write)), &mut into)
                    .unwrap()
            })
        });
        for out in [&fresh, &into] {
            assert!(
                out.data::<f32>().unwrap() == &expected[..],
                "{threads} threads, {tuning}"
            );
        }
    }
}
