//! `stemmon merge REPORT... -o OUT.json`: one job's per-rank (or per-node) reports as one.
//!
//! The merged report is its own JSON document ([`MergedReport`], `"format":
//! "stemmon-merged"`): per stage path, calls and errors summed; wall time and peaks as
//! [`Spread`]s (min / mean / max over the reports that ran the stage, the host and rank
//! of the max, and for memory the sum, which is what the job held at most if every
//! rank peaked at once).

use crate::format::{bytes, seconds};
use crate::{input, Failure};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use stemmon::report::StageReport;
use stemmon::Report;

/// Combines the reports of one job's ranks or nodes into one JSON document.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The reports to merge (two or more, usually one per rank).
    #[arg(required = true, num_args = 1..)]
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
    pub(crate) wall_seconds: Spread,
    /// Sampled peak tree RSS of the whole run, over reports.
    pub(crate) peak_tree_rss_bytes: Spread,
    /// The high-water bound of the tree's peak, over the reports that have it.
    pub(crate) peak_tree_rss_bound_bytes: Spread,
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
    pub(crate) wall_seconds: Spread,
    /// Sampled peak tree RSS per report.
    pub(crate) peak_tree_rss_bytes: Spread,
    /// High-water bound of the tree's peak per report.
    pub(crate) peak_tree_rss_bound_bytes: Spread,
    /// Exact peak of the monitored process per report.
    pub(crate) peak_parent_hwm_bytes: Spread,
}

/// A figure over the reports that have it: `null` fields when none has.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Spread {
    /// How many reports had the figure.
    pub(crate) count: u32,
    pub(crate) min: Option<f64>,
    pub(crate) mean: Option<f64>,
    pub(crate) max: Option<f64>,
    /// The sum over reports (for memory: the job's total if every rank peaked at once).
    pub(crate) sum: Option<f64>,
    /// The `host` of the report with the max.
    pub(crate) max_host: Option<String>,
    /// The `labels.rank` of the report with the max.
    pub(crate) max_rank: Option<String>,
    /// The index in `reports` of the report with the max.
    pub(crate) max_report: Option<usize>,
}

impl Spread {
    fn of(values: impl IntoIterator<Item = (usize, f64)>, sources: &[Source]) -> Spread {
        let values: Vec<(usize, f64)> = values.into_iter().collect();
        if values.is_empty() {
            return Spread::default();
        }
        let sum: f64 = values.iter().map(|(_, v)| v).sum();
        let (max_at, max) =
            values
                .iter()
                .copied()
                .fold((values[0].0, f64::NEG_INFINITY), |best, (i, v)| {
                    if v > best.1 {
                        (i, v)
                    } else {
                        best
                    }
                });
        let min = values.iter().map(|(_, v)| *v).fold(f64::INFINITY, f64::min);
        Spread {
            count: values.len() as u32,
            min: Some(min),
            mean: Some(sum / values.len() as f64),
            max: Some(max),
            sum: Some(sum),
            max_host: Some(sources[max_at].host.clone()).filter(|h| !h.is_empty()),
            max_rank: sources[max_at].rank.clone(),
            max_report: Some(max_at),
        }
    }
}

pub(crate) fn merge(args: &Args) -> Result<(), Failure> {
    let mut reports = Vec::with_capacity(args.reports.len());
    for path in &args.reports {
        reports.push((path.display().to_string(), input::load(path)?));
    }
    let merged = merged(&reports);
    let mut text = serde_json::to_vec_pretty(&merged)
        .map_err(|e| Failure::input(format!("cannot encode the merged report: {e}")))?;
    text.push(b'\n');
    input::write_file(&args.output, &text)?;
    let wall = &merged.wall_seconds;
    let peak = &merged.peak_tree_rss_bytes;
    println!(
        "merged {} reports, {} stages into {}: wall {}..{}; peak tree RSS max {}{} (sum {})",
        merged.reports.len(),
        merged.stages.len(),
        args.output.display(),
        seconds(wall.min.unwrap_or(0.0)),
        seconds(wall.max.unwrap_or(0.0)),
        bytes(peak.max.map(|v| v as u64)),
        peak.max_rank
            .as_ref()
            .map(|r| format!(" on rank {r}"))
            .unwrap_or_default(),
        bytes(peak.sum.map(|v| v as u64)),
    );
    Ok(())
}

/// Merges `(file, report)` pairs.
pub(crate) fn merged(reports: &[(String, Report)]) -> MergedReport {
    let sources: Vec<Source> = reports
        .iter()
        .map(|(file, report)| Source {
            file: file.clone(),
            host: report.host.clone(),
            rank: report.labels.get("rank").cloned(),
            pid: report.pid,
        })
        .collect();
    let each = |f: &dyn Fn(&Report) -> Option<f64>| {
        Spread::of(
            reports
                .iter()
                .enumerate()
                .filter_map(|(i, (_, r))| f(r).map(|v| (i, v))),
            &sources,
        )
    };
    let mut paths: Vec<&str> = Vec::new();
    for (_, report) in reports {
        for stage in &report.stages {
            if !paths.contains(&stage.path.as_str()) {
                paths.push(&stage.path);
            }
        }
    }
    let stages = paths
        .into_iter()
        .map(|path| {
            let found: Vec<(usize, &StageReport)> = reports
                .iter()
                .enumerate()
                .filter_map(|(i, (_, r))| r.stage(path).map(|s| (i, s)))
                .collect();
            let spread = |f: fn(&StageReport) -> Option<f64>| {
                Spread::of(
                    found.iter().filter_map(|(i, s)| f(s).map(|v| (*i, v))),
                    &sources,
                )
            };
            MergedStage {
                path: path.to_owned(),
                reports: found.len() as u32,
                calls: found.iter().map(|(_, s)| s.calls).sum(),
                errors: found.iter().map(|(_, s)| s.errors).sum(),
                wall_seconds: spread(|s| Some(s.wall_seconds)),
                peak_tree_rss_bytes: spread(|s| s.peaks.peak_tree_rss_bytes.map(|b| b as f64)),
                peak_tree_rss_bound_bytes: spread(|s| {
                    s.high_water.peak_tree_rss_bound_bytes.map(|b| b as f64)
                }),
                peak_parent_hwm_bytes: spread(|s| {
                    s.high_water.peak_parent_hwm_bytes.map(|b| b as f64)
                }),
            }
        })
        .collect();
    MergedReport {
        format: "stemmon-merged".to_owned(),
        version: 1,
        wall_seconds: each(&|r| Some(r.wall_seconds)),
        peak_tree_rss_bytes: each(&|r| r.peaks.peak_tree_rss_bytes.map(|b| b as f64)),
        peak_tree_rss_bound_bytes: each(&|r| {
            r.high_water.peak_tree_rss_bound_bytes.map(|b| b as f64)
        }),
        reports: sources,
        stages,
    }
}
