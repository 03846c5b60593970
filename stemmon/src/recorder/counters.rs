//! The measurement of counters in the engine (the book's `architecture.md`): cumulative
//! figures that the measurement gives at every fresh boundary reading and every full
//! sample, published here for calls to read without a lock and differenced per call.
//! Nothing here knows what the counters count (CPU time, bytes read): the measurement
//! turns a record's growth into its figures.
//!
//! A call notes the counters at its entry and adds the difference at its exit
//! ([`marks`]), so a record's growth is what the counters grew by while each of its
//! calls was open, summed over calls. The measurement's thread clock (a thread's own
//! CPU time) is read on the call's thread at an entry when the thread's last reading is
//! older than the reuse window, and at every exit that takes the shared state.

use crate::report::{Report, StageReport, TimelinePoint};
use crate::sources::{AtBoundary, Growth, Measurement};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use stemmon_report::fields::Series;

mod marks;

pub(crate) use super::tally::{Clock, Counters, Tally, MAX_COUNTERS};

/// The counters as last given, for every call's entry and exit to read without a lock.
/// Written under the state lock, at most about once a millisecond; the counters are
/// read one by one, so a reader may see one of a newer figure than another (each is
/// still a figure the counter reached, so no difference is ever negative).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Published {
    values: [AtomicU64; MAX_COUNTERS],
    /// Bumped at every store: a call whose exit sees the number its entry saw had no
    /// growth to count, and skips the arithmetic.
    generation: AtomicU64,
    /// Some figure has been published.
    read_once: AtomicBool,
}

impl Published {
    #[inline]
    fn load(&self) -> Counters {
        Counters(std::array::from_fn(|index| {
            self.values[index].load(Ordering::Relaxed)
        }))
    }

    fn store(&self, counters: &[u64]) {
        for (value, &counter) in self.values.iter().zip(counters) {
            value.store(counter, Ordering::Relaxed);
        }
        self.generation.fetch_add(1, Ordering::Release);
        self.read_once.store(true, Ordering::Relaxed);
    }

    #[inline]
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// The engine's measurement of counters, if it has one, and what its last sample gave.
#[derive(Default)]
pub(crate) struct Counted {
    measurement: Option<Box<dyn Measurement>>,
    /// The counters the last sample gave, until published.
    sampled: Option<Counters>,
    /// The series the last sample gave, for its timeline point.
    series: Vec<(&'static Series, Option<f64>)>,
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.measurement.as_ref().map(|m| m.declared().name);
        f.debug_struct("Counted")
            .field("measurement", &name)
            .finish()
    }
}

impl Counted {
    /// Holds `measurement`, which has counters (at most [`MAX_COUNTERS`]).
    pub(super) fn of(measurement: Box<dyn Measurement>) -> Counted {
        debug_assert!(measurement.counters() <= MAX_COUNTERS);
        Counted {
            measurement: Some(measurement),
            ..Counted::default()
        }
    }

    /// The measurement's section as it is now into `extra`.
    pub(super) fn section_into(&mut self, extra: &mut super::extra::Extra) {
        let Some(measurement) = self.measurement.as_mut() else {
            return;
        };
        if let Some(value) = measurement.section() {
            extra.section(measurement.declared(), value);
        }
    }

    /// The thread clock of the measurement, if it has one.
    pub(super) fn thread_clock(&self) -> Option<fn() -> Option<u64>> {
        self.measurement.as_ref()?.thread_clock()
    }

    /// The counters a fresh boundary reading gives; the measurement's section goes into
    /// `extra` where it changed (its first counters may change it).
    pub(super) fn boundary(
        &mut self,
        at: &AtBoundary<'_>,
        extra: &mut super::extra::Extra,
    ) -> Option<Counters> {
        let measurement = self.measurement.as_mut()?;
        let counters = measurement.boundary(at).map(Counters::of);
        if let Some(value) = measurement.section() {
            extra.section(measurement.declared(), value);
        }
        counters
    }

