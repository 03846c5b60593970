//! `Monitor` and `MonitorBuilder`: the lifecycle, and the state the sampler and the
//! stage guards share.

use crate::builder::{Config, MonitorBuilder, Reader};
use crate::context::{self, Owner, OwnerCell, Published, POLL};
use crate::error::Error;
use crate::log;
use crate::memory::{self, SelfReader, TreeReader, TreeReading}; // peaks:
use crate::report::{self, CgroupReport, HighWaterMarks, Report, SampleReport, StageReport}; // peaks:
use crate::sampler;
use crate::stage::{short_type_name, BoundaryInterval, Record, Stage, StageName, Stats}; // peaks:
use std::borrow::Cow;
use std::cell::RefMut;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
#[cfg(test)]
use std::time::Duration;
use std::time::Instant;

/// A stage-boundary reading younger than this is reused: it keeps a hot stage cheap.
const BOUNDARY_REUSE_NANOS: u64 = 1_000_000;
/// Stage completions are logged the first time and then only when this long or longer.
const LOG_COMPLETION_AFTER_NANOS: u64 = 100_000_000;

static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

impl Monitor {
    pub(crate) fn start(config: Config) -> Result<Monitor, Error> {
        let make: fn(bool) -> Box<dyn TreeReader> = match config.reader {
            Reader::Portable => memory::portable_reader,
            _ => memory::default_reader,
        };
        Monitor::start_with(config, make)
    }

    fn start_with(config: Config, make: fn(bool) -> Box<dyn TreeReader>) -> Result<Monitor, Error> {
        if !context::active().is_null() {
            return Err(Error::AlreadyActive);
        }
        let mut reader = make(config.detailed_memory);
        // peaks: the marks as asked (builder, then STEMMON_HIGH_WATER_MARKS) and as readable.
        let root = config.root.unwrap_or_else(std::process::id);
        let marks = reader.configure_marks(memory::marks_wanted(config.high_water_marks), root);
        let shared = Arc::new(Shared::new(config, reader.name(), marks));
        shared.take_sample(&mut *reader);
        let (stop, stopped) = mpsc::channel();
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("stemmon-sampler".into())
                .spawn(move || sampler::run(&shared, reader, &stopped))
                .map_err(Error::Spawn)?
        };
        context::set_active(Arc::as_ptr(&shared));
        shared.log_event("started");
        Ok(Monitor {
            shared,
            sampler: Some((stop, thread)),
            finished: false,
            _not_send: PhantomData,
        })
    }
}

/// The sampler's stop signal (dropped to stop it) and its thread, which hands back its reader.
type SamplerThread = (mpsc::Sender<()>, JoinHandle<Box<dyn TreeReader>>);

/// A running monitor: samples the process tree in the background, records stages, and
/// writes the report.
///
/// One monitor is active per thread. It belongs to the thread that started it (it is
/// neither `Send` nor `Sync`); `#[monitored]` calls on other threads record nothing.
///
/// ```no_run
/// use std::time::Duration;
///
/// fn main() -> Result<(), stemmon::Error> {
///     let monitor = stemmon::Monitor::builder()
///         .sample_interval(Duration::from_millis(500))
///         .output("report.json")
///         .start()?;
///     {
///         let _fit = monitor.stage("fit")?;
///         // ... fit a model ...
///     }
///     let report = monitor.finish();
///     println!("peak tree RSS: {:?} bytes", report.peaks.peak_tree_rss_bytes);
///     Ok(())
/// }
/// ```
///
/// Dropping a monitor without [`finish`](Monitor::finish) finalizes it as well; when
/// that happens during a panic, the report's `error` is `"panic"`.
pub struct Monitor {
    shared: Arc<Shared>,
    sampler: Option<SamplerThread>,
    finished: bool,
    _not_send: PhantomData<*const ()>,
}

