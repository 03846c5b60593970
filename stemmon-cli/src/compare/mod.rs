//! `stemmon compare BASE NEW`: per-stage deltas of time and peak memory, as a CI gate
//! that fails closed (SPEC §9, 0.3): NEW fails when it is incomplete, when a stage BASE
//! timed is gone from it, when a figure passes `--max-peak`, or when a stage or the
//! whole run grew past a threshold. Memory is compared on the exact figures by default.

use crate::format::{bytes, change, clean, percent, seconds, short};
use crate::input::Loaded;
use crate::{input, Failure};
use std::path::PathBuf;
use stemmon::report::StageReport;
use stemmon::Report;
use stemmon_report::fields::{self, Source};

mod figure;
mod print;

use figure::{judged_by, limit, same, show as show_figure, Figure};

use print::{markdown, text};

/// Compares two reports stage by stage and exits 1 when NEW fails the gate (0 when it
/// passes): a stage present in both, or the whole run, grew past a threshold; NEW is
/// incomplete (still running, failed, a sampling error, a figure missing that BASE
/// has); a stage BASE timed is missing from NEW; a figure passes `--max-peak`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The reference report (for example from the main branch).
    base: PathBuf,
    /// The report to check against it.
    new: PathBuf,
    /// Which figures to compare beside wall time. `exact`: the high-water bound of the
    /// tree's peak and the parent's exact peak where both reports have them, the sampled
    /// peak otherwise. `sampled`: the sampled peak tree RSS. `heap`: the bytes allocated
    /// and the peak heap (reports of programs with `stemmon::Alloc`). `cpu`: CPU seconds,
    /// user plus system, held to `--max-time-increase`. `gpu`: the tree's peak GPU
    /// memory and the busiest GPU's (NVIDIA, through NVML). Without BASE's heap, CPU or
    /// GPU figures the exit is 2; NEW without them fails.
    #[arg(long, value_enum, default_value = "exact")]
    metric: Metric,
    /// Fail when wall time grew by more than this many percent.
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = non_negative)]
    max_time_increase: f64,
    /// Fail when a compared memory figure grew by more than this many percent.
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = non_negative)]
    max_memory_increase: f64,
    /// Fail when a compared memory figure of NEW (whole run or a stage) is above this
    /// size: bytes, or a number with a unit (`500MiB`, `2GiB`, `1.5G`; K, M, G, T and
    /// KiB... are powers of 1024, KB, MB, GB, TB of 1000).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    max_peak: Option<u64>,
    /// Judge a stage only when it lasted at least this many seconds (total wall time)
    /// in BASE or NEW; the whole run is always judged.
    #[arg(long, value_name = "S", default_value = "0.1", value_parser = non_negative)]
    min_seconds: f64,
    /// `text`: a table for a terminal or a log. `markdown`: the same as a Markdown
    /// table, for a pull-request comment or `$GITHUB_STEP_SUMMARY`.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Metric {
    Exact,
    Sampled,
    Heap,
    Cpu,
    Gpu,
}

impl Metric {
    /// The field table's group of the same name.
    fn group(self) -> fields::Metric {
        match self {
            Metric::Exact => fields::Metric::Exact,
            Metric::Sampled => fields::Metric::Sampled,
            Metric::Heap => fields::Metric::Heap,
            Metric::Cpu => fields::Metric::Cpu,
            Metric::Gpu => fields::Metric::Gpu,
        }
    }

    /// What a source-bound metric's figures are called, `None` for the memory peaks
    /// every report has.
    fn source_name(self) -> Option<&'static str> {
        match self {
            Metric::Heap => Some("heap"),
            Metric::Cpu => Some("CPU"),
            Metric::Gpu => Some("GPU"),
            Metric::Exact | Metric::Sampled => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Markdown,
}

fn non_negative(text: &str) -> Result<f64, String> {
    match text.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("expected a number of at least zero, not `{text}`")),
    }
}

/// `2GiB`, `500MiB`, `1.5G`, `300MB`, `1048576`: a size in bytes.
fn size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "expected a size such as `2GiB`, `500MiB`, `1.5G` or a number of bytes, not `{text}`"
        )
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(bad()),
    };
    let bytes = number * scale;
    if bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64 {
        Ok(bytes.round() as u64)
    } else {
        Err(bad())
    }
}

