//! The header of `stemmon show`: one line per fact of the run (what ran, what a merged
//! report was made of, wall time, the peak, marks and their resets, cgroup, heap, CPU
//! and I/O, GPUs, coverage, sampler, errors).

use crate::format::{
    bytes, clean, command_line, cores, cpu_seconds, cpu_total, figure, middle, seconds, short,
};
use crate::peak::{at_least, tree_peak, TreePeak};
use std::fmt::Write as _;
use stemmon::Report;
use stemmon_report::fields::Unit;

/// The header's lines; the command on the first is cut in the middle to fit `width`.
pub(super) fn header(report: &Report, width: Option<usize>) -> String {
    let mut out = String::new();
    let runs = merged_runs(report);
    let what = match (&report.command, runs) {
        // A merge is no one process: its runs are named on the `merged:` line.
        (Some(argv), Some(runs)) => {
            let room = width.map_or(usize::MAX, |w| w.saturating_sub(30).max(20));
            format!("{} ({runs} runs)", middle(&command_line(argv), room))
        }
        (None, Some(runs)) => format!("{runs} runs"),
        (Some(argv), None) => {
            let rest = format!(" (pid {}) on {}, still running", report.pid, report.host);
            let room = width.map_or(usize::MAX, |w| {
                w.saturating_sub(12 + rest.chars().count()).max(20)
            });
            format!("{} (pid {})", middle(&command_line(argv), room), report.pid)
        }
        (None, None) => format!("pid {}", report.pid),
    };
    let state = if report.running {
        ", still running"
    } else {
        ""
    };
    let host = if report.host.is_empty() {
        String::new()
    } else {
        format!(" on {}", clean(&report.host))
    };
    let _ = writeln!(out, "run:        {what}{host}{state}");
    if !report.labels.is_empty() {
        let labels: Vec<String> = report
            .labels
            .iter()
            .map(|(k, v)| format!("{}={}", clean(k), clean(v)))
            .collect();
        let _ = writeln!(out, "labels:     {}", labels.join(", "));
    }
    if let Some(line) = merged_line(report) {
        let _ = writeln!(out, "merged:     {line}");
    }
    let _ = writeln!(out, "wall time:  {}", seconds(report.wall_seconds));
    let _ = writeln!(out, "peak:       {}", peak_line(report));
    let high_water = &report.high_water;
    let mut apart = format!(
        "parent RSS {}, children RSS {} (sampled, each at its own moment)",
        bytes(report.peaks.peak_parent_rss_bytes),
        bytes(report.peaks.peak_children_rss_bytes)
    );
    if let Some(reaped) = high_water.peak_reaped_child_rss_bytes {
        let _ = write!(apart, "; largest exited child {}", bytes(Some(reaped)));
    }
    let _ = writeln!(out, "own peaks:  {apart}");
    let detailed: Vec<String> = [
        ("USS", report.peaks.peak_tree_uss_bytes),
        ("PSS", report.peaks.peak_tree_pss_bytes),
        (
            "physical footprint",
            report.peaks.peak_tree_physical_footprint_bytes,
        ),
    ]
    .into_iter()
    .filter_map(|(what, value)| value.map(|v| format!("tree {what} {}", bytes(Some(v)))))
    .collect();
    if !detailed.is_empty() {
        let _ = writeln!(out, "detailed:   peak {}", detailed.join("; peak "));
    }
    let marks = &report.high_water_marks;
    if let Some(why) = &marks.missing {
        let which: Vec<&str> = [
            ("parent", marks.parent),
            ("descendants", marks.descendants),
            ("reaped", marks.reaped),
        ]
        .into_iter()
        .filter_map(|(what, read)| (!read).then_some(what))
        .collect();
        let which = if which.is_empty() {
            String::new()
        } else {
            format!(" ({} not read)", which.join(", "))
        };
        let _ = writeln!(out, "marks:      missing{which}: {}", clean(why));
    }
    if let Some(line) = resets_line(report) {
        let _ = writeln!(out, "resets:     {line}");
    }
    let run_cgroup = high_water.peak_cgroup_memory_bytes;
    if report.cgroup.is_some() || run_cgroup.is_some() {
        // The charge counts every process of the cgroup and its file cache: say so,
        // with the anonymous memory (what processes hold themselves) beside it.
        let mut line = format!(
            "this run's peak {} (every process of the cgroup, file cache included",
            bytes(run_cgroup)
        );
        match high_water.peak_cgroup_anon_bytes {
            Some(anon) => {
                let _ = write!(line, "; anonymous {})", bytes(Some(anon)));
            }
            None => line.push(')'),
        }
        if let Some(cgroup) = &report.cgroup {
            let _ = write!(
                line,
                "; cgroup lifetime peak {}; limit {}; OOM kills {}",
                bytes(cgroup.memory_peak_bytes),
                cgroup
                    .memory_limit_bytes
                    .map_or("none".into(), |l| bytes(Some(l))),
                cgroup.oom_kills.map_or("-".into(), |n| n.to_string())
            );
        }
        let _ = writeln!(out, "cgroup:     {line}");
    }
    if let Some(line) = heap_line(report) {
        let _ = writeln!(out, "heap:       {line}");
    }
    if let Some(line) = cpu_line(report) {
        let _ = writeln!(out, "CPU, I/O:   {line}");
    }
    if let Some(line) = gpu_line(report) {
        let _ = writeln!(out, "gpu:        {line}");
    }
    for measure in stemmon_report::fields::MEASURES
        .iter()
        .filter(|m| m.name != "gpu")
    {
        if let Some(line) = measure_line(measure, report) {
            let _ = writeln!(out, "{:<11} {line}", format!("{}:", measure.name));
        }
    }
    let complete = report.samples.saturating_sub(report.partial_rss_samples);
    let _ = writeln!(
        out,
        "coverage:   {complete}/{} samples read the whole tree; {} at most",
        report.samples,
        match report.peak_process_count {
            1 => "1 process".to_owned(),
            n => format!("{n} processes"),
        }
    );
    let mean = if report.sampling_attempts > 0 {
        report.sampling_seconds / report.sampling_attempts as f64
    } else {
        0.0
    };
    let _ = writeln!(
        out,
        "sampler:    {} every {}; {} samples, {} in all ({} each, slowest {}); longest gap {}",
        if report.sampler.is_empty() {
            "?"
        } else {
            &report.sampler
        },
        seconds(report.sample_interval),
        report.sampling_attempts,
        seconds(report.sampling_seconds),
        seconds(mean),
        seconds(report.max_sampling_seconds),
        seconds(report.max_sample_gap_seconds)
    );
    let errors: Vec<String> = [
        ("run", &report.error),
        ("sampling", &report.sampling_error),
        ("output", &report.output_error),
        ("export", &report.export_error),
    ]
    .into_iter()
    .filter_map(|(what, error)| error.as_ref().map(|e| format!("{what}: {}", clean(e))))
    .collect();
    let _ = writeln!(
        out,
        "errors:     {}",
        if errors.is_empty() {
            "none".to_owned()
        } else {
            errors.join("; ")
        }
    );
    out
}

