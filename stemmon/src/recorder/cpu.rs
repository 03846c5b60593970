//! CPU and I/O per stage and for the run (SPEC §12).
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

use super::thread::ThreadState;
use super::{seconds, Recorder, State};
use crate::memory::{Descendant, SelfReading, TreeReading, Usage};
use crate::report::CpuIo;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// At most this many calls per thread note their entry figures; deeper ones (only a
/// runaway stack reaches this) count nothing.
const MAX_OPEN_MARKS: usize = 65_536;

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

/// The key of a sync call's entry figures (its frame's `seq`).
#[inline]
pub(crate) fn sync_key(seq: u32) -> u64 {
    u64::from(seq) << 1
}

/// The key of an async call's entry figures (its `OpenCall::seq`).
#[inline]
pub(crate) fn async_key(seq: u64) -> u64 {
    (seq << 1) | 1
}

/// What an open call noted at its entry.
#[derive(Clone, Copy, Debug)]
struct OpenMark {
    key: u64,
    record: u32,
    /// [`Published`]'s generation when `tree` was read (read before it).
    generation: u64,
    tree: Usage,
    /// Its thread's CPU clock, [`UNREAD`] where it cannot be read.
    thread: u64,
}

/// A timeline point's cores are measured over at least this long (seconds).
const MIN_CORES_SECONDS: f64 = 0.02;

/// A thread clock that could not be read (another platform).
const UNREAD: u64 = u64::MAX;

/// One thread's CPU clock as last read, and the entry figures of its open calls.
#[derive(Debug, Default)]
pub(crate) struct ThreadCpu {
    /// Clock ticks of the last `RUSAGE_THREAD` reading (0: never read).
    at: u64,
    /// That reading, in microseconds ([`UNREAD`] where it cannot be read).
    micros: u64,
    open: Vec<OpenMark>,
}

impl ThreadCpu {
    /// The clock for a call's entry or exit at `now`, read anew when `clock` says so or
    /// when the last reading is older than `window` ticks.
    #[inline(always)]
    fn clock(&mut self, now: u64, clock: Clock, window: u64, read: fn() -> Option<u64>) -> u64 {
        let stale = match clock {
            Clock::Kept => false,
            Clock::Fresh => true,
            Clock::Window => now.wrapping_sub(self.at) >= window,
        };
        if stale {
            self.refresh(now, read);
        }
        self.micros
    }

    #[cold]
    fn refresh(&mut self, now: u64, read: fn() -> Option<u64>) {
        self.micros = read().unwrap_or(UNREAD);
        self.at = now;
    }
}

/// How an exit gets its thread's CPU clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// Read now (the exit takes the shared state anyway).
    Fresh,
    /// Reused when read within the reuse window.
    Window,
    /// Never read: the call closes on another thread than its own.
    Kept,
}

/// The figures of some calls: the tree's growth while they were open, and their
/// threads' CPU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallCpu {
    pub(crate) tree: Usage,
    pub(crate) thread_micros: u64,
    /// Some call's thread CPU was read at both ends.
    pub(crate) thread_read: bool,
}

impl CallCpu {
    /// Nothing counted.
    pub(crate) const ZERO: CallCpu = CallCpu {
        tree: Usage::ZERO,
        thread_micros: 0,
        thread_read: false,
    };

    /// Adds `other`'s figures.
    #[inline]
    pub(crate) fn add(&mut self, other: &CallCpu) {
        self.tree = self.tree.plus(other.tree);
        self.thread_micros = self.thread_micros.wrapping_add(other.thread_micros);
        self.thread_read |= other.thread_read;
    }
}

