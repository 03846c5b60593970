//! The live log line: one per event, flushed, failures to print ignored.

use crate::report::Report;
use std::fmt::Write as _;
use std::io::Write as _;

/// `812.4 MiB`, `1.1 GiB`, or `unavailable`.
pub(crate) fn human_bytes(bytes: Option<u64>) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    const GIB: f64 = (1u64 << 30) as f64;
    match bytes {
        None => "unavailable".to_owned(),
        Some(b) if b as f64 >= GIB => format!("{:.1} GiB", b as f64 / GIB),
        Some(b) => format!("{:.1} MiB", b as f64 / MIB),
    }
}

/// The line for `event`, given the stage open now and the report at that moment.
pub(crate) fn format_line(event: &str, stage: &str, report: &Report) -> String {
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
        human_bytes(report.peaks.peak_tree_rss_bytes),
        human_bytes(sample.and_then(|s| s.parent_rss_bytes)),
        human_bytes(sample.and_then(|s| s.children_rss_bytes)),
    );
    line
}

pub(crate) fn print_line(event: &str, stage: &str, report: &Report) {
    let mut line = format_line(event, stage, report);
    line.push('\n');
    let mut out = std::io::stdout().lock();
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
    }
}
