//! Fresh outputs that are not zeroed before a kernel writes them.
//!
//! A kernel that writes every output element would otherwise pay for the
//! output twice: once to zero it (a reused allocation is cleared by the
//! allocator, one thread, before the kernel starts) and once to write it.
//! (Measured on W4, GatherElements into a fresh 64 MiB output, against
//! zeroed memory: 1.07-1.25x faster on one thread, 0.97-1.37x on two, in
//! A/B runs whose noise is about 10%; W3, Gather of single elements, 1.39x
//! on one thread.) Kernels write through [`Slot`], so
//! the same code fills a caller's initialised buffer and a fresh one; the
//! scatters start by storing data's elements into their slots
//! ([`Slot::init_from`]) and then work on initialised elements. (W6, a
//! 64 MiB ScatterElements, fresh: 6.7-7.4 ms against 7.8-8.8 on two
//! threads when calloc zeroed the output first, 13.1-14.2 against
//! 14.3-14.8 on one.)
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use crate::dtype::Element;

/// An output element a kernel writes: already initialised (`W`, a caller's
/// buffer) or not yet (`MaybeUninit<W>`, a fresh one).
///
/// # Safety
/// Implementors have the size and alignment of `W`, and a `W` stored at a
/// slot's address (see [`Slot::words`]) is a valid value of the slot.
pub(crate) unsafe trait Slot<W>: Sized + Send {
    /// Store `value` in the slot.
    fn put(&mut self, value: W);

    /// The first slot's address as a word pointer, for vector kernels that
    /// store whole words through it.
    fn words(slots: &mut [Self]) -> *mut W {
        slots.as_mut_ptr().cast()
    }

    /// Store a clone of each of `values` in `slots` (same length, else a
    /// panic, as `clone_from_slice`).
    fn copy_from(slots: &mut [Self], values: &[W])
    where
        W: Clone;

    /// Store a clone of each of `values` in `slots` (same length, else a
    /// panic) and hand the slots back as the values they now hold: a
    /// kernel that starts by copying its input into its output (the
    /// scatters) then works on initialised elements either way.
    fn init_from<'a>(slots: &'a mut [Self], values: &[W]) -> &'a mut [W]
    where
        W: Clone;

    /// Store clones of the first `N` values in the first `N` slots (a short
    /// block of a constant length; either too short is a panic). A loop of
    /// the constant count, which compiles to a few moves; see the `W` slot's
    /// version.
    #[inline(always)]
    fn copy_block<const N: usize>(slots: &mut [Self], values: &[W])
    where
        W: Clone,
    {
        let (slots, values) = (&mut slots[..N], &values[..N]);
        for e in 0..N {
            slots[e].put(values[e].clone());
        }
    }

    /// `slots[k] = src[at[k]]` for every `k` of the shorter of `slots` and
    /// `at` (an `at[k]` past `src` panics). Words of up to 4 bytes are
    /// gathered a group at a time and the group stored at once: one store
    /// per word was the loop's limit. 16 MiB of one-element blocks, one
    /// thread, rows in cache, AMD EPYC family 25 model 1 (a loop outside
    /// the library, interleaved runs): 1-byte words 8.0 -> 7.1 ms in
    /// groups of 8 packed into a `u64` (a `[W; 8]` array ran 8.4), 2-byte
    /// 9.8 -> 7.8 ms in groups of 4, 4-byte 5.3 -> 4.7 ms in pairs; 8-byte
    /// words gained nothing measurable (5.2 -> 5.0-5.2 ms) and stay single.
    #[inline(always)]
    fn gather_each(slots: &mut [Self], src: &[W], at: &[usize])
    where
        W: Clone,
    {
        let n = slots.len().min(at.len());
        let (slots, at) = (&mut slots[..n], &at[..n]);
        let grouped = match std::mem::size_of::<W>() {
            1 if !std::mem::needs_drop::<W>() => gather_bytes(slots, src, at),
            2 => gather_groups::<W, Self, 4>(slots, src, at),
            4 => gather_groups::<W, Self, 2>(slots, src, at),
            _ => 0,
        };
        for (slot, &i) in slots[grouped..].iter_mut().zip(&at[grouped..]) {
            slot.put(src[i].clone());
        }
    }
}

