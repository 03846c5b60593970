//! The limits against the figures: the message of the first limit broken, the test's
//! stage table, and the report a failing test leaves under `STEMMON_TEST_REPORTS`.

use super::figures::{Bounds, Exceeded, Figures};
use super::table;
use crate::Report;

/// The two lines that install the counting allocator, as a failure quotes them.
pub(crate) const INSTALL: &str = "#[global_allocator]\n    \
     static ALLOC: stemmon::Alloc = stemmon::Alloc::system();";

/// `bytes` in `unit` (`(name, size)`), one decimal from a KiB up.
fn in_unit(bytes: u64, unit: (&str, f64)) -> String {
    if unit.1 == 1.0 {
        format!("{bytes} B")
    } else {
        format!("{:.1} {}", bytes as f64 / unit.1, unit.0)
    }
}

/// The unit both figures of one line are written in: the larger one's.
fn unit_of(a: u64, b: u64) -> (&'static str, f64) {
    let larger = a.max(b) as f64;
    const KIB: f64 = 1024.0;
    match larger {
        x if x >= KIB * KIB * KIB => ("GiB", KIB * KIB * KIB),
        x if x >= KIB * KIB => ("MiB", KIB * KIB),
        x if x >= KIB => ("KiB", KIB),
        _ => ("B", 1.0),
    }
}

/// `max_heap: 32.0 MiB held, limit 30.0 MiB (33554432 B > 31457280 B)`.
fn over_size(key: &str, what: &str, figure: u64, limit: u64) -> String {
    let unit = unit_of(figure, limit);
    format!(
        "{key}: {} {what}, limit {} ({figure} B > {limit} B)",
        in_unit(figure, unit),
        in_unit(limit, unit)
    )
}

/// The first line of each limit broken, in the keys' order.
pub(crate) fn broken(limits: &Bounds, figures: &Figures) -> Vec<String> {
    let mut lines = Vec::new();
    if limits.wants_heap() && !figures.heap_counted {
        let key = [
            ("max_heap", limits.max_heap.is_some()),
            ("max_allocated", limits.max_allocated.is_some()),
            ("max_allocations", limits.max_allocations.is_some()),
            ("leaks", limits.leaks.is_some()),
        ]
        .into_iter()
        .find(|(_, set)| *set)
        .map_or("max_heap", |(key, _)| key);
        lines.push(format!(
            "{key}: no heap figures: stemmon::Alloc is not the global allocator; install it \
             in the test's crate:\n    {INSTALL}"
        ));
        return lines;
    }
    if let Some(limit) = limits.max_heap {
        if figures.peak_heap_bytes > limit {
            lines.push(over_size(
                "max_heap",
                "held",
                figures.peak_heap_bytes,
                limit,
            ));
        }
    }
    if let Some(limit) = limits.max_allocated {
        if figures.allocated_bytes > limit {
            let line = over_size("max_allocated", "allocated", figures.allocated_bytes, limit);
            lines.push(line);
        }
    }
    if let Some(limit) = limits.max_allocations {
        if figures.allocations > limit {
            lines.push(format!(
                "max_allocations: {} allocations, limit {limit}",
                figures.allocations
            ));
        }
    }
    if let Some(limit) = limits.leaks {
        let live = figures.live_bytes.max(0) as u64;
        if live > limit {
            lines.push(over_size("leaks", "live at return", live, limit));
        }
    }
    if let (Some(limit), false) = (limits.max_rss, limits.rss_elsewhere) {
        match figures.max_rss_bytes {
            Some(peak) if peak > limit => lines.push(over_size("max_rss", "peak RSS", peak, limit)),
            Some(_) => {}
            None => lines.push(
                "max_rss: no peak RSS: the kernel's high-water mark could not be read".to_owned(),
            ),
        }
    }
    lines
}

/// The figures, or the message of every limit broken with the stage table; a failure
/// also leaves its report under `STEMMON_TEST_REPORTS`.
pub(crate) fn limits(
    limits: &Bounds,
    figures: Figures,
    report: Option<&Report>,
) -> Result<Figures, Exceeded> {
    let lines = broken(limits, &figures);
    if lines.is_empty() {
        return Ok(figures);
    }
    let mut message = lines.join("\n");
    if let Some(report) = report.filter(|r| !r.stages.is_empty()) {
        message.push_str("\n\n");
        message.push_str(&table::stages(report));
        if lines.iter().any(|line| line.starts_with("leaks:")) {
            if let Some(left) = table::left_live(report) {
                message.push('\n');
                message.push_str(&left);
            }
        }
    }
    if let Some(path) = keep(&limits.name, &message, &figures, report) {
        message.push_str(&format!("\n(report: {})", path.display()));
    }
    Err(Exceeded { message, figures })
}

/// Writes the failing test's report where `STEMMON_TEST_REPORTS` points, if set: its
/// path, or `None` (unset, or the write failed: one warning).
fn keep(
    name: &str,
    message: &str,
    figures: &Figures,
    report: Option<&Report>,
) -> Option<std::path::PathBuf> {
    let dir = crate::env::test_reports()?;
    let file: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '.'
            }
        })
        .collect();
    let path = dir.join(format!("{file}.json"));
    let json = serde_json::json!({
        "test": name,
        "message": message,
        "figures": {
            "heap_counted": figures.heap_counted,
            "allocations": figures.allocations,
            "allocated_bytes": figures.allocated_bytes,
            "peak_heap_bytes": figures.peak_heap_bytes,
            "live_bytes": figures.live_bytes,
            "max_rss_bytes": figures.max_rss_bytes,
        },
        "report": report,
    });
    let written = serde_json::to_vec_pretty(&json)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::Output::resolve(&path)?.write(&bytes, false));
    match written {
        Ok(()) => Some(path),
        Err(e) => {
            crate::warn::warn(&format!(
                "could not keep the test's report in {}: {e}",
                dir.display()
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_limit_first_with_both_figures_in_one_unit() {
        assert_eq!(
            over_size("max_heap", "held", 32 << 20, 30 << 20),
            "max_heap: 32.0 MiB held, limit 30.0 MiB (33554432 B > 31457280 B)"
        );
        assert_eq!(
            over_size("leaks", "live at return", 2048, 0),
            "leaks: 2.0 KiB live at return, limit 0.0 KiB (2048 B > 0 B)"
        );
        assert_eq!(
            over_size("leaks", "live", 12, 0),
            "leaks: 12 B live, limit 0 B (12 B > 0 B)"
        );
    }
}
