//! Index element types and their resolution to `usize` offsets.
//!
//! Every op canonicalizes its indices here, once, before it writes anything:
//! each value is checked against its axis and turned into a non-negative
//! `usize`, so kernels are compiled per data word only and never branch on sign.

use std::fmt;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::mem::parallel;
use crate::mem::scratch::{scratch, Scratch};
use crate::shape::{same_dims, strides, unravel, RowBases};
use crate::tensor::TypedView;
use crate::tensor_view::TensorView;

mod chunks;
pub(crate) use chunks::{InPlace, IndexSource, ReadAhead, ReadIndices, WideIndices, WIDEN_CHUNK};
mod tuples;
pub(crate) use tuples::{resolve_tensor_tuples, resolve_tuples, TupleRule};

mod sealed {
    pub trait Sealed {}
}

/// An integer type that may hold indices: `i8`..`i64`, `u8`..`u64` (spec §2.3).
pub trait IndexElement: Copy + fmt::Debug + Send + Sync + 'static + sealed::Sealed {
    /// The dtype of this index type.
    const DTYPE: DType;
    /// The value, exactly (an unsigned value above `i64::MAX` stays positive).
    fn to_i128(self) -> i128;

    /// The slice itself when `Self` is `i64`, so kernels need no copy.
    #[doc(hidden)]
    fn as_i64_slice(values: &[Self]) -> Option<&[i64]>;

    /// The slice itself when `Self` is `i32`.
    #[doc(hidden)]
    fn as_i32_slice(values: &[Self]) -> Option<&[i32]>;

    /// The slice itself when `Self` is `u16`.
    #[doc(hidden)]
    fn as_u16_slice(values: &[Self]) -> Option<&[u16]>;

    /// The value as `i64`, or `i64::MAX` for a `u64` above it: a plain
    /// widening for every other type, which loops over slices vectorize.
    #[doc(hidden)]
    fn to_i64_or_max(self) -> i64;
}

macro_rules! index_element {
    ($($ty:ty => $dtype:ident),*) => {$(
        impl sealed::Sealed for $ty {}
        impl IndexElement for $ty {
            const DTYPE: DType = DType::$dtype;
            #[inline]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn to_i64_or_max(self) -> i64 {
                i64::try_from(self).unwrap_or(i64::MAX)
            }
            fn as_i64_slice(values: &[Self]) -> Option<&[i64]> {
                if Self::DTYPE == DType::I64 {
                    bytemuck::try_cast_slice(values).ok()
                } else {
                    None
                }
            }
            fn as_i32_slice(values: &[Self]) -> Option<&[i32]> {
                if Self::DTYPE == DType::I32 {
                    bytemuck::try_cast_slice(values).ok()
                } else {
                    None
                }
            }
            fn as_u16_slice(values: &[Self]) -> Option<&[u16]> {
                if Self::DTYPE == DType::U16 {
                    bytemuck::try_cast_slice(values).ok()
                } else {
                    None
                }
            }
        }
    )*};
}
index_element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

/// An index type the fused scatter kernels are compiled for, read as `i64`
/// one value at a time: `i64`, `i32` (ONNX's other index type, and what
/// `i8`, `i16` and `u8` widen to) and `u16` (numpy's compact index type
/// for axes up to 65536). A whole-tensor `i64` copy of `i32` indices had
/// cost a 16 MiB float32 scatter-add along the last axis 1.4 ms of its 4.4
/// (Zen 5, one thread), as much again on two; the `i32` copy of `u16`
/// indices still cost 0.45 ms on one thread and 0.7 on two (an overwrite
/// of the same size, 3.54 ms with `i32` indices, 3.98 with `u16`). Each
/// type costs a copy of every kernel: `u16` made the library 26% larger.
pub(crate) trait KernelIndex: Copy + Send + Sync + 'static {
    fn wide(self) -> i64;
}

impl KernelIndex for i64 {
    #[inline(always)]
    fn wide(self) -> i64 {
        self
    }
}

impl KernelIndex for u16 {
    #[inline(always)]
    fn wide(self) -> i64 {
        i64::from(self)
    }
}

