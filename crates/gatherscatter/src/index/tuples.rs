//! GatherND and ScatterND index tuples: every component checked against
//! its own dimension, each tuple resolved to an element offset.

use super::{position_shifted, with_index_view, AxisRule, IndexElement, Positions};
use std::mem::MaybeUninit;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::mem::parallel;
use crate::mem::scratch::scratch;
use crate::shape::unravel;
use crate::tensor::TypedView;
use crate::tensor_view::TensorView;

/// How the k-tuples of GatherND / ScatterND indices address data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TupleRule<'s> {
    /// The data dims the tuple components index, in order (`data.shape[b..b+k]`).
    pub dims: &'s [usize],
    /// Elements of data after those dims (`product(data.shape[b+k..])`):
    /// a tuple's offset is its row-major position among `dims` times this,
    /// so the rule needs no strides of its own.
    pub block: usize,
    /// Data axis of the first component (= batch_dims), for error messages.
    pub first_axis: usize,
    /// Whether `[-s, -1]` is accepted.
    pub negative_allowed: bool,
}

/// Check every component of every index tuple against its own dimension
/// (never only the flattened sum), in row-major order, and resolve each tuple
/// to an element offset `sum(idx_j * stride_j)`.
pub(crate) fn resolve_tuples<I: IndexElement>(
    indices: TypedView<'_, I>,
    rule: &TupleRule<'_>,
) -> Result<Positions> {
    let k = rule.dims.len();
    let values = indices.data();
    let tuples = values.len().checked_div(k).unwrap_or(0);
    if k > 0 && tuples <= Positions::INLINE {
        return resolve_few_tuples(indices, rule);
    }
    if k == 0 {
        // Empty tuples address the whole slab: one offset 0 per tuple.
        let n = crate::shape::checked_product(&indices.shape()[..indices.rank().saturating_sub(1)])
            .unwrap_or(0);
        let mut offsets = scratch(n, DType::U64)?;
        offsets.resize(n, 0);
        return Ok(Positions::Heap(offsets));
    }
    // Written where they lie, not zeroed first: zeroing 4M offsets (32 MiB)
    // took a twentieth of an element GatherND's two-thread call, on one
    // thread, before the tasks started.
    let mut offsets = scratch(tuples, DType::U64)?;
    // Large index tensors are resolved by several tasks, each its own range
    // of tuples (a million tuples of pairs: most of an element GatherND's
    // time). A task that meets a bad tuple stops; the first bad component
    // in row-major order is then found again on this thread.
    let per_task = tuples
        .div_ceil(parallel::tasks(std::mem::size_of_val(values), tuples))
        .max(1);
    let slots = offsets
        .spare_capacity_mut()
        .get_mut(..tuples)
        .ok_or(Error::Allocation {
            elements: tuples,
            dtype: DType::U64,
        })?;
    let resolved = parallel::try_for_each_chunk(slots, per_task, |task, chunk| {
        let first = task * per_task;
        let values = values.get(first * k..).unwrap_or(&[]);
        // Every slot of the chunk is written below unless this is `Err`.
        if values.len() / k < chunk.len() {
            return Err(());
        }
        match k {
            1 => FixedRule::<1>::resolve_range(rule, values, chunk),
            2 => FixedRule::<2>::resolve_range(rule, values, chunk),
            3 => FixedRule::<3>::resolve_range(rule, values, chunk),
            _ => resolve_range(rule, values, chunk),
        }
    });
    if resolved.is_ok() {
        // SAFETY: `slots` is the first `tuples` elements of the spare
        // capacity, and every task returned `Ok`, so each wrote every slot
        // of its chunk (it had a tuple for each, checked above); the chunks
        // cover `slots`, so the first `tuples` elements are initialised.
        #[allow(unsafe_code)]
        unsafe {
            offsets.set_len(tuples);
        }
    } else {
        // Found again on this thread, each tuple in turn: the first bad
        // component in row-major order is named.
        for (t, tuple) in values.chunks_exact(k).enumerate() {
            let offset =
                tuple_offset(tuple, rule).map_err(|j| bad_component(indices, rule, t, j))?;
            offsets.push(offset);
        }
    }
    Ok(Positions::Heap(offsets))
}

/// A [`TupleRule`] of `K` components whose dims all fit in `i64` (those
/// of any tensor with elements), in arrays of a constant length.
struct FixedRule<const K: usize> {
    dims: [usize; K],
    /// Each component's shift for a negative value: its dim, or 0 where
    /// negatives are out of range.
    shifts: [i64; K],
    block: usize,
}

