//! Every figure a record (a stage, or the whole run) holds, declared once: its key, its
//! source, its unit, how it combines, its words for a column and a sentence, which
//! `compare --metric` judges it, and its exported metric. The command's `show`,
//! `compare` and `merge`, the runtime's Prometheus and OTLP metrics, and the report
//! reference of the docs are driven by this table, not written out per figure: a new
//! measurement declares its figures, series and section in a file of [`measures`], and
//! everything that reads records takes them.

use crate::{Report, StageReport};

/// The access of a measurement's figure, kept by key among a record's figures.
macro_rules! figure {
    ($key:literal) => {
        (
            |s: &$crate::StageReport| s.figures.number($key),
            |r: &$crate::Report| r.figures.number($key),
            Some(|s: &mut $crate::StageReport, v: Option<f64>| s.figures.set_number($key, v)),
        )
    };
}

/// A figure at the same path on a stage and on the run (`peaks`, `high_water`, `cpu_io`).
macro_rules! both {
    ($section:ident . $name:ident, bytes) => {
        (
            |s: &$crate::StageReport| $crate::fields::bytes(s.$section.$name),
            |r: &$crate::Report| $crate::fields::bytes(r.$section.$name),
            Some(|s: &mut $crate::StageReport, v: Option<f64>| {
                s.$section.$name = $crate::fields::whole(v)
            }),
        )
    };
    ($section:ident . $name:ident, seconds) => {
        (
            |s: &$crate::StageReport| s.$section.$name,
            |r: &$crate::Report| r.$section.$name,
            Some(|s: &mut $crate::StageReport, v: Option<f64>| s.$section.$name = v),
        )
    };
}

mod declare;
mod measure;
pub mod measures;
mod table;

pub(crate) use measure::{figure_keys, section, section_keys};
pub use measure::{metrics, Measure, Process, Series, FIELDS, MEASURES, SERIES};

/// Where a figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// The stage's calls themselves.
    Calls,
    /// The sampled memory of the process tree.
    Tree,
    /// The kernel's high-water marks and reaped children (the exact figures).
    Marks,
    /// The job's cgroup.
    Cgroup,
    /// `stemmon::Alloc`'s heap counts.
    Heap,
    /// CPU and storage I/O of the tree.
    Cpu,
    /// NVIDIA GPUs through NVML.
    Gpu,
    /// A measurement of [`measures`], by its name.
    Measurement(&'static str),
}

/// A figure's unit: it says how the figure is shown, judged and plotted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Seconds.
    Seconds,
    /// A count.
    Count,
    /// CPU cores (CPU seconds over wall seconds).
    Cores,
    /// A share of the time, from 0 to 1 (shown as a percentage).
    Share,
}

impl Unit {
    /// Whether its figures are whole numbers (bytes, counts): the report writes them as
    /// integers.
    pub fn is_whole(self) -> bool {
        matches!(self, Unit::Bytes | Unit::Count)
    }

    /// What its figures are called where a sentence judges them: `memory`, `count`,
    /// `time`, `CPU`, `pressure`.
    pub fn noun(self) -> &'static str {
        match self {
            Unit::Bytes => "memory",
            Unit::Count => "count",
            Unit::Seconds => "time",
            Unit::Cores => "CPU",
            Unit::Share => "pressure",
        }
    }

    /// Its name in the docs and in a plot panel's axis: `bytes`, `seconds`, `count`,
    /// `cores`, `share`.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Seconds => "seconds",
            Unit::Count => "count",
            Unit::Cores => "cores",
            Unit::Share => "share",
        }
    }

    /// `value` as a person reads it: `1.5 GiB`, `12`, `0.25s`, `3.8 cores`, `12.5%`.
    pub fn show(self, value: f64) -> String {
        if !value.is_finite() {
            return "unavailable".to_owned();
        }
        // `as` saturates: a hostile 1e300 prints as the largest figure, not as garbage.
        match self {
            Unit::Bytes => crate::format_bytes(value.max(0.0).round() as u64),
            Unit::Count => format!("{}", value.max(0.0).round() as u64),
            Unit::Seconds => format!("{value:.2}s"),
            Unit::Cores => format!("{value:.1} cores"),
            Unit::Share => format!("{:.1}%", value * 100.0),
        }
    }
}

/// How the figure of two records combines: the calls of one stage on two ranks, two
/// reports of one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// The larger: a peak.
    Max,
    /// The sum: a count, a total time, bytes moved.
    Sum,
    /// Recomputed from other figures (`cpu_cores`), never combined itself.
    Derived,
}

