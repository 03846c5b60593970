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
    /// `completed <path> (<s>s)`.
    Completed { record: u32, nanos: u64 },
    /// `failed <path> (<error>)`.
    Failed {
        record: u32,
        error: Cow<'static, str>,
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
        match error {
            None => (first || long).then_some(Line::Completed { record: id, nanos }),
            Some(error) => {
                record.errors += 1;
                record.error = Some(error.to_string());
                (record.errors == 1 || long).then_some(Line::Failed { record: id, error })
            }
        }
    }
}

impl Line {
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
            Line::Completed { record, nanos } => {
                format!("completed {} ({:.2}s)", path(record), seconds(*nanos))
            }
            Line::Failed { record, error } => format!("failed {} ({error})", path(record)),
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
