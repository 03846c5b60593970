//! `stemmon merge REPORT... -o OUT.json`: one job's per-rank (or per-node) reports as one.
//!
//! The merged report is its own JSON document ([`MergedReport`], `"format":
//! "stemmon-merged"`): per stage path, calls and errors summed; wall time and peaks as
//! [`Spread`]s (min / mean / max over the reports that ran the stage, the host and rank
//! of the max, and for memory the sum, which is what the job held at most if every
//! rank peaked at once).
//!
//! The 0.3 figures (SPEC §11, §12) merge the same way, over the reports that have them:
//! heap allocations and bytes allocated, CPU seconds and storage I/O are counts, so
//! their `sum` is the job's; a peak (`peak_heap_bytes`, the peak live heap) has `max`,
//! the highest of one process, and `sum`, which is what the job held at most if every
//! rank peaked at once (ranks are separate processes that usually run at the same
//! time). `cpu_cores` is recomputed from the sums: all CPU seconds over all wall
//! seconds of the reports that have CPU, the cores one rank kept busy on average. The
//! processes are all reports' lists together, the 50 with the highest peak RSS kept,
//! each labelled with the report it came from.

use crate::format::{bytes, seconds};
use crate::input::Loaded;
use crate::{input, Failure};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use stemmon::report::{CpuIo, ProcessReport, StageReport};

/// Combines the reports of one job's ranks or nodes into one JSON document.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The reports to merge (two or more, usually one per rank).
    #[arg(required = true, num_args = 1.., value_name = "REPORT")]
    reports: Vec<PathBuf>,
    /// Where to write the merged report.
    #[arg(short, long, value_name = "OUT.json")]
    output: PathBuf,
}

/// The merged report: what `stemmon merge` writes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MergedReport {
    /// Always `"stemmon-merged"`: tells this document from a single report.
    pub(crate) format: String,
    /// The version of this layout: 1.
    pub(crate) version: u32,
    /// The reports merged, in the order given.
    pub(crate) reports: Vec<Source>,
    /// Wall time of the whole run, over reports.
    pub(crate) wall_seconds: Spread<f64>,
    /// Sampled peak tree RSS of the whole run, over reports.
    pub(crate) peak_tree_rss_bytes: Spread<u64>,
    /// The high-water bound of the tree's peak, over the reports that have it.
    pub(crate) peak_tree_rss_bound_bytes: Spread<u64>,
    /// Bytes allocated on the heap over the run (`heap.allocated_bytes`).
    pub(crate) heap_allocated_bytes: Spread<u64>,
    /// The highest live heap of the run (`heap.peak_live_bytes`).
    pub(crate) peak_live_heap_bytes: Spread<u64>,
    #[serde(flatten)]
    pub(crate) cpu_io: MergedCpuIo,
    /// The processes of every report, the 50 with the highest peak RSS, highest first.
    pub(crate) processes: Vec<MergedProcess>,
    /// One entry per stage path, in order of first appearance.
    pub(crate) stages: Vec<MergedStage>,
}

/// One merged input.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Source {
    /// The file it was read from, as given.
    pub(crate) file: String,
    /// Its `host`.
    pub(crate) host: String,
    /// Its `labels.rank`, if any.
    pub(crate) rank: Option<String>,
    /// Its `pid`.
    pub(crate) pid: u32,
}

/// One stage path across reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MergedStage {
    /// The stage path (`"fit/inner"`).
    pub(crate) path: String,
    /// How many of the reports ran it.
    pub(crate) reports: u32,
    /// Calls summed over reports.
    pub(crate) calls: u64,
    /// Failed calls summed over reports.
    pub(crate) errors: u64,
    /// Total wall time per report.
    pub(crate) wall_seconds: Spread<f64>,
    /// Sampled peak tree RSS per report.
    pub(crate) peak_tree_rss_bytes: Spread<u64>,
    /// High-water bound of the tree's peak per report.
    pub(crate) peak_tree_rss_bound_bytes: Spread<u64>,
    /// Exact peak of the monitored process per report.
    pub(crate) peak_parent_hwm_bytes: Spread<u64>,
    /// Heap allocations made in the stage per report.
    pub(crate) heap_allocations: Spread<u64>,
    /// Bytes allocated in the stage per report.
    pub(crate) heap_allocated_bytes: Spread<u64>,
    /// The stage's peak heap per report.
    pub(crate) peak_heap_bytes: Spread<u64>,
    #[serde(flatten)]
    pub(crate) cpu_io: MergedCpuIo,
}

/// CPU and storage I/O of a stage or the whole run over reports (SPEC §12).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MergedCpuIo {
    /// CPU seconds, user plus system, per report.
    pub(crate) cpu_seconds: Spread<f64>,
    /// All CPU seconds over all wall seconds of the reports that have CPU; `null`
    /// without any.
    pub(crate) cpu_cores: Option<f64>,
    /// Bytes read from storage per report.
    pub(crate) io_read_bytes: Spread<u64>,
    /// Bytes written to storage per report.
    pub(crate) io_write_bytes: Spread<u64>,
}

