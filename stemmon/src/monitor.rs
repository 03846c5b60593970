//! `Monitor` and `MonitorBuilder`: the lifecycle, and the state the sampler and the
//! stage guards share.

use crate::context;
use crate::error::Error;
use crate::log;
use crate::memory::{self, SelfRss, TreeReader, TreeReading};
use crate::report::{self, Report, SampleReport, StageReport};
use crate::sampler;
use crate::stage::{short_type_name, Record, Stage, StageName, Stats};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A stage-boundary reading younger than this is reused: it keeps a hot stage cheap.
const BOUNDARY_REUSE: Duration = Duration::from_millis(1);
/// Stage completions are logged the first time and then only when this long or longer.
const LOG_COMPLETION_AFTER: f64 = 0.1;

static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) sample_interval: Duration,
    pub(crate) log_interval: Option<Duration>,
    pub(crate) output: Option<PathBuf>,
    pub(crate) detailed_memory: bool,
    pub(crate) max_samples: usize,
}

/// Configures and starts a [`Monitor`]; made by [`Monitor::builder`].
///
/// The defaults: a sample every second, a log line every 30 seconds, no output file,
/// RSS only (no USS / PSS), and summaries only (no raw samples kept).
#[derive(Debug)]
#[must_use = "a builder does nothing until `.start()` is called"]
pub struct MonitorBuilder {
    config: Config,
    portable: bool,
}

impl MonitorBuilder {
    /// Time between background samples of the process tree. Must be greater than zero.
    pub fn sample_interval(mut self, interval: Duration) -> Self {
        self.config.sample_interval = interval;
        self
    }

    /// Time between `running` log lines; `None` turns the live log off (the report is
    /// then written at the end only). Must be greater than zero.
    pub fn log_interval(mut self, interval: Option<Duration>) -> Self {
        self.config.log_interval = interval;
        self
    }

    /// Where to write the JSON report. Parent directories are created; the file is
    /// replaced atomically at each log line and at the end.
    pub fn output(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.output = Some(path.into());
        self
    }

    /// Also read USS and PSS (Linux) or the physical footprint (macOS). Slower.
    pub fn detailed_memory(mut self, detailed: bool) -> Self {
        self.config.detailed_memory = detailed;
        self
    }

    /// Keep the last `count` raw samples in the report; 0 keeps summaries only.
    pub fn max_samples(mut self, count: usize) -> Self {
        self.config.max_samples = count;
        self
    }

    /// Read memory through sysinfo even where a native reader exists.
    #[doc(hidden)]
    pub fn portable_reader(mut self, portable: bool) -> Self {
        self.portable = portable;
        self
    }

    fn validate(&self) -> Result<(), Error> {
        let invalid = |setting, reason: &str| {
            Err(Error::InvalidConfig {
                setting,
                reason: reason.to_owned(),
            })
        };
        if self.config.sample_interval.is_zero() {
            return invalid("sample_interval", "must be greater than zero");
        }
        if self.config.log_interval.is_some_and(|d| d.is_zero()) {
            return invalid(
                "log_interval",
                "must be greater than zero, or `None` to turn logging off",
            );
        }
        if let Some(path) = &self.config.output {
            if path.as_os_str().is_empty() || path.file_name().is_none() {
                return invalid("output", "must name a file");
            }
        }
        Ok(())
    }

