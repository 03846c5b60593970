//! Everything a monitor shows the world, outside the engine: the report file, the
//! metrics, the log lines and the warnings. Called from the sampler thread and from
//! the monitor's final step, never from an instrumented thread.
//!
//! The recorder keeps each failure as data (`sampling_error`, `output_error`,
//! `export_error`); the publisher warns about each kind once.

use crate::config::Config;
use crate::export::Exporter;
use crate::log;
use crate::output::Output;
use crate::recorder::{Line, OpenStage, Recorder};
use crate::report::Report;
use crate::sources::SampleReaders;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// When a report is published, which says what goes with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Moment {
    /// A log event (a first completion, a failure): the report is rewritten.
    Event,
    /// A `running` line: the metrics are sent too.
    Running,
    /// The end: the metrics are sent and the report is synced to disk.
    Final,
}

impl Moment {
    fn exports(self) -> bool {
        matches!(self, Moment::Running | Moment::Final)
    }

    fn durable(self) -> bool {
        self == Moment::Final
    }
}

/// Where one monitor's report, metrics and warnings go.
pub(crate) struct Publisher {
    /// Where the report goes, resolved once at start (or why it cannot go anywhere).
    output: Option<Result<Output, String>>,
    /// Metrics for Prometheus and OTLP (and OTLP's trace).
    exporter: Mutex<Option<Exporter>>,
    /// The failures this publisher produced, for every report it hands out.
    failures: Mutex<Failures>,
    warned_sampling: AtomicBool,
    warned_output: AtomicBool,
    /// The final report was published: nothing else is written or sent after it (a
    /// sampler left behind in a driver's call wakes up to a finished run). Held while
    /// a report is written, so a late write never lands over the final one.
    sealed: Mutex<bool>,
}

/// The publisher's own failures (the book's `guide/threads.md`): the first failed report write (later writes
/// retry, and the cause is kept), and the latest failed export.
#[derive(Debug, Default)]
struct Failures {
    output: Option<String>,
    /// How many report writes failed.
    failed_writes: u64,
    export: Option<String>,
}

impl Publisher {
    /// Resolves the report's path now (anchoring a relative one at the current
    /// directory and removing temporary files that dead writers left beside it).
    pub(crate) fn new(config: &Config, exporter: Option<Exporter>) -> Publisher {
        Publisher {
            output: config.output.as_deref().map(|path| {
                Output::resolve(path)
                    .map_err(|e| format!("could not write the report to {}: {e}", path.display()))
            }),
            exporter: Mutex::new(exporter),
            failures: Mutex::new(Failures::default()),
            warned_sampling: AtomicBool::new(false),
            warned_output: AtomicBool::new(false),
            sealed: Mutex::new(false),
        }
    }

    /// Takes a full sample; the first failure is warned about.
    pub(crate) fn sample(&self, recorder: &Recorder, readers: &mut SampleReaders) {
        if *self.sealed.lock().unwrap_or_else(PoisonError::into_inner) {
            return;
        }
        if let Err(message) = recorder.take_sample(&mut *readers.tree, &mut readers.sources) {
            warn_once(&self.warned_sampling, &message);
        }
    }

    /// Rewrites the report and prints a line for each event, in one ordered step; the
    /// `moment` says whether the metrics go out first and whether the write is synced.
    /// Returns the report, with any failure of this very write in it.
    pub(crate) fn publish(
        &self,
        recorder: &Recorder,
        events: &[(Line, OpenStage)],
        moment: Moment,
    ) -> Report {
        // Whoever reads this report whole (the file, the exporters, the caller at the
        // end) gets its series; a live line alone does not need them.
        let series = moment == Moment::Final
            || self.output.is_some()
            || (moment.exports()
                && self
                    .exporter
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_some());
        let mut sealed = self.sealed.lock().unwrap_or_else(PoisonError::into_inner);
        let mut report = recorder.snapshot_with(series);
        if *sealed && moment != Moment::Final {
            self.stamp(&mut report);
            return report;
        }
        *sealed |= moment == Moment::Final;
        if moment.exports() {
            // A failure shows in the report written now (the exporter warns once).
            let mut exporter = self.exporter.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(exporter) = exporter.as_mut() {
                let last = moment == Moment::Final;
                if let Err(error) = exporter.export(&report, last) {
                    self.failures().export = Some(error);
                }
            }
        }
        self.stamp(&mut report);
        let written = self.write(&report, moment.durable());
        self.tell(&written, moment);
        if let Err(message) = written {
            report.output_error.get_or_insert(message);
        }
        if recorder.config.log_interval.is_some() {
            let now = recorder.owner_stage(&recorder.lock().records);
            for (event, stage) in events {
                log::print_line(
                    &event.text(&report),
                    stage.path(&report, &now),
                    event.heap(),
                    &report,
                );
            }
        }
        report
    }

