//! `stemmon merge REPORT... -o OUT.json`: one job's per-rank (or per-node) reports as
//! one report, which `show`, `plot`, `compare` and `export` read like any other.
//!
//! - **Stages**: the union of the inputs' stage paths, in order of first appearance
//!   (each report's in the order it lists them, a parent always before its children;
//!   a path's parent is its parent in the first report that has it). Each figure of the
//!   field table ([`stemmon_report::fields`]) combines by its `fold`: a sum is summed, a
//!   peak is the highest, and a figure computed from others is recomputed (`cpu_cores`:
//!   the CPU seconds over the wall seconds of the reports that have CPU figures). Calls,
//!   errors and wall time (as threads sum) are summed, `min_wall_seconds` and
//!   `max_wall_seconds` are the shortest and the longest, `start_seconds` the earliest.
//! - **The run**: `wall_seconds` the longest, peaks the highest, sums summed;
//!   `cpu_cores` the CPU seconds over the longest wall time (the cores the job kept
//!   busy when its ranks ran at once); `host`, `pid` and `command` where all agree
//!   (else empty), the `labels` all share; the failure of the first that failed.
//! - **One report's record**: `timeline`, the samples, `spans`, `threads`, the
//!   settings (`sample_interval`, `sampler`, `high_water_marks`...), `cgroup`, the
//!   sections of the sources (`gpu`) and where the peak fell are those of the report
//!   with the highest sampled peak, so `plot` draws the rank that peaked.
//! - **`processes`**: the 50 with the highest peak RSS of all reports.
//! - **`merge`**: what each report said, so nothing is lost: `inputs` (file, identity,
//!   host, rank, pid, wall time, failure), `runs` (every run merged in, those of merged
//!   inputs too), `timeline_from`, and the spreads of each figure over the reports, of
//!   the whole run (`run`) and per stage (`stages`, in the order of `stages`, with how
//!   many reports ran it and the first that did): count, min, mean, max, sum and
//!   `max_report`, the index in `inputs` of the report with the max (the first on a
//!   tie). A spread is over two reports or more: a stage one report ran has that
//!   report's figures as its own.
//!
//! A run is merged once: two inputs with the same identity (`run_id`, or before 0.4
//! host, labels, pid and wall time) are refused, and so is a merged report beside one
//! of the runs it holds. Sums of seconds stop at the largest time a report may hold
//! ([`MAX_SECONDS`]), and a high-water bound is never below the figure it bounds, so
//! the merged report reads back.

use crate::format::{bytes, seconds, short};
use crate::input::Loaded;
use crate::{input, Failure};
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use stemmon::report::StageReport;
use stemmon::Report;
use stemmon_report::fields::{field, Field, Fold, Unit, FIELDS};
use stemmon_report::read::MAX_SECONDS;

/// Combines the reports of one job's ranks or nodes into one report.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The merged report is a report: show, plot, compare and export read it. Its \
`merge` key keeps each input's figures (min, mean, max, sum, and which report had the max). \
The same run twice (the same run_id, or before 0.4 the same host, labels, pid and wall \
time) is refused, and so is a merged report beside one of the runs it holds."
)]
pub(crate) struct Args {
    /// The reports to merge: one or more, usually one per rank; merged reports too.
    #[arg(required = true, num_args = 1.., value_name = "REPORT")]
    reports: Vec<PathBuf>,
    /// Where to write the merged report.
    #[arg(short, long, value_name = "OUT.json")]
    output: PathBuf,
}

/// The key of the merged report's own section.
const SECTION: &str = "merge";

/// The most processes a merged report keeps, as a single report does (SPEC §12).
const MAX_PROCESSES: usize = 50;

