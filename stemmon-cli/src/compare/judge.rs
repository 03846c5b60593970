//! The gate itself: each row (the whole run, each stage path) of BASE's reports against
//! NEW's, and why NEW fails.
//!
//! Each side may hold several reports of the same program. A row's time on a side is
//! the mean over its reports, with their spread (standard deviation); its memory figures
//! are the median over them (a run whose sample straddled a boundary moves no median),
//! and `--max-peak` holds the highest. Time fails a row only past both the threshold and
//! the runs' spread, and only for rows that lasted the noise floor (`--min-seconds`);
//! memory is judged on every row. A bound is judged through the exact figure where the
//! row's tree was the parent alone: there the parent's exact peak is the tree's, and a
//! bound that grew while it did not is the sampling's noise, not the program's.

use super::figure::{limit, same, show as show_figure, Figure};
use super::run::{Run, Stage};
use super::{incomplete, Args, Outcome};
use crate::format::{bytes, change, percent, seconds, short};

/// What one side of a row holds: its time and the compared figures, in order.
#[derive(Clone, Debug)]
pub(super) struct Side {
    /// The mean wall time over the side's reports that have the row.
    pub(super) wall: f64,
    /// Their standard deviation (0 for one report).
    pub(super) spread: f64,
    /// How many of the side's reports have the row.
    pub(super) reports: usize,
    /// Each figure's median over them, `None` where one of them lacks it.
    pub(super) memory: Vec<Option<f64>>,
    /// Each figure's highest.
    peak: Vec<Option<f64>>,
    /// Whether the tree was the parent alone in every report (no child seen).
    alone: bool,
}

impl Side {
    /// The side of `records` (one a report that has the row).
    fn of<T>(records: &[&T], figures: &[Figure], read: impl Fn(Figure, &T) -> Option<f64>) -> Side
    where
        T: Record,
    {
        let walls: Vec<f64> = records.iter().map(|r| r.wall()).collect();
        let count = walls.len().max(1) as f64;
        let wall = walls.iter().sum::<f64>() / count;
        let spread = if walls.len() > 1 {
            let squares: f64 = walls.iter().map(|w| (w - wall).powi(2)).sum();
            (squares / (count - 1.0)).sqrt()
        } else {
            0.0
        };
        let mut memory = Vec::with_capacity(figures.len());
        let mut peak = Vec::with_capacity(figures.len());
        for &figure in figures {
            let values: Option<Vec<f64>> = records.iter().map(|r| read(figure, r)).collect();
            memory.push(values.as_deref().and_then(median));
            peak.push(
                records
                    .iter()
                    .filter_map(|r| read(figure, r))
                    .reduce(f64::max),
            );
        }
        Side {
            wall,
            spread,
            reports: records.len(),
            memory,
            peak,
            alone: records.iter().all(|r| r.alone()),
        }
    }
}

/// The median of `values`, `None` for none.
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[middle]),
        _ => Some((sorted[middle - 1] + sorted[middle]) / 2.0),
    }
}

/// A record a row reads: the whole run or a stage.
trait Record {
    fn wall(&self) -> f64;
    /// Whether no child of the parent was seen while it was open.
    fn alone(&self) -> bool;
}

impl Record for Run {
    fn wall(&self) -> f64 {
        self.report.wall_seconds
    }
    fn alone(&self) -> bool {
        let report = &self.report;
        report.peak_process_count <= 1
            && report.peaks.peak_children_rss_bytes.unwrap_or(0) == 0
            && report.high_water.peak_reaped_child_rss_bytes.unwrap_or(0) == 0
    }
}

impl Record for Stage {
    fn wall(&self) -> f64 {
        self.wall
    }
    fn alone(&self) -> bool {
        self.alone
    }
}

/// One compared line: a stage path, or the whole run.
#[derive(Debug)]
pub(super) struct Row {
    pub(super) name: String,
    pub(super) base: Option<Side>,
    pub(super) new: Option<Side>,
    pub(super) verdict: Verdict,
}

/// What a row says about the change.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Ok,
    /// NEW fails on this row; the reasons are in the gate's list.
    Failed(String),
    /// Judged on memory alone: shorter than the noise floor on both sides.
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
pub(super) const WHOLE_RUN: &str = "(whole run)";

/// What each NEW report is called in a reason: `NEW`, or `NEW 2` of several.
fn new_name(index: usize, count: usize) -> String {
    if count == 1 {
        "NEW".to_owned()
    } else {
        format!("NEW {}", index + 1)
    }
}