impl KernelIndex for i32 {
    #[inline(always)]
    fn wide(self) -> i64 {
        i64::from(self)
    }
}

/// Indices as the fused scatter kernels read them: `i64`, `i32` and `u16`
/// borrowed, `i8`, `i16` and `u8` copied once into `i32`, `u32` and `u64`
/// into `i64` (see [`canonical_indices`]).
pub(crate) enum KernelIndices<'a> {
    I64(std::borrow::Cow<'a, [i64]>),
    I32(std::borrow::Cow<'a, [i32]>),
    U16(&'a [u16]),
}

/// [`KernelIndices`] of `values`.
pub(crate) fn kernel_indices<I: IndexElement>(values: &[I]) -> Result<KernelIndices<'_>> {
    use std::borrow::Cow;
    if let Some(same) = I::as_i32_slice(values) {
        return Ok(KernelIndices::I32(Cow::Borrowed(same)));
    }
    if let Some(same) = I::as_u16_slice(values) {
        return Ok(KernelIndices::U16(same));
    }
    let fits_i32 = matches!(I::DTYPE, DType::I8 | DType::I16 | DType::U8);
    if !fits_i32 {
        return canonical_indices(values).map(KernelIndices::I64);
    }
    // Every value of these types fits in `i32`.
    let narrow = converted(values, DType::I32, |&v| canonical(v) as i32)?;
    Ok(KernelIndices::I32(Cow::Owned(narrow)))
}

/// `f` of each of `values` in a new vector of `dtype`'s elements (named in
/// the error when the memory is refused), on the pool for large inputs.
fn converted<I: IndexElement, X: Send>(
    values: &[I],
    dtype: DType,
    f: impl Fn(&I) -> X + Sync + Send,
) -> Result<Vec<X>> {
    let mut out = Vec::new();
    out.try_reserve_exact(values.len())
        .map_err(|_| Error::Allocation {
            elements: values.len(),
            dtype,
        })?;
    parallel::map_into(values, &mut out, f);
    Ok(out)
}

/// Indices as `i64`, the one index type the large fused kernels are compiled
/// for (compiling them per index type multiplied build time eightfold).
/// `i64` data is borrowed; other types are copied once. A `u64` above
/// `i64::MAX` becomes `i64::MAX`, out of range for every axis, so it still
/// fails; errors are then reported from the original values.
pub(crate) fn canonical_indices<I: IndexElement>(
    values: &[I],
) -> Result<std::borrow::Cow<'_, [i64]>> {
    if let Some(same) = I::as_i64_slice(values) {
        return Ok(std::borrow::Cow::Borrowed(same));
    }
    let wide = converted(values, DType::I64, |&v| canonical(v))?;
    Ok(std::borrow::Cow::Owned(wide))
}

/// Most indices [`IndexSource::with_all_small`] takes: the small-call
/// paths' limit, 2 KiB of `i64` on the stack.
pub(crate) const SMALL_INDICES: usize = 256;

/// Whether an elements op's call of `outputs` output elements and `indices`
/// indices takes its small-call path ([`try_for_each_target`]): both at
/// most [`SMALL_INDICES`], and no tuning knob forced (a forced knob sends
/// small calls to the general kernels, which is how the tests reach those
/// on small shapes).
pub(crate) fn takes_small_path(outputs: usize, indices: usize) -> bool {
    outputs <= SMALL_INDICES && indices <= SMALL_INDICES && crate::mem::knobs::auto_in_force()
}

/// The shape most small calls have: along the last axis, with indices that
/// match data on every other dim (`take_along_axis(a, i, -1)`), so index
/// row `r` reads data row `r`. `Some((data_row, row_len))`, the two rows'
/// lengths, both non-zero, when the call has it: the small paths then walk
/// row by row, each index's range check being its data row's bounds check
/// (an 8x4 GatherElements: 18 instructions an element through
/// [`try_for_each_target`], whose targets are checked against the whole
/// output and data).
pub(crate) fn matching_last_axis_rows(
    data_shape: &[usize],
    indices_shape: &[usize],
    rule: &AxisRule,
) -> Option<(usize, usize)> {
    let last = indices_shape.len().checked_sub(1)?;
    let (data_row, row_len) = (*data_shape.get(last)?, indices_shape[last]);
    let matching = rule.axis == last && same_dims(&indices_shape[..last], &data_shape[..last]);
    (matching && data_row == rule.size && data_row > 0 && row_len > 0)
        .then_some((data_row, row_len))
}

