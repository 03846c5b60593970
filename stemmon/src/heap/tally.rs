//! One test's heap figures, counted by every thread attached to it: the allocator adds
//! each allocation and free of such a thread to the test's [`Tally`] as well as to the
//! thread's own slot. A thread outside any test pays one relaxed load of its own slot
//! and a branch.
//!
//! The tally's counters are shared atomics (read-modify-write: three an allocation, one
//! a free, one more at a new peak): several threads of one test allocate at once, and
//! the peak of the live bytes must be exact across them. Only threads of a test pay
//! for that.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

const R: Ordering = Ordering::Relaxed;

/// A test's heap figures since it began.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    allocations: AtomicU64,
    allocated: AtomicU64,
    /// Allocated minus freed (freed is the difference), one counter so that its highest
    /// is exact.
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
        // A new highest is rare: the read-modify-write only then.
        if live > self.peak.load(R) {
            self.peak.fetch_max(live, R);
        }
    }

    #[inline(always)]
    pub(crate) fn freed(&self, size: u64) {
        self.live.fetch_sub(size as i64, R);
    }

    /// The figures now.
    pub(crate) fn figures(&self) -> TallyFigures {
        let live = self.live.load(R);
        let allocated = self.allocated.load(R);
        TallyFigures {
            allocations: self.allocations.load(R),
            allocated,
            freed: (allocated as i64).wrapping_sub(live) as u64,
            live,
            peak: self.peak.load(R),
        }
    }

    /// How many threads started for the test are still alive.
    pub(crate) fn threads(&self) -> usize {
        self.threads.load(Ordering::Acquire)
    }

    /// A thread attached to it (one more holder).
    #[cfg_attr(not(any(feature = "testing", feature = "rayon")), allow(dead_code))] // threads a test starts
    pub(super) fn attached(&self) {
        self.threads.fetch_add(1, Ordering::Release);
    }

    /// A thread attached to it has exited.
    pub(super) fn detached(&self) {
        self.threads.fetch_sub(1, Ordering::Release);
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