/// A process of one merged report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MergedProcess {
    /// The index in `reports` of the report that saw it.
    pub(crate) report: usize,
    /// That report's `host`.
    pub(crate) host: String,
    /// That report's `labels.rank`, if any.
    pub(crate) rank: Option<String>,
    #[serde(flatten)]
    pub(crate) process: ProcessReport,
}

/// The most processes a merged report keeps, as a single report does (SPEC §12).
const MAX_PROCESSES: usize = 50;

/// A figure over the reports that have it: `null` fields when none has. Seconds are
/// numbers with a fraction; bytes are whole numbers, except `mean`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Spread<T> {
    /// How many reports had the figure.
    pub(crate) count: u32,
    pub(crate) min: Option<T>,
    pub(crate) mean: Option<f64>,
    pub(crate) max: Option<T>,
    /// The sum over reports (for memory: the job's total if every rank peaked at once).
    pub(crate) sum: Option<T>,
    /// The `host` of the report with the max.
    pub(crate) max_host: Option<String>,
    /// The `labels.rank` of the report with the max.
    pub(crate) max_rank: Option<String>,
    /// The index in `reports` of the report with the max.
    pub(crate) max_report: Option<usize>,
}

/// A figure a [`Spread`] is made of: seconds (`f64`) or bytes (`u64`).
pub(crate) trait Figure: Copy {
    fn as_f64(self) -> f64;
    fn plus(self, other: Self) -> Self;
}

impl Figure for f64 {
    fn as_f64(self) -> f64 {
        self
    }
    fn plus(self, other: f64) -> f64 {
        self + other
    }
}

impl Figure for u64 {
    fn as_f64(self) -> f64 {
        self as f64
    }
    fn plus(self, other: u64) -> u64 {
        self.saturating_add(other)
    }
}

impl<T: Figure> Spread<T> {
    fn of(values: impl IntoIterator<Item = (usize, T)>, sources: &[Source]) -> Spread<T> {
        let values: Vec<(usize, T)> = values.into_iter().collect();
        let Some(&(first_at, first)) = values.first() else {
            return Spread {
                count: 0,
                min: None,
                mean: None,
                max: None,
                sum: None,
                max_host: None,
                max_rank: None,
                max_report: None,
            };
        };
        let (mut min, mut max, mut max_at, mut sum) = (first, first, first_at, first);
        for &(at, value) in &values[1..] {
            if value.as_f64() < min.as_f64() {
                min = value;
            }
            // The first report holding the max keeps it on a tie.
            if value.as_f64() > max.as_f64() {
                (max, max_at) = (value, at);
            }
            sum = sum.plus(value);
        }
        Spread {
            count: values.len() as u32,
            min: Some(min),
            mean: Some(sum.as_f64() / values.len() as f64),
            max: Some(max),
            sum: Some(sum),
            max_host: Some(sources[max_at].host.clone()).filter(|h| !h.is_empty()),
            max_rank: sources[max_at].rank.clone(),
            max_report: Some(max_at),
        }
    }
}

pub(crate) fn merge(args: &Args) -> Result<(), Failure> {
    let inputs: Vec<&Path> = args.reports.iter().map(PathBuf::as_path).collect();
    input::not_an_input(&args.output, &inputs)?;
    if args.reports.len() < 2 {
        return Err(Failure::input(
            "merge needs two or more reports (one per rank or node)",
        ));
    }
    let mut reports = Vec::with_capacity(args.reports.len());
    for path in &args.reports {
        reports.push((path.display().to_string(), input::load(path)?));
    }
    let merged = merged(&reports);
    // Compact: indented, 100 000 stages made a file three times the size of its input.
    let mut text = serde_json::to_vec(&merged)
        .map_err(|e| Failure::input(format!("cannot encode the merged report: {e}")))?;
    text.push(b'\n');
    input::write_file(&args.output, &text)?;
    let wall = &merged.wall_seconds;
    let peak = &merged.peak_tree_rss_bytes;
    crate::print_out(&format!(
        "merged {} reports, {} stages into {}: wall {}..{}; peak tree RSS max {}{} (sum {})\n",
        merged.reports.len(),
        merged.stages.len(),
        args.output.display(),
        seconds(wall.min.unwrap_or(0.0)),
        seconds(wall.max.unwrap_or(0.0)),
        bytes(peak.max),
        peak.max_rank
            .as_ref()
            .map(|r| format!(" on rank {}", crate::format::clean(r)))
            .unwrap_or_default(),
        bytes(peak.sum),
    ));
    Ok(())
}

