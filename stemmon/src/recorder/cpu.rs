//! CPU and I/O per stage and for the run (the book's `cpu-io.md`).
//!
//! The tree's counters (user and system time, storage bytes read and written, major
//! faults) are one cumulative figure, [`Published`], raised at every fresh boundary
//! reading (this process's `RUSAGE_SELF`, its reaped children's `RUSAGE_CHILDREN`, the
//! live descendants as last sampled, those found exited left out) and at every full
//! sample (every live process's `stat` and `io` read anew). Each field only rises: a
//! descendant that exited and is not reaped yet leaves the live sum before its figures
//! reach `RUSAGE_CHILDREN`, and the dip this would make is held until they do.
//!
//! A call notes the figure at its entry and adds the difference at its exit (the
//! published figure is read without a lock), so a stage's figures are the tree's
//! growth while each of its calls was open, summed over calls: exact to the boundary
//! reuse window (a reused reading is up to 1 ms old) and, for what live descendants
//! did, to the sampling interval (their `stat` is read at samples; what they did since
//! shows at the next sample or when they are reaped). Two calls of one stage open at
//! once on two threads each count the whole tree's growth, as `wall_seconds` counts
//! each call's time: `cpu_cores` (their sum over the sum of the wall times) is still
//! the cores the tree used while the stage was open.
//!
//! The thread's own CPU (`RUSAGE_THREAD`) is read at a call's entry when the thread's
//! last reading is older than the reuse window, and at every exit that takes the
//! shared state (a call longer than the window, an error, a first completion), so a
//! call's `cpu_thread_seconds` is exact to 1 ms of its thread's CPU. An async call
//! counts the CPU of the thread that opened it between its open and its close (other
//! work of that thread meanwhile included), and, closed on another thread, up to its
//! thread's last reading.

use super::{seconds, Recorder, State};
use crate::memory::{Descendant, SelfReading, TreeReading, Usage};
use crate::report::CpuIo;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

mod marks;

pub(crate) use super::tally::{CallCpu, Clock};

/// The tree's counters as last read, for every call's entry and exit to read without
/// a lock. Written under the state lock, at most about once a millisecond; the fields
/// are read one by one, so a reader may see one field of a newer reading than another
/// (each is still a figure the tree reached, so no difference is ever negative).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Published {
    user: AtomicU64,
    system: AtomicU64,
    read: AtomicU64,
    write: AtomicU64,
    major: AtomicU64,
    /// Bumped at every store: a call whose exit sees the number its entry saw had no
    /// growth to count, and skips the arithmetic.
    generation: AtomicU64,
    /// Some reading has been published.
    read_once: AtomicBool,
}

/// A timeline point's cores are measured over at least this long (seconds): a
/// descendant's CPU comes in 10 ms clock ticks, so one tick moves a point by at most
/// 0.1 core.
const MIN_CORES_SECONDS: f64 = 0.1;

impl Published {
    #[inline]
    fn load(&self) -> Usage {
        Usage {
            user_micros: self.user.load(Ordering::Relaxed),
            system_micros: self.system.load(Ordering::Relaxed),
            read_bytes: self.read.load(Ordering::Relaxed),
            write_bytes: self.write.load(Ordering::Relaxed),
            major_faults: self.major.load(Ordering::Relaxed),
        }
    }

    fn store(&self, usage: Usage) {
        self.user.store(usage.user_micros, Ordering::Relaxed);
        self.system.store(usage.system_micros, Ordering::Relaxed);
        self.read.store(usage.read_bytes, Ordering::Relaxed);
        self.write.store(usage.write_bytes, Ordering::Relaxed);
        self.major.store(usage.major_faults, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Release);
        self.read_once.store(true, Ordering::Relaxed);
    }

    #[inline]
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// The tree's counters as the engine composes them (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct TreeCpu {
    /// The first figure published: the run's figures count from it.
    start: Option<Usage>,
    /// The newest figure published (each field the highest yet).
    now: Option<Usage>,
    /// The root's own counters, where it is not this process.
    root: Usage,
    /// The live descendants' counters as last sampled, the exited ones left out.
    live: Usage,
    /// Seconds and CPU microseconds at the last sample: the timeline's `cpu_cores`.
    last_sample: Option<(f64, u64)>,
    /// Why some process's I/O could not be read (the first reason).
    pub(crate) io_missing: Option<String>,
}

impl TreeCpu {
    fn publish(&mut self, raw: Usage) -> Usage {
        let now = self.now.map_or(raw, |now| now.max(raw));
        self.start.get_or_insert(raw);
        self.now = Some(now);
        now
    }

    /// Takes in a fresh boundary reading; `changed`: some of `descendants` may have
    /// exited, and `gone` says which. Returns the figure to publish.
    pub(super) fn boundary(
        &mut self,
        reading: &SelfReading,
        changed: bool,
        descendants: &[Descendant],
        gone: &[bool],
    ) -> Option<Usage> {
        let own = reading.usage?;
        if changed {
            self.live = descendants
                .iter()
                .enumerate()
                .filter(|(index, _)| !gone.get(*index).copied().unwrap_or(false))
                .fold(Usage::ZERO, |sum, (_, d)| sum.plus(d.usage));
        }
        Some(self.publish(own.plus(self.root).plus(self.live)))
    }