impl Default for CallCpu {
    fn default() -> CallCpu {
        CallCpu::ZERO
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
        let now = self.publish(own.plus(self.root).plus(self.live));
        let cpu = now.cpu_micros();
        let Some((at, before)) = self.last_sample else {
            self.last_sample = Some((elapsed, cpu));
            return None;
        };
        let wall = elapsed - at;
        if wall < MIN_CORES_SECONDS {
            // Descendants' CPU comes in clock ticks (10 ms): over a few milliseconds (the
            // sample at `finish`, one just after a boundary) one tick would read as
            // cores. The interval is carried into the next point.
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
        CpuIo {
            cpu_user_seconds: Some(user),
            cpu_system_seconds: Some(system),
            cpu_cores: (wall_seconds > 0.0).then(|| (user + system) / wall_seconds),
            cpu_thread_seconds: calls
                .thread_read
                .then(|| seconds(calls.thread_micros * 1_000)),
            io_read_bytes: io.then_some(calls.tree.read_bytes),
            io_write_bytes: io.then_some(calls.tree.write_bytes),
            major_faults: Some(calls.tree.major_faults),
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

    /// Notes the figures at the entry of the call `key` of `record` on `thread`.
    #[inline]
    pub(super) fn cpu_enter(&self, thread: &mut ThreadState, key: u64, record: u32, now: u64) {
        let cpu = &mut thread.cpu;
        if cpu.open.len() >= MAX_OPEN_MARKS {
            return;
        }
        let generation = self.cpu_now.generation();
        let tree = self.cpu_now.load();
        let micros = cpu.clock(now, Clock::Window, self.reuse_ticks, self.thread_cpu);
        cpu.open.push(OpenMark {
            key,
            record,
            generation,
            tree,
            thread: micros,
        });
    }

    /// Adds to `record`'s counters on `thread` the growth since the call `key` entered.
    #[inline]
    pub(super) fn cpu_exit(&self, thread: &mut ThreadState, key: u64, now: u64, clock: Clock) {
        let cpu = &mut thread.cpu;
        let Some(last) = cpu.open.last() else {
            return;
        };
        if last.key != key {
            return self.cpu_exit_below(thread, key, now, clock);
        }
        let (generation, entry) = (last.generation, last.thread);
        let micros = cpu.clock(now, clock, self.reuse_ticks, self.thread_cpu);
        // The common case of a short call: no reading in between, nothing to count.
        if micros == entry && self.cpu_now.generation() == generation {
            cpu.open.pop();
            return;
        }
        if let Some(mark) = cpu.open.pop() {
            self.cpu_count(thread, &mark, micros);
        }
    }

    /// [`Recorder::cpu_exit`] of a call below the top of the thread's marks (an async
    /// call, a guard dropped out of order).
    #[cold]
    fn cpu_exit_below(&self, thread: &mut ThreadState, key: u64, now: u64, clock: Clock) {
        let cpu = &mut thread.cpu;
        let Some(index) = cpu.open.iter().rposition(|mark| mark.key == key) else {
            return;
        };
        let mark = cpu.open.remove(index);
        let micros = cpu.clock(now, clock, self.reuse_ticks, self.thread_cpu);
        self.cpu_count(thread, &mark, micros);
    }

    /// Adds the growth since `mark` to its record's counters on `thread`.
    fn cpu_count(&self, thread: &mut ThreadState, mark: &OpenMark, micros: u64) {
        let tree = self.cpu_now.load().minus(mark.tree);
        let thread_read = micros != UNREAD && mark.thread != UNREAD;
        let thread_micros = if thread_read {
            micros.saturating_sub(mark.thread)
        } else {
            0
        };
        thread.delta(mark.record).cpu.add(&CallCpu {
            tree,
            thread_micros,
            thread_read,
        });
    }

    /// The figures of the calls open on every thread now, by record: the tree's
    /// growth since each entered, and its thread's CPU up to its last reading.
    pub(super) fn open_cpu(&self) -> Vec<CallCpu> {
        let mut open = Vec::new();
        if !self.cpu_now.read_once.load(Ordering::Relaxed) {
            return open;
        }
        let now = self.cpu_now.load();
        for slot in self.lock_threads().iter() {
            let thread = slot.lock();
            for mark in &thread.cpu.open {
                let index = mark.record as usize;
                if open.len() <= index {
                    open.resize(index + 1, CallCpu::ZERO);
                }
                let thread_read = thread.cpu.micros != UNREAD && mark.thread != UNREAD;
                let thread_micros = if thread_read {
                    thread.cpu.micros.saturating_sub(mark.thread)
                } else {
                    0
                };
                open[index].add(&CallCpu {
                    tree: now.minus(mark.tree),
                    thread_micros,
                    thread_read,
                });
            }
        }
        open
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