/// The flat position of the first of `indices` that names no position in
/// a row of `size` (shifted by `negative_shift`), for the small last-axis
/// walks, which check each index by its row's bounds and on a miss look
/// for it again rather than keep its position in the loop.
#[cold]
pub(crate) fn first_beyond<X: KernelIndex>(
    indices: &[X],
    negative_shift: i64,
    size: usize,
) -> usize {
    indices
        .iter()
        .position(|v| position_shifted(v.wide(), negative_shift) >= size)
        .unwrap_or(indices.len())
}

/// The small-call walk of the elements ops: `f(k, target)` for each index
/// in row-major order, `k` its flat position and `target` the flat position
/// in data (or a scatter's output) of the element it names; `Err(k)` at the
/// first index out of range. One walk, with no row, tile, slab or task
/// planning, which on an 8x4 call cost more than the walk itself. The
/// indices' shape must be checked against data's, as for [`RowBases`].
pub(crate) fn try_for_each_target<X: KernelIndex>(
    data_shape: &[usize],
    indices_shape: &[usize],
    rule: &AxisRule,
    indices: &[X],
    f: impl FnMut(usize, usize),
) -> std::result::Result<(), usize> {
    let last = indices_shape.len() - 1;
    let row_len = indices_shape[last];
    if rule.axis == last && same_dims(&indices_shape[..last], &data_shape[..last]) {
        // Along the last axis with indices matching data on every other dim
        // (`take_along_axis(a, i, -1)`), index row `r` reads data row `r`:
        // its base is a product, where the leading dims' walk cost more than
        // the indices of an 8x4 call.
        let data_row = data_shape[last];
        let bases = (0..).map(|row| row * data_row);
        return walk_rows(bases, row_len, (0, 1), rule, indices, f);
    }
    let axis_stride = strides(data_shape)[rule.axis];
    // Along an outer axis, element k of a row sits k words past the row's base.
    let column_step = usize::from(rule.axis != last);
    let bases = RowBases::new(indices_shape, data_shape, rule.axis);
    walk_rows(bases, row_len, (column_step, axis_stride), rule, indices, f)
}

/// [`try_for_each_target`]'s loop: index row `r` (of `row_len`) starts at
/// data position `bases[r]`, and its element `c` with index value `i`
/// names `base + c * column_step + i * axis_stride`.
#[inline(always)]
fn walk_rows<X: KernelIndex>(
    bases: impl Iterator<Item = usize>,
    row_len: usize,
    (column_step, axis_stride): (usize, usize),
    rule: &AxisRule,
    indices: &[X],
    mut f: impl FnMut(usize, usize),
) -> std::result::Result<(), usize> {
    if row_len == 0 {
        return Ok(());
    }
    let shift = rule.negative_shift();
    for (row, (row_indices, base)) in indices.chunks_exact(row_len).zip(bases).enumerate() {
        let first = row * row_len;
        for (column, &v) in row_indices.iter().enumerate() {
            let at = position_shifted(v.wide(), shift);
            if at >= rule.size {
                return Err(first + column);
            }
            f(
                first + column,
                base + column * column_step + at * axis_stride,
            );
        }
    }
    Ok(())
}

/// The `i64` that stands for `v` in the fused kernels: itself, or
/// `i64::MAX` (out of range for every axis) for a `u64` above it.
#[inline(always)]
fn canonical<I: IndexElement>(v: I) -> i64 {
    v.to_i64_or_max()
}

