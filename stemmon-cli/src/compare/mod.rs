//! `stemmon compare BASE... [-- NEW...]`: per-stage deltas of time and peak memory, as a
//! CI gate that fails closed: NEW fails when it is incomplete, when a stage BASE timed
//! is gone from it, when a figure passes `--max-peak`, or when a stage or the whole run
//! grew past a threshold. Memory is compared on the exact figures by default; with
//! several reports a side, time is judged against the runs' spread ([`judge`]).

use crate::format::{clean, short};
use crate::{input, Failure};
use std::path::{Path, PathBuf};
use stemmon::Report;
use stemmon_report::fields::{self, Metric, Source};

mod figure;
mod judge;
mod print;
mod run;

use figure::{judged_by, same, Figure};
use judge::{judge, Row, Side, Verdict};

use print::{markdown, text};
use run::Run;

/// Compares reports stage by stage and exits 1 when NEW fails the gate (0 when it
/// passes): a stage present in both, or the whole run, grew past a threshold; NEW is
/// incomplete (still running, failed, a sampling error, a figure missing that BASE
/// has); a stage BASE timed is missing from NEW; a figure passes `--max-peak`. Give
/// several runs a side (`BASE1 BASE2 BASE3 -- NEW1 NEW2 NEW3`) to judge time against
/// the runs' spread.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct Args {
    /// The reference reports (for example from the main branch): one, or several runs
    /// of it followed by `--` and NEW's. Two reports without `--` are BASE and NEW.
    #[arg(required = true, value_name = "BASE")]
    base: Vec<PathBuf>,
    /// The reports to check against BASE's, after `--`.
    #[arg(last = true, value_name = "NEW")]
    new: Vec<PathBuf>,
    /// Which figures to compare beside wall time. `exact`: the high-water bound of the
    /// tree's peak and the parent's exact peak where both reports have them, the sampled
    /// peak otherwise. `sampled`: the sampled peak tree RSS. `heap`: the bytes allocated
    /// and the peak heap (reports of programs with `stemmon::Alloc`). `cpu`: CPU seconds,
    /// user plus system, held to `--max-time-increase`. `gpu`: the tree's peak GPU
    /// memory and the busiest GPU's (NVIDIA, through NVML). Without BASE's heap, CPU or
    /// GPU figures the exit is 2; NEW without them fails.
    #[arg(long, value_parser = metric_parser(), default_value = "exact")]
    metric: Metric,
    /// Fail when wall time grew by more than this many percent (and, with several
    /// reports a side, by more than their spread). Default: 10 with several reports on
    /// each side; 100 with one, where nothing tells a slower program from a loaded
    /// machine (identical runs beside a build on a 2-core machine differed by up to 92 %).
    #[arg(long, value_name = "PCT", value_parser = non_negative)]
    max_time_increase: Option<f64>,
    /// Fail when a compared memory figure grew by more than this many percent.
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = non_negative)]
    max_memory_increase: f64,
    /// Fail when a compared memory figure of NEW (whole run or a stage) is above this
    /// size: bytes, or a number with a unit (`500MiB`, `2GiB`, `1.5G`; K, M, G, T and
    /// KiB... are powers of 1024, KB, MB, GB, TB of 1000).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    max_peak: Option<u64>,
    /// The noise floor: judge a stage's time only when it lasted at least this many
    /// seconds (total wall time, the mean of a side) in BASE or NEW; shorter stages are
    /// judged on memory alone, and the whole run's time always is.
    #[arg(long, value_name = "S", default_value = "0.1", value_parser = non_negative)]
    min_seconds: f64,
    /// `text`: a table for a terminal or a log. `markdown`: the same as a Markdown
    /// table, for a pull-request comment or `$GITHUB_STEP_SUMMARY`.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// The `--metric` values: the field table's groups, by name.
fn metric_parser() -> impl clap::builder::TypedValueParser<Value = Metric> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(fields::metrics().map(|m| m.name)).map(|name| {
        fields::metrics()
            .find(|m| m.name == name)
            .expect("a possible value is a metric")
    })
}

impl Args {
    /// The time threshold in percent: the one given, else the default for the number
    /// of reports (see `--max-time-increase`).
    fn time_limit(&self) -> f64 {
        let several = self.base.len() > 1 && self.new.len() > 1;
        self.max_time_increase
            .unwrap_or(if several { 10.0 } else { SINGLE_TIME_INCREASE })
    }
}

/// The default time threshold with one report on a side, in percent.
const SINGLE_TIME_INCREASE: f64 = 100.0;

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

/// The most failure reasons printed; the rest are counted.
const MAX_REASONS: usize = 50;

/// What was compared and what came of it.
struct Outcome {
    figures: Vec<Figure>,
    /// Why the figures are these (the exact ones were missing from a report).
    figures_note: Option<String>,
    /// How many reports each side holds, where one holds several.
    sides: Option<String>,
    rows: Vec<Row>,
    reasons: Vec<String>,
}

