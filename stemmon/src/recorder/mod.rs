//! The engine: records stage calls from every thread, applies samples and boundary
//! readings, and takes snapshots into a [`Report`](crate::Report).
//!
//! Data flows one way: threads own their stacks and counters ([`thread`]); a merge
//! moves counters into the shared [`records`] at most about once a millisecond per
//! thread, at a boundary reading ([`boundary`]), on an error or a long call; full
//! samples ([`sample`]) count toward every open stage; async calls ([`calls`]) are
//! open apart from any thread's stack, kept by the thread that opened them; log lines are handed to the sampler thread as
//! [`Event`]s; [`snapshot`] turns it all into a report. This file is the hot path:
//! `enter`, `exit` and the merge.
//!
//! The engine does no I/O of its own: the boundary reader and the tree reader are
//! given to it, and reports, metrics and warnings leave through
//! [`Publisher`](crate::publish::Publisher). A failure is kept here as data.

mod boundary;
mod calls;
mod cpu;
mod events;
mod extra;
#[cfg(test)]
mod fake;
mod heap;
mod owned;
mod processes;
mod records;
mod sample;
mod snapshot;
mod spans;
mod tally;
mod thread;
mod timeline;

pub(crate) use calls::Parent;
pub(crate) use events::{Event, Line, OpenStage};
pub(crate) use records::{short_type_name, StageName};
pub(crate) use tally::OpenCall;
pub(crate) use thread::ThreadSlot;

use crate::config::Config;
use crate::memory::SelfReader;
use crate::report::HighWaterMarks;
use boundary::{Boundary, Edge};
use records::{Records, Total};
use sample::Samples;
use spans::Spans;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use thread::{ThreadState, NO_PARENT};

/// A stage-boundary reading younger than this is reused: it keeps a hot stage cheap.
const BOUNDARY_REUSE_NANOS: u64 = 1_000_000;
/// Stage completions are logged the first time and then only when this long or longer;
/// calls this long are always kept in `spans`.
const LONG_CALL_NANOS: u64 = 100_000_000;

static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

/// A value on a cache line of its own, so that writing it does not slow readers of
/// the values beside it.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// What the report says about the run itself, fixed at the start.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunInfo {
    /// The name of the tree reader (`sampler`).
    pub(crate) sampler: &'static str,
    /// Which high-water marks are read.
    pub(crate) marks: HighWaterMarks,
    /// `<os>-<kernel>-<arch>`.
    pub(crate) platform: String,
    /// This machine's name.
    pub(crate) host: String,
    /// Who this process is in a larger job.
    pub(crate) labels: BTreeMap<String, String>,
    /// This run's identity (the report's `run_id`).
    pub(crate) run_id: String,
    /// The wall clock at the start, in seconds since the Unix epoch.
    pub(crate) start_unix_seconds: f64,
}

/// The engine's own failures, kept as data for the report (the book's `guide/threads.md`): the publisher
/// warns about them once, and keeps its own (writes, exports).
#[derive(Debug, Default)]
pub(crate) struct Failures {
    /// The latest failed tree sample.
    pub(crate) sampling: Option<String>,
}

/// How recording ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// Clock ticks at the end: snapshots stop the clock there.
    pub(crate) at: u64,
    /// The run's own failure, if any (`"panic"`, a signal, `main`'s error).
    pub(crate) error: Option<String>,
    /// The exit code of the command `stemmon run` watched.
    pub(crate) exit_code: Option<i32>,
}

