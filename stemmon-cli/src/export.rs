//! `stemmon export REPORT --format chrome`: Chrome trace event JSON for ui.perfetto.dev
//! and chrome://tracing; `--format otlp --endpoint URL`: the report's metrics and trace
//! to an OpenTelemetry collector (`stemmon::otlp::send`).
//!
//! One track per thread (`thread_name` metadata, `tid` = the report's thread id + 1),
//! a complete (`"X"`) slice per kept span, and counter (`"C"`) tracks for tree, parent
//! and children RSS (and the high-water bound when the report has it) from `timeline`;
//! with stemmon 0.3's figures, a `CPU cores` counter (`timeline[].cpu_cores`), and one
//! counter for each series of the field table a point has (`live heap` in MiB, a
//! measurement's in its unit).
//! Times are microseconds from the monitor's start.
//!
//! A 0.1 report has neither spans nor a timeline: its stages that ran once become
//! slices on the first thread, and its `recent_samples`, if any, the counters.

use crate::{input, Failure};
use serde_json::{json, Value};
use std::path::Path;
use stemmon::Report;
use stemmon_report::fields::Unit;

const MIB: f64 = (1u64 << 20) as f64;

/// A counter's argument name and value for a figure in `unit`: bytes in MiB, a share in
/// percent.
fn counted(unit: Unit, value: f64) -> (&'static str, f64) {
    match unit {
        Unit::Bytes => ("MiB", value / MIB),
        Unit::Share => ("%", value * 100.0),
        other => (other.name(), value),
    }
}

pub(crate) fn chrome(report: &Path, output: Option<&Path>) -> Result<(), Failure> {
    if let Some(output) = output {
        input::not_an_input(output, &[report])?;
    }
    let report = input::load(report)?.report;
    let mut text = trace(&report);
    text.push(b'\n');
    input::write_or_print(output, &text)
}

/// Sends `report`'s metrics and trace over OTLP; says on stdout where they went, and on
/// stderr which signal was not accepted (exit 0 when any was, 2 when none was).
pub(crate) fn otlp(report: &Path, endpoint: Option<&str>) -> Result<(), Failure> {
    let report = input::load(report)?.report;
    let sent = stemmon::otlp::send(&report, endpoint)
        .map_err(|error| Failure::input(format!("OTLP export failed: {error}")))?;
    for refused in &sent.refused {
        crate::print_err(&format!("stemmon: warning: not sent: {refused}"));
    }
    let mut lines = String::new();
    if let Some(url) = &sent.metrics_url {
        lines.push_str(&format!("sent {} data points to {url}\n", sent.data_points));
    }
    if let Some(url) = &sent.traces_url {
        lines.push_str(&format!("sent {} spans to {url}\n", sent.spans));
    }
    crate::print_out(&lines);
    Ok(())
}

fn micros(seconds: f64) -> f64 {
    // Whole nanoseconds: exact enough, and short in the file.
    (seconds * 1e9).round() / 1e3
}

/// The trace's events, encoded as they come: a report of 100 000 stages never holds
/// its events as JSON values at once.
struct Events {
    out: Vec<u8>,
    first: bool,
}

impl Events {
    fn push(&mut self, event: Value) {
        if !std::mem::replace(&mut self.first, false) {
            self.out.push(b',');
        }
        // A `Value` of strings and numbers always encodes.
        let _ = serde_json::to_writer(&mut self.out, &event);
    }
}