/// [`AxisRule::position`] with the rule's negative shift already read, for
/// loops where the rule's flag would not stay in a register.
#[inline(always)]
pub(crate) fn position_shifted(v: i64, negative_shift: i64) -> usize {
    // Sizes come from allocated slices, so they fit in i64. The shift is
    // loop-invariant and the sign mask branch-free: the fused loops pay
    // one bounds compare per element and no sign branch.
    let wrapped = v.wrapping_add((v >> 63) & negative_shift);
    // A negative result is out of range: as a 64-bit usize it is at least
    // 2^63, above any size. Narrower targets saturate instead.
    #[cfg(target_pointer_width = "64")]
    return wrapped as usize;
    #[cfg(not(target_pointer_width = "64"))]
    return usize::try_from(wrapped).unwrap_or(usize::MAX);
}

/// How index values along one data axis are checked and resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AxisRule {
    /// Normalized data axis, for error messages.
    pub axis: usize,
    /// Size of that axis: valid values are `[-size, size)` or `[0, size)`.
    pub size: usize,
    /// Whether `[-size, -1]` is accepted (spec §2.2).
    pub negative_allowed: bool,
}

impl AxisRule {
    /// The position along the axis that the canonical index `v` names, or a
    /// value at least `size` when it names none: one comparison per element
    /// for the fused kernels instead of [`AxisRule::resolve`]'s wide
    /// arithmetic.
    #[inline(always)]
    pub(crate) fn position(&self, v: i64) -> usize {
        position_shifted(v, self.negative_shift())
    }

    /// What a negative index is shifted by: the axis size where negatives
    /// are accepted, else 0 (so every negative stays out of range).
    #[inline(always)]
    pub(crate) fn negative_shift(&self) -> i64 {
        // Sizes come from allocated slices, so they fit in i64.
        if self.negative_allowed {
            self.size as i64
        } else {
            0
        }
    }

    /// `idx(v)` of spec §1, or `None` when `v` is out of range.
    #[inline]
    pub(crate) fn resolve(&self, value: i128) -> Option<usize> {
        let size = self.size as i128;
        let shifted = if value < 0 && self.negative_allowed {
            value + size
        } else {
            value
        };
        (0..size).contains(&shifted).then_some(shifted as usize)
    }

    pub(crate) fn out_of_range(&self, value: i128, position: Vec<usize>) -> Error {
        Error::IndexOutOfRange {
            value,
            position,
            axis: self.axis,
            axis_size: self.size,
            negative_allowed: self.negative_allowed,
        }
    }
}

/// Check and resolve every index against one axis, in row-major order; the
/// first bad value is reported with its coordinates in `indices`.
pub(crate) fn resolve_along_axis<I: IndexElement>(
    indices: TypedView<'_, I>,
    rule: AxisRule,
) -> Result<Positions> {
    let values = indices.data();
    let bad = |flat: usize, v: I| rule.out_of_range(v.to_i128(), unravel(flat, indices.shape()));
    // `position`'s i64 arithmetic holds for axes up to i64::MAX; only an
    // empty tensor has a longer one, resolved exactly in i128.
    let exact = rule.size > i64::MAX as usize;
    if values.len() <= Positions::INLINE || exact {
        let mut inline = [0; Positions::INLINE];
        let mut resolved = Scratch::default();
        let slots = match values.len() <= Positions::INLINE {
            true => &mut inline[..values.len()],
            false => {
                resolved = scratch(values.len(), DType::U64)?;
                resolved.resize(values.len(), 0);
                &mut resolved[..]
            }
        };
        if exact {
            for (flat, (slot, &v)) in slots.iter_mut().zip(values).enumerate() {
                *slot = rule.resolve(v.to_i128()).ok_or_else(|| bad(flat, v))?;
            }
        } else {
            // One compare each, as the large path's, not `resolve`'s i128
            // steps (178 instructions for EmbeddingBag's 8 indices).
            let shift = rule.negative_shift();
            for (slot, &v) in slots.iter_mut().zip(values) {
                *slot = position_shifted(canonical(v), shift);
            }
            if let Some(flat) = slots.iter().position(|&p| p >= rule.size) {
                return Err(bad(flat, values[flat]));
            }
        }
        return Ok(match values.len() <= Positions::INLINE {
            true => Positions::Inline {
                len: values.len(),
                values: inline,
            },
            false => Positions::Heap(resolved),
        });
    }
    let mut resolved = scratch(values.len(), DType::U64)?;
    // Two branch-free passes the compiler vectorizes, where checking each
    // value as it was pushed did not vectorize (W1 on two threads: 3.0% of
    // the call's profile samples before, 0.8% after). Only when some value is
    // out of range does a third pass find the first.
    resolved.extend(values.iter().map(|&v| rule.position(canonical(v))));
    let out_of_range = |p: &usize| *p >= rule.size;
    if resolved.iter().filter(|p| out_of_range(p)).count() > 0 {
        if let Some(flat) = resolved.iter().position(out_of_range) {
            return Err(bad(flat, values[flat]));
        }
    }
    Ok(Positions::Heap(resolved))
}

