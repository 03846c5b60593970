//! The test's stage table, as a failure shows it: each stage's calls and heap.

use crate::Report;
use stemmon_report::format_bytes;

/// One line a stage: path, calls, bytes allocated, peak heap, retained.
pub(crate) fn stages(report: &Report) -> String {
    let width = report
        .stages
        .iter()
        .map(|s| s.path.chars().count())
        .max()
        .unwrap_or(0)
        .max("stage".len());
    let mut out = format!(
        "{:<width$}  {:>7}  {:>10}  {:>10}  {:>10}",
        "stage", "calls", "allocated", "peak heap", "retained"
    );
    let bytes = |b: Option<u64>| b.map_or("—".to_owned(), format_bytes);
    for stage in &report.stages {
        let retained = stage
            .heap
            .heap_retained_bytes
            .map_or("—".to_owned(), signed);
        out.push_str(&format!(
            "\n{:<width$}  {:>7}  {:>10}  {:>10}  {:>10}",
            stemmon_report::escape(&stage.path),
            stage.calls,
            bytes(stage.heap.heap_allocated_bytes),
            bytes(stage.heap.peak_heap_bytes),
            retained,
        ));
    }
    out
}

fn signed(bytes: i64) -> String {
    if bytes < 0 {
        format!("-{}", format_bytes(bytes.unsigned_abs()))
    } else {
        format_bytes(bytes as u64)
    }
}

/// `left live by: load (1.0 MiB), parse (512 KiB)`: the innermost stages that retained
/// bytes, largest first; `None` when none did.
pub(crate) fn left_live(report: &Report) -> Option<String> {
    let mut left: Vec<(&str, i64)> = report
        .stages
        .iter()
        .filter_map(|s| Some((s.path.as_str(), s.heap.heap_retained_bytes?)))
        .filter(|(_, retained)| *retained > 0)
        .collect();
    // A parent's retained bytes include its children's: name the innermost holders.
    let paths: Vec<&str> = left.iter().map(|(p, _)| *p).collect();
    left.retain(|(path, _)| {
        !paths
            .iter()
            .any(|other| other.len() > path.len() && other.starts_with(&format!("{path}/")))
    });
    left.sort_by_key(|(_, retained)| std::cmp::Reverse(*retained));
    (!left.is_empty()).then(|| {
        let named: Vec<String> = left
            .iter()
            .map(|(path, bytes)| format!("{} ({})", stemmon_report::escape(path), signed(*bytes)))
            .collect();
        format!("left live by: {}", named.join(", "))
    })
}