/// What one side of a row holds: wall time and the compared figures, in order.
#[derive(Clone, Debug)]
struct Side {
    wall: f64,
    memory: Vec<Option<f64>>,
}

/// One compared line: a stage path, or the whole run.
#[derive(Debug)]
struct Row {
    name: String,
    base: Option<Side>,
    new: Option<Side>,
    verdict: Verdict,
}

/// What a row says about the change.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Ok,
    /// NEW fails on this row; the reasons are in the gate's list.
    Failed(String),
    Short,
    OnlyInBase,
    OnlyInNew,
}

impl Verdict {
    /// This verdict with one more reason NEW fails on the row: a row the gate fails on
    /// never reads `ok`, `ignored` or `only in new`.
    fn failing(self, why: String) -> Verdict {
        match self {
            Verdict::Failed(before) => Verdict::Failed(format!("{before}, {why}")),
            Verdict::Ok | Verdict::Short | Verdict::OnlyInBase | Verdict::OnlyInNew => {
                Verdict::Failed(why)
            }
        }
    }
}

/// The name of the whole-run row.
const WHOLE_RUN: &str = "(whole run)";

/// The most failure reasons printed; the rest are counted.
const MAX_REASONS: usize = 50;

/// What was compared and what came of it.
struct Outcome {
    figures: Vec<Figure>,
    /// Why the figures are these (the exact ones were missing from a report).
    figures_note: Option<String>,
    rows: Vec<Row>,
    reasons: Vec<String>,
}

pub(crate) fn compare(args: &Args) -> Result<u8, Failure> {
    let base = input::load(&args.base)?;
    let new = input::load(&args.new)?;
    if let Some(what) = args.metric.source_name() {
        // Without BASE's figures there is nothing to hold NEW to: bad input, not a pass
        // (SPEC §11, §12, §15; NEW without them fails the gate, in `judge`).
        let group = args.metric.group();
        if judged_by(group)
            .iter()
            .all(|figure| figure.of_run(&base.report).is_none())
        {
            let why = figure::missing(&base.report, group)
                .map(|missing| format!(": {}", short(&missing)))
                .unwrap_or_default();
            return Err(Failure::input(format!(
                "{}: this report has no {what} figures (--metric {}){why}",
                args.base.display(),
                what.to_ascii_lowercase()
            )));
        }
    }
    if base.report.command != new.report.command {
        let shown = |command: &Option<Vec<String>>| match command {
            Some(argv) => format!("`{}`", short(&crate::format::command_line(argv))),
            None => "none".to_owned(),
        };
        crate::print_err(&format!(
            "stemmon: warning: the reports ran different commands: BASE {}, NEW {}",
            clean(&shown(&base.report.command)),
            clean(&shown(&new.report.command)),
        ));
    }
    if let Some(why) = incomplete(&base.report).first() {
        crate::print_err(&format!(
            "stemmon: warning: BASE is incomplete ({}): the comparison means little",
            clean(why)
        ));
    }
    let outcome = judge(&base, &new, args);
    let text = match args.format {
        Format::Text => text(&outcome, args),
        Format::Markdown => markdown(&outcome, args),
    };
    crate::print_out(&text);
    if args.format == Format::Markdown {
        // The Markdown may go to a file; the log still says why the gate failed.
        for reason in outcome.reasons.iter().take(MAX_REASONS) {
            crate::print_err(&format!("stemmon: FAIL: {}", clean(reason)));
        }
    }
    Ok(u8::from(!outcome.reasons.is_empty()))
}

/// Why `report` cannot be taken as a finished, good run (empty when it can).
fn incomplete(report: &Report) -> Vec<String> {
    let mut why = Vec::new();
    if report.running {
        why.push("`running` is true: the run had not finished when it was written".to_owned());
    }
    if let Some(error) = &report.error {
        why.push(format!("the run failed (`error`: {})", short(error)));
    }
    if let Some(error) = &report.sampling_error {
        why.push(format!(
            "sampling failed (`sampling_error`: {})",
            short(error)
        ));
    }
    why
}

