//! Gather's streamed row copies under each `block_prefetch` level (rows
//! asked for into L1 or L2) and under `auto`, which times the two on the
//! first calls of each class from 2 MiB sources and 1 MiB outputs: every
//! call gives the rows the formula `out[r] = data[idx(indices[r])]` names,
//! fresh and into a caller's buffer, on 1 and 2 threads, and the report
//! names the class with both levels timed and one kept.

mod common;
mod pool;

use common::measured::assert_measured;
use common::*;
use gatherscatter::tuning::{self, BlockPrefetch, Stores, Tuning};
use gatherscatter::{DType, Gather, Tensor};
use pool::in_pool;

/// Streaming stores forced, so that 2 MiB outputs take the row copies;
/// `auto` levels first, then each forced one.
const PREFETCH_TUNINGS: [Tuning; 3] = [
    Tuning::AUTO.with_stores(Stores::Streaming),
    Tuning::AUTO
        .with_stores(Stores::Streaming)
        .with_block_prefetch(BlockPrefetch::L1),
    Tuning::AUTO
        .with_stores(Stores::Streaming)
        .with_block_prefetch(BlockPrefetch::L2),
];

/// 4096 rows of 256 float32 (a 4 MiB source), 2048 of them gathered
/// (2 MiB), indices with negatives and repeats.
fn rows_case() -> (Tensor, Tensor, Vec<f32>) {
    let (rows, row_len, n) = (4096usize, 256usize, 2048usize);
    let values: Vec<f32> = (0..rows * row_len).map(|k| (k % 4093) as f32).collect();
    let wide: Vec<i128> = (0..n)
        .map(|i| ((i * 2_654_435_761) % rows) as i128 - if i % 3 == 0 { rows as i128 } else { 0 })
        .collect();
    let mut expected = Vec::with_capacity(n * row_len);
    for &v in &wide {
        let r = idx(v, rows).expect("index in range");
        expected.extend_from_slice(&values[r * row_len..(r + 1) * row_len]);
    }
    let data = Tensor::new(vec![rows, row_len], values).unwrap();
    (data, index_tensor(DType::I64, &[n], &wide), expected)
}

#[test]
fn streamed_row_gathers_give_the_formula_under_every_block_prefetch_on_every_call() {
    let (data, indices, expected) = rows_case();
    let op = Gather::new(0);
    for tuning in PREFETCH_TUNINGS {
        for threads in [1, 2] {
            in_pool(threads, || {
                tuning::scoped(tuning, || {
                    let mut into = op.run(&data, &indices).unwrap();
                    // Six of each: the calls a class's order and level are
                    // timed on, and those after its choices.
                    for call in 0..6 {
                        let fresh = op.run(&data, &indices).unwrap();
                        assert_eq!(
                            fresh.data::<f32>().unwrap(),
                            &expected[..],
                            "{tuning}, call {call}"
                        );
                        op.run_into(&data, &indices, &mut into).unwrap();
                        assert_eq!(
                            into.data::<f32>().unwrap(),
                            &expected[..],
                            "{tuning}, call {call}"
                        );
                    }
                })
            });
        }
    }
    assert_measured("block_prefetch", "4 MiB sources by 1024 B rows, one task");
}