/// The whole run's peak: the exact figure first where the tree was the process alone;
/// else the sampled one, the bound and the process's own exact peak, each its own maximum
/// taken at its own moment (none is a sum of the others).
fn peak_line(report: &Report) -> String {
    let mut when = String::new();
    if let Some(at) = report.peak_rss_elapsed_seconds {
        let _ = write!(when, ", at {}", seconds(at));
    }
    if let Some(stage) = &report.peak_rss_stage {
        let _ = write!(when, " in {}", clean(stage));
    }
    let sampled = bytes(report.peaks.peak_tree_rss_bytes);
    let high_water = &report.high_water;
    match tree_peak(&report.peaks, high_water, report.peak_process_count) {
        TreePeak::Exact(exact) => format!(
            "tree RSS {} (exact: the process alone, its own high-water mark); \
             sampled {sampled}{when}",
            bytes(Some(exact))
        ),
        TreePeak::Between { bound, .. } => {
            let mut line = format!("tree RSS {sampled} (sampled{when})");
            if let Some(bound) = bound {
                let _ = write!(line, "; bound ≤ {}", bytes(Some(bound)));
            } else if let Some(floor) = at_least(high_water, report.high_water_marks.unseen) {
                let _ = write!(line, "; {floor}");
            }
            if let Some(parent) = high_water.peak_parent_hwm_bytes {
                let _ = write!(line, "; parent's exact peak {}", bytes(Some(parent)));
            }
            line
        }
    }
}