/// Positions resolved along an axis by [`resolve_along_axis`], or tuple
/// offsets by [`resolve_tuples`]. A few are kept inline, so that a small
/// call (W9: 4 indices) allocates nothing for them.
#[derive(Debug)]
pub(crate) enum Positions {
    Inline {
        len: usize,
        values: [usize; Positions::INLINE],
    },
    /// The thread's kept list ([`scratch`]): a loop of calls reuses it.
    Heap(Scratch<usize>),
}

impl Positions {
    const INLINE: usize = 16;
}

impl std::ops::Deref for Positions {
    type Target = [usize];

    fn deref(&self) -> &[usize] {
        match self {
            // Built only with len <= INLINE.
            Positions::Inline { len, values } => &values[..*len],
            Positions::Heap(values) => values,
        }
    }
}

/// The error for indices in which a fused check-and-copy kernel met a bad
/// value at flat position `found`: the first bad value in row-major order,
/// which precedes `found` when tasks ran out of order.
pub(crate) fn first_bad_index<I: IndexElement>(
    indices: TypedView<'_, I>,
    rule: AxisRule,
    found: usize,
) -> Error {
    let values = indices.data();
    let first = values[..found]
        .iter()
        .position(|v| rule.resolve(v.to_i128()).is_none())
        .unwrap_or(found);
    rule.out_of_range(values[first].to_i128(), unravel(first, indices.shape()))
}

/// Run `$body` with `$v` bound to a typed view of `$tensor`'s indices, or
/// return a `BadDType` error if it is not an integer tensor.
macro_rules! with_index_view {
    ($tensor:expr, $context:expr, $v:ident => $body:expr) => {
        $crate::index::with_index_view!($tensor, $context, "indices", $v => $body)
    };
    ($tensor:expr, $context:expr, $what:literal, $v:ident => $body:expr) => {
        match $tensor {
            $crate::TensorView::I8($v) => $body,
            $crate::TensorView::I16($v) => $body,
            $crate::TensorView::I32($v) => $body,
            $crate::TensorView::I64($v) => $body,
            $crate::TensorView::U8($v) => $body,
            $crate::TensorView::U16($v) => $body,
            $crate::TensorView::U32($v) => $body,
            $crate::TensorView::U64($v) => $body,
            other => return Err($crate::index::not_an_index_type_of($what, other.dtype(), $context)),
        }
    };
}
pub(crate) use with_index_view;

pub(crate) fn not_an_index_type(dtype: DType, context: &str) -> Error {
    not_an_index_type_of("indices", dtype, context)
}

/// The error for `what` (an index tensor) of a dtype that holds no indices.
pub(crate) fn not_an_index_type_of(what: &'static str, dtype: DType, context: &str) -> Error {
    Error::BadDType {
        what,
        dtype,
        context: context.to_string(),
        accepted: DType::INDEX_TYPES.to_vec(),
    }
}

/// Dynamic form of [`resolve_along_axis`].
pub(crate) fn resolve_tensor_along_axis(
    indices: TensorView<'_>,
    rule: AxisRule,
    context: &str,
) -> Result<Positions> {
    with_index_view!(indices, context, v => resolve_along_axis(v, rule))
}

#[cfg(test)]
mod tests;
