//! `stemmon show REPORT`: the stage tree as an aligned table under a header.
//!
//! The table's core columns (the stage, calls, errors, total / min / max wall, the tree
//! peak and bound, processes) are its own; the figure columns after them come from the
//! field table ([`stemmon_report::fields`]): each field marked `column`, when some stage
//! has it, headed by its label and printed by its unit.
//!
//! The output fits `COLUMNS` when it is set, else the terminal's width when standard
//! output is one; a pipe or a file gets it whole ([`crate::format::output_width`]). To
//! fit, header lines fold under their value, commands and stage names are cut in the
//! middle, and the least important columns go first (the left-out ones are named under
//! the table); the stage, its total time and its peak always stay.
//!
//! A peak leads with the exact figure where there is one: where the tree was the
//! process alone, its own high-water mark ([`crate::peak`]); elsewhere the sampled peak
//! is shown as the lower end (`≥`) of the range whose upper end is the bound.

use crate::format::{bytes, clean, figure, seconds, wrap};
use crate::peak::{tree_peak, TreePeak};
use crate::table::{Give, Table};
use crate::{input, Failure};
use processes::processes;
use std::fmt::Write as _;
use std::path::PathBuf;
use stemmon::report::StageReport;
use stemmon::Report;
use stemmon_report::fields::{Field, Fold, FIELDS};
use stemmon_report::StageTree as Tree;

mod header;
mod processes;

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
    let width = crate::format::output_width();
    let mut out = render(&loaded.report, &loaded.tree, width);
    if args.processes {
        out.push('\n');
        out.push_str(&processes(&loaded.report, width));
    }
    crate::print_out(&out);
    Ok(())
}

/// The header lines and the table, as printed, fitted to `width` characters (`None`: no
/// limit).
pub(crate) fn render(report: &Report, tree: &Tree, width: Option<usize>) -> String {
    let mut out = String::new();
    for line in header::header(report, width).lines() {
        let _ = writeln!(out, "{}", fold(line, width));
    }
    out.push('\n');
    if report.stages.is_empty() {
        out.push_str("no stages recorded\n");
    } else {
        let mut table = table(report, tree);
        let dropped = table.fit(width);
        let _ = writeln!(out, "{table}");
        let note = "peak tree RSS: exact where the stage's tree was the process alone; \
                    ≥ the sampled peak elsewhere, the true one at most the tree bound";
        let _ = writeln!(out, "{}", fold_at(note, width, 0));
        if let Some(line) = left_out(&dropped, width) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// A header line folded to `width`, continuations under the value (12 characters in).
fn fold(line: &str, width: Option<usize>) -> String {
    fold_at(line, width, 12)
}

/// A line folded to `width`, continuations `indent` characters in.
fn fold_at(line: &str, width: Option<usize>, indent: usize) -> String {
    match width {
        Some(width) => wrap(line, width, indent),
        None => line.to_owned(),
    }
}

/// The line naming the columns a narrow table left out, if any.
fn left_out(dropped: &[String], width: Option<usize>) -> Option<String> {
    let width = width?;
    (!dropped.is_empty()).then(|| {
        fold_at(
            &format!(
                "left out to fit {width} columns: {} (a wider COLUMNS shows them)",
                dropped.join(", ")
            ),
            Some(width),
            0,
        )
    })
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

/// The figure columns after the core ones: every field the table marks as a column
/// (`Field::column`: heap, CPU and I/O, cgroup and GPU figures), in the table's order,
/// each kept only when some stage has its figure, so a report without them prints as
/// it always did. On a narrow terminal sums give way first, then the figures computed
/// from others, then peaks (see [`give_of`]).
fn figure_columns(report: &Report) -> Vec<&'static Field> {
    FIELDS
        .iter()
        .filter(|field| field.column)
        .filter(|field| report.stages.iter().any(|s| field.of_stage(s).is_some()))
        .collect()
}

/// How a figure column gives way, by how its figure combines: a sum (`heap allocated`,
/// `read`) before `min` and `max`, a figure computed from others (`CPU`, `cores`)
/// before `processes`, a peak (`peak heap`, `GPU`) before `errors`.
fn give_of(field: &Field) -> Give {
    Give::drop(match field.fold {
        Fold::Sum => 0,
        Fold::Derived => 6,
        Fold::Max => 8,
    })
}

/// A stage's peak tree RSS cell: the exact figure where the stage's tree was the process
/// alone, else `≥` the sampled peak (the true peak lies between it and the bound).
fn peak_cell(stage: &StageReport) -> String {
    match tree_peak(&stage.peaks, &stage.high_water, stage.peak_process_count) {
        TreePeak::Exact(exact) => bytes(Some(exact)),
        TreePeak::Between {
            sampled: Some(sampled),
            ..
        } => format!("≥ {}", bytes(Some(sampled))),
        TreePeak::Between { sampled: None, .. } => bytes(None),
    }
}

/// The stage table's core columns, before the figure columns: the stage, its total time and its peak
/// never give way; the rest go from the least telling (`min`) up.
fn base_columns() -> [(&'static str, Option<Give>); 9] {
    [
        ("stage", Some(Give::narrow(11, 16))),
        ("calls", Some(Give::drop(12))),
        (
            "errors",
            Some(Give {
                rank: 9,
                narrow_to: Some(6),
                drop: true,
            }),
        ),
        ("total", None),
        ("min", Some(Give::drop(4))),
        ("max", Some(Give::drop(5))),
        ("peak tree RSS", None),
        ("tree bound", Some(Give::drop(13))),
        ("processes", Some(Give::drop(7))),
    ]
}

fn table(report: &Report, tree: &Tree) -> Table {
    let optional = figure_columns(report);
    let base = base_columns();
    let mut header: Vec<String> = base.iter().map(|(name, _)| (*name).to_owned()).collect();
    header.extend(optional.iter().map(|field| field.label.to_owned()));
    let mut table = Table::new(header);
    table.align_right(1..base.len() + optional.len());
    let gives = base
        .iter()
        .map(|(_, give)| *give)
        .chain(optional.iter().map(|field| Some(give_of(field))));
    for (column, give) in gives.enumerate() {
        if let Some(give) = give {
            table.give(column, give);
        }
    }
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
            peak_cell(stage),
            bytes(stage.high_water.peak_tree_rss_bound_bytes),
            stage.peak_process_count.to_string(),
        ];
        row.extend(
            optional
                .iter()
                .map(|field| figure(field.unit, field.of_stage(stage))),
        );
        table.add_row(row);
    }
    table
}
