//! Scratch lists (resolved positions, source-order tables) kept by each
//! thread for its next call, so that a loop of calls does not map fresh
//! pages for them every time.
//!
//! Why: glibc gives a freed block of a few hundred KiB back to the kernel
//! when it sits at the top of the main heap, so the next call faults its
//! pages in again. W1 (a 65,536-row Gather) called from Python on one
//! thread made 226 page faults a call for its two 512 KiB lists: 7.2-7.7 ms
//! a call, against 6.6-7.2 ms with glibc told not to trim (AMD EPYC family
//! 25 model 1, 2026-11-29). Pool threads allocate from arenas that glibc
//! trims less, and made 2 faults a call.
//!
//! Each thread keeps at most one list per element type, of at most
//! [`KEPT_BYTES_MAX`] bytes, for as long as the thread lives.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};

use crate::dtype::DType;
use crate::error::Result;
use crate::shape::reserved;

/// The largest list a thread keeps: 2 MiB, a 262,144-index call's
/// positions. Longer lists go back to the allocator when dropped, as
/// before, so a thread never holds more than this per element type.
pub(crate) const KEPT_BYTES_MAX: usize = 2 << 20;

/// An element type with a kept list per thread.
pub(crate) trait Kept: Copy + 'static {
    /// Run `f` on this thread's kept list, if the thread's storage is
    /// still there (it is not while the thread is being torn down).
    fn with_kept<R>(f: impl FnOnce(&Cell<Vec<Self>>) -> R) -> Option<R>;
}

macro_rules! kept_per_thread {
    ($($t:ty),*) => {$(
        impl Kept for $t {
            fn with_kept<R>(f: impl FnOnce(&Cell<Vec<Self>>) -> R) -> Option<R> {
                thread_local! {
                    static KEPT: Cell<Vec<$t>> = const { Cell::new(Vec::new()) };
                }
                KEPT.try_with(f).ok()
            }
        }
    )*};
}

kept_per_thread!(u64, usize);

/// An empty list with room for `len` elements: this thread's kept list
/// when it has room, else a new one (`Error::Allocation` when there is no
/// memory, naming `dtype`). Dropped, it is kept for the next call when it
/// is no larger than [`KEPT_BYTES_MAX`].
pub(crate) fn scratch<T: Kept>(len: usize, dtype: DType) -> Result<Scratch<T>> {
    let mut list = T::with_kept(Cell::take).unwrap_or_default();
    list.clear();
    if list.capacity() < len {
        // The kept list is too short: a new one of exactly `len` replaces it.
        list = reserved(len, dtype)?;
    }
    Ok(Scratch { list })
}

/// A list from [`scratch`]; it derefs to its `Vec`.
#[derive(Debug, Default)]
pub(crate) struct Scratch<T: Kept> {
    list: Vec<T>,
}

impl<T: Kept> Deref for Scratch<T> {
    type Target = Vec<T>;

    fn deref(&self) -> &Vec<T> {
        &self.list
    }
}

impl<T: Kept> DerefMut for Scratch<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.list
    }
}

impl<T: Kept> Drop for Scratch<T> {
    fn drop(&mut self) {
        let bytes = self
            .list
            .capacity()
            .saturating_mul(std::mem::size_of::<T>());
        if bytes == 0 || bytes > KEPT_BYTES_MAX {
            return;
        }
        let list = std::mem::take(&mut self.list);
        // The larger of the two stays kept: a thread that alternates long
        // and short calls keeps the list the long ones need.
        T::with_kept(|kept| {
            let other = kept.take();
            kept.set(if other.capacity() > list.capacity() {
                other
            } else {
                list
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn a_dropped_list_is_handed_out_again_on_the_same_thread() {
        let mut first = scratch::<u64>(1000, DType::U64).unwrap();
        first.extend(0..1000);
        let address = first.as_ptr();
        drop(first);
        let second = scratch::<u64>(500, DType::U64).unwrap();
        assert!(second.is_empty(), "a kept list is handed out empty");
        assert_eq!(second.as_ptr(), address);
        assert!(second.capacity() >= 500);
    }

    #[test]
    fn a_list_too_short_is_replaced_by_one_of_the_length_asked() {
        drop(scratch::<usize>(10, DType::U64).unwrap());
        let longer = scratch::<usize>(5000, DType::U64).unwrap();
        assert!(longer.capacity() >= 5000);
    }

    #[test]
    fn a_list_beyond_the_bound_is_not_kept() {
        let words = KEPT_BYTES_MAX / 8 + 1;
        drop(scratch::<u64>(words, DType::U64).unwrap());
        let kept = u64::with_kept(|k| {
            let list = k.take();
            let capacity = list.capacity();
            k.set(list);
            capacity
        });
        assert!(kept.unwrap() < words);
    }

    #[test]
    fn an_impossible_length_is_an_allocation_error() {
        let err = scratch::<u64>(usize::MAX / 4, DType::U64).unwrap_err();
        assert!(matches!(err, Error::Allocation { .. }));
    }
}
