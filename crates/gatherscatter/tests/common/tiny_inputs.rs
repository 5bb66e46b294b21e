//! The small inputs every op is called on in `benches/tiny_calls.rs` (its
//! time per call) and `tests/small_call_allocations.rs` (its allocations
//! per call), in one place so that both measure the same calls. Included
//! by path from each.

use gatherscatter::{Element, Tensor};

/// W9's Gather, 8×8 data with 8×4 indices for the elements ops, 4 pairs for
/// the ND ops, one step of a small cache, 32 values in 4 segments, 4 bags.
pub struct TinyInputs {
    /// W9's shapes: data 16×16, 4 row indices.
    pub rows: Tensor,
    pub row_ids: Tensor,
    /// The shapes issue #34 names for the elements ops: data 8×8, indices 8×4.
    pub square: Tensor,
    pub elements: Tensor,
    pub updates: Tensor,
    /// ND: 4 index tuples of 2 into 8×8, one element each.
    pub tuples: Tensor,
    pub nd_updates: Tensor,
    /// TensorScatter: a [1, 8, 4] cache, one step written at position 3.
    pub cache: Tensor,
    pub step: Tensor,
    pub at: Tensor,
    /// Segments: 32 values in 4 segments, by bounds or by ids.
    pub src: Tensor,
    pub indptr: Tensor,
    pub ids: Tensor,
    /// Bags: rows of `square`, 4 bags of 2.
    pub bag_rows: Tensor,
    pub offsets: Tensor,
}

impl TinyInputs {
    pub fn new() -> TinyInputs {
        TinyInputs {
            rows: tensor(&[16, 16], floats(256)),
            row_ids: tensor(&[4], indices(4, 16)),
            square: tensor(&[8, 8], floats(64)),
            elements: tensor(&[8, 4], indices(32, 8)),
            updates: tensor(&[8, 4], floats(32)),
            tuples: tensor(&[4, 2], indices(8, 8)),
            nd_updates: tensor(&[4], floats(4)),
            cache: tensor(&[1, 8, 4], floats(32)),
            step: tensor(&[1, 1, 4], floats(4)),
            at: tensor(&[1], vec![3i64]),
            src: tensor(&[32], floats(32)),
            indptr: tensor(&[5], vec![0i64, 8, 16, 24, 32]),
            ids: tensor(&[32], (0..32).map(|i| i / 8).collect::<Vec<i64>>()),
            bag_rows: tensor(&[8], indices(8, 8)),
            offsets: tensor(&[4], vec![0i64, 2, 4, 6]),
        }
    }
}

fn tensor<T: Element>(shape: &[usize], values: Vec<T>) -> Tensor {
    Tensor::new(shape.to_vec(), values).expect("a well-formed tiny input")
}

fn floats(len: usize) -> Vec<f32> {
    (0..len).map(|i| i as f32 * 0.5).collect()
}

/// Index values `0..modulo` in a fixed scrambled order.
fn indices(len: usize, modulo: usize) -> Vec<i64> {
    (0..len).map(|i| ((i * 5 + 3) % modulo) as i64).collect()
}
