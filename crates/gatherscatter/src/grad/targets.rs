//! Where each update of a scatter lands: one flat data offset per update
//! element, as `u32` when every offset fits (half the memory traffic of
//! the gradient passes, which read it once per update) or `usize`.

use crate::error::Result;
use crate::index::{with_index_view, AxisRule, IndexElement};
use crate::mem::parallel;
use crate::ops::op::Op;
use crate::policy::IndexPolicy;
use crate::shape::{normalize_axis, strides};
use crate::tensor_view::TensorView;

/// A flat data offset, or [`Target::DROPPED`] for an update the policy
/// skipped.
pub(super) trait Target: Copy + Eq + Send + Sync + bytemuck::Zeroable {
    /// A dropped update.
    const DROPPED: Self;
    /// `offset`, which the caller knows fits (below `DROPPED`).
    fn new(offset: usize) -> Self;
    /// The offset.
    fn get(self) -> usize;
}

impl Target for u32 {
    const DROPPED: u32 = u32::MAX;
    fn new(offset: usize) -> u32 {
        offset as u32
    }
    fn get(self) -> usize {
        self as usize
    }
}

impl Target for usize {
    const DROPPED: usize = usize::MAX;
    fn new(offset: usize) -> usize {
        offset
    }
    fn get(self) -> usize {
        self
    }
}

/// Whether every offset of data of `len` elements fits a `u32` target.
pub(super) fn fits_u32(len: usize) -> bool {
    len < u32::MAX as usize
}

/// For each update element (row-major), the flat data offset it lands on
/// under `policy`, or [`Target::DROPPED`]. The forward has run, so every index
/// resolves.
pub(super) fn targets<X: Target>(
    policy: &IndexPolicy,
    op: &Op,
    data_shape: &[usize],
    indices: TensorView<'_>,
    updates_len: usize,
) -> Result<Vec<X>> {
    let data_strides = strides(data_shape);
    // Zeroed (lazily, by the kernel) and then written in full.
    let mut targets = super::zeroed(updates_len)?;
    let per_task = updates_len
        .div_ceil(parallel::tasks(updates_len * 8, updates_len).max(1))
        .max(1);
    match op {
        Op::ScatterND(_) => {
            let k = indices.shape().last().copied().unwrap_or(0);
            let slice: usize = data_shape[k.min(data_shape.len())..].iter().product();
            with_index_view!(indices, "a scatter's gradient", v => {
                let values = v.data();
                parallel::for_each_chunk(&mut targets, per_task, |task, chunk| {
                    for (i, slot) in chunk.iter_mut().enumerate() {
                        let flat = task * per_task + i;
                        let t = flat / slice.max(1);
                        let tuple = &values[t * k..t * k + k];
                        let base = tuple.iter().enumerate().try_fold(0, |acc, (j, x)| {
                            Some(acc + policy.resolve(x.to_i128(), data_shape[j])? * data_strides[j])
                        });
                        *slot = base.map_or(X::DROPPED, |b| X::new(b + flat % slice.max(1)));
                    }
                })
            });
        }
        _ => {
            let axis = match op {
                Op::ScatterElements(s) => s.axis,
                Op::ScatterReduce(s) => s.axis,
                _ => 0,
            };
            let axis = normalize_axis(axis, data_shape.len(), "data")?;
            let shape = indices.shape();
            let index_strides = strides(shape);
            let size = data_shape[axis];
            with_index_view!(indices, "a scatter's gradient", v => {
                let values = v.data();
                parallel::for_each_chunk(&mut targets, per_task, |task, chunk| {
                    if shape.len() == 1 && *policy == IndexPolicy::Raise {
                        // One dim, no policy: the index is the target.
                        let rule = AxisRule { axis, size, negative_allowed: true };
                        let start = task * per_task;
                        for (slot, x) in chunk.iter_mut().zip(&values[start..]) {
                            let wide = i64::try_from(x.to_i128()).unwrap_or(i64::MAX);
                            let position = rule.position(wide);
                            *slot = if position < size { X::new(position) } else { X::DROPPED };
                        }
                        return;
                    }
                    for (i, slot) in chunk.iter_mut().enumerate() {
                        let flat = task * per_task + i;
                        let Some(position) = policy.resolve(values[flat].to_i128(), size) else {
                            *slot = X::DROPPED;
                            continue;
                        };
                        *slot = X::new((0..shape.len())
                            .map(|d| {
                                let coord = if d == axis {
                                    position
                                } else {
                                    flat / index_strides[d] % shape[d]
                                };
                                coord * data_strides[d]
                            })
                            .sum());
                    }
                })
            });
        }
    }
    Ok(targets)
}