/// The trace event document for `report`, as JSON.
pub(crate) fn trace(report: &Report) -> Vec<u8> {
    let pid = report.pid;
    let mut events = Events {
        out: b"{\"traceEvents\":[".to_vec(),
        first: true,
    };
    let process_name = match &report.command {
        Some(argv) => format!("stemmon: {}", crate::format::command_line(argv)),
        None => format!("stemmon: pid {pid}"),
    };
    events.push(json!({
        "ph": "M", "name": "process_name", "pid": pid, "tid": 0,
        "args": { "name": process_name },
    }));

    // Threads: those the report names, plus any a span mentions.
    // By id, so that a report with 100 000 threads or spans costs no search per span.
    let mut threads: std::collections::BTreeMap<u32, String> = report
        .threads
        .iter()
        .map(|t| {
            let name = t.name.clone().unwrap_or_else(|| format!("thread {}", t.id));
            (t.id, name)
        })
        .collect();
    for span in &report.spans {
        threads.entry(span.thread).or_insert_with(|| {
            if span.thread == 0 {
                "main".to_owned()
            } else {
                format!("thread {}", span.thread)
            }
        });
    }
    let slices = slices(report);
    if threads.is_empty() && !slices.is_empty() {
        threads.insert(0, "main".to_owned());
    }
    for (id, name) in &threads {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": pid, "tid": u64::from(*id) + 1,
            "args": { "name": name },
        }));
        events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": u64::from(*id) + 1,
            "args": { "sort_index": id },
        }));
    }
    for slice in slices {
        let mut args = json!({ "path": slice.path });
        if let Some(error) = slice.error {
            args["error"] = json!(error);
        }
        events.push(json!({
            "ph": "X", "cat": "stage", "name": slice.name, "pid": pid, "tid": u64::from(slice.thread) + 1,
            "ts": micros(slice.start), "dur": micros(slice.wall), "args": args,
        }));
    }

    for (at, tree, parent, children, bound) in counter_points(report) {
        let mut counter = |name: &str, bytes: Option<u64>| {
            if let Some(bytes) = bytes {
                events.push(json!({
                    "ph": "C", "name": name, "pid": pid, "tid": 0, "ts": micros(at),
                    "args": { "MiB": (bytes as f64 / MIB * 1000.0).round() / 1000.0 },
                }));
            }
        };
        counter("tree RSS", tree);
        counter("parent RSS", parent);
        counter("children RSS", children);
        counter("tree RSS bound", bound);
    }
    for point in &report.timeline {
        let at = micros(point.elapsed_seconds);
        if let Some(cores) = point.cpu_cores {
            events.push(json!({
                "ph": "C", "name": "CPU cores", "pid": pid, "tid": 0, "ts": at,
                "args": { "cores": (cores * 1000.0).round() / 1000.0 },
            }));
        }
        // The live heap and each measurement's series, by the table's unit.
        for series in stemmon_report::fields::SERIES {
            if let Some(value) = series.of_point(point) {
                let (unit, value) = counted(series.unit, value);
                events.push(json!({
                    "ph": "C", "name": series.label, "pid": pid, "tid": 0, "ts": at,
                    "args": { unit: (value * 1000.0).round() / 1000.0 },
                }));
            }
        }
    }

    let other = json!({
        "generator": "stemmon export",
        "host": report.host,
        "wall_seconds": report.wall_seconds,
        "peak_tree_rss_bytes": report.peaks.peak_tree_rss_bytes,
        "peak_rss_stage": report.peak_rss_stage,
    });
    let mut out = events.out;
    out.extend_from_slice(b"],\"displayTimeUnit\":\"ms\",\"otherData\":");
    let _ = serde_json::to_writer(&mut out, &other);
    out.push(b'}');
    out
}

struct Slice {
    name: String,
    path: String,
    thread: u32,
    start: f64,
    wall: f64,
    error: Option<String>,
}

fn slices(report: &Report) -> Vec<Slice> {
    if !report.spans.is_empty() {
        return report
            .spans
            .iter()
            .filter_map(|span| {
                let stage = report.stages.get(span.stage_id as usize)?;
                Some(Slice {
                    name: stage.name.clone(),
                    path: stage.path.clone(),
                    thread: span.thread,
                    start: span.start_seconds,
                    wall: span.wall_seconds,
                    error: span.error.clone(),
                })
            })
            .collect();
    }
    // Without spans (a 0.1 report), a stage entered once is its own call.
    report
        .stages
        .iter()
        .filter(|stage| stage.calls == 1)
        .map(|stage| Slice {
            name: stage.name.clone(),
            path: stage.path.clone(),
            thread: 0,
            start: stage.start_seconds,
            wall: stage.wall_seconds,
            error: stage.error.clone(),
        })
        .collect()
}

type CounterPoint = (f64, Option<u64>, Option<u64>, Option<u64>, Option<u64>);

/// (seconds, tree, parent, children, bound) from the timeline, or from raw samples.
pub(crate) fn counter_points(report: &Report) -> Vec<CounterPoint> {
    if !report.timeline.is_empty() {
        return report
            .timeline
            .iter()
            .map(|p| {
                (
                    p.elapsed_seconds,
                    p.tree_rss_bytes,
                    p.parent_rss_bytes,
                    p.children_rss_bytes,
                    p.tree_rss_bound_bytes,
                )
            })
            .collect();
    }
    report
        .recent_samples
        .iter()
        .map(|s| {
            (
                s.elapsed_seconds,
                s.tree_rss_bytes,
                s.parent_rss_bytes,
                s.children_rss_bytes,
                None,
            )
        })
        .collect()
}
