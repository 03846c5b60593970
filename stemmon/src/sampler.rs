//! The background thread: a full tree sample every `sample_interval`, a `running` log
//! line every `log_interval`.

use crate::cadence::{earliest, Grid}; // harden:
use crate::memory::TreeReader;
use crate::monitor::Shared;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

/// Runs until `stop` is dropped or sent to; hands the reader back for the last sample.
pub(crate) fn run(
    shared: &Shared,
    mut reader: Box<dyn TreeReader>,
    stop: &Receiver<()>,
) -> Box<dyn TreeReader> {
    // harden: samples and `running` lines on fixed grids (crate::cadence), each waited
    // for on its own, so neither drifts nor waits for the other.
    let start = Instant::now();
    let mut samples = Grid::new(start, shared.config.sample_interval);
    let mut logs = shared
        .config
        .log_interval
        .map(|every| Grid::new(start, every));
    loop {
        let deadline = earliest(samples.next(), logs.as_ref().and_then(Grid::next));
        let stopped = match deadline {
            Some(at) => !matches!(
                stop.recv_timeout(at.saturating_duration_since(Instant::now())),
                Err(RecvTimeoutError::Timeout)
            ),
            None => {
                let _ = stop.recv();
                true
            }
        };
        if stopped {
            break;
        }
        let now = Instant::now();
        if samples.due(now) {
            shared.take_sample(&mut *reader);
        }
        if logs.as_mut().is_some_and(|logs| logs.due(now)) {
            shared.log_event("running");
        }
    }
    reader
}
