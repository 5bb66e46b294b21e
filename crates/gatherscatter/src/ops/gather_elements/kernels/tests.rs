//! The fresh-output path writes memory that was never initialised, so each
//! of its kernel paths is run here, where Miri (CI) checks that no slot is
//! read before it is written, against a reference from the formula.

use super::*;
use crate::Complex64;
use crate::GatherElements;

/// `out[p] = data[p with p[axis] := indices[p] (+ size if negative)]`.
fn reference<T: Clone>(data: &TypedTensor<T>, indices: &TypedTensor<i64>, axis: usize) -> Vec<T> {
    let (dshape, ishape) = (data.shape(), indices.shape());
    let mut out = Vec::new();
    for (flat, &v) in indices.data().iter().enumerate() {
        let mut rest = flat;
        let mut coord = vec![0; ishape.len()];
        for d in (0..ishape.len()).rev() {
            coord[d] = rest % ishape[d];
            rest /= ishape[d];
        }
        coord[axis] = if v < 0 { v + dshape[axis] as i64 } else { v } as usize;
        let at = coord
            .iter()
            .zip(dshape)
            .fold(0, |acc, (&c, &s)| acc * s + c);
        out.push(data.data()[at].clone());
    }
    out
}

fn check<T: Element + PartialEq + std::fmt::Debug>(
    data_shape: &[usize],
    indices_shape: &[usize],
    axis: usize,
    value: impl Fn(usize) -> T,
) {
    let len: usize = data_shape.iter().product();
    let data = TypedTensor::new(data_shape.to_vec(), (0..len).map(value).collect()).unwrap();
    let size = data_shape[axis] as i64;
    let count: usize = indices_shape.iter().product();
    // Every position, negative half the time, in a scrambled order.
    let picks = (0..count as i64).map(|k| (k * 7 + 3) % size - (k % 2) * size);
    let indices = TypedTensor::new(indices_shape.to_vec(), picks.collect()).unwrap();
    let out = GatherElements::new(axis as i64)
        .run_typed(data.view(), indices.view())
        .unwrap();
    assert_eq!(
        out.data(),
        reference(&data, &indices, axis),
        "{data_shape:?} {indices_shape:?} axis {axis}"
    );
}

#[test]
fn fresh_outputs_of_the_innermost_axis_are_written_in_full() {
    check(&[3, 20], &[3, 17], 1, |k| k as f32);
    check(&[2, 9], &[2, 11], 1, |k| k as f64);
    check(&[4, 5], &[3, 6], 1, |k| k as u8);
    check(&[2, 7], &[2, 3], 1, |k| k % 3 == 0);
}

/// Rows of 8 KiB and more, where the vector loops may ask for the next
/// row instead of reading each through: both ways, with indices read
/// in place (`i64`, `i32`, `u16`) and widened in chunks (`u32`), give
/// the formula's result, fresh and into a buffer.
#[test]
fn rows_prefetched_ahead_give_what_rows_read_through_give() {
    use crate::mem::knobs::{scoped, RowFetch, Tuning, WordGather};
    let (rows, len) = if cfg!(miri) { (2, 2048) } else { (5, 4096) };
    let data =
        TypedTensor::new(vec![rows, len], (0..rows * len).map(|k| k as f32).collect()).unwrap();
    let picks: Vec<i64> = (0..rows * len)
        .map(|k| ((k * 7919 + 13) % len) as i64)
        .collect();
    let indices = TypedTensor::new(vec![rows, len], picks.clone()).unwrap();
    let want = reference(&data, &indices, 1);
    let op = GatherElements::new(1);
    for fetch in [RowFetch::Read, RowFetch::Prefetch] {
        // The vector loops (on a CPU with AVX2) are the ones that prefetch.
        let tuning = Tuning::AUTO
            .with_row_fetch(fetch)
            .with_word_gather(WordGather::Vector);
        let run = |indices: &dyn Fn() -> Vec<f32>| scoped(tuning, indices);
        let i64s = run(&|| {
            op.run_typed(data.view(), indices.view())
                .unwrap()
                .data()
                .to_vec()
        });
        assert_eq!(i64s, want, "{fetch:?} i64");
        macro_rules! narrow {
            ($t:ty) => {{
                let values = picks.iter().map(|&v| v as $t).collect();
                let narrow = TypedTensor::new(vec![rows, len], values).unwrap();
                let fresh = run(&|| {
                    op.run_typed(data.view(), narrow.view())
                        .unwrap()
                        .data()
                        .to_vec()
                });
                assert_eq!(fresh, want, "{fetch:?} {}", stringify!($t));
                let mut into = TypedTensor::new(vec![rows, len], vec![0f32; rows * len]).unwrap();
                scoped(tuning, || {
                    op.run_typed_into(data.view(), narrow.view(), &mut into)
                        .unwrap()
                });
                assert_eq!(into.data(), want, "{fetch:?} {} into", stringify!($t));
            }};
        }
        narrow!(i32);
        narrow!(u16);
        narrow!(u32);
    }
}

#[test]
fn fresh_outputs_of_an_outer_axis_are_written_in_full() {
    // In place (a small plane), then from packed strips (48 KiB plane).
    check(&[5, 4, 3], &[5, 2, 3], 1, |k| k as i16);
    check(&[96, 128], &[32, 128], 0, |k| k as u32);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "rayon's worker threads trip Stacked Borrows inside crossbeam-epoch"
)]
fn fresh_outputs_split_by_columns_are_written_in_full() {
    // 256 KiB of output on two threads: tasks own column ranges.
    let run = || check(&[8, 2048], &[8, 2048], 0, |k| Complex64::new(k as f64, 1.0));
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap()
        .install(run);
}