/// Whether stemmon reset the kernel's high-water marks (the book's `exact-peaks.md`), and what that did
/// to the program's own view of its peak; `None` when it did not.
fn resets_line(report: &Report) -> Option<String> {
    let marks = &report.high_water_marks;
    if !marks.enabled || !(marks.parent || marks.descendants) {
        return None;
    }
    // Before 0.4 (no format_version) every reading reset the marks it read.
    let resets = marks.resets || report.format_version.is_none();
    if !resets {
        return Some(
            "off: each mark was read as it runs from its process's start, so the programs' \
             own ru_maxrss (getrusage, /usr/bin/time, VmHWM) is untouched, and the bound \
             sums lifetime peaks (high_water_marks = \"reset\", --high-water-marks=reset, \
             resets them at every reading)"
                .to_owned(),
        );
    }
    let who = match (marks.parent, marks.descendants, report.command.is_some()) {
        (true, true, true) => "the command and its descendants",
        (true, true, false) => "the monitored process and its descendants",
        (true, false, true) => "the command",
        (true, false, false) => "the monitored process",
        (false, _, _) => "the descendants",
    };
    let off = if report.command.is_some() {
        "`stemmon run` resets them only with --high-water-marks=reset"
    } else {
        "high_water_marks = \"keep\" (STEMMON_HIGH_WATER_MARKS=keep) leaves them"
    };
    Some(format!(
        "on: stemmon reset the kernel's high-water marks of {who} at every reading, so \
         a process's own ru_maxrss (getrusage, /usr/bin/time, VmHWM) counts from the last \
         reset, not from its start: outer tools see reset marks; {off}"
    ))
}

/// The report's heap (the book's `heap.md`): the allocator, live and peak live bytes, or why there
/// are none; `None` for a report from before 0.3, which says nothing of the heap.
fn heap_line(report: &Report) -> Option<String> {
    let heap = &report.heap;
    if heap.allocator.is_none() && heap.live_bytes.is_none() {
        return heap
            .missing
            .as_ref()
            .map(|why| format!("none: {}", clean(why)));
    }
    let mut line = format!(
        "{}; live {}, peak live {}",
        clean(heap.allocator.as_deref().unwrap_or("?")),
        bytes(heap.live_bytes),
        bytes(heap.peak_live_bytes)
    );
    if let Some(allocated) = heap.allocated_bytes {
        let _ = write!(line, "; {} allocated", bytes(Some(allocated)));
    }
    if let Some(count) = heap.allocations {
        let _ = write!(line, " in {count} allocations");
    }
    Some(line)
}

/// The most inputs the `merged:` line names; the rest are counted.
const MAX_INPUTS: usize = 8;

/// What a report of `stemmon merge` was made of: its inputs' files, and whose timeline
/// it holds; `None` for a report of one run.
fn merged_line(report: &Report) -> Option<String> {
    let section = report.figures.value("merge")?;
    let inputs = section.get("inputs")?.as_array()?;
    let text = |input: &serde_json::Value, key: &str| {
        input
            .get(key)
            .and_then(serde_json::Value::as_str)
            .filter(|text| !text.is_empty())
            .map(|text| clean(&short(text)).into_owned())
    };
    let file = |input: &serde_json::Value| text(input, "file").unwrap_or_else(|| "?".to_owned());
    // Each input by its file, and its run by host and rank.
    let named = |input: &serde_json::Value| {
        let who: Vec<String> = [("host", "host"), ("rank", "rank")]
            .into_iter()
            .filter_map(|(key, word)| text(input, key).map(|v| format!("{word} {v}")))
            .collect();
        if who.is_empty() {
            file(input)
        } else {
            format!("{}: {}", file(input), who.join(", "))
        }
    };
    let mut names: Vec<String> = inputs.iter().take(MAX_INPUTS).map(named).collect();
    if inputs.len() > MAX_INPUTS {
        names.push(format!("… and {} more", inputs.len() - MAX_INPUTS));
    }
    let s = if inputs.len() == 1 { "" } else { "s" };
    let mut line = format!("{} report{s} ({})", inputs.len(), names.join("; "));
    let from = section
        .get("timeline_from")
        .and_then(serde_json::Value::as_u64)
        .and_then(|at| inputs.get(usize::try_from(at).ok()?));
    if let Some(from) = from {
        let _ = write!(
            line,
            "; the timeline, samples and spans are {}'s (the highest sampled peak)",
            file(from)
        );
    }
    Some(line)
}

/// How many runs a report of `stemmon merge` holds; `None` for one run's report.
fn merged_runs(report: &Report) -> Option<usize> {
    let section = report.figures.value("merge")?;
    let count = |key: &str| {
        section
            .get(key)
            .and_then(serde_json::Value::as_array)
            .map(Vec::len)
    };
    Some(count("runs").or_else(|| count("inputs")).unwrap_or(0))
}

/// The highest of the merged runs' cores, from the merge's spread of `cpu_cores`.
fn max_cores(report: &Report) -> Option<f64> {
    let section = report.figures.value("merge")?;
    section.get("run")?.get("cpu_cores")?.get("max")?.as_f64()
}

