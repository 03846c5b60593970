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

    /// Notes the figures at the entry of the sync call on top of `thread`'s stack.
    #[inline(always)]
    pub(in crate::recorder) fn cpu_enter(&self, thread: &mut ThreadState, now: u64) {
        let generation = self.cpu_now.generation();
        let cpu = &mut thread.cpu;
        let micros = cpu.clock(now, Clock::Window, self.reuse_ticks, self.thread_cpu);
        let Some(frame) = thread.stack.last_mut() else {
            return;
        };
        let same = |mark: &Mark| mark.generation == generation && mark.thread == micros;
        let live = cpu.live;
        if live > 0 && cpu.marks.get(live - 1).is_some_and(same) {
            // No reading since the call below entered: its figures, shared.
            frame.mark = (live - 1) as u16;
            return;
        }
        if live >= MAX_OPEN_MARKS {
            return;
        }
        frame.mark = live as u16;
        cpu.live = live + 1;
        match cpu.marks.get_mut(live) {
            // The previous call at this depth saw the same figures: taken up again.
            Some(kept) if same(kept) => {}
            Some(kept) => *kept = self.cpu_mark(generation, micros),
            None => cpu.marks.push(self.cpu_mark(generation, micros)),
        }
    }

    /// Adds to `frame`'s record's counters on `thread` the growth since its entry;
    /// `frame` was just taken off the stack at `index`.
    #[inline(always)]
    pub(in crate::recorder) fn cpu_exit(
        &self,
        thread: &mut ThreadState,
        index: usize,
        frame: &Frame,
        now: u64,
        clock: Clock,
    ) {
        let cpu = &mut thread.cpu;
        let Some(mark) = cpu.live_mark(frame.mark) else {
            return;
        };
        let (generation, entry) = (mark.generation, mark.thread);
        let micros = cpu.clock(now, clock, self.reuse_ticks, self.thread_cpu);
        // The common case of a short call: no reading in between, nothing to count.
        if micros != entry || self.cpu_now.generation() != generation {
            self.cpu_count(thread, frame.mark, frame.record, micros);
        }
        if index == thread.stack.len() {
            // The marks below the new top stay live (this call's own, if it pushed
            // one, is kept for the next call at this depth).
            thread.cpu.live = thread
                .stack
                .iter()
                .rev()
                .find(|below| below.mark != NO_MARK)
                .map_or(0, |below| usize::from(below.mark) + 1);
        } else {
            Self::cpu_drop_mark(thread, frame.mark);
        }
    }

    /// The mark of a frame taken off below the top of the stack: off the marks if no
    /// other frame has it, the later ones renumbered.
    #[cold]
    fn cpu_drop_mark(thread: &mut ThreadState, mark: u16) {
        if thread.stack.iter().any(|frame| frame.mark == mark) {
            return;
        }
        let cpu = &mut thread.cpu;
        if usize::from(mark) < cpu.live {
            cpu.marks.remove(usize::from(mark));
            cpu.live -= 1;
        }
        for frame in &mut thread.stack {
            if frame.mark != NO_MARK && frame.mark > mark {
                frame.mark -= 1;
            }
        }
    }

    /// Adds the growth since the mark at `index` to `record`'s counters on `thread`.
    #[inline(never)]
    fn cpu_count(&self, thread: &mut ThreadState, index: u16, record: u32, micros: u64) {
        if let Some(&mark) = thread.cpu.live_mark(index) {
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
                let mark = cpu.live_mark(frame.mark)?;
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
