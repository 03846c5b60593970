//! The engine: records stage calls from every thread, applies samples and boundary
//! readings, and takes snapshots into a [`Report`](crate::Report).
//!
//! Data flows one way: threads own their stacks and counters ([`thread`]); a merge
//! moves counters into the shared [`records`] at most about once a millisecond per
//! thread, at a boundary reading, on an error or a long call; log lines and report
//! writes are handed to the sampler thread as [`Event`]s; [`snapshot`] turns it all
//! into a report. Nothing here does I/O but the parent's boundary reading.

mod records;
mod snapshot;
mod thread;
mod timeline;

pub(crate) use records::{short_type_name, StageName};
pub(crate) use thread::ThreadSlot;

use crate::config::Config;
use crate::export::Exporter;
use crate::memory::{ProcSelfReader, SelfReader, TreeReading};
use crate::output::Output;
use crate::report::{CgroupReport, HighWaterMarks, SampleReport, Span, TimelinePoint};
use records::{BoundaryInterval, Records, Stats};
use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;
use thread::{ThreadState, NO_PARENT, POLL};
use timeline::Timeline;

/// A stage-boundary reading younger than this is reused: it keeps a hot stage cheap.
const BOUNDARY_REUSE_NANOS: u64 = 1_000_000;
/// Stage completions are logged the first time and then only when this long or longer;
/// calls this long are always kept in `spans`.
const LONG_CALL_NANOS: u64 = 100_000_000;
/// At most this many spans are kept.
const MAX_SPANS: usize = 10_000;

static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

/// The event of a log line, formatted by the sampler thread (names are looked up
/// there, so an instrumented thread neither formats nor copies a path).
#[derive(Debug)]
pub(crate) enum Line {
    /// Free text: `started`, `running`, `finished`, `failed (panic)`.
    Text(String),
    /// `completed <path> (<s>s)`.
    Completed { record: u32, nanos: u64 },
    /// `failed <path> (<error>)`.
    Failed {
        record: u32,
        error: Cow<'static, str>,
    },
}

/// Which stage a log line names as open.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OpenStage {
    /// This record was open on the thread when the event happened.
    Record(u32),
    /// Nothing was open.
    Workflow,
    /// Whatever is open on the monitor's own thread when the line is printed.
    OwnerNow,
}

/// What instrumented threads hand to the sampler thread, which does all the I/O.
#[derive(Debug)]
pub(crate) enum Event {
    /// Print this line and rewrite the report.
    Log(Line, OpenStage),
    /// Stop sampling and hand the reader back.
    Stop,
}

/// A value on a cache line of its own, so that writing it does not slow readers of
/// the values beside it.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// State behind the recorder's one lock.
pub(crate) struct State {
    pub(crate) records: Records,
    /// Async calls started and not yet closed: (seq, record, started ticks).
    open_async: Vec<(u64, u32, u64)>,
    next_async: u64,
    pub(crate) total: Stats,
    pub(crate) peak_rss_stage: Option<String>,
    pub(crate) peak_rss_elapsed_seconds: Option<f64>,
    pub(crate) latest: Option<SampleReport>,
    pub(crate) trace: VecDeque<SampleReport>,
    max_samples: usize,
    /// The whole run, bounded.
    pub(crate) timeline: Timeline,
    /// Descendants and process count of the latest full sample, for boundary readings.
    last_tree: TreeReading,
    /// The newest reading of the parent alone: (ticks, bytes).
    boundary: Option<(u64, u64)>,
    /// The live descendants' RSS at that reading, those found exited left out.
    boundary_children: Option<u64>,
    /// Which of `last_tree.descendants` were found exited since the last sample.
    gone: Vec<bool>,
    /// The job's cgroup as last read.
    pub(crate) cgroup: Option<CgroupReport>,
    /// Records that saw only a reused boundary reading: the next interval is theirs.
    awaiting: Vec<u32>,
    /// Records whose bound waits for the next sample's descendant marks.
    pending: Vec<u32>,
    /// The intervals boundary readings closed since the last sample, by end ticks: the
    /// sample gives them to stages open on other threads meanwhile.
    intervals: Vec<(u64, BoundaryInterval)>,
    self_rss: Box<dyn SelfReader>,
    pub(crate) spans: Vec<Span>,
    /// Spans shorter than [`LONG_CALL_NANOS`] among `spans`: the ones a long call may evict.
    short_spans: usize,
    pub(crate) sampling_attempts: u64,
    pub(crate) sampling_seconds: f64,
    pub(crate) max_sampling_seconds: f64,
    pub(crate) max_sample_gap_seconds: f64,
    pub(crate) sampling_error: Option<String>,
    pub(crate) output_error: Option<String>,
    pub(crate) export_error: Option<String>,
    warned_sampling: bool,
    warned_output: bool,
    /// Ticks at the end, once finished.
    pub(crate) ended: Option<u64>,
    pub(crate) error: Option<String>,
}

