//! The figures one call or one thread tallies on the call path, below everything that
//! moves them: a frame's mark of its thread's counters and a stage's delta of them, a
//! record's thread counts, the counters' growth of calls and the entry figures of a
//! thread's open calls, an open async call. The modules that update them (`threaded`,
//! `counters`, `calls`) and the thread's state that holds them (`thread`) all depend on
//! this one, and it on none of them.

use crate::sources::{Counts, Slot};
use std::sync::atomic::{AtomicU32, AtomicU64};

/// `SlotMark::slot` / `SlotDelta::slot` when there is nothing to count.
pub(super) const NONE: u32 = u32::MAX;

/// A frame's thread's counters (of the measurement of thread counters) at its entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotMark {
    /// The thread's counters (`None`: not counted) and their index: the exit on the
    /// same thread needs no thread-local lookup.
    pub(super) slot: Option<&'static Slot>,
    pub(super) index: u32,
    pub(super) at: Counts,
    /// The thread's peak before the frame lowered it.
    pub(super) saved_peak: i64,
    /// The frame is its thread's outermost, on a thread sweeps read (not the
    /// monitor's own): it tells them so at entry and exit.
    pub(super) tells_sweeps: bool,
}

impl SlotMark {
    /// Nothing noted.
    pub(crate) const NONE: SlotMark = SlotMark {
        slot: None,
        index: NONE,
        at: Counts::of([0; 3]),
        saved_peak: 0,
        tells_sweeps: false,
    };
}

/// A stage's thread counts on one thread, not yet merged into its record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotDelta {
    pub(super) slot: u32,
    pub(super) counts: Counts,
    /// The highest call peak.
    pub(super) peak: u64,
    /// The calls were the thread's outermost frames: their record's ancestors (open
    /// on other threads) count them too. (A record is outermost on a thread, or
    /// nested there under its parent, nearly always the same way each time; where it
    /// is both, its ancestors get all of the calls.)
    pub(super) outermost: bool,
}

impl SlotDelta {
    /// Nothing counted.
    pub(crate) const CLEAN: SlotDelta = SlotDelta {
        slot: NONE,
        counts: SlotMark::NONE.at,
        peak: 0,
        outermost: false,
    };
}

/// A record's thread counts, over every call and thread.
#[derive(Clone, Debug, Default)]
pub(crate) struct SlotTally {
    pub(super) counts: Counts,
    /// Per thread's counters, the highest peak in this stage.
    pub(super) peaks: Vec<(u32, u64)>,
}

impl SlotTally {
    pub(super) fn add(&mut self, counts: &Counts, slot: u32, peak: u64) {
        self.counts = self.counts.plus(counts);
        match self.peaks.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, highest)) => *highest = (*highest).max(peak),
            None => self.peaks.push((slot, peak)),
        }
    }

    /// The stage's peak: each thread's highest, summed.
    pub(super) fn peak(&self) -> u64 {
        self.peaks.iter().map(|(_, p)| p).sum()
    }
}

/// The most counters a measurement of counters may keep.
pub(crate) const MAX_COUNTERS: usize = 8;

/// The counters of the engine's measurement of counters, in its order (those past its
/// count stay 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters(pub(crate) [u64; MAX_COUNTERS]);

impl Counters {
    /// Nothing counted.
    pub(crate) const ZERO: Counters = Counters([0; MAX_COUNTERS]);

    /// `counters` as given by a measurement (past [`MAX_COUNTERS`], left out).
    pub(super) fn of(counters: &[u64]) -> Counters {
        let mut all = Counters::ZERO;
        for (slot, &counter) in all.0.iter_mut().zip(counters) {
            *slot = counter;
        }
        all
    }

    /// `self + other`, counter by counter (wrapping: counters are differenced later).
    #[inline]
    #[must_use]
    pub(super) fn plus(self, other: Counters) -> Counters {
        Counters(std::array::from_fn(|i| self.0[i].wrapping_add(other.0[i])))
    }

    /// `self - other`, counter by counter, never below zero.
    #[inline]
    #[must_use]
    pub(super) fn minus(self, other: Counters) -> Counters {
        Counters(std::array::from_fn(|i| {
            self.0[i].saturating_sub(other.0[i])
        }))
    }
}

/// What some calls tallied: the counters' growth while they were open, and their
/// threads' own clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tally {
    pub(crate) counters: Counters,
    pub(crate) thread_micros: u64,
    /// Some call's thread clock was read at both ends.
    pub(crate) thread_read: bool,
}

impl Tally {
    /// Nothing counted.
    pub(crate) const ZERO: Tally = Tally {
        counters: Counters::ZERO,
        thread_micros: 0,
        thread_read: false,
    };

    /// Adds `other`'s figures.
    #[inline]
    pub(super) fn add(&mut self, other: &Tally) {
        self.counters = self.counters.plus(other.counters);
        self.thread_micros = self.thread_micros.wrapping_add(other.thread_micros);
        self.thread_read |= other.thread_read;
    }
}

impl Default for Tally {
    fn default() -> Tally {
        Tally::ZERO
    }
}

