//! Calls kept one by one (the report's `spans`): every long call, and short ones while
//! there is room, so a hot stage cannot crowd out the calls worth a look.

use super::thread::Frame;
use super::{seconds, Recorder, State, LONG_CALL_NANOS};
use crate::report::Span;
use std::borrow::Cow;

/// At most this many spans are kept.
pub(crate) const MAX_SPANS: usize = 10_000;

/// The kept calls, in the order they closed.
#[derive(Debug, Default)]
pub(crate) struct Spans {
    pub(crate) list: Vec<Span>,
    /// Spans shorter than [`LONG_CALL_NANOS`] among `list`: the ones a long call may evict.
    short: usize,
}

impl Spans {
    /// Keeps `span` if there is room; when full, a long one evicts the newest short one.
    fn keep(&mut self, span: Span, long: bool) {
        if self.list.len() < MAX_SPANS {
            self.short += usize::from(!long);
            self.list.push(span);
        } else if long && self.short > 0 {
            let short = seconds(LONG_CALL_NANOS);
            if let Some(index) = self.list.iter().rposition(|kept| kept.wall_seconds < short) {
                self.list.remove(index);
                self.short -= 1;
                self.list.push(span);
            }
        }
    }
}

impl Recorder {
    /// Keeps the call of `frame`, `nanos` long on thread `thread`, in `spans` if it may.
    pub(super) fn keep_span(
        &self,
        state: &mut State,
        frame: &Frame,
        thread: u32,
        nanos: u64,
        error: &Option<Cow<'static, str>>,
    ) {
        let span = Span {
            stage_id: frame.record,
            thread,
            start_seconds: self.elapsed(frame.entered),
            wall_seconds: seconds(nanos),
            error: error.as_ref().map(|e| e.to_string()),
        };
        state.spans.keep(span, nanos >= LONG_CALL_NANOS);
    }
}