/// One monitor's engine, shared by its handle, the sampler and every thread it covers.
pub(crate) struct Recorder {
    pub(crate) epoch: u64,
    pub(crate) config: Config,
    pub(crate) sampler: &'static str,
    /// Which high-water marks are read.
    pub(crate) high_water_marks: HighWaterMarks,
    pub(crate) clock: quanta::Clock,
    /// Clock ticks in `BOUNDARY_REUSE_NANOS`: the hot path compares raw ticks.
    reuse_ticks: u64,
    pub(crate) origin: u64,
    /// The root of the sampled tree.
    pub(crate) pid: u32,
    pub(crate) platform: String,
    /// This machine's name, and who this process is in a larger job.
    pub(crate) host: String,
    pub(crate) labels: BTreeMap<String, String>,
    /// Where the report goes, resolved once at start (or why it cannot go anywhere).
    pub(crate) output: Option<Result<Output, String>>,
    /// Metrics for Prometheus; used on the sampler thread and at the end only.
    pub(crate) exporter: Mutex<Option<Exporter>>,
    /// Set once finished: every later call is a no-op.
    ended: AtomicBool,
    /// Ticks of the newest boundary reading.
    boundary_at: Padded<AtomicU64>,
    /// The record open on the monitor's own thread, plus one (0: none): where a stage
    /// entered on an idle thread nests (fork-join). Written by that thread only.
    owner_top: Padded<AtomicU32>,
    /// Every thread that recorded a stage, the monitor's own first.
    threads: Mutex<Vec<Arc<ThreadSlot>>>,
    state: Mutex<State>,
    events: Mutex<Option<Sender<Event>>>,
}

fn platform() -> String {
    let kernel = sysinfo::System::kernel_version().unwrap_or_else(|_| "unknown".into());
    format!(
        "{}-{}-{}",
        std::env::consts::OS,
        kernel,
        std::env::consts::ARCH
    )
}

pub(crate) fn warn(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "[stemmon] warning: {message}");
}

pub(crate) fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

/// Where a call opened apart from the stack ([`Recorder::open_async`]) nests.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Parent {
    /// Where the opening thread is: under its innermost open stage, or, on an idle
    /// thread, under the stage open on the monitor's own thread.
    Here,
    /// Under this record, wherever the thread is.
    // Only `tracing` spans nest by a parent of their own.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    Record(u32),
}

/// `OpenCall::seq` of a call folded into its directly recursive parent (real ones start at 1).
const FOLDED: u64 = 0;

/// An open call of an async stage or a `tracing` span, closed by [`Recorder::close_async`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenCall {
    pub(crate) record: u32,
    pub(crate) seq: u64,
    /// Raw clock ticks at the open.
    pub(crate) started: u64,
}

/// What `enter` hands the guard: the call's sequence number, or that it was folded
/// into its directly recursive parent.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entered {
    Pushed(u32),
    Folded(u32),
    Ignored,
}

