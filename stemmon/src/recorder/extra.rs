//! The figures of the measurement sources (`sources`) in the engine: each record's and
//! the run's, folded at every sample by the field table's `fold`, the timeline's series,
//! the processes' figures and the sources' sections of the report. Nothing here knows
//! which source a figure came from.

use crate::memory::TreeReading;
use crate::report::{ProcessReport, Report, StageReport, TimelinePoint};
use crate::sources::Source;
use std::collections::BTreeMap;
use stemmon_report::fields::{field, Fold};

/// One record figure a source fills.
#[derive(Clone, Copy, Debug)]
struct Key {
    key: &'static str,
    fold: Fold,
    /// Its source measures something: the figure is in the report. A source opened on
    /// the sampler thread (NVML) becomes active at its first reading there.
    active: bool,
}

/// What the sources declared, and the run's figures and sections.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    keys: Vec<Key>,
    /// The run's figures, one slot per key.
    total: Vec<Option<u64>>,
    /// The sources' sections, by key (`gpu`).
    sections: BTreeMap<&'static str, serde_json::Value>,
}

/// One sample's readings of every source, kept between samples to reuse its lists.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// One per key of [`Extra`], in order.
    figures: Vec<Option<u64>>,
    /// Whether each key's source measured something at this sample, in the same order.
    active: Vec<bool>,
    /// The timeline point's series.
    series: Vec<(&'static str, Option<u64>)>,
    /// The processes' figures: pid, key, value.
    processes: Vec<(u32, &'static str, u64)>,
    sections: Vec<(&'static str, serde_json::Value)>,
}

impl Extra {
    /// The keys `sources` declare, each with its fold from the field table.
    pub(crate) fn of(sources: &[Box<dyn Source>]) -> Extra {
        let keys: Vec<Key> = sources
            .iter()
            .flat_map(|source| {
                let active = source.active();
                source.fields().iter().map(move |&key| Key {
                    key,
                    fold: field(key).map_or(Fold::Max, |f| f.fold),
                    active,
                })
            })
            .collect();
        Extra {
            total: vec![None; keys.len()],
            keys,
            sections: BTreeMap::new(),
        }
    }

    /// Folds one sample's figures into a record's slots (made at its first sample).
    pub(crate) fn fold_into(&self, slots: &mut Vec<Option<u64>>, taken: &Taken) {
        if self.keys.is_empty() {
            return;
        }
        slots.resize(self.keys.len(), None);
        for ((slot, value), key) in slots.iter_mut().zip(&taken.figures).zip(&self.keys) {
            *slot = match (key.fold, *slot, *value) {
                (Fold::Sum, Some(a), Some(b)) => Some(a.saturating_add(b)),
                (Fold::Sum | Fold::Derived, a, b) => a.or(b),
                (Fold::Max, a, b) => a.max(b),
            };
        }
    }

    /// Takes in one sample's readings: the run's figures and the sections.
    pub(crate) fn sampled(&mut self, taken: &mut Taken) {
        for (key, &active) in self.keys.iter_mut().zip(&taken.active) {
            key.active = active;
        }
        let mut total = std::mem::take(&mut self.total);
        self.fold_into(&mut total, taken);
        self.total = total;
        for (key, value) in taken.sections.drain(..) {
            self.sections.insert(key, value);
        }
    }

    /// Keeps a source's section as it is now.
    pub(crate) fn section(&mut self, key: &'static str, value: serde_json::Value) {
        self.sections.insert(key, value);
    }

    /// Writes a record's figures into its stage.
    pub(crate) fn stage(&self, slots: &[Option<u64>], stage: &mut StageReport) {
        for (index, key) in self.keys.iter().enumerate().filter(|(_, k)| k.active) {
            stage
                .figures
                .set_count(key.key, slots.get(index).copied().flatten());
        }
    }

    /// Writes the run's figures and the sections into the report.
    pub(crate) fn run(&self, report: &mut Report) {
        for (key, value) in self.keys.iter().zip(&self.total).filter(|(k, _)| k.active) {
            report.figures.set_count(key.key, *value);
        }
        for (key, value) in &self.sections {
            report.figures.set_value(key, value.clone());
        }
    }
}

impl Taken {
    /// Reads every source for the tree `tree` just read.
    pub(crate) fn take(&mut self, sources: &mut [Box<dyn Source>], tree: &TreeReading) {
        self.figures.clear();
        self.active.clear();
        self.series.clear();
        self.processes.clear();
        for source in sources.iter_mut() {
            let (series, process) = (source.series(), source.process_field());
            // Whether it measures is known once it has read (NVML opens on this thread).
            let figures = source.fields().len();
            let reading = source.sample(tree);
            self.figures.extend_from_slice(reading.figures);
            let active_at = self.active.len();
            self.active.extend(std::iter::repeat_n(false, figures));
            self.series
                .extend(series.iter().copied().zip(reading.series.iter().copied()));
            if let Some(key) = process {
                self.processes.extend(
                    reading
                        .processes
                        .iter()
                        .map(|&(pid, value)| (pid, key, value)),
                );
            }
            let active = source.active();
            self.active[active_at..].fill(active);
            if let Some(section) = source.section() {
                self.sections.push(section);
            }
        }
    }

    /// The timeline point's series into `point`.
    pub(crate) fn series_into(&self, point: &mut TimelinePoint) {
        for &(key, value) in &self.series {
            if value.is_some() {
                point.figures.set_count(key, value);
            }
        }
    }

    /// The processes' figures: pid, key, value.
    pub(crate) fn processes(&self) -> &[(u32, &'static str, u64)] {
        &self.processes
    }
}

/// Keeps the higher of each figure of `later` in `earlier` (timeline points merged).
pub(crate) fn merge_figures(earlier: &mut TimelinePoint, later: &TimelinePoint) {
    for key in later.figures.keys() {
        let high = earlier.figures.count(key).max(later.figures.count(key));
        earlier.figures.set_count(key, high);
    }
}

/// A process's figures, the highest of each seen, into its line of the report.
pub(crate) fn process_figures(figures: &[(&'static str, u64)], line: &mut ProcessReport) {
    for &(key, value) in figures {
        line.figures.set_count(key, Some(value));
    }
}
