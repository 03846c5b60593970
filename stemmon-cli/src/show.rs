//! `stemmon show REPORT`: the stage tree as an aligned table under a header.

use crate::format::{bytes, clean, command_line, seconds};
use crate::{input, Failure};
use comfy_table::{presets, CellAlignment, Table};
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
    let report = input::load(&args.report)?;
    crate::print_out(&render(&report));
    Ok(())
}

/// The header lines and the table, as printed.
pub(crate) fn render(report: &Report) -> String {
    let mut out = header(report);
    if report.stages.is_empty() {
        out.push_str("no stages recorded\n");
    } else {
        let _ = writeln!(out, "{}", table(report));
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
    let mut peak = format!("{} tree RSS", bytes(report.peaks.peak_tree_rss_bytes));
    if let Some(stage) = &report.peak_rss_stage {
        let _ = write!(peak, " in {}", clean(stage));
    }
    if let Some(at) = report.peak_rss_elapsed_seconds {
        let _ = write!(peak, " at {}", seconds(at));
    }
    let _ = writeln!(
        out,
        "peak:       {peak}; parent {}; children {}",
        bytes(report.peaks.peak_parent_rss_bytes),
        bytes(report.peaks.peak_children_rss_bytes)
    );
    let high_water = &report.high_water;
    if high_water.peak_tree_rss_bound_bytes.is_some() || high_water.peak_parent_hwm_bytes.is_some()
    {
        let _ = writeln!(
            out,
            "exact:      parent high-water {}; tree bound {}; largest exited child {}",
            bytes(high_water.peak_parent_hwm_bytes),
            bytes(high_water.peak_tree_rss_bound_bytes),
            bytes(high_water.peak_reaped_child_rss_bytes)
        );
    }
    if let Some(cgroup) = &report.cgroup {
        let _ = writeln!(
            out,
            "cgroup:     peak {}; limit {}; OOM kills {}",
            bytes(cgroup.memory_peak_bytes),
            cgroup
                .memory_limit_bytes
                .map_or("none".into(), |l| bytes(Some(l))),
            cgroup.oom_kills.map_or("-".into(), |n| n.to_string())
        );
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

fn depth(report: &Report, mut parent: Option<u32>) -> usize {
    let mut depth = 0;
    while let Some(id) = parent {
        depth += 1;
        parent = report.stages.get(id as usize).and_then(|s| s.parent_id);
        if depth > report.stages.len() {
            break; // A cycle in a hand-edited file: stop rather than loop.
        }
    }
    depth
}

/// Stages in tree order: each one followed by its children, in order of first entry.
fn tree_order(report: &Report) -> Vec<usize> {
    fn visit(report: &Report, parent: Option<u32>, seen: &mut Vec<bool>, out: &mut Vec<usize>) {
        for (index, stage) in report.stages.iter().enumerate() {
            let is_child = match parent {
                None => stage
                    .parent_id
                    .is_none_or(|p| p as usize >= report.stages.len()),
                Some(p) => stage.parent_id == Some(p) && stage.id != p,
            };
            if is_child && !seen[index] {
                seen[index] = true;
                out.push(index);
                visit(report, Some(stage.id), seen, out);
            }
        }
    }
    let mut seen = vec![false; report.stages.len()];
    let mut out = Vec::with_capacity(report.stages.len());
    visit(report, None, &mut seen, &mut out);
    // Anything left (inconsistent ids) still shows, at the end.
    out.extend((0..report.stages.len()).filter(|&i| !seen[i]));
    out
}

fn table(report: &Report) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "stage",
        "calls",
        "errors",
        "total",
        "min",
        "max",
        "peak tree RSS",
        "tree bound",
        "processes",
    ]);
    for index in tree_order(report) {
        let stage = &report.stages[index];
        let indent = "  ".repeat(depth(report, stage.parent_id));
        let errors = match (&stage.error, stage.errors) {
            (_, 0) => "0".to_owned(),
            (Some(last), n) => format!("{n} ({})", clean(last)),
            (None, n) => n.to_string(),
        };
        table.add_row(vec![
            format!("{indent}{}", clean(&stage.name)),
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
    for column in 1..9 {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}