    /// Takes in a full sample at `elapsed` seconds: keeps the counters it gives to
    /// publish ([`take_sampled`](Counted::take_sampled)) and its series for the
    /// timeline ([`series_into`](Counted::series_into)); its section goes into `extra`.
    pub(super) fn sampled(
        &mut self,
        reading: &crate::memory::TreeReading,
        elapsed: f64,
        extra: &mut super::extra::Extra,
    ) {
        self.series.clear();
        let Some(measurement) = self.measurement.as_mut() else {
            return;
        };
        let declared = measurement.declared();
        let read = measurement.sample(reading, elapsed);
        self.series
            .extend(declared.series.iter().zip(read.series.iter().copied()));
        self.sampled = (!read.counters.is_empty()).then(|| Counters::of(read.counters));
        if let Some(value) = measurement.section() {
            extra.section(declared, value);
        }
    }

    /// The counters the last sample gave, once.
    pub(super) fn take_sampled(&mut self) -> Option<Counters> {
        self.sampled.take()
    }

    /// The last sample's series into its timeline point `point`.
    pub(super) fn series_into(&self, point: &mut TimelinePoint) {
        for &(series, value) in &self.series {
            series.set(point, value);
        }
    }

    /// Writes the figures of `tally` over `wall_seconds` into `stage`; `figures` is a
    /// buffer to reuse (a snapshot writes every stage's).
    pub(super) fn stage(
        &self,
        tally: &Tally,
        wall_seconds: f64,
        stage: &mut StageReport,
        figures: &mut Vec<Option<f64>>,
    ) {
        let Some(measurement) = &self.measurement else {
            return;
        };
        let growth = Growth {
            counters: &tally.counters.0[..measurement.counters()],
            thread_micros: tally.thread_read.then_some(tally.thread_micros),
            ..Growth::default()
        };
        measurement.figures(&growth, wall_seconds, figures);
        for (field, value) in measurement.declared().fields.iter().zip(figures.iter()) {
            if field.is_key() {
                field.set(stage, *value);
            }
        }
    }

    /// Writes the whole run's figures over `wall_seconds` into `report`.
    pub(super) fn run(&self, wall_seconds: f64, report: &mut Report) {
        let Some(measurement) = &self.measurement else {
            return;
        };
        let mut figures = Vec::new();
        measurement.run_figures(wall_seconds, &mut figures);
        for (field, value) in measurement.declared().fields.iter().zip(figures) {
            if field.is_key() {
                field.set_run(report, value);
            }
        }
    }
}

/// What calls read of the counters without a lock: the counters as last given, the
/// measurement's clock of the calling thread and the reuse window within which a
/// thread's clock is not read again. Its methods on the call path are in [`marks`].
#[derive(Debug)]
pub(crate) struct CallCounters {
    published: Published,
    /// The clock of the calling thread's own share (its CPU time), a fake in tests.
    pub(super) thread_clock: fn() -> Option<u64>,
    /// Clock ticks in the boundary reuse window.
    reuse_ticks: u64,
}

impl CallCounters {
    /// With `thread_clock` and a reuse window of `reuse_ticks`.
    pub(super) fn new(thread_clock: fn() -> Option<u64>, reuse_ticks: u64) -> CallCounters {
        CallCounters {
            published: Published::default(),
            thread_clock,
            reuse_ticks,
        }
    }

