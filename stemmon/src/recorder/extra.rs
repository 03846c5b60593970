//! The figures of the measurements (`sources`) in the engine: each record's and the
//! run's, folded at every sample by each field's declared fold, the timeline's series,
//! the processes' figures and the measurements' sections of the report. Nothing here
//! knows which measurement a figure came from: each is a typed field of its
//! declaration.

use crate::memory::TreeReading;
use crate::report::{Report, StageReport, TimelinePoint};
use crate::sources::{Field, Measure, Measurement};
use std::collections::BTreeMap;
use stemmon_report::fields::{Fold, Series};

/// One record figure a measurement fills.
#[derive(Clone, Copy, Debug)]
struct Key {
    field: &'static Field,
    /// Its measurement measures something: the figure is in the report. One opened on
    /// the sampler thread (NVML) becomes active at its first reading there.
    active: bool,
    /// Its measurement's figures cover the time since the previous sample.
    interval: bool,
}

/// What the measurements declared, and the run's figures and sections.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    keys: Vec<Key>,
    /// The run's figures, one slot per key.
    total: Vec<Option<f64>>,
    /// The measurements' sections, by key (`gpu`), each with its measurement.
    sections: BTreeMap<&'static str, (&'static Measure, serde_json::Value)>,
}

/// One sample's readings of every measurement, kept between samples to reuse its lists.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// One per key of [`Extra`], in order.
    figures: Vec<Option<f64>>,
    /// Whether each key's measurement measured something at this sample, in order.
    active: Vec<bool>,
    /// The timeline point's series.
    series: Vec<(&'static Series, Option<f64>)>,
    /// The processes' figures: pid, key, value.
    processes: Vec<(u32, &'static str, f64)>,
    sections: Vec<(&'static Measure, serde_json::Value)>,
    /// Lines for the log (an OOM kill).
    notes: Vec<String>,
}

impl Extra {
    /// The fields `measurements` declare.
    pub(super) fn of(measurements: &[Box<dyn Measurement>]) -> Extra {
        let keys: Vec<Key> = measurements
            .iter()
            .flat_map(|measurement| {
                let active = measurement.active();
                let declared = measurement.declared();
                declared.fields.iter().map(move |field| Key {
                    field,
                    active,
                    interval: declared.interval,
                })
            })
            .collect();
        Extra {
            total: vec![None; keys.len()],
            keys,
            sections: BTreeMap::new(),
        }
    }

    /// Folds one sample's figures into the slots of a record open at it (made at its
    /// first sample).
    pub(super) fn fold_into(&self, slots: &mut Vec<Option<f64>>, taken: &Taken) {
        self.fold_some(slots, taken, false);
    }

    /// Folds into the slots of a record that closed since the previous sample, in a time
    /// that was its own, the figures that cover that time.
    pub(super) fn fold_interval_into(&self, slots: &mut Vec<Option<f64>>, taken: &Taken) {
        self.fold_some(slots, taken, true);
    }

    /// Folds every figure, or with `interval_only` those that cover the time since the
    /// previous sample.
    fn fold_some(&self, slots: &mut Vec<Option<f64>>, taken: &Taken, interval_only: bool) {
        if self.keys.is_empty() {
            return;
        }
        slots.resize(self.keys.len(), None);
        for ((slot, value), key) in slots.iter_mut().zip(&taken.figures).zip(&self.keys) {
            if interval_only && !key.interval {
                continue;
            }
            *slot = match (key.field.fold, *slot, *value) {
                (Fold::Sum, Some(a), Some(b)) => Some(a + b),
                (Fold::Max, Some(a), Some(b)) => Some(a.max(b)),
                (_, a, b) => b.or(a),
            };
        }
    }

    /// Takes in one sample's readings: the run's figures and the sections.
    pub(super) fn sampled(&mut self, taken: &mut Taken) {
        for (key, &active) in self.keys.iter_mut().zip(&taken.active) {
            key.active = active;
        }
        let mut total = std::mem::take(&mut self.total);
        self.fold_into(&mut total, taken);
        self.total = total;
        for (measure, value) in taken.sections.drain(..) {
            self.section(measure, value);
        }
    }

    /// Keeps a measurement's section as it is now.
    pub(super) fn section(&mut self, measure: &'static Measure, value: serde_json::Value) {
        if let Some((key, _)) = measure.section {
            self.sections.insert(key, (measure, value));
        }
    }

    /// Writes a record's figures into its stage.
    pub(super) fn stage(&self, slots: &[Option<f64>], stage: &mut StageReport) {
        for (index, key) in self.keys.iter().enumerate().filter(|(_, k)| k.active) {
            key.field.set(stage, slots.get(index).copied().flatten());
        }
    }

    /// Writes the run's figures and the sections into the report.
    pub(super) fn run(&self, report: &mut Report) {
        for (key, value) in self.keys.iter().zip(&self.total).filter(|(k, _)| k.active) {
            key.field.set_run(report, *value);
        }
        for (measure, value) in self.sections.values() {
            measure.set_section(report, value);
        }
    }
}

impl Taken {
    /// Reads every measurement for the tree `tree` just read at `elapsed` seconds.
    pub(super) fn take(
        &mut self,
        measurements: &mut [Box<dyn Measurement>],
        tree: &TreeReading,
        elapsed: f64,
    ) {
        self.figures.clear();
        self.active.clear();
        self.series.clear();
        self.processes.clear();
        self.notes.clear();
        for measurement in measurements.iter_mut() {
            let declared = measurement.declared();
            // Whether it measures is known once it has read (NVML opens on this thread).
            let reading = measurement.sample(tree, elapsed);
            let figures = declared.fields.len();
            let at = self.figures.len();
            self.figures.extend_from_slice(reading.figures);
            self.figures.resize(at + figures, None);
            let active_at = self.active.len();
            self.active.extend(std::iter::repeat_n(false, figures));
            self.series
                .extend(declared.series.iter().zip(reading.series.iter().copied()));
            self.notes.extend(reading.note.map(str::to_owned));
            if let Some(process) = declared.process {
                self.processes.extend(
                    reading
                        .processes
                        .iter()
                        .map(|&(pid, value)| (pid, process.key, value)),
                );
            }
            let active = measurement.active();
            self.active[active_at..].fill(active);
            if declared.section.is_some() {
                if let Some(value) = measurement.section() {
                    self.sections.push((declared, value));
                }
            }
        }
    }

    /// The timeline point's series into `point`.
    pub(super) fn series_into(&self, point: &mut TimelinePoint) {
        for &(series, value) in &self.series {
            if value.is_some() {
                series.set(point, value);
            }
        }
    }

    /// The lines this sample's readings give the log.
    pub(super) fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// The processes' figures: pid, key, value.
    pub(super) fn processes(&self) -> &[(u32, &'static str, f64)] {
        &self.processes
    }
}

/// Keeps the higher of each figure of `later` in `earlier` (timeline points merged).
pub(super) fn merge_figures(earlier: &mut TimelinePoint, later: &TimelinePoint) {
    for key in later.figures.keys() {
        let high = match (earlier.figures.number(key), later.figures.number(key)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        earlier.figures.set_number(key, high);
    }
}
