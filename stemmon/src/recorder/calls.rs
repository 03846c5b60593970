//! Calls open apart from a thread's stack: an `async` stage (or a `tracing` span) is
//! opened once, entered for each poll on whichever thread polls it, and closed from
//! any thread. Also the list of every call open now, for samples and snapshots.
//!
//! A call is kept by the thread that opened it, in that thread's own state: opened
//! and closed there, it costs what a sync call does (its counts go to the thread's
//! delta; the shared state only when the boundary reading is not reused, or the close
//! is not quiet). A close on another thread takes the shared state.

use super::owned::OwnedGuard;
use super::tally::OpenCall;

use super::thread::{ThreadSlot, ThreadState, NO_PARENT, POLL};
use super::{seconds, OpenStage, Recorder, StageName};
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where a call opened apart from the thread's stack nests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parent {
    /// Under the stage open on this thread, or, on an idle thread, under the stage open
    /// on the monitor's own thread (fork-join); at the top level if neither.
    Here,
    /// Under this record (a span's parent span); but where the thread is, as `Here`,
    /// when a call of it is open on this thread now, so that a `#[monitored]` call
    /// between them stays in the path.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the `tracing` layer's
    Record(u32),
}

/// `OpenCall::seq` of a call folded into its directly recursive parent, or opened after
/// the end: real calls count from 1, and `close_async` ignores this one.
const FOLDED: u64 = 0;

pub(crate) use crate::sources::OpenFrame;

impl Recorder {
    /// Starts an async call of `name` on `slot`'s thread, nested as `parent` says. The
    /// call's path is fixed here, whichever threads poll it later. Direct recursion
    /// (the thread's innermost open call has the same name, and `parent` says to nest
    /// here) folds into that call, as in `enter`: counted, timed once, and
    /// `close_async` ignores it.
    pub(crate) fn open_async(
        &self,
        slot: &ThreadSlot,
        name: StageName,
        parent: Parent,
    ) -> OpenCall {
        self.open(slot, name, parent, false).0
    }

    /// `open_async`, then `push_poll` of the call, under one lock of the thread.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the `tracing` layer's
    pub(crate) fn open_and_poll(
        &self,
        slot: &ThreadSlot,
        name: StageName,
        parent: Parent,
    ) -> (OpenCall, Option<u32>) {
        self.open(slot, name, parent, true)
    }

    #[inline]
    fn open(
        &self,
        slot: &ThreadSlot,
        name: StageName,
        parent: Parent,
        poll: bool,
    ) -> (OpenCall, Option<u32>) {
        let now = self.clock.raw();
        let mut thread = slot.lock();
        self.open_locked(slot, &mut thread, name, parent, poll, now)
    }

    /// [`Recorder::open`] on `slot`'s state, taken by the caller, at `now`.
    #[inline]
    pub(super) fn open_locked(
        &self,
        slot: &ThreadSlot,
        thread: &mut ThreadState,
        name: StageName,
        parent: Parent,
        poll: bool,
        now: u64,
    ) -> (OpenCall, Option<u32>) {
        let ignored = OpenCall {
            record: NO_PARENT,
            seq: FOLDED,
            started: now,
            thread: slot.id,
        };
        if self.is_ended() {
            // Nothing records any more; `close_async` will drop this call.
            return (ignored, None);
        }
        let parent = match parent {
            Parent::Record(record) if !thread.has_open(record) => Some(record),
            _ => None,
        };
        let record = match parent {
            Some(parent) => self.record_under(thread, parent, &name, now),
            None => {
                // Direct recursion folds into the open call, as in `enter`.
                if let Some(top) = thread.stack.last() {
                    let record = top.record;
                    if thread.is_named(record, &name) {
                        thread.delta(record).calls += 1;
                        let poll = poll.then(|| self.push(slot, thread, record));
                        return (OpenCall { record, ..ignored }, poll);
                    }
                }
                self.record_here(slot, thread, &name, now)
            }
        };
        let call = thread.open_call(record, now, slot.id);
        let poll = poll.then(|| self.push(slot, thread, record));
        self.count_entry(thread, record, now);
        self.counters.open(thread, call.seq, record, now);
        (call, poll)
    }