pub(crate) fn merge(args: &Args) -> Result<(), Failure> {
    let inputs: Vec<&Path> = args.reports.iter().map(PathBuf::as_path).collect();
    input::not_an_input(&args.output, &inputs)?;
    let mut reports = Vec::with_capacity(args.reports.len());
    for path in &args.reports {
        reports.push((path.display().to_string(), input::load(path)?));
    }
    once_each(&reports)?;
    let mut merged = merged(&reports);
    // The merged report reads back like any other: checked as a reader checks it.
    merged.report = stemmon_report::check(merged.report)
        .map_err(|why| {
            Failure::input(format!(
                "the merged report does not check ({why}): a bug in stemmon merge"
            ))
        })?
        .report;
    let out = Written {
        report: &merged.report,
        merge: &merged.section,
    };
    // Compact: indented, 100 000 stages made a file three times the size of its input.
    let mut text = serde_json::to_vec(&out)
        .map_err(|e| Failure::input(format!("cannot encode the merged report: {e}")))?;
    text.push(b'\n');
    input::write_file(&args.output, &text)?;
    let report = &merged.report;
    let shortest = reports
        .iter()
        .map(|(_, r)| r.report.wall_seconds)
        .fold(f64::INFINITY, f64::min);
    let peak = merged.section.run.get("peak_tree_rss_bytes");
    let peak_rank = peak
        .and_then(|p| merged.section.inputs[p.max_report].rank.as_ref())
        .map(|r| format!(" on rank {r}"))
        .unwrap_or_default();
    let sum = peak.map_or(report.peaks.peak_tree_rss_bytes, |p| Some(p.sum as u64));
    crate::print_out(&format!(
        "merged {} report{}, {} stages into {}: wall {}..{}; peak tree RSS max {}{peak_rank} \
         (sum {})\n",
        reports.len(),
        if reports.len() == 1 { "" } else { "s" },
        report.stages.len(),
        args.output.display(),
        seconds(shortest),
        seconds(report.wall_seconds),
        bytes(report.peaks.peak_tree_rss_bytes),
        bytes(sum),
    ));
    Ok(())
}

/// A run's identity: its `run_id` (0.4), else its host, labels, pid and wall time.
fn identity(report: &Report) -> String {
    match &report.run_id {
        Some(id) => id.clone(),
        None => format!(
            "host {:?}, labels {:?}, pid {}, wall_seconds {:?}",
            report.host, report.labels, report.pid, report.wall_seconds
        ),
    }
}

/// The runs a report holds: its own, or a merged report's (its section's `runs`).
fn runs(report: &Report) -> Vec<String> {
    let listed = report
        .figures
        .value(SECTION)
        .and_then(|section| section.get("runs"))
        .and_then(serde_json::Value::as_array);
    match listed {
        Some(runs) => runs
            .iter()
            .filter_map(|run| run.as_str().map(str::to_owned))
            .collect(),
        None => vec![identity(report)],
    }
}

/// Refuses a run merged twice: the same report twice (or two copies), or a merged
/// report beside one of the runs it holds. One line naming both files.
fn once_each(reports: &[(String, Loaded)]) -> Result<(), Failure> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, (file, loaded)) in reports.iter().enumerate() {
        let own = identity(&loaded.report);
        let held = std::iter::once(own.clone()).chain(runs(&loaded.report));
        for run in held {
            match seen.get(&run) {
                // Its own identity again (a report of one run lists itself).
                Some(&first) if first == index => continue,
                Some(&first) => {
                    let earlier = &reports[first].0;
                    let what = if identity(&reports[first].1.report) == own {
                        "are the same run"
                    } else {
                        "both hold the run"
                    };
                    return Err(Failure::input(format!(
                        "{earlier} and {file} {what} ({}): each run is merged once",
                        short(&run)
                    )));
                }
                None => {
                    seen.insert(run, index);
                }
            }
        }
    }
    Ok(())
}

/// The merged report and its `merge` section.
struct Merged {
    report: Report,
    section: Section,
}

/// The report as written: its keys, and the `merge` section beside them.
#[derive(Serialize)]
struct Written<'a> {
    #[serde(flatten)]
    report: &'a Report,
    merge: &'a Section,
}

