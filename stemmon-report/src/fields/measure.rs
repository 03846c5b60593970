//! What a measurement declares (its figures, its timeline series, its figure per
//! process, its section of the report and its `compare --metric`), and the whole table
//! put together at compile time: the core's figures, then each measurement's.

use super::{measures, table, Field, Metric, Unit};
use crate::{ProcessReport, Report, TimelinePoint};

/// A measurement of the report: everything the readers of a report (`show`, `compare`,
/// `merge`, `plot`, the exporters, the live line) need to know of it. The runtime reads
/// it; this declaration is how every surface takes its figures.
#[derive(Debug)]
#[non_exhaustive]
pub struct Measure {
    /// Its name: `gpu`, `fds`.
    pub name: &'static str,
    /// Its page of the book, under `docs/src/` (`gpu.md`).
    pub page: &'static str,
    /// The figures it adds to every record (the run's and each stage's).
    pub fields: &'static [Field],
    /// The figures it adds to each timeline point.
    pub series: &'static [Series],
    /// Its figure of each process (`processes[]`), the highest seen.
    pub process: Option<Process>,
    /// The key of its section of the report (what it is, why a figure is missing), with
    /// the keys of it a reader leaves unread.
    pub section: Option<(&'static str, &'static [&'static str])>,
    /// The group `compare --metric` judges its figures as.
    pub metric: Option<Metric>,
    /// Whether its figures cover the time since the previous sample (a charge's peak
    /// since then, the kills since then): a record that closed in that time gets them
    /// too, where that time was its own. Else they are the state at the sample, for the
    /// records open at it.
    pub interval: bool,
    /// A measurement of the core: its fields and series are the core table's typed
    /// ones, in [`FIELDS`] and the report's own keys, not among [`MEASURES`].
    pub core: bool,
    section_set: Option<fn(&mut Report, &serde_json::Value)>,
}

impl Measure {
    /// A measurement named `name`, documented on `page`, with `fields` and `series`.
    pub const fn new(
        name: &'static str,
        page: &'static str,
        fields: &'static [Field],
        series: &'static [Series],
    ) -> Measure {
        Measure {
            name,
            page,
            fields,
            series,
            process: None,
            section: None,
            metric: None,
            interval: false,
            core: false,
            section_set: None,
        }
    }

    /// A measurement of the core, whose section is the report's typed field that `set`
    /// writes (from the section's JSON).
    pub(super) const fn of_core(
        self,
        section: &'static str,
        set: fn(&mut Report, &serde_json::Value),
    ) -> Measure {
        Measure {
            core: true,
            section: Some((section, &[])),
            section_set: Some(set),
            ..self
        }
    }

    /// A measurement of the core without a section of its own (the tree's memory).
    pub(super) const fn of_the_core(self) -> Measure {
        Measure { core: true, ..self }
    }

    /// Whose figures cover the time since the previous sample.
    pub const fn interval(self) -> Measure {
        Measure {
            interval: true,
            ..self
        }
    }

    /// Writes its section `value` into `report`: the typed field of a core
    /// measurement's, else among the report's figures under its key.
    pub fn set_section(&self, report: &mut Report, value: &serde_json::Value) {
        match (self.section_set, self.section) {
            (Some(set), _) => set(report, value),
            (None, Some((key, _))) => report.figures.set_value(key, value.clone()),
            (None, None) => {}
        }
    }

    /// With a figure of each process.
    pub const fn process(self, process: Process) -> Measure {
        Measure {
            process: Some(process),
            ..self
        }
    }

    /// With a section of the report, `unread` of its keys left unread by readers.
    pub const fn section(self, key: &'static str, unread: &'static [&'static str]) -> Measure {
        Measure {
            section: Some((key, unread)),
            ..self
        }
    }

    /// Judged by `compare --metric <metric.name>`.
    pub const fn metric(self, metric: Metric) -> Measure {
        Measure {
            metric: Some(metric),
            ..self
        }
    }
}

/// A figure of each timeline point: `plot` draws it on the panel of its unit, the live
/// line shows the newest, the Chrome trace counts it.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Series {
    /// The timeline point's key: `tree_gpu_bytes`.
    pub key: &'static str,
    /// Its name in a legend: `tree GPU memory`.
    pub label: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// Its name on the live line (`gpu` for `gpu=3.0 GiB`), where it is shown there.
    pub live: Option<&'static str>,
    /// The field whose whole-run figure is its peak (`peak_tree_gpu_bytes`).
    pub peak: Option<&'static str>,
    point: fn(&TimelinePoint) -> Option<f64>,
    write: Option<fn(&mut TimelinePoint, Option<f64>)>,
}

impl std::fmt::Debug for Series {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Series")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Series {
    /// A series kept by `key` among a point's figures.
    pub const fn new(key: &'static str, label: &'static str, unit: Unit) -> Series {
        Series {
            key,
            label,
            unit,
            live: None,
            peak: None,
            point: |_| None,
            write: None,
        }
    }

    /// Shown on the live line as `name=`.
    pub const fn live(self, name: &'static str) -> Series {
        Series {
            live: Some(name),
            ..self
        }
    }

    /// Whose whole-run peak is the field `key`.
    pub const fn peak(self, key: &'static str) -> Series {
        Series {
            peak: Some(key),
            ..self
        }
    }

    /// Read by `point` (the typed series of the core: the live heap).
    pub(super) const fn read(self, point: fn(&TimelinePoint) -> Option<f64>) -> Series {
        Series { point, ..self }
    }

    /// Written by `write` (the typed series of a core measurement: the cgroup's charge).
    pub(super) const fn write(self, write: fn(&mut TimelinePoint, Option<f64>)) -> Series {
        Series {
            write: Some(write),
            ..self
        }
    }

    /// Sets its value at `point`: a typed field, or among the point's figures.
    pub fn set(&self, point: &mut TimelinePoint, value: Option<f64>) {
        match self.write {
            Some(write) => write(point, value),
            None => point.figures.set_number(self.key, value),
        }
    }

    /// Its value at `point`.
    pub fn of_point(&self, point: &TimelinePoint) -> Option<f64> {
        (self.point)(point)
            .or_else(|| point.figures.number(self.key))
            .filter(|v| v.is_finite())
    }
}

/// A measurement's figure of each process: the highest seen.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Process {
    /// The key in `processes[]`: `peak_gpu_bytes`.
    pub key: &'static str,
    /// Its unit.
    pub unit: Unit,
}

impl Process {
    /// The figure `key` in `unit`.
    pub const fn new(key: &'static str, unit: Unit) -> Process {
        Process { key, unit }
    }

