//! The figures `compare` judges: the memory peaks (sampled, the high-water bound, the
//! parent's exact peak), the heap's (SPEC §11) and CPU seconds (SPEC §12).

use super::Args;
use crate::format::{bytes, seconds};
use stemmon::report::StageReport;
use stemmon::Report;

/// A memory figure that `compare` can judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Figure {
    /// `peak_tree_rss_bytes`: what the sampler saw; a spike between samples escapes it.
    Sampled,
    /// `peak_tree_rss_bound_bytes`: the high-water bound of the tree's peak.
    Bound,
    /// `peak_parent_hwm_bytes`: the monitored process's own exact peak.
    ParentExact,
    /// `heap_allocated_bytes` (the whole run: `heap.allocated_bytes`), SPEC §11.
    HeapAllocated,
    /// `peak_heap_bytes` (the whole run: `heap.peak_live_bytes`), SPEC §11.
    PeakHeap,
    /// `cpu_user_seconds` + `cpu_system_seconds`, held in nanoseconds, SPEC §12.
    Cpu,
}

/// Nanoseconds of CPU from seconds that `input` checked (0 to 1e9 s: no overflow).
fn nanos(seconds: f64) -> u64 {
    (seconds.max(0.0) * 1e9).round() as u64
}

impl Figure {
    pub(super) fn key(self) -> &'static str {
        match self {
            Figure::Sampled => "peak_tree_rss_bytes",
            Figure::Bound => "peak_tree_rss_bound_bytes",
            Figure::ParentExact => "peak_parent_hwm_bytes",
            Figure::HeapAllocated => "heap_allocated_bytes",
            Figure::PeakHeap => "peak_heap_bytes",
            Figure::Cpu => "cpu_user_seconds + cpu_system_seconds",
        }
    }

    /// The short name in the table's header.
    pub(super) fn column(self) -> &'static str {
        match self {
            Figure::Sampled => "sampled peak",
            Figure::Bound => "bound",
            Figure::ParentExact => "parent exact",
            Figure::HeapAllocated => "heap allocated",
            Figure::PeakHeap => "peak heap",
            Figure::Cpu => "CPU",
        }
    }

    /// What it is, in a sentence.
    pub(super) fn meaning(self) -> &'static str {
        match self {
            Figure::Sampled => "the sampled peak tree RSS",
            Figure::Bound => "the high-water bound of the tree's peak",
            Figure::ParentExact => "the parent's exact peak",
            Figure::HeapAllocated => "the bytes allocated on the heap",
            Figure::PeakHeap => "the peak heap (of the whole run: the peak live heap)",
            Figure::Cpu => "the tree's CPU seconds, user plus system",
        }
    }

    /// A value of the figure as printed: bytes, or CPU seconds.
    pub(super) fn show(self, value: Option<u64>) -> String {
        match (self, value) {
            (Figure::Cpu, Some(nanos)) => seconds(nanos as f64 / 1e9),
            (_, value) => bytes(value),
        }
    }

    /// The growth in percent past which NEW fails: CPU is time, the rest memory.
    pub(super) fn limit(self, args: &Args) -> f64 {
        match self {
            Figure::Cpu => args.max_time_increase,
            _ => args.max_memory_increase,
        }
    }

    /// Whether `--max-peak` applies to it: a peak, not CPU time or a sum of allocations.
    pub(super) fn is_peak(self) -> bool {
        !matches!(self, Figure::Cpu | Figure::HeapAllocated)
    }

    pub(super) fn of_run(self, report: &Report) -> Option<u64> {
        match self {
            Figure::Sampled => report.peaks.peak_tree_rss_bytes,
            Figure::Bound => report.high_water.peak_tree_rss_bound_bytes,
            Figure::ParentExact => report.high_water.peak_parent_hwm_bytes,
            Figure::HeapAllocated => report.heap.allocated_bytes,
            Figure::PeakHeap => report.heap.peak_live_bytes,
            Figure::Cpu => crate::format::cpu_total(&report.cpu_io).map(nanos),
        }
    }

    pub(super) fn of_stage(self, stage: &StageReport) -> Option<u64> {
        match self {
            Figure::Sampled => stage.peaks.peak_tree_rss_bytes,
            Figure::Bound => stage.high_water.peak_tree_rss_bound_bytes,
            Figure::ParentExact => stage.high_water.peak_parent_hwm_bytes,
            Figure::HeapAllocated => stage.heap.heap_allocated_bytes,
            Figure::PeakHeap => stage.heap.peak_heap_bytes,
            Figure::Cpu => crate::format::cpu_total(&stage.cpu_io).map(nanos),
        }
    }
}