/// A measurement's line: its whole-run figures, each in its unit, else why it has none
/// (its section's `missing`); `None` for a report that says nothing of it.
fn measure_line(measure: &stemmon_report::fields::Measure, report: &Report) -> Option<String> {
    let parts: Vec<String> = measure
        .fields
        .iter()
        .filter_map(|field| {
            let value = field.of_run(report)?;
            Some(format!(
                "{} {}",
                field.label,
                figure(field.unit, Some(value))
            ))
        })
        .collect();
    if !parts.is_empty() {
        return Some(parts.join("; "));
    }
    let (key, _) = measure.section?;
    let missing = report.figures.value(key)?.get("missing")?.as_str()?;
    Some(format!("none: {}", clean(&short(missing))))
}

/// The most GPUs the `gpu:` line names; the rest are counted (a report stemmon wrote
/// names the machine's, a hostile one may name a million).
const MAX_GPUS: usize = 16;

/// The tree's and the busiest GPU's peaks (the book's `gpu.md`), the driver and each device from
/// the report's `gpu` section, or why there are none; `None` for a report that says
/// nothing of GPUs.
fn gpu_line(report: &Report) -> Option<String> {
    let section = report.figures.value("gpu");
    let text = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .map(|t| clean(&short(t)).into_owned())
    };
    let count = |value: Option<&serde_json::Value>| value.and_then(serde_json::Value::as_u64);
    let mut parts = Vec::new();
    for (what, key) in [
        ("the tree's peak", "peak_tree_gpu_bytes"),
        ("the busiest GPU's peak", "peak_device_gpu_bytes"),
    ] {
        let value = stemmon_report::fields::field(key).and_then(|f| f.of_run(report));
        if let Some(value) = value {
            parts.push(format!("{what} {}", figure(Unit::Bytes, Some(value))));
        }
    }
    let devices = section
        .and_then(|s| s.get("devices"))
        .and_then(serde_json::Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if let Some(driver) = text(section.and_then(|s| s.get("driver_version"))) {
        parts.push(format!("driver {driver}"));
    }
    for device in devices.iter().take(MAX_GPUS) {
        let index = count(device.get("index")).map_or("?".to_owned(), |i| i.to_string());
        let name = text(device.get("name")).unwrap_or_else(|| "?".to_owned());
        let mut line = format!(
            "GPU {index} {name}: peak used {} of {}",
            bytes(count(device.get("peak_memory_used_bytes"))),
            bytes(count(device.get("memory_total_bytes")))
        );
        if let Some(why) = text(device.get("missing")) {
            let _ = write!(line, " (missing: {why})");
        }
        parts.push(line);
    }
    if devices.len() > MAX_GPUS {
        parts.push(format!("… and {} more GPUs", devices.len() - MAX_GPUS));
    }
    if let Some(why) = text(section.and_then(|s| s.get("missing"))) {
        if parts.is_empty() {
            return Some(format!("none: {why}"));
        }
        parts.push(format!("missing: {why}"));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The whole tree's CPU and I/O over the run (the book's `cpu-io.md`), or why I/O is missing; `None`
/// for a report from before 0.3.
fn cpu_line(report: &Report) -> Option<String> {
    let cpu_io = &report.cpu_io;
    let mut parts = Vec::new();
    if let Some(total) = cpu_total(cpu_io) {
        // A merge's cores are per run: their mean, and the busiest run's.
        let over = match (merged_runs(report), max_cores(report)) {
            (Some(_), Some(max)) => format!(
                "{} cores per run, at most {}",
                cores(cpu_io.cpu_cores),
                cores(Some(max))
            ),
            (Some(_), None) => format!("{} cores per run", cores(cpu_io.cpu_cores)),
            (None, _) => format!("{} cores over the run", cores(cpu_io.cpu_cores)),
        };
        parts.push(format!(
            "CPU {} (user {}, system {}; {over})",
            seconds(total),
            cpu_seconds(cpu_io.cpu_user_seconds),
            cpu_seconds(cpu_io.cpu_system_seconds),
        ));
    }
    if cpu_io.io_read_bytes.is_some() || cpu_io.io_write_bytes.is_some() {
        parts.push(format!(
            "read {}, written {}",
            bytes(cpu_io.io_read_bytes),
            bytes(cpu_io.io_write_bytes)
        ));
    }
    if let Some(why) = &report.io_missing {
        parts.push(format!("I/O missing: {}", clean(why)));
    }
    if let Some(faults) = cpu_io.major_faults {
        let s = if faults == 1 { "" } else { "s" };
        parts.push(format!("{faults} major fault{s}"));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