/// The gate over `base` and `new` on `figures` (`held`: those their stages were reduced
/// for, which hold them).
pub(super) fn judge(
    base: &[Run],
    new: &[Run],
    (figures, held): (Vec<Figure>, &[Figure]),
    figures_note: Option<String>,
    args: &Args,
) -> Outcome {
    let mut reasons: Vec<String> = Vec::new();
    // What the whole-run row says of the failures above, which are the whole run's.
    let mut run_fails: Vec<String> = Vec::new();
    for (index, loaded) in new.iter().enumerate() {
        let name = new_name(index, new.len());
        let why = incomplete(&loaded.report);
        if !why.is_empty() && !run_fails.iter().any(|f| f == "NEW incomplete") {
            run_fails.push("NEW incomplete".to_owned());
        }
        reasons.extend(
            why.into_iter()
                .map(|why| format!("{name} is incomplete: {why}")),
        );
    }
    // A bound that is only a floor (processes ended unseen: no exit records) passes no
    // candidate, whatever BASE says.
    if args.metric.is_memory() {
        for (index, loaded) in new.iter().enumerate() {
            let report = &loaded.report;
            if let Some(floor) = report.high_water.peak_tree_rss_at_least_bytes {
                if !run_fails.iter().any(|f| f == "NEW bound unseen") {
                    run_fails.push("NEW bound unseen".to_owned());
                }
                reasons.push(format!(
                    "{}'s tree peak is at least {} ({} processes ended unseen): no bound to \
                     pass on",
                    new_name(index, new.len()),
                    stemmon_report::format_bytes(floor),
                    report.high_water_marks.unseen
                ));
            }
        }
    }
    // A whole-run figure BASE has and NEW lacks: the exact ones too, so that turning the
    // marks off (or a hand-edited `null`) is not a way past the gate.
    let checked: Vec<Figure> = if args.metric.is_memory() {
        super::judged_by(args.metric)
    } else {
        // The whole-run row judges the compared figures themselves.
        Vec::new()
    };
    for figure in checked {
        if !base.iter().any(|b| b.of_run(figure).is_some()) {
            continue;
        }
        for (index, run) in new.iter().enumerate() {
            if run.of_run(figure).is_none() {
                reasons.push(format!(
                    "{} is incomplete: `{}` of the whole run is null or missing; BASE has it",
                    new_name(index, new.len()),
                    figure.key
                ));
                // A compared figure says so in the row's own judgement.
                if !figures.iter().any(|&f| same(f, figure)) {
                    run_fails.push(format!("`{}` missing", figure.key));
                }
            }
        }
    }

    let run_side = |side: &[Run]| {
        let records: Vec<&Run> = side.iter().collect();
        Side::of(&records, &figures, |f, r| r.of_run(f))
    };
    let stage_side = |side: &[Run], path: &str| {
        let records: Vec<&Stage> = side.iter().filter_map(|r| r.stage(path)).collect();
        (!records.is_empty()).then(|| Side::of(&records, &figures, |f, s| s.value(held, f)))
    };
    let mut row_reasons = Vec::new();
    let (base_run, new_run) = (run_side(base), run_side(new));
    let verdict = judge_row(
        WHOLE_RUN,
        &base_run,
        &new_run,
        (&figures, true),
        args,
        &mut row_reasons,
    );
    let verdict = run_fails
        .into_iter()
        .fold(verdict, |verdict, why| verdict.failing(why));
    let mut rows = vec![Row {
        name: WHOLE_RUN.to_owned(),
        base: Some(base_run),
        new: Some(new_run),
        verdict,
    }];
    // Every stage path of BASE's reports, in order of first sight, then NEW's others.
    let mut seen = std::collections::HashSet::new();
    let paths: Vec<&str> = base
        .iter()
        .flat_map(|r| r.stages.iter().map(|s| &*s.path))
        .filter(|path| seen.insert(*path))
        .collect();
    for path in paths {
        let name = format!("stage `{}`", short(path));
        let base_side = stage_side(base, path).expect("a stage of BASE");
        let long = |side: &Side| side.wall >= args.min_seconds;
        let new_side = stage_side(new, path);
        let missing = new.len() - new_side.as_ref().map_or(0, |s| s.reports);
        let verdict = match &new_side {
            None if long(&base_side) => {
                row_reasons.push(format!(
                    "{name} ({} in BASE) is missing from NEW",
                    seconds(base_side.wall)
                ));
                Verdict::Failed("missing from NEW".to_owned())
            }
            None => Verdict::OnlyInBase,
            Some(new_side) => {
                let timed = long(&base_side) || long(new_side);
                let verdict = judge_row(
                    &name,
                    &base_side,
                    new_side,
                    (&figures, timed),
                    args,
                    &mut row_reasons,
                );
                if missing > 0 && long(&base_side) {
                    let why = format!("missing from {missing} of {} NEW reports", new.len());
                    row_reasons.push(format!("{name} is {why}"));
                    verdict.failing(why)
                } else if verdict == Verdict::Ok && !timed {
                    Verdict::Short
                } else {
                    verdict
                }
            }
        };
        rows.push(Row {
            name: path.to_owned(),
            base: Some(base_side),
            new: new_side,
            verdict,
        });
    }
    for run in new {
        for new_stage in &run.stages {
            let path = &*new_stage.path;
            if seen.insert(path) {
                rows.push(Row {
                    name: path.to_owned(),
                    base: None,
                    new: stage_side(new, path),
                    verdict: Verdict::OnlyInNew,
                });
            }
        }
    }
    reasons.extend(row_reasons);
    if let Some(limit) = args.max_peak {
        max_peak(&mut rows, &figures, limit, &mut reasons);
    }
    Outcome {
        figures,
        figures_note,
        sides: side_names(base.len(), new.len()),
        rows,
        reasons,
    }
}