    /// Pushes the poll frame of `record`; on the monitor's own thread it is where idle
    /// threads nest (fork-join).
    #[inline]
    fn push(&self, slot: &ThreadSlot, thread: &mut ThreadState, record: u32) -> u32 {
        if slot.id == 0 {
            self.owner_top.0.store(record + 1, Ordering::Relaxed);
        }
        let seq = thread.push(record, POLL);
        super::threaded::entered(thread, slot.id != 0, self.counted_threads);
        seq
    }

    /// Enters the async call of `record` for one poll on `slot`'s thread: stages
    /// entered meanwhile nest under it, and on the monitor's own thread, so do stages
    /// entered on idle threads (fork-join). Returns the frame for [`Recorder::pop_poll`].
    #[inline]
    pub(crate) fn push_poll(&self, slot: &ThreadSlot, record: u32) -> Option<u32> {
        let mut thread = slot.lock();
        if self.is_ended() {
            return None;
        }
        Some(self.push(slot, &mut thread, record))
    }

    /// Leaves the poll `push_poll` entered (wherever it sits on the stack now).
    #[inline]
    pub(crate) fn pop_poll(&self, slot: &ThreadSlot, seq: u32) {
        let mut thread = slot.lock();
        if let Some(index) = thread.position(seq) {
            let frame = thread.remove_frame(index);
            super::threaded::exited(&mut thread, &frame);
            if slot.id == 0 {
                let top = thread.stack.last().map_or(0, |top| top.record + 1);
                self.owner_top.0.store(top, Ordering::Relaxed);
            }
        }
    }

    /// Closes an async call on the thread of `slot` (`None`: a thread this monitor does
    /// not cover); `error` says how it failed, if it did. It gets the exit reading and
    /// every interval closed since it opened, as a sync call does, so a short call gets
    /// its exact peak. Closed on the thread that opened it, a quiet call (no error,
    /// shorter than the reuse window, its reading reused, not its thread's first of the
    /// stage) stays in the thread's counters, as in `exit`.
    #[inline]
    pub(crate) fn close_async(
        &self,
        slot: Option<&ThreadSlot>,
        call: OpenCall,
        error: Option<Cow<'static, str>>,
    ) {
        if call.seq == FOLDED {
            return;
        }
        match slot {
            Some(slot) if slot.id == call.thread => {
                self.close_here(slot, call, error);
            }
            _ => self.close_elsewhere(call, error),
        }
    }

    /// Closes `call` if `slot`'s thread opened it and it is open there now; false (and
    /// nothing done) otherwise, so a caller that remembered the call may be wrong.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the `tracing` layer's
    #[inline]
    pub(crate) fn close_if_open_here(
        &self,
        slot: &ThreadSlot,
        call: OpenCall,
        error: Option<Cow<'static, str>>,
    ) -> bool {
        call.seq != FOLDED && slot.id == call.thread && self.close_here(slot, call, error)
    }

    /// Closes `call` on the thread that opened it; false if it was not open there.
    #[inline]
    fn close_here(
        &self,
        slot: &ThreadSlot,
        call: OpenCall,
        error: Option<Cow<'static, str>>,
    ) -> bool {
        let now = self.clock.raw();
        let mut thread = slot.lock();
        if self.is_ended() {
            return true;
        }
        if !thread.close_call(call.seq) {
            return false;
        }
        self.closed_span(slot, &mut thread, call.seq);
        let ticks = now.saturating_sub(call.started);
        let delta = thread.delta(call.record);
        delta.completed += 1;
        delta.wall_ticks += ticks;
        delta.min_ticks = delta.min_ticks.min(ticks);
        delta.max_ticks = delta.max_ticks.max(ticks);
        let reuse = now.wrapping_sub(self.boundary_at.0.load(Ordering::Relaxed)) < self.reuse_ticks;
        // As in `exit`: only a call shorter than the reuse window may skip the shared state.
        let quiet = error.is_none() && ticks < self.reuse_ticks;
        if quiet && reuse && thread.has_completed(call.record) {
            thread.delta(call.record).saw_boundary = true;
            self.counters
                .close(&mut thread, call.seq, now, super::counters::Clock::Window);
            return true;
        }
        thread.mark_completed(call.record);
        let mut state = self.lock();
        self.merge(&mut state, &mut thread);
        let edge = super::Edge::exit_after(self.clock.delta_as_nanos(0, ticks));
        self.boundary_reading(&mut state, &thread, now, call.record, edge);
        self.counters
            .close(&mut thread, call.seq, now, super::counters::Clock::Fresh);
        state.call_closed(call.record, call.started);
        let message = state.finish_call(call.record, self.clock.delta_as_nanos(0, ticks), error);
        if let Some(message) = message {
            let stage = OpenStage::on_thread(&thread.stack, slot.id);
            drop(state);
            drop(thread);
            self.log_event(message, stage);
        }
        true
    }

