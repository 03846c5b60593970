//! The background thread: a full tree sample every `sample_interval`, a `running` log
//! line every `log_interval`, and every log line and report write that an instrumented
//! thread asked for. Instrumented threads do no I/O.

use crate::cadence::{earliest, Grid};
use crate::log;
use crate::memory::TreeReader;
use crate::recorder::{Event, Line, OpenStage, Recorder};
use crate::report::Report;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long the sampler gathers log events before it prints them and rewrites the
/// report: a line is at most this late.
const BATCH: Duration = Duration::from_millis(10);

/// Runs until told to stop; hands the reader back for the last sample.
pub(crate) fn run(
    recorder: &Recorder,
    mut reader: Box<dyn TreeReader>,
    events: &Receiver<Event>,
) -> Box<dyn TreeReader> {
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
                            publish(recorder, &lines, false, false);
                            return reader;
                        }
                    }
                }
                publish(recorder, &lines, false, false);
                lines.clear();
            }
            Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if samples.due(now) {
            recorder.take_sample(&mut *reader);
        }
        if logs.as_mut().is_some_and(|logs| logs.due(now)) {
            publish(
                recorder,
                &[(Line::Text("running".to_owned()), OpenStage::OwnerNow)],
                true,
                false,
            );
        }
    }
    reader
}
/// Rewrites the report and prints a line for each event, in one ordered step; with
/// `export`, sends the metrics first; with `durable`, the write is synced to disk.
/// Returns the report written.
pub(crate) fn publish(
    recorder: &Recorder,
    events: &[(Line, OpenStage)],
    export: bool,
    durable: bool,
) -> Report {
    let mut report = recorder.snapshot();
    if export {
        // Metrics go out at each `running` line and at the end, never from a stage's
        // thread; a failure shows in the report written next.
        report.export_error = recorder.export(&report);
    }
    write(recorder, &report, durable);
    if recorder.config.log_interval.is_some() {
        let now = recorder.owner_stage(&recorder.lock());
        for (event, stage) in events {
            log::print_line(&event.text(&report), stage.path(&report, &now), &report);
        }
    }
    report
}

fn write(recorder: &Recorder, report: &Report, durable: bool) {
    let written = match &recorder.output {
        None => return,
        Some(Err(message)) => Err(message.clone()),
        Some(Ok(output)) => serde_json::to_vec_pretty(report)
            .map_err(std::io::Error::other)
            .and_then(|bytes| output.write(&bytes, durable))
            .map_err(|error| {
                format!(
                    "could not write the report to {}: {error}",
                    output.path().display()
                )
            }),
    };
    if let Err(message) = written {
        recorder.output_failed(message);
    }
}