/// Tuples checked between two looks at whether one was out of range.
const TUPLES_PER_CHECK: usize = 64;

/// [`tuple_offset`] of each tuple of `values` into `offsets`, one at a
/// time; `Ok` when every tuple is in range, each of `offsets` then
/// written (`values` holds a tuple for each).
fn resolve_range(
    rule: &TupleRule<'_>,
    values: &[impl IndexElement],
    offsets: &mut [MaybeUninit<usize>],
) -> Result<(), ()> {
    for (slot, tuple) in offsets.iter_mut().zip(values.chunks_exact(rule.dims.len())) {
        slot.write(tuple_offset(tuple, rule).map_err(|_| ())?);
    }
    Ok(())
}

impl<const K: usize> FixedRule<K> {
    /// [`FixedRule::resolve`] for a rule of `K` components, or
    /// [`resolve_range`] where a dim does not fit in `i64`.
    fn resolve_range(
        rule: &TupleRule<'_>,
        values: &[impl IndexElement],
        offsets: &mut [MaybeUninit<usize>],
    ) -> Result<(), ()> {
        match FixedRule::<K>::of(rule) {
            Some(fixed) => fixed.resolve(values, offsets),
            None => resolve_range(rule, values, offsets),
        }
    }

    fn of(rule: &TupleRule<'_>) -> Option<FixedRule<K>> {
        let dims: [usize; K] = rule.dims.try_into().ok()?;
        let negatives = -i64::from(rule.negative_allowed);
        let mut shifts = [0; K];
        for (shift, &dim) in shifts.iter_mut().zip(&dims) {
            *shift = i64::try_from(dim).ok()? & negatives;
        }
        Some(FixedRule {
            dims,
            shifts,
            block: rule.block,
        })
    }

    /// [`tuple_offset`] of each `K`-tuple of `values` into `offsets`, in
    /// groups whose bounds are checked once, after the group: the tuple
    /// loop has no exit to keep it from running several tuples at once
    /// (GatherND of 4M pairs into [4096, 4096], two threads: resolving
    /// them took 40% of the call in the component loop). `Ok` when every
    /// tuple is in range, each of `offsets` then written (`values` holds
    /// a tuple for each); `Err` otherwise, the slots then written or not.
    fn resolve(
        &self,
        values: &[impl IndexElement],
        offsets: &mut [MaybeUninit<usize>],
    ) -> Result<(), ()> {
        let groups = offsets
            .chunks_mut(TUPLES_PER_CHECK)
            .zip(values.chunks(TUPLES_PER_CHECK * K));
        for (offsets, values) in groups {
            let mut out_of_range = false;
            for (slot, tuple) in offsets.iter_mut().zip(values.chunks_exact(K)) {
                let mut position = 0usize;
                let components = tuple.iter().zip(&self.dims).zip(&self.shifts);
                for ((&v, &dim), &shift) in components {
                    let p = position_shifted(v.to_i64_or_max(), shift);
                    out_of_range |= p >= dim;
                    position = position.wrapping_mul(dim).wrapping_add(p);
                }
                slot.write(position.wrapping_mul(self.block));
            }
            if out_of_range {
                return Err(());
            }
        }
        Ok(())
    }
}

/// [`resolve_tuples`] of at most [`Positions::INLINE`] non-empty tuples, on
/// this thread and into an inline list: for a small call the allocation
/// and the task split cost more than the tuples (GatherND of 4 pairs).
fn resolve_few_tuples<I: IndexElement>(
    indices: TypedView<'_, I>,
    rule: &TupleRule<'_>,
) -> Result<Positions> {
    let k = rule.dims.len();
    let mut inline = [0; Positions::INLINE];
    let tuples = indices.data().chunks_exact(k);
    let len = tuples.len();
    for (t, (slot, tuple)) in inline.iter_mut().zip(tuples).enumerate() {
        // Tuples in order, components in order: the first bad component
        // met is the first in row-major order.
        *slot = tuple_offset(tuple, rule).map_err(|j| bad_component(indices, rule, t, j))?;
    }
    Ok(Positions::Inline {
        len,
        values: inline,
    })
}

/// The error for component `j` of tuple `t`, out of range for its axis:
/// its value, its position in `indices`, and the axis it addresses.
fn bad_component<I: IndexElement>(
    indices: TypedView<'_, I>,
    rule: &TupleRule<'_>,
    t: usize,
    j: usize,
) -> Error {
    let k = rule.dims.len();
    let component = AxisRule {
        axis: rule.first_axis + j,
        size: rule.dims[j],
        negative_allowed: rule.negative_allowed,
    };
    component.out_of_range(
        indices.data()[t * k + j].to_i128(),
        unravel(t * k + j, indices.shape()),
    )
}

