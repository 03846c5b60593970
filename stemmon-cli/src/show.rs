//! `stemmon show REPORT`: the stage tree as an aligned table under a header.

use crate::format::{
    bytes, cell, clean, command_line, cores, cpu_seconds, cpu_total, seconds, signed_bytes,
};
use crate::table::Table;
use crate::tree::Tree;
use crate::{input, Failure};
use std::fmt::Write as _;
use std::path::PathBuf;
use stemmon::report::{ProcessReport, StageReport};
use stemmon::Report;

/// Prints a report: wall time, the peak and its stage, coverage, sampler cost and
/// errors, then one row per stage path.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The report to show (JSON written by stemmon).
    report: PathBuf,
    /// Also print the processes of the tree the run saw (stemmon 0.3): pid, parent,
    /// command, peak RSS, CPU seconds, exit code, first and last seen.
    #[arg(long)]
    processes: bool,
}

pub(crate) fn show(args: &Args) -> Result<(), Failure> {
    let loaded = input::load(&args.report)?;
    let mut out = render(&loaded.report, &loaded.tree);
    if args.processes {
        out.push('\n');
        out.push_str(&processes(&loaded.report));
    }
    crate::print_out(&out);
    Ok(())
}

/// The header lines and the table, as printed.
pub(crate) fn render(report: &Report, tree: &Tree) -> String {
    let mut out = header(report);
    if report.stages.is_empty() {
        out.push_str("no stages recorded\n");
    } else {
        let _ = writeln!(out, "{}", table(report, tree));
    }
    out
}