/// State behind the recorder's one lock, one part per job.
pub(crate) struct State {
    /// Every stage path's aggregate.
    pub(crate) records: Records,
    /// The whole run's counters and peaks.
    pub(crate) total: Total,
    /// Full samples: the latest, the recent ones, the timeline and the sampler's health.
    pub(crate) samples: Samples,
    /// Stage-boundary readings and the intervals of the kernel's marks they close.
    boundary: Boundary,
    /// Calls kept one by one.
    pub(crate) spans: Spans,
    /// The monitor's own failures.
    pub(crate) failures: Failures,
    /// The tree's CPU and I/O counters (the book's `cpu-io.md`).
    cpu: cpu::TreeCpu,
    /// The tree's processes seen during the run.
    processes: processes::Processes,
    /// Set once finished.
    pub(crate) ended: Option<Ended>,
    /// The `Display` text of `main`'s `Err`, where it has one.
    pub(crate) run_message: Option<String>,
    /// The heap sweeps' memory of every thread (the book's `heap.md`).
    heap: heap::HeapSweep,
    /// The start, in seconds since boot (the clock of the processes' start times),
    /// where the platform has it.
    boot_origin: Option<f64>,
    /// The measurement sources' figures and sections.
    extra: extra::Extra,
}

/// One monitor's engine, shared by its handle, the sampler and every thread it covers.
pub(crate) struct Recorder {
    /// Tells this monitor's guards from those of an earlier one.
    pub(crate) epoch: u64,
    pub(crate) config: Config,
    /// What the report says about the run.
    pub(crate) info: RunInfo,
    /// Times every call: the TSC where reliable, a mock in tests.
    pub(crate) clock: crate::clock::Clock,
    /// Clock ticks in `BOUNDARY_REUSE_NANOS`: the hot path compares raw ticks.
    reuse_ticks: u64,
    /// Clock ticks at the start.
    pub(crate) origin: u64,
    /// The root of the sampled tree.
    pub(crate) pid: u32,
    /// Set once finished: every later call is a no-op.
    ended: AtomicBool,
    /// Ticks of the newest boundary reading.
    boundary_at: Padded<AtomicU64>,
    /// The tree's CPU and I/O counters as last read, for calls to read without a lock.
    cpu_now: cpu::Published,
    /// The calling thread's CPU time (`RUSAGE_THREAD`), a fake in tests.
    thread_cpu: fn() -> Option<u64>,
    /// The record open on the monitor's own thread, plus one (0: none): where a stage
    /// entered on an idle thread nests (fork-join). Written by that thread only.
    owner_top: Padded<AtomicU32>,
    /// Every thread that recorded a stage, the monitor's own first.
    threads: Mutex<Vec<Arc<ThreadSlot>>>,
    state: Mutex<State>,
    events: Mutex<Option<Sender<Event>>>,
}

/// Nanoseconds as seconds.
pub(crate) fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

/// What `enter` hands the guard: the call's sequence number, or that it was folded
/// into the open call of the same stage it recurses into.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entered {
    /// A frame of its own, with this sequence number.
    Pushed(u32),
    /// Counted in the open frame `seq` of the same stage (recursion, direct or not).
    Folded(u32),
    /// Not recorded (no monitor, or it had ended).
    Ignored,
}

