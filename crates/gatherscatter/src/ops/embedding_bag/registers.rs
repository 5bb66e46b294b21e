//! EmbeddingBag's f32 sum with a bag's running sums in AVX2 registers:
//! x86-64 intrinsics behind one safe function, chosen at run time.
//!
//! The plain fold keeps a bag's sums in its output row and adds each
//! weight row into it, so every row costs a load and a store of the sums
//! beside its own loads. Holding up to 128 columns in sixteen registers
//! leaves only the row's loads; the row 16 entries on is asked for as each
//! row is added, a line every 64 bytes from its first. Bags are taken
//! [`GROUP`] at a time, so the loop over bags runs inside the AVX2 code
//! and costs no call per bag. On a 1M-row table with bags of 20 random
//! rows the fold takes 0.67–0.87 of the plain one's time for rows of 8 to
//! 256 f32s (docs/performance.md), so [`BagFold::Auto`] takes it wherever
//! it applies. Wider rows are folded in blocks of 128 columns, a pass over
//! each group of bags per block.
//!
//! The sums are the plain fold's to the bit, NaNs aside (Rust leaves a
//! computed NaN's bits unspecified; a NaN stays a NaN): each row is added
//! in bag order onto -0.0 (see `fold`), and a bag of one row copies it. Per-sample weights
//! and rows that are not a multiple of 8 columns keep the plain fold.
//! Under Miri the kernel runs only when the crate is built with
//! `-C target-feature=+avx2`, which CI does for this module's tests.
#![allow(unsafe_code)]

use std::any::TypeId;

use super::kernel::Bags;
use crate::mem::cpu::avx2_available;
use crate::tuning::BagFold;

/// Whether `bags` are folded by [`sum_bags`] under `choice` (`Auto` and
/// `Registers` alike): f32 rows of a multiple of 8 columns without
/// per-sample weights, on a CPU with AVX2.
pub(crate) fn chosen<T: 'static>(bags: &Bags<'_, T>, choice: BagFold) -> bool {
    choice != BagFold::Memory
        && TypeId::of::<T>() == TypeId::of::<f32>()
        && bags.per_sample_weights.is_none()
        && bags.dim.is_multiple_of(8)
        && avx2_available()
}

/// How many bags [`sum_bags`] takes at a time: their output rows (64 KiB
/// of 128 f32s) stay in cache for the caller's finish.
pub(crate) const GROUP: usize = 128;

/// Folds bags `first_bag..` of `bags` into `group` (their output rows, at
/// most [`GROUP`]) with f32 sums and sets `counts[k]` to how many members
/// bag `first_bag + k` has; a bag without members keeps its row as it
/// was. Returns `false`, writing nothing, unless `bags` can be folded in
/// registers (see [`chosen`]).
pub(crate) fn sum_bags<T: 'static>(
    bags: &Bags<'_, T>,
    first_bag: usize,
    group: &mut [T],
    counts: &mut [usize],
) -> bool {
    // The caller checked `chosen`; what the fold's soundness rests on (the
    // type, AVX2, the widths, the entries) `fold_as_f32` checks again.
    let n = counts.len();
    bags.per_sample_weights.is_none()
        && group.len() == n * bags.dim
        && first_bag + n < bags.bounds.len()
        && fold_as_f32(bags, &bags.bounds[first_bag..=first_bag + n], group, counts)
}

/// [`sum_bags`]'s fold, `false` unless `T` is `f32` and the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
fn fold_as_f32<T: 'static>(
    bags: &Bags<'_, T>,
    bounds: &[usize],
    group: &mut [T],
    counts: &mut [usize],
) -> bool {
    if TypeId::of::<T>() != TypeId::of::<f32>() || !avx2_available() {
        return false;
    }
    // SAFETY: `T` is `f32` (the `TypeId`s are equal), so the slices'
    // pointers and lengths describe f32s; `group` stays borrowed
    // exclusively while the new slice lives, and nothing else uses it.
    let (weight, out) = unsafe {
        (
            std::slice::from_raw_parts(bags.weight.as_ptr().cast::<f32>(), bags.weight.len()),
            std::slice::from_raw_parts_mut(group.as_mut_ptr().cast::<f32>(), group.len()),
        )
    };
    let Some(bags) = x86::Bags::new(weight, bags.dim, bags.entries, bounds, bags.padding) else {
        return false;
    };
    // SAFETY: AVX2 is available (checked above).
    unsafe { x86::sum_bags(&bags, out, counts) };
    true
}

