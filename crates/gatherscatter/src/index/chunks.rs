//! Indices read a range at a time by the GatherElements kernels, which
//! take each index once and so gain nothing from a whole-tensor copy:
//! `i64`, `i32` and `u16` in place ([`InPlace`]), the other index types
//! widened to `i64` a chunk at a time ([`WideIndices`]). A copy of
//! narrower indices costs a pass over memory twice their size, and for a
//! fresh copy its page faults.

use std::ops::Range;

use super::{canonical, IndexElement, KernelIndex, SMALL_INDICES};
use crate::mem::prefetch::prefetch_items;

/// Indices a kernel reads through per-task [`ReadIndices`] readers.
pub(crate) trait IndexSource: Copy + Send + Sync {
    /// The type the kernels see.
    type Index: KernelIndex;
    /// A reader for one task.
    type Reader: ReadIndices<Index = Self::Index>;

    /// A reader of these indices: one per task.
    fn reader(&self) -> Self::Reader;

    /// Call `f` with all the indices, which must number at most
    /// [`SMALL_INDICES`], with no allocation: the small-call paths.
    fn with_all_small<R>(&self, f: impl FnOnce(&[Self::Index]) -> R) -> R;
}

/// One task's way through the indices.
pub(crate) trait ReadIndices {
    /// The type the kernels see.
    type Index: KernelIndex;

    /// Call `f(offset, chunk)` over `range` in order, `chunk` holding the
    /// values from `range.start + offset`; stops at the first `Err`.
    /// `range` must lie inside the indices.
    fn try_chunks<E>(
        &mut self,
        range: Range<usize>,
        f: impl FnMut(usize, &[Self::Index]) -> Result<(), E>,
    ) -> Result<(), E>;

    /// Ask for the values in `range` (clipped to the indices) into L1.
    fn prefetch(&self, range: Range<usize>);

    /// Bytes each index takes where it is stored (a widened one, less
    /// than the type the kernels see).
    fn stored_bytes(&self) -> usize {
        std::mem::size_of::<Self::Index>()
    }
}

/// A reader borrowed: what a kernel holds while a wrapper reads for it.
impl<R: ReadIndices> ReadIndices for &mut R {
    type Index = R::Index;

    #[inline]
    fn try_chunks<E>(
        &mut self,
        range: Range<usize>,
        f: impl FnMut(usize, &[Self::Index]) -> Result<(), E>,
    ) -> Result<(), E> {
        (**self).try_chunks(range, f)
    }

    fn prefetch(&self, range: Range<usize>) {
        (**self).prefetch(range);
    }

    fn stored_bytes(&self) -> usize {
        (**self).stored_bytes()
    }
}

/// Indices of a [`KernelIndex`] type, read where they are.
#[derive(Clone, Copy)]
pub(crate) struct InPlace<'a, X>(pub &'a [X]);

impl<X: KernelIndex> IndexSource for InPlace<'_, X> {
    type Index = X;
    type Reader = Self;

    fn reader(&self) -> Self {
        *self
    }

    #[inline]
    fn with_all_small<R>(&self, f: impl FnOnce(&[X]) -> R) -> R {
        f(self.0)
    }
}

impl<X: KernelIndex> ReadIndices for InPlace<'_, X> {
    type Index = X;

    #[inline]
    fn try_chunks<E>(
        &mut self,
        range: Range<usize>,
        mut f: impl FnMut(usize, &[X]) -> Result<(), E>,
    ) -> Result<(), E> {
        f(0, &self.0[range])
    }

    fn prefetch(&self, range: Range<usize>) {
        let end = range.end.min(self.0.len());
        prefetch_items(&self.0[range.start.min(end)..end]);
    }
}

/// Index values of the types not read in place (`i8`, `i16`, `u8`, `u32`,
/// `u64`), read as canonical `i64`s (see [`super::canonical_indices`]),
/// widened a chunk at a time into a buffer of the reader's.
#[derive(Clone, Copy)]
pub(crate) struct WideIndices<'a> {
    values: &'a dyn Widen,
}

/// Most indices [`IndexReader::try_chunks`] widens at once: 8 KiB, in L1.
pub(crate) const WIDEN_CHUNK: usize = 1024;

/// Reads [`WideIndices`] as canonical `i64`s, widening into a buffer of its
/// own (grown to at most [`WIDEN_CHUNK`], once, not cleared per call: rows
/// of a few indices each are read one call a row).
pub(crate) struct IndexReader<'a> {
    values: &'a dyn Widen,
    buffer: Vec<i64>,
}

impl ReadIndices for IndexReader<'_> {
    type Index = i64;

    /// Chunks of at most [`WIDEN_CHUNK`].
    #[inline]
    fn try_chunks<E>(
        &mut self,
        range: Range<usize>,
        mut f: impl FnMut(usize, &[i64]) -> Result<(), E>,
    ) -> Result<(), E> {
        let want = range.len().min(WIDEN_CHUNK);
        if self.buffer.len() < want {
            self.buffer.resize(want, 0);
        }
        let mut offset = 0;
        while offset < range.len() {
            let chunk = &mut self.buffer[..(range.len() - offset).min(WIDEN_CHUNK)];
            self.values.widen(range.start + offset, chunk);
            f(offset, chunk)?;
            offset += chunk.len();
        }
        Ok(())
    }

    fn prefetch(&self, range: Range<usize>) {
        let end = range.end.min(self.values.len());
        self.values.prefetch(range.start.min(end)..end);
    }

    fn stored_bytes(&self) -> usize {
        self.values.item_bytes()
    }
}

