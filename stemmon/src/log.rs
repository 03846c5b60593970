//! The live log line: one per event, on stderr, flushed, failures to print ignored.
//!
//! A line is one line whatever the stage names hold: control characters (newline, CR,
//! ESC, NUL, ...), line and paragraph separators and bidirectional overrides are printed
//! escaped (`\n`, `\u{1b}`); the report keeps the names as they are.

use crate::report::{CgroupReport, Report};
use std::fmt::Write as _;
use std::io::Write as _;

/// `812.4 MiB`, `1.1 GiB`, or `unavailable`.
pub(crate) fn human_bytes(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "unavailable".to_owned(), format_bytes)
}

pub(crate) use stemmon_report::{escape, format_bytes};

/// The line for `event`, given the stage open now, the live heap when the event
/// happened (where it kept it) and the report at that moment.
pub(crate) fn format_line(event: &str, stage: &str, heap: Option<u64>, report: &Report) -> String {
    let sample = report.latest_sample.as_ref();
    let mut line = format!(
        "[stemmon] {event}; elapsed={:.2}s; stage={stage}; RSS={}; RSS coverage=",
        report.wall_seconds,
        human_bytes(sample.and_then(|s| s.tree_rss_bytes)),
    );
    match sample {
        Some(s) => {
            let _ = write!(line, "{}/{}", s.rss_processes, s.process_count);
            if !s.rss_complete {
                line.push_str(" (partial tree)");
            }
        }
        None => line.push_str("0/?"),
    }
    let _ = write!(
        line,
        "; peak RSS={}; parent={}; children={}",
        peak(report),
        human_bytes(sample.and_then(|s| s.parent_rss_bytes)),
        human_bytes(sample.and_then(|s| s.children_rss_bytes)),
    );
    // 0.3 (the book's `heap.md` and `cpu-io.md`): only when the report has the figure, so a 0.2 line is unchanged.
    if let Some(live) = heap.or(report.heap.live_bytes) {
        let _ = write!(line, "; heap={}", human_bytes(Some(live)));
    }
    if let Some(cores) = latest_cores(report) {
        let _ = write!(line, "; cpu={cores:.1} cores");
    }
    // Each measurement's series shown live (`gpu=`), at the newest point, where read.
    if let Some(point) = report.timeline.last() {
        for series in stemmon_report::fields::SERIES {
            if let (Some(name), Some(value)) = (series.live, series.of_point(point)) {
                let _ = write!(line, "; {name}={}", series.unit.show(value));
            }
        }
    }
    // Once, at the start: what the resets do to the program's own figures.
    if event == "started" && report.high_water_marks.resets {
        line.push_str(
            "; marks=reset (the program's own ru_maxrss, VmHWM and an outer /usr/bin/time \
             see reset marks, \"keep\" leaves them)",
        );
    }
    let run_peak = report.high_water.peak_cgroup_memory_bytes;
    if let Some(headroom) = report.cgroup.as_ref().and_then(|c| headroom(c, run_peak)) {
        let _ = write!(line, "; {headroom}");
    }
    line
}

/// The tree's CPU use now in cores: the newest timeline point's, else the run's so far.
fn latest_cores(report: &Report) -> Option<f64> {
    report
        .timeline
        .last()
        .and_then(|point| point.cpu_cores)
        .or(report.cpu_io.cpu_cores)
        .filter(|cores| cores.is_finite() && *cores >= 0.0)
}

/// The peak, the exact figure first where there is one: the high-water bound
/// (`498.3 MiB (bound; sampled 212.0 MiB)`, the true peak lies between them), the
/// process's own exact peak where the tree is that process alone (`213.0 MiB
/// (exact)`), else the sampled peak. Where a process ended unseen the sum is no
/// bound: `at least 314.8 MiB (2 processes ended unseen)`.
fn peak(report: &Report) -> String {
    let sampled = report.peaks.peak_tree_rss_bytes;
    if let Some(floor) = report.high_water.peak_tree_rss_at_least_bytes {
        let unseen = report.high_water_marks.unseen;
        return format!(
            "at least {} ({unseen} process{} ended unseen)",
            human_bytes(Some(floor.max(sampled.unwrap_or(0)))),
            if unseen == 1 { "" } else { "es" }
        );
    }
    let bound = report.high_water.peak_tree_rss_bound_bytes;
    let own = report.high_water.peak_parent_hwm_bytes;
    let alone =
        report.peak_process_count <= 1 && report.peaks.peak_children_rss_bytes.unwrap_or(0) == 0;
    match (sampled, bound) {
        (_, Some(bound)) if alone && own.is_some_and(|own| own >= bound) => {
            format!("{} (exact)", human_bytes(own))
        }
        // A label never repeats its figure: where the two print alike, the bound alone.
        (Some(sampled), Some(bound))
            if bound > sampled && human_bytes(Some(bound)) != human_bytes(Some(sampled)) =>
        {
            format!(
                "{} (bound; sampled {})",
                human_bytes(Some(bound)),
                human_bytes(Some(sampled))
            )
        }
        (Some(_), Some(bound)) if bound > sampled.unwrap_or(0) => {
            format!("{} (bound)", human_bytes(Some(bound)))
        }
        (None, Some(bound)) => format!("{} (bound)", human_bytes(Some(bound))),
        (sampled, _) => human_bytes(sampled),
    }
}

/// The cgroup's headroom, `limit=4.0 GiB (83 %)`, when it has a limit: the run's peak
/// charge `run_peak` (never the cgroup's lifetime peak, which may be another job's)
/// (or its charge now) against the limit.
fn headroom(cgroup: &CgroupReport, run_peak: Option<u64>) -> Option<String> {
    let limit = cgroup.memory_limit_bytes.filter(|l| *l > 0)?;
    let used = run_peak.or(cgroup.memory_current_bytes)?;
    Some(format!(
        "limit={} ({:.0} %)",
        human_bytes(Some(limit)),
        used as f64 * 100.0 / limit as f64
    ))
}