    /// Publishes `counters`, if any.
    pub(super) fn publish(&self, counters: Option<Counters>) {
        if let Some(counters) = counters {
            self.published.store(&counters.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use crate::memory::{Descendant, TreeReading, Usage};
    use crate::report::CpuIo;

    fn usage(cpu_ms: u64, written: u64) -> Usage {
        Usage {
            user_micros: cpu_ms * 1_000,
            write_bytes: written,
            ..Usage::ZERO
        }
    }

    #[test]
    fn a_stage_gets_the_trees_growth_while_each_call_was_open() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_usage(usage(100, 0));
        let outer = rig.recorder.enter(&main, "outer".into());
        rig.advance_micros(2_000);
        rig.set_usage(usage(600, 4096));
        rig.set_thread_cpu(Some(300_000));
        let inner = rig.recorder.enter(&main, "inner".into());
        rig.advance_micros(500_000);
        rig.set_usage(usage(1_600, 8192));
        rig.set_thread_cpu(Some(800_000));
        rig.recorder.exit(&main, inner);
        rig.advance_micros(2_000);
        rig.recorder.exit(&main, outer);
        let report = rig.recorder.snapshot();
        let inner = &report.stage("outer/inner").unwrap().cpu_io;
        assert_eq!(inner.cpu_user_seconds, Some(1.0));
        assert_eq!(inner.io_write_bytes, Some(4096));
        assert_eq!(inner.cpu_cores, Some(2.0));
        assert_eq!(inner.cpu_thread_seconds, Some(0.5));
        let outer = &report.stage("outer").unwrap().cpu_io;
        assert_eq!(outer.cpu_user_seconds, Some(1.5));
        assert_eq!(report.cpu_io.cpu_user_seconds, Some(1.5));
        assert_eq!(report.io_missing, None);
    }

    #[test]
    fn an_open_call_counts_up_to_the_newest_reading() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_usage(usage(0, 0));
        let call = rig.recorder.enter(&main, "open".into());
        rig.advance_micros(100_000);
        rig.set_usage(usage(50, 0));
        rig.sample(TreeReading {
            own_usage: Some(usage(50, 0)),
            parent_rss: Some(1 << 20),
            tree_rss: Some(1 << 20),
            process_count: 1,
            ..TreeReading::default()
        });
        let report = rig.recorder.snapshot();
        assert_eq!(
            report.stage("open").unwrap().cpu_io.cpu_user_seconds,
            Some(0.05)
        );
        rig.recorder.exit(&main, call);
    }

    /// The marks of the frames open on `slot`'s thread, and how many marks it keeps.
    fn frame_marks(slot: &crate::recorder::ThreadSlot) -> (Vec<u16>, usize) {
        let thread = slot.lock();
        let marks = thread.stack.iter().map(|frame| frame.mark).collect();
        (marks, thread.marks.marks.len())
    }

    /// The stage paths' user CPU seconds in `rig`'s report.
    fn user_seconds(rig: &Rig, paths: &[&str]) -> Vec<Option<f64>> {
        let report = rig.recorder.snapshot();
        paths
            .iter()
            .map(|path| report.stage(path).unwrap().cpu_io.cpu_user_seconds)
            .collect()
    }

    #[test]
    fn nested_calls_with_no_reading_between_share_one_mark() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_usage(usage(100, 0));
        rig.set_thread_cpu(Some(1_000));
        rig.advance_micros(2_000);
        let outer = rig.recorder.enter(&main, "outer".into());
        let inner = rig.recorder.enter(&main, "inner".into());
        assert_eq!(frame_marks(&main), ([0, 0].into(), 1));
        rig.advance_micros(2_000);
        rig.set_usage(usage(300, 0));
        rig.set_thread_cpu(Some(201_000));
        // Out of order: the inner call keeps the mark it shared.
        rig.recorder.exit(&main, outer);
        assert_eq!(frame_marks(&main), ([0].into(), 1));
        // Still open, the inner call counts up to the newest reading.
        let open = user_seconds(&rig, &["outer", "outer/inner"]);
        assert_eq!(open, [Some(0.2), Some(0.2)]);
        rig.advance_micros(2_000);
        rig.set_usage(usage(600, 0));
        rig.set_thread_cpu(Some(501_000));
        rig.recorder.exit(&main, inner);
        assert_eq!(frame_marks(&main), ([].into(), 1));
        let report = rig.recorder.snapshot();
        let inner = &report.stage("outer/inner").unwrap().cpu_io;
        assert_eq!(inner.cpu_user_seconds, Some(0.5));
        assert_eq!(inner.cpu_thread_seconds, Some(0.5));
        let outer = &report.stage("outer").unwrap().cpu_io;
        assert_eq!(outer.cpu_user_seconds, Some(0.2));
        assert_eq!(outer.cpu_thread_seconds, Some(0.2));
    }

    #[test]
    fn a_mark_taken_off_below_the_top_leaves_the_ones_above_theirs() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_usage(usage(100, 0));
        rig.advance_micros(2_000);
        let outer = rig.recorder.enter(&main, "outer".into());
        rig.advance_micros(2_000);
        rig.set_usage(usage(200, 0));
        let inner = rig.recorder.enter(&main, "inner".into());
        let third = rig.recorder.enter(&main, "third".into());
        assert_eq!(frame_marks(&main), ([0, 1, 1].into(), 2));
        rig.advance_micros(2_000);
        rig.set_usage(usage(400, 0));
        rig.recorder.exit(&main, outer);
        assert_eq!(frame_marks(&main), ([1, 1].into(), 2));
        rig.advance_micros(2_000);
        rig.set_usage(usage(500, 0));
        rig.recorder.exit(&main, third);
        rig.advance_micros(2_000);
        rig.set_usage(usage(700, 0));
        rig.recorder.exit(&main, inner);
        let paths = ["outer", "outer/inner", "outer/inner/third"];
        assert_eq!(
            user_seconds(&rig, &paths),
            [Some(0.3), Some(0.5), Some(0.3)]
        );
    }

