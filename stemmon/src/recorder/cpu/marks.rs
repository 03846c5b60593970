//! The entry figures of the calls open on each thread, and what each call adds at its
//! exit: the tree's growth (from [`Published`](super::Published)) and its thread's CPU.

use super::super::owned::OwnedGuard;
use super::super::tally::{CallCpu, CallMark, Clock, Mark, UNREAD};
use super::super::thread::{take_at, Frame, ThreadState, NO_MARK};
use super::super::Recorder;
use crate::memory::Usage;
use std::sync::atomic::Ordering;

/// At most this many calls per thread note their entry figures (each kind, sync and
/// async); deeper ones (only a runaway stack reaches this) count nothing.
const MAX_OPEN_MARKS: usize = NO_MARK as usize;

impl Recorder {
    /// The figures at the entry of a call now, with the generation read first.
    #[inline]
    fn cpu_mark(&self, generation: u64, thread: u64) -> Mark {
        Mark {
            generation,
            thread,
            tree: self.cpu_now.load(),
        }
    }

    /// Notes the figures at the entry of the sync call on top of `thread`'s stack: the
    /// newest mark, added first if the figures changed since it was taken.
    #[inline(always)]
    pub(in crate::recorder) fn cpu_enter(&self, thread: &mut ThreadState, now: u64) {
        let generation = self.cpu_now.generation();
        let cpu = &mut thread.cpu;
        let micros = cpu.clock(now, Clock::Window, self.reuse_ticks, self.thread_cpu);
        if !cpu.is_newest(generation, micros) {
            self.cpu_renew(thread, generation, micros);
        }
        let top = thread.cpu.top;
        if let Some(frame) = thread.stack.last_mut() {
            frame.mark = top;
        }
    }

    /// Adds the figures read now as the newest mark, after the marks no open frame
    /// holds (those past the highest an open frame has: frames up the stack have the
    /// same or later ones).
    #[cold]
    #[inline(never)]
    fn cpu_renew(&self, thread: &mut ThreadState, generation: u64, micros: u64) {
        let held = thread
            .stack
            .iter()
            .rev()
            .find(|frame| frame.mark != NO_MARK)
            .map_or(0, |frame| usize::from(frame.mark) + 1);
        let cpu = &mut thread.cpu;
        cpu.marks.truncate(held);
        if held >= MAX_OPEN_MARKS {
            // A runaway stack: this call counts nothing, and the next entry tries again.
            cpu.top = NO_MARK;
            cpu.top_generation = u64::MAX;
            return;
        }
        cpu.marks.push(self.cpu_mark(generation, micros));
        cpu.top = held as u16;
        cpu.top_generation = generation;
        cpu.top_micros = micros;
    }

    /// Adds to `frame`'s record's counters on `thread` the growth since its entry;
    /// `frame` was just taken off the stack. A call that entered with the newest mark
    /// and sees the same figures now had no growth (most short calls).
    #[inline(always)]
    pub(in crate::recorder) fn cpu_exit(
        &self,
        thread: &mut ThreadState,
        frame: &Frame,
        now: u64,
        clock: Clock,
    ) {
        if frame.mark == NO_MARK {
            return;
        }
        let generation = self.cpu_now.generation();
        let cpu = &mut thread.cpu;
        let micros = cpu.clock(now, clock, self.reuse_ticks, self.thread_cpu);
        if frame.mark != cpu.top || !cpu.is_newest(generation, micros) {
            self.cpu_count(thread, frame.mark, frame.record, micros);
        }
    }

    /// Adds the growth since the mark at `index` to `record`'s counters on `thread`.
    #[inline(never)]
    fn cpu_count(&self, thread: &mut ThreadState, index: u16, record: u32, micros: u64) {
        if let Some(&mark) = thread.cpu.mark(index) {
            self.cpu_add(thread, &mark, record, micros);
        }
    }

    /// Adds the growth since `mark` to `record`'s counters on `thread`.
    fn cpu_add(&self, thread: &mut ThreadState, mark: &Mark, record: u32, micros: u64) {
        let growth = self.cpu_growth(mark, self.cpu_now.load(), micros);
        thread.delta(record).cpu.add(&growth);
    }

    /// The growth from `mark` to the tree's figure `now` and the thread clock `micros`.
    fn cpu_growth(&self, mark: &Mark, now: Usage, micros: u64) -> CallCpu {
        let thread_read = micros != UNREAD && mark.thread != UNREAD;
        let thread_micros = if thread_read {
            micros.saturating_sub(mark.thread)
        } else {
            0
        };
        CallCpu {
            tree: now.minus(mark.tree),
            thread_micros,
            thread_read,
        }
    }

    /// Notes the figures at the entry of the async call `seq` of `record` on `thread`.
    pub(in crate::recorder) fn cpu_open(
        &self,
        thread: &mut ThreadState,
        seq: u64,
        record: u32,
        now: u64,
    ) {
        let cpu = &mut thread.cpu;
        if cpu.calls.len() >= MAX_OPEN_MARKS {
            return;
        }
        let generation = self.cpu_now.generation();
        let micros = cpu.clock(now, Clock::Window, self.reuse_ticks, self.thread_cpu);
        let mark = self.cpu_mark(generation, micros);
        cpu.calls.push(CallMark { seq, record, mark });
    }

    /// Adds to its record's counters on `thread` the growth since the async call `seq`
    /// opened.
    pub(in crate::recorder) fn cpu_close(
        &self,
        thread: &mut ThreadState,
        seq: u64,
        now: u64,
        clock: Clock,
    ) {
        let cpu = &mut thread.cpu;
        let Some(index) = cpu.calls.iter().rposition(|call| call.seq == seq) else {
            return;
        };
        let call = take_at(&mut cpu.calls, index);
        let micros = cpu.clock(now, clock, self.reuse_ticks, self.thread_cpu);
        if micros != call.mark.thread || self.cpu_now.generation() != call.mark.generation {
            self.cpu_add(thread, &call.mark, call.record, micros);
        }
    }

    /// The figures of the calls open now on the threads `held`, by record: the tree's
    /// growth since each entered, and its thread's CPU up to its last reading.
    pub(in crate::recorder) fn open_cpu_of(
        &self,
        held: &[OwnedGuard<'_, ThreadState>],
    ) -> Vec<CallCpu> {
        let mut open = Vec::new();
        if !self.cpu_now.read_once.load(Ordering::Relaxed) {
            return open;
        }
        let now = self.cpu_now.load();
        for thread in held {
            let cpu = &thread.cpu;
            let sync = thread.stack.iter().filter_map(|frame| {
                let mark = cpu.mark(frame.mark)?;
                Some((frame.record, mark))
            });
            let calls = cpu.calls.iter().map(|call| (call.record, &call.mark));
            for (record, mark) in sync.chain(calls) {
                let index = record as usize;
                if open.len() <= index {
                    open.resize(index + 1, CallCpu::ZERO);
                }
                open[index].add(&self.cpu_growth(mark, now, cpu.micros));
            }
        }
        open
    }
}
