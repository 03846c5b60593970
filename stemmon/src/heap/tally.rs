//! One test's heap figures, counted by every thread attached to it: the allocator adds
//! each allocation and free of such a thread to the test's [`Tally`] as well as to the
//! thread's own slot. A thread outside any test pays one relaxed load of its own slot
//! and a branch.
//!
//! The tally's counters are shared atomics (read-modify-write): several threads of one
//! test allocate at once, and the peak of the live bytes must be exact across them.
//! Only threads of a test pay for that.

use super::slots::{self, Slot};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

const R: Ordering = Ordering::Relaxed;

/// A test's heap figures since it began.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    allocations: AtomicU64,
    allocated: AtomicU64,
    freed: AtomicU64,
    /// Allocated minus freed, kept as one counter so that its highest is exact.
    live: AtomicI64,
    peak: AtomicI64,
    /// Threads that hold a reference to it (attached at their start), alive now.
    threads: AtomicUsize,
}

/// A tally's figures at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TallyFigures {
    pub(crate) allocations: u64,
    pub(crate) allocated: u64,
    pub(crate) freed: u64,
    pub(crate) live: i64,
    pub(crate) peak: i64,
}

impl Tally {
    #[inline(always)]
    pub(crate) fn allocated(&self, size: u64) {
        self.allocations.fetch_add(1, R);
        self.allocated.fetch_add(size, R);
        let live = self.live.fetch_add(size as i64, R) + size as i64;
        self.peak.fetch_max(live, R);
    }

    #[inline(always)]
    pub(crate) fn freed(&self, size: u64) {
        self.freed.fetch_add(size, R);
        self.live.fetch_sub(size as i64, R);
    }

    /// The figures now.
    pub(crate) fn figures(&self) -> TallyFigures {
        TallyFigures {
            allocations: self.allocations.load(R),
            allocated: self.allocated.load(R),
            freed: self.freed.load(R),
            live: self.live.load(R),
            peak: self.peak.load(R),
        }
    }

    /// How many threads started for the test are still alive.
    pub(crate) fn threads(&self) -> usize {
        self.threads.load(Ordering::Acquire)
    }

    /// A thread attached to it has exited.
    pub(super) fn detached(&self) {
        self.threads.fetch_sub(1, Ordering::Release);
    }
}

/// The calling thread's slot, if `stemmon::Alloc` counts it on a slot of its own.
fn slot() -> Option<&'static Slot> {
    slots::this_thread().map(|(_, slot)| slot)
}

/// The tally the calling thread counts into now, if any: what a thread it starts
/// inherits.
pub(crate) fn current() -> Option<Arc<Tally>> {
    let ptr = slot()?.tally();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a slot's tally is either the one a live guard on this thread holds, or
    // one this thread holds a reference to (`attach`), released only when it exits:
    // the count is above zero while we read it.
    unsafe {
        Arc::increment_strong_count(ptr);
        Some(Arc::from_raw(ptr))
    }
}

/// Counts the calling thread into `tally` until it exits (a thread a test started);
/// the thread holds `tally` till then. `false` (and `tally` dropped) where the thread
/// has no slot of its own or already counts for a test.
pub(crate) fn attach(tally: Arc<Tally>) -> bool {
    let Some(slot) = slot() else { return false };
    if !slot.tally().is_null() {
        return false;
    }
    tally.threads.fetch_add(1, Ordering::Release);
    slot.hold(Arc::into_raw(tally));
    true
}

/// Counts the calling thread into `tally` until [`leave`]; the caller keeps `tally`
/// alive until then. Returns what the thread counted into before, for `leave`; `None`
/// where the thread has no slot of its own (no `stemmon::Alloc`).
pub(crate) fn enter(tally: &Arc<Tally>) -> Option<*const Tally> {
    let slot = slot()?;
    let before = slot.tally();
    slot.set_tally(Arc::as_ptr(tally));
    Some(before)
}

/// Undoes [`enter`].
pub(crate) fn leave(before: *const Tally) {
    if let Some(slot) = slot() {
        slot.set_tally(before);
    }
}

/// While it lives, the calling thread's allocations count for no test: the engine's
/// own bookkeeping inside a test (a stage's record) is not the test's heap.
pub(crate) struct Paused(Option<(&'static Slot, *const Tally)>);

/// Pauses the calling thread's test, if it has one, until the guard drops.
#[inline]
pub(crate) fn pause() -> Paused {
    Paused(slot().and_then(|slot| {
        let tally = slot.tally();
        (!tally.is_null()).then(|| {
            slot.set_tally(std::ptr::null());
            (slot, tally)
        })
    }))
}

impl Drop for Paused {
    #[inline]
    fn drop(&mut self) {
        if let Some((slot, tally)) = self.0 {
            slot.set_tally(tally);
        }
    }
}

/// Releases the reference an exiting thread held (from its slot's destructor).
pub(super) fn release(held: *const Tally) {
    // SAFETY: `held` came from `Arc::into_raw` in `attach`, and is released once: the
    // slot forgot it before calling this.
    let tally = unsafe { Arc::from_raw(held) };
    tally.detached();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_the_highest_live_and_frees_lower_live_only() {
        let tally = Tally::default();
        tally.allocated(100);
        tally.allocated(50);
        tally.freed(120);
        tally.allocated(10);
        let f = tally.figures();
        assert_eq!((f.allocations, f.allocated, f.freed), (3, 160, 120));
        assert_eq!((f.live, f.peak), (40, 150));
    }
}
