//! ScatterElements along the last axis where index row `r` lands in data
//! row `r` (the kernel that copies a step of rows and applies their
//! updates while they are in L1): rows short enough for many a step, rows
//! of one step each, long rows taken several to a step, a last step cut
//! short, indices rows shorter than data's, on 1-3 threads, fresh and into
//! a buffer, under every `stream_fetch`, against the naive spec §1
//! reference; a bad index in a late step is named where it is.

mod common;
mod pool;

use common::*;
use gatherscatter::tuning::{self, StreamFetch, Tuning};
use gatherscatter::{DType, Element, Reduction, ScatterElements, Tensor};
use pool::{in_pool, names_the_first_bad_index_on_any_pool};

const TUNINGS: [Tuning; 3] = [
    Tuning::AUTO,
    Tuning::AUTO.with_stream_fetch(StreamFetch::Ahead),
    Tuning::AUTO.with_stream_fetch(StreamFetch::Hardware),
];

/// `(leading dims, data row, index row)`: rows of 3 to 4100 elements,
/// each output over 256 KiB even of int8, so that it is split among tasks.
const SHAPES: [(&[usize], usize, usize); 6] = [
    (&[100_003], 3, 3),
    (&[97, 137], 24, 11),
    (&[1031], 300, 300),
    (&[9, 131], 257, 128),
    (&[301], 1030, 1030),
    (&[75], 4100, 999),
];

/// Indices in `-size..size` that repeat within a row.
fn indices_for(count: usize, size: usize) -> Vec<i128> {
    (0..count)
        .map(|k| ((k * 7919 + k / 13) % (2 * size)) as i128 - size as i128)
        .collect()
}

/// Every shape under every tuning and thread count, fresh and into a
/// buffer, for `T` made from `make` and combined by `add`.
fn check_type<T: Element + Copy + PartialEq + std::fmt::Debug>(
    make: impl Fn(usize) -> T,
    add: impl Fn(&T, &T) -> T + Copy,
) {
    for (leading, data_row, row_len) in SHAPES {
        let data_shape = [leading, &[data_row]].concat();
        let indices_shape = [leading, &[row_len]].concat();
        let count: usize = indices_shape.iter().product();
        let data: Vec<T> = (0..data_shape.iter().product()).map(&make).collect();
        let updates: Vec<T> = (0..count).map(|k| make(k * 31 + 5)).collect();
        let axis = data_shape.len() - 1;
        for index_dtype in [DType::I64, DType::I32, DType::U16] {
            let mut raw = indices_for(count, data_row);
            fit_to_index_type(&mut raw, index_dtype, data_row);
            let indices = index_tensor(index_dtype, &indices_shape, &raw);
            let data_t = Tensor::new(data_shape.clone(), data.clone()).unwrap();
            let updates_t = Tensor::new(indices_shape.clone(), updates.clone()).unwrap();
            for reduction in [Reduction::None, Reduction::Add] {
                let overwrite = |_: &T, u: &T| *u;
                let combine: &dyn Fn(&T, &T) -> T = match reduction {
                    Reduction::None => &overwrite,
                    _ => &add,
                };
                let want = reference_scatter_elements(
                    &data,
                    &data_shape,
                    &raw,
                    &indices_shape,
                    &updates,
                    axis,
                    combine,
                )
                .unwrap();
                let op = ScatterElements::new(-1).reduction(reduction);
                for (tuning, threads) in TUNINGS.into_iter().zip([1, 2, 3]) {
                    let what = format!(
                        "{} {data_shape:?} by {index_dtype} {reduction:?}, {tuning}, {threads} threads",
                        T::DTYPE
                    );
                    let (fresh, into) = in_pool(threads, || {
                        tuning::scoped(tuning, || {
                            let mut out =
                                Tensor::new(data_shape.clone(), updates[..1].repeat(data.len()))
                                    .unwrap();
                            op.run_into(&data_t, &indices, &updates_t, &mut out)
                                .unwrap();
                            (op.run(&data_t, &indices, &updates_t).unwrap(), out)
                        })
                    });
                    assert!(fresh.data::<T>().unwrap() == &want[..], "fresh: {what}");
                    assert!(into.data::<T>().unwrap() == &want[..], "into: {what}");
                }
            }
        }
    }
}

#[test]
fn int8_rows_of_every_step_size_equal_the_reference() {
    check_type(|k| (k % 251) as i8, |a: &i8, b: &i8| a.wrapping_add(*b));
}

#[test]
fn float32_rows_of_every_step_size_equal_the_reference() {
    check_type(|k| (k % 509) as f32 * 0.5, |a: &f32, b: &f32| a + b);
}

#[test]
fn float64_rows_of_every_step_size_equal_the_reference() {
    check_type(|k| (k % 1021) as f64 * 0.25, |a: &f64, b: &f64| a + b);
}

/// The first bad index of the last step's last row, and one in an early
/// row of a long scatter, are named at their positions on any pool and
/// under any tuning.
#[test]
fn a_bad_index_in_a_late_step_is_named_where_it_is() {
    let (rows, len) = (900usize, 40usize);
    let data = Tensor::new(vec![rows, len], vec![1.5f32; rows * len]).unwrap();
    let updates = Tensor::new(vec![rows, len], vec![2.5f32; rows * len]).unwrap();
    for (row, column) in [(rows - 1, len - 1), (899, 3), (450, 0), (2, 39)] {
        let mut raw = indices_for(rows * len, len);
        // A later bad index too, where there is room: the first is named.
        raw[rows * len - 1] = len as i128;
        raw[row * len + column] = -(len as i128) - 1;
        let indices = index_tensor(DType::I32, &[rows, len], &raw);
        for tuning in TUNINGS {
            let run = || {
                tuning::scoped(tuning, || {
                    ScatterElements::new(1)
                        .reduction(Reduction::Add)
                        .run(&data, &indices, &updates)
                })
            };
            names_the_first_bad_index_on_any_pool(run, raw[row * len + column], &[row, column]);
        }
    }
}
