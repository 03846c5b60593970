//! How `compare` prints its outcome: an aligned table for a terminal, or Markdown for
//! a pull-request comment, with the reasons NEW failed.

use super::figure::{show as show_figure, Figure};
use super::{Args, Outcome, Row, Side, Verdict, MAX_REASONS};
use crate::format::{bytes, change, clean, percent, seconds};
use crate::table::{Give, Table};
use std::fmt::Write as _;

/// The cells of a row after its name: times, then each figure, then the verdict.
pub(super) fn cells(row: &Row, figures: &[Figure], args: &Args) -> Vec<String> {
    let wall = |side: &Option<Side>| side.as_ref().map_or("-".into(), |s| seconds(s.wall));
    let mut cells = vec![wall(&row.base), wall(&row.new)];
    cells.push(match (&row.base, &row.new) {
        (Some(b), Some(n)) => percent(change(b.wall, n.wall)),
        _ => "-".into(),
    });
    for (index, &figure) in figures.iter().enumerate() {
        let value = |side: &Option<Side>| side.as_ref().and_then(|s| s.memory[index]);
        let (b, n) = (value(&row.base), value(&row.new));
        cells.push(show_figure(figure, b));
        cells.push(show_figure(figure, n));
        cells.push(percent(b.zip(n).and_then(|(b, n)| change(b, n))));
    }
    cells.push(match &row.verdict {
        Verdict::Ok => "ok".to_owned(),
        Verdict::Failed(why) => format!("FAIL: {why}"),
        Verdict::Short => format!("ok (< {}: time not judged)", seconds(args.min_seconds)),
        Verdict::OnlyInBase => "only in base".to_owned(),
        Verdict::OnlyInNew => "only in new".to_owned(),
    });
    cells
}

pub(super) fn header(figures: &[Figure]) -> Vec<String> {
    let mut header: Vec<String> = ["stage", "base time", "new time", "time Δ"]
        .map(String::from)
        .to_vec();
    for figure in figures {
        let column = figure.label;
        header.push(format!("base {column}"));
        header.push(format!("new {column}"));
        header.push(format!("{column} Δ"));
    }
    header.push("verdict".to_owned());
    header
}

/// The line that says which memory figures were compared.
pub(super) fn compared_line(outcome: &Outcome) -> String {
    let which: Vec<String> = outcome
        .figures
        .iter()
        .map(|f| format!("{} (`{}`)", f.meaning, f.key))
        .collect();
    // The figures' unit says what they are: `memory`, `count`, `time`, `pressure`.
    let what = outcome.figures.first().map_or("memory", |f| f.unit.noun());
    let mut line = format!("{what} compared: {}", which.join(" and "));
    if let Some(note) = &outcome.figures_note {
        let _ = write!(line, "; {note}");
    }
    if let Some(sides) = &outcome.sides {
        let _ = write!(line, "\n{sides}");
    }
    line
}

/// The last line: the verdict and the thresholds.
pub(super) fn summary(outcome: &Outcome, args: &Args) -> String {
    let verdict = match outcome.reasons.len() {
        0 => "pass: no regression".to_owned(),
        1 => "FAIL: 1 reason".to_owned(),
        n => format!("FAIL: {n} reasons"),
    };
    let mut limits = format!(
        "time +{} %, memory +{} %, time of stages of {} or more",
        args.time_limit(),
        args.max_memory_increase,
        seconds(args.min_seconds)
    );
    if let Some(limit) = args.max_peak {
        let _ = write!(limits, ", peak at most {}", bytes(Some(limit)));
    }
    format!("{verdict} (thresholds: {limits})")
}

/// The reasons, one a line, each after `prefix`; past [`MAX_REASONS`] they are counted.
pub(super) fn reason_lines(
    out: &mut String,
    reasons: &[String],
    prefix: &str,
    escape: fn(&str) -> String,
) {
    for reason in reasons.iter().take(MAX_REASONS) {
        let _ = writeln!(out, "{prefix}{}", escape(reason));
    }
    if reasons.len() > MAX_REASONS {
        let _ = writeln!(out, "{prefix}… and {} more", reasons.len() - MAX_REASONS);
    }
}

pub(super) fn text(outcome: &Outcome, args: &Args) -> String {
    let mut table = Table::new(header(&outcome.figures));
    for row in &outcome.rows {
        let mut line = vec![clean(&row.name).into_owned()];
        line.extend(cells(row, &outcome.figures, args));
        table.add_row(line);
    }
    table.align_right(1..4 + 3 * outcome.figures.len());
    // On a narrow terminal the bases go first, then the new figures; the stage, the
    // changes and the verdict stay (the reasons under the table are whole anyway).
    let last = 4 + 3 * outcome.figures.len();
    table.give(0, Give::narrow(4, 16));
    table.give(1, Give::drop(1));
    table.give(2, Give::drop(3));
    for index in 0..outcome.figures.len() {
        table.give(4 + 3 * index, Give::drop(0));
        table.give(5 + 3 * index, Give::drop(2));
    }
    table.give(last, Give::narrow(5, 16));
    let width = crate::format::output_width();
    let dropped = table.fit(width);
    // The lines around the table fit the width too, wrapped.
    let fit = |line: &str| match width {
        Some(width) => line
            .lines()
            .map(|l| crate::format::wrap(l, width, 0))
            .collect::<Vec<_>>()
            .join("\n"),
        None => line.to_owned(),
    };
    let mut out = format!("{}\n{table}\n", fit(&compared_line(outcome)));
    if let (Some(width), false) = (width, dropped.is_empty()) {
        let line = format!(
            "left out to fit {width} columns: {} (a wider COLUMNS shows them)",
            dropped.join(", ")
        );
        let _ = writeln!(out, "{}", crate::format::wrap(&line, width, 0));
    }
    reason_lines(&mut out, &outcome.reasons, "FAIL: ", |r| {
        clean(r).into_owned()
    });
    let _ = writeln!(out, "{}", fit(&summary(outcome, args)));
    out
}

/// `text` from a report (a stage name, a reason naming one) for Markdown: no character
/// of it makes markup, a link, a table cell or HTML; plain punctuation stays as it is.
pub(super) fn md(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in clean(text).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '!' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

pub(super) fn markdown(outcome: &Outcome, args: &Args) -> String {
    let mut out = String::new();
    let title = if outcome.reasons.is_empty() {
        "pass"
    } else {
        "FAIL"
    };
    let _ = writeln!(out, "### stemmon compare: {title}\n");
    // The compared line, the header and the summary are stemmon's own words, not the report's.
    let _ = writeln!(out, "{}\n", compared_line(outcome));
    let header = header(&outcome.figures);
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let align: Vec<&str> = (0..header.len())
        .map(|i| {
            if i == 0 || i == header.len() - 1 {
                "---"
            } else {
                "---:"
            }
        })
        .collect();
    let _ = writeln!(out, "| {} |", align.join(" | "));
    for row in &outcome.rows {
        let mut line = vec![md(&row.name)];
        line.extend(cells(row, &outcome.figures, args).iter().map(|c| md(c)));
        let _ = writeln!(out, "| {} |", line.join(" | "));
    }
    out.push('\n');
    if !outcome.reasons.is_empty() {
        reason_lines(&mut out, &outcome.reasons, "- ", md);
        out.push('\n');
    }
    let _ = writeln!(out, "{}", summary(outcome, args));
    out
}