/// The element offset of one tuple, or the position of its first component
/// out of range. Each component is read as `i64` and placed with one
/// unsigned compare, as the fused kernels do ([`position_shifted`]), and
/// the tuple's position among `dims` is built by Horner's rule, so the
/// rule borrows data's dims and keeps no strides (`i128` arithmetic and a
/// plan of inline dims and strides, moved by `memcpy`, had cost GatherND
/// of 4 pairs into 8x8 1785 instructions a call, now 1429; ScatterND 1747,
/// now 1420).
#[inline]
fn tuple_offset<I: IndexElement>(
    tuple: &[I],
    rule: &TupleRule<'_>,
) -> std::result::Result<usize, usize> {
    // All ones where negatives are accepted: each component's shift is then
    // its size, else 0 (negatives stay out of range).
    let negatives = -i64::from(rule.negative_allowed);
    let mut position = 0usize;
    for (j, (&v, &size)) in tuple.iter().zip(rule.dims).enumerate() {
        let p = match i64::try_from(size) {
            Ok(shift) => position_shifted(v.to_i64_or_max(), shift & negatives),
            // A dim past i64::MAX, of an empty tensor: exact wide arithmetic.
            Err(_) => AxisRule {
                axis: j,
                size,
                negative_allowed: rule.negative_allowed,
            }
            .resolve(v.to_i128())
            .unwrap_or(usize::MAX),
        };
        if p >= size {
            return Err(j);
        }
        // Below the product of `dims`, which times `block` is at most the
        // data's length; wrapping only where `block` is 0 and the product
        // is then never used (a product over 2^64 of dims before a 0).
        position = position.wrapping_mul(size).wrapping_add(p);
    }
    Ok(position.wrapping_mul(rule.block))
}

/// Dynamic form of [`resolve_tuples`].
pub(crate) fn resolve_tensor_tuples(
    indices: TensorView<'_>,
    rule: &TupleRule,
    context: &str,
) -> Result<Positions> {
    with_index_view!(indices, context, v => resolve_tuples(v, rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the inline count, tuples of every width resolve on the heap
    /// into written offsets (no slot left as it was), and a bad component
    /// anywhere is named as the first in row-major order, on one task and
    /// (past 256 KiB of indices, not under Miri) on several.
    #[test]
    fn many_tuples_resolve_into_every_slot_or_name_the_first_bad_component() {
        let dims = [3usize, 4, 5, 2];
        let n = if cfg!(miri) {
            2 * TUPLES_PER_CHECK + 3
        } else {
            (parallel::PARALLEL_MIN_BYTES / 8).div_ceil(2) + 3
        };
        for k in 1..=4 {
            let rule = TupleRule {
                dims: &dims[..k],
                block: dims[k..].iter().product(),
                first_axis: 0,
                negative_allowed: true,
            };
            let values: Vec<i64> = (0..n * k)
                .map(|e| {
                    let dim = dims[e % k] as i64;
                    (e as i64 * 5) % (2 * dim) - dim
                })
                .collect();
            let shape = [n, k];
            let view = TypedView::new(&shape, &values).unwrap();
            let expected: Vec<usize> = values
                .chunks_exact(k)
                .map(|tuple| tuple_offset(tuple, &rule).unwrap())
                .collect();
            // Miri runs the small case on the calling thread (it reports
            // crossbeam-epoch, under a new rayon pool, as undefined).
            let threads: &[usize] = if cfg!(miri) { &[] } else { &[1, 2] };
            let pools = threads.iter().map(|&threads| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads);
                Some(pool.build().unwrap())
            });
            for pool in std::iter::once(None).chain(pools) {
                let run = |view| match &pool {
                    Some(pool) => pool.install(|| resolve_tuples(view, &rule)),
                    None => resolve_tuples(view, &rule),
                };
                let resolved = run(view).unwrap();
                assert_eq!(&resolved[..], &expected[..], "{k} components");
                let mut bad = values.clone();
                bad[(n - 1) * k] = 50;
                bad[(TUPLES_PER_CHECK + 1) * k + k - 1] = -60;
                let view = TypedView::new(&shape, &bad).unwrap();
                let err = run(view).unwrap_err();
                assert!(
                    matches!(&err, Error::IndexOutOfRange { value: -60, position, .. }
                        if position == &[TUPLES_PER_CHECK + 1, k - 1]),
                    "{k} components: {err:?}"
                );
            }
        }
    }
}