    /// Closes `call` on a thread other than the one that keeps it.
    #[cold]
    fn close_elsewhere(&self, call: OpenCall, error: Option<Cow<'static, str>>) {
        let Some(home) = self
            .lock_threads()
            .get(call.thread as usize)
            .map(Arc::clone)
        else {
            return;
        };
        let now = self.clock.raw();
        let nanos = self.clock.delta_as_nanos(call.started, now);
        // Its thread's calls are closed elsewhere: from now on it takes its state
        // through the mutex, and this close (and the next) costs no barrier.
        let mut thread = home.lock_for_good();
        if self.is_ended() || !thread.close_call(call.seq) {
            return;
        }
        self.closed_span(&home, &mut thread, call.seq);
        self.counters
            .close(&mut thread, call.seq, now, super::counters::Clock::Kept);
        let mut state = self.lock();
        // The open's count first, so the record never has more completed than calls.
        self.merge(&mut state, &mut thread);
        drop(thread);
        // No stack here: the stacks that overlapped get the interval at their own exits
        // or at the next sample.
        let edge = super::Edge::exit_after(nanos);
        self.boundary_reading(&mut state, &ThreadState::default(), now, call.record, edge);
        state.call_closed(call.record, call.started);
        state.records.get_mut(call.record).complete(seconds(nanos));
        let message = state.finish_call(call.record, nanos, error);
        drop(state);
        if let Some(message) = message {
            self.log_event(message, OpenStage::OwnerNow);
        }
    }

    /// The calls open on every thread now, async calls timed from their start; poll
    /// frames count as open, untimed.
    #[cfg(test)]
    pub(super) fn open_calls(&self) -> Vec<OpenFrame> {
        let mut open = Vec::new();
        self.open_calls_into(&mut open);
        open
    }

    /// [`Recorder::open_calls`] into `open`, emptied first: a sample reuses its lists.
    pub(super) fn open_calls_into(&self, open: &mut Vec<OpenFrame>) {
        // Threads, then each slot: the order a snapshot takes them in.
        let threads = self.lock_threads();
        open_calls_of(&ThreadSlot::lock_all(&threads), open);
    }
}