/// The merged report's `merge` key (see the module docs).
#[derive(Debug, Default, Serialize)]
pub(crate) struct Section {
    /// The reports merged, in the order given.
    pub(crate) inputs: Vec<InputRun>,
    /// Every run merged in: the inputs' identities, and those merged inputs held.
    pub(crate) runs: Vec<String>,
    /// The index in `inputs` of the report whose timeline, samples, spans and sections
    /// the merged report holds.
    pub(crate) timeline_from: usize,
    /// The whole run's figures over the inputs, by field key (with two inputs or more).
    pub(crate) run: BTreeMap<&'static str, Spread>,
    /// Each stage's inputs, and its figures over them where two or more ran it, in the
    /// order of `stages`.
    pub(crate) stages: Vec<StageSpreads>,
    /// For each of `processes`, the index in `inputs` of the report that saw it.
    pub(crate) processes: Vec<usize>,
}

/// One merged report.
#[derive(Debug, Default, Serialize)]
pub(crate) struct InputRun {
    /// The file it was read from, as given.
    pub(crate) file: String,
    /// Its identity: its `run_id`, else its host, labels, pid and wall time.
    pub(crate) identity: String,
    pub(crate) host: String,
    /// Its `labels.rank`, if any.
    pub(crate) rank: Option<String>,
    pub(crate) pid: u32,
    pub(crate) wall_seconds: f64,
    /// Its `error`: why its run failed.
    pub(crate) error: Option<String>,
}

/// One stage path's figures over the inputs that ran it.
#[derive(Debug, Default, Serialize)]
pub(crate) struct StageSpreads {
    pub(crate) path: String,
    /// How many of the inputs ran it.
    pub(crate) reports: u32,
    /// The index in `inputs` of the first that ran it (the only one, for one).
    pub(crate) first_report: usize,
    /// Its figures over the inputs that ran it, by field key: none for a stage one input
    /// ran, whose figures are the stage's own (the section stays small beside the
    /// stages however many a report holds).
    #[serde(flatten)]
    pub(crate) figures: BTreeMap<&'static str, Spread>,
}

/// A figure over the records that have it (at least one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spread {
    unit: Unit,
    pub(crate) count: u32,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) sum: f64,
    /// The index in `inputs` of the record with the max, the first on a tie.
    pub(crate) max_report: usize,
}

impl Spread {
    /// The spread of `(input index, value)` pairs, `None` for none.
    fn of(unit: Unit, values: impl IntoIterator<Item = (usize, f64)>) -> Option<Spread> {
        let mut values = values.into_iter();
        let (at, first) = values.next()?;
        let mut spread = Spread {
            unit,
            count: 1,
            min: first,
            max: first,
            sum: first,
            max_report: at,
        };
        for (at, value) in values {
            spread.count += 1;
            spread.min = spread.min.min(value);
            if value > spread.max {
                (spread.max, spread.max_report) = (value, at);
            }
            spread.sum += value;
        }
        Some(spread)
    }
}

impl Serialize for Spread {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Bytes and counts as whole numbers, as a report writes them.
        let whole = matches!(self.unit, Unit::Bytes | Unit::Count);
        let number = |value: f64| Number { value, whole };
        let mut out = serializer.serialize_struct("Spread", 6)?;
        out.serialize_field("count", &self.count)?;
        out.serialize_field("min", &number(self.min))?;
        out.serialize_field("mean", &(self.sum / f64::from(self.count)))?;
        out.serialize_field("max", &number(self.max))?;
        out.serialize_field("sum", &number(self.sum))?;
        out.serialize_field("max_report", &self.max_report)?;
        out.end()
    }
}

/// A figure written as a whole number where its unit is one and it is whole.
struct Number {
    value: f64,
    whole: bool,
}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let v = self.value;
        if self.whole && v.fract() == 0.0 && (0.0..u64::MAX as f64).contains(&v) {
            serializer.serialize_u64(v as u64)
        } else if self.whole && v.fract() == 0.0 && (i64::MIN as f64..0.0).contains(&v) {
            serializer.serialize_i64(v as i64)
        } else {
            serializer.serialize_f64(v)
        }
    }
}