/// The figures to compare, and why when they are not the ones asked for. `exact`
/// compares its group's kernel figures (source `Marks`) that both reports have, else
/// the `sampled` group.
fn figures(base: &Report, new: &Report, metric: Metric) -> (Vec<Figure>, Option<String>) {
    if metric != Metric::Exact {
        return (judged_by(metric.group()), None);
    }
    let marks: Vec<Figure> = judged_by(fields::Metric::Exact)
        .into_iter()
        .filter(|f| f.source == Source::Marks)
        .collect();
    let both = |figure: &Figure| figure.of_run(base).is_some() && figure.of_run(new).is_some();
    let exact: Vec<Figure> = marks.iter().copied().filter(both).collect();
    if exact.is_empty() {
        let which = if marks.first().is_some_and(|f| f.of_run(base).is_none()) {
            "BASE"
        } else {
            "NEW"
        };
        let note = format!("{which} has no high-water marks, so the sampled peak is compared");
        (judged_by(fields::Metric::Sampled), Some(note))
    } else {
        (exact, None)
    }
}

fn judge(base: &Loaded, new: &Loaded, args: &Args) -> Outcome {
    let (base_report, new_report) = (&base.report, &new.report);
    let (figures, figures_note) = figures(base_report, new_report, args.metric);
    let mut reasons: Vec<String> = incomplete(new_report)
        .into_iter()
        .map(|why| format!("NEW is incomplete: {why}"))
        .collect();
    // What the whole-run row says of the failures above, which are the whole run's.
    let mut run_fails: Vec<String> = Vec::new();
    if !reasons.is_empty() {
        run_fails.push("NEW incomplete".to_owned());
    }
    // A whole-run figure BASE has and NEW lacks: the exact ones too, so that turning the
    // marks off (or a hand-edited `null`) is not a way past the gate.
    let checked: Vec<Figure> = match args.metric {
        Metric::Sampled | Metric::Exact => judged_by(args.metric.group()),
        // The whole-run row judges the compared figures themselves.
        Metric::Heap | Metric::Cpu | Metric::Gpu => Vec::new(),
    };
    for figure in checked {
        if figure.of_run(base_report).is_some() && figure.of_run(new_report).is_none() {
            reasons.push(format!(
                "NEW is incomplete: `{}` of the whole run is null or missing; BASE has it",
                figure.key
            ));
            // A compared figure says so in the row's own judgement.
            if !figures.iter().any(|&f| same(f, figure)) {
                run_fails.push(format!("`{}` missing", figure.key));
            }
        }
    }

    let run = |r: &Report| Side {
        wall: r.wall_seconds,
        memory: figures.iter().map(|f| f.of_run(r)).collect(),
    };
    let stage = |s: &StageReport| Side {
        wall: s.wall_seconds,
        memory: figures.iter().map(|f| f.of_stage(s)).collect(),
    };
    let mut rows = Vec::with_capacity(base_report.stages.len() + 1);
    let mut row_reasons = Vec::new();
    let (base_run, new_run) = (run(base_report), run(new_report));
    let verdict = judge_row(
        WHOLE_RUN,
        &base_run,
        &new_run,
        &figures,
        args,
        &mut row_reasons,
    );
    let verdict = run_fails
        .into_iter()
        .fold(verdict, |verdict, why| verdict.failing(why));
    rows.push(Row {
        name: WHOLE_RUN.to_owned(),
        base: Some(base_run),
        new: Some(new_run),
        verdict,
    });
    for base_stage in &base_report.stages {
        let name = format!("stage `{}`", short(&base_stage.path));
        let base_side = stage(base_stage);
        let (new_side, verdict) = match new.tree.stage(new_report, &base_stage.path) {
            None if base_stage.wall_seconds >= args.min_seconds => {
                row_reasons.push(format!(
                    "{name} ({} in BASE) is missing from NEW",
                    seconds(base_stage.wall_seconds)
                ));
                (None, Verdict::Failed("missing from NEW".to_owned()))
            }
            None => (None, Verdict::OnlyInBase),
            Some(new_stage)
                if base_stage.wall_seconds < args.min_seconds
                    && new_stage.wall_seconds < args.min_seconds =>
            {
                (Some(stage(new_stage)), Verdict::Short)
            }
            Some(new_stage) => {
                let new_side = stage(new_stage);
                let verdict = judge_row(
                    &name,
                    &base_side,
                    &new_side,
                    &figures,
                    args,
                    &mut row_reasons,
                );
                (Some(new_side), verdict)
            }
        };
        rows.push(Row {
            name: base_stage.path.clone(),
            base: Some(base_side),
            new: new_side,
            verdict,
        });
    }
    for new_stage in &new_report.stages {
        if base.tree.index(&new_stage.path).is_none() {
            rows.push(Row {
                name: new_stage.path.clone(),
                base: None,
                new: Some(stage(new_stage)),
                verdict: Verdict::OnlyInNew,
            });
        }
    }
    reasons.extend(row_reasons);
    if let Some(limit) = args.max_peak {
        // The whole run's row comes first. Every row NEW has is held to the limit (short
        // stages and stages only in NEW too), and a row that passes it reads as failing.
        for (at, row) in rows.iter_mut().enumerate() {
            let Some(new_side) = &row.new else { continue };
            let mut over = Vec::new();
            for (&figure, value) in figures.iter().zip(&new_side.memory) {
                if !figure.is_peak() {
                    continue;
                }
                if let Some(value) = value.filter(|&v| v > limit as f64) {
                    let name = if at == 0 {
                        "the whole run".to_owned()
                    } else {
                        format!("stage `{}`", short(&row.name))
                    };
                    reasons.push(format!(
                        "NEW's {} of {name}, {}, passes --max-peak {}",
                        figure.label,
                        show_figure(figure, Some(value)),
                        bytes(Some(limit))
                    ));
                    over.push(format!("{} over --max-peak", figure.label));
                }
            }
            for why in over {
                let verdict = std::mem::replace(&mut row.verdict, Verdict::Ok);
                row.verdict = verdict.failing(why);
            }
        }
    }
    Outcome {
        figures,
        figures_note,
        rows,
        reasons,
    }
}

