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
    #[allow(dead_code)] // for the `tracing` layer
    Record(u32),
}

/// An async call started and not yet closed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenCall {
    pub(crate) record: u32,
    /// Numbers the recorder's async calls, so each closes its own.
    pub(crate) seq: u64,
    /// Clock ticks at the open.
    pub(crate) started: u64,
}

/// A call open now, on a thread's stack or apart from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpenFrame {
    pub(crate) record: u32,
    /// Clock ticks at entry; `POLL` for one poll of an async call (timed apart).
    pub(crate) entered: u64,
}

/// The async calls open now.
#[derive(Debug, Default)]
pub(crate) struct AsyncCalls {
    pub(crate) open: Vec<OpenCall>,
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
        let threads = self.lock_threads().clone();
        let mut open = Vec::new();
        for slot in threads {
            let thread = slot.lock();
            open.extend(thread.stack.iter().map(|frame| OpenFrame {
                record: frame.record,
                entered: frame.entered,
            }));
        }
        open
    }
}

impl ThreadSlot {
    /// Whether a call of `record` (or a poll of it) is on this thread's stack now.
    #[allow(dead_code)] // for the `tracing` layer
    pub(crate) fn has_open(&self, record: u32) -> bool {
        self.lock().stack.iter().any(|frame| frame.record == record)
    }
}
