//! The engine: records stage calls from every thread, hands samples and boundary
//! readings to the measurements with the records they fall in, and takes snapshots
//! into a [`Report`](crate::Report). It knows no measurement's figures: each
//! measurement declares them, and the ones it holds (by record, of counters, of thread
//! counters: [`crate::sources`]) make them from what it tells them.
//!
//! Data flows one way: threads own their stacks and counters ([`thread`]); a merge
//! moves counters into the shared [`records`] at most about once a millisecond per
//! thread, at a boundary reading ([`boundary`]), on an error or a long call; full
//! samples ([`sample`]) count toward every open stage; async calls ([`calls`]) are
//! open apart from any thread's stack, kept by the thread that opened them; log lines
//! are handed to the sampler thread as [`Event`]s; [`snapshot`] turns it all into a
//! report. The hot path, `enter`, `exit` and the merge, is [`stack`]; this file holds
//! the engine's state and its interface.
//!
//! The engine does no I/O of its own: the measurement by record reads at boundaries
//! through the reader it was given, the tree reader is handed to each sample, and
//! reports, metrics and warnings leave through [`Publisher`](crate::publish::Publisher).
//! A failure is kept here as data.
//!
//! # The engine's interface
//!
//! What the rest of the crate calls: the only `pub(crate)` functions of `recorder/`
//! (a layout test holds this list to them). Everything else is each component's own.
//!
//! | what | functions | file |
//! | --- | --- | --- |
//! | the run | `Recorder::new`, `register_thread`, `thread_exited`, `take_sections`, `end`, `end_with`, `is_ended`, `owner_stage_now` | `mod.rs` |
//! | a call | `enter`, `exit`, `set_error`, `set_run_message` | `stack.rs` |
//! | an async call | `open_async`, `open_and_poll`, `push_poll`, `pop_poll`, `close_async`, `close_if_open_here` | `calls.rs` |
//! | a `tracing` span | `register_span`, `find_span`, `note_made_span`, `open_made_span` | `span_calls.rs` |
//! | a sample | `take_sample` | `sample.rs` |
//! | a child reaped | `child_exited` | `mod.rs` |
//! | the log | `connect`, `log_event`; `Line::text`, `Line::live`, `OpenStage::path` | `events.rs` |
//! | a report | `snapshot`, `snapshot_with` | `snapshot.rs` |
//! | a stage's name | `short_type_name` | `records.rs` |

mod boundary;
mod calls;
mod counters;
mod events;
mod extra;
#[cfg(test)]
mod fake;
mod id_map;
mod owned;
mod records;
mod sample;
mod snapshot;
#[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the `tracing` layer's
mod span_calls;
mod spans;
mod stack;
mod tally;
mod thread;
mod threaded;
mod timeline;

pub(crate) use calls::Parent;
pub(crate) use events::{Event, Line, OpenStage};
pub(crate) use records::{short_type_name, StageName};
pub(crate) use tally::OpenCall;
pub(crate) use thread::ThreadSlot;

use crate::config::Config;
use crate::sources::Edge;
use records::Records;
use sample::Samples;
use spans::Spans;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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
    /// Full samples: the latest, the recent ones, the timeline and the sampler's health.
    pub(crate) samples: Samples,
    /// The measurement by record (the tree's memory and the kernel's marks), held
    /// here: it reads at stage boundaries, in the lock.
    by_record: Option<Box<dyn crate::sources::Measurement>>,
    /// The records of the frames on a thread's stack, for a boundary reading, and those
    /// whose calls reused the newest reading, for a merge (kept to reuse their
    /// capacity).
    stack: Vec<u32>,
    reused: Vec<u32>,
    /// Calls kept one by one.
    pub(crate) spans: Spans,
    /// The monitor's own failures.
    pub(crate) failures: Failures,
    /// The measurement of counters (CPU and I/O), held here: its hooks run in the lock.
    counted: counters::Counted,
    /// Set once finished.
    pub(crate) ended: Option<Ended>,
    /// The `Display` text of `main`'s `Err`, where it has one.
    pub(crate) run_message: Option<String>,
    /// The measurement of thread counters (the heap), held here: its sweeps run in the
    /// lock.
    threaded: threaded::Threaded,
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
    /// What calls read of the counters without a lock.
    counters: counters::CallCounters,
    /// The table of every thread's counters of the measurement of thread counters,
    /// where it counts: each frame notes its thread's.
    counted_threads: Option<crate::sources::Threads>,
    /// The record open on the monitor's own thread, plus one (0: none): where a stage
    /// entered on an idle thread nests (fork-join). Written by that thread only.
    owner_top: Padded<AtomicU32>,
    /// Every thread that recorded a stage, the monitor's own first.
    threads: Mutex<Vec<Arc<ThreadSlot>>>,
    state: Mutex<State>,
    events: Mutex<Option<Sender<Event>>>,
}

