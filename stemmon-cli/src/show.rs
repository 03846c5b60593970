//! `stemmon show REPORT`: the stage tree as an aligned table under a header.

use crate::format::{bytes, clean, command_line, seconds};
use crate::table::Table;
use crate::tree::Tree;
use crate::{input, Failure};
use std::fmt::Write as _;
use std::path::PathBuf;
use stemmon::Report;

/// Prints a report: wall time, the peak and its stage, coverage, sampler cost and
/// errors, then one row per stage path.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The report to show (JSON written by stemmon).
    report: PathBuf,
}

pub(crate) fn show(args: &Args) -> Result<(), Failure> {
    let loaded = input::load(&args.report)?;
    crate::print_out(&render(&loaded.report, &loaded.tree));
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

fn table(report: &Report, tree: &Tree) -> Table {
    let mut table = Table::new(
        [
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
        .to_vec(),
    );
    table.align_right(1..9);
    for &index in tree.order() {
        let stage = &report.stages[index];
        let errors = match (&stage.error, stage.errors) {
            (_, 0) => "0".to_owned(),
            (Some(last), n) => format!("{n} ({})", clean(last)),
            (None, n) => n.to_string(),
        };
        table.add_row(vec![
            indented(&stage.name, tree.depth(index)),
            stage.calls.to_string(),
            errors,
            seconds(stage.wall_seconds),
            seconds(stage.min_wall_seconds),
            seconds(stage.max_wall_seconds),
            bytes(stage.peaks.peak_tree_rss_bytes),
            bytes(stage.high_water.peak_tree_rss_bound_bytes),
            stage.peak_process_count.to_string(),
        ]);
    }
    table
}
