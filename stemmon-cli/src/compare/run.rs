//! A report as `compare` holds it: reduced, as soon as it is read, to what the gate
//! judges and prints, so that comparing reports of 100 000 stages holds a few dozen
//! bytes a stage of each, not each report whole.

use super::figure::Figure;
use crate::input::Loaded;
use stemmon::report::StageReport;
use stemmon::Report;
use stemmon_report::fields::FIELDS;

/// One report, reduced.
pub(super) struct Run {
    /// The report without its stages, spans, timeline, samples and processes.
    pub(super) report: Report,
    /// Its whole run's figures, by index in [`FIELDS`] (read while it had its stages).
    run: Vec<Option<f64>>,
    /// Its stages, in the report's order.
    pub(super) stages: Vec<Stage>,
    /// The indices of `stages` in the order of their paths.
    by_path: Vec<u32>,
}

/// A stage, reduced to its path, its time, whether the parent was alone in it, and the
/// figures that may be judged.
pub(super) struct Stage {
    pub(super) path: Box<str>,
    pub(super) wall: f64,
    pub(super) alone: bool,
    /// The values of the figures its run was reduced for, in their order.
    values: Box<[Option<f64>]>,
}

impl Stage {
    /// The value of `figure`, one of the `figures` its run was reduced for.
    pub(super) fn value(&self, figures: &[Figure], figure: Figure) -> Option<f64> {
        let at = figures.iter().position(|f| f.key == figure.key)?;
        self.values.get(at).copied().flatten()
    }
}

impl Run {
    /// `loaded` reduced to its run and, for each stage, the values of `figures` (every
    /// figure that may be judged).
    pub(super) fn of(loaded: Loaded, figures: &[Figure]) -> Run {
        let Loaded { mut report, tree } = loaded;
        drop(tree);
        let run = FIELDS.iter().map(|field| field.of_run(&report)).collect();
        let stages: Vec<Stage> = std::mem::take(&mut report.stages)
            .into_iter()
            .map(|stage| Stage {
                wall: stage.wall_seconds,
                alone: alone(&stage),
                values: figures.iter().map(|f| f.of_stage(&stage)).collect(),
                path: stage.path.into_boxed_str(),
            })
            .collect();
        report.spans = Vec::new();
        report.timeline = Vec::new();
        report.recent_samples = Vec::new();
        report.latest_sample = None;
        report.processes = Vec::new();
        report.threads = Vec::new();
        let mut by_path: Vec<u32> = (0..stages.len() as u32).collect();
        by_path.sort_unstable_by(|&a, &b| stages[a as usize].path.cmp(&stages[b as usize].path));
        Run {
            report,
            run,
            stages,
            by_path,
        }
    }

    /// Its whole run's figure `figure`.
    pub(super) fn of_run(&self, figure: Figure) -> Option<f64> {
        FIELDS
            .iter()
            .position(|f| f.key == figure.key)
            .and_then(|at| self.run[at])
    }

    /// Its stage at `path`.
    pub(super) fn stage(&self, path: &str) -> Option<&Stage> {
        let at = self
            .by_path
            .binary_search_by(|&i| (*self.stages[i as usize].path).cmp(path))
            .ok()?;
        Some(&self.stages[self.by_path[at] as usize])
    }
}

/// Whether no child of the parent was seen while `stage` was open.
fn alone(stage: &StageReport) -> bool {
    stage.peak_process_count <= 1
        && stage.peaks.peak_children_rss_bytes.unwrap_or(0) == 0
        && stage.high_water.peak_reaped_child_rss_bytes.unwrap_or(0) == 0
}