/// No register fold off x86-64 (`chosen` is false there: no AVX2).
#[cfg(not(target_arch = "x86_64"))]
fn fold_as_f32<T: 'static>(_: &Bags<'_, T>, _: &[usize], _: &mut [T], _: &mut [usize]) -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Columns per pass: sixteen registers of eight f32s.
    const BLOCK: usize = 128;

    /// How many entries ahead the fold asks for a weight row.
    const ROWS_AHEAD: usize = 16;

    /// A group of bags, rows as f32: `weight` is `[rows, dim]`, bag `k`
    /// is `entries[bounds[k]..bounds[k + 1]]`, and the row of every entry
    /// in them ends within `weight` (so `fold` reads rows unchecked).
    pub(super) struct Bags<'a> {
        weight: &'a [f32],
        dim: usize,
        entries: &'a [usize],
        bounds: &'a [usize],
        padding: Option<usize>,
    }

    impl<'a> Bags<'a> {
        /// The group, or `None` unless `dim` is a multiple of 8 (not 0),
        /// `bounds` never decrease and the row of each entry they span
        /// ends within `weight`. A resolved call's entries always do: the
        /// largest entry checked once costs less than a check per row (and
        /// than the division a row count would take).
        pub(super) fn new(
            weight: &'a [f32],
            dim: usize,
            entries: &'a [usize],
            bounds: &'a [usize],
            padding: Option<usize>,
        ) -> Option<Bags<'a>> {
            let blocks = dim != 0 && dim.is_multiple_of(8);
            let ordered = bounds.windows(2).all(|w| w[0] <= w[1]);
            let spanned = entries.get(*bounds.first()?..*bounds.last()?)?;
            let within = match spanned.iter().max() {
                Some(&largest) => largest.checked_add(1)?.checked_mul(dim)? <= weight.len(),
                None => true,
            };
            (blocks && ordered && within).then_some(Bags {
                weight,
                dim,
                entries,
                bounds,
                padding,
            })
        }
    }

    /// The group's folds into `out` (`dim` per bag), block by block;
    /// `counts[k]` is how many members bag `k` has.
    ///
    /// # Safety
    /// AVX2 must be available.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_bags(bags: &Bags<'_>, out: &mut [f32], counts: &mut [usize]) {
        let mut first = 0;
        while first < bags.dim {
            let width = BLOCK.min(bags.dim - first);
            // One compiled fold per register count, so the loop over a
            // bag's rows holds no branch but the padding test.
            macro_rules! fold_in {
                ($($n:literal)*) => {
                    match width / 8 {
                        $($n => fold::<$n>(bags, first, out, counts),)*
                        _ => unreachable!("blocks are 8 to 128 columns, a multiple of 8"),
                    }
                };
            }
            fold_in!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
            first += width;
        }
    }

    /// Columns `first..first + 8 * N` of each bag's rows summed in `N`
    /// registers and stored into the bag's output row; `counts[k]` is set
    /// to bag `k`'s member count, and a bag of none is left as it was.
    ///
    /// The sums start at -0.0, which adding leaves every value as it is
    /// (`-0.0 + x` is `x` for zeros of either sign too) except a
    /// signalling NaN, which it quiets. So the sums are the plain fold's
    /// whenever a bag has two members or more, and a bag of one copies its
    /// row instead, signalling NaNs and all.
    #[target_feature(enable = "avx2")]
    fn fold<const N: usize>(bags: &Bags<'_>, first: usize, out: &mut [f32], counts: &mut [usize]) {
        let width = 8 * N;
        debug_assert!(first + width <= bags.dim);
        let padding = bags.padding.unwrap_or(usize::MAX);
        let lines = (width * 4).div_ceil(64);
        // Bags by number: `chunks_exact_mut` took a division for its length.
        for (k, count) in counts.iter_mut().enumerate() {
            let Some(acc) = out.get_mut(k * bags.dim..(k + 1) * bags.dim) else {
                return;
            };
            let mut sums = [_mm256_set1_ps(-0.0); N];
            let mut members = 0;
            let mut last_start = 0;
            for j in bags.bounds[k]..bags.bounds[k + 1] {
                if bags.entries[j] == padding {
                    continue;
                }
                let start = bags.entries[j] * bags.dim + first;
                let row = bags.weight.as_ptr().wrapping_add(start);
                for (v, sum) in sums.iter_mut().enumerate() {
                    // SAFETY: the entry's row ends within `weight`
                    // (`Bags::new` checked the group's largest entry `e`), so
                    // `start + 8v + 8 <= e * dim + first + width <= (e + 1)
                    // * dim <= weight.len()`.
                    *sum = _mm256_add_ps(*sum, unsafe { _mm256_loadu_ps(row.add(8 * v)) });
                }
                // Ask for the row ROWS_AHEAD entries on, a line every 64
                // bytes from its first (asking for the line its end spills
                // into as well measured slower).
                if let Some(&ahead) = bags.entries.get(j + ROWS_AHEAD) {
                    let at = bags.weight.as_ptr().wrapping_add(ahead * bags.dim + first);
                    for line in 0..lines {
                        // A hint: it accesses no memory, so any address is sound.
                        _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(16 * line).cast::<i8>());
                    }
                }
                last_start = start;
                members += 1;
            }
            *count = members;
            let block = &mut acc[first..first + width];
            match members {
                0 => {}
                1 => block.copy_from_slice(&bags.weight[last_start..last_start + width]),
                _ => {
                    for (v, sum) in sums.iter().enumerate() {
                        let eight = &mut block[8 * v..8 * v + 8];
                        // SAFETY: `eight` holds the 8 f32s the unaligned store writes.
                        unsafe { _mm256_storeu_ps(eight.as_mut_ptr(), *sum) };
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tensor::Tensor;
    use crate::tuning::{self, BagFold, Tuning};
    use crate::{Aggregate, EmbeddingBag};

    /// f32s that catch a fold that is not the plain one: signed zeros, a
    /// signalling and a quiet NaN, infinities, and values whose sum
    /// depends on the order of the adds.
    fn awkward(k: usize) -> f32 {
        const SPECIAL: [f32; 6] = [-0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY, 1e30, -1e30];
        match k % 23 {
            0..=5 => SPECIAL[k % 23],
            6 => f32::from_bits(0x7f80_0001),
            7 => f32::from_bits(0xffc0_1234),
            r => (r as f32 - 15.0) * 0.1 + (k % 7) as f32 * 1e-7,
        }
    }

    fn run(fold: BagFold, mode: Aggregate, dim: usize, padding: Option<i64>) -> Vec<u32> {
        let rows = 9;
        let weight = Tensor::new(vec![rows, dim], (0..rows * dim).map(awkward).collect()).unwrap();
        // Bags of 0 to 40 members (past the 16-entry prefetch), repeats,
        // and bags of only the padding row; then 300 bags of 0 to 3
        // members, past a group's end (140 under Miri, where an output
        // large enough to start the thread pool would take too long).
        let indices: Vec<i64> = (0..570)
            .map(|j| (j * 5 + j / 7) as i64 % rows as i64)
            .collect();
        let mut offsets = vec![0i64, 0, 1, 2, 42, 43, 43, 80, 81, 82, 120];
        let more = if cfg!(miri) { 140 } else { 300 };
        offsets.extend((1..more).map(|b| 120 + b * 3 / 2 - (b % 7 == 0) as i64));
        let offsets = Tensor::from_vec(offsets);
        let mut op = EmbeddingBag::new(mode);
        if let Some(p) = padding {
            op = op.padding_idx(p);
        }
        let indices = Tensor::from_vec(indices);
        let out = tuning::scoped(Tuning::AUTO.with_bag_fold(fold), || {
            op.run(&weight, &indices, Some((&offsets).into()), None)
        })
        .unwrap();
        // A NaN is compared as any NaN: Rust leaves a computed NaN's bits
        // unspecified (the plain fold's own differ between a debug and a
        // release build, and Miri picks them at random).
        let bits = |x: &f32| match x.is_nan() {
            true => f32::NAN.to_bits(),
            false => x.to_bits(),
        };
        out.data::<f32>().unwrap().iter().map(bits).collect()
    }

    // Under Miri without AVX2 compiled in, the register fold is never
    // taken and the plain folds would only meet themselves; CI's AVX2
    // Miri run takes it.
    #[test]
    #[cfg_attr(all(miri, not(target_feature = "avx2")), ignore)]
    fn the_register_fold_is_the_plain_folds_bit_for_bit() {
        // Under Miri, one width of two blocks (16 registers, then 1): each
        // case takes a minute there.
        let (dims, modes, paddings): (&[usize], &[Aggregate], &[Option<i64>]) = match cfg!(miri) {
            true => (&[136], &[Aggregate::Sum], &[None, Some(5)]),
            false => (
                &[8, 16, 24, 64, 128, 136, 264],
                &[Aggregate::Sum, Aggregate::Mean],
                &[None, Some(5), Some(-5)],
            ),
        };
        for &dim in dims {
            for &mode in modes {
                for &padding in paddings {
                    assert_eq!(
                        run(BagFold::Registers, mode, dim, padding),
                        run(BagFold::Memory, mode, dim, padding),
                        "dim {dim}, {mode}, padding {padding:?}"
                    );
                }
            }
        }
    }
}