    #[test]
    fn a_call_after_one_at_its_depth_takes_its_mark_only_with_the_same_figures() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_usage(usage(100, 0));
        rig.advance_micros(2_000);
        let first = rig.recorder.enter(&main, "first".into());
        rig.recorder.exit(&main, first);
        assert_eq!(frame_marks(&main), ([].into(), 1));
        // No reading since: the kept mark is taken up again.
        let second = rig.recorder.enter(&main, "second".into());
        assert_eq!(frame_marks(&main), ([0].into(), 1));
        rig.advance_micros(2_000);
        rig.set_usage(usage(250, 0));
        rig.recorder.exit(&main, second);
        // A reading since: the kept mark is written anew.
        let third = rig.recorder.enter(&main, "third".into());
        assert_eq!(frame_marks(&main), ([0].into(), 1));
        rig.advance_micros(2_000);
        rig.set_usage(usage(600, 0));
        rig.recorder.exit(&main, third);
        let paths = ["first", "second", "third"];
        assert_eq!(
            user_seconds(&rig, &paths),
            [Some(0.0), Some(0.15), Some(0.35)]
        );
    }

    #[test]
    fn a_long_open_call_keeps_its_mark_and_at_most_one_more() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_usage(usage(0, 0));
        rig.advance_micros(2_000);
        let outer = rig.recorder.enter(&main, "outer".into());
        for step in 1..=100 {
            // A reading before each inner call: each enters with new figures.
            rig.advance_micros(2_000);
            rig.set_usage(usage(step * 10, 0));
            let inner = rig.recorder.enter(&main, "inner".into());
            assert_eq!(frame_marks(&main), ([0, 1].into(), 2));
            rig.advance_micros(2_000);
            rig.set_usage(usage(step * 10 + 5, 0));
            rig.recorder.exit(&main, inner);
        }
        rig.recorder.exit(&main, outer);
        // 100 calls of 5 ms of user CPU each; the outer call saw all 1 005 ms.
        let seconds = user_seconds(&rig, &["outer", "outer/inner"]);
        let close = |figure: Option<f64>, want: f64| (figure.unwrap() - want).abs() < 1e-9;
        assert!(
            close(seconds[0], 1.005) && close(seconds[1], 0.5),
            "{seconds:?}"
        );
    }

    #[test]
    fn an_exited_descendant_is_counted_once() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_usage(usage(0, 0));
        let call = rig.recorder.enter(&main, "children".into());
        rig.advance_micros(100_000);
        // Sampled live with 300 ms.
        rig.sample(TreeReading {
            own_usage: Some(usage(0, 0)),
            parent_rss: Some(1 << 20),
            tree_rss: Some(1 << 20),
            process_count: 2,
            descendants: vec![Descendant {
                pid: 7,
                usage: usage(300, 0),
                ..Descendant::default()
            }],
            ..TreeReading::default()
        });
        rig.advance_micros(100_000);
        // Reaped with 400 ms in all: RUSAGE_CHILDREN has it, the live sum does not.
        rig.set_usage(usage(400, 0));
        rig.set_children_changed(crate::memory::LiveChildren::default());
        rig.set_gone(true);
        rig.recorder.exit(&main, call);
        let report = rig.recorder.snapshot();
        let cpu = report.stage("children").unwrap().cpu_io.cpu_user_seconds;
        assert_eq!(cpu, Some(0.4));
    }

    #[test]
    fn the_first_reading_at_a_boundary_says_the_figures_are_read() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_usage(usage(100, 0));
        let call = rig.recorder.enter(&main, "first".into());
        // No sample, and no boundary reading but the entry's.
        let report = rig.recorder.snapshot();
        assert_eq!(report.io_missing, None);
        assert_eq!(report.cpu_io.cpu_user_seconds, Some(0.0));
        rig.recorder.exit(&main, call);
    }

    #[test]
    fn without_readings_the_figures_are_null_and_say_why() {
        let rig = Rig::new();
        let main = rig.thread();
        let call = rig.recorder.enter(&main, "none".into());
        rig.recorder.exit(&main, call);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("none").unwrap().cpu_io, CpuIo::default());
        assert!(report.io_missing.unwrap().contains("not read"));
    }
}
