//! The tree's memory and the kernel's marks (the book's `exact-peaks.md`): a
//! measurement by record. It reads this process at every stage boundary (a reading
//! under 1 ms old reused) and takes the tree the sampler read at every full sample; it
//! keeps each record's figures itself (its sampled peaks, and the bound the kernel's
//! marks give of its peak between readings), from the records the engine tells it a
//! reading fell in: the calls on the thread at a boundary, the calls open on any thread
//! at a sample, and the calls that closed between two samples.
//!
//! - [`boundary`]: readings at stage boundaries and the intervals of the marks they
//!   close;
//! - [`sample`]: full samples, which count toward every record open at them and close
//!   the intervals the boundaries left open;
//! - [`stats`]: a record's figures, and the run's;
//! - [`processes`]: the tree's processes seen during the run, with each measurement's
//!   figure of each (the report's `processes`);
//! - [`report`]: the figures into the report.

mod boundary;
mod processes;
mod report;
mod sample;
mod stats;

use crate::config::Config;
use crate::memory::{Descendant, SelfReader, TreeReading};
use crate::report::{HighWaterMarks, Report, StageReport, TimelinePoint};
use crate::sources::{AtBoundary, CallAt, Measurement, Reading, SampleCalls, Sampled};
use boundary::Boundary;
use stats::{Stats, Total};
use stemmon_report::fields::measures::tree::MEASURE;

/// The measurement, reading this process at boundaries with `reader`; `marks` says
/// which of the kernel's marks are read. Made on the monitor's own thread as it starts.
pub(crate) fn open(
    reader: Box<dyn SelfReader>,
    marks: HighWaterMarks,
    config: &Config,
) -> Box<dyn Measurement> {
    Box::new(Tree {
        boundary: Boundary::new(reader),
        records: Vec::new(),
        total: Total::default(),
        boot_origin: crate::sys::boot_seconds(),
        marks,
        processes: processes::Processes::default(),
        command_floor: config.spawn_floor.filter(|_| config.root.is_some()),
        seen: Vec::new(),
        closed: Vec::new(),
        late: Vec::new(),
        interval: Vec::new(),
    })
}

/// The tree's memory as this measurement keeps it.
pub(crate) struct Tree {
    /// Stage-boundary readings and the intervals of the kernel's marks they close.
    boundary: Boundary,
    /// Each record's figures, by record id (made as a reading first falls in it).
    records: Vec<Stats>,
    /// The whole run's, and where its sampled peak fell.
    total: Total,
    /// The start, in seconds since boot (the clock of the processes' start times),
    /// where the platform has it.
    boot_origin: Option<f64>,
    /// Which of the kernel's marks are read.
    marks: HighWaterMarks,
    /// The tree's processes seen during the run.
    processes: processes::Processes,
    /// The spawn floor of the command `stemmon run` started, where it started one.
    command_floor: Option<u64>,
    /// A sample's lists, kept so that the next one allocates nothing: the records open
    /// at it, those that closed since the last, those entered while it read, those
    /// that take its interval.
    seen: Vec<u32>,
    closed: Vec<u32>,
    late: Vec<u32>,
    interval: Vec<u32>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("records", &self.records.len())
            .finish_non_exhaustive()
    }
}

/// The figures of record `id` in `records`, made (empty) where none was yet.
fn stats_of(records: &mut Vec<Stats>, id: u32) -> &mut Stats {
    let at = id as usize;
    if records.len() <= at {
        records.resize_with(at + 1, Stats::default);
    }
    &mut records[at]
}

/// The timeline point of `reading` at `elapsed` seconds, with `bound` as its interval's
/// bound, standing for `samples` samples.
fn point_of(
    reading: &TreeReading,
    elapsed: f64,
    bound: Option<u64>,
    samples: u32,
) -> TimelinePoint {
    let mut point = TimelinePoint::default();
    point.elapsed_seconds = elapsed;
    point.end_seconds = elapsed;
    point.tree_rss_bytes = reading.tree_rss;
    point.parent_rss_bytes = reading.parent_rss;
    point.children_rss_bytes = reading.children_rss;
    point.tree_rss_bound_bytes = bound;
    point.samples = samples;
    point
}

impl Measurement for Tree {
    fn declared(&self) -> &'static crate::sources::Measure {
        &MEASURE
    }

    fn active(&self) -> bool {
        true
    }

    fn sample(&mut self, _: &TreeReading, _: f64) -> Reading<'_> {
        // The engine hands it each sample with its calls: see `sampled_calls`.
        Reading::default()
    }

    fn by_record(&self) -> bool {
        true
    }

    fn boundary_call(
        &mut self,
        young: bool,
        call: &CallAt<'_>,
        fresh: &mut dyn FnMut(&AtBoundary<'_>),
    ) -> Option<TimelinePoint> {
        self.count_boundary(young, call, fresh)
    }

    fn reused_by(&mut self, records: &[u32]) {
        self.count_reused(records);
    }

    fn call_closed(&mut self, record: u32, entered: u64) {
        self.apply_intervals_since(record, entered);
    }

    fn sampled_calls(
        &mut self,
        reading: &mut TreeReading,
        calls: &SampleCalls<'_>,
    ) -> Option<Sampled<'_>> {
        Some(self.count_sample(reading, calls))
    }

    fn keep_sample(&mut self, reading: TreeReading, started: u64) {
        self.boundary.sampled(reading, started);
    }

    fn process_seen(&mut self, process: &Descendant, elapsed: f64) {
        self.processes.saw(process, elapsed);
    }

    fn process_figure(&mut self, pid: u32, key: &'static str, value: f64) {
        self.processes.figure(pid, key, value);
    }

    fn process_exit_code(&mut self, pid: u32, code: i32) {
        self.processes.exited(pid, code);
    }

    fn stage_report(&self, record: u32, stage: &mut StageReport) {
        self.write_stage(record, stage);
    }

    fn run_report(&self, report: &mut Report, path: &dyn Fn(Option<u32>) -> String) {
        self.write_run(report, path);
    }
}
