//! The metrics of a report, as one list of entries ([`metrics`]): name, report key,
//! unit, instrument, description, and where the value comes from. The points and span
//! attributes made from it are in [`points`](super::points).
//!
//! The monitored process's own figures use the OpenTelemetry process semantic conventions
//! (`process.memory.usage`, `process.cpu.time`, `process.uptime`); the whole tree's are
//! `stemmon.tree.*` with the same units (`stemmon.tree.memory.usage`,
//! `stemmon.tree.cpu.time`, `stemmon.tree.disk.io`, `stemmon.tree.paging.faults`), and
//! `stemmon.*` names for the rest; each
//! stage's figures are `stemmon.stage.*`, with the stage's path in `stage.path`. The run's
//! and the stages' are kept under different names, so that summing a metric never adds
//! a stage to the run that holds it (stages are inclusive).

use crate::export::capital;
use crate::report::{Report, StageReport};
use std::sync::OnceLock;
use stemmon_report::fields::{Field, Source as FieldSource, Unit, FIELDS};

/// How an entry's points aggregate: the OpenTelemetry instrument it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A value now, or a peak so far: not to be added up.
    Gauge,
    /// A cumulative total that only grows (CPU seconds, calls, bytes allocated).
    Counter,
    /// A cumulative total that can fall (memory in use now).
    UpDownCounter,
}

/// One figure, integers exact.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Figure {
    Int(u64),
    Float(f64),
}

/// Where an entry's value comes from.
#[derive(Clone, Copy)]
pub(crate) enum Source {
    /// The whole run: one point, without `stage.path`.
    Run(fn(&Report) -> Option<Figure>),
    /// Each stage: one point per stage that has the figure, with `stage.path`.
    Stage(fn(&StageReport) -> Option<Figure>),
    /// A field of the table, of the whole run.
    FieldRun(&'static Field),
    /// A field of the table, of each stage.
    FieldStage(&'static Field),
}

impl Source {
    /// Whether it is the whole run's (else each stage's).
    pub(crate) fn is_run(&self) -> bool {
        matches!(self, Source::Run(_) | Source::FieldRun(_))
    }

    /// The value for the whole run, where the entry is the run's.
    pub(crate) fn of_run(&self, report: &Report) -> Option<Figure> {
        match self {
            Source::Run(value) => value(report),
            Source::FieldRun(field) => figure(field, field.of_run(report)?),
            _ => None,
        }
    }

    /// The value for `stage`, where the entry is the stages'.
    pub(crate) fn of_stage(&self, stage: &StageReport) -> Option<Figure> {
        match self {
            Source::Stage(value) => value(stage),
            Source::FieldStage(field) => figure(field, field.of_stage(stage)?),
            _ => None,
        }
    }
}

/// A field's value as a figure: whole numbers exact.
fn figure(field: &Field, value: f64) -> Option<Figure> {
    match field.unit {
        Unit::Bytes | Unit::Count => (value >= 0.0).then(|| Figure::Int(value.round() as u64)),
        _ => Some(Figure::Float(value)),
    }
}

/// The unit OpenTelemetry writes for `field` (UCUM).
fn unit_of(field: &Field) -> &'static str {
    match field.unit {
        Unit::Bytes => "By",
        Unit::Seconds => "s",
        Unit::Count if field.source == FieldSource::Calls => "{call}",
        // Cores, counts and shares are dimensionless.
        _ => "1",
    }
}

/// Every metric stemmon sends, in the order sent: [`WRITTEN`], then one per stage figure
/// of the field table with an exported metric (but CPU and disk, split by mode above),
/// and the run's peaks of the table (but the heap's, written above as the live heap).
pub(crate) fn metrics() -> &'static [Entry] {
    static ALL: OnceLock<Vec<Entry>> = OnceLock::new();
    static NAMES: OnceLock<Vec<(String, String, String)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let exported = || {
            FIELDS
                .iter()
                .filter_map(|field| Some((field, field.export?)))
                .filter(|(f, _)| {
                    !matches!(f.key, "cpu_seconds" | "io_read_bytes" | "io_write_bytes")
                })
        };
        let names = NAMES.get_or_init(|| {
            exported()
                .map(|(field, export)| {
                    (
                        format!("stemmon.stage.{}", export.otlp),
                        format!("stemmon.{}", export.otlp),
                        format!("{}.", capital(field.meaning)),
                    )
                })
                .collect()
        });
        let mut all = WRITTEN.to_vec();
        for ((field, export), (stage, run, description)) in exported().zip(names) {
            let kind = if export.counter { Counter } else { Gauge };
            if !export.counter && field.source != FieldSource::Heap {
                all.push(Entry {
                    name: run,
                    key: field.key,
                    unit: unit_of(field),
                    kind,
                    description,
                    attribute: None,
                    source: Source::FieldRun(field),
                });
            }
            all.push(Entry {
                name: stage,
                key: field.key,
                unit: unit_of(field),
                kind,
                description,
                attribute: None,
                source: Source::FieldStage(field),
            });
        }
        all
    })
}