    /// Takes in a full sample at `elapsed` seconds; returns the tree's CPU use in cores
    /// since the previous sample (`None` for the first, or where CPU is not read).
    pub(super) fn sampled(&mut self, reading: &TreeReading, elapsed: f64) -> Option<f64> {
        if self.io_missing.is_none() {
            self.io_missing.clone_from(&reading.io_missing);
        }
        let own = reading.own_usage?;
        self.root = reading.root_usage;
        self.live = reading
            .descendants
            .iter()
            .fold(Usage::ZERO, |sum, d| sum.plus(d.usage));
        // A root that is not this process (`stemmon run`'s command, and the tree under
        // it) started with the run: all it did is the run's, even where it was done
        // (or the command ended) before the first sample.
        if self.start.is_none() && reading.root_usage != Usage::ZERO {
            self.start = Some(own);
        }
        let now = self.publish(own.plus(self.root).plus(self.live));
        let cpu = now.cpu_micros();
        let Some((at, before)) = self.last_sample else {
            self.last_sample = Some((elapsed, cpu));
            return None;
        };
        let wall = elapsed - at;
        if wall < MIN_CORES_SECONDS {
            // Over a few tens of milliseconds (fast sampling, the sample at `finish`)
            // one 10 ms tick would read as a third of a core or more. The interval is
            // carried into the next point.
            return None;
        }
        self.last_sample = Some((elapsed, cpu));
        Some(cpu.saturating_sub(before) as f64 / 1e6 / wall)
    }

    /// The newest figure, if any was read.
    pub(super) fn now(&self) -> Option<Usage> {
        self.now
    }

    /// The run's figures over `wall_seconds`.
    pub(super) fn run_report(&self, wall_seconds: f64) -> CpuIo {
        let calls = CallCpu {
            tree: self
                .now
                .unwrap_or_default()
                .minus(self.start.unwrap_or_default()),
            ..CallCpu::ZERO
        };
        let mut report = self.report(self.now.map(|_| calls), wall_seconds);
        // The threads' own figure belongs to stages: the run's is its tree's.
        report.cpu_thread_seconds = None;
        report
    }

    /// The report's figures of `calls` over `wall_seconds` (`None`: CPU not read).
    pub(super) fn report(&self, calls: Option<CallCpu>, wall_seconds: f64) -> CpuIo {
        let Some(calls) = calls.filter(|_| self.now.is_some()) else {
            return CpuIo::default();
        };
        let user = seconds(calls.tree.user_micros * 1_000);
        let system = seconds(calls.tree.system_micros * 1_000);
        let io = self.io_missing.is_none();
        {
            let mut built = CpuIo::default();
            built.cpu_user_seconds = Some(user);
            built.cpu_system_seconds = Some(system);
            built.cpu_cores = (wall_seconds > 0.0).then(|| (user + system) / wall_seconds);
            built.cpu_thread_seconds = calls
                .thread_read
                .then(|| seconds(calls.thread_micros * 1_000));
            built.io_read_bytes = io.then_some(calls.tree.read_bytes);
            built.io_write_bytes = io.then_some(calls.tree.write_bytes);
            built.major_faults = Some(calls.tree.major_faults);
            built
        }
    }

    /// Why the report has no I/O figures, if it has none.
    pub(super) fn io_missing(&self) -> Option<String> {
        if self.now.is_none() {
            return Some(
                "CPU and I/O were not read (they are read from getrusage and /proc, on Linux)"
                    .to_owned(),
            );
        }
        self.io_missing.clone()
    }
}

impl Recorder {
    /// Records a child of this process that exited (read before it was reaped) in the
    /// report's `processes`.
    pub(crate) fn child_exited(&self, child: &Descendant) {
        let elapsed = self.elapsed(self.clock.raw());
        let mut state = self.lock();
        if state.ended.is_none() {
            state.processes.saw(child, elapsed);
        }
    }

    /// Publishes `usage`, the tree's figure now, for calls to read.
    pub(super) fn publish_cpu(&self, usage: Option<Usage>) {
        if let Some(usage) = usage {
            self.cpu_now.store(usage);
        }
    }
}

impl State {
    /// The report's figures of record `id`, its open calls' `open` included, over its
    /// `wall_seconds`.
    pub(super) fn stage_cpu(&self, id: usize, open: Option<&CallCpu>, wall_seconds: f64) -> CpuIo {
        let Some(record) = self.records.list.get(id) else {
            return CpuIo::default();
        };
        let mut calls = record.cpu;
        if let Some(open) = open {
            calls.add(open);
        }
        self.cpu.report(Some(calls), wall_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use super::*;

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
        (marks, thread.cpu.marks.len())
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