/// The verdict of a row present in both reports and long enough to judge; each reason
/// it fails for goes to `reasons`.
fn judge_row(
    name: &str,
    base: &Side,
    new: &Side,
    figures: &[Figure],
    args: &Args,
    reasons: &mut Vec<String>,
) -> Verdict {
    let mut why = Vec::new();
    if let Some(grew) = change(base.wall, new.wall).filter(|c| *c > args.max_time_increase) {
        why.push(format!("time {}", percent(Some(grew))));
        reasons.push(format!(
            "{name}: time {} ({} → {}), past +{} %",
            percent(Some(grew)),
            seconds(base.wall),
            seconds(new.wall),
            args.max_time_increase
        ));
    }
    for ((&figure, b), n) in figures.iter().zip(&base.memory).zip(&new.memory) {
        match (b, n) {
            (Some(_), None) => {
                why.push(format!("{} missing", figure.label));
                reasons.push(format!(
                    "{name}: NEW is incomplete: `{}` is null or missing; BASE has it",
                    figure.key
                ));
            }
            (Some(b), Some(n)) => {
                let grew = change(*b, *n).filter(|c| *c > limit(figure, args));
                // From nothing to something is growth too, whatever the percentage.
                let grew = grew.or((*b == 0.0 && *n > 0.0).then_some(f64::INFINITY));
                if let Some(grew) = grew {
                    let shown = if grew.is_finite() {
                        percent(Some(grew))
                    } else {
                        "from 0".to_owned()
                    };
                    why.push(format!("{} {shown}", figure.label));
                    reasons.push(format!(
                        "{name}: {} {shown} ({} → {}), past +{} %",
                        figure.label,
                        show_figure(figure, Some(*b)),
                        show_figure(figure, Some(*n)),
                        limit(figure, args)
                    ));
                }
            }
            (None, _) => {}
        }
    }
    if why.is_empty() {
        Verdict::Ok
    } else {
        Verdict::Failed(why.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use print::md;

    #[test]
    fn sizes_read_as_a_person_writes_them() {
        assert_eq!(size("2GiB"), Ok(2 << 30));
        assert_eq!(size("500MiB"), Ok(500 << 20));
        assert_eq!(size("1.5G"), Ok(3 << 29));
        assert_eq!(size("300MB"), Ok(300_000_000));
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size(" 1 kib "), Ok(1024));
        for bad in ["", "G", "2 parsecs", "-1G", "1e400", "0", "1.2.3M", "inf"] {
            assert!(size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn markdown_cells_hold_no_markup() {
        assert_eq!(md("a|b"), "a\\|b");
        assert_eq!(md("<img src=x>"), "&lt;img src=x&gt;");
        assert_eq!(md("fit/inner (+15.0 %)"), "fit/inner (+15.0 %)");
        assert_eq!(md("`x` *y* [z](u)"), "\\`x\\` \\*y\\* \\[z\\](u)");
    }
}
