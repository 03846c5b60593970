//! The inputs of a merge, folded in one at a time as they are read: each input's stages
//! go into the merged tree and its processes into the highest so far, and then its
//! report is kept without them. Only the input with the highest sampled peak keeps its
//! record over time (timeline, samples, spans, threads), which the merged report takes,
//! so a merge holds its largest input and what it merged so far, not every input.

use super::stages::Stages;
use super::{identity, runs, MAX_PROCESSES};
use crate::format::short;
use crate::Failure;
use std::collections::HashMap;
use stemmon::report::ProcessReport;
use stemmon::Report;
use stemmon_report::fields::{Field, FIELDS};

/// One input, once folded in.
pub(super) struct Input {
    /// The file it was read from, as given.
    pub(super) file: String,
    /// Its report without its stages and processes, and without its record over time
    /// unless it is the [`Folding::source`].
    pub(super) report: Report,
    /// Its whole run's figures, by index in [`FIELDS`] (read while it had its stages).
    run: Vec<Option<f64>>,
}

impl Input {
    /// Its whole run's figure of `field`.
    pub(super) fn run_figure(&self, field: &Field) -> Option<f64> {
        FIELDS
            .iter()
            .position(|f| f.key == field.key)
            .and_then(|at| self.run[at])
    }
}

/// The inputs folded so far.
#[derive(Default)]
pub(super) struct Folding {
    pub(super) inputs: Vec<Input>,
    pub(super) stages: Stages,
    /// The index of the input with the highest sampled peak (the first on a tie): the
    /// merged report's record over time is its, and its spans name merged stage ids.
    pub(super) source: usize,
    /// The [`MAX_PROCESSES`] with the highest peak RSS so far, and the input of each.
    pub(super) processes: Vec<(usize, ProcessReport)>,
    /// Every run held so far, and the index of the input that held it.
    seen: HashMap<String, usize>,
}

impl Folding {
    /// Folds in the report read from `file`; refuses a run merged twice.
    pub(super) fn add(&mut self, file: String, mut report: Report) -> Result<(), Failure> {
        let index = self.inputs.len();
        self.once(index, &file, &report)?;
        let run = FIELDS.iter().map(|field| field.of_run(&report)).collect();
        let ids = self.stages.add(index, &report.stages);
        report.stages = Vec::new();
        report.spans = std::mem::take(&mut report.spans)
            .into_iter()
            .filter_map(|mut span| {
                span.stage_id = *ids.get(span.stage_id as usize)?;
                Some(span)
            })
            .collect();
        self.processes.extend(
            std::mem::take(&mut report.processes)
                .into_iter()
                .map(|process| (index, process)),
        );
        // Highest peak first; a process without a peak last; ties in report order.
        self.processes.sort_by(|(a_at, a), (b_at, b)| {
            b.peak_rss_bytes.cmp(&a.peak_rss_bytes).then(a_at.cmp(b_at))
        });
        self.processes.truncate(MAX_PROCESSES);
        let peak = |report: &Report| report.peaks.peak_tree_rss_bytes;
        match self.inputs.get_mut(self.source) {
            Some(source) if peak(&report) > peak(&source.report) => {
                forget_the_record(&mut source.report);
                self.source = index;
            }
            Some(_) => forget_the_record(&mut report),
            None => self.source = index,
        }
        self.inputs.push(Input { file, report, run });
        Ok(())
    }

    /// Refuses a run merged twice: the same report twice (or two copies), or a merged
    /// report beside one of the runs it holds. One line naming both files.
    fn once(&mut self, index: usize, file: &str, report: &Report) -> Result<(), Failure> {
        let own = identity(report);
        let held = std::iter::once(own.clone()).chain(runs(report));
        for run in held {
            match self.seen.get(&run) {
                // Its own identity again (a report of one run lists itself).
                Some(&first) if first == index => continue,
                Some(&first) => {
                    let earlier = &self.inputs[first];
                    let what = if identity(&earlier.report) == own {
                        "are the same run"
                    } else {
                        "both hold the run"
                    };
                    return Err(Failure::input(format!(
                        "{} and {file} {what} ({}): each run is merged once",
                        earlier.file,
                        short(&run)
                    )));
                }
                None => {
                    self.seen.insert(run, index);
                }
            }
        }
        Ok(())
    }
}

/// Drops the record over time of a report that is not the merge's source.
fn forget_the_record(report: &mut Report) {
    report.timeline = Vec::new();
    report.recent_samples = Vec::new();
    report.latest_sample = None;
    report.spans = Vec::new();
    report.threads = Vec::new();
}
