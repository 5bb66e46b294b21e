//! ScatterND's kernels into a buffer: a fresh overwrite streamed as a
//! gather of slices, a reduction into fresh slots, and every tuple's slice
//! combined in place.

use std::mem::MaybeUninit;

use super::slices::{combine_slices, scatter_slices, SliceTuples};
use crate::dtype::Element;
use crate::error::Result;
use crate::mem::measured_stores::Writer;
use crate::mem::uninit;
use crate::reduction::{Combine, CombineKernel, Overwrite, Reduction};

/// A fresh overwrite's output as a gather of slices by `tuples`, or
/// `None` when its memory cannot be had as bytes.
pub(super) fn overwrite_streamed<T: Element>(
    tuples: &SliceTuples,
    data: &[T],
    updates: &[T],
    block: usize,
) -> Option<Vec<T>> {
    let write = |slots: &mut [MaybeUninit<T>]| {
        let dst = uninit::slot_bytes(slots).ok_or(())?;
        tuples.overwrite(dst, data, updates, block);
        Ok(())
    };
    // SAFETY: `SliceTuples::overwrite` stores every byte of `dst`, all the
    // slots' bytes, before `write` returns `Ok`.
    #[allow(unsafe_code)]
    let written = unsafe { uninit::new_vec_of::<T, ()>(data.len(), write) };
    written?.ok()
}

/// The reduction kernel, for [`crate::reduction::Reduce::with_combine`] to run with the
/// dtype's combine rule.
pub(super) struct ApplySlices<'a, T> {
    pub(super) source: &'a [T],
    pub(super) out: &'a mut [MaybeUninit<T>],
    pub(super) offsets: &'a [usize],
    pub(super) upd: &'a [T],
    pub(super) block: usize,
}

impl<T: Element> CombineKernel<T> for ApplySlices<'_, T> {
    type Output = ();

    fn run<C: Combine<T>>(self) {
        let out_bytes = std::mem::size_of_val(self.out);
        let (tuples, stores) =
            SliceTuples::plan::<T>(Writer::NdFolds, out_bytes, self.offsets, self.block);
        // The plan is only made for plain elements, whose slots are bytes.
        let streamed = tuples.and_then(|tuples| {
            let dst = uninit::slot_bytes(self.out)?;
            tuples.fold::<T, C, _>(dst, self.source, self.upd, self.block);
            Some(())
        });
        if streamed.is_none() {
            scatter_slices::<T, MaybeUninit<T>, C>(
                self.source,
                self.out,
                self.offsets,
                self.upd,
                self.block,
            );
        }
        stores.done(out_bytes);
    }
}

/// Every tuple's slice of `updates` combined into `out` at its offset, in
/// row-major order, on the calling thread.
pub(super) fn apply_in_place<T: Element>(
    reduction: Reduction,
    out: &mut [T],
    offsets: &[usize],
    updates: &[T],
    block: usize,
) -> Result<()> {
    match reduction {
        Reduction::None => {
            combine_slices::<T::Word, Overwrite>(
                T::as_words_mut(out),
                offsets,
                T::as_words(updates),
                block,
            );
            Ok(())
        }
        reduction => T::with_combine(
            reduction,
            CombineSlices {
                out,
                offsets,
                updates,
                block,
            },
        ),
    }
}

/// [`combine_slices`] as a kernel for [`crate::reduction::Reduce::with_combine`].
struct CombineSlices<'a, T> {
    out: &'a mut [T],
    offsets: &'a [usize],
    updates: &'a [T],
    block: usize,
}

impl<T: Element> CombineKernel<T> for CombineSlices<'_, T> {
    type Output = ();

    fn run<C: Combine<T>>(self) {
        combine_slices::<T, C>(self.out, self.offsets, self.updates, self.block)
    }
}
