//! Memory pressure, read at samples from the kernel's pressure stall information: the
//! run's cgroup's `memory.pressure` where it has one (cgroup v2), else the whole
//! system's. Each sample adds the stall time since the one before to the stages open at
//! it, and its share of the interval.

use crate::config::Config;
use crate::memory::TreeReading;
use crate::sources::{Measure, Measurement, Reading};
use crate::sys::MemoryPressure;
use std::time::Instant;
use stemmon_report::fields::measures::pressure::MEASURE;

/// The file is read again once this old: a sample at 1 ms reads it at most every tenth
/// of a second.
const EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Makes the measurement: always on where the kernel gives the figures. The file is
/// opened now (a file of `/proc` or of the cgroup, no driver), so that whether it
/// measures is known from the start, and its total now is the run's baseline: the
/// figures count the stalls since the monitor began, not since the kernel did.
pub(crate) fn open(_config: &Config) -> Option<Box<dyn Measurement>> {
    let (mut file, missing) = match MemoryPressure::open() {
        Ok(file) => (Some(file), None),
        Err(error) => (None, Some(format!("no pressure stall information here: {error}"))),
    };
    let last = file
        .as_mut()
        .and_then(|f| f.some_micros().ok())
        .map(|total| (total, Instant::now()));
    Some(Box::new(Pressure {
        opened: file.is_some(),
        file,
        missing,
        last,
        figures: [None; 2],
        series: [None; 1],
        changed: true,
    }))
}

/// The memory pressure of the run.
struct Pressure {
    /// The file, once opened on the sampler thread.
    file: Option<MemoryPressure>,
    /// Whether it opened: its figures stay in the report if it stops reading later.
    opened: bool,
    /// Why there is none.
    missing: Option<String>,
    /// The stall total and when it was read, at the last sample.
    last: Option<(u64, Instant)>,
    /// Share, seconds.
    figures: [Option<f64>; 2],
    series: [Option<f64>; 1],
    changed: bool,
}

impl Measurement for Pressure {
    fn declared(&self) -> &'static Measure {
        &MEASURE
    }

    fn active(&self) -> bool {
        self.opened
    }

    fn sample(&mut self, _tree: &TreeReading, _elapsed: f64) -> Reading<'_> {
        // Only a reading adds stall time to the stages open at it; the timeline keeps the
        // last reading's share between readings, as a gauge.
        self.figures = [None; 2];
        // Read at most every tenth of a second: the kernel formats the file anew at each
        // read, and a stall's total loses nothing between reads.
        let due = self.last.is_none_or(|(_, at)| at.elapsed() >= EVERY);
        if let Some(file) = self.file.as_mut().filter(|_| due) {
            match file.some_micros() {
                Ok(total) => {
                    let now = Instant::now();
                    if let Some((before, at)) = self.last {
                        let stalled = total.saturating_sub(before) as f64 / 1e6;
                        let interval = now.duration_since(at).as_secs_f64();
                        let share = (interval > 0.0).then(|| (stalled / interval).min(1.0));
                        self.figures = [share, Some(stalled)];
                        self.series = [share];
                    }
                    self.last = Some((total, now));
                }
                Err(error) => {
                    self.missing = Some(format!("the pressure file stopped reading: {error}"));
                    self.series = [None; 1];
                    self.file = None;
                    self.changed = true;
                }
            }
        }
        Reading {
            figures: &self.figures,
            series: &self.series,
            processes: &[],
            note: None,
            counters: &[],
        }
    }

    fn section(&mut self) -> Option<serde_json::Value> {
        if !std::mem::replace(&mut self.changed, false) {
            return None;
        }
        Some(serde_json::json!({
            "source": self.file.as_ref().map(MemoryPressure::source),
            "missing": self.missing,
        }))
    }
}