// A panic cannot leave the monitor inconsistent: its state sits behind a lock whose
// poisoning is ignored, and a stage dropped while unwinding is recorded as failed.
impl std::panic::UnwindSafe for Monitor {}
impl std::panic::RefUnwindSafe for Monitor {}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("config", &self.shared.config)
            .field("sampler", &self.shared.sampler)
            .finish_non_exhaustive()
    }
}

impl Monitor {
    /// A builder with the default settings.
    pub fn builder() -> MonitorBuilder {
        MonitorBuilder::default()
    }

    /// Opens a stage that ends when the returned guard is dropped. Stages opened while
    /// another is open nest inside it; calls of the same path are aggregated.
    ///
    /// Fails if `name` is empty, or if this monitor is not the calling thread's active one.
    pub fn stage(&self, name: impl Into<Cow<'static, str>>) -> Result<Stage, Error> {
        let name = name.into();
        if name.is_empty() {
            return Err(Error::EmptyStageName);
        }
        if !std::ptr::eq(context::active(), Arc::as_ptr(&self.shared)) {
            return Err(Error::NotActive);
        }
        Ok(self.shared.enter(name))
    }

    /// A snapshot of the report so far; the monitor keeps running.
    pub fn summary(&self) -> Report {
        self.shared.merge_owner();
        self.shared.summary()
    }

    /// Takes a last sample, logs `finished`, writes the report and returns it.
    pub fn finish(mut self) -> Report {
        self.finalize(None)
    }

    /// Finishes with `error` as the run's failure (the error type `main` returned).
    pub(crate) fn finish_with_error(mut self, error: Option<String>) -> Report {
        self.finalize(error)
    }

    fn finalize(&mut self, error: Option<String>) -> Report {
        if self.finished {
            return self.shared.summary();
        }
        self.finished = true;
        let mut reader = match self.sampler.take() {
            Some((stop, thread)) => {
                drop(stop);
                thread.join().ok()
            }
            None => None,
        }
        .unwrap_or_else(|| memory::default_reader(self.shared.config.detailed_memory));
        self.shared.take_sample(&mut *reader);
        if let Some(mut owner) = self.shared.owner.try_borrow() {
            self.shared.lock().merge(&self.shared, &mut owner);
            owner.ended = true;
        }
        {
            let mut state = self.shared.lock();
            state.ended = Some(self.shared.clock.raw());
            state.error = error.clone();
        }
        context::clear_active(Arc::as_ptr(&self.shared));
        let event = match &error {
            None => Cow::Borrowed("finished"),
            Some(error) => Cow::Owned(format!("failed ({error})")),
        };
        if self.shared.config.log_interval.is_some() {
            self.shared.log_event(&event);
        } else {
            self.shared.write_report();
        }
        self.shared.summary()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if !self.finished {
            let error = std::thread::panicking().then(|| "panic".to_owned());
            self.finalize(error);
        }
    }
}

/// What the sampler, the guards and the monitor share, behind one lock.
pub(crate) struct State {
    records: Vec<Record>,
    /// Whether a record's first completion was logged.
    logged: Vec<bool>,
    /// Async calls started and not yet closed: (seq, record, started ticks).
    open_async: Vec<(u64, u32, u64)>,
    total: Stats,
    peak_rss_stage: Option<String>,
    peak_rss_elapsed_seconds: Option<f64>,
    latest: Option<SampleReport>,
    trace: VecDeque<SampleReport>,
    max_samples: usize,
    /// Descendants and process count of the latest full sample, for boundary readings.
    last_tree: TreeReading,
    /// The newest reading of the parent alone: (ticks, bytes).
    boundary: Option<(u64, u64)>,
    // peaks: the live descendants' RSS at that reading, those found exited left out.
    boundary_children: Option<u64>,
    // peaks: which of `last_tree.descendants` were found exited.
    gone: Vec<bool>,
    // peaks: the job's cgroup as last read.
    cgroup: Option<CgroupReport>,
    // peaks: records whose `awaiting_interval` is set.
    awaiting: Vec<u32>,
    self_rss: SelfReader, // peaks:
    sampling_attempts: u64,
    sampling_seconds: f64,
    max_sampling_seconds: f64,
    max_sample_gap_seconds: f64,
    sampling_error: Option<String>,
    output_error: Option<String>,
    warned_sampling: bool,
    warned_output: bool,
    /// Ticks at the end, once finished.
    ended: Option<u64>,
    error: Option<String>,
}