/// A group of figures `stemmon compare --metric` judges: the command's values are the
/// names of [`metrics`]. Two are equal when their names are.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Metric {
    /// The value of `--metric`: `exact`, `heap`.
    pub name: &'static str,
    /// What its figures are called in a sentence (`heap`, `GPU`), `None` for the tree's
    /// memory peaks that every report has.
    pub noun: Option<&'static str>,
    /// The section whose `missing` says why a report has none of its figures (`gpu`).
    pub section: Option<&'static str>,
}

impl PartialEq for Metric {
    fn eq(&self, other: &Metric) -> bool {
        self.name == other.name
    }
}

impl Eq for Metric {}

impl Metric {
    /// The kernel's exact figures (and the sampled peak beside them).
    pub const EXACT: Metric = Metric::of("exact", None, None);
    /// The sampled peak alone.
    pub const SAMPLED: Metric = Metric::of("sampled", None, None);
    /// The heap.
    pub const HEAP: Metric = Metric::of("heap", Some("heap"), Some("heap"));
    /// CPU time.
    pub const CPU: Metric = Metric::of("cpu", Some("CPU"), None);

    /// The metric `name`, its figures called `noun`, its missing figures explained in
    /// `section`.
    pub const fn of(
        name: &'static str,
        noun: Option<&'static str>,
        section: Option<&'static str>,
    ) -> Metric {
        Metric {
            name,
            noun,
            section,
        }
    }

    /// Whether it judges the tree's memory peaks (`exact`, `sampled`), not a source's
    /// figures.
    pub fn is_memory(&self) -> bool {
        self.noun.is_none()
    }

    /// Why `report` has none of its figures, where the report says (`heap.missing`,
    /// `gpu.missing`).
    pub fn missing(&self, report: &Report) -> Option<String> {
        match self.section? {
            "heap" => report.heap.missing.clone(),
            section => report
                .figures
                .value(section)
                .and_then(|value| value.get("missing"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        }
    }
}

/// A figure's exported metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Export {
    /// The Prometheus metric of a stage: `stemmon_stage_<name>` (counters end in
    /// `_total`); of the run, `stemmon_<name>`.
    pub name: &'static str,
    /// The OpenTelemetry metric of a stage: `stemmon.stage.<otlp>` (units are metadata,
    /// not part of the name); of the run, `stemmon.<otlp>`.
    pub otlp: &'static str,
    /// A counter (a sum over calls) or a gauge (a peak).
    pub counter: bool,
}

/// One figure of a record (see the module docs).
#[derive(Clone, Copy)]
pub struct Field {
    /// The report key (for a figure computed from others, its name: `cpu_seconds`).
    pub key: &'static str,
    /// Its source.
    pub source: Source,
    /// Its unit.
    pub unit: Unit,
    /// How two records' figures combine.
    pub fold: Fold,
    /// A column's header: `bound`, `peak heap`.
    pub label: &'static str,
    /// What it is, in a sentence.
    pub meaning: &'static str,
    /// The `compare --metric` groups that judge it.
    pub metrics: &'static [Metric],
    /// Its exported metric, where it has one.
    pub export: Option<Export>,
    /// Whether `stemmon show` gives it a column of the stage table, shown when some
    /// stage has the figure: the figures of the sources beyond the tree's (heap, CPU and
    /// I/O, cgroup, GPU) that say most per stage. The stage's calls, times and tree peaks
    /// have that table's own columns; the rest are in `show`'s header or the report.
    pub column: bool,
    stage: fn(&StageReport) -> Option<f64>,
    run: fn(&Report) -> Option<f64>,
    set: Option<fn(&mut StageReport, Option<f64>)>,
    /// Writes the run's figure where the report has a typed field for it (a core
    /// measurement's); a measurement beyond the core keeps it among the figures.
    set_run: Option<fn(&mut Report, Option<f64>)>,
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Field")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Field {
    /// Its value in `stage`.
    pub fn of_stage(&self, stage: &StageReport) -> Option<f64> {
        (self.stage)(stage).filter(|v| v.is_finite())
    }

    /// Its value for the whole run of `report` (for the heap: the whole process's).
    pub fn of_run(&self, report: &Report) -> Option<f64> {
        (self.run)(report).filter(|v| v.is_finite())
    }

    /// Sets it in `stage` (a combined record); a figure computed from others is not set.
    pub fn set(&self, stage: &mut StageReport, value: Option<f64>) {
        if let Some(set) = self.set {
            set(stage, value);
        }
    }

    /// Sets the whole run's figure in `report`: its typed field where its declaration
    /// gives it a writer (a core measurement's), else among the report's figures (a
    /// measurement's beyond the core).
    pub fn set_run(&self, report: &mut Report, value: Option<f64>) {
        match self.set_run {
            Some(set) => set(report, value),
            None => report.figures.set_number(self.key, value),
        }
    }

    /// This field with its run's figure written by `set` (a typed field of the report).
    pub(crate) const fn on_run(self, set: fn(&mut Report, Option<f64>)) -> Field {
        Field {
            set_run: Some(set),
            ..self
        }
    }