/// The whole groups of `L` words of [`Slot::gather_each`], each gathered
/// into an array and stored with [`Slot::copy_block`]; how many slots were
/// written.
#[inline(always)]
fn gather_groups<W: Clone, O: Slot<W>, const L: usize>(
    slots: &mut [O],
    src: &[W],
    at: &[usize],
) -> usize {
    let groups = slots.len().min(at.len()) / L;
    for (group, at) in slots.chunks_exact_mut(L).zip(at.chunks_exact(L)) {
        let words: [W; L] = std::array::from_fn(|k| src[at[k]].clone());
        O::copy_block::<L>(group, &words);
    }
    groups * L
}

/// The whole groups of eight of [`Slot::gather_each`] for 1-byte words
/// without drop glue: eight bytes shifted into a `u64`, stored as one.
/// How many slots were written.
#[inline(always)]
fn gather_bytes<W, O: Slot<W>>(slots: &mut [O], src: &[W], at: &[usize]) -> usize {
    debug_assert!(std::mem::size_of::<W>() == 1 && !std::mem::needs_drop::<W>());
    // SAFETY: `W` is one byte (checked by the caller), so `src` is
    // `src.len()` initialised bytes, which `u8` may read.
    let bytes = unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), src.len()) };
    let groups = slots.len().min(at.len()) / 8;
    let first = O::words(slots).cast::<u8>();
    for (g, at) in at.chunks_exact(8).take(groups).enumerate() {
        let mut packed = 0u64;
        for (k, &i) in at.iter().enumerate() {
            packed |= u64::from(bytes[i]) << (8 * k);
        }
        // SAFETY: slots `8g..8g + 8` lie inside `slots` (`g < groups`), a
        // slot has the size of `W`, one byte (`Slot`'s contract), and each
        // byte stored is a copy of a `W` from `src`: a `W` without drop
        // glue is `Copy` in this crate (an `Element` or its word), so that
        // copy is its clone and a valid `W`, hence a valid slot.
        unsafe {
            first
                .add(8 * g)
                .cast::<[u8; 8]>()
                .write_unaligned(packed.to_le_bytes());
        }
    }
    groups * 8
}

// SAFETY: a `W` slot is a `W`.
unsafe impl<W: Send> Slot<W> for W {
    #[inline]
    fn put(&mut self, value: W) {
        *self = value;
    }

    #[inline(always)]
    fn copy_from(slots: &mut [W], values: &[W])
    where
        W: Clone,
    {
        slots.clone_from_slice(values);
    }

    #[inline]
    fn init_from<'a>(slots: &'a mut [W], values: &[W]) -> &'a mut [W]
    where
        W: Clone,
    {
        slots.clone_from_slice(values);
        slots
    }

    /// An initialised slot takes a slice copy, a fixed-size `memcpy` that
    /// compiles to vector moves (Gather of 16-element blocks, W9: 40% fewer
    /// instructions than the element loop). Uninitialised slots copy a
    /// pointer range of the constant length (see their version): a slice
    /// copy of theirs had become a `memcpy` call per block (W2 fresh 1.4x
    /// slower).
    #[inline(always)]
    fn copy_block<const N: usize>(slots: &mut [W], values: &[W])
    where
        W: Clone,
    {
        slots[..N].clone_from_slice(&values[..N]);
    }
}

// SAFETY: `MaybeUninit<W>` has the layout of `W` and holds any `W`.
unsafe impl<W: Send> Slot<W> for MaybeUninit<W> {
    #[inline]
    fn put(&mut self, value: W) {
        self.write(value);
    }