/// The calls open on the threads `held`, into `open`, emptied first.
pub(super) fn open_calls_of(held: &[OwnedGuard<'_, ThreadState>], open: &mut Vec<OpenFrame>) {
    open.clear();
    for thread in held {
        open.extend(thread.stack.iter().map(|frame| OpenFrame {
            record: frame.record,
            entered: frame.entered,
        }));
        open.extend(thread.open_calls().map(|call| OpenFrame {
            record: call.record,
            entered: call.started,
        }));
    }
}

impl ThreadState {
    /// Whether a call of `record` (or a poll of it) is on this thread's stack now.
    #[inline]
    pub(super) fn has_open(&self, record: u32) -> bool {
        self.stack.iter().any(|frame| frame.record == record)
    }
}

impl ThreadSlot {
    /// Whether a call of `record` (or a poll of it) is on this thread's stack now.
    #[cfg(test)]
    pub(super) fn has_open(&self, record: u32) -> bool {
        self.lock().has_open(record)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use super::*;

    #[test]
    fn an_async_call_is_open_until_closed_and_counts_its_whole_length() {
        let rig = Rig::new();
        let (main, worker) = (rig.thread(), rig.thread());
        let call = rig.recorder.open_async(&main, "fetch".into(), Parent::Here);
        rig.advance_micros(3_000);
        let report = rig.recorder.snapshot();
        let fetch = report.stage("fetch").unwrap();
        assert_eq!(fetch.calls, 1);
        assert_eq!(fetch.wall_seconds, 3e-3, "open, counted up to now");
        // Polled on another thread: a stage there nests under the call.
        let poll = rig.recorder.push_poll(&worker, call.record).unwrap();
        assert!(worker.has_open(call.record) && !main.has_open(call.record));
        let parse = rig.recorder.enter(&worker, "parse".into());
        rig.advance_micros(1_000);
        rig.recorder.exit(&worker, parse);
        rig.recorder.pop_poll(&worker, poll);
        assert!(!worker.has_open(call.record));
        rig.advance_micros(1_000);
        rig.recorder.close_async(None, call, None);
        let report = rig.recorder.snapshot();
        let fetch = report.stage("fetch").unwrap();
        assert_eq!((fetch.calls, fetch.errors), (1, 0));
        assert_eq!(fetch.wall_seconds, 5e-3);
        assert_eq!(report.stage("fetch/parse").unwrap().calls, 1);
        assert!(rig.recorder.open_calls().is_empty());
        // A call dropped before it completed counts as a failed one.
        let cancelled = rig
            .recorder
            .open_async(&worker, "fetch".into(), Parent::Here);
        rig.recorder
            .close_async(None, cancelled, Some("cancelled".into()));
        let fetch = rig.recorder.snapshot().stage("fetch").unwrap().clone();
        assert_eq!((fetch.calls, fetch.errors), (2, 1));
        assert_eq!(fetch.error.as_deref(), Some("cancelled"));
    }

    #[test]
    fn an_async_call_nests_where_its_parent_says() {
        let rig = Rig::new();
        let (main, worker) = (rig.thread(), rig.thread());
        let fit = rig.recorder.enter(&main, "fit".into());
        let forked = rig
            .recorder
            .open_async(&worker, "task".into(), Parent::Here);
        let load = rig.recorder.enter(&worker, "load".into());
        let here = rig
            .recorder
            .open_async(&worker, "read".into(), Parent::Here);
        let under = rig
            .recorder
            .open_async(&worker, "span".into(), Parent::Record(forked.record));
        rig.recorder.exit(&worker, load);
        rig.recorder.exit(&main, fit);
        let late = rig
            .recorder
            .open_async(&worker, "task".into(), Parent::Here);
        for call in [forked, here, under, late] {
            rig.recorder.close_async(None, call, None);
        }
        let report = rig.recorder.snapshot();
        let paths: Vec<&str> = report.stages.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "fit",
                "fit/task",
                "fit/load",
                "fit/load/read",
                "fit/task/span",
                "task"
            ]
        );
        assert_eq!(report.stage("fit/task").unwrap().threads, 1);
    }

    #[test]
    fn a_poll_frame_is_not_timed_and_nothing_opens_after_the_end() {
        let rig = Rig::new();
        let main = rig.thread();
        let call = rig.recorder.open_async(&main, "fetch".into(), Parent::Here);
        let poll = rig.recorder.push_poll(&main, call.record).unwrap();
        rig.advance_micros(2_000);
        let report = rig.recorder.snapshot();
        assert_eq!(
            report.stage("fetch").unwrap().wall_seconds,
            2e-3,
            "timed once"
        );
        rig.recorder.pop_poll(&main, poll);
        rig.recorder.end(None);
        assert_eq!(rig.recorder.push_poll(&main, call.record), None);
        let late = rig.recorder.open_async(&main, "late".into(), Parent::Here);
        rig.recorder.close_async(None, late, None);
        rig.recorder.close_async(None, call, None);
        let report = rig.recorder.snapshot();
        assert!(report.stage("late").is_none());
        assert_eq!(report.stage("fetch").unwrap().calls, 1);
    }

    #[test]
    fn direct_recursion_folds_into_the_open_call_and_its_close_is_ignored() {
        let rig = Rig::new();
        let main = rig.thread();
        // Into a poll frame of an async call (a recursive span or `async fn`)...
        let outer = rig.recorder.open_async(&main, "walk".into(), Parent::Here);
        let poll = rig.recorder.push_poll(&main, outer.record).unwrap();
        let inner = rig.recorder.open_async(&main, "walk".into(), Parent::Here);
        assert_eq!(inner.record, outer.record);
        rig.advance_micros(10);
        rig.recorder
            .close_async(None, inner, Some("cancelled".into()));
        rig.advance_micros(10);
        rig.recorder.pop_poll(&main, poll);
        rig.recorder.close_async(None, outer, None);
        // ...and into a sync call.
        let sync = rig.recorder.enter(&main, "walk".into());
        let nested = rig.recorder.open_async(&main, "walk".into(), Parent::Here);
        rig.advance_micros(10);
        rig.recorder.close_async(None, nested, None);
        rig.recorder.exit(&main, sync);
        let report = rig.recorder.snapshot();
        assert!(report.stage("walk/walk").is_none(), "{:?}", report.stages);
        let walk = report.stage("walk").unwrap();
        assert_eq!(
            (walk.calls, walk.errors),
            (4, 0),
            "a folded close is ignored"
        );
        assert!(
            (walk.wall_seconds - 30e-6).abs() < 1e-12,
            "timed once: {}",
            walk.wall_seconds
        );
        assert!(rig.recorder.open_calls().is_empty());
        // A parent given by record folds only where it is open: a span under a span of
        // its name, entered here, is a recursion; on another thread it is not.
        let worker = rig.thread();
        let outer = rig.recorder.open_async(&main, "walk".into(), Parent::Here);
        let poll = rig.recorder.push_poll(&main, outer.record).unwrap();
        let here = rig
            .recorder
            .open_async(&main, "walk".into(), Parent::Record(outer.record));
        assert_eq!(here.record, outer.record);
        let there = rig
            .recorder
            .open_async(&worker, "walk".into(), Parent::Record(outer.record));
        assert_ne!(there.record, outer.record);
        rig.recorder.close_async(Some(&worker), there, None);
        rig.recorder.close_async(Some(&main), here, None);
        rig.recorder.pop_poll(&main, poll);
        rig.recorder.close_async(Some(&main), outer, None);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("walk").unwrap().calls, 6);
        assert_eq!(report.stage("walk/walk").unwrap().calls, 1);
    }

    #[test]
    fn a_poll_on_the_monitors_thread_is_where_idle_threads_nest() {
        let rig = Rig::new();
        let (main, worker) = (rig.thread(), rig.thread());
        let fit = rig.recorder.open_async(&main, "fit".into(), Parent::Here);
        let poll = rig.recorder.push_poll(&main, fit.record).unwrap();
        let during = rig.recorder.enter(&worker, "predict".into());
        rig.recorder.exit(&worker, during);
        // A poll on another thread is not the monitor's: it moves nothing there.
        let other = rig
            .recorder
            .open_async(&worker, "other".into(), Parent::Here);
        let elsewhere = rig.recorder.push_poll(&worker, other.record).unwrap();
        rig.recorder.pop_poll(&worker, elsewhere);
        rig.recorder.close_async(None, other, None);
        rig.recorder.pop_poll(&main, poll);
        let after = rig.recorder.enter(&worker, "predict".into());
        rig.recorder.exit(&worker, after);
        rig.recorder.close_async(None, fit, None);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("fit/predict").unwrap().calls, 1, "fork-join");
        assert_eq!(report.stage("fit/other").unwrap().calls, 1);
        assert_eq!(report.stage("predict").unwrap().calls, 1, "after the poll");
    }

    #[test]
    fn a_short_async_call_gets_its_exit_reading_and_the_intervals_since_it_opened() {
        let rig = Rig::new();
        let (main, worker) = (rig.thread(), rig.thread());
        rig.set_self(10 << 20, Some(10 << 20));
        let call = rig.recorder.open_async(&main, "span".into(), Parent::Here);
        rig.advance_micros(2_000);
        // A spike in the call's own interval: its exit reading closes it.
        rig.set_self(20 << 20, Some(300 << 20));
        rig.recorder.close_async(None, call, None);
        let report = rig.recorder.snapshot();
        let span = report.stage("span").unwrap();
        assert_eq!(span.high_water.peak_parent_hwm_bytes, Some(300 << 20));
        assert_eq!(span.peaks.peak_parent_rss_bytes, Some(20 << 20));
        // An interval another thread's reading closed while the call was open.
        rig.advance_micros(2_000);
        rig.set_self(10 << 20, Some(10 << 20));
        let call = rig.recorder.open_async(&main, "short".into(), Parent::Here);
        rig.advance_micros(2_000);
        rig.set_self(10 << 20, Some(900 << 20));
        let other = rig.recorder.enter(&worker, "other".into());
        rig.recorder.exit(&worker, other);
        rig.advance_micros(100);
        rig.set_self(10 << 20, Some(10 << 20));
        rig.recorder.close_async(None, call, None);
        let hwm = rig
            .recorder
            .snapshot()
            .stage("short")
            .unwrap()
            .high_water
            .peak_parent_hwm_bytes;
        assert_eq!(hwm, Some(900 << 20), "the exit reading was reused");
    }

    #[test]
    fn a_quiet_call_closed_on_its_own_thread_stays_in_its_counters() {
        let rig = Rig::new();
        let main = rig.thread();
        let first = rig.recorder.open_async(&main, "span".into(), Parent::Here);
        assert_eq!(rig.self_reads(), 1, "a fresh reading at the first open");
        rig.advance_micros(100);
        rig.recorder.close_async(Some(&main), first, None);
        let later: Vec<OpenCall> = (0..3)
            .map(|_| {
                let call = rig.recorder.open_async(&main, "span".into(), Parent::Here);
                rig.advance_micros(100);
                rig.recorder.close_async(Some(&main), call, None);
                call
            })
            .collect();
        assert_eq!(rig.self_reads(), 1, "reused: nothing read again");
        // Counted in the thread's delta until a merge: not in the shared record yet.
        assert_eq!(
            rig.recorder.lock().records.get(later[0].record).completed,
            1
        );
        let report = rig.recorder.snapshot();
        let span = report.stage("span").unwrap();
        assert_eq!((span.calls, span.threads, span.errors), (4, 1, 0));
        assert!(
            (span.wall_seconds - 400e-6).abs() < 1e-12,
            "{}",
            span.wall_seconds
        );
        assert!((span.max_wall_seconds - 100e-6).abs() < 1e-12);
        assert_eq!(span.peaks.peak_parent_rss_bytes, Some(1 << 20));
        // A closed call closes once: again, from anywhere, it is ignored.
        rig.recorder
            .close_async(Some(&main), later[1], Some("late".into()));
        rig.recorder
            .close_async(None, later[2], Some("late".into()));
        let span = rig.recorder.snapshot().stage("span").unwrap().clone();
        assert_eq!((span.calls, span.errors), (4, 0));
    }

    #[test]
    fn a_call_closed_on_another_thread_or_left_open_is_never_lost() {
        let rig = Rig::new();
        let (main, worker, other) = (rig.thread(), rig.thread(), rig.thread());
        let moved = rig
            .recorder
            .open_async(&worker, "task".into(), Parent::Here);
        rig.recorder
            .open_async(&worker, "task".into(), Parent::Here);
        // The worker exits: its counts are merged, its open calls stay open.
        rig.recorder.thread_exited(&worker);
        rig.advance_micros(2_000);
        rig.recorder.close_async(Some(&other), moved, None);
        let report = rig.recorder.snapshot();
        let task = report.stage("task").unwrap();
        assert_eq!((task.calls, task.threads), (2, 1));
        assert!(
            (task.wall_seconds - 4e-3).abs() < 1e-12,
            "one closed, one open: {}",
            task.wall_seconds
        );
        assert_eq!(rig.recorder.open_calls().len(), 1);
        // A failure closed on its own thread takes the slow path: the record has it now.
        let failed = rig.recorder.open_async(&main, "task".into(), Parent::Here);
        rig.recorder
            .close_async(Some(&main), failed, Some("cancelled".into()));
        let record = rig.recorder.lock().records.get(failed.record).errors;
        assert_eq!(record, 1);
        rig.recorder.end(None);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("task").unwrap().calls, 3);
        assert_eq!(
            rig.recorder.open_calls().len(),
            1,
            "reported open at the end"
        );
    }
}
