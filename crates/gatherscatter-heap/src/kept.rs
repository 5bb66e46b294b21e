//! [`KeptBlocks`]: large freed blocks held back from the system allocator
//! for the next request of the same size and alignment, so a program that
//! makes a fresh result of the same shape on every call (a loop over
//! batches, a benchmark) writes into pages that are already mapped, as
//! onnxruntime's arena and PyTorch's caching allocators do. A fresh 64 MiB
//! block costs the kernel 32 huge-page faults (16,384 small ones) on every
//! call; a kept one costs none.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Only blocks from this size on are kept: below it the system allocator's
/// own free lists already reuse memory without a new mapping.
pub(crate) const KEEP_MIN_BLOCK: usize = 4 << 20;

/// How many blocks are kept at most: enough for a loop that holds a result
/// while it makes the next one, for a few shapes at once.
pub(crate) const SLOTS: usize = 8;

#[derive(Clone, Copy)]
struct Kept {
    block: NonNull<u8>,
    layout: Layout,
    /// When it was kept, to give back the oldest first.
    age: u64,
}

struct Slots {
    blocks: [Option<Kept>; SLOTS],
    held: usize,
    clock: u64,
}

// SAFETY: the kept blocks belong to no thread: whichever thread takes one
// out (under the lock) owns it from then on, as with any freed memory.
unsafe impl Send for Slots {}

/// A bounded set of freed blocks. Each is a live block of the system
/// allocator with the layout it was allocated with; it is handed out again
/// only for that exact layout, so it is freed with that layout in the end.
pub(crate) struct KeptBlocks {
    /// Bytes that may be held; 0 keeps nothing.
    limit: AtomicUsize,
    slots: Mutex<Slots>,
}

/// Blocks to give back to the system once the lock is dropped (no call
/// into the system allocator is made while it is held): every kept block,
/// and one more.
pub(crate) type Released = [Option<(NonNull<u8>, Layout)>; SLOTS + 1];

impl KeptBlocks {
    pub(crate) const fn new() -> KeptBlocks {
        KeptBlocks {
            limit: AtomicUsize::new(0),
            slots: Mutex::new(Slots {
                blocks: [None; SLOTS],
                held: 0,
                clock: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A poisoned lock still guards consistent slots: nothing that can
        // panic runs while it is held.
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> usize {
        self.lock().held
    }

    /// Hold at most `limit` bytes from now on; returns the blocks that no
    /// longer fit.
    pub(crate) fn set_limit(&self, limit: usize) -> Released {
        self.limit.store(limit, Ordering::Relaxed);
        let mut slots = self.lock();
        let mut released = [None; SLOTS + 1];
        slots.make_room(None, limit, &mut released);
        released
    }

    /// Whether a block of `layout` could be kept (a test without the lock).
    pub(crate) fn may_keep(&self, layout: Layout) -> bool {
        layout.size() >= KEEP_MIN_BLOCK && layout.size() <= self.limit()
    }

    /// A kept block of exactly `layout`, taken out of the set.
    pub(crate) fn take(&self, layout: Layout) -> Option<*mut u8> {
        if !self.may_keep(layout) {
            return None;
        }
        let mut slots = self.lock();
        let found = slots
            .blocks
            .iter_mut()
            .find(|slot| slot.is_some_and(|kept| kept.layout == layout))?;
        let kept = found.take()?;
        slots.held -= kept.layout.size();
        Some(kept.block.as_ptr())
    }

    /// Keep `block` of `layout` instead of freeing it, if it fits the limit
    /// (older blocks are let go to make room). Returns the blocks to give
    /// back to the system: those let go, and `block` itself when it is not
    /// kept.
    pub(crate) fn keep(&self, block: *mut u8, layout: Layout) -> Released {
        let mut released = [None; SLOTS + 1];
        let Some(block) = NonNull::new(block) else {
            return released;
        };
        if !self.may_keep(layout) {
            released[0] = Some((block, layout));
            return released;
        }
        let mut slots = self.lock();
        slots.make_room(Some(layout.size()), self.limit(), &mut released);
        slots.clock += 1;
        let kept = Kept {
            block,
            layout,
            age: slots.clock,
        };
        match slots.blocks.iter_mut().find(|slot| slot.is_none()) {
            Some(free) => {
                *free = Some(kept);
                slots.held += layout.size();
            }
            // Not reached (making room frees a slot), but never lost: the
            // extra place of `released` is still empty.
            None => {
                if let Some(place) = released.iter_mut().find(|place| place.is_none()) {
                    *place = Some((block, layout));
                }
            }
        }
        released
    }
}

impl Slots {
    /// Let the oldest blocks go until the held bytes, plus `incoming` (a
    /// block that also needs a free slot), fit under `limit`.
    fn make_room(&mut self, incoming: Option<usize>, limit: usize, released: &mut Released) {
        let mut places = released.iter_mut().filter(|place| place.is_none());
        loop {
            let needs_slot = incoming.is_some() && self.blocks.iter().all(Option::is_some);
            let over = self.held + incoming.unwrap_or(0) > limit;
            if !needs_slot && !over {
                return;
            }
            let oldest = self
                .blocks
                .iter_mut()
                .filter(|slot| slot.is_some())
                .min_by_key(|slot| slot.map_or(u64::MAX, |kept| kept.age));
            let Some(place) = places.next() else {
                return;
            };
            let Some(kept) = oldest.and_then(Option::take) else {
                return;
            };
            self.held -= kept.layout.size();
            *place = Some((kept.block, kept.layout));
        }
    }
}