    #[inline(always)]
    fn copy_from(slots: &mut [MaybeUninit<W>], values: &[W])
    where
        W: Clone,
    {
        assert_eq!(slots.len(), values.len(), "slot and value counts differ");
        // A plain word as one `memcpy`: the loop below compiled to 16-byte
        // moves, which made a fresh Gather of 64 KiB blocks from cache 1.7x
        // slower than the same copy into a caller's buffer (0.69 against
        // 0.41 ms for 16 MiB on a Zen 5).
        if !std::mem::needs_drop::<W>() {
            // SAFETY: the lengths are equal (asserted above); `values` is
            // borrowed shared and `slots` exclusively, so they do not
            // overlap; `MaybeUninit<W>` has the layout of `W`. Every `W`
            // this crate stores through a slot is an `Element` or its
            // `Word`, and those without drop glue are `Copy`, so their
            // clone is this bitwise copy.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    values.as_ptr(),
                    slots.as_mut_ptr().cast::<W>(),
                    values.len(),
                );
            }
            return;
        }
        for (slot, value) in slots.iter_mut().zip(values) {
            slot.write(value.clone());
        }
    }

    /// A plain word's block as one copy of a constant length, which
    /// compiles to a few vector moves: the element loop stored 1-byte
    /// words one at a time (a fresh Gather of int8 in 16 B blocks ran 2x
    /// slower than into a caller's buffer).
    #[inline(always)]
    fn copy_block<const N: usize>(slots: &mut [MaybeUninit<W>], values: &[W])
    where
        W: Clone,
    {
        let (slots, values) = (&mut slots[..N], &values[..N]);
        if !std::mem::needs_drop::<W>() {
            // SAFETY: both are exactly `N` long (sliced above); `values`
            // is borrowed shared and `slots` exclusively, so they do not
            // overlap; `MaybeUninit<W>` has the layout of `W`; a `W`
            // without drop glue is `Copy` in this crate (see `copy_from`),
            // so this bitwise copy is its clone.
            unsafe {
                std::ptr::copy_nonoverlapping(values.as_ptr(), slots.as_mut_ptr().cast::<W>(), N);
            }
            return;
        }
        for (slot, value) in slots.iter_mut().zip(values) {
            slot.write(value.clone());
        }
    }

    #[inline]
    fn init_from<'a>(slots: &'a mut [MaybeUninit<W>], values: &[W]) -> &'a mut [W]
    where
        W: Clone,
    {
        Self::copy_from(slots, values);
        // SAFETY: `copy_from` wrote every slot (it panics on a length
        // mismatch before writing any), and `MaybeUninit<W>` has the
        // layout of `W`; the result borrows `slots` exclusively.
        unsafe { &mut *(std::ptr::from_mut(slots) as *mut [W]) }
    }
}

/// A caller's initialised `values` as slots, for the kernels compiled for
/// fresh outputs: one reduction kernel per dtype then serves fresh outputs
/// and caller's buffers alike.
///
/// # Safety
/// Only initialised values may be stored through the slots while they are
/// borrowed (as every [`Slot`] method stores), so that `values` is still
/// initialised when the borrow ends.
pub(crate) unsafe fn as_slots<T>(values: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: `MaybeUninit<T>` has the layout of `T`, the borrow is
    // exclusive, and the caller keeps every slot initialised.
    unsafe { &mut *(std::ptr::from_mut(values) as *mut [MaybeUninit<T>]) }
}

/// The bytes of `slots`, for kernels that copy plain elements as bytes
/// (streaming stores); `None` unless every bit pattern is a `T` (as
/// [`Element::as_bytes`] tells), so that any bytes stored make a value.
pub(crate) fn slot_bytes<T: Element>(
    slots: &mut [MaybeUninit<T>],
) -> Option<&mut [MaybeUninit<u8>]> {
    T::as_bytes(&[])?;
    let bytes = std::mem::size_of_val(slots);
    // SAFETY: the slots are `bytes` bytes of memory borrowed exclusively
    // here; `MaybeUninit<u8>` has alignment 1 and no validity rule, and
    // whatever bytes are stored make a valid `T` once all of a slot's are.
    Some(unsafe { std::slice::from_raw_parts_mut(slots.as_mut_ptr().cast(), bytes) })
}

