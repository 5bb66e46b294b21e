//! GatherElements along the last axis in rows under 32 elements, each
//! reading its own data row: walked a chunk of rows at a time by the
//! scalar walk or the AVX2 loop across row ends, under each forced word
//! loop and store kind and under `auto`, against the naive spec §1
//! reference.

mod common;
mod pool;

use common::*;
use gatherscatter::tuning::{self, Stores, Tuning, WordGather};
use gatherscatter::{f16, DType, Element, GatherElements, Tensor};
use pool::{in_pool, names_the_first_bad_index_on_any_pool};

/// `auto`, and the scalar walk and the vector loop with each kind of
/// store.
fn tunings() -> Vec<Tuning> {
    let mut all = vec![Tuning::AUTO];
    for word_gather in [WordGather::Scalar, WordGather::Vector] {
        for stores in [Stores::Cached, Stores::Streaming] {
            all.push(
                Tuning::AUTO
                    .with_word_gather(word_gather)
                    .with_stores(stores),
            );
        }
    }
    all
}

/// Rows of 1 to 31 elements, data rows as long or 5 longer, 96 Ki
/// elements (one task for bytes, several from 4-byte words on): equal to
/// the reference under every tuning on 1 and 3 threads, fresh and into a
/// buffer, for indices read in place (`i64`, `i32`, `u16`: the vector
/// loop's) and widened (whose chunks and read-ahead steps start inside
/// rows), with a bad index named where it is: the first, inside a row, at
/// the end of a widening chunk, the last.
fn check<T: Element + Copy + PartialEq + std::fmt::Debug>(make: fn(usize) -> T) {
    for (cols, wider) in [
        (1usize, 0),
        (2, 5),
        (3, 0),
        (7, 5),
        (16, 0),
        (16, 5),
        (31, 0),
    ] {
        let rows = (96 << 10) / cols / 3 * 3;
        // A rank-3 shape: the leading dims merge into rows.
        let shape = [3, rows / 3, cols];
        let data_shape = [3, rows / 3, cols + wider];
        let (n, data_n) = (rows * cols, rows * (cols + wider));
        let values: Vec<T> = (0..data_n).map(make).collect();
        let data = Tensor::new(data_shape.to_vec(), values.clone()).unwrap();
        let size = cols + wider;
        let index_types = [
            (DType::I64, true),
            (DType::I32, true),
            (DType::U16, false),
            (DType::U32, false),
            (DType::I16, true),
        ];
        for (index_type, signed) in index_types {
            let low = if signed { size } else { 0 };
            let raw: Vec<i128> = (0..n)
                .map(|k| ((k * 2_654_435_761) % (size + low)) as i128 - low as i128)
                .collect();
            let want = reference_gather_elements(&values, &data_shape, &raw, &shape, 2).unwrap();
            let indices = index_tensor(index_type, &shape, &raw);
            let op = GatherElements::new(-1);
            for tuning in tunings() {
                for threads in [1, 3] {
                    let run = || tuning::scoped(tuning, || op.run(&data, &indices).unwrap());
                    let fresh = in_pool(threads, run);
                    let mut into = Tensor::new(shape.to_vec(), vec![make(7); n]).unwrap();
                    in_pool(threads, || {
                        tuning::scoped(tuning, || op.run_into(&data, &indices, &mut into))
                    })
                    .unwrap();
                    for out in [&fresh, &into] {
                        assert!(
                            out.data::<T>().unwrap() == &want[..],
                            "{cols} columns from {size}, {index_type:?}, {tuning}, \
                             {threads} threads"
                        );
                    }
                }
            }
            let bad_value = if signed {
                -(size as i128) - 1
            } else {
                size as i128
            };
            for bad in [0, n / 2 + cols / 2, 1023, 1024 * 7 - 1, n - 1] {
                let mut raw = raw.clone();
                raw[bad] = bad_value;
                let indices = index_tensor(index_type, &shape, &raw);
                let at = [bad / (shape[1] * cols), bad / cols % shape[1], bad % cols];
                // `auto`, the scalar walk and the vector loop.
                for tuning in tunings().into_iter().step_by(2) {
                    let run =
                        || tuning::scoped(tuning, || GatherElements::new(2).run(&data, &indices));
                    names_the_first_bad_index_on_any_pool(run, bad_value, &at);
                }
            }
        }
    }
}

// One test per word size, so that the harness runs them side by side.

#[test]
fn byte_rows_shorter_than_32_along_the_last_axis_match_the_reference() {
    check::<i8>(|k| (k * 131) as i8);
}

#[test]
fn two_byte_rows_shorter_than_32_along_the_last_axis_match_the_reference() {
    check::<f16>(|k| f16::from_f32((k % 2048) as f32));
}

#[test]
fn four_byte_rows_shorter_than_32_along_the_last_axis_match_the_reference() {
    check::<f32>(|k| k as f32 * 0.25);
}

#[test]
fn eight_byte_rows_shorter_than_32_along_the_last_axis_match_the_reference() {
    check::<f64>(|k| k as f64 * -0.5);
}