/// One figure of the report as an OTLP metric's data point (and a span attribute).
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    /// The metric's name; entries of one name are adjacent and differ in `attribute`.
    pub(crate) name: &'static str,
    /// The report key the value comes from; spans carry it as `stemmon.<key>`.
    pub(crate) key: &'static str,
    /// UCUM, as OpenTelemetry writes units: `By`, `s`, `{call}`.
    pub(crate) unit: &'static str,
    pub(crate) kind: Kind,
    pub(crate) description: &'static str,
    /// The attribute that tells this entry's points from its namesakes' (`cpu.mode`).
    pub(crate) attribute: Option<(&'static str, &'static str)>,
    pub(crate) source: Source,
}

const fn run(
    name: &'static str,
    key: &'static str,
    unit: &'static str,
    kind: Kind,
    description: &'static str,
    value: fn(&Report) -> Option<Figure>,
) -> Entry {
    Entry {
        name,
        key,
        unit,
        kind,
        description,
        attribute: None,
        source: Source::Run(value),
    }
}

const fn stage(
    name: &'static str,
    key: &'static str,
    unit: &'static str,
    kind: Kind,
    description: &'static str,
    value: fn(&StageReport) -> Option<Figure>,
) -> Entry {
    Entry {
        name,
        key,
        unit,
        kind,
        description,
        attribute: None,
        source: Source::Stage(value),
    }
}

/// `entry` told apart from its namesakes by `attribute` = `value`.
const fn with(entry: Entry, attribute: &'static str, value: &'static str) -> Entry {
    Entry {
        attribute: Some((attribute, value)),
        ..entry
    }
}

fn int(value: Option<u64>) -> Option<Figure> {
    value.map(Figure::Int)
}

fn float(value: Option<f64>) -> Option<Figure> {
    value.map(Figure::Float)
}

use Kind::{Counter, Gauge, UpDownCounter};

const CPU: &str = "CPU seconds of the whole process tree (every thread, live descendants and \
                   the reaped ones), by mode.";
const STAGE_CPU: &str = "CPU seconds of the whole process tree while the stage was open, \
                         summed over calls, by mode.";
const DISK: &str = "Bytes the process tree read from and wrote to storage.";
const STAGE_DISK: &str = "Bytes the process tree read from and wrote to storage while the \
                          stage was open.";

/// The monitored process itself: its entry in the report's process list.
fn root(report: &Report) -> Option<&crate::report::ProcessReport> {
    report.processes.iter().find(|p| p.pid == report.pid)
}