/// A new vector of `len` elements written by `write` through their words,
/// never zeroed first: [`new_vec_of`] for kernels that move words. `None`
/// also when `T`'s word differs from it in size or alignment.
///
/// # Safety
/// When `write` returns `Ok`, it must have written every slot it was given.
pub(crate) unsafe fn new_vec_written<T: Element, E>(
    len: usize,
    write: impl FnOnce(&mut [MaybeUninit<T::Word>]) -> Result<(), E>,
) -> Option<Result<Vec<T>, E>> {
    let same_layout = std::mem::size_of::<T>() == std::mem::size_of::<T::Word>()
        && std::mem::align_of::<T::Word>() <= std::mem::align_of::<T>();
    if !same_layout {
        return None;
    }
    let as_words = |elements: &mut [MaybeUninit<T>]| {
        // SAFETY: `T` and its word have the same size and the word's
        // alignment is no stricter (checked above), so the elements are as
        // many words of the same memory, borrowed exclusively here;
        // `MaybeUninit` has no validity rule. A word stored over a `T` is a
        // valid `T`: `Element::as_words_mut` lets safe code do exactly that.
        let words: &mut [MaybeUninit<T::Word>] =
            unsafe { std::slice::from_raw_parts_mut(elements.as_mut_ptr().cast(), elements.len()) };
        write(words)
    };
    // SAFETY: every element is written exactly when every word is, which
    // the caller promises on `Ok`.
    unsafe { new_vec_of::<T, E>(len, as_words) }
}

