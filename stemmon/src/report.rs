//! The JSON report: what [`Monitor::summary`](crate::Monitor::summary) and
//! [`Monitor::finish`](crate::Monitor::finish) return and what the output file holds.
//! Its types live in the [`stemmon_report`] crate, which also reads a report with every
//! check (its `format_version`, its stage tree, its times and bounds):
//! [`stemmon_report::read_file`].
//!
//! Sizes are bytes, times are seconds, readings that were not taken are `null`.

pub use stemmon_report::{
    CgroupReport, CpuIo, HeapReport, HighWater, HighWaterMarks, Peaks, ProcessReport, Report,
    SampleReport, Span, StageHeap, StageReport, ThreadReport, TimelinePoint, FORMAT_VERSION,
};