/// How `values` combine by `fold`; `None` without any (or for a figure recomputed).
fn fold(fold: Fold, values: impl Iterator<Item = f64>) -> Option<f64> {
    match fold {
        Fold::Sum => values.reduce(|a, b| a + b),
        Fold::Max => values.reduce(f64::max),
        Fold::Derived => None,
    }
}

/// A figure as a report may hold it: seconds and cores within `0..=MAX_SECONDS`.
fn within(unit: Unit, value: f64) -> f64 {
    match unit {
        Unit::Seconds | Unit::Cores => value.clamp(0.0, MAX_SECONDS),
        Unit::Bytes | Unit::Count => value,
    }
}

/// Sets every field of `record` the table lets be set, folded from `of` over `records`
/// (a figure computed from others is left for [`recompute`]).
fn fold_fields<R>(
    record: &mut StageReport,
    records: &[(usize, &R)],
    of: impl Fn(&Field, &R) -> Option<f64>,
) {
    for field in FIELDS
        .iter()
        .filter(|f| f.is_key() && f.fold != Fold::Derived)
    {
        let value = fold(field.fold, records.iter().filter_map(|(_, r)| of(field, r)));
        if let Some(value) = value {
            field.set(record, Some(within(field.unit, value)));
        }
    }
}

/// The spreads of every field over `records`, by key.
fn spreads<R>(
    records: &[(usize, &R)],
    of: impl Fn(&Field, &R) -> Option<f64>,
) -> BTreeMap<&'static str, Spread> {
    FIELDS
        .iter()
        .filter_map(|field| {
            let values = records
                .iter()
                .filter_map(|&(at, r)| of(field, r).map(|v| (at, v)));
            Spread::of(field.unit, values).map(|spread| (field.key, spread))
        })
        .collect()
}

/// The figures computed from others, recomputed: `cpu_cores`, the CPU seconds of
/// `record` over `wall`, the wall seconds of the records that had CPU figures.
fn recompute(record: &mut StageReport, wall: f64) {
    let (Some(cpu), Some(cores)) = (field("cpu_seconds"), field("cpu_cores")) else {
        return;
    };
    let value = cpu
        .of_stage(record)
        .filter(|_| wall > 0.0)
        .map(|cpu| within(Unit::Cores, cpu / wall));
    cores.set(record, value);
}

/// The bounds of SPEC §8 in a merged record: where an input had the sampled figure but
/// not its bound, the highest bound read may be below it, and the sampled one stands.
fn keep_bounds(peaks: &stemmon::report::Peaks, high_water: &mut stemmon::report::HighWater) {
    let raise = |bound: &mut Option<u64>, floor: Option<u64>| {
        if let (Some(b), Some(f)) = (bound.as_mut(), floor) {
            *b = (*b).max(f);
        }
    };
    raise(
        &mut high_water.peak_tree_rss_bound_bytes,
        peaks.peak_tree_rss_bytes,
    );
    raise(
        &mut high_water.peak_parent_hwm_bytes,
        peaks.peak_parent_rss_bytes,
    );
}

/// A stage path across the inputs: where it sits, and the input stages that have it.
struct Slot<'a> {
    name: &'a str,
    path: &'a str,
    parent: Option<u32>,
    found: Vec<(usize, &'a StageReport)>,
}

/// The value all of `values` agree on, else `None`.
fn agreed<T: PartialEq>(mut values: impl Iterator<Item = T>) -> Option<T> {
    let first = values.next()?;
    values.all(|v| v == first).then_some(first)
}

