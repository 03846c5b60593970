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
//!   `cpu_cores` per run, the mean of the runs' (their max is in the section's `run`
//!   spread); `host`, `pid` and `command` where all agree (else empty, and `pid` 0,
//!   which `show` does not print for a merge: it names the runs), the `labels` all
//!   share; the failure of the first that failed.
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
//! ([`stemmon_report::read::MAX_SECONDS`]), and a high-water bound is never below the figure it bounds, so
//! the merged report reads back.

use crate::format::{bytes, seconds};
use crate::{input, Failure};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use stemmon::report::StageReport;
use stemmon::Report;
use stemmon_report::fields::{field, Unit};

mod fold;
mod inputs;
mod section;
mod stages;

use fold::{agreed, fold_fields, keep_bounds, within};
use inputs::{Folding, Input};
use section::{spreads, InputRun, Section};

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

/// The most processes a merged report keeps, as a single report does (the book's `cpu-io.md`).
const MAX_PROCESSES: usize = 50;

pub(crate) fn merge(args: &Args) -> Result<(), Failure> {
    let inputs: Vec<&Path> = args.reports.iter().map(PathBuf::as_path).collect();
    input::not_an_input(&args.output, &inputs)?;
    // One input at a time, each folded in and dropped as it is read: the merge never
    // holds every input at once.
    let mut folding = Folding::default();
    for path in &args.reports {
        let report = input::load(path)?.report;
        folding.add(path.display().to_string(), report)?;
    }
    let count = folding.inputs.len();
    let shortest = folding
        .inputs
        .iter()
        .map(|input| input.report.wall_seconds)
        .fold(f64::INFINITY, f64::min);
    let mut merged = merged(folding);
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
    // Encoded as it is written: the text (several times the inputs' size, with a spread
    // of each figure of each stage) is never held whole.
    input::write_file_with(&args.output, |file| {
        serde_json::to_writer(&mut *file, &out)?;
        file.write_all(b"\n")
    })?;
    let report = &merged.report;
    let peak = merged.section.run.get("peak_tree_rss_bytes");
    let peak_rank = peak
        .and_then(|p| merged.section.inputs[p.max_report].rank.as_ref())
        .map(|r| format!(" on rank {r}"))
        .unwrap_or_default();
    let sum = peak.map_or(report.peaks.peak_tree_rss_bytes, |p| Some(p.sum as u64));
    crate::print_out(&format!(
        "merged {} report{}, {} stages into {}: wall {}..{}; peak tree RSS max {}{peak_rank} \
         (sum {})\n",
        count,
        if count == 1 { "" } else { "s" },
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

/// The merge of the inputs folded: linear in the stages of all reports (one map of
/// paths).
fn merged(folding: Folding) -> Merged {
    let Folding {
        mut inputs,
        stages,
        source: from,
        processes,
        ..
    } = folding;
    // The source's spans, already of merged stage ids, are the merged report's.
    let spans = std::mem::take(&mut inputs[from].report.spans);
    let all: Vec<(usize, &Report)> = inputs
        .iter()
        .map(|input| &input.report)
        .enumerate()
        .collect();
    let records: Vec<(usize, &Input)> = inputs.iter().enumerate().collect();
    let (stages, stage_spreads) = stages.finish();
    let mut run = StageReport::default();
    fold_fields(&mut run, &records, |field, input| input.run_figure(field));
    // Cores are per run: the mean of the runs' (the section's spread holds their max),
    // not the job's CPU seconds over one run's wall time, a sum over runs.
    let cores: Vec<f64> = all.iter().filter_map(|(_, r)| r.cpu_io.cpu_cores).collect();
    run.cpu_io.cpu_cores = (!cores.is_empty())
        .then(|| within(Unit::Cores, cores.iter().sum::<f64>() / cores.len() as f64));
    let StageReport {
        peaks, high_water, ..
    } = &mut run;
    keep_bounds(peaks, high_water);

    // The report with the highest sampled peak (the first on a tie) gives its record of
    // the run over time.
    let source = &inputs[from].report;
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
    report.spans = spans;
    report.stages = stages;
    let (processes, process_inputs) = processes.into_iter().map(|(at, p)| (p, at)).unzip();
    report.processes = processes;

    let section = Section {
        inputs: inputs
            .iter()
            .map(|input| {
                let r = &input.report;
                InputRun {
                    file: input.file.clone(),
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
            spreads(&records, |field, input| input.run_figure(field))
        } else {
            BTreeMap::new()
        },
        stages: stage_spreads,
        processes: process_inputs,
    };
    Merged { report, section }
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
