//! Calls kept one by one (the report's `spans`): every long call, and short ones while
//! there is room, so a hot stage cannot crowd out the calls worth a look.

use super::thread::Frame;
use super::{seconds, LONG_CALL_NANOS};
use crate::report::Span;
use std::borrow::Cow;

/// At most this many spans are kept.
pub(crate) const MAX_SPANS: usize = 10_000;

/// The kept calls, in the order they closed.
#[derive(Debug, Default)]
pub(crate) struct Spans {
    /// At most [`MAX_SPANS`].
    pub(crate) list: Vec<Span>,
    /// Spans shorter than [`LONG_CALL_NANOS`] among `list`: the ones a long call may evict.
    short: usize,
}

impl Spans {
    /// An empty list with room for [`MAX_SPANS`], reserved once: a call that keeps its
    /// span never grows (and copies) the list under the shared lock. The pages are
    /// touched only as spans are kept.
    pub(super) fn new() -> Spans {
        Spans {
            list: Vec::with_capacity(MAX_SPANS),
            short: 0,
        }
    }

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

impl Spans {
    /// Keeps the call of `frame`, begun `start_seconds` from the start and `nanos` long
    /// on thread `thread`, if it may.
    pub(super) fn keep_call(
        &mut self,
        frame: &Frame,
        thread: u32,
        (start_seconds, nanos): (f64, u64),
        error: &Option<Cow<'static, str>>,
        message: Option<Box<str>>,
    ) {
        let span = {
            let mut built = Span::default();
            built.stage_id = frame.record;
            built.thread = thread;
            built.start_seconds = start_seconds;
            built.wall_seconds = seconds(nanos);
            built.error = error.as_ref().map(|e| e.to_string());
            built.error_message = message.map(String::from);
            built
        };
        self.keep(span, nanos >= LONG_CALL_NANOS);
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use super::*;

    fn span(stage_id: u32, wall_seconds: f64) -> Span {
        {
            let mut built = Span::default();
            built.stage_id = stage_id;
            built.wall_seconds = wall_seconds;
            built
        }
    }

    #[test]
    fn when_full_a_long_call_evicts_the_newest_short_one_and_a_short_one_is_dropped() {
        let mut spans = Spans::default();
        spans.keep(span(0, 0.5), true);
        for _ in 1..MAX_SPANS {
            spans.keep(span(1, 0.001), false);
        }
        assert_eq!(spans.list.len(), MAX_SPANS);
        spans.keep(span(2, 0.001), false);
        assert_eq!(spans.list.len(), MAX_SPANS);
        assert!(
            spans.list.iter().all(|s| s.stage_id != 2),
            "no room for a short call"
        );
        spans.keep(span(3, 0.2), true);
        assert_eq!(spans.list.len(), MAX_SPANS);
        assert_eq!(spans.list.last().unwrap().stage_id, 3);
        assert_eq!(spans.list[0].stage_id, 0, "a long call is never evicted");
        assert_eq!(spans.short, MAX_SPANS - 2);
    }

    #[test]
    fn long_calls_beyond_the_cap_stay_only_while_short_ones_can_make_room() {
        let mut spans = Spans::default();
        for _ in 0..MAX_SPANS - 1 {
            spans.keep(span(0, 0.2), true);
        }
        spans.keep(span(1, 0.001), false);
        spans.keep(span(2, 0.3), true);
        spans.keep(span(3, 0.4), true);
        assert_eq!(spans.list.len(), MAX_SPANS);
        assert_eq!(spans.list.last().unwrap().stage_id, 2);
        assert!(spans
            .list
            .iter()
            .all(|s| s.stage_id != 1 && s.stage_id != 3));
    }

    #[test]
    fn the_recorder_keeps_calls_of_a_millisecond_or_more_with_their_thread_and_error() {
        let rig = Rig::new();
        let (main, worker) = (rig.thread(), rig.thread());
        // A call under the reuse window that reuses a reading takes the fast path.
        for _ in 0..3 {
            let quick = rig.recorder.enter(&main, "quick".into());
            rig.recorder.exit(&main, quick);
        }
        for _ in 0..MAX_SPANS {
            let call = rig.recorder.enter(&worker, "step".into());
            rig.advance_micros(1_500);
            rig.recorder.exit(&worker, call);
        }
        let long = rig.recorder.enter(&main, "long".into());
        rig.advance_micros(150_000);
        rig.recorder.exit(&main, long);
        let report = rig.recorder.snapshot();
        assert_eq!(report.spans.len(), MAX_SPANS);
        let quick = report.stage("quick").unwrap();
        assert_eq!(quick.calls, 3);
        assert_eq!(
            report
                .spans
                .iter()
                .filter(|s| s.stage_id == quick.id)
                .count(),
            1
        );
        let long = report.spans.last().unwrap();
        assert_eq!(long.stage_id, report.stage("long").unwrap().id);
        assert_eq!((long.thread, long.wall_seconds), (main.id, 0.15));
        assert!(
            (long.start_seconds - 15.0).abs() < 1e-9,
            "{}",
            long.start_seconds
        );
        let step = report.stage("step").unwrap();
        let first = report.spans.iter().find(|s| s.stage_id == step.id).unwrap();
        assert_eq!((first.thread, first.wall_seconds), (worker.id, 1.5e-3));
    }
}