    /// Whether it is a report key (not computed from others).
    pub fn is_key(&self) -> bool {
        self.set.is_some()
    }

    /// This field with a column in `stemmon show`'s stage table.
    const fn in_column(self) -> Field {
        Field {
            column: true,
            ..self
        }
    }

    /// Whether `--max-peak` and the memory threshold apply: a peak in bytes.
    pub fn is_peak(&self) -> bool {
        self.fold == Fold::Max && self.unit == Unit::Bytes
    }
}

/// The field with `key`.
pub fn field(key: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.key == key)
}

/// A byte count as the table's figures hold it.
pub(crate) fn bytes(value: Option<u64>) -> Option<f64> {
    value.map(|v| v as f64)
}

/// A figure back as a whole count (none below 0).
pub(crate) fn whole(value: Option<f64>) -> Option<u64> {
    value.filter(|v| *v >= 0.0).map(|v| v.round() as u64)
}

/// How a field is read on a stage and on the run, and written on a stage (the table's).
type Access = (
    fn(&StageReport) -> Option<f64>,
    fn(&Report) -> Option<f64>,
    Option<fn(&mut StageReport, Option<f64>)>,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_and_writes_its_own_key() {
        let mut keys: Vec<&str> = FIELDS.iter().map(|f| f.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), FIELDS.len(), "a key declared twice");
        for (n, field) in FIELDS.iter().enumerate().filter(|(_, f)| f.is_key()) {
            let mut stage = StageReport::default();
            let value = 1000.0 + n as f64;
            field.set(&mut stage, Some(value));
            assert_eq!(field.of_stage(&stage), Some(value), "{}", field.key);
            // And it is the report key of that name.
            let json = serde_json::to_value(&stage).unwrap();
            assert_eq!(json[field.key].as_f64(), Some(value), "{}", field.key);
        }
    }

    #[test]
    fn a_core_measurements_figures_series_and_section_are_the_reports_typed_keys() {
        let cgroup = &measures::cgroup::MEASURE;
        assert!(cgroup.core && cgroup.interval);
        assert!(
            MEASURES.iter().all(|m| m.name != cgroup.name),
            "not joined again"
        );
        let mut report = Report::default();
        for (n, field) in cgroup.fields.iter().enumerate() {
            let in_table = FIELDS.iter().filter(|f| f.key == field.key).count();
            assert_eq!(in_table, 1, "{} is the core table's, once", field.key);
            let value = 1000.0 + n as f64;
            field.set_run(&mut report, Some(value));
            assert_eq!(field.of_run(&report), Some(value), "{}", field.key);
            assert_eq!(report.figures.number(field.key), None, "{}", field.key);
        }
        let mut point = crate::TimelinePoint::default();
        cgroup.series[0].set(&mut point, Some(5.0));
        assert_eq!(point.cgroup_memory_bytes, Some(5));
        assert_eq!(cgroup.series[0].of_point(&point), Some(5.0));
        assert_eq!(point.figures.number("cgroup_memory_bytes"), None);
        let section = serde_json::json!({"path": "/sys/fs/cgroup/job", "version": 2});
        cgroup.set_section(&mut report, &section);
        assert_eq!(report.cgroup.as_ref().map(|c| c.version), Some(2));
        assert!(report.figures.value("cgroup").is_none());
        // A measurement beyond the core keeps its figures among the report's.
        let fds = &measures::fds::MEASURE;
        fds.fields[0].set_run(&mut report, Some(7.0));
        assert_eq!(report.figures.number(fds.fields[0].key), Some(7.0));
    }

    #[test]
    fn derived_figures_come_from_their_parts() {
        let mut stage = StageReport::default();
        stage.cpu_io.cpu_user_seconds = Some(1.5);
        stage.cpu_io.cpu_system_seconds = Some(0.25);
        assert_eq!(field("cpu_seconds").unwrap().of_stage(&stage), Some(1.75));
        assert!(!field("cpu_seconds").unwrap().is_key());
        assert!(field("peak_tree_rss_bound_bytes").unwrap().is_peak());
        assert!(!field("heap_allocated_bytes").unwrap().is_peak());
    }

    #[test]
    fn columns_are_figures_of_the_sources_beyond_the_tree() {
        for field in FIELDS.iter().filter(|f| f.column) {
            assert!(
                matches!(
                    field.source,
                    Source::Heap | Source::Cpu | Source::Cgroup | Source::Gpu
                ),
                "{}: the calls, times and tree peaks have show's own columns",
                field.key
            );
        }
        assert!(field("peak_tree_gpu_bytes").unwrap().column);
        assert!(!field("heap_freed_bytes").unwrap().column);
    }
}
