//! ScatterElements' execution: the output written fresh or into a caller's
//! buffer, through the overwrite kernel or a dtype's reduction
//! ([`super::rows`] and [`super::columns`] hold the kernels themselves).

use std::mem::MaybeUninit;

use super::{scatter, Geometry, ScatterElements, ScatterPlan};
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::index::{first_bad_index, kernel_indices, IndexElement, KernelIndex, KernelIndices};
use crate::mem::uninit;
use crate::ops::alloc_output;
use crate::reduction::{Combine, CombineKernel, Overwrite, Reduction};
use crate::tensor::TypedView;

impl ScatterElements {
    /// `out = data` with every update applied; `out` has data's length.
    pub(super) fn fill<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
        plan: &ScatterPlan,
        out: &mut [T],
    ) -> Result<()> {
        let shape = indices.shape();
        let applied = match kernel_indices(indices.data())? {
            KernelIndices::I64(idx) => self.apply(data, shape, &idx, updates, plan, out)?,
            KernelIndices::I32(idx) => self.apply(data, shape, &idx, updates, plan, out)?,
            KernelIndices::U16(idx) => self.apply(data, shape, idx, updates, plan, out)?,
        };
        applied.map_err(|found| first_bad_index(indices, plan.rule, found))
    }

    /// A new output holding data with every update applied, never zeroed
    /// first: the kernel stores data's values into the fresh memory itself
    /// (zeroing cost W6, a 64 MiB scatter, a one-thread `memset` per call on
    /// top of the copy; a 16 MiB float32 add along the last axis, 8% of its
    /// time in `memset` and as much again in the kernel's page clearing).
    pub(super) fn fresh<T: Element, I: IndexElement>(
        &self,
        data: TypedView<'_, T>,
        indices: TypedView<'_, I>,
        updates: TypedView<'_, T>,
        plan: &ScatterPlan,
    ) -> Result<Vec<T>> {
        let shape = indices.shape();
        let made = match kernel_indices(indices.data())? {
            KernelIndices::I64(idx) => self.fresh_with(data, shape, &idx, updates, plan),
            KernelIndices::I32(idx) => self.fresh_with(data, shape, &idx, updates, plan),
            KernelIndices::U16(idx) => self.fresh_with(data, shape, idx, updates, plan),
        };
        made.map_err(|stop| match stop {
            Stop::BadIndex(found) => first_bad_index(indices, plan.rule, found),
            Stop::Error(error) => error,
        })
    }

    /// [`ScatterElements::fresh`] on the kernels' indices; a bad index is
    /// returned as its flat position.
    fn fresh_with<T: Element, X: KernelIndex>(
        &self,
        data: TypedView<'_, T>,
        indices_shape: &[usize],
        idx: &[X],
        updates: TypedView<'_, T>,
        plan: &ScatterPlan,
    ) -> std::result::Result<Vec<T>, Stop> {
        let len = data.len();
        let g = Geometry::new(data.shape(), indices_shape, &plan.rule);
        let (words, upd) = (T::as_words(data.data()), T::as_words(updates.data()));
        let overwrite = |out: &mut [MaybeUninit<T::Word>]| {
            scatter::<_, _, Overwrite, X>(words, out, &g, idx, upd)
        };
        let reduce = |out: &mut [MaybeUninit<T>]| {
            Stop::from_kernel(self.reduce(data, &g, idx, updates, out))
        };
        // SAFETY: `scatter` returns `Ok` only after writing every slot: its
        // tasks own disjoint parts of the output that cover it, and each
        // stores data's values into all of its part (`Slot::init_from`, or
        // a packed strip's `Slot::copy_from` per tile) before returning
        // `Ok`. `reduce` returns `Ok` only when `scatter` did.
        #[allow(unsafe_code)]
        let written = match self.reduction {
            Reduction::None => unsafe { uninit::new_vec_written::<T, usize>(len, overwrite) }
                .map(|r| r.map_err(Stop::BadIndex)),
            _ => unsafe { uninit::new_vec_of::<T, Stop>(len, reduce) },
        };
        match written {
            Some(result) => result,
            None => {
                let mut out = alloc_output(len).map_err(Stop::Error)?;
                Stop::from_kernel(self.apply(data, indices_shape, idx, updates, plan, &mut out))
                    .map(|()| out)
            }
        }
    }

    /// The kernel over canonical indices into an initialised `out`;
    /// `Ok(Err(p))`: the index at flat position `p` is out of range; `Err`:
    /// the dtype does not define the reduction.
    fn apply<T: Element, X: KernelIndex>(
        &self,
        data: TypedView<'_, T>,
        indices_shape: &[usize],
        idx: &[X],
        updates: TypedView<'_, T>,
        plan: &ScatterPlan,
        out: &mut [T],
    ) -> Result<std::result::Result<(), usize>> {
        let g = Geometry::new(data.shape(), indices_shape, &plan.rule);
        let (from, upd) = (data.data(), updates.data());
        match self.reduction {
            // Plain overwrite moves words: f32/i32/u32 share one loop.
            Reduction::None => Ok(scatter::<T::Word, T::Word, Overwrite, X>(
                T::as_words(from),
                T::as_words_mut(out),
                &g,
                idx,
                T::as_words(upd),
            )),
            _ => {
                // SAFETY: the reduction kernel stores through `Slot` only.
                #[allow(unsafe_code)]
                let slots = unsafe { uninit::as_slots(out) };
                self.reduce(data, &g, idx, updates, slots)
            }
        }
    }

    /// The reduction kernel into `out`, whose slots it all writes when it
    /// returns `Ok(Ok(()))`; `Ok(Err(p))`: the index at flat position `p`
    /// is out of range; `Err`: the dtype does not define the reduction.
    fn reduce<T: Element, X: KernelIndex>(
        &self,
        data: TypedView<'_, T>,
        g: &Geometry<'_>,
        idx: &[X],
        updates: TypedView<'_, T>,
        out: &mut [MaybeUninit<T>],
    ) -> Result<std::result::Result<(), usize>> {
        T::with_combine(
            self.reduction,
            ApplyUpdates {
                from: data.data(),
                out,
                geometry: g,
                idx,
                upd: updates.data(),
            },
        )
    }
}

/// Why a fresh scatter stopped: a bad index at a flat position, or an error.
enum Stop {
    BadIndex(usize),
    Error(Error),
}

impl Stop {
    /// A kernel's result (`Ok(Err(p))`: a bad index at flat position `p`)
    /// as a reason to stop, if any.
    fn from_kernel(
        applied: Result<std::result::Result<(), usize>>,
    ) -> std::result::Result<(), Stop> {
        match applied {
            Ok(Ok(())) => Ok(()),
            Ok(Err(found)) => Err(Stop::BadIndex(found)),
            Err(error) => Err(Stop::Error(error)),
        }
    }
}

/// The reduction kernel, for [`crate::reduction::Reduce::with_combine`] to run with the
/// dtype's combine rule.
struct ApplyUpdates<'a, T, X> {
    from: &'a [T],
    out: &'a mut [MaybeUninit<T>],
    geometry: &'a Geometry<'a>,
    idx: &'a [X],
    upd: &'a [T],
}

impl<T: Element, X: KernelIndex> CombineKernel<T> for ApplyUpdates<'_, T, X> {
    /// `Err(p)`: the index at flat position `p` is out of range.
    type Output = std::result::Result<(), usize>;

    fn run<C: Combine<T>>(self) -> Self::Output {
        scatter::<T, MaybeUninit<T>, C, X>(self.from, self.out, self.geometry, self.idx, self.upd)
    }
}