/// Prints the line for `event` to stderr (stdout stays the program's own), escaped, in
/// one write, flushed.
pub(crate) fn print_line(event: &str, stage: &str, heap: Option<u64>, report: &Report) {
    let mut line = escape(&format_line(event, stage, heap, report)).into_owned();
    line.push('\n');
    let mut out = std::io::stderr().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_like_a_person_writes_them() {
        assert_eq!(human_bytes(None), "unavailable");
        assert_eq!(human_bytes(Some(812 * (1 << 20) + 400 * 1024)), "812.4 MiB");
        assert_eq!(human_bytes(Some(1181116006)), "1.1 GiB");
        assert_eq!(human_bytes(Some(3 << 30)), "3.0 GiB");
        assert_eq!(human_bytes(Some(2048)), "2 KiB");
        assert_eq!(human_bytes(Some(0)), "0 B");
        assert_eq!(human_bytes(None), "unavailable");
    }

    #[test]
    fn the_peak_leads_with_the_exact_figure() {
        let mib = 1u64 << 20;
        let mut report = Report::default();
        report.peaks.peak_tree_rss_bytes = Some(212 * mib);
        report.peaks.peak_children_rss_bytes = Some(10 * mib);
        report.peak_process_count = 3;
        assert_eq!(peak(&report), "212.0 MiB");
        report.high_water.peak_tree_rss_bound_bytes = Some(212 * mib);
        assert_eq!(peak(&report), "212.0 MiB");
        report.high_water.peak_tree_rss_bound_bytes = Some(498 * mib + 307 * 1024);
        assert_eq!(peak(&report), "498.3 MiB (bound; sampled 212.0 MiB)");
        // Two figures that print alike are one: `221.7 MiB (bound; sampled 221.7 MiB)`
        // would say nothing twice.
        let mut close = report.clone();
        close.peaks.peak_tree_rss_bytes = Some(221 * mib + 700 * 1024);
        close.high_water.peak_tree_rss_bound_bytes = Some(221 * mib + 710 * 1024);
        assert_eq!(peak(&close), "221.7 MiB (bound)");
        let mut unseen = report.clone();
        unseen.high_water.peak_tree_rss_at_least_bytes =
            unseen.high_water.peak_tree_rss_bound_bytes.take();
        unseen.high_water_marks.unseen = 2;
        assert_eq!(
            peak(&unseen),
            "at least 498.3 MiB (2 processes ended unseen)"
        );
        // One process alone: its own exact peak is the tree's.
        report.peaks.peak_tree_rss_bytes = Some(3 * mib + 300 * 1024);
        report.peaks.peak_children_rss_bytes = Some(0);
        report.peak_process_count = 1;
        report.high_water.peak_tree_rss_bound_bytes = Some(213 * mib);
        report.high_water.peak_parent_hwm_bytes = Some(213 * mib);
        assert_eq!(peak(&report), "213.0 MiB (exact)");
        assert_eq!(peak(&Report::default()), "unavailable");
    }

    #[test]
    fn the_headroom_shows_only_with_a_limit() {
        let mut cgroup = {
            let mut built = CgroupReport::default();
            built.memory_current_bytes = Some(800 << 20);
            built.memory_peak_bytes = Some(1000 << 20);
            built
        };
        assert_eq!(headroom(&cgroup, Some(850 << 20)), None);
        cgroup.memory_limit_bytes = Some(1 << 30);
        // The run's peak, not the cgroup's lifetime one.
        let run = headroom(&cgroup, Some(850 << 20));
        assert_eq!(run.as_deref(), Some("limit=1.0 GiB (83 %)"));
        let now = headroom(&cgroup, None);
        assert_eq!(now.as_deref(), Some("limit=1.0 GiB (78 %)"));
    }

    #[test]
    fn heap_and_cpu_show_only_when_the_report_has_them() {
        let mut report = Report::default();
        let plain = format_line("running", "fit", None, &report);
        assert!(
            !plain.contains("heap=") && !plain.contains("cpu="),
            "{plain}"
        );
        report.heap.live_bytes = Some(500 << 20);
        report.cpu_io.cpu_cores = Some(1.04);
        let line = format_line("running", "fit", None, &report);
        assert!(
            line.ends_with("; children=unavailable; heap=500.0 MiB; cpu=1.0 cores"),
            "{line}"
        );
        report.timeline.push({
            let mut built = crate::report::TimelinePoint::default();
            built.cpu_cores = Some(3.83);
            built
        });
        let line = format_line("running", "fit", None, &report);
        assert!(
            line.ends_with("; cpu=3.8 cores"),
            "the newest point wins: {line}"
        );
        assert_eq!(line.lines().count(), 1);
        // A GPU read: the tree's GPU memory at the newest point.
        if let Some(point) = report.timeline.last_mut() {
            point.figures.set_count("tree_gpu_bytes", Some(3 << 30));
        }
        let line = format_line("running", "fit", None, &report);
        assert!(line.ends_with("; cpu=3.8 cores; gpu=3.0 GiB"), "{line}");
    }

    #[test]
    fn a_line_with_a_newline_in_a_stage_name_stays_one_line() {
        let report = Report::default();
        let line = escape(&format_line(
            "completed a\nb (0.10s)",
            "a\nb",
            None,
            &report,
        ))
        .into_owned();
        assert_eq!(line.lines().count(), 1);
        assert!(
            line.starts_with("[stemmon] completed a\\nb (0.10s); elapsed="),
            "{line}"
        );
        assert!(line.contains("; stage=a\\nb; "), "{line}");
    }
}