/// The figures a call noted at its entry.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mark {
    /// [`Published`](super::counters::Published)'s generation when `counters` were
    /// read (read before them).
    pub(super) generation: u64,
    /// Its thread's clock, [`UNREAD`] where it cannot be read.
    pub(super) thread: u64,
    pub(super) counters: Counters,
}

/// The entry figures of an async call (its `OpenCall::seq`) of `record`.
#[derive(Clone, Copy, Debug)]
pub(super) struct CallMark {
    pub(super) seq: u64,
    pub(super) record: u32,
    pub(super) mark: Mark,
}

/// `Frame::mark` of a frame with no entry figures of the counters (a poll frame, a runaway stack).
pub(crate) const NO_MARK: u16 = u16::MAX;

/// A thread clock that could not be read (another platform).
pub(super) const UNREAD: u64 = u64::MAX;

/// One thread's clock as last read, and the entry figures of its open calls.
#[derive(Debug)]
pub(crate) struct ThreadMarks {
    /// Clock ticks of the last `RUSAGE_THREAD` reading (0: never read).
    pub(super) at: u64,
    /// That reading, in microseconds ([`UNREAD`] where it cannot be read).
    pub(super) micros: u64,
    /// The distinct entry figures of the sync calls open on this thread, oldest first,
    /// and the newest figures last ([`ThreadMarks::top`]). A call entering while the
    /// figures are still the newest mark's takes that mark's index (most calls do:
    /// nothing was read since the last one entered); only a call that sees new figures
    /// adds one, after dropping the marks no open frame holds. Frames up the stack have
    /// the same or later marks, so the list is never longer than the stack plus one.
    pub(super) marks: Vec<Mark>,
    /// The index of the newest mark ([`NO_MARK`](NO_MARK) before the
    /// first).
    pub(super) top: u16,
    /// The newest mark's generation and thread clock, beside the list: an entry and
    /// an exit compare them without reaching into it.
    pub(super) top_generation: u64,
    pub(super) top_micros: u64,
    /// The entry figures of the async calls this thread opened and nobody closed yet.
    pub(super) calls: Vec<CallMark>,
}

impl Default for ThreadMarks {
    fn default() -> ThreadMarks {
        ThreadMarks {
            at: 0,
            micros: 0,
            marks: Vec::new(),
            top: NO_MARK,
            // No generation is this one: the first entry adds the first mark.
            top_generation: u64::MAX,
            top_micros: UNREAD,
            calls: Vec::new(),
        }
    }
}

impl ThreadMarks {
    /// The mark at `index`, if there is one ([`NO_MARK`](NO_MARK):
    /// none).
    #[inline(always)]
    pub(super) fn mark(&self, index: u16) -> Option<&Mark> {
        self.marks.get(usize::from(index))
    }

    /// Whether `generation` and the thread clock `micros` are the newest mark's.
    #[inline(always)]
    pub(super) fn is_newest(&self, generation: u64, micros: u64) -> bool {
        generation == self.top_generation && micros == self.top_micros
    }

    /// The clock for a call's entry or exit at `now`, read anew when `clock` says so or
    /// when the last reading is older than `window` ticks.
    #[inline(always)]
    pub(super) fn clock(
        &mut self,
        now: u64,
        clock: Clock,
        window: u64,
        read: fn() -> Option<u64>,
    ) -> u64 {
        let stale = match clock {
            Clock::Kept => false,
            Clock::Fresh => true,
            Clock::Window => now.wrapping_sub(self.at) >= window,
        };
        if stale {
            self.refresh(now, read);
        }
        self.micros
    }

    #[cold]
    pub(super) fn refresh(&mut self, now: u64, read: fn() -> Option<u64>) {
        self.micros = read().unwrap_or(UNREAD);
        self.at = now;
    }
}

/// How an exit gets its thread's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// Read now (the exit takes the shared state anyway).
    Fresh,
    /// Reused when read within the reuse window.
    Window,
    /// Never read: the call closes on another thread than its own.
    Kept,
}

/// An async call started and not yet closed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenCall {
    /// The record the call counts toward.
    pub(crate) record: u32,
    /// Numbers the calls its thread opened, so each closes its own.
    pub(crate) seq: u64,
    /// Clock ticks at the open.
    pub(crate) started: u64,
    /// The slot id of the thread that opened it and keeps it.
    pub(crate) thread: u32,
}

/// What a thread keeps of the `tracing` spans it handles without the registry
/// (`span_calls.rs`).
#[derive(Debug, Default)]
pub(crate) struct Unregistered {
    /// The calls open on this thread for spans that have no extension: (call `seq`,
    /// span id). One at a time, in practice.
    pub(super) open: Vec<(u64, u64)>,
}

/// What other threads may read of a thread's spans without its lock.
#[derive(Debug, Default)]
pub(crate) struct Mirror {
    /// The span made on this thread most recently (0: none, opened, or claimed by
    /// another thread): its first enter here may open it without the registry. Set by
    /// the thread alone, without its lock; cleared under the lock.
    pub(super) made: AtomicU64,
    /// How many calls [`Unregistered::open`] holds.
    pub(super) open: AtomicU32,
}
