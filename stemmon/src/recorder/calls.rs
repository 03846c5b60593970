//! Calls open apart from a thread's stack: an `async` stage (or a `tracing` span) is
//! opened once, entered for each poll on whichever thread polls it, and closed from
//! any thread. Also the list of every call open now, for samples and snapshots.

use super::thread::{ThreadSlot, NO_PARENT, POLL};
use super::{seconds, OpenStage, Recorder, StageName};
use std::borrow::Cow;

/// Where a call opened apart from the thread's stack nests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parent {
    /// Under the stage open on this thread, or, on an idle thread, under the stage open
    /// on the monitor's own thread (fork-join); at the top level if neither.
    Here,
    /// Under this record, whatever this thread has open (a span's parent span).
    #[cfg_attr(not(test), allow(dead_code))] // for the `tracing` layer
    Record(u32),
}

/// An async call started and not yet closed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenCall {
    /// The record the call counts toward.
    pub(crate) record: u32,
    /// Numbers the recorder's async calls, so each closes its own.
    pub(crate) seq: u64,
    /// Clock ticks at the open.
    pub(crate) started: u64,
}

/// A call open now, on a thread's stack or apart from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpenFrame {
    /// The record the call counts toward.
    pub(crate) record: u32,
    /// Clock ticks at entry; `POLL` for one poll of an async call (timed apart).
    pub(crate) entered: u64,
}

/// The async calls open now.
#[derive(Debug, Default)]
pub(crate) struct AsyncCalls {
    /// In the order they opened.
    pub(crate) open: Vec<OpenCall>,
    /// The `seq` of the newest call.
    next: u64,
}

impl AsyncCalls {
    /// The open calls as frames timed from their start.
    pub(crate) fn frames(&self) -> impl Iterator<Item = OpenFrame> + '_ {
        self.open.iter().map(|call| OpenFrame {
            record: call.record,
            entered: call.started,
        })
    }
}

impl Recorder {
    /// Starts an async call of `name` on `slot`'s thread, nested as `parent` says. The
    /// call's path is fixed here, whichever threads poll it later.
    pub(crate) fn open_async(
        &self,
        slot: &ThreadSlot,
        name: StageName,
        parent: Parent,
    ) -> OpenCall {
        let now = self.clock.raw();
        let mut thread = slot.lock();
        if self.is_ended() {
            // Nothing records any more; `close_async` will drop this call.
            return OpenCall {
                record: NO_PARENT,
                seq: 0,
                started: now,
            };
        }
        let record = match parent {
            Parent::Here => self.record_here(slot, &mut thread, &name, now),
            Parent::Record(parent) => self.record_under(&mut thread, parent, &name, now),
        };
        thread.delta(record).calls += 1;
        let mut state = self.lock();
        self.merge(&mut state, &mut thread);
        state.calls.next += 1;
        let call = OpenCall {
            record,
            seq: state.calls.next,
            started: now,
        };
        state.calls.open.push(call);
        self.boundary_reading(&mut state, &thread, now, record, true);
        call
    }

    /// Enters the async call of `record` for one poll on `slot`'s thread: stages
    /// entered meanwhile nest under it. Returns the frame for [`Recorder::pop_poll`].
    pub(crate) fn push_poll(&self, slot: &ThreadSlot, record: u32) -> Option<u32> {
        let mut thread = slot.lock();
        if self.is_ended() {
            return None;
        }
        Some(thread.push(record, POLL))
    }

    /// Leaves the poll `push_poll` entered (wherever it sits on the stack now).
    pub(crate) fn pop_poll(&self, slot: &ThreadSlot, seq: u32) {
        let mut thread = slot.lock();
        if let Some(index) = thread.position(seq) {
            thread.stack.remove(index);
        }
    }

    /// Closes an async call, from any thread; `error` says how it failed, if it did.
    pub(crate) fn close_async(&self, call: OpenCall, error: Option<Cow<'static, str>>) {
        let now = self.clock.raw();
        let nanos = self.clock.delta_as_nanos(call.started, now);
        let mut state = self.lock();
        if state.ended.is_some() {
            return;
        }
        state.calls.open.retain(|open| open.seq != call.seq);
        state.records.get_mut(call.record).complete(seconds(nanos));
        let message = state.finish_call(call.record, nanos, error);
        drop(state);
        if let Some(message) = message {
            self.log_event(message, OpenStage::OwnerNow);
        }
    }

    /// The calls open on every thread's stack now; poll frames count as open, untimed.
    /// Async calls are apart, in `State::calls`.
    pub(crate) fn open_calls(&self) -> Vec<OpenFrame> {
        let mut open = Vec::new();
        self.open_calls_into(&mut open);
        open
    }

    /// [`Recorder::open_calls`] into `open`, emptied first: a sample reuses its lists.
    pub(crate) fn open_calls_into(&self, open: &mut Vec<OpenFrame>) {
        open.clear();
        // Threads, then each slot: the order a snapshot takes them in.
        for slot in self.lock_threads().iter() {
            let thread = slot.lock();
            open.extend(thread.stack.iter().map(|frame| OpenFrame {
                record: frame.record,
                entered: frame.entered,
            }));
        }
    }
}

impl ThreadSlot {
    /// Whether a call of `record` (or a poll of it) is on this thread's stack now.
    #[cfg_attr(not(test), allow(dead_code))] // for the `tracing` layer
    pub(crate) fn has_open(&self, record: u32) -> bool {
        self.lock().stack.iter().any(|frame| frame.record == record)
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
        rig.recorder.close_async(call, None);
        let report = rig.recorder.snapshot();
        let fetch = report.stage("fetch").unwrap();
        assert_eq!((fetch.calls, fetch.errors), (1, 0));
        assert_eq!(fetch.wall_seconds, 5e-3);
        assert_eq!(report.stage("fetch/parse").unwrap().calls, 1);
        assert!(rig.recorder.lock().calls.open.is_empty());
        // A call dropped before it completed counts as a failed one.
        let cancelled = rig
            .recorder
            .open_async(&worker, "fetch".into(), Parent::Here);
        rig.recorder
            .close_async(cancelled, Some("cancelled".into()));
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
            rig.recorder.close_async(call, None);
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
        rig.recorder.close_async(late, None);
        rig.recorder.close_async(call, None);
        let report = rig.recorder.snapshot();
        assert!(report.stage("late").is_none());
        assert_eq!(report.stage("fetch").unwrap().calls, 1);
    }
}