impl Recorder {
    pub(crate) fn new(
        config: Config,
        sampler: &'static str,
        marks: HighWaterMarks,
        (host, labels): (String, BTreeMap<String, String>),
        exporter: Option<Exporter>,
    ) -> Recorder {
        let clock = quanta::Clock::new();
        let probe = 1u64 << 40;
        let nanos_per_probe = clock.delta_as_nanos(0, probe).max(1) as f64;
        let ticks = |nanos: u64| (nanos as f64 * probe as f64 / nanos_per_probe) as u64;
        Recorder {
            epoch: NEXT_EPOCH.fetch_add(1, Ordering::Relaxed),
            sampler,
            high_water_marks: marks.clone(),
            reuse_ticks: ticks(BOUNDARY_REUSE_NANOS),
            origin: clock.raw(),
            clock,
            pid: config.root.unwrap_or_else(std::process::id),
            platform: platform(),
            host,
            labels,
            output: config.output.as_deref().map(|path| {
                Output::resolve(path)
                    .map_err(|e| format!("could not write the report to {}: {e}", path.display()))
            }),
            exporter: Mutex::new(exporter),
            ended: AtomicBool::new(false),
            boundary_at: Padded(AtomicU64::new(0)),
            owner_top: Padded(AtomicU32::new(0)),
            threads: Mutex::new(Vec::new()),
            state: Mutex::new(State {
                records: Records::default(),
                open_async: Vec::new(),
                next_async: 0,
                total: Stats::default(),
                peak_rss_stage: None,
                peak_rss_elapsed_seconds: None,
                latest: None,
                trace: VecDeque::with_capacity(config.max_samples.min(4096)),
                max_samples: config.max_samples,
                timeline: Timeline::new(),
                last_tree: TreeReading::default(),
                boundary: None,
                boundary_children: None,
                gone: Vec::new(),
                cgroup: None,
                awaiting: Vec::new(),
                pending: Vec::new(),
                intervals: Vec::new(),
                // The boundary reads this process's marks only when it is the root.
                self_rss: Box::new(ProcSelfReader::new(marks.parent && config.root.is_none())),
                spans: Vec::new(),
                short_spans: 0,
                sampling_attempts: 0,
                sampling_seconds: 0.0,
                max_sampling_seconds: 0.0,
                max_sample_gap_seconds: 0.0,
                sampling_error: None,
                output_error: None,
                export_error: None,
                warned_sampling: false,
                warned_output: false,
                ended: None,
                error: None,
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

    /// Where log events go from now on.
    pub(crate) fn connect(&self, events: Sender<Event>) {
        *self.events.lock().unwrap_or_else(PoisonError::into_inner) = Some(events);
    }

    /// Hands a log line's event to the sampler thread; no I/O on the caller's thread.
    pub(crate) fn log_event(&self, event: Line, stage: OpenStage) {
        if self.config.log_interval.is_none() {
            return;
        }
        if let Some(events) = &*self.events.lock().unwrap_or_else(PoisonError::into_inner) {
            let _ = events.send(Event::Log(event, stage));
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
        let now = self.clock.raw();
        let mut thread = slot.lock();
        if self.is_ended() {
            return Entered::Ignored;
        }
        // Direct recursion folds into the open call: counted, timed once.
        if let Some(top) = thread.stack.last() {
            let (record, seq) = (top.record, top.seq);
            if top.entered != POLL && thread.is_named(record, &name) {
                thread.stack.last_mut().expect("checked above").folded += 1;
                thread.delta(record).calls += 1;
                return Entered::Folded(seq);
            }
        }
        let record = self.record_here(slot, &mut thread, &name, now);
        let seq = thread.push(record, now);
        if slot.id == 0 {
            self.owner_top.0.store(record + 1, Ordering::Relaxed);
        }
        let reuse = now.wrapping_sub(self.boundary_at.0.load(Ordering::Relaxed)) < self.reuse_ticks;
        let delta = thread.delta(record);
        delta.calls += 1;
        delta.saw_boundary |= reuse;
        if !reuse {
            let mut state = self.lock();
            self.merge(&mut state, &mut thread);
            self.boundary_reading(&mut state, &thread, now, record, true);
        }
        Entered::Pushed(seq)
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

    /// Records the `Err` type the open call `seq` returned.
    pub(crate) fn set_error(&self, slot: &ThreadSlot, seq: u32, type_name: &'static str) {
        slot.lock().set_error(seq, type_name);
    }

    /// Closes the call `entered` returned.
    #[inline]
    pub(crate) fn exit(&self, slot: &ThreadSlot, entered: Entered) {
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
        let frame = thread.stack.remove(index);
        if slot.id == 0 {
            let top = thread.stack.last().map_or(0, |top| top.record + 1);
            self.owner_top.0.store(top, Ordering::Relaxed);
        }
        let panicking = std::thread::panicking();
        let ticks = now.saturating_sub(frame.entered);
        let delta = thread.delta(frame.record);
        delta.completed += 1;
        delta.wall_ticks += ticks;
        delta.min_ticks = delta.min_ticks.min(ticks);
        delta.max_ticks = delta.max_ticks.max(ticks);
        let reuse = now.wrapping_sub(self.boundary_at.0.load(Ordering::Relaxed)) < self.reuse_ticks;
        // Only a call shorter than the reuse window may skip the shared state: a longer
        // one may have overlapped intervals other threads' readings closed.
        let quiet = frame.error.is_none() && !panicking && ticks < self.reuse_ticks;
        if quiet && reuse && thread.has_completed(frame.record) {
            thread.delta(frame.record).saw_boundary = true;
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
        self.boundary_reading(&mut state, &thread, now, frame.record, false);
        state.apply_intervals_since(frame.record, frame.entered);
        let nanos = self.clock.delta_as_nanos(0, ticks);
        self.keep_span(
            &mut state,
            frame.record,
            slot.id,
            frame.entered,
            nanos,
            &error,
        );
        let message = finish_call(&mut state, frame.record, nanos, error);
        if let Some(message) = message {
            // The stage open now on this thread, or where its calls nest.
            let stage = match thread.stack.last() {
                Some(top) => OpenStage::Record(top.record),
                None if slot.id == 0 => OpenStage::Workflow,
                None => OpenStage::OwnerNow,
            };
            drop(state);
            drop(thread);
            self.log_event(message, stage);
        }
    }

    /// Moves `thread`'s counters into the shared records.
    pub(crate) fn merge(&self, state: &mut State, thread: &mut ThreadState) {
        let boundary = state.boundary_tree();
        let State {
            records, awaiting, ..
        } = state;
        thread.drain(|id, delta, first| {
            let record = records.get_mut(id);
            record.calls += delta.calls;
            record.threads += u32::from(first);
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
            if let (true, Some(reading)) = (delta.saw_boundary, &boundary) {
                record.stats.apply_boundary(reading);
                // That reading's interval ended before the call: the next one counts.
                if !std::mem::replace(&mut record.stats.awaiting_interval, true) {
                    awaiting.push(id);
                }
            }
        });
    }

    /// Merges every thread's counters (summaries and the end).
    pub(crate) fn merge_all(&self) {
        let threads = self.lock_threads().clone();
        for slot in threads {
            let mut thread = slot.lock();
            let mut state = self.lock();
            self.merge(&mut state, &mut thread);
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

    /// Reads the parent (or reuses a reading under 1 ms old) and counts it toward
    /// `record`. A fresh reading closes an interval of the kernel's marks: it counts
    /// toward every stage on the thread's stack, the records waiting for it, and
    /// `record` itself when it is `entering` no more (its call is ending).
    fn boundary_reading(
        &self,
        state: &mut State,
        thread: &ThreadState,
        now: u64,
        record: u32,
        entering: bool,
    ) {
        let fresh = match state.boundary {
            Some((at, _)) if self.clock.delta_as_nanos(at, now) < BOUNDARY_REUSE_NANOS => None,
            _ => match state.self_rss.read() {
                Some(mut reading) => {
                    state.boundary = Some((now, reading.rss));
                    self.boundary_at.0.store(now, Ordering::Relaxed);
                    // A boundary never counts a descendant that has exited: when a child
                    // was reaped or became a zombie, each last-sampled one is checked.
                    let State {
                        last_tree,
                        gone,
                        self_rss,
                        ..
                    } = &mut *state;
                    if reading.children_changed && !last_tree.descendants.is_empty() {
                        let (live, exited) = self_rss.live_children(&last_tree.descendants, gone);
                        state.boundary_children = Some(live);
                        // An exited child's peak counts in this interval (a sample may
                        // have reset its mark before it exited).
                        if reading.hwm.is_some() {
                            reading.reaped = reading.reaped.max(exited);
                        }
                    }
                    Some(reading)
                }
                None => return,
            },
        };
        let Some(reading) = state.boundary_tree() else {
            return;
        };
        state.records.get_mut(record).stats.apply_boundary(&reading);
        let Some(fresh) = fresh else {
            // A reused reading's interval ended before this call.
            let stats = &mut state.records.get_mut(record).stats;
            if !std::mem::replace(&mut stats.awaiting_interval, true) {
                state.awaiting.push(record);
            }
            return;
        };
        let interval = BoundaryInterval {
            parent_hwm: fresh.hwm,
            reaped: fresh.reaped,
            children_rss: state.boundary_children.unwrap_or(0),
        };
        if interval.parent_hwm.is_some() {
            state.intervals.push((now, interval));
        }
        let mut closed = std::mem::take(&mut state.awaiting);
        if !entering {
            closed.push(record);
        }
        closed.extend(
            thread
                .stack
                .iter()
                .map(|frame| frame.record)
                .filter(|r| *r != record),
        );
        for &id in &closed {
            state.apply_interval(id, &interval);
        }
        closed.clear();
        state.awaiting = closed;
        state.total.apply_interval(&interval);
        for frame in &thread.stack {
            if frame.record != record {
                state
                    .records
                    .get_mut(frame.record)
                    .stats
                    .apply_boundary(&reading);
            }
        }
        if state.total.apply_boundary(&reading) {
            state.peak_rss_stage = Some(state.records.get(record).path.clone());
            state.peak_rss_elapsed_seconds = Some(self.elapsed(now));
        }
    }

    /// Keeps the call in `spans`: every long call, and short ones while there is room.
    fn keep_span(
        &self,
        state: &mut State,
        record: u32,
        thread: u32,
        entered: u64,
        nanos: u64,
        error: &Option<Cow<'static, str>>,
    ) {
        let long = nanos >= LONG_CALL_NANOS;
        let span = Span {
            stage_id: record,
            thread,
            start_seconds: self.elapsed(entered),
            wall_seconds: seconds(nanos),
            error: error.as_ref().map(|e| e.to_string()),
        };
        if state.spans.len() < MAX_SPANS {
            state.short_spans += usize::from(!long);
            state.spans.push(span);
        } else if long && state.short_spans > 0 {
            if let Some(index) = state
                .spans
                .iter()
                .rposition(|kept| kept.wall_seconds < seconds(LONG_CALL_NANOS))
            {
                state.spans.remove(index);
                state.short_spans -= 1;
                state.spans.push(span);
            }
        }
    }

    /// Starts a call opened apart from the stack (an async stage, a `tracing` span) on
    /// `slot`'s thread, nested as `parent` says; it is entered by [`Recorder::push_poll`]
    /// and closed, from any thread, by [`Recorder::close_async`].
    pub(crate) fn open_async(
        &self,
        slot: &ThreadSlot,
        name: StageName,
        parent: Parent,
    ) -> OpenCall {
        let now = self.clock.raw();
        let mut thread = slot.lock();
        // Direct recursion folds into the open call, as in `enter`: counted, timed once.
        if let (Parent::Here, Some(top)) = (parent, thread.stack.last()) {
            let record = top.record;
            if thread.is_named(record, &name) {
                thread.delta(record).calls += 1;
                return OpenCall {
                    record,
                    seq: FOLDED,
                    started: now,
                };
            }
        }
        let record = match parent {
            Parent::Here => self.record_here(slot, &mut thread, &name, now),
            Parent::Record(parent) => match thread.find(parent, &name) {
                Some(record) => record,
                None => self.learn(&mut thread, parent, &name, now),
            },
        };
        thread.delta(record).calls += 1;
        let mut state = self.lock();
        self.merge(&mut state, &mut thread);
        state.next_async += 1;
        let seq = state.next_async;
        state.open_async.push((seq, record, now));
        self.boundary_reading(&mut state, &thread, now, record, true);
        OpenCall {
            record,
            seq,
            started: now,
        }
    }

    /// Enters an async stage for one poll on `slot`'s thread.
    pub(crate) fn push_poll(&self, slot: &ThreadSlot, record: u32) -> Option<u32> {
        let mut thread = slot.lock();
        if self.is_ended() {
            return None;
        }
        if slot.id == 0 {
            // Idle threads nest under a poll frame open here too (fork-join).
            self.owner_top.0.store(record + 1, Ordering::Relaxed);
        }
        Some(thread.push(record, POLL))
    }

    pub(crate) fn pop_poll(&self, slot: &ThreadSlot, seq: u32) {
        let mut thread = slot.lock();
        if let Some(index) = thread.position(seq) {
            thread.stack.remove(index);
            if slot.id == 0 {
                let top = thread.stack.last().map_or(0, |top| top.record + 1);
                self.owner_top.0.store(top, Ordering::Relaxed);
            }
        }
    }

    /// Closes the call of an async stage; any thread.
    pub(crate) fn close_async(&self, call: OpenCall, error: Option<Cow<'static, str>>) {
        if call.seq == FOLDED {
            return;
        }
        let now = self.clock.raw();
        let nanos = self.clock.delta_as_nanos(call.started, now);
        let mut state = self.lock();
        if state.ended.is_some() {
            return;
        }
        state.open_async.retain(|(s, _, _)| *s != call.seq);
        // The exit reading and the intervals a sync call gets (the stacks that saw the
        // interval get it at their own exits or at the next sample).
        self.boundary_reading(&mut state, &ThreadState::default(), now, call.record, false);
        state.apply_intervals_since(call.record, call.started);
        state.records.get_mut(call.record).complete(seconds(nanos));
        let message = finish_call(&mut state, call.record, nanos, error);
        drop(state);
        if let Some(message) = message {
            self.log_event(message, OpenStage::OwnerNow);
        }
    }

    /// The records open on any thread now (each once), and open calls with their entry
    /// ticks for summaries: `(record, entered)`; poll frames count as open, not timed.
    pub(crate) fn open_calls(&self) -> Vec<(u32, u64)> {
        let threads = self.lock_threads().clone();
        let mut open = Vec::new();
        for slot in threads {
            let thread = slot.lock();
            open.extend(
                thread
                    .stack
                    .iter()
                    .map(|frame| (frame.record, frame.entered)),
            );
        }
        open
    }

    /// The stage path open on the monitor's own thread, or `"workflow"`.
    pub(crate) fn owner_stage(&self, state: &State) -> String {
        match self.owner_top.0.load(Ordering::Relaxed).checked_sub(1) {
            Some(record) if (record as usize) < state.records.list.len() => {
                state.records.get(record).path.clone()
            }
            _ => "workflow".to_owned(),
        }
    }

    /// Takes one full tree sample with `reader` and applies it.
    pub(crate) fn take_sample(&self, reader: &mut dyn crate::memory::TreeReader) {
        // The stages open when the reading starts overlap its interval too.
        let open_before = self.open_calls();
        let started = Instant::now();
        let reading = reader.read_tree(self.pid);
        let took = started.elapsed().as_secs_f64();
        let done = self.clock.raw();
        let open = self.open_calls();
        let mut state = self.lock();
        state.sampling_attempts += 1;
        state.sampling_seconds += took;
        state.max_sampling_seconds = state.max_sampling_seconds.max(took);
        match reading {
            Ok(reading) => {
                let kills = reading.oom_kills.unwrap_or(0);
                let stage = self.owner_stage(&state);
                let async_open: Vec<(u32, u64)> = state
                    .open_async
                    .iter()
                    .map(|(_, record, at)| (*record, *at))
                    .collect();
                let open: Vec<(u32, u64)> = open.into_iter().chain(async_open).collect();
                state.apply_sample(reading, &open, &open_before, stage, self.elapsed(done));
                state.boundary = state
                    .latest
                    .as_ref()
                    .and_then(|s| s.parent_rss_bytes)
                    .map(|p| (done, p));
                self.boundary_at.0.store(done, Ordering::Relaxed);
                if kills > 0 {
                    drop(state);
                    self.log_event(
                        Line::Text(format!("OOM kill in the job's cgroup ({kills})")),
                        OpenStage::OwnerNow,
                    );
                }
            }
            Err(error) => {
                let message = format!("could not read the process tree: {error}");
                state.sampling_error = Some(message.clone());
                if !std::mem::replace(&mut state.warned_sampling, true) {
                    drop(state);
                    warn(&message);
                }
            }
        }
    }

    /// Records a failed report write, warned once.
    pub(crate) fn output_failed(&self, message: String) {
        let mut state = self.lock();
        state.output_error = Some(message.clone());
        if !std::mem::replace(&mut state.warned_output, true) {
            drop(state);
            warn(&message);
        }
    }

    /// Sends `report` to the configured Prometheus paths; a failure is kept in
    /// `export_error` (the exporter warns once). Sampler thread and finish only.
    /// Returns the export error now on record.
    pub(crate) fn export(&self, report: &crate::Report) -> Option<String> {
        let mut exporter = self.exporter.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(exporter) = exporter.as_mut() {
            if let Err(error) = exporter.export(report) {
                self.lock().export_error = Some(error);
            }
        }
        self.lock().export_error.clone()
    }

    /// Ends recording: merges every thread, freezes the clock, sets the run's error.
    pub(crate) fn end(&self, error: Option<String>) {
        self.merge_all();
        let mut state = self.lock();
        state.ended = Some(self.clock.raw());
        state.error = error;
        self.ended.store(true, Ordering::Relaxed);
    }
}

/// Records how a call ended; returns the log line it deserves, if any.
fn finish_call(
    state: &mut State,
    record: u32,
    nanos: u64,
    error: Option<Cow<'static, str>>,
) -> Option<Line> {
    let long = nanos >= LONG_CALL_NANOS;
    let id = record;
    let record = state.records.get_mut(id);
    let first = !std::mem::replace(&mut record.logged, true);
    match error {
        None => (first || long).then_some(Line::Completed { record: id, nanos }),
        Some(error) => {
            record.errors += 1;
            record.error = Some(error.to_string());
            (record.errors == 1 || long).then_some(Line::Failed { record: id, error })
        }
    }
}

impl Line {
    /// The event text, with stage paths from `report`.
    pub(crate) fn text(&self, report: &crate::Report) -> String {
        let path = |record: &u32| {
            report
                .stages
                .get(*record as usize)
                .map_or("?", |stage| stage.path.as_str())
        };
        match self {
            Line::Text(text) => text.clone(),
            Line::Completed { record, nanos } => {
                format!("completed {} ({:.2}s)", path(record), seconds(*nanos))
            }
            Line::Failed { record, error } => format!("failed {} ({error})", path(record)),
        }
    }
}

impl OpenStage {
    /// The path this names in `report`; `now` is the stage open on the monitor's thread.
    pub(crate) fn path<'a>(&self, report: &'a crate::Report, now: &'a str) -> &'a str {
        match self {
            OpenStage::Record(record) => report
                .stages
                .get(*record as usize)
                .map_or("workflow", |stage| stage.path.as_str()),
            OpenStage::Workflow => "workflow",
            OpenStage::OwnerNow => now,
        }
    }
}

impl State {
    /// The latest parent reading with the descendants as last sampled.
    fn boundary_tree(&self) -> Option<TreeReading> {
        let (_, parent) = self.boundary?;
        let children = self.boundary_children;
        Some(TreeReading {
            parent_rss: Some(parent),
            children_rss: children,
            tree_rss: Some(parent + children.unwrap_or(0)),
            process_count: self.last_tree.process_count.max(1),
            ..TreeReading::default()
        })
    }

    /// Counts toward record `id` every interval closed since `entered` (and since the
    /// last sample, which gave it the earlier ones), whichever thread's reading closed it.
    fn apply_intervals_since(&mut self, id: u32, entered: u64) {
        let intervals = std::mem::take(&mut self.intervals);
        for (end, interval) in intervals.iter().rev() {
            if *end <= entered {
                break;
            }
            self.apply_interval(id, interval);
        }
        self.intervals = intervals;
    }

    /// Counts a fresh boundary interval toward record `id`.
    fn apply_interval(&mut self, id: u32, interval: &BoundaryInterval) {
        if self.records.get_mut(id).stats.apply_interval(interval) {
            self.pending.push(id);
        }
    }

    /// Applies a full sample: `open` are the calls open now on every thread (record,
    /// entry ticks), `open_before` those open when the reading started.
    fn apply_sample(
        &mut self,
        reading: TreeReading,
        open: &[(u32, u64)],
        open_before: &[(u32, u64)],
        stage: String,
        elapsed: f64,
    ) {
        if let Some(latest) = &self.latest {
            self.max_sample_gap_seconds = self
                .max_sample_gap_seconds
                .max(elapsed - latest.elapsed_seconds);
        }
        if self.total.apply_sample(&reading) {
            self.peak_rss_stage = Some(stage.clone());
            self.peak_rss_elapsed_seconds = Some(elapsed);
        }
        // A stage open on another thread saw the intervals other threads' boundary
        // readings closed since it was entered: each counts for it now.
        // (A poll frame is skipped: its async call is in `open` with its own start.)
        for &(record, entered) in open.iter().chain(open_before) {
            if entered != POLL {
                self.apply_intervals_since(record, entered);
            }
        }
        self.intervals.clear();
        let mut seen: Vec<u32> = open.iter().map(|(record, _)| *record).collect();
        seen.sort_unstable();
        seen.dedup();
        for &record in &seen {
            if let Some(record) = self.records.list.get_mut(record as usize) {
                record.stats.apply_sample(&reading);
            }
        }
        // Records that closed during this interval, or saw only a reused reading, get
        // the interval this sample closes; others only widen their pending bound.
        let mut closed: Vec<u32> = open_before
            .iter()
            .map(|(record, _)| *record)
            .chain(self.awaiting.drain(..))
            .filter(|record| seen.binary_search(record).is_err())
            .collect();
        closed.sort_unstable();
        closed.dedup();
        for &record in &closed {
            self.records
                .get_mut(record)
                .stats
                .apply_sample_interval(&reading);
        }
        for record in std::mem::take(&mut self.pending) {
            let stats = &mut self.records.get_mut(record).stats;
            if stats.pending_local.is_some() {
                stats.close_interval(reading.children_hwm);
            }
        }
        self.boundary_children = reading.children_rss;
        self.gone.clear();
        if reading.cgroup.is_some() {
            self.cgroup = reading.cgroup.clone();
        }
        let sample = SampleReport {
            elapsed_seconds: elapsed,
            stage,
            tree_rss_bytes: reading.tree_rss,
            parent_rss_bytes: reading.parent_rss,
            children_rss_bytes: reading.children_rss,
            tree_uss_bytes: reading.tree_uss,
            tree_pss_bytes: reading.tree_pss,
            tree_physical_footprint_bytes: reading.tree_physical_footprint,
            process_count: reading.process_count,
            rss_processes: reading.rss_processes,
            rss_complete: reading.rss_complete,
        };
        if self.max_samples > 0 {
            if self.trace.len() == self.max_samples {
                self.trace.pop_front();
            }
            self.trace.push_back(sample.clone());
        }
        self.timeline.push(TimelinePoint {
            elapsed_seconds: elapsed,
            end_seconds: elapsed,
            tree_rss_bytes: reading.tree_rss,
            parent_rss_bytes: reading.parent_rss,
            children_rss_bytes: reading.children_rss,
            tree_rss_bound_bytes: reading.tree_rss_bound,
            cgroup_memory_bytes: reading.cgroup_peak,
            process_count: reading.process_count,
            samples: 1,
            ..TimelinePoint::default()
        });
        self.latest = Some(sample);
        self.last_tree = reading;
    }
}
