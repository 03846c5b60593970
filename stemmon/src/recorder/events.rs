//! Log events: what an instrumented thread hands the sampler thread, which looks the
//! names up and prints (an instrumented thread neither formats nor copies a path).

use super::{seconds, Recorder, State, LONG_CALL_NANOS};
use std::borrow::Cow;
use std::sync::mpsc::Sender;
use std::sync::PoisonError;

/// The event of a log line.
#[derive(Debug)]
pub(crate) enum Line {
    /// Free text: `started`, `running`, `finished`, `failed (panic)`.
    Text(String),
    /// `completed <path> (<s>s)`; `live` is the level of the threads' counters (the
    /// live heap) when it completed.
    Completed {
        record: u32,
        nanos: u64,
        live: Option<u64>,
    },
    /// `failed <path> (<error>)`.
    Failed {
        record: u32,
        error: Cow<'static, str>,
        live: Option<u64>,
    },
}

/// Which stage a log line names as open.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OpenStage {
    /// This record was open on the thread when the event happened.
    Record(u32),
    /// Nothing was open.
    Workflow,
    /// Whatever is open on the monitor's own thread when the line is printed.
    OwnerNow,
}

impl OpenStage {
    /// The stage open now on the thread of `slot_id` whose stack is `stack`, or where
    /// its calls nest: nothing on the monitor's own thread, the owner's stage elsewhere.
    #[inline]
    pub(super) fn on_thread(stack: &[super::thread::Frame], slot_id: u32) -> OpenStage {
        match stack.last() {
            Some(top) => OpenStage::Record(top.record),
            None if slot_id == 0 => OpenStage::Workflow,
            None => OpenStage::OwnerNow,
        }
    }
}

/// What instrumented threads hand to the sampler thread, which does all the I/O.
#[derive(Debug)]
pub(crate) enum Event {
    /// Print this line and rewrite the report.
    Log(Line, OpenStage),
    /// Stop sampling and hand the reader back.
    Stop,
}

impl Recorder {
    /// Where log events go from now on.
    pub(crate) fn connect(&self, events: Sender<Event>) {
        *self.events.lock().unwrap_or_else(PoisonError::into_inner) = Some(events);
    }

    /// Hands a log line's event to the sampler thread; no I/O on the caller's thread.
    pub(crate) fn log_event(&self, event: Line, stage: OpenStage) {
        if self.config.log_interval.is_none() {
            return;
        }
        if let Some(events) = &*self.events.lock().unwrap_or_else(PoisonError::into_inner) {
            let _ = events.send(Event::Log(event, stage));
        }
    }
}

impl State {
    /// Records how a call of `record` ended; returns the log line it deserves, if any:
    /// the first completion, the first failure, and every long call.
    pub(super) fn finish_call(
        &mut self,
        record: u32,
        nanos: u64,
        error: Option<Cow<'static, str>>,
    ) -> Option<Line> {
        let long = nanos >= LONG_CALL_NANOS;
        let id = record;
        let record = self.records.get_mut(id);
        let first = !std::mem::replace(&mut record.logged, true);
        let line = match error {
            None => (first || long).then_some(Line::Completed {
                record: id,
                nanos,
                live: None,
            }),
            Some(error) => {
                record.errors += 1;
                record.error = Some(error.to_string());
                (record.errors == 1 || long).then_some(Line::Failed {
                    record: id,
                    error,
                    live: None,
                })
            }
        };
        // The line is printed later, on the sampler thread: its live figure is now's.
        line.map(|mut line| {
            if let Line::Completed { live, .. } | Line::Failed { live, .. } = &mut line {
                *live = self.threaded.level();
            }
            line
        })
    }
}

impl Line {
    /// The level of the threads' counters (the live heap) when the event happened, for
    /// the events that keep one.
    pub(crate) fn live(&self) -> Option<u64> {
        match self {
            Line::Completed { live, .. } | Line::Failed { live, .. } => *live,
            Line::Text(_) => None,
        }
    }

    /// The event text, with stage paths from `report`.
    pub(crate) fn text(&self, report: &crate::Report) -> String {
        let path = |record: &u32| {
            report
                .stages
                .get(*record as usize)
                .map_or("?", |stage| stage.path.as_str())
        };
        match self {
            Line::Text(text) => text.clone(),
            Line::Completed { record, nanos, .. } => {
                format!("completed {} ({:.2}s)", path(record), seconds(*nanos))
            }
            Line::Failed { record, error, .. } => format!("failed {} ({error})", path(record)),
        }
    }
}

impl OpenStage {
    /// The path this names in `report`; `now` is the stage open on the monitor's thread.
    pub(crate) fn path<'a>(&self, report: &'a crate::Report, now: &'a str) -> &'a str {
        match self {
            OpenStage::Record(record) => report
                .stages
                .get(*record as usize)
                .map_or("workflow", |stage| stage.path.as_str()),
            OpenStage::Workflow => "workflow",
            OpenStage::OwnerNow => now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use super::*;
    use std::sync::mpsc;

    /// The lines a rig's recorder sent, as text against its snapshot now.
    fn lines(rig: &Rig, received: &mpsc::Receiver<Event>) -> Vec<String> {
        let report = rig.recorder.snapshot();
        received
            .try_iter()
            .map(|event| match event {
                Event::Log(line, stage) => {
                    format!("{} @ {}", line.text(&report), stage.path(&report, "now"))
                }
                Event::Stop => "stop".to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_first_completion_the_first_failure_and_long_calls_are_logged() {
        let rig = Rig::new();
        let (events, received) = mpsc::channel();
        rig.recorder.connect(events);
        let main = rig.thread();
        let fit = rig.recorder.enter(&main, "fit".into());
        for micros in [10, 10, 150_000] {
            let call = rig.recorder.enter(&main, "step".into());
            rig.advance_micros(micros);
            rig.recorder.exit(&main, call);
            rig.advance_micros(2_000);
        }
        for _ in 0..2 {
            let call = rig.recorder.enter(&main, "parse".into());
            rig.recorder
                .set_error(&main, call_seq(call), "my::ParseError", None);
            rig.recorder.exit(&main, call);
        }
        rig.recorder.exit(&main, fit);
        assert_eq!(
            lines(&rig, &received),
            [
                "completed fit/step (0.00s) @ fit",
                "completed fit/step (0.15s) @ fit",
                "failed fit/parse (ParseError) @ fit",
                "completed fit (0.16s) @ workflow",
            ]
        );
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("fit/parse").unwrap().errors, 2);
    }

    fn call_seq(entered: super::super::Entered) -> u32 {
        match entered {
            super::super::Entered::Pushed(seq) => seq,
            other => panic!("not pushed: {other:?}"),
        }
    }
}
