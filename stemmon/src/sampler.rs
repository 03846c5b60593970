//! The background thread: a full tree sample every `sample_interval`, a `running` log
//! line every `log_interval`, and every log line and report write that an instrumented
//! thread asked for. Instrumented threads do no I/O; this thread's goes through the
//! [`Publisher`].

use crate::cadence::{earliest, Grid};
use crate::publish::{Moment, Publisher};
use crate::recorder::{Event, Line, OpenStage, Recorder};
use crate::sources::SampleReaders;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long the sampler gathers log events before it prints them and rewrites the
/// report: a line is at most this late.
const BATCH: Duration = Duration::from_millis(10);

/// When the sample after one that began at `began` and ended at `ended` may begin: the
/// sampler rests half as long again as its last sample took, so that its samples take
/// at most 40 % of a core and, with its waking and its other work, it stays under half
/// of one, however short the interval and large the tree (a sample of 50 children takes
/// 0.6 ms on a 2-core VM: at 1 ms, the next waits 0.9 ms, then for the grid). The
/// first grid point from then on is when it comes.
fn rested(began: Instant, ended: Instant) -> Instant {
    ended + ended.saturating_duration_since(began) * 3 / 2
}

/// Runs until told to stop; hands the readers back for the last sample.
pub(crate) fn run(
    recorder: &Recorder,
    publisher: &Publisher,
    mut reader: SampleReaders,
    events: &Receiver<Event>,
) -> SampleReaders {
    // What this thread allocates is the monitor's, no stage's (the book's `heap.md`).
    crate::heap::slots::mark_own_thread();
    // The sources (NVML) are opened here, never on the program's threads.
    for source in &mut reader.sources {
        source.open();
        if let Some(pid) = source.helper() {
            reader.tree.exclude(pid);
        }
    }
    recorder.take_sections(&mut reader.sources);
    // Samples and `running` lines on fixed grids: neither drifts nor waits for the other.
    let start = Instant::now();
    let mut samples = Grid::new(start, recorder.config.sample_interval);
    let mut logs = recorder
        .config
        .log_interval
        .map(|every| Grid::new(start, every));
    let mut lines = Vec::new();
    // The earliest the next sample may begin (see `rested`).
    let mut rest_until = start;
    loop {
        let next_sample = samples.next().map(|at| at.max(rest_until));
        let deadline = earliest(next_sample, logs.as_ref().and_then(Grid::next));
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
        if now >= rest_until && samples.due(now) {
            publisher.sample(recorder, &mut reader);
            rest_until = rested(now, Instant::now());
        }
        if recorder.is_ended() {
            // `finish` went on without this thread (it was held in a driver's call).
            return reader;
        }
        if logs.as_mut().is_some_and(|logs| logs.due(now)) {
            let running = [(Line::Text("running".to_owned()), OpenStage::OwnerNow)];
            publisher.publish(recorder, &running, Moment::Running);
        }
    }
    reader
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampler_rests_half_as_long_again_as_its_last_sample_took() {
        let began = Instant::now();
        let ended = began + Duration::from_micros(700);
        assert_eq!(rested(began, ended), began + Duration::from_micros(1_750));
        // A clock read out of order rests nothing, and never panics.
        assert_eq!(rested(ended, began), began);
    }
}