    /// Starts the monitor: makes it the calling thread's active monitor, takes the
    /// first sample, starts the `stemmon-sampler` thread and logs `started`.
    ///
    /// Fails if a setting is out of range, if this thread already has an active
    /// monitor, or if the thread cannot be started.
    pub fn start(self) -> Result<Monitor, Error> {
        self.validate()?;
        if !context::active().is_null() {
            return Err(Error::AlreadyActive);
        }
        let mut reader = if self.portable {
            memory::portable_reader(self.config.detailed_memory)
        } else {
            memory::default_reader(self.config.detailed_memory)
        };
        let shared = Arc::new(Shared::new(self.config, reader.name()));
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
        MonitorBuilder {
            config: Config {
                sample_interval: Duration::from_secs(1),
                log_interval: Some(Duration::from_secs(30)),
                output: None,
                detailed_memory: false,
                max_samples: 0,
            },
            portable: false,
        }
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
        {
            let mut state = self.shared.lock();
            state.ended = Some(Instant::now());
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

/// One frame of the stage stack: a call in progress (or, for async stages, one poll).
#[derive(Debug)]
struct Frame {
    record: u32,
    seq: u64,
    entered: Instant,
    /// `false` for the frame of one poll of an async stage, whose call is tracked apart.
    call: bool,
}

/// What the sampler, the guards and the monitor share, behind one lock.
pub(crate) struct State {
    records: Vec<Record>,
    roots: Vec<u32>,
    stack: Vec<Frame>,
    /// Async calls started and not yet closed: (seq, record, started).
    open_async: Vec<(u64, u32, Instant)>,
    next_seq: u64,
    total: Stats,
    peak_rss_stage: Option<String>,
    peak_rss_elapsed_seconds: Option<f64>,
    latest: Option<SampleReport>,
    trace: VecDeque<SampleReport>,
    max_samples: usize,
    /// Descendants and process count of the latest full sample, for boundary readings.
    last_tree: TreeReading,
    /// The latest reading of the parent alone and when it was taken.
    boundary: Option<(Instant, u64)>,
    self_rss: SelfRss,
    sampling_attempts: u64,
    sampling_seconds: f64,
    max_sampling_seconds: f64,
    max_sample_gap_seconds: f64,
    sampling_error: Option<String>,
    output_error: Option<String>,
    warned_sampling: bool,
    warned_output: bool,
    ended: Option<Instant>,
    error: Option<String>,
}

pub(crate) struct Shared {
    pub(crate) epoch: u64,
    pub(crate) config: Config,
    pub(crate) sampler: &'static str,
    origin: Instant,
    pid: u32,
    platform: String,
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

impl Shared {
    fn new(config: Config, sampler: &'static str) -> Shared {
        Shared {
            epoch: NEXT_EPOCH.fetch_add(1, Ordering::Relaxed),
            sampler,
            origin: Instant::now(),
            pid: std::process::id(),
            platform: platform(),
            state: Mutex::new(State {
                records: Vec::new(),
                roots: Vec::new(),
                stack: Vec::new(),
                open_async: Vec::new(),
                next_seq: 1,
                total: Stats::default(),
                peak_rss_stage: None,
                peak_rss_elapsed_seconds: None,
                latest: None,
                trace: VecDeque::with_capacity(config.max_samples.min(4096)),
                max_samples: config.max_samples,
                last_tree: TreeReading::default(),
                boundary: None,
                self_rss: SelfRss::new(),
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

    fn elapsed(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.origin).as_secs_f64()
    }

    /// Opens a call of the stage `name` under the current top of the stack.
    pub(crate) fn enter(&self, name: StageName) -> Stage {
        let now = Instant::now();
        let mut state = self.lock();
        if state.ended.is_some() {
            return Stage::inert();
        }
        let parent = state.stack.last().map(|frame| frame.record);
        let record = state.find_or_create(parent, name, self.elapsed(now));
        state.records[record as usize].calls += 1;
        let seq = state.take_seq();
        state.stack.push(Frame {
            record,
            seq,
            entered: now,
            call: true,
        });
        state.boundary_reading(self, now, record);
        Stage::new(self.epoch, seq)
    }

    /// Closes the call `seq`; `error` is the `type_name` of the `Err` it returned.
    pub(crate) fn exit(&self, seq: u64, error: Option<&'static str>) {
        let now = Instant::now();
        let panicking = std::thread::panicking();
        let mut state = self.lock();
        if state.ended.is_some() {
            return;
        }
        let Some(index) = state.stack.iter().rposition(|frame| frame.seq == seq) else {
            return;
        };
        let frame = state.stack.remove(index);
        let error = if panicking {
            Some(Cow::Borrowed("panic"))
        } else {
            error.map(|e| Cow::Owned(short_type_name(e)))
        };
        let message = state.close_call(self, frame.record, frame.entered, now, error);
        drop(state);
        if let Some(message) = message {
            self.log_event(&message);
        }
    }

    pub(crate) fn open_async(&self, name: &'static str) -> (u32, u64, Instant) {
        let now = Instant::now();
        let mut state = self.lock();
        let parent = state.stack.last().map(|frame| frame.record);
        let record = state.find_or_create(parent, Cow::Borrowed(name), self.elapsed(now));
        state.records[record as usize].calls += 1;
        let seq = state.take_seq();
        state.open_async.push((seq, record, now));
        state.boundary_reading(self, now, record);
        (record, seq, now)
    }

    pub(crate) fn close_async(
        &self,
        record: u32,
        seq: u64,
        started: Instant,
        error: Option<Cow<'static, str>>,
    ) {
        let now = Instant::now();
        let mut state = self.lock();
        if state.ended.is_some() {
            return;
        }
        state.open_async.retain(|(s, _, _)| *s != seq);
        let message = state.close_call(self, record, started, now, error);
        drop(state);
        if let Some(message) = message {
            self.log_event(&message);
        }
    }

    pub(crate) fn push_poll_frame(&self, record: u32) -> Option<u64> {
        let mut state = self.lock();
        if state.ended.is_some() {
            return None;
        }
        let seq = state.take_seq();
        state.stack.push(Frame {
            record,
            seq,
            entered: Instant::now(),
            call: false,
        });
        Some(seq)
    }

    pub(crate) fn pop_poll_frame(&self, seq: u64) {
        let mut state = self.lock();
        if let Some(index) = state.stack.iter().rposition(|frame| frame.seq == seq) {
            state.stack.remove(index);
        }
    }

    /// Takes one full tree sample with `reader` and applies it.
    pub(crate) fn take_sample(&self, reader: &mut dyn TreeReader) {
        let started = Instant::now();
        let reading = reader.read_tree(self.pid);
        let done = Instant::now();
        let seconds = done.duration_since(started).as_secs_f64();
        let mut state = self.lock();
        state.sampling_attempts += 1;
        state.sampling_seconds += seconds;
        state.max_sampling_seconds = state.max_sampling_seconds.max(seconds);
        match reading {
            Ok(reading) => state.apply_sample(reading, done, self.elapsed(done)),
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

    /// The report as of now.
    pub(crate) fn summary(&self) -> Report {
        let state = self.lock();
        let now = state.ended.unwrap_or_else(Instant::now);
        let mut open = vec![(0.0f64, 0u32); state.records.len()];
        let calls = state
            .stack
            .iter()
            .filter(|frame| frame.call)
            .map(|frame| (frame.record, frame.entered))
            .chain(state.open_async.iter().map(|(_, r, at)| (*r, *at)));
        for (record, entered) in calls {
            let seconds = now.saturating_duration_since(entered).as_secs_f64();
            let slot = &mut open[record as usize];
            slot.0 += seconds;
            slot.1 += 1;
        }
        let stages = state
            .records
            .iter()
            .zip(open)
            .enumerate()
            .map(|(id, (record, (open_seconds, open_calls)))| {
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
        }
    }

    /// Prints one log line for `event` and rewrites the report; nothing when logging is off.
    pub(crate) fn log_event(&self, event: &str) {
        if self.config.log_interval.is_none() {
            return;
        }
        let _order = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let report = self.summary();
        self.write(&report);
        log::print_line(event, &report);
    }

    /// Rewrites the report file with a fresh summary.
    pub(crate) fn write_report(&self) {
        let _order = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let report = self.summary();
        self.write(&report);
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
    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    fn find_or_create(&mut self, parent: Option<u32>, name: StageName, start: f64) -> u32 {
        let siblings = match parent {
            Some(parent) => &self.records[parent as usize].children,
            None => &self.roots,
        };
        let same = |a: &str, b: &str| std::ptr::eq(a, b) || a == b;
        if let Some(&id) = siblings
            .iter()
            .rev()
            .find(|&&id| same(&self.records[id as usize].name, &name))
        {
            return id;
        }
        let id = self.records.len() as u32;
        let path = match parent {
            Some(parent) => format!("{}/{}", self.records[parent as usize].path, name),
            None => name.to_string(),
        };
        self.records.push(Record::new(name, path, parent, start));
        match parent {
            Some(parent) => self.records[parent as usize].children.push(id),
            None => self.roots.push(id),
        }
        id
    }

    /// Reads the parent (or reuses a reading under 1 ms old) and counts it toward
    /// `record`; a fresh reading also counts toward every stage on the stack.
    fn boundary_reading(&mut self, shared: &Shared, now: Instant, record: u32) {
        let fresh = match self.boundary {
            Some((at, _)) if now.saturating_duration_since(at) < BOUNDARY_REUSE => false,
            _ => match self.self_rss.read() {
                Some(rss) => {
                    self.boundary = Some((now, rss));
                    true
                }
                None => return,
            },
        };
        let Some((_, parent)) = self.boundary else {
            return;
        };
        let children = self.last_tree.children_rss;
        let reading = TreeReading {
            parent_rss: Some(parent),
            children_rss: children,
            tree_rss: Some(parent + children.unwrap_or(0)),
            process_count: self.last_tree.process_count.max(1),
            ..TreeReading::default()
        };
        self.records[record as usize].stats.apply_boundary(&reading);
        if fresh {
            for frame in &self.stack {
                if frame.record != record {
                    self.records[frame.record as usize]
                        .stats
                        .apply_boundary(&reading);
                }
            }
            if self.total.apply_boundary(&reading) {
                self.peak_rss_stage = Some(self.records[record as usize].path.clone());
                self.peak_rss_elapsed_seconds = Some(shared.elapsed(now));
            }
        }
    }

    fn close_call(
        &mut self,
        shared: &Shared,
        record: u32,
        entered: Instant,
        now: Instant,
        error: Option<Cow<'static, str>>,
    ) -> Option<String> {
        self.boundary_reading(shared, now, record);
        let seconds = now.saturating_duration_since(entered).as_secs_f64();
        let record = &mut self.records[record as usize];
        record.completed += 1;
        record.wall_seconds += seconds;
        record.min_wall_seconds = record.min_wall_seconds.min(seconds);
        record.max_wall_seconds = record.max_wall_seconds.max(seconds);
        let long = seconds >= LOG_COMPLETION_AFTER;
        let message = match error {
            None => (record.completed == 1 || long)
                .then(|| format!("completed {} ({seconds:.2}s)", record.path)),
            Some(error) => {
                record.errors += 1;
                let message = (record.errors == 1 || long)
                    .then(|| format!("failed {} ({error})", record.path));
                record.error = Some(error.into_owned());
                message
            }
        };
        message.filter(|_| shared.config.log_interval.is_some())
    }

    fn apply_sample(&mut self, reading: TreeReading, at: Instant, elapsed: f64) {
        let stage = match self.stack.last() {
            Some(frame) => self.records[frame.record as usize].path.clone(),
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
        let mut seen = Vec::with_capacity(self.stack.len());
        for frame in &self.stack {
            // A record can be on the stack twice (an async stage polled inside itself).
            if !seen.contains(&frame.record) {
                seen.push(frame.record);
                self.records[frame.record as usize]
                    .stats
                    .apply_sample(&reading);
            }
        }
        if let Some(parent) = reading.parent_rss {
            self.boundary = Some((at, parent));
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
