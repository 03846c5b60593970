//! The background thread: a full tree sample every `sample_interval`, a `running` log
//! line every `log_interval`, and every log line and report write that an instrumented
//! thread asked for. Instrumented threads do no I/O.

use crate::log;
use crate::memory::TreeReader;
use crate::recorder::{Event, Line, OpenStage, Recorder};
use crate::report::Report;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// `now + every`, or a day from now where that overflows.
fn later(now: Instant, every: Duration) -> Instant {
    now.checked_add(every)
        .or_else(|| now.checked_add(Duration::from_secs(86_400)))
        .unwrap_or(now)
}

/// The next deadline on the fixed grid `start + k × every` after `now`: a slow tick
/// skips the missed ones instead of shifting the grid.
pub(crate) fn next_tick(deadline: Instant, every: Duration, now: Instant) -> Instant {
    let next = later(deadline, every);
    if next > now {
        return next;
    }
    let behind = now.duration_since(next).as_secs_f64();
    let steps = (behind / every.as_secs_f64()).floor() + 1.0;
    later(next, every.mul_f64(steps.min(1e9)))
}

/// Runs until told to stop; hands the reader back for the last sample.
pub(crate) fn run(
    recorder: &Recorder,
    mut reader: Box<dyn TreeReader>,
    events: &Receiver<Event>,
) -> Box<dyn TreeReader> {
    let interval = recorder.config.sample_interval;
    let log_interval = recorder.config.log_interval;
    let start = Instant::now();
    let mut next_sample = later(start, interval);
    let mut next_log = log_interval.map(|every| later(start, every));
    let mut lines = Vec::new();
    loop {
        let now = Instant::now();
        let deadline = next_log.map_or(next_sample, |log| log.min(next_sample));
        match events.recv_timeout(deadline.saturating_duration_since(now)) {
            Ok(Event::Log(line, stage)) => {
                lines.push((line, stage));
                // Take what else is waiting: one report write for the lot.
                while let Ok(event) = events.try_recv() {
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
        if now >= next_sample {
            recorder.take_sample(&mut *reader);
            next_sample = next_tick(next_sample, interval, Instant::now());
        }
        if let (Some(at), Some(every)) = (next_log, log_interval) {
            if now >= at {
                publish(
                    recorder,
                    &[(Line::Text("running".to_owned()), OpenStage::OwnerNow)],
                    true,
                    false,
                );
                next_log = Some(next_tick(at, every, Instant::now()));
            }
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
    let Some(path) = &recorder.config.output else {
        return;
    };
    let written = serde_json::to_vec_pretty(report)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::report::write_atomic(path, &bytes, durable));
    if let Err(error) = written {
        recorder.output_failed(format!(
            "could not write the report to {}: {error}",
            path.display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_stay_on_their_grid() {
        let start = Instant::now();
        let every = Duration::from_millis(250);
        // On time: the next grid point.
        assert_eq!(next_tick(start, every, start), start + every);
        // Late by 0.6 intervals: still the next grid point, not now + interval.
        let late = start + every + every.mul_f64(0.6);
        assert_eq!(next_tick(start + every, every, late), start + every * 2);
        // Late by 2.5 intervals: the missed points are skipped.
        let later_still = start + every * 3 + every / 2;
        assert_eq!(
            next_tick(start + every, every, later_still),
            start + every * 4
        );
    }

    #[test]
    fn a_huge_interval_does_not_overflow() {
        let now = Instant::now();
        let huge = Duration::from_secs(u64::MAX / 4);
        assert!(next_tick(now, huge, now) > now);
    }
}