impl Recorder {
    /// A recorder that reads the parent at stage boundaries with `self_reader` and
    /// times everything with `clock` (a mock one in tests).
    pub(crate) fn new(
        config: Config,
        info: RunInfo,
        self_reader: Box<dyn SelfReader>,
        clock: crate::clock::Clock,
    ) -> Recorder {
        let probe = 1u64 << 40;
        let nanos_per_probe = clock.delta_as_nanos(0, probe).max(1) as f64;
        let ticks = |nanos: u64| (nanos as f64 * probe as f64 / nanos_per_probe) as u64;
        let reuse_ticks = ticks(BOUNDARY_REUSE_NANOS);
        let origin = clock.raw();
        let boot_origin = crate::sys::boot_seconds();
        Recorder {
            epoch: NEXT_EPOCH.fetch_add(1, Ordering::Relaxed),
            info,
            reuse_ticks,
            origin,
            clock,
            pid: config.root.unwrap_or_else(std::process::id),
            ended: AtomicBool::new(false),
            // No reading yet: one reuse window before the start, so the first is fresh.
            boundary_at: Padded(AtomicU64::new(origin.wrapping_sub(reuse_ticks))),
            owner_top: Padded(AtomicU32::new(0)),
            cpu_now: cpu::Published::default(),
            thread_cpu: crate::sys::thread_cpu_micros,
            threads: Mutex::new(Vec::new()),
            state: Mutex::new(State {
                records: Records::default(),
                total: Total::default(),
                samples: Samples::new(config.max_samples),
                boundary: Boundary::new(self_reader),
                spans: Spans::new(),
                failures: Failures::default(),
                cpu: cpu::TreeCpu::default(),
                processes: processes::Processes::default(),
                ended: None,
                run_message: None,
                heap: heap::HeapSweep::new(),
                boot_origin,
                extra: extra::Extra::default(),
            }),
            events: Mutex::new(None),
            config,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if it ever did, the data is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_threads(&self) -> MutexGuard<'_, Vec<Arc<ThreadSlot>>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the monitor has finished.
    #[inline]
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    /// Seconds from the start to `ticks`.
    pub(crate) fn elapsed(&self, ticks: u64) -> f64 {
        seconds(self.clock.delta_as_nanos(self.origin, ticks))
    }

    fn ticks_seconds(&self, ticks: u64) -> f64 {
        seconds(self.clock.delta_as_nanos(0, ticks))
    }

    /// Declares the measurement sources whose readings samples will bring.
    pub(crate) fn set_sources(&self, sources: &[Box<dyn crate::sources::Source>]) {
        self.lock().extra = extra::Extra::of(sources);
    }

    /// Takes the sources' sections as they are now (once opened, before any reading):
    /// a report says why the GPU is not read even if no sample read it.
    pub(crate) fn take_sections(&self, sources: &mut [Box<dyn crate::sources::Source>]) {
        let sections: Vec<_> = sources.iter_mut().filter_map(|s| s.section()).collect();
        let mut state = self.lock();
        for (key, value) in sections {
            state.extra.section(key, value);
        }
    }

    /// Registers the calling thread; the first one registered is the monitor's own.
    pub(crate) fn register_thread(&self) -> Arc<ThreadSlot> {
        let mut threads = self.lock_threads();
        let current = std::thread::current();
        let slot = Arc::new(ThreadSlot::new(
            threads.len() as u32,
            current.name().map(str::to_owned),
        ));
        threads.push(Arc::clone(&slot));
        slot
    }

    /// Opens a call of `name` on `slot`'s thread.
    #[inline]
    pub(crate) fn enter(&self, slot: &ThreadSlot, name: StageName) -> Entered {
        let _engine = crate::heap::attach::pause(); // the record is no test's heap
        let now = self.clock.raw();
        let mut thread = slot.lock();
        if self.is_ended() {
            return Entered::Ignored;
        }
        // Recursion, direct or not, folds into the open call: counted, timed once.
        if let Some(index) = thread.open_named(&name) {
            let frame = &mut thread.stack[index];
            frame.folded += 1;
            let (record, seq) = (frame.record, frame.seq);
            thread.delta(record).calls += 1;
            return Entered::Folded(seq);
        }
        let record = self.record_here(slot, &mut thread, &name, now);
        let seq = thread.push(record, now);
        if slot.id == 0 {
            self.owner_top.0.store(record + 1, Ordering::Relaxed);
        }
        self.count_entry(&mut thread, record, now);
        // The CPU mark first: a list it grows is the engine's, not the call's heap.
        self.cpu_enter(&mut thread, now);
        heap::entered(&mut thread, slot.id != 0);
        Entered::Pushed(seq)
    }

    /// Counts a call of `record` entered at `now` on `thread`, a sync call or an async
    /// one: a boundary reading under 1 ms old is reused; else the thread's counters are
    /// merged and the parent is read.
    #[inline(always)]
    fn count_entry(&self, thread: &mut ThreadState, record: u32, now: u64) {
        let reuse = now.wrapping_sub(self.boundary_at.0.load(Ordering::Relaxed)) < self.reuse_ticks;
        let delta = thread.delta(record);
        delta.calls += 1;
        delta.saw_boundary |= reuse;
        if !reuse {
            self.entry_reading(thread, record, now);
        }
    }

    /// The merge and the fresh boundary reading of an entry the last one is too old for.
    #[inline(never)]
    fn entry_reading(&self, thread: &mut ThreadState, record: u32, now: u64) {
        let mut state = self.lock();
        self.merge(&mut state, thread);
        self.boundary_reading(&mut state, thread, now, record, Edge::Entry);
    }

    /// The record of `name` entered now on `slot`'s thread: under the thread's open
    /// stage, or, on an idle thread, under the stage open on the monitor's own thread
    /// (`owner_top` holds record + 1, so 0 becomes `NO_PARENT`).
    #[inline]
    fn record_here(
        &self,
        slot: &ThreadSlot,
        thread: &mut ThreadState,
        name: &StageName,
        now: u64,
    ) -> u32 {
        let parent = match thread.stack.last() {
            Some(top) => top.record,
            None if slot.id != 0 => self.owner_top.0.load(Ordering::Relaxed).wrapping_sub(1),
            None => NO_PARENT,
        };
        self.record_under(thread, parent, name, now)
    }

    /// The record of `name` under `parent` (`NO_PARENT`: top level), learned by
    /// `thread` if new to it.
    #[inline]
    fn record_under(
        &self,
        thread: &mut ThreadState,
        parent: u32,
        name: &StageName,
        now: u64,
    ) -> u32 {
        match thread.find(parent, name) {
            Some(record) => record,
            None => self.learn(thread, parent, name, now),
        }
    }

    /// Finds or makes the record of `name` under `parent` and teaches it to the thread.
    #[cold]
    fn learn(&self, thread: &mut ThreadState, parent: u32, name: &StageName, now: u64) -> u32 {
        let parent_id = (parent != NO_PARENT).then_some(parent);
        let record = self
            .lock()
            .records
            .find_or_add(parent_id, name, self.elapsed(now));
        thread.learn(parent, name, record);
        record
    }

    /// Records the `Err` the open call `seq` returned: its type and `Display` text.
    pub(crate) fn set_error(
        &self,
        slot: &ThreadSlot,
        seq: u32,
        type_name: &'static str,
        message: Option<Box<str>>,
    ) {
        slot.lock().set_error(seq, type_name, message);
    }

    /// Records the `Display` text of the `Err` `main` returned, for the report.
    pub(crate) fn set_run_message(&self, message: Option<Box<str>>) {
        self.lock().run_message = message.map(String::from);
    }

    /// Closes the call `entered` returned.
    #[inline]
    pub(crate) fn exit(&self, slot: &ThreadSlot, entered: Entered) {
        let _engine = crate::heap::attach::pause(); // the record is no test's heap
        let now = self.clock.raw();
        let mut thread = slot.lock();
        if self.is_ended() {
            return;
        }
        let seq = match entered {
            Entered::Pushed(seq) => seq,
            Entered::Folded(seq) => {
                if let Some(index) = thread.position(seq) {
                    let frame = &mut thread.stack[index];
                    frame.folded = frame.folded.saturating_sub(1);
                }
                return;
            }
            Entered::Ignored => return,
        };
        let Some(index) = thread.position(seq) else {
            return;
        };
        let frame = thread.remove_frame(index);
        heap::exited(&mut thread, &frame);
        if slot.id == 0 {
            let top = thread.stack.last().map_or(0, |top| top.record + 1);
            self.owner_top.0.store(top, Ordering::Relaxed);
        }
        let panicking = std::thread::panicking();
        let ticks = now.saturating_sub(frame.entered);
        let reuse = now.wrapping_sub(self.boundary_at.0.load(Ordering::Relaxed)) < self.reuse_ticks;
        // Only a call shorter than the reuse window may skip the shared state: a longer
        // one may have overlapped intervals other threads' readings closed.
        let quiet = frame.error.is_none() && !panicking && ticks < self.reuse_ticks;
        let fast = quiet && reuse && thread.has_completed(frame.record);
        let delta = thread.delta(frame.record);
        delta.completed += 1;
        delta.wall_ticks += ticks;
        delta.min_ticks = delta.min_ticks.min(ticks);
        delta.max_ticks = delta.max_ticks.max(ticks);
        if fast {
            delta.saw_boundary = true;
            self.cpu_exit(&mut thread, index, &frame, now, cpu::Clock::Window);
            return;
        }
        thread.mark_completed(frame.record);
        let error = if panicking {
            Some(Cow::Borrowed("panic"))
        } else {
            frame.error.map(|e| Cow::Owned(short_type_name(e)))
        };
        let mut state = self.lock();
        self.merge(&mut state, &mut thread);
        if slot.id == 0 {
            // Idle threads' heap counts of the call's time are its own (fork-join).
            self.sweep_heap_to(&mut state, now, Some(frame.record));
        }
        let edge = Edge::exit_after(self.clock.delta_as_nanos(0, ticks));
        self.boundary_reading(&mut state, &thread, now, frame.record, edge);
        self.cpu_exit(&mut thread, index, &frame, now, cpu::Clock::Fresh);
        state.apply_intervals_since(frame.record, frame.entered);
        let nanos = self.clock.delta_as_nanos(0, ticks);
        let message = thread.take_message(frame.seq);
        self.keep_span(&mut state, &frame, slot.id, nanos, &error, message);
        let message = state.finish_call(frame.record, nanos, error);
        if let Some(message) = message {
            let stage = OpenStage::on_thread(&thread.stack, slot.id);
            drop(state);
            drop(thread);
            self.log_event(message, stage);
        }
    }

    /// Moves `thread`'s counters into the shared records.
    pub(crate) fn merge(&self, state: &mut State, thread: &mut ThreadState) {
        let reading = state.boundary.tree();
        let reused = state.boundary.latest_epoch();
        let State {
            records, boundary, ..
        } = state;
        thread.drain(|id, delta, first| {
            heap::merge(records, id, &delta.heap);
            let record = records.get_mut(id);
            record.calls += delta.calls;
            record.threads += u32::from(first);
            record.cpu.add(&delta.cpu);
            if delta.completed > 0 {
                record.completed += delta.completed;
                record.wall_seconds += self.ticks_seconds(delta.wall_ticks);
                record.min_wall_seconds = record
                    .min_wall_seconds
                    .min(self.ticks_seconds(delta.min_ticks));
                record.max_wall_seconds = record
                    .max_wall_seconds
                    .max(self.ticks_seconds(delta.max_ticks));
            }
            if let (true, Some(reading)) = (delta.saw_boundary, &reading) {
                record.stats.apply_boundary(reading);
                // That reading's interval ended before the call: the next one counts.
                // The calls came after the reading they reused, the newest at most.
                boundary.await_interval(id, &mut record.stats, reused);
            }
        });
    }

    /// Merges every thread's counters (summaries and the end).
    pub(crate) fn merge_all(&self) {
        let threads = self.lock_threads().clone();
        let mut held = ThreadSlot::lock_all(&threads);
        let mut state = self.lock();
        for thread in &mut held {
            self.merge(&mut state, thread);
        }
    }

    /// Called when a covered thread exits: its counters are never lost.
    pub(crate) fn thread_exited(&self, slot: &ThreadSlot) {
        let mut thread = slot.lock();
        if !self.is_ended() {
            let mut state = self.lock();
            self.merge(&mut state, &mut thread);
        }
    }

    /// The stage path open on the monitor's own thread, or `"workflow"`.
    pub(crate) fn owner_stage(&self, records: &Records) -> String {
        match self.owner_record(records) {
            Some(record) => records.path(record),
            None => "workflow".to_owned(),
        }
    }

    /// The record open on the monitor's own thread (`None`: the workflow).
    pub(crate) fn owner_record(&self, records: &Records) -> Option<u32> {
        match self.owner_top.0.load(Ordering::Relaxed).checked_sub(1) {
            Some(record) if (record as usize) < records.list.len() => Some(record),
            _ => None,
        }
    }

    /// Ends recording: merges every thread, freezes the clock, sets the run's error.
    pub(crate) fn end(&self, error: Option<String>) {
        self.end_with(error, None);
    }

    /// Ends recording like [`end`](Self::end), with the watched command's exit code.
    pub(crate) fn end_with(&self, error: Option<String>, exit_code: Option<i32>) {
        self.merge_all();
        let mut state = self.lock();
        self.sweep_heap(&mut state, self.clock.raw());
        if let (Some(root), Some(code)) = (self.config.root, exit_code) {
            // The command `stemmon run` watched and reaped.
            state.processes.exited(root, code);
        }
        state.ended = Some(Ended {
            at: self.clock.raw(),
            error,
            exit_code,
        });
        self.ended.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::fake::Rig;

    #[test]
    fn direct_recursion_folds_into_the_open_call() {
        let rig = Rig::new();
        let main = rig.thread();
        let outer = rig.recorder.enter(&main, "walk".into());
        rig.advance_micros(10);
        let inner = rig.recorder.enter(&main, "walk".into());
        let innermost = rig.recorder.enter(&main, "walk".into());
        rig.advance_micros(10);
        rig.recorder.exit(&main, innermost);
        rig.recorder.exit(&main, inner);
        // A different stage below the folded calls nests under the one open call.
        let step = rig.recorder.enter(&main, "step".into());
        rig.recorder.exit(&main, step);
        rig.advance_micros(10);
        rig.recorder.exit(&main, outer);
        let report = rig.recorder.snapshot();
        let walk = report.stage("walk").expect("one record for the recursion");
        assert_eq!(walk.calls, 3);
        assert!(report.stage("walk/walk").is_none(), "{:?}", report.stages);
        assert!(
            (walk.wall_seconds - 30e-6).abs() < 1e-9,
            "timed once: {}",
            walk.wall_seconds
        );
        assert_eq!(report.stage("walk/step").unwrap().calls, 1);
        assert!(rig.recorder.open_calls().is_empty());
    }

    #[test]
    fn indirect_recursion_folds_into_the_open_call_of_the_same_name() {
        let rig = Rig::new();
        let main = rig.thread();
        // expr → term → expr → term ..., 1 000 deep, then unwound.
        let mut guards = Vec::new();
        for depth in 0..1_000 {
            let name = if depth % 2 == 0 { "expr" } else { "term" };
            guards.push(rig.recorder.enter(&main, name.into()));
            rig.advance_micros(1);
        }
        assert_eq!(main.lock().stack.len(), 2, "distinct names only");
        // A stage new to the recursion nests under the top of the stack.
        let factor = rig.recorder.enter(&main, "factor".into());
        rig.recorder.exit(&main, factor);
        while let Some(guard) = guards.pop() {
            rig.recorder.exit(&main, guard);
        }
        let report = rig.recorder.snapshot();
        let paths: Vec<&str> = report.stages.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, ["expr", "expr/term", "expr/term/factor"]);
        let (expr, term) = (
            report.stage("expr").unwrap(),
            report.stage("expr/term").unwrap(),
        );
        assert_eq!((expr.calls, term.calls), (500, 500));
        assert!(
            (expr.wall_seconds - 1e-3).abs() < 1e-9,
            "timed once: {}",
            expr.wall_seconds
        );
        assert!(
            (term.wall_seconds - 999e-6).abs() < 1e-9,
            "{}",
            term.wall_seconds
        );
        assert!(rig.recorder.open_calls().is_empty());
        // Once unwound, the same names open frames of their own again.
        let again = rig.recorder.enter(&main, "expr".into());
        assert!(matches!(again, super::Entered::Pushed(_)));
        rig.recorder.exit(&main, again);
        assert_eq!(rig.recorder.snapshot().stage("expr").unwrap().calls, 501);
    }

    #[test]
    fn recursion_does_not_fold_across_a_poll_frame() {
        let rig = Rig::new();
        let main = rig.thread();
        let outer = rig.recorder.enter(&main, "walk".into());
        let call = rig
            .recorder
            .open_async(&main, "fetch".into(), super::Parent::Here);
        let poll = rig.recorder.push_poll(&main, call.record).unwrap();
        let inner = rig.recorder.enter(&main, "walk".into());
        assert!(matches!(inner, super::Entered::Pushed(_)));
        rig.recorder.exit(&main, inner);
        rig.recorder.pop_poll(&main, poll);
        rig.recorder.close_async(Some(&main), call, None);
        rig.recorder.exit(&main, outer);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("walk/fetch/walk").unwrap().calls, 1);
        assert_eq!(report.stage("walk").unwrap().calls, 1);
    }

    #[test]
    fn a_stage_on_an_idle_thread_nests_under_the_owner_threads_open_stage() {
        let rig = Rig::new();
        let main = rig.thread();
        let worker = rig.thread();
        let before = rig.recorder.enter(&worker, "predict".into());
        rig.recorder.exit(&worker, before);
        let fit = rig.recorder.enter(&main, "fit".into());
        let during = rig.recorder.enter(&worker, "predict".into());
        // Nested on the worker's own stack from there on.
        let inner = rig.recorder.enter(&worker, "score".into());
        rig.recorder.exit(&worker, inner);
        rig.recorder.exit(&worker, during);
        rig.recorder.exit(&main, fit);
        let after = rig.recorder.enter(&worker, "predict".into());
        rig.recorder.exit(&worker, after);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("predict").unwrap().calls, 2);
        let nested = report.stage("fit/predict").expect("fork-join nesting");
        assert_eq!(nested.calls, 1);
        assert_eq!(nested.threads, 1);
        assert_eq!(report.stage("fit/predict/score").unwrap().calls, 1);
        // The owner's own idle stack is the top level, never another thread's stage.
        let top = rig.recorder.enter(&main, "load".into());
        rig.recorder.exit(&main, top);
        assert!(rig.recorder.snapshot().stage("load").is_some());
    }

