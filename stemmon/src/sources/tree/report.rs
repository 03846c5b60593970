//! The tree's figures into the report: each record's, and the whole run's with what
//! the marks could not see.

use super::stats::Stats;
use super::Tree;
use crate::report::{Report, StageReport};

impl Tree {
    /// Record `record`'s figures into `stage`.
    pub(super) fn write_stage(&self, record: u32, stage: &mut StageReport) {
        let none = Stats::default();
        let stats = self.records.get(record as usize).unwrap_or(&none);
        stage.samples = stats.samples;
        stage.partial_rss_samples = stats.partial_rss_samples;
        stage.peak_process_count = stats.peak_process_count;
        stage.peaks = stats.peaks.clone();
        stage.high_water = stats.high_water_report();
    }

    /// The whole run's figures into `report`, whose processes are in; `path` names the
    /// record open at the sampled peak.
    pub(super) fn write_run(&self, report: &mut Report, path: &dyn Fn(Option<u32>) -> String) {
        report.processes = self.processes.report();
        let total = &self.total;
        report.samples = total.stats.samples;
        report.partial_rss_samples = total.stats.partial_rss_samples;
        report.peak_process_count = total.stats.peak_process_count;
        report.peaks = total.stats.peaks.clone();
        report.high_water = total.stats.high_water_report();
        report.high_water_marks = self.marks.clone();
        report.high_water_marks.unseen = total.stats.unseen;
        no_bound_below_the_commands_exit(report, self.command_floor);
        if report.high_water_marks.unseen > 0 {
            let unseen = match report.high_water_marks.exit_records {
                true => UNSEEN_WITH_RECORDS,
                false => UNSEEN,
            };
            let marks = &mut report.high_water_marks;
            marks.missing = Some(match marks.missing.take() {
                Some(why) => format!("{why}; {unseen}"),
                None => unseen.to_owned(),
            });
        }
        report.peak_rss_stage = total
            .peak_rss_elapsed_seconds
            .map(|_| path(total.peak_rss_record));
        report.peak_rss_elapsed_seconds = total.peak_rss_elapsed_seconds;
    }
}

/// Why processes ended unseen without exit records.
const UNSEEN: &str = "processes ended at a peak nobody read, counted at their last sampled \
     mark or not at all (no exit records: taskstats needs CAP_NET_ADMIN): reaped by \
     another process of the tree, several reaped in one interval, or reaped under a \
     RUSAGE_CHILDREN maximum from before the start";

/// Why processes ended unseen with them.
const UNSEEN_WITH_RECORDS: &str = "processes ended at a peak nobody read: exit records were \
     dropped, or a process peaked and then exec'd a smaller program (its exit record has \
     the last program's memory alone; the command's exit figure is above the bound)";

/// A root this process started (`stemmon run`'s command): its exit rusage is the peak of
/// one process, its own over every program it ran or one it waited for, and more than
/// 1 MiB above the spawn floor `floor` a real one. A tree's bound below it is none: a
/// process that peaked and then `exec`d a small program has an exit record of the last
/// program's memory alone. The figure is then "at least" that peak.
fn no_bound_below_the_commands_exit(report: &mut Report, floor: Option<u64>) {
    let Some(floor) = floor else {
        return;
    };
    let command = report.processes.iter().find(|p| p.pid == report.pid);
    let Some(exit) = command.and_then(|p| p.exit_maxrss_bytes) else {
        return;
    };
    if !crate::memory::above_spawn_floor(exit, floor) {
        return;
    }
    let h = &mut report.high_water;
    if h.peak_tree_rss_bound_bytes
        .is_some_and(|bound| bound < exit)
    {
        h.peak_tree_rss_at_least_bytes = h.peak_tree_rss_bound_bytes.take();
        report.high_water_marks.unseen += 1;
    }
    if let Some(least) = &mut h.peak_tree_rss_at_least_bytes {
        *least = (*least).max(exit);
    }
}
