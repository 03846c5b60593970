//! Everything a monitor shows the world, outside the engine: the report file, the
//! metrics, the log lines and the warnings. Called from the sampler thread and from
//! the monitor's final step, never from an instrumented thread.
//!
//! The recorder keeps each failure as data (`sampling_error`, `output_error`,
//! `export_error`); the publisher warns about each kind once.

use crate::config::Config;
use crate::export::{Exporter, ReportFile, Sink};
use crate::log;
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
    /// Where the report goes, resolved once at start (or why it cannot go anywhere):
    /// the report file's sink, which warns about its own failures.
    output: Option<Mutex<ReportFile>>,
    /// Metrics for Prometheus and OTLP (and OTLP's trace).
    exporter: Mutex<Option<Exporter>>,
    /// The failures this publisher produced, for every report it hands out.
    failures: Mutex<Failures>,
    warned_sampling: AtomicBool,
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
    export: Option<String>,
}

impl Publisher {
    /// Resolves the report's path now (anchoring a relative one at the current
    /// directory and removing temporary files that dead writers left beside it).
    pub(crate) fn new(config: &Config, exporter: Option<Exporter>) -> Publisher {
        Publisher {
            output: config
                .output
                .as_deref()
                .map(|path| Mutex::new(ReportFile::resolve(path))),
            exporter: Mutex::new(exporter),
            failures: Mutex::new(Failures::default()),
            warned_sampling: AtomicBool::new(false),
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
        // The report file warns about its failures; the first is every later report's.
        let written = match &self.output {
            None => Ok(()),
            Some(file) => file
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .send(&report, moment.durable()),
        };
        if let Err(message) = written {
            self.failures()
                .output
                .get_or_insert_with(|| message.clone());
            report.output_error.get_or_insert(message);
        }
        if recorder.config.log_interval.is_some() {
            let now = recorder.owner_stage_now();
            for (event, stage) in events {
                log::print_line(
                    &event.text(&report),
                    stage.path(&report, &now),
                    event.live(),
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

    fn failures(&self) -> std::sync::MutexGuard<'_, Failures> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One warning line on stderr, unless `warned` says it was printed; a failure to
/// print is ignored.
fn warn_once(warned: &AtomicBool, message: &str) {
    if !warned.swap(true, Ordering::Relaxed) {
        crate::warn::warn(message);
    }
}