fn header(report: &Report) -> String {
    let mut out = String::new();
    let what = match &report.command {
        Some(argv) => format!("{} (pid {})", clean(&command_line(argv)), report.pid),
        None => format!("pid {}", report.pid),
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
    let _ = writeln!(out, "wall time:  {}", seconds(report.wall_seconds));
    // Each figure is its own maximum, taken at its own moment: none is a sum of the others.
    let mut peak = format!(
        "tree RSS {} (sampled",
        bytes(report.peaks.peak_tree_rss_bytes)
    );
    if let Some(at) = report.peak_rss_elapsed_seconds {
        let _ = write!(peak, ", at {}", seconds(at));
    }
    if let Some(stage) = &report.peak_rss_stage {
        let _ = write!(peak, " in {}", clean(stage));
    }
    peak.push(')');
    let high_water = &report.high_water;
    if let Some(bound) = high_water.peak_tree_rss_bound_bytes {
        let _ = write!(peak, "; bound ≤ {}", bytes(Some(bound)));
    }
    if let Some(parent) = high_water.peak_parent_hwm_bytes {
        let _ = write!(peak, "; parent's exact peak {}", bytes(Some(parent)));
    }
    let _ = writeln!(out, "peak:       {peak}");
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
    let run_cgroup = high_water.peak_cgroup_memory_bytes;
    if report.cgroup.is_some() || run_cgroup.is_some() {
        let mut line = format!("this run's peak {}", bytes(run_cgroup));
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
    out.push('\n');
    out
}

/// How deep the table indents; a stage nested deeper prints its depth instead.
const MAX_INDENT: usize = 32;

/// The stage column: the name indented by depth, at most [`MAX_INDENT`] levels (output
/// stays linear in the report however deep its chain).
fn indented(name: &str, depth: usize) -> String {
    if depth <= MAX_INDENT {
        format!("{}{}", "  ".repeat(depth), clean(name))
    } else {
        format!("{}[depth {depth}] {}", "  ".repeat(MAX_INDENT), clean(name))
    }
}

/// The report's heap (SPEC §11): the allocator, live and peak live bytes, or why there
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

/// The whole tree's CPU and I/O over the run (SPEC §12), or why I/O is missing; `None`
/// for a report from before 0.3.
fn cpu_line(report: &Report) -> Option<String> {
    let cpu_io = &report.cpu_io;
    let mut parts = Vec::new();
    if let Some(total) = cpu_total(cpu_io) {
        parts.push(format!(
            "CPU {} (user {}, system {}; {} cores over the run)",
            seconds(total),
            cpu_seconds(cpu_io.cpu_user_seconds),
            cpu_seconds(cpu_io.cpu_system_seconds),
            cores(cpu_io.cpu_cores)
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

/// A column of the stage table (numbers, set right): its header and its cell.
type Column = (&'static str, fn(&StageReport) -> String);

/// The 0.3 columns, each kept only when some stage has its figure: a report from 0.1
/// or 0.2 prints as it always did.
fn optional_columns(report: &Report) -> Vec<Column> {
    let any = |has: fn(&StageReport) -> bool| report.stages.iter().any(has);
    let mut columns: Vec<Column> = Vec::new();
    if any(|s| s.heap.heap_allocated_bytes.is_some()) {
        columns.push(("heap alloc", |s| bytes(s.heap.heap_allocated_bytes)));
    }
    if any(|s| s.heap.peak_heap_bytes.is_some()) {
        columns.push(("peak heap", |s| bytes(s.heap.peak_heap_bytes)));
    }
    if any(|s| s.heap.heap_retained_bytes.is_some()) {
        columns.push(("retained", |s| signed_bytes(s.heap.heap_retained_bytes)));
    }
    if any(|s| cpu_total(&s.cpu_io).is_some()) {
        columns.push(("CPU", |s| cpu_seconds(cpu_total(&s.cpu_io))));
    }
    if any(|s| s.cpu_io.cpu_thread_seconds.is_some()) {
        // The stage's own threads (RUSAGE_THREAD), apart from its siblings' work.
        columns.push(("own CPU", |s| cpu_seconds(s.cpu_io.cpu_thread_seconds)));
    }
    if any(|s| s.cpu_io.cpu_cores.is_some()) {
        columns.push(("cores", |s| cores(s.cpu_io.cpu_cores)));
    }
    if any(|s| s.cpu_io.io_read_bytes.is_some() || s.cpu_io.io_write_bytes.is_some()) {
        columns.push(("I/O read / write", |s| {
            match (s.cpu_io.io_read_bytes, s.cpu_io.io_write_bytes) {
                (None, None) => "-".to_owned(),
                (read, write) => format!("{} / {}", bytes(read), bytes(write)),
            }
        }));
    }
    columns
}

fn table(report: &Report, tree: &Tree) -> Table {
    let optional = optional_columns(report);
    let mut header: Vec<String> = [
        "stage",
        "calls",
        "errors",
        "total",
        "min",
        "max",
        "peak tree RSS",
        "tree bound",
        "processes",
    ]
    .map(String::from)
    .to_vec();
    header.extend(optional.iter().map(|(name, _)| (*name).to_owned()));
    let mut table = Table::new(header);
    table.align_right(1..9 + optional.len());
    for &index in tree.order() {
        let stage = &report.stages[index];
        let errors = match (&stage.error, stage.errors) {
            (_, 0) => "0".to_owned(),
            (Some(last), n) => format!("{n} ({})", clean(last)),
            (None, n) => n.to_string(),
        };
        let mut row = vec![
            indented(&stage.name, tree.depth(index)),
            stage.calls.to_string(),
            errors,
            seconds(stage.wall_seconds),
            seconds(stage.min_wall_seconds),
            seconds(stage.max_wall_seconds),
            bytes(stage.peaks.peak_tree_rss_bytes),
            bytes(stage.high_water.peak_tree_rss_bound_bytes),
            stage.peak_process_count.to_string(),
        ];
        row.extend(optional.iter().map(|(_, cell)| cell(stage)));
        table.add_row(row);
    }
    table
}

/// The widest command shown in the processes table, in characters.
const COMMAND_WIDTH: usize = 60;

/// The most processes printed: a report holds at most 50 (SPEC §12); one that holds
/// more was not written by stemmon, and its rest is counted, not printed.
const MAX_PROCESS_ROWS: usize = 200;

/// The processes table of `show --processes`, highest peak first.
pub(crate) fn processes(report: &Report) -> String {
    if report.processes.is_empty() {
        return "processes:  none recorded (stemmon 0.3 lists the tree's processes)\n".to_owned();
    }
    let mut order: Vec<&ProcessReport> = report.processes.iter().collect();
    order.sort_by(|a, b| {
        b.peak_rss_bytes
            .cmp(&a.peak_rss_bytes)
            .then(a.pid.cmp(&b.pid))
    });
    let mut table = Table::new(
        [
            "pid", "ppid", "command", "peak RSS", "CPU", "exit", "first", "last",
        ]
        .map(String::from)
        .to_vec(),
    );
    table.align_right(0..2);
    table.align_right(3..8);
    for process in order.iter().take(MAX_PROCESS_ROWS) {
        table.add_row(vec![
            process.pid.to_string(),
            process.ppid.to_string(),
            cell(&process.command, COMMAND_WIDTH),
            bytes(process.peak_rss_bytes),
            cpu_seconds(process.cpu_seconds),
            process.exit_code.map_or("-".into(), |c| c.to_string()),
            seconds(process.first_seconds),
            seconds(process.last_seconds),
        ]);
    }
    let mut out = format!(
        "processes:  {} seen (at most the 50 with the highest peak)\n{table}\n",
        report.processes.len()
    );
    if order.len() > MAX_PROCESS_ROWS {
        let _ = writeln!(
            out,
            "… and {} more (a report stemmon wrote holds at most 50)",
            order.len() - MAX_PROCESS_ROWS
        );
    }
    out
}