    /// Its value for `process`.
    pub fn of(&self, process: &ProcessReport) -> Option<f64> {
        process.figures.number(self.key).filter(|v| v.is_finite())
    }
}

/// Every measurement beyond the core, in the report's order.
pub const MEASURES: &[&Measure] = measures::ALL;

/// The series of the core (the live heap), then each measurement's.
const CORE_SERIES: &[Series] = &[measures::heap::LIVE];

/// The core's entries of a table followed by each measurement's `$part`, as one array
/// made at compile time: `$all` of `$count` entries.
macro_rules! joined {
    ($count:ident, $all:ident: [$ty:ty] = $core:expr, $part:ident) => {
        const $count: usize = {
            let mut count = $core.len();
            let mut at = 0;
            while at < MEASURES.len() {
                count += MEASURES[at].$part.len();
                at += 1;
            }
            count
        };

        const $all: [$ty; $count] = {
            let mut all = [$core[0]; $count];
            let mut next = 0;
            while next < $core.len() {
                all[next] = $core[next];
                next += 1;
            }
            let mut measure = 0;
            while measure < MEASURES.len() {
                let part = MEASURES[measure].$part;
                let mut at = 0;
                while at < part.len() {
                    all[next] = part[at];
                    next += 1;
                    at += 1;
                }
                measure += 1;
            }
            all
        };
    };
}

joined!(FIELD_COUNT, ALL_FIELDS: [Field] = table::CORE, fields);
joined!(SERIES_COUNT, ALL_SERIES: [Series] = CORE_SERIES, series);

/// Every figure of a record: the core's, then each measurement's, in the order the docs
/// and the tables give them.
pub const FIELDS: &[Field] = &ALL_FIELDS;

/// Every series of a timeline point beyond the tree's memory and CPU: the live heap,
/// then each measurement's.
pub const SERIES: &[Series] = &ALL_SERIES;

/// The groups `compare --metric` judges, in the order its help gives them: the core's,
/// then each measurement's.
pub fn metrics() -> impl Iterator<Item = Metric> {
    [Metric::EXACT, Metric::SAMPLED, Metric::HEAP, Metric::CPU]
        .into_iter()
        .chain(MEASURES.iter().filter_map(|m| m.metric))
}

/// The key of every figure a record, a point or a process may hold beyond the typed
/// fields: what a reader keeps among `figures`.
pub(crate) fn figure_keys() -> impl Iterator<Item = &'static str> {
    MEASURES.iter().flat_map(|m| {
        m.fields
            .iter()
            .map(|f| f.key)
            .chain(m.series.iter().map(|s| s.key))
            .chain(m.process.iter().map(|p| p.key))
    })
}

/// The keys of the sections a report keeps among its figures: each measurement's, and a
/// merge's.
pub(crate) fn section_keys() -> impl Iterator<Item = &'static str> {
    MEASURES
        .iter()
        .filter_map(|m| m.section.map(|(key, _)| key))
        .chain(["merge"])
}

/// The sections a report keeps among its figures, each with the keys of it left unread:
/// each measurement's (the GPU's) and a merge's. A merge's spreads per stage and per
/// process are for a person reading its JSON (they grow with its stages, and as values
/// they would cost several times their text); what readers take from it (its inputs,
/// its runs) is kept.
pub(crate) fn section(key: &str) -> Option<&'static [&'static str]> {
    const MERGE: (&str, &[&str]) = ("merge", &["stages", "processes"]);
    MEASURES
        .iter()
        .filter_map(|m| m.section)
        .chain([MERGE])
        .find(|(name, _)| *name == key)
        .map(|(_, unread)| unread)
}
