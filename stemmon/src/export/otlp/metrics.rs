//! The metrics of a report, as one list of entries ([`METRICS`]): name, report key,
//! unit, instrument, description, and where the value comes from. The points and span
//! attributes made from it are in [`points`](super::points).
//!
//! The whole run's figures use the OpenTelemetry process semantic conventions where one
//! exists (`process.memory.usage`, `process.cpu.time`, `process.disk.io`,
//! `process.paging.faults`, `process.uptime`), `stemmon.*` names for the rest; each
//! stage's figures are `stemmon.stage.*`, with the stage's path in `stage.path`. The run's
//! and the stages' are kept under different names, so that summing a metric never adds
//! a stage to the run that holds it (stages are inclusive).

use crate::report::{Report, StageReport};

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

/// Every metric stemmon sends, in the order sent.
pub(crate) const METRICS: &[Entry] = &[
    run(
        "process.memory.usage",
        "tree_rss_bytes",
        "By",
        UpDownCounter,
        "RSS of the whole process tree (the process and every descendant) at the latest sample.",
        |r| int(r.latest_sample.as_ref()?.tree_rss_bytes),
    ),
    with(
        run(
            "process.cpu.time",
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
            "process.cpu.time",
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
            "process.disk.io",
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
            "process.disk.io",
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
            "process.paging.faults",
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
        "stemmon.peak_tree_rss",
        "peak_tree_rss_bytes",
        "By",
        Gauge,
        "Highest sampled RSS of the process tree.",
        |r| int(r.peaks.peak_tree_rss_bytes),
    ),
    run(
        "stemmon.peak_tree_rss_bound",
        "peak_tree_rss_bound_bytes",
        "By",
        Gauge,
        "Upper bound of the tree's peak RSS from the kernel's high-water marks.",
        |r| int(r.high_water.peak_tree_rss_bound_bytes),
    ),
    run(
        "stemmon.peak_parent_hwm",
        "peak_parent_hwm_bytes",
        "By",
        Gauge,
        "Exact peak RSS of the monitored process itself (its high-water mark).",
        |r| int(r.high_water.peak_parent_hwm_bytes),
    ),
    run(
        "stemmon.peak_cgroup_memory",
        "peak_cgroup_memory_bytes",
        "By",
        Gauge,
        "Highest memory charge of the job's cgroup seen during the run.",
        |r| int(r.high_water.peak_cgroup_memory_bytes),
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
    stage(
        "stemmon.stage.calls",
        "calls",
        "{call}",
        Counter,
        "Calls of the stage, open ones included.",
        |s| Some(Figure::Int(s.calls)),
    ),
    stage(
        "stemmon.stage.errors",
        "errors",
        "{call}",
        Counter,
        "Calls of the stage that failed (panicked, returned Err, or were cancelled).",
        |s| Some(Figure::Int(s.errors)),
    ),
    stage(
        "stemmon.stage.wall_time",
        "wall_seconds",
        "s",
        Counter,
        "Wall time of all calls of the stage, summed over threads.",
        |s| Some(Figure::Float(s.wall_seconds)),
    ),
    stage(
        "stemmon.stage.peak_tree_rss",
        "peak_tree_rss_bytes",
        "By",
        Gauge,
        "Highest sampled RSS of the process tree while the stage was open.",
        |s| int(s.peaks.peak_tree_rss_bytes),
    ),
    stage(
        "stemmon.stage.peak_tree_rss_bound",
        "peak_tree_rss_bound_bytes",
        "By",
        Gauge,
        "Upper bound of the tree's peak RSS while the stage was open.",
        |s| int(s.high_water.peak_tree_rss_bound_bytes),
    ),
    stage(
        "stemmon.stage.peak_parent_hwm",
        "peak_parent_hwm_bytes",
        "By",
        Gauge,
        "Exact peak RSS of the monitored process itself while the stage was open.",
        |s| int(s.high_water.peak_parent_hwm_bytes),
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
    stage(
        "stemmon.stage.heap.allocated",
        "heap_allocated_bytes",
        "By",
        Counter,
        "Heap bytes allocated while the stage was open, all calls and threads (stemmon::Alloc).",
        |s| int(s.heap.heap_allocated_bytes),
    ),
    stage(
        "stemmon.stage.heap.peak",
        "peak_heap_bytes",
        "By",
        Gauge,
        "Highest heap growth during a call of the stage (stemmon::Alloc).",
        |s| int(s.heap.peak_heap_bytes),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_one_name_are_adjacent_and_agree() {
        let mut seen = std::collections::HashSet::new();
        for pair in METRICS.windows(2) {
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
                assert_eq!(
                    matches!(a.source, Source::Run(_)),
                    matches!(b.source, Source::Run(_))
                );
            } else {
                assert!(seen.insert(a.name), "{} is not adjacent", a.name);
            }
        }
        // A stage's metric is never the run's (summing would count a stage twice).
        for entry in METRICS {
            let staged = matches!(entry.source, Source::Stage(_));
            assert_eq!(
                entry.name.starts_with("stemmon.stage."),
                staged,
                "{}",
                entry.name
            );
        }
    }
}