/// A new vector of `len` elements written by `write`, never zeroed first.
/// `write` returns `Ok` only once every slot holds a value; its error is
/// passed on, and the partly written memory is freed. `None` when `T`'s
/// values need dropping (an error halfway would leak them) or the memory
/// cannot be allocated: the caller then takes the zeroed path, which
/// reports a failed allocation.
///
/// # Safety
/// When `write` returns `Ok`, it must have written every slot it was given.
pub(crate) unsafe fn new_vec_of<T: Element, E>(
    len: usize,
    write: impl FnOnce(&mut [MaybeUninit<T>]) -> Result<(), E>,
) -> Option<Result<Vec<T>, E>> {
    if std::mem::needs_drop::<T>() {
        return None;
    }
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(len).ok()?;
    let slots = &mut out.spare_capacity_mut()[..len];
    // Debug builds fill the memory with a pattern first, so a slot the
    // kernel skipped shows in the tests' results (a fresh page would read
    // as zero, a plausible value). Not under Miri, which needs the memory
    // uninitialised to report reading such a slot.
    #[cfg(all(debug_assertions, not(miri)))]
    // SAFETY: `slots` spans `size_of_val(slots)` bytes of memory it borrows
    // exclusively; any byte may be stored in `MaybeUninit`.
    unsafe {
        std::ptr::write_bytes(
            slots.as_mut_ptr().cast::<u8>(),
            0xA5,
            std::mem::size_of_val(slots),
        )
    };
    if let Err(error) = write(slots) {
        return Some(Err(error));
    }
    // SAFETY: on `Ok` every slot holds a value (the caller's contract).
    unsafe { out.set_len(len) };
    Some(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `gather_each` into both kinds of slot, against the loop it replaces.
    fn check_gather_each<W: Clone + Send + PartialEq + std::fmt::Debug>(src: &[W], filler: W) {
        for n in 0..=19 {
            let at: Vec<usize> = (0..n).map(|k| (k * 7 + 3) % src.len()).collect();
            let expected: Vec<W> = at.iter().map(|&i| src[i].clone()).collect();
            let mut initialised = vec![filler.clone(); n + 3];
            W::gather_each(&mut initialised, src, &at);
            assert_eq!(
                initialised[..n],
                expected[..],
                "initialised slots, {n} words"
            );
            // The slots past the shorter of the two are left alone.
            assert!(initialised[n..].iter().all(|w| *w == filler), "{n} words");
            let mut fresh: Vec<MaybeUninit<W>> = (0..n).map(|_| MaybeUninit::uninit()).collect();
            MaybeUninit::gather_each(&mut fresh, src, &at);
            // SAFETY: `gather_each` wrote all `n` slots (as `at` is `n` long),
            // checked against `expected` right after; each is read once.
            let fresh: Vec<W> = fresh
                .into_iter()
                .map(|w| unsafe { w.assume_init() })
                .collect();
            assert_eq!(fresh, expected, "fresh slots, {n} words");
        }
    }

    #[test]
    fn gather_each_stores_every_word_width_whole_groups_and_the_rest() {
        check_gather_each(&(0..11u8).map(|k| 200 - k).collect::<Vec<_>>(), 0);
        check_gather_each(&[true, false, false, true, true], false);
        check_gather_each(&(0..11u16).map(|k| 60_000 - k).collect::<Vec<_>>(), 0);
        check_gather_each(&(0..11u32).map(|k| u32::MAX - k).collect::<Vec<_>>(), 0);
        check_gather_each(&(0..11u64).map(|k| u64::MAX - k).collect::<Vec<_>>(), 0);
        check_gather_each(&(0..11u64).map(|k| [k, !k]).collect::<Vec<_>>(), [0, 0]);
        check_gather_each(
            &(0..11).map(|k| k.to_string()).collect::<Vec<_>>(),
            String::new(),
        );
    }

    #[test]
    fn every_slot_written_gives_those_values() {
        // SAFETY: the closure writes every slot before returning `Ok`.
        let out = unsafe {
            new_vec_written::<f32, ()>(5, |words| {
                for (k, w) in words.iter_mut().enumerate() {
                    w.put((k as f32 + 0.5).to_bits());
                }
                Ok(())
            })
        };
        assert_eq!(out, Some(Ok(vec![0.5, 1.5, 2.5, 3.5, 4.5])));
    }

    #[test]
    fn an_error_halfway_frees_the_memory_and_is_passed_on() {
        // SAFETY: the closure returns `Err` before writing every slot.
        let out = unsafe {
            new_vec_written::<u64, &str>(4, |words| {
                words[0].put(1);
                Err("bad index")
            })
        };
        assert_eq!(out, Some(Err("bad index")));
    }

    #[test]
    fn values_that_need_dropping_are_refused() {
        // SAFETY: refused before `write` could run.
        let out = unsafe { new_vec_written::<String, ()>(2, |_| Ok(())) };
        assert_eq!(out, None);
    }

    #[test]
    fn an_impossible_allocation_is_refused() {
        // SAFETY: refused before `write` could run.
        let out = unsafe { new_vec_written::<u64, ()>(usize::MAX / 4, |_| Ok(())) };
        assert_eq!(out, None);
    }

    #[test]
    fn both_slot_kinds_copy_a_slice() {
        let mut init = [0u16; 3];
        u16::copy_from(&mut init, &[1, 2, 3]);
        let mut fresh = [MaybeUninit::<u16>::uninit(); 3];
        MaybeUninit::copy_from(&mut fresh, &[4, 5, 6]);
        // SAFETY: `copy_from` wrote every slot.
        let fresh = fresh.map(|slot| unsafe { slot.assume_init() });
        assert_eq!((init, fresh), ([1, 2, 3], [4, 5, 6]));
    }

    #[test]
    fn both_slot_kinds_hand_back_the_values_they_were_given() {
        let mut init = [0i8; 3];
        let view = i8::init_from(&mut init, &[-1, 2, -3]);
        view[1] += 10;
        assert_eq!(init, [-1, 12, -3]);
        let mut fresh = [MaybeUninit::<i8>::uninit(); 3];
        let view = MaybeUninit::init_from(&mut fresh, &[4, -5, 6]);
        view[2] -= 10;
        assert_eq!(view, &[4, -5, -4]);
    }

    #[test]
    fn new_vec_of_passes_the_error_on_and_refuses_values_that_need_dropping() {
        // SAFETY: the closure writes every slot before returning `Ok`.
        let out = unsafe {
            new_vec_of::<i16, ()>(3, |slots| {
                MaybeUninit::copy_from(slots, &[7, 8, 9]);
                Ok(())
            })
        };
        assert_eq!(out, Some(Ok(vec![7, 8, 9])));
        // SAFETY: returns `Err` before writing every slot.
        let out = unsafe { new_vec_of::<i16, u8>(3, |_| Err(4)) };
        assert_eq!(out, Some(Err(4)));
        // SAFETY: refused before `write` could run.
        let out = unsafe { new_vec_of::<String, ()>(1, |_| Ok(())) };
        assert_eq!(out, None);
    }

    #[test]
    fn both_slot_kinds_store_words() {
        let mut init = [0u32; 2];
        init[1].put(7);
        let mut fresh = [MaybeUninit::<u32>::uninit(); 2];
        fresh[0].put(3);
        fresh[1].put(4);
        // SAFETY: both slots were just written.
        let fresh = unsafe { [fresh[0].assume_init(), fresh[1].assume_init()] };
        assert_eq!((init, fresh), ([0, 7], [3, 4]));
    }
}
