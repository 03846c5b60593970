//! The entry figures of the calls open on each thread, and what each call adds at its
//! exit: the counters' growth (from [`Published`](super::Published)) and its thread's
//! clock's.

use super::super::owned::OwnedGuard;
use super::super::tally::{CallMark, Clock, Counters, Mark, Tally, UNREAD};
use super::super::thread::{take_at, Frame, ThreadState, NO_MARK};
use super::CallCounters;
use std::sync::atomic::Ordering;

/// At most this many calls per thread note their entry figures (each kind, sync and
/// async); deeper ones (only a runaway stack reaches this) count nothing.
const MAX_OPEN_MARKS: usize = NO_MARK as usize;

impl CallCounters {
    /// The figures at the entry of a call now, with the generation read first.
    #[inline]
    fn mark_now(&self, generation: u64, thread: u64) -> Mark {
        Mark {
            generation,
            thread,
            counters: self.published.load(),
        }
    }

    /// Notes the figures at the entry of the sync call on top of `thread`'s stack: the
    /// newest mark, added first if the figures changed since it was taken.
    #[inline(always)]
    pub(in crate::recorder) fn enter(&self, thread: &mut ThreadState, now: u64) {
        let generation = self.published.generation();
        let marks = &mut thread.marks;
        let micros = marks.clock(now, Clock::Window, self.reuse_ticks, self.thread_clock);
        if !marks.is_newest(generation, micros) {
            self.renew_mark(thread, generation, micros);
        }
        let top = thread.marks.top;
        if let Some(frame) = thread.stack.last_mut() {
            frame.mark = top;
        }
    }

    /// Adds the figures read now as the newest mark, after the marks no open frame
    /// holds (those past the highest an open frame has: frames up the stack have the
    /// same or later ones).
    #[cold]
    #[inline(never)]
    fn renew_mark(&self, thread: &mut ThreadState, generation: u64, micros: u64) {
        let held = thread
            .stack
            .iter()
            .rev()
            .find(|frame| frame.mark != NO_MARK)
            .map_or(0, |frame| usize::from(frame.mark) + 1);
        let marks = &mut thread.marks;
        marks.marks.truncate(held);
        if held >= MAX_OPEN_MARKS {
            // A runaway stack: this call counts nothing, and the next entry tries again.
            marks.top = NO_MARK;
            marks.top_generation = u64::MAX;
            return;
        }
        marks.marks.push(self.mark_now(generation, micros));
        marks.top = held as u16;
        marks.top_generation = generation;
        marks.top_micros = micros;
    }

    /// Adds to `frame`'s record's counters on `thread` the growth since its entry;
    /// `frame` was just taken off the stack. A call that entered with the newest mark
    /// and sees the same figures now had no growth (most short calls).
    #[inline(always)]
    pub(in crate::recorder) fn exit(
        &self,
        thread: &mut ThreadState,
        frame: &Frame,
        now: u64,
        clock: Clock,
    ) {
        if frame.mark == NO_MARK {
            return;
        }
        let generation = self.published.generation();
        let marks = &mut thread.marks;
        let micros = marks.clock(now, clock, self.reuse_ticks, self.thread_clock);
        if frame.mark != marks.top || !marks.is_newest(generation, micros) {
            self.count_from(thread, frame.mark, frame.record, micros);
        }
    }

    /// Adds the growth since the mark at `index` to `record`'s counters on `thread`.
    #[inline(never)]
    fn count_from(&self, thread: &mut ThreadState, index: u16, record: u32, micros: u64) {
        if let Some(&mark) = thread.marks.mark(index) {
            self.count_since(thread, &mark, record, micros);
        }
    }

    /// Adds the growth since `mark` to `record`'s counters on `thread`.
    fn count_since(&self, thread: &mut ThreadState, mark: &Mark, record: u32, micros: u64) {
        let growth = self.growth(mark, self.published.load(), micros);
        thread.delta(record).counted.add(&growth);
    }

    /// The growth from `mark` to the tree's figure `now` and the thread clock `micros`.
    fn growth(&self, mark: &Mark, now: Counters, micros: u64) -> Tally {
        let thread_read = micros != UNREAD && mark.thread != UNREAD;
        let thread_micros = if thread_read {
            micros.saturating_sub(mark.thread)
        } else {
            0
        };
        Tally {
            counters: now.minus(mark.counters),
            thread_micros,
            thread_read,
        }
    }

    /// Notes the figures at the entry of the async call `seq` of `record` on `thread`.
    pub(in crate::recorder) fn open(
        &self,
        thread: &mut ThreadState,
        seq: u64,
        record: u32,
        now: u64,
    ) {
        let marks = &mut thread.marks;
        if marks.calls.len() >= MAX_OPEN_MARKS {
            return;
        }
        let generation = self.published.generation();
        let micros = marks.clock(now, Clock::Window, self.reuse_ticks, self.thread_clock);
        let mark = self.mark_now(generation, micros);
        marks.calls.push(CallMark { seq, record, mark });
    }

    /// Adds to its record's counters on `thread` the growth since the async call `seq`
    /// opened.
    pub(in crate::recorder) fn close(
        &self,
        thread: &mut ThreadState,
        seq: u64,
        now: u64,
        clock: Clock,
    ) {
        let marks = &mut thread.marks;
        let Some(index) = marks.calls.iter().rposition(|call| call.seq == seq) else {
            return;
        };
        let call = take_at(&mut marks.calls, index);
        let micros = marks.clock(now, clock, self.reuse_ticks, self.thread_clock);
        if micros != call.mark.thread || self.published.generation() != call.mark.generation {
            self.count_since(thread, &call.mark, call.record, micros);
        }
    }

    /// The figures of the calls open now on the threads `held`, by record: the tree's
    /// growth since each entered, and its thread's CPU up to its last reading.
    pub(in crate::recorder) fn open_of(&self, held: &[OwnedGuard<'_, ThreadState>]) -> Vec<Tally> {
        let mut open = Vec::new();
        if !self.published.read_once.load(Ordering::Relaxed) {
            return open;
        }
        let now = self.published.load();
        for thread in held {
            let marks = &thread.marks;
            let sync = thread.stack.iter().filter_map(|frame| {
                let mark = marks.mark(frame.mark)?;
                Some((frame.record, mark))
            });
            let calls = marks.calls.iter().map(|call| (call.record, &call.mark));
            for (record, mark) in sync.chain(calls) {
                let index = record as usize;
                if open.len() <= index {
                    open.resize(index + 1, Tally::ZERO);
                }
                open[index].add(&self.growth(mark, now, marks.micros));
            }
        }
        open
    }
}
