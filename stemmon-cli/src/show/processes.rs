//! The processes table of `stemmon show --processes`.

use super::left_out;
use crate::format::{bytes, cpu_seconds, middle, seconds};
use crate::table::{Give, Table};
use std::fmt::Write as _;
use stemmon::report::ProcessReport;
use stemmon::Report;

/// The widest command shown in the processes table fitted to a width, in characters.
const COMMAND_WIDTH: usize = 60;

/// The widest command shown whole (piped, no `COLUMNS`): the most stemmon records
/// (`MAX_COMMAND_CHARS` in the runtime); a longer one was not written by stemmon.
const WHOLE_COMMAND_WIDTH: usize = 200;

/// The most processes printed: a report holds at most 50 (the book's `cpu-io.md`); one that holds
/// more was not written by stemmon, and its rest is counted, not printed.
const MAX_PROCESS_ROWS: usize = 200;

/// The processes table of `show --processes`, highest peak first, fitted to `width`.
pub(super) fn processes(report: &Report, width: Option<usize>) -> String {
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
    for (column, give) in [
        (1, Give::drop(2)),
        (2, Give::narrow(5, 16)),
        (4, Give::drop(3)),
        (5, Give::drop(4)),
        (6, Give::drop(0)),
        (7, Give::drop(1)),
    ] {
        table.give(column, give);
    }
    let command_width = width.map_or(WHOLE_COMMAND_WIDTH, |_| COMMAND_WIDTH);
    for process in order.iter().take(MAX_PROCESS_ROWS) {
        table.add_row(vec![
            process.pid.to_string(),
            process.ppid.to_string(),
            middle(&process.command, command_width),
            bytes(process.peak_rss_bytes),
            cpu_seconds(process.cpu_seconds),
            process.exit_code.map_or("-".into(), |c| c.to_string()),
            seconds(process.first_seconds),
            seconds(process.last_seconds),
        ]);
    }
    let dropped = table.fit(width);
    let mut out = format!(
        "processes:  {} seen (at most the 50 with the highest peak)\n{table}\n",
        report.processes.len()
    );
    if let Some(line) = left_out(&dropped, width) {
        let _ = writeln!(out, "{line}");
    }
    if order.len() > MAX_PROCESS_ROWS {
        let _ = writeln!(
            out,
            "… and {} more (a report stemmon wrote holds at most 50)",
            order.len() - MAX_PROCESS_ROWS
        );
    }
    out
}