    /// Puts this publisher's failures into `report` (a snapshot of the engine's).
    pub(crate) fn stamp(&self, report: &mut Report) {
        let failures = self.failures();
        report.output_error.clone_from(&failures.output);
        report.export_error.clone_from(&failures.export);
    }

    /// Keeps a failed write, and says what happened: the first failure once, and at
    /// the end what became of the final report after failures (it landed, or not: for
    /// the reason already warned, or a new one).
    fn tell(&self, written: &Result<(), String>, moment: Moment) {
        let mut failures = self.failures();
        let first = failures.output.clone();
        if written.is_err() {
            failures.failed_writes += 1;
        }
        let failed = failures.failed_writes;
        if let Err(message) = written {
            failures.output.get_or_insert_with(|| message.clone());
        }
        drop(failures);
        let s = |n: u64| if n == 1 { "" } else { "s" };
        match (written, moment == Moment::Final) {
            (Err(message), false) => warn_once(&self.warned_output, message),
            (Err(message), true) if first.as_ref() == Some(message) => {
                crate::warn::warn(&format!(
                    "the final report was not written either, for the same reason \
                     ({failed} failed write{} in all)",
                    s(failed)
                ));
            }
            (Err(message), true) => {
                crate::warn::warn(&format!("the final report was not written: {message}"));
            }
            (Ok(()), true) if failed > 0 => {
                let path = match &self.output {
                    Some(Ok(output)) => output.path().display().to_string(),
                    _ => "its file".to_owned(),
                };
                crate::warn::warn(&format!(
                    "the final report was written to {path}; {failed} earlier write{} failed \
                     (the first is its output_error)",
                    s(failed)
                ));
            }
            (Ok(()), _) => {}
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, Failures> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, report: &Report, durable: bool) -> Result<(), String> {
        let output = match &self.output {
            None => return Ok(()),
            Some(Err(message)) => return Err(message.clone()),
            Some(Ok(output)) => output,
        };
        let failed = |error: std::io::Error| {
            format!(
                "could not write the report to {}: {error}",
                output.path().display()
            )
        };
        let pretty = serde_json::to_vec_pretty(report).map_err(|e| failed(e.into()))?;
        match output.write(&pretty, durable) {
            // Out of space: the replacement needs room for both copies at once, so a
            // report over half of what is free could never land. The same report
            // without indentation is about a third smaller.
            Err(error) if is_out_of_space(&error) => {
                let compact = serde_json::to_vec(report).map_err(|e| failed(e.into()))?;
                output.write(&compact, durable).map_err(failed)
            }
            written => written.map_err(failed),
        }
    }
}

/// Whether `error` says the disk (or the user's quota) is full.
fn is_out_of_space(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::StorageFull || error.raw_os_error() == Some(libc_edquot())
}

/// `EDQUOT`: the quota's "disk full".
fn libc_edquot() -> i32 {
    #[cfg(unix)]
    {
        libc::EDQUOT
    }
    #[cfg(not(unix))]
    {
        -1
    }
}

/// One warning line on stderr, unless `warned` says it was printed; a failure to
/// print is ignored.
fn warn_once(warned: &AtomicBool, message: &str) {
    if !warned.swap(true, Ordering::Relaxed) {
        crate::warn::warn(message);
    }
}