pub(crate) struct Shared {
    pub(crate) epoch: u64,
    pub(crate) config: Config,
    pub(crate) sampler: &'static str,
    // peaks: which high-water marks are read.
    high_water_marks: HighWaterMarks,
    pub(crate) clock: quanta::Clock,
    /// Clock ticks in `BOUNDARY_REUSE_NANOS` and in `LOG_COMPLETION_AFTER_NANOS`, so the
    /// hot path compares raw ticks and converts only when it merges.
    reuse_ticks: u64,
    long_ticks: u64,
    origin: u64,
    pid: u32,
    platform: String,
    pub(crate) owner: OwnerCell,
    published: Published,
    state: Mutex<State>,
    /// Orders report writes and log lines: a later snapshot is never overwritten by an earlier.
    write_lock: Mutex<()>,
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

fn warn(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "[stemmon] warning: {message}");
}

fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

impl Shared {
    fn new(config: Config, sampler: &'static str, marks: HighWaterMarks) -> Shared {
        // peaks: the parameter `marks` is new.
        let clock = quanta::Clock::new();
        let probe = 1u64 << 40;
        let nanos_per_probe = clock.delta_as_nanos(0, probe).max(1) as f64;
        let ticks = |nanos: u64| (nanos as f64 * probe as f64 / nanos_per_probe) as u64;
        Shared {
            reuse_ticks: ticks(BOUNDARY_REUSE_NANOS),
            long_ticks: ticks(LOG_COMPLETION_AFTER_NANOS),
            epoch: NEXT_EPOCH.fetch_add(1, Ordering::Relaxed),
            sampler,
            // peaks: the boundary reads the marks of this process only when it is the root.
            high_water_marks: marks.clone(),
            origin: clock.raw(),
            clock,
            pid: config.root.unwrap_or_else(std::process::id),
            platform: platform(),
            owner: OwnerCell::new(),
            published: Published::new(),
            state: Mutex::new(State {
                records: Vec::new(),
                logged: Vec::new(),
                open_async: Vec::new(),
                total: Stats::default(),
                peak_rss_stage: None,
                peak_rss_elapsed_seconds: None,
                latest: None,
                trace: VecDeque::with_capacity(config.max_samples.min(4096)),
                max_samples: config.max_samples,
                last_tree: TreeReading::default(),
                boundary: None,
                boundary_children: None, // peaks:
                gone: Vec::new(),        // peaks:
                cgroup: None,            // peaks:
                awaiting: Vec::new(),    // peaks:
                self_rss: SelfReader::new(marks.parent && config.root.is_none()), // peaks:
                sampling_attempts: 0,
                sampling_seconds: 0.0,
                max_sampling_seconds: 0.0,
                max_sample_gap_seconds: 0.0,
                sampling_error: None,
                output_error: None,
                warned_sampling: false,
                warned_output: false,
                ended: None,
                error: None,
            }),
            write_lock: Mutex::new(()),
            config,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if it ever did, the data is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Seconds from the start to `ticks`.
    fn elapsed(&self, ticks: u64) -> f64 {
        seconds(self.clock.delta_as_nanos(self.origin, ticks))
    }

    /// The record of `name` under the current top of the stack, created if new.
    fn record_for(&self, owner: &mut Owner, name: StageName, now: u64) -> u32 {
        let parent = owner.stack.last().map(|frame| frame.record);
        if let Some(id) = owner.find(parent, &name) {
            return id;
        }
        let mut state = self.lock();
        let path = match parent {
            Some(parent) => format!("{}/{}", state.records[parent as usize].path, name),
            None => name.to_string(),
        };
        state
            .records
            .push(Record::new(name.clone(), path, parent, self.elapsed(now)));
        state.logged.push(false);
        owner.add_node(parent, name)
    }

    /// Opens a call of the stage `name` under the current top of the stack. Owner thread only.
    #[inline]
    pub(crate) fn enter(&self, name: StageName) -> Stage {
        let now = self.clock.raw();
        let mut owner = self.owner.borrow();
        if owner.ended {
            return Stage::inert();
        }
        let record = self.record_for(&mut owner, name, now);
        let seq = owner.push_frame(record, now, &self.published);
        let reuse = now.wrapping_sub(owner.boundary_at) < self.reuse_ticks;
        let delta = owner.delta(record);
        delta.calls += 1;
        delta.saw_boundary |= reuse;
        if !reuse {
            let mut state = self.lock();
            state.merge(self, &mut owner);
            state.boundary_reading(self, &mut owner, now, record, true); // peaks: entering
        }
        Stage::new(self.epoch, seq)
    }

    /// Records the `Err` type the open call `seq` returned. Owner thread only.
    pub(crate) fn set_error(&self, seq: u64, type_name: &'static str) {
        if let Some(mut owner) = self.owner.try_borrow() {
            owner.set_error(seq, type_name);
        }
    }

    /// Closes the call `seq`. Owner thread only.
    #[inline]
    pub(crate) fn exit(&self, seq: u64) {
        let now = self.clock.raw();
        let panicking = std::thread::panicking();
        // Fallible: this runs in drop, possibly while unwinding.
        let Some(mut owner) = self.owner.try_borrow() else {
            return;
        };
        if owner.ended {
            return;
        }
        let Some(frame) = owner.remove_frame(seq, &self.published) else {
            return;
        };
        let error = frame.error;
        let ticks = now.saturating_sub(frame.entered);
        let delta = owner.delta(frame.record);
        delta.completed += 1;
        delta.wall_ticks += ticks;
        delta.min_ticks = delta.min_ticks.min(ticks);
        delta.max_ticks = delta.max_ticks.max(ticks);
        let fast = error.is_none()
            && !panicking
            && ticks < self.long_ticks
            && owner.nodes[frame.record as usize].completed_once
            && now.wrapping_sub(owner.boundary_at) < self.reuse_ticks;
        if fast {
            owner.delta(frame.record).saw_boundary = true;
            return;
        }
        let error = if panicking {
            Some(Cow::Borrowed("panic"))
        } else {
            error.map(|e| Cow::Owned(short_type_name(e)))
        };
        owner.nodes[frame.record as usize].completed_once = true;
        let mut state = self.lock();
        state.merge(self, &mut owner);
        state.boundary_reading(self, &mut owner, now, frame.record, false); // peaks: exiting
        let message = state.finish_call(frame.record, self.clock.delta_as_nanos(0, ticks), error);
        drop(state);
        drop(owner);
        if let Some(message) = message {
            self.log_event(&message);
        }
    }

    /// Merges the owner's counters into the shared records. Owner thread only.
    pub(crate) fn merge_owner(&self) {
        let mut owner = self.owner.borrow();
        self.lock().merge(self, &mut owner);
    }

    /// Starts the call of an async stage; owner thread only. Returns (record, seq, ticks).
    pub(crate) fn open_async(&self, name: &'static str) -> (u32, u64, u64) {
        let now = self.clock.raw();
        let mut owner = self.owner.borrow();
        let record = self.record_for(&mut owner, Cow::Borrowed(name), now);
        let seq = owner.take_seq();
        let mut state = self.lock();
        state.records[record as usize].calls += 1;
        state.open_async.push((seq, record, now));
        state.boundary_reading(self, &mut owner, now, record, true); // peaks: entering
        (record, seq, now)
    }

    /// Closes the call of an async stage; any thread.
    pub(crate) fn close_async(
        &self,
        record: u32,
        seq: u64,
        started: u64,
        error: Option<Cow<'static, str>>,
    ) {
        let now = self.clock.raw();
        let nanos = self.clock.delta_as_nanos(started, now);
        let mut state = self.lock();
        if state.ended.is_some() {
            return;
        }
        state.open_async.retain(|(s, _, _)| *s != seq);
        let record_ref = &mut state.records[record as usize];
        record_ref.completed += 1;
        record_ref.wall_seconds += seconds(nanos);
        record_ref.min_wall_seconds = record_ref.min_wall_seconds.min(seconds(nanos));
        record_ref.max_wall_seconds = record_ref.max_wall_seconds.max(seconds(nanos));
        let message = state.finish_call(record, nanos, error);
        drop(state);
        if let Some(message) = message {
            self.log_event(&message);
        }
    }

    /// Enters an async stage for one poll; owner thread only.
    pub(crate) fn push_poll_frame(&self, record: u32) -> Option<u64> {
        let mut owner = self.owner.borrow();
        if owner.ended {
            return None;
        }
        Some(owner.push_frame(record, POLL, &self.published))
    }

    pub(crate) fn pop_poll_frame(&self, seq: u64) {
        let Some(mut owner) = self.owner.try_borrow() else {
            return;
        };
        owner.remove_frame(seq, &self.published);
    }

    /// Takes one full tree sample with `reader` and applies it.
    pub(crate) fn take_sample(&self, reader: &mut dyn TreeReader) {
        let started = Instant::now();
        // peaks: the stages open when the reading starts overlap its interval too.
        let open_before = self.published.read();
        let reading = reader.read_tree(self.pid);
        let took = started.elapsed().as_secs_f64();
        let done = self.clock.raw();
        let stack = self.published.read();
        let mut state = self.lock();
        state.sampling_attempts += 1;
        state.sampling_seconds += took;
        state.max_sampling_seconds = state.max_sampling_seconds.max(took);
        match reading {
            Ok(reading) => {
                // peaks: an OOM kill in the job's cgroup is logged.
                let kills = reading.oom_kills.unwrap_or(0);
                state.apply_sample(reading, &stack, &open_before, done, self.elapsed(done));
                if kills > 0 {
                    drop(state);
                    self.log_event(&format!("OOM kill in the job's cgroup ({kills})"));
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

    /// The report as of now (as of the last merge for the owner's counters).
    pub(crate) fn summary(&self) -> Report {
        let stack = self.published.read();
        let state = self.lock();
        let now = state.ended.unwrap_or_else(|| self.clock.raw());
        let mut open = vec![(0u64, 0u32); state.records.len()];
        let calls = stack
            .iter()
            .copied()
            .filter(|(_, entered)| *entered != POLL)
            .chain(state.open_async.iter().map(|(_, r, at)| (*r, *at)));
        for (record, entered) in calls {
            if let Some(slot) = open.get_mut(record as usize) {
                slot.0 += self.clock.delta_as_nanos(entered, now);
                slot.1 += 1;
            }
        }
        let stages = state
            .records
            .iter()
            .zip(open)
            .enumerate()
            .map(|(id, (record, (open_nanos, open_calls)))| {
                let open_seconds = seconds(open_nanos);
                let (min, max) = if record.completed > 0 {
                    (record.min_wall_seconds, record.max_wall_seconds)
                } else {
                    (open_seconds / f64::from(open_calls.max(1)), open_seconds)
                };
                StageReport {
                    id: id as u32,
                    name: record.name.to_string(),
                    path: record.path.clone(),
                    parent_id: record.parent,
                    calls: record.calls,
                    errors: record.errors,
                    start_seconds: record.start_seconds,
                    wall_seconds: record.wall_seconds + open_seconds,
                    min_wall_seconds: min,
                    max_wall_seconds: max,
                    error: record.error.clone(),
                    samples: record.stats.samples,
                    partial_rss_samples: record.stats.partial_rss_samples,
                    peak_process_count: record.stats.peak_process_count,
                    peaks: record.stats.peaks.clone(),
                    high_water: record.stats.high_water.clone(), // peaks:
                    ..StageReport::default()
                }
            })
            .collect();
        Report {
            pid: self.pid,
            running: state.ended.is_none(),
            error: state.error.clone(),
            wall_seconds: self.elapsed(now),
            sample_interval: self.config.sample_interval.as_secs_f64(),
            platform: self.platform.clone(),
            sampler: self.sampler.to_owned(),
            detailed_memory: self.config.detailed_memory,
            sampling_attempts: state.sampling_attempts,
            sampling_seconds: state.sampling_seconds,
            max_sampling_seconds: state.max_sampling_seconds,
            max_sample_gap_seconds: state.max_sample_gap_seconds,
            sampling_error: state.sampling_error.clone(),
            output_error: state.output_error.clone(),
            samples: state.total.samples,
            partial_rss_samples: state.total.partial_rss_samples,
            peak_process_count: state.total.peak_process_count,
            peaks: state.total.peaks.clone(),
            peak_rss_stage: state.peak_rss_stage.clone(),
            peak_rss_elapsed_seconds: state.peak_rss_elapsed_seconds,
            stages,
            latest_sample: state.latest.clone(),
            recent_samples: state.trace.iter().cloned().collect(),
            command: self.config.command.clone(),
            high_water: state.total.high_water.clone(), // peaks:
            high_water_marks: self.high_water_marks.clone(), // peaks:
            cgroup: state.cgroup.clone(),               // peaks:
            ..Report::default()
        }
    }

    /// Prints one log line for `event` and rewrites the report; nothing when logging is off.
    pub(crate) fn log_event(&self, event: &str) {
        if self.config.log_interval.is_some() {
            self.publish(Some(event));
        }
    }

    /// Rewrites the report file with a fresh summary.
    pub(crate) fn write_report(&self) {
        self.publish(None);
    }

    /// Rewrites the report and prints the line for `event`, if any, in one ordered step.
    fn publish(&self, event: Option<&str>) {
        let _order = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let report = self.summary();
        self.write(&report);
        if let Some(event) = event {
            // The stage open now, which after a `completed` event is the enclosing one.
            let stage = self
                .published
                .read()
                .last()
                .and_then(|(record, _)| report.stages.get(*record as usize))
                .map_or("workflow", |stage| stage.path.as_str());
            log::print_line(event, stage, &report);
        }
    }

    fn write(&self, report: &Report) {
        let Some(path) = &self.config.output else {
            return;
        };
        let written = serde_json::to_vec_pretty(report)
            .map_err(std::io::Error::other)
            .and_then(|bytes| report::write_atomic(path, &bytes));
        if let Err(error) = written {
            let message = format!("could not write the report to {}: {error}", path.display());
            let mut state = self.lock();
            state.output_error = Some(message.clone());
            if !std::mem::replace(&mut state.warned_output, true) {
                drop(state);
                warn(&message);
            }
        }
    }
}

impl State {
    /// Merges the owner's counters; a stage that reused a boundary reading gets it now
    /// (the cached reading is the one it saw: it is replaced only after this merge).
    fn merge(&mut self, shared: &Shared, owner: &mut RefMut<'_, Owner>) {
        let nanos = |ticks: u64| seconds(shared.clock.delta_as_nanos(0, ticks));
        let boundary = self.boundary_tree();
        for (id, delta) in owner.drain() {
            let record = &mut self.records[id as usize];
            record.calls += delta.calls;
            if delta.completed > 0 {
                record.completed += delta.completed;
                record.wall_seconds += nanos(delta.wall_ticks);
                record.min_wall_seconds = record.min_wall_seconds.min(nanos(delta.min_ticks));
                record.max_wall_seconds = record.max_wall_seconds.max(nanos(delta.max_ticks));
            }
            if let (true, Some(reading)) = (delta.saw_boundary, &boundary) {
                record.stats.apply_boundary(reading);
                // peaks: that reading's interval ended before the call: the next one counts.
                if !std::mem::replace(&mut record.stats.awaiting_interval, true) {
                    self.awaiting.push(id);
                }
            }
        }
    }

    /// The latest parent reading with the descendants as last sampled.
    fn boundary_tree(&self) -> Option<TreeReading> {
        let (_, parent) = self.boundary?;
        let children = self.boundary_children; // peaks: exited descendants left out
        Some(TreeReading {
            parent_rss: Some(parent),
            children_rss: children,
            tree_rss: Some(parent + children.unwrap_or(0)),
            process_count: self.last_tree.process_count.max(1),
            ..TreeReading::default()
        })
    }

    /// Reads the parent (or reuses a reading under 1 ms old) and counts it toward
    /// `record`; a fresh reading also counts toward every stage on the stack.
    fn boundary_reading(
        &mut self,
        shared: &Shared,
        owner: &mut RefMut<'_, Owner>,
        now: u64,
        record: u32,
        entering: bool, // peaks:
    ) {
        let fresh = match self.boundary {
            Some((at, _)) if shared.clock.delta_as_nanos(at, now) < BOUNDARY_REUSE_NANOS => None,
            _ => match self.self_rss.read() {
                Some(reading) => {
                    self.boundary = Some((now, reading.rss));
                    // peaks: a boundary never counts a descendant that has exited: when a
                    // child was reaped or became a zombie, each last-sampled one is checked.
                    let descendants = &self.last_tree.descendants;
                    let mut reading = reading;
                    if reading.children_changed && !descendants.is_empty() {
                        let (live, exited) = memory::live_children_rss(descendants, &mut self.gone);
                        self.boundary_children = Some(live);
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
        owner.boundary_at = self.boundary.map_or(0, |(at, _)| at);
        let Some(reading) = self.boundary_tree() else {
            return;
        };
        self.records[record as usize].stats.apply_boundary(&reading);
        let Some(fresh) = fresh else {
            // peaks: a reused reading's interval ended before this call.
            let stats = &mut self.records[record as usize].stats;
            if !std::mem::replace(&mut stats.awaiting_interval, true) {
                self.awaiting.push(record);
            }
            return;
        };
        // peaks: the interval this reading closes, for every record open in it.
        let interval = BoundaryInterval {
            parent_hwm: fresh.hwm,
            reaped: fresh.reaped,
            children_rss: self.boundary_children.unwrap_or(0),
        };
        for id in self.awaiting.drain(..) {
            self.records[id as usize].stats.apply_interval(&interval);
        }
        if !entering {
            self.records[record as usize]
                .stats
                .apply_interval(&interval);
        }
        self.total.apply_interval(&interval);
        for frame in &owner.stack {
            if frame.record != record {
                let stats = &mut self.records[frame.record as usize].stats;
                stats.apply_boundary(&reading);
                stats.apply_interval(&interval);
            }
        }
        if self.total.apply_boundary(&reading) {
            self.peak_rss_stage = Some(self.records[record as usize].path.clone());
            self.peak_rss_elapsed_seconds = Some(shared.elapsed(now));
        }
    }

    /// Records how a call ended; returns the log line it deserves, if any.
    fn finish_call(
        &mut self,
        record: u32,
        nanos: u64,
        error: Option<Cow<'static, str>>,
    ) -> Option<String> {
        let first = !std::mem::replace(&mut self.logged[record as usize], true);
        let long = nanos >= LOG_COMPLETION_AFTER_NANOS;
        let record = &mut self.records[record as usize];
        match error {
            None => (first || long)
                .then(|| format!("completed {} ({:.2}s)", record.path, seconds(nanos))),
            Some(error) => {
                record.errors += 1;
                let message = (record.errors == 1 || long)
                    .then(|| format!("failed {} ({error})", record.path));
                record.error = Some(error.into_owned());
                message
            }
        }
    }

    fn apply_sample(
        &mut self,
        reading: TreeReading,
        stack: &[(u32, u64)],
        open_before: &[(u32, u64)], // peaks:
        at: u64,
        elapsed: f64,
    ) {
        let stage = match stack.last() {
            Some((record, _)) => self.records[*record as usize].path.clone(),
            None => "workflow".to_owned(),
        };
        if let Some(latest) = &self.latest {
            self.max_sample_gap_seconds = self
                .max_sample_gap_seconds
                .max(elapsed - latest.elapsed_seconds);
        }
        if self.total.apply_sample(&reading) {
            self.peak_rss_stage = Some(stage.clone());
            self.peak_rss_elapsed_seconds = Some(elapsed);
        }
        let mut seen = Vec::with_capacity(stack.len());
        for (record, _) in stack {
            // A record can be on the stack twice (an async stage polled inside itself).
            if !seen.contains(record) {
                seen.push(*record);
                if let Some(record) = self.records.get_mut(*record as usize) {
                    record.stats.apply_sample(&reading);
                }
            }
        }
        // peaks: records that closed in this interval, or saw only a reused reading.
        self.awaiting.clear();
        for (id, record) in self.records.iter_mut().enumerate() {
            if !seen.contains(&(id as u32)) {
                let closed_meanwhile = open_before.iter().any(|(r, _)| *r == id as u32);
                if record.stats.awaiting_interval || closed_meanwhile {
                    record.stats.apply_sample_interval(&reading);
                } else {
                    record.stats.close_interval(reading.children_hwm);
                }
            }
        }
        if let Some(parent) = reading.parent_rss {
            self.boundary = Some((at, parent));
        }
        self.boundary_children = reading.children_rss; // peaks:
        self.gone.clear(); // peaks:
        if reading.cgroup.is_some() {
            self.cgroup = reading.cgroup.clone(); // peaks:
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
        self.latest = Some(sample);
        self.last_tree = reading;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    /// A reader whose every sample fails, as when `/proc` is not mounted.
    struct Denied;

    impl TreeReader for Denied {
        fn name(&self) -> &'static str {
            "denied"
        }

        fn read_tree(&mut self, _root: u32) -> io::Result<TreeReading> {
            Err(io::Error::new(io::ErrorKind::PermissionDenied, "no access"))
        }
    }

    #[test]
    fn failed_samples_are_the_monitors_error_not_the_programs() {
        let builder = Monitor::builder()
            .log_interval(None)
            .sample_interval(Duration::from_millis(5));
        let monitor = Monitor::start_with(builder.config, |_| Box::new(Denied))
            .expect("a failing reader does not stop the start");
        {
            let _stage = monitor.stage("work").unwrap();
            std::thread::sleep(Duration::from_millis(30));
        }
        let report = monitor.finish();
        let error = report.sampling_error.as_deref().unwrap();
        assert_eq!(error, "could not read the process tree: no access");
        assert!(
            report.sampling_attempts >= 3,
            "{}",
            report.sampling_attempts
        );
        assert_eq!(report.samples, 0);
        assert_eq!(report.latest_sample, None);
        assert_eq!(report.sampler, "denied");
        assert_eq!(report.error, None);
        // Stage timing and the parent's boundary readings go on regardless.
        let work = report.stage("work").unwrap();
        assert!(work.wall_seconds >= 0.03);
        assert!(work.peaks.peak_parent_rss_bytes.is_some());
    }
}