/// The spread of `figure` over the items that have it; items are (report index, item).
fn spread<'a, I: 'a, T: Figure>(
    items: impl IntoIterator<Item = (usize, &'a I)>,
    sources: &[Source],
    figure: impl Fn(&I) -> Option<T>,
) -> Spread<T> {
    Spread::of(
        items
            .into_iter()
            .filter_map(|(at, item)| figure(item).map(|v| (at, v))),
        sources,
    )
}

/// Merges `(file, report)` pairs: linear in the stages of all reports (one map of paths).
pub(crate) fn merged(reports: &[(String, Loaded)]) -> MergedReport {
    let sources: Vec<Source> = reports
        .iter()
        .map(|(file, report)| Source {
            file: file.clone(),
            host: report.report.host.clone(),
            rank: report.report.labels.get("rank").cloned(),
            pid: report.report.pid,
        })
        .collect();
    let all = || reports.iter().map(|(_, r)| &r.report).enumerate();
    // Per path, in order of first appearance: the (report, stage) pairs that have it.
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut paths: Vec<(&str, Vec<(usize, &StageReport)>)> = Vec::new();
    for (index, report) in all() {
        for stage in &report.stages {
            let slot = *at.entry(stage.path.as_str()).or_insert_with(|| {
                paths.push((&stage.path, Vec::new()));
                paths.len() - 1
            });
            paths[slot].1.push((index, stage));
        }
    }
    let stages = paths
        .into_iter()
        .map(|(path, found)| {
            let found = || found.iter().copied();
            MergedStage {
                path: path.to_owned(),
                reports: found().count() as u32,
                calls: found().map(|(_, s)| s.calls).sum(),
                errors: found().map(|(_, s)| s.errors).sum(),
                wall_seconds: spread(found(), &sources, |s| Some(s.wall_seconds)),
                peak_tree_rss_bytes: spread(found(), &sources, |s| s.peaks.peak_tree_rss_bytes),
                peak_tree_rss_bound_bytes: spread(found(), &sources, |s| {
                    s.high_water.peak_tree_rss_bound_bytes
                }),
                peak_parent_hwm_bytes: spread(found(), &sources, |s| {
                    s.high_water.peak_parent_hwm_bytes
                }),
                heap_allocations: spread(found(), &sources, |s| s.heap.heap_allocations),
                heap_allocated_bytes: spread(found(), &sources, |s| s.heap.heap_allocated_bytes),
                peak_heap_bytes: spread(found(), &sources, |s| s.heap.peak_heap_bytes),
                cpu_io: cpu_io(
                    found().map(|(at, s)| (at, (&s.cpu_io, s.wall_seconds))),
                    &sources,
                ),
            }
        })
        .collect();
    MergedReport {
        format: "stemmon-merged".to_owned(),
        version: 1,
        wall_seconds: spread(all(), &sources, |r| Some(r.wall_seconds)),
        peak_tree_rss_bytes: spread(all(), &sources, |r| r.peaks.peak_tree_rss_bytes),
        peak_tree_rss_bound_bytes: spread(all(), &sources, |r| {
            r.high_water.peak_tree_rss_bound_bytes
        }),
        heap_allocated_bytes: spread(all(), &sources, |r| r.heap.allocated_bytes),
        peak_live_heap_bytes: spread(all(), &sources, |r| r.heap.peak_live_bytes),
        cpu_io: cpu_io(
            all().map(|(at, r)| (at, (&r.cpu_io, r.wall_seconds))),
            &sources,
        ),
        processes: processes(all(), &sources),
        reports: sources,
        stages,
    }
}

/// CPU and I/O over `(report index, (figures, wall seconds))`.
fn cpu_io<'a>(
    items: impl Iterator<Item = (usize, (&'a CpuIo, f64))>,
    sources: &[Source],
) -> MergedCpuIo {
    let pairs: Vec<(usize, (&CpuIo, f64))> = items.collect();
    let of = |figure: fn(&CpuIo) -> Option<u64>| {
        spread(
            pairs.iter().map(|(at, item)| (*at, item)),
            sources,
            |(c, _)| figure(c),
        )
    };
    let cpu_seconds = spread(
        pairs.iter().map(|(at, item)| (*at, item)),
        sources,
        |(c, _)| crate::format::cpu_total(c),
    );
    let wall: f64 = pairs
        .iter()
        .filter(|(_, (c, _))| crate::format::cpu_total(c).is_some())
        .map(|(_, (_, wall))| wall)
        .sum();
    MergedCpuIo {
        cpu_cores: cpu_seconds.sum.filter(|_| wall > 0.0).map(|cpu| cpu / wall),
        cpu_seconds,
        io_read_bytes: of(|c| c.io_read_bytes),
        io_write_bytes: of(|c| c.io_write_bytes),
    }
}

/// Every report's processes together, the [`MAX_PROCESSES`] with the highest peak RSS.
fn processes<'a>(
    reports: impl Iterator<Item = (usize, &'a stemmon::Report)>,
    sources: &[Source],
) -> Vec<MergedProcess> {
    let mut all: Vec<(usize, &ProcessReport)> = reports
        .flat_map(|(at, report)| report.processes.iter().map(move |p| (at, p)))
        .collect();
    // Highest peak first; a process without a peak last; ties in report order.
    all.sort_by(|(a_at, a), (b_at, b)| {
        b.peak_rss_bytes.cmp(&a.peak_rss_bytes).then(a_at.cmp(b_at))
    });
    all.into_iter()
        .take(MAX_PROCESSES)
        .map(|(at, process)| MergedProcess {
            report: at,
            host: sources[at].host.clone(),
            rank: sources[at].rank.clone(),
            process: process.clone(),
        })
        .collect()
}
