//! The background thread: a full tree sample every `sample_interval`, a `running` log
//! line every `log_interval`.

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
    let interval = shared.config.sample_interval;
    let log_interval = shared.config.log_interval;
    let mut next_sample = Instant::now() + interval;
    let mut next_log = log_interval.map(|every| Instant::now() + every);
    loop {
        let wait = next_sample.saturating_duration_since(Instant::now());
        match stop.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
        shared.take_sample(&mut *reader);
        let now = Instant::now();
        // A fixed cadence; after a stall, start again from now rather than catch up.
        next_sample += interval;
        if next_sample <= now {
            next_sample = now + interval;
        }
        if let (Some(at), Some(every)) = (next_log, log_interval) {
            if now >= at {
                shared.log_event("running");
                next_log = Some(now + every);
            }
        }
    }
    reader
}