/// Fails every row whose NEW peak passes `limit`: the whole run's row comes first, and
/// every row NEW has is held to it (short stages and stages only in NEW too).
fn max_peak(rows: &mut [Row], figures: &[Figure], limit: u64, reasons: &mut Vec<String>) {
    for (at, row) in rows.iter_mut().enumerate() {
        let Some(new_side) = &row.new else { continue };
        let mut over = Vec::new();
        for (&figure, value) in figures.iter().zip(&new_side.peak) {
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

/// The verdict of a row present on both sides; `timed` says whether it lasted the noise
/// floor, so that its time is judged. Each reason it fails for goes to `reasons`.
fn judge_row(
    name: &str,
    base: &Side,
    new: &Side,
    (figures, timed): (&[Figure], bool),
    args: &Args,
    reasons: &mut Vec<String>,
) -> Verdict {
    let mut why = Vec::new();
    let time_limit = args.time_limit();
    let noise = base.spread + new.spread;
    let grew = change(base.wall, new.wall)
        .filter(|c| timed && *c > time_limit && new.wall - base.wall > noise);
    if let Some(grew) = grew {
        why.push(format!("time {}", percent(Some(grew))));
        let spread = if noise > 0.0 {
            format!(", and past the runs' spread ±{}", seconds(noise))
        } else {
            String::new()
        };
        reasons.push(format!(
            "{name}: time {} ({} → {}), past +{time_limit} %{spread}",
            percent(Some(grew)),
            seconds(base.wall),
            seconds(new.wall),
        ));
    }
    let exact_held = exact_held(base, new, figures, args);
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
                // The parent alone, its exact peak held: the bound's growth is noise.
                let through_exact = figure.key == BOUND && exact_held;
                if let Some(grew) = grew.filter(|_| !through_exact) {
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

/// The bound of the tree's peak.
const BOUND: &str = "peak_tree_rss_bound_bytes";

/// The parent's exact peak.
const EXACT: &str = "peak_parent_hwm_bytes";

/// Whether the row's bound is judged through the exact figure, which held: the tree
/// was the parent alone on both sides, and the parent's exact peak, compared, did not
/// grow past its threshold.
fn exact_held(base: &Side, new: &Side, figures: &[Figure], args: &Args) -> bool {
    let Some(at) = figures.iter().position(|f| f.key == EXACT) else {
        return false;
    };
    let (Some(b), Some(n)) = (base.memory[at], new.memory[at]) else {
        return false;
    };
    base.alone && new.alone && change(b, n).is_some_and(|c| c <= limit(figures[at], args))
}

/// What a side is called in the table's header, with its reports' count.
pub(super) fn side_names(base: usize, new: usize) -> Option<String> {
    (base > 1 || new > 1).then(|| {
        let of = |n: usize| {
            if n == 1 {
                "1 report".to_owned()
            } else {
                format!("{n} reports")
            }
        };
        format!(
            "BASE: {}, NEW: {}; times are their means, judged past the runs' spread",
            of(base),
            of(new)
        )
    })
}