/// Nanoseconds as seconds.
fn seconds(nanos: u64) -> f64 {
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
    /// A recorder that times everything with `clock` (a mock one in tests), and folds
    /// what `sources` read: it takes the measurements by record, of counters and of
    /// thread counters among them to hold itself (their hooks run in its lock), and
    /// declares the others, which the sampler thread reads. Called on the monitor's own
    /// thread.
    pub(crate) fn new(
        config: Config,
        info: RunInfo,
        clock: crate::clock::Clock,
        sources: &mut Vec<Box<dyn crate::sources::Measurement>>,
    ) -> Recorder {
        let by_record = sources
            .iter()
            .position(|s| s.by_record())
            .map(|at| sources.remove(at));
        let mut counted = match sources.iter().position(|s| s.counters() > 0) {
            Some(at) => counters::Counted::of(sources.remove(at)),
            None => counters::Counted::default(),
        };
        let thread_clock = counted.thread_clock().unwrap_or(|| None);
        let threaded = match sources.iter().position(|s| s.per_thread()) {
            Some(at) => threaded::Threaded::of(sources.remove(at)),
            None => threaded::Threaded::default(),
        };
        let mut extra = extra::Extra::of(sources);
        counted.section_into(&mut extra);
        let probe = 1u64 << 40;
        let nanos_per_probe = clock.delta_as_nanos(0, probe).max(1) as f64;
        let ticks = |nanos: u64| (nanos as f64 * probe as f64 / nanos_per_probe) as u64;
        let reuse_ticks = ticks(BOUNDARY_REUSE_NANOS);
        let origin = clock.raw();
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
            counters: counters::CallCounters::new(thread_clock, reuse_ticks),
            counted_threads: threaded.threads(),
            threads: Mutex::new(Vec::new()),
            state: Mutex::new(State {
                records: Records::default(),
                samples: Samples::new(config.max_samples),
                by_record,
                stack: Vec::new(),
                reused: Vec::new(),
                spans: Spans::new(),
                failures: Failures::default(),
                counted,
                ended: None,
                run_message: None,
                threaded,
                extra,
            }),
            events: Mutex::new(None),
            config,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
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
    fn elapsed(&self, ticks: u64) -> f64 {
        seconds(self.clock.delta_as_nanos(self.origin, ticks))
    }

    /// Seconds from clock ticks `begun` to now.
    fn since(&self, begun: u64) -> f64 {
        seconds(self.clock.delta_as_nanos(begun, self.clock.raw()))
    }

    fn ticks_seconds(&self, ticks: u64) -> f64 {
        seconds(self.clock.delta_as_nanos(0, ticks))
    }

    /// Declares the measurement sources whose readings samples will bring, in place of
    /// those it was made with.
    #[cfg(test)]
    pub(super) fn set_sources(&self, sources: &[Box<dyn crate::sources::Measurement>]) {
        self.lock().extra = extra::Extra::of(sources);
    }

    /// Takes the sources' sections as they are now (once opened, before any reading):
    /// a report says why the GPU is not read even if no sample read it.
    pub(crate) fn take_sections(&self, sources: &mut [Box<dyn crate::sources::Measurement>]) {
        let sections: Vec<_> = sources
            .iter_mut()
            .filter(|s| s.declared().section.is_some())
            .filter_map(|s| Some((s.declared(), s.section()?)))
            .collect();
        let mut state = self.lock();
        for (measure, value) in sections {
            state.extra.section(measure, value);
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

    /// Merges every thread's counters (summaries and the end).
    fn merge_all(&self) {
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

    /// Sweeps the threads' counters for the stages open on the monitor's own thread
    /// (see [`threaded::Threaded::sweep`]).
    fn sweep_threads(&self, state: &mut State, now: u64) {
        let owner_record = self.owner_record(&state.records);
        self.sweep_threads_to(state, now, owner_record);
    }

    /// Sweeps the threads' counters for `owner_record` (`None`: nobody).
    fn sweep_threads_to(&self, state: &mut State, now: u64, owner_record: Option<u32>) {
        let State {
            threaded,
            records,
            samples,
            ..
        } = state;
        let others = !self.config.current_thread_only;
        let elapsed = || self.elapsed(now);
        threaded.sweep(
            records,
            &mut samples.timeline,
            elapsed,
            owner_record,
            others,
        );
    }

    /// Records a child of this process that exited (read before it was reaped) in the
    /// report's `processes`.
    pub(crate) fn child_exited(&self, child: &crate::memory::Descendant) {
        let elapsed = self.elapsed(self.clock.raw());
        let mut state = self.lock();
        if state.ended.is_none() {
            if let Some(measurement) = state.by_record.as_mut() {
                measurement.process_seen(child, elapsed);
            }
        }
    }

    /// The stage path open on the monitor's own thread now, or `"workflow"`.
    pub(crate) fn owner_stage_now(&self) -> String {
        self.owner_stage(&self.lock().records)
    }

    /// The stage path open on the monitor's own thread, or `"workflow"`.
    fn owner_stage(&self, records: &Records) -> String {
        match self.owner_record(records) {
            Some(record) => records.path(record),
            None => "workflow".to_owned(),
        }
    }

    /// The record open on the monitor's own thread (`None`: the workflow).
    fn owner_record(&self, records: &Records) -> Option<u32> {
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
        self.sweep_threads(&mut state, self.clock.raw());
        if let (Some(root), Some(code)) = (self.config.root, exit_code) {
            // The command `stemmon run` watched and reaped.
            if let Some(measurement) = state.by_record.as_mut() {
                measurement.process_exit_code(root, code);
            }
        }
        state.ended = Some(Ended {
            at: self.clock.raw(),
            error,
            exit_code,
        });
        self.ended.store(true, Ordering::Relaxed);
    }
}