    #[test]
    fn calls_of_one_path_from_two_threads_are_one_record() {
        let rig = Rig::new();
        let (a, b) = (rig.thread(), rig.thread());
        for slot in [&a, &b, &a] {
            let call = rig.recorder.enter(slot, "load".into());
            rig.advance_micros(100);
            rig.recorder.exit(slot, call);
        }
        let report = rig.recorder.snapshot();
        let load = report.stage("load").unwrap();
        assert_eq!((load.calls, load.threads), (3, 2));
        assert!(
            (load.wall_seconds - 300e-6).abs() < 1e-9,
            "{}",
            load.wall_seconds
        );
        assert!((load.max_wall_seconds - 100e-6).abs() < 1e-9);
    }

    #[test]
    fn nothing_is_recorded_after_the_end() {
        let rig = Rig::new();
        let main = rig.thread();
        let open = rig.recorder.enter(&main, "fit".into());
        rig.recorder.end(Some("SIGTERM".into()));
        rig.recorder.exit(&main, open);
        let late = rig.recorder.enter(&main, "late".into());
        rig.recorder.exit(&main, late);
        let report = rig.recorder.snapshot();
        assert!(!report.running);
        assert_eq!(report.error.as_deref(), Some("SIGTERM"));
        assert!(report.stage("late").is_none());
        assert_eq!(report.stage("fit").unwrap().calls, 1);
    }
}
