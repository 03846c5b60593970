//! The background thread: a full tree sample every `sample_interval`, a `running` log
//! line every `log_interval`, and every log line and report write that an instrumented
//! thread asked for. Instrumented threads do no I/O; this thread's goes through the
//! [`Publisher`].

use crate::cadence::{earliest, Grid};
use crate::memory::TreeReader;
use crate::publish::{Moment, Publisher};
use crate::recorder::{Event, Line, OpenStage, Recorder};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long the sampler gathers log events before it prints them and rewrites the
/// report: a line is at most this late.
const BATCH: Duration = Duration::from_millis(10);

/// Runs until told to stop; hands the reader back for the last sample.
pub(crate) fn run(
    recorder: &Recorder,
    publisher: &Publisher,
    mut reader: Box<dyn TreeReader>,
    events: &Receiver<Event>,
) -> Box<dyn TreeReader> {
    // What this thread allocates is the monitor's, no stage's (SPEC §11).
    crate::heap::slots::mark_own_thread();
    // Samples and `running` lines on fixed grids: neither drifts nor waits for the other.
    let start = Instant::now();
    let mut samples = Grid::new(start, recorder.config.sample_interval);
    let mut logs = recorder
        .config
        .log_interval
        .map(|every| Grid::new(start, every));
    let mut lines = Vec::new();
    loop {
        let deadline = earliest(samples.next(), logs.as_ref().and_then(Grid::next));
        let received = match deadline {
            Some(at) => events.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(Event::Log(line, stage)) => {
                lines.push((line, stage));
                // Take what else comes within a few milliseconds: one snapshot and one
                // report write for the lot, so a burst of first completions costs the
                // stages little (the snapshot shares their lock).
                let batch_end = Instant::now() + BATCH;
                while let Ok(event) =
                    events.recv_timeout(batch_end.saturating_duration_since(Instant::now()))
                {
                    match event {
                        Event::Log(line, stage) => lines.push((line, stage)),
                        Event::Stop => {
                            publisher.publish(recorder, &lines, Moment::Event);
                            return reader;
                        }
                    }
                }
                publisher.publish(recorder, &lines, Moment::Event);
                lines.clear();
            }
            Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if samples.due(now) {
            publisher.sample(recorder, &mut *reader);
        }
        if logs.as_mut().is_some_and(|logs| logs.due(now)) {
            let running = [(Line::Text("running".to_owned()), OpenStage::OwnerNow)];
            publisher.publish(recorder, &running, Moment::Running);
        }
    }
    reader
}