/// The index slice behind [`WideIndices`], of whichever index type.
trait Widen: Sync {
    fn len(&self) -> usize;
    /// `into[k] = canonical(values[from + k])`.
    fn widen(&self, from: usize, into: &mut [i64]);
    fn prefetch(&self, range: Range<usize>);
    fn item_bytes(&self) -> usize;
}

impl<I: IndexElement> Widen for &[I] {
    fn len(&self) -> usize {
        <[I]>::len(self)
    }

    fn widen(&self, from: usize, into: &mut [i64]) {
        let values = &self[from..from + into.len()];
        for (wide, &v) in into.iter_mut().zip(values) {
            *wide = canonical(v);
        }
    }

    fn prefetch(&self, range: Range<usize>) {
        if let Some(values) = self.get(range) {
            prefetch_items(values);
        }
    }

    fn item_bytes(&self) -> usize {
        std::mem::size_of::<I>()
    }
}

/// A reader that asks for the indices it will read next: before each
/// step of [`READ_AHEAD_STEP_BYTES`] of indices it reads, the lines up to
/// [`READ_AHEAD_BYTES`] further on that it has not asked for yet.
///
/// For loops whose index stream is most of what they read: GatherElements'
/// scalar loop along the last axis reads 8 bytes of `i64` index for each
/// 1-byte element it copies, and the hardware prefetchers left that stream
/// waiting on memory. (Int8 rows of 256 with `i64` indices, 16 MiB out,
/// into a buffer on one thread, interleaved in one process on a 2-vCPU
/// Intel Xeon family 6 model 207: 26.3 -> 17.7 ms; 2 KiB to 8 KiB ahead
/// within noise of each other; steps of 256 bytes or 2 KiB slower than 512.)
pub(crate) struct ReadAhead<R> {
    reader: R,
    /// Positions ahead of the one being read that are asked for; 0 reads
    /// straight through the reader.
    ahead: usize,
    /// Positions read in one step.
    step: usize,
    /// Indices before this position have been asked for.
    asked: usize,
}

/// How far ahead of its reads [`ReadAhead`] asks for indices.
pub(crate) const READ_AHEAD_BYTES: usize = 4 << 10;

/// Indices [`ReadAhead`] reads between two requests: eight lines.
pub(crate) const READ_AHEAD_STEP_BYTES: usize = 512;

impl<R: ReadIndices> ReadAhead<R> {
    /// A reader whose first read starts at position `first`, asking ahead
    /// when `ask` (otherwise it only passes the reads on).
    pub(crate) fn new(reader: R, first: usize, ask: bool) -> ReadAhead<R> {
        let size = reader.stored_bytes().max(1);
        let ahead = if ask { READ_AHEAD_BYTES / size } else { 0 };
        ReadAhead {
            reader,
            ahead,
            step: (READ_AHEAD_STEP_BYTES / size).max(1),
            asked: first.saturating_add(ahead),
        }
    }
}

impl<R: ReadIndices> ReadIndices for ReadAhead<R> {
    type Index = R::Index;

    #[inline]
    fn try_chunks<E>(
        &mut self,
        range: Range<usize>,
        mut f: impl FnMut(usize, &[Self::Index]) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.ahead == 0 {
            return self.reader.try_chunks(range, f);
        }
        let mut start = range.start;
        while start < range.end {
            let end = range.end.min(start.saturating_add(self.step));
            let wanted = end.saturating_add(self.ahead);
            if wanted > self.asked {
                let from = self.asked.max(start.saturating_add(self.ahead));
                self.reader.prefetch(from..wanted);
                self.asked = wanted;
            }
            let before = start - range.start;
            self.reader
                .try_chunks(start..end, |offset, chunk| f(before + offset, chunk))?;
            start = end;
        }
        Ok(())
    }

    fn prefetch(&self, range: Range<usize>) {
        self.reader.prefetch(range);
    }

    fn stored_bytes(&self) -> usize {
        self.reader.stored_bytes()
    }
}

impl<'a> WideIndices<'a> {
    /// The indices `values` (a reference to the caller's slice: the trait
    /// object needs a sized value behind it).
    pub(crate) fn new<I: IndexElement>(values: &'a &'a [I]) -> WideIndices<'a> {
        WideIndices { values }
    }
}

impl<'a> IndexSource for WideIndices<'a> {
    type Index = i64;
    type Reader = IndexReader<'a>;

    /// A reader with its own widening buffer.
    fn reader(&self) -> IndexReader<'a> {
        IndexReader {
            values: self.values,
            buffer: Vec::new(),
        }
    }

    /// Widened into a buffer on the stack.
    #[inline]
    fn with_all_small<R>(&self, f: impl FnOnce(&[i64]) -> R) -> R {
        let mut buffer = [0i64; SMALL_INDICES];
        let wide = &mut buffer[..self.values.len().min(SMALL_INDICES)];
        self.values.widen(0, wide);
        f(wide)
    }
}