/// The metrics written out here: the monitored process's under the process semantic
/// conventions (`process.*`, as its `process.pid` says), the whole tree's under
/// `stemmon.tree.*` with the same units, the heap's, and the CPU and disk figures split
/// by an attribute. The rest come from the field table ([`metrics`]).
const WRITTEN: &[Entry] = &[
    run(
        "process.memory.usage",
        "parent_rss_bytes",
        "By",
        UpDownCounter,
        "RSS of the monitored process alone at the latest sample.",
        |r| int(r.latest_sample.as_ref()?.parent_rss_bytes),
    ),
    run(
        "process.cpu.time",
        "processes.cpu_seconds",
        "s",
        Counter,
        "CPU seconds (user and system) of the monitored process alone since the monitor \
         started.",
        |r| float(root(r)?.cpu_seconds),
    ),
    run(
        "process.memory.virtual",
        "processes.virtual_bytes",
        "By",
        UpDownCounter,
        "Virtual memory of the monitored process alone at the latest sample.",
        |r| int(root(r)?.virtual_bytes),
    ),
    run(
        "process.thread.count",
        "processes.threads",
        "{thread}",
        UpDownCounter,
        "Threads of the monitored process at the latest sample.",
        |r| int(root(r)?.threads.map(u64::from)),
    ),
    run(
        "process.unix.file_descriptor.count",
        "processes.open_fds",
        "{file_descriptor}",
        UpDownCounter,
        "Open file descriptors of the monitored process at the latest sample.",
        |r| int(root(r)?.open_fds.map(u64::from)),
    ),
    run(
        "stemmon.tree.memory.usage",
        "tree_rss_bytes",
        "By",
        UpDownCounter,
        "RSS of the whole process tree (the process and every descendant) at the latest sample.",
        |r| int(r.latest_sample.as_ref()?.tree_rss_bytes),
    ),
    with(
        run(
            "stemmon.tree.cpu.time",
            "cpu_user_seconds",
            "s",
            Counter,
            CPU,
            |r| float(r.cpu_io.cpu_user_seconds),
        ),
        "cpu.mode",
        "user",
    ),
    with(
        run(
            "stemmon.tree.cpu.time",
            "cpu_system_seconds",
            "s",
            Counter,
            CPU,
            |r| float(r.cpu_io.cpu_system_seconds),
        ),
        "cpu.mode",
        "system",
    ),
    with(
        run(
            "stemmon.tree.disk.io",
            "io_read_bytes",
            "By",
            Counter,
            DISK,
            |r| int(r.cpu_io.io_read_bytes),
        ),
        "disk.io.direction",
        "read",
    ),
    with(
        run(
            "stemmon.tree.disk.io",
            "io_write_bytes",
            "By",
            Counter,
            DISK,
            |r| int(r.cpu_io.io_write_bytes),
        ),
        "disk.io.direction",
        "write",
    ),
    with(
        run(
            "stemmon.tree.paging.faults",
            "major_faults",
            "{fault}",
            Counter,
            "Page faults of the process tree that needed I/O.",
            |r| int(r.cpu_io.major_faults),
        ),
        "system.paging.fault.type",
        "major",
    ),
    run(
        "process.uptime",
        "wall_seconds",
        "s",
        Gauge,
        "Seconds since the monitor started (until it finished).",
        |r| Some(Figure::Float(r.wall_seconds)),
    ),
    run(
        "stemmon.running",
        "running",
        "1",
        Gauge,
        "1 while the monitor runs, 0 once it finished.",
        |r| Some(Figure::Int(u64::from(r.running))),
    ),
    run(
        "stemmon.processes",
        "process_count",
        "{process}",
        UpDownCounter,
        "Processes in the tree at the latest sample.",
        |r| {
            Some(Figure::Int(u64::from(
                r.latest_sample.as_ref()?.process_count,
            )))
        },
    ),
    run(
        "stemmon.heap.live",
        "heap.live_bytes",
        "By",
        UpDownCounter,
        "Heap bytes allocated and not yet freed by the process (stemmon::Alloc).",
        |r| int(r.heap.live_bytes),
    ),
    run(
        "stemmon.heap.peak_live",
        "heap.peak_live_bytes",
        "By",
        Gauge,
        "Highest live heap of the process at any reading (stemmon::Alloc).",
        |r| int(r.heap.peak_live_bytes),
    ),
    run(
        "stemmon.heap.allocated",
        "heap.allocated_bytes",
        "By",
        Counter,
        "Heap bytes the process allocated since the start (stemmon::Alloc).",
        |r| int(r.heap.allocated_bytes),
    ),
    with(
        stage(
            "stemmon.stage.cpu.time",
            "cpu_user_seconds",
            "s",
            Counter,
            STAGE_CPU,
            |s| float(s.cpu_io.cpu_user_seconds),
        ),
        "cpu.mode",
        "user",
    ),
    with(
        stage(
            "stemmon.stage.cpu.time",
            "cpu_system_seconds",
            "s",
            Counter,
            STAGE_CPU,
            |s| float(s.cpu_io.cpu_system_seconds),
        ),
        "cpu.mode",
        "system",
    ),
    with(
        stage(
            "stemmon.stage.disk.io",
            "io_read_bytes",
            "By",
            Counter,
            STAGE_DISK,
            |s| int(s.cpu_io.io_read_bytes),
        ),
        "disk.io.direction",
        "read",
    ),
    with(
        stage(
            "stemmon.stage.disk.io",
            "io_write_bytes",
            "By",
            Counter,
            STAGE_DISK,
            |s| int(s.cpu_io.io_write_bytes),
        ),
        "disk.io.direction",
        "write",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_one_name_are_adjacent_and_agree() {
        let mut seen = std::collections::HashSet::new();
        for pair in metrics().windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.name == b.name {
                assert_eq!(
                    (a.unit, a.kind, a.description),
                    (b.unit, b.kind, b.description)
                );
                assert!(
                    a.attribute.is_some() && a.attribute != b.attribute,
                    "{}",
                    a.name
                );
                assert_eq!(a.source.is_run(), b.source.is_run());
            } else {
                assert!(seen.insert(a.name), "{} is not adjacent", a.name);
            }
        }
        // A stage's metric is never the run's (summing would count a stage twice).
        for entry in metrics() {
            let staged = !entry.source.is_run();
            assert_eq!(
                entry.name.starts_with("stemmon.stage."),
                staged,
                "{}",
                entry.name
            );
        }
    }
}