/// Merges `(file, report)` pairs: linear in the stages of all reports (one map of paths).
fn merged(reports: &[(String, Loaded)]) -> Merged {
    let all: Vec<(usize, &Report)> = reports
        .iter()
        .map(|(_, loaded)| &loaded.report)
        .enumerate()
        .collect();
    let (stages, stage_spreads, ids) = merged_stages(reports);
    let mut run = StageReport::default();
    fold_fields(&mut run, &all, |field, r| field.of_run(r));
    let with_cpu = |r: &Report| field("cpu_seconds").is_some_and(|f| f.of_run(r).is_some());
    let cpu_wall = all
        .iter()
        .filter(|(_, r)| with_cpu(r))
        .map(|(_, r)| r.wall_seconds)
        .fold(0.0, f64::max);
    recompute(&mut run, cpu_wall);
    let StageReport {
        peaks, high_water, ..
    } = &mut run;
    keep_bounds(peaks, high_water);

    // The report with the highest sampled peak (the first on a tie) gives its record of
    // the run over time: `max_by_key` keeps the last of equals, so it walks backwards.
    let from = all
        .iter()
        .rev()
        .max_by_key(|(_, r)| r.peaks.peak_tree_rss_bytes)
        .map_or(0, |(at, _)| *at);
    let source = &reports[from].1.report;
    let first_some =
        |of: fn(&Report) -> &Option<String>| all.iter().find_map(|(_, r)| of(r).clone());

    let mut report = Report::default();
    report.sample_interval = source.sample_interval;
    report.platform = source.platform.clone();
    report.sampler = source.sampler.clone();
    report.detailed_memory = source.detailed_memory;
    report.high_water_marks = source.high_water_marks.clone();
    report.spawn_floor_bytes = source.spawn_floor_bytes;
    report.peak_rss_stage = source.peak_rss_stage.clone();
    report.peak_rss_elapsed_seconds = source.peak_rss_elapsed_seconds;
    report.cgroup = source.cgroup.clone();
    report.threads = source.threads.clone();
    report.latest_sample = source.latest_sample.clone();
    report.recent_samples = source.recent_samples.clone();
    report.timeline = source.timeline.clone();
    report.format_version = Some(stemmon_report::FORMAT_VERSION.to_owned());
    let mut inputs_runs: Vec<String> = Vec::new();
    for (_, r) in &all {
        inputs_runs.extend(runs(r));
    }
    report.run_id = Some(run_id(&inputs_runs));
    report.pid = agreed(all.iter().map(|(_, r)| r.pid)).unwrap_or(0);
    report.start_unix_seconds = all
        .iter()
        .filter_map(|(_, r)| r.start_unix_seconds)
        .reduce(f64::min);
    report.running = all.iter().any(|(_, r)| r.running);
    report.error = first_some(|r| &r.error);
    report.exit_code = all
        .iter()
        .filter_map(|(_, r)| r.exit_code)
        .find(|&code| code != 0)
        .or_else(|| all.iter().find_map(|(_, r)| r.exit_code));
    report.wall_seconds = all.iter().map(|(_, r)| r.wall_seconds).fold(0.0, f64::max);
    report.host = agreed(all.iter().map(|(_, r)| &r.host))
        .cloned()
        .unwrap_or_default();
    report.labels = source
        .labels
        .iter()
        .filter(|(k, v)| all.iter().all(|(_, r)| r.labels.get(*k) == Some(*v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    report.command = agreed(all.iter().map(|(_, r)| &r.command))
        .cloned()
        .flatten();
    let sum = |of: fn(&Report) -> u64| {
        all.iter()
            .map(|(_, r)| of(r))
            .fold(0u64, u64::saturating_add)
    };
    let longest = |of: fn(&Report) -> f64| all.iter().map(|(_, r)| of(r)).fold(0.0, f64::max);
    report.sampling_attempts = sum(|r| r.sampling_attempts);
    report.samples = sum(|r| r.samples);
    report.partial_rss_samples = sum(|r| r.partial_rss_samples);
    report.sampling_seconds = within(
        Unit::Seconds,
        all.iter().map(|(_, r)| r.sampling_seconds).sum(),
    );
    report.max_sampling_seconds = longest(|r| r.max_sampling_seconds);
    report.max_sample_gap_seconds = longest(|r| r.max_sample_gap_seconds);
    report.sampling_error = first_some(|r| &r.sampling_error);
    report.output_error = first_some(|r| &r.output_error);
    report.export_error = first_some(|r| &r.export_error);
    report.io_missing = first_some(|r| &r.io_missing);
    report.peak_process_count = run.peak_process_count;
    report.peaks = run.peaks.clone();
    report.high_water = run.high_water.clone();
    report.cpu_io = run.cpu_io.clone();
    // The run's heap section has its own names for the table's heap figures.
    report.heap.allocations = run.heap.heap_allocations;
    report.heap.allocated_bytes = run.heap.heap_allocated_bytes;
    report.heap.peak_live_bytes = run.heap.peak_heap_bytes;
    report.heap.live_bytes = all
        .iter()
        .filter_map(|(_, r)| r.heap.live_bytes)
        .reduce(u64::saturating_add);
    report.heap.allocator = first_some(|r| &r.heap.allocator);
    report.heap.missing = if report.heap.allocator.is_none() {
        first_some(|r| &r.heap.missing)
    } else {
        None
    };
    // The sections of the sources (`gpu`) are the source report's; the figures, folded.
    let mut figures = stemmon_report::Figures::default();
    for key in source.figures.keys() {
        if key != SECTION && field(key).is_none() {
            if let Some(value) = source.figures.value(key) {
                figures.set_value(key, value.clone());
            }
        }
    }
    for key in run.figures.keys() {
        if let Some(value) = run.figures.value(key) {
            figures.set_value(key, value.clone());
        }
    }
    report.figures = figures;
    report.spans = source
        .spans
        .iter()
        .filter_map(|span| {
            let id = *ids[from].get(span.stage_id as usize)?;
            let mut span = span.clone();
            span.stage_id = id;
            Some(span)
        })
        .collect();
    report.stages = stages;
    let (processes, process_inputs) = processes(&all);
    report.processes = processes;

    let section = Section {
        inputs: reports
            .iter()
            .map(|(file, loaded)| {
                let r = &loaded.report;
                InputRun {
                    file: file.clone(),
                    identity: identity(r),
                    host: r.host.clone(),
                    rank: r.labels.get("rank").cloned(),
                    pid: r.pid,
                    wall_seconds: r.wall_seconds,
                    error: r.error.clone(),
                }
            })
            .collect(),
        runs: inputs_runs,
        timeline_from: from,
        run: if all.len() > 1 {
            spreads(&all, |field, r| field.of_run(r))
        } else {
            BTreeMap::new()
        },
        stages: stage_spreads,
        processes: process_inputs,
    };
    Merged { report, section }
}

/// The merged stages, their spreads, and for each input the merged id of each of its
/// stages (to carry its spans over).
fn merged_stages(
    reports: &[(String, Loaded)],
) -> (Vec<StageReport>, Vec<StageSpreads>, Vec<Vec<u32>>) {
    let mut at: HashMap<&str, u32> = HashMap::new();
    let mut slots: Vec<Slot> = Vec::new();
    let mut ids: Vec<Vec<u32>> = Vec::with_capacity(reports.len());
    for (index, (_, loaded)) in reports.iter().enumerate() {
        let stages = &loaded.report.stages;
        let mut id_of: Vec<Option<u32>> = vec![None; stages.len()];
        let mut chain = Vec::new();
        for start in 0..stages.len() {
            // In order of index, each stage after its parent: where a (hand-made) report
            // lists a child first, its ancestors not yet placed go before it. The tree is
            // checked, so the walk up ends; each stage is placed once.
            let mut at_stage = Some(start);
            while let Some(i) = at_stage.filter(|&i| id_of[i].is_none()) {
                chain.push(i);
                at_stage = stages[i].parent_id.map(|p| p as usize);
            }
            while let Some(i) = chain.pop() {
                let stage = &stages[i];
                let slot = match at.get(stage.path.as_str()) {
                    Some(&slot) => slot,
                    None => {
                        let slot = slots.len() as u32;
                        slots.push(Slot {
                            name: &stage.name,
                            path: &stage.path,
                            parent: stage.parent_id.and_then(|p| id_of[p as usize]),
                            found: Vec::new(),
                        });
                        at.insert(&stage.path, slot);
                        slot
                    }
                };
                id_of[i] = Some(slot);
                slots[slot as usize].found.push((index, stage));
            }
        }
        ids.push(id_of.into_iter().map(|id| id.unwrap_or(0)).collect());
    }
    let mut stages = Vec::with_capacity(slots.len());
    let mut spread_list = Vec::with_capacity(slots.len());
    for (id, slot) in slots.into_iter().enumerate() {
        let found = &slot.found;
        let mut stage = StageReport::default();
        stage.id = id as u32;
        stage.name = slot.name.to_owned();
        stage.path = slot.path.to_owned();
        stage.parent_id = slot.parent;
        fold_fields(&mut stage, found, |field, s| field.of_stage(s));
        let with_cpu =
            |s: &StageReport| field("cpu_seconds").is_some_and(|f| f.of_stage(s).is_some());
        let cpu_wall: f64 = found
            .iter()
            .filter(|(_, s)| with_cpu(s))
            .map(|(_, s)| s.wall_seconds)
            .sum();
        recompute(&mut stage, within(Unit::Seconds, cpu_wall));
        let StageReport {
            peaks, high_water, ..
        } = &mut stage;
        keep_bounds(peaks, high_water);
        let each = || found.iter().map(|(_, s)| *s);
        stage.threads = each().map(|s| s.threads).fold(0u32, u32::saturating_add);
        stage.start_seconds = each().map(|s| s.start_seconds).fold(f64::MAX, f64::min);
        stage.min_wall_seconds = each().map(|s| s.min_wall_seconds).fold(f64::MAX, f64::min);
        stage.max_wall_seconds = each().map(|s| s.max_wall_seconds).fold(0.0, f64::max);
        stage.error = each().find_map(|s| s.error.clone());
        stage.samples = each().map(|s| s.samples).fold(0u64, u64::saturating_add);
        stage.partial_rss_samples = each()
            .map(|s| s.partial_rss_samples)
            .fold(0u64, u64::saturating_add);
        spread_list.push(StageSpreads {
            path: stage.path.clone(),
            reports: found.len() as u32,
            first_report: found.first().map_or(0, |(at, _)| *at),
            figures: if found.len() > 1 {
                spreads(found, |field, s| field.of_stage(s))
            } else {
                BTreeMap::new()
            },
        });
        stages.push(stage);
    }
    (stages, spread_list, ids)
}

/// The merged report's `run_id`: `merge-` and a hash of the runs it holds, the same for
/// the same runs in any order.
fn run_id(runs: &[String]) -> String {
    use std::hash::Hasher;
    let mut sorted: Vec<&String> = runs.iter().collect();
    sorted.sort_unstable();
    // FNV-1a: the same hash on every platform and Rust version (std's is neither).
    let mut hasher = fnv::FnvHasher::default();
    for run in sorted {
        hasher.write(run.as_bytes());
        hasher.write_u8(0);
    }
    format!("merge-{:016x}", hasher.finish())
}

/// Every report's processes together, the [`MAX_PROCESSES`] with the highest peak RSS,
/// and the input each came from.
fn processes(reports: &[(usize, &Report)]) -> (Vec<stemmon::report::ProcessReport>, Vec<usize>) {
    let mut all: Vec<(usize, &stemmon::report::ProcessReport)> = reports
        .iter()
        .flat_map(|&(at, report)| report.processes.iter().map(move |p| (at, p)))
        .collect();
    // Highest peak first; a process without a peak last; ties in report order.
    all.sort_by(|(a_at, a), (b_at, b)| {
        b.peak_rss_bytes.cmp(&a.peak_rss_bytes).then(a_at.cmp(b_at))
    });
    all.truncate(MAX_PROCESSES);
    all.into_iter().map(|(at, p)| (p.clone(), at)).unzip()
}
