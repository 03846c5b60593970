//! `stemmon compare BASE NEW`: per-stage deltas of time and peak memory, as a CI gate.

use crate::format::{bytes, change, percent, seconds};
use crate::{input, Failure};
use comfy_table::{presets, CellAlignment, Table};
use std::path::PathBuf;
use stemmon::Report;

/// Compares two reports stage by stage and exits 1 when a stage present in both, or the
/// whole run, grew past a threshold (0 otherwise): a CI gate.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The reference report (for example from the main branch).
    base: PathBuf,
    /// The report to check against it.
    new: PathBuf,
    /// Fail when wall time grew by more than this many percent.
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = non_negative)]
    max_time_increase: f64,
    /// Fail when peak tree RSS grew by more than this many percent.
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = non_negative)]
    max_memory_increase: f64,
    /// Ignore stages shorter than this many seconds in both reports (total wall time).
    #[arg(long, value_name = "S", default_value = "0.1", value_parser = non_negative)]
    min_seconds: f64,
}

fn non_negative(text: &str) -> Result<f64, String> {
    match text.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("expected a number of at least zero, not `{text}`")),
    }
}

/// One compared line: a stage path, or the whole run.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) base: Option<(f64, Option<u64>)>,
    pub(crate) new: Option<(f64, Option<u64>)>,
    pub(crate) verdict: Verdict,
}

/// What a row says about the change.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Ok,
    Regressed(String),
    Short,
    OnlyInBase,
    OnlyInNew,
}

pub(crate) fn compare(args: &Args) -> Result<u8, Failure> {
    let base = input::load(&args.base)?;
    let new = input::load(&args.new)?;
    let rows = rows(&base, &new, args);
    crate::print_out(&render(&rows, args));
    let regressed = rows
        .iter()
        .any(|row| matches!(row.verdict, Verdict::Regressed(_)));
    Ok(u8::from(regressed))
}

fn rows(base: &Report, new: &Report, args: &Args) -> Vec<Row> {
    let run = |r: &Report| Some((r.wall_seconds, r.peaks.peak_tree_rss_bytes));
    let mut rows = vec![judge("(whole run)", run(base), run(new), args)];
    for stage in &base.stages {
        let other = new.stage(&stage.path);
        rows.push(judge(
            &stage.path,
            Some((stage.wall_seconds, stage.peaks.peak_tree_rss_bytes)),
            other.map(|s| (s.wall_seconds, s.peaks.peak_tree_rss_bytes)),
            args,
        ));
    }
    for stage in new.stages.iter().filter(|s| base.stage(&s.path).is_none()) {
        rows.push(judge(
            &stage.path,
            None,
            Some((stage.wall_seconds, stage.peaks.peak_tree_rss_bytes)),
            args,
        ));
    }
    rows
}

fn judge(
    name: &str,
    base: Option<(f64, Option<u64>)>,
    new: Option<(f64, Option<u64>)>,
    args: &Args,
) -> Row {
    let verdict = match (base, new) {
        (None, _) => Verdict::OnlyInNew,
        (_, None) => Verdict::OnlyInBase,
        (Some((base_wall, _)), Some((new_wall, _)))
            if base_wall < args.min_seconds && new_wall < args.min_seconds =>
        {
            Verdict::Short
        }
        (Some((base_wall, base_peak)), Some((new_wall, new_peak))) => {
            let mut why = Vec::new();
            if let Some(grew) = change(base_wall, new_wall).filter(|c| *c > args.max_time_increase)
            {
                why.push(format!("time {}", percent(Some(grew))));
            }
            let memory = base_peak
                .zip(new_peak)
                .and_then(|(b, n)| change(b as f64, n as f64));
            if let Some(grew) = memory.filter(|c| *c > args.max_memory_increase) {
                why.push(format!("memory {}", percent(Some(grew))));
            }
            if why.is_empty() {
                Verdict::Ok
            } else {
                Verdict::Regressed(why.join(", "))
            }
        }
    };
    Row {
        name: name.to_owned(),
        base,
        new,
        verdict,
    }
}

fn render(rows: &[Row], args: &Args) -> String {
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "stage",
        "base time",
        "new time",
        "time Δ",
        "base peak",
        "new peak",
        "memory Δ",
        "verdict",
    ]);
    for row in rows {
        let wall = |side: Option<(f64, Option<u64>)>| side.map_or("-".into(), |s| seconds(s.0));
        let peak = |side: Option<(f64, Option<u64>)>| side.map_or("-".into(), |s| bytes(s.1));
        let (time_change, memory_change) = match (row.base, row.new) {
            (Some((bw, bp)), Some((nw, np))) => (
                percent(change(bw, nw)),
                percent(bp.zip(np).and_then(|(b, n)| change(b as f64, n as f64))),
            ),
            _ => ("-".into(), "-".into()),
        };
        let verdict = match &row.verdict {
            Verdict::Ok => "ok".to_owned(),
            Verdict::Regressed(why) => format!("REGRESSED: {why}"),
            Verdict::Short => format!("ignored (< {})", seconds(args.min_seconds)),
            Verdict::OnlyInBase => "only in base".to_owned(),
            Verdict::OnlyInNew => "only in new".to_owned(),
        };
        table.add_row(vec![
            crate::format::clean(&row.name).into_owned(),
            wall(row.base),
            wall(row.new),
            time_change,
            peak(row.base),
            peak(row.new),
            memory_change,
            verdict,
        ]);
    }
    for column in 1..7 {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let regressions = rows
        .iter()
        .filter(|row| matches!(row.verdict, Verdict::Regressed(_)))
        .count();
    let summary = match regressions {
        0 => "no regression".to_owned(),
        1 => "1 regression".to_owned(),
        n => format!("{n} regressions"),
    };
    format!(
        "{table}\n{summary} past the thresholds (time +{} %, memory +{} %, stages of {} or more)\n",
        args.max_time_increase,
        args.max_memory_increase,
        seconds(args.min_seconds)
    )
}