pub(crate) fn compare(args: &Args) -> Result<u8, Failure> {
    let mut args = Args { ..args.clone() };
    if args.new.is_empty() {
        // `compare BASE NEW`, as before several reports a side.
        match <[PathBuf; 2]>::try_from(std::mem::take(&mut args.base)) {
            Ok([base, new]) => (args.base, args.new) = (vec![base], vec![new]),
            Err(given) => {
                return Err(Failure::input(format!(
                    "{} report{} given and no `--`: give BASE and NEW, or several a side as \
                     `BASE... -- NEW...`",
                    given.len(),
                    if given.len() == 1 { "" } else { "s" }
                )))
            }
        }
    }
    let args = &args;
    // Each report reduced as soon as it is read, to what is judged and printed: never
    // every report held whole.
    let candidates = candidates(args.metric);
    let load = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| input::load(p).map(|loaded| Run::of(loaded, &candidates)))
            .collect::<Result<Vec<_>, _>>()
    };
    let (base, new) = (load(&args.base)?, load(&args.new)?);
    same_shape(&args.base, &base, &args.new, &new)?;
    let first = &base[0].report;
    if let Some(what) = args.metric.noun {
        // Without BASE's figures there is nothing to hold NEW to: bad input, not a pass
        // (NEW without them fails the gate, in `judge`).
        let group = args.metric;
        let none = |run: &Run| {
            judged_by(group)
                .iter()
                .all(|&figure| run.of_run(figure).is_none())
        };
        if let Some((at, run)) = base.iter().enumerate().find(|(_, r)| none(r)) {
            let why = group
                .missing(&run.report)
                .map(|missing| format!(": {}", short(&missing)))
                .unwrap_or_default();
            return Err(Failure::input(format!(
                "{}: this report has no {what} figures (--metric {}){why}",
                args.base[at].display(),
                what.to_ascii_lowercase()
            )));
        }
    }
    let reports = || base.iter().chain(&new).map(|l| &l.report);
    if let Some(other) = reports().find(|r| r.command != first.command) {
        let shown = |command: &Option<Vec<String>>| match command {
            Some(argv) => format!("`{}`", short(&crate::format::command_line(argv))),
            None => "none".to_owned(),
        };
        let (b, n) = if base.iter().any(|l| std::ptr::eq(&l.report, other)) {
            ("BASE", "BASE")
        } else {
            ("BASE", "NEW")
        };
        crate::print_err(&format!(
            "stemmon: warning: the reports ran different commands: {b} {}, {n} {}",
            clean(&shown(&first.command)),
            clean(&shown(&other.command)),
        ));
    }
    if let Some(why) = base
        .iter()
        .find_map(|l| incomplete(&l.report).into_iter().next())
    {
        crate::print_err(&format!(
            "stemmon: warning: BASE is incomplete ({}): the comparison means little",
            clean(&why)
        ));
    }
    let (figures, figures_note) = figures(&base, &new, args.metric);
    let outcome = judge(&base, &new, (figures, &candidates), figures_note, args);
    // What the reports said is in the outcome now: their memory goes to its text.
    drop((base, new));
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

/// Every figure that `metric` may judge: those of its group, and the sampled ones that
/// `exact` falls back to.
fn candidates(metric: Metric) -> Vec<Figure> {
    let mut figures = judged_by(metric);
    for figure in judged_by(Metric::SAMPLED) {
        if !figures.iter().any(|&f| same(f, figure)) {
            figures.push(figure);
        }
    }
    figures
}

/// How many runs a report of `stemmon merge` holds; `None` for a report of one run.
fn merged_runs(report: &Report) -> Option<usize> {
    let section = report.figures.value("merge")?;
    let runs = section.get("runs").and_then(serde_json::Value::as_array);
    let inputs = section.get("inputs").and_then(serde_json::Value::as_array);
    Some(runs.or(inputs).map_or(0, Vec::len))
}

/// Refuses to compare a merge with a single run, or merges of different numbers of
/// runs: their stage times are sums over the runs, not one run's.
fn same_shape(
    base_paths: &[PathBuf],
    base: &[Run],
    new_paths: &[PathBuf],
    new: &[Run],
) -> Result<(), Failure> {
    let all: Vec<(&Path, Option<usize>)> = base_paths
        .iter()
        .zip(base)
        .chain(new_paths.iter().zip(new))
        .map(|(path, run)| (path.as_path(), merged_runs(&run.report)))
        .collect();
    let what = |runs: Option<usize>| match runs {
        None => "a single run".to_owned(),
        Some(1) => "a merge of 1 run".to_owned(),
        Some(n) => format!("a merge of {n} runs"),
    };
    let (first, shape) = all[0];
    if let Some((other, other_shape)) = all.iter().find(|(_, s)| *s != shape) {
        return Err(Failure::input(format!(
            "{} is {} and {} is {}: compare single runs with single runs, or merges of the \
             same number of runs",
            first.display(),
            what(shape),
            other.display(),
            what(*other_shape)
        )));
    }
    Ok(())
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
/// compares its group's kernel figures (source `Marks`) that every report has, else
/// the `sampled` group.
fn figures(base: &[Run], new: &[Run], metric: Metric) -> (Vec<Figure>, Option<String>) {
    if metric != Metric::EXACT {
        return (judged_by(metric), None);
    }
    let marks: Vec<Figure> = judged_by(Metric::EXACT)
        .into_iter()
        .filter(|f| f.source == Source::Marks)
        .collect();
    let every = |figure: &Figure| base.iter().chain(new).all(|r| r.of_run(figure).is_some());
    let exact: Vec<Figure> = marks.iter().copied().filter(every).collect();
    if exact.is_empty() {
        let lacks = |r: &Run| marks.first().is_some_and(|&f| r.of_run(f).is_none());
        let which = if base.iter().any(lacks) {
            "BASE"
        } else {
            "NEW"
        };
        let note = format!("{which} has no high-water marks, so the sampled peak is compared");
        (judged_by(Metric::SAMPLED), Some(note))
    } else {
        (exact, None)
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
