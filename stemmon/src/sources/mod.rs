//! The measurements, each a module behind [`Measurement`]. A measurement declares what
//! it adds to a report in a file of `stemmon_report::fields::measures` (its figures,
//! each a typed [`Field`] with its unit and fold, its timeline series, its figure per
//! process, its section, its `compare --metric`), and reads here. The engine
//! aggregates its figures by the declaration alone, without knowing any of them; the
//! report, `show`, `compare`, `merge`, `plot`, the live line and the exporters take
//! them from the same declaration.
//!
//! A measurement has hooks on two threads:
//! - at every full sample, [`sample`](Measurement::sample), on the sampler thread
//!   (NVML is read there, never on the program's threads), outside the engine's lock;
//! - at a stage boundary that read anew, [`boundary`](Measurement::boundary), on the
//!   call's thread, in the engine's lock: a measurement whose figures a call needs at
//!   its entry and exit (CPU and I/O: counters, differenced per call).
//!
//! Four kinds of measurement are held by the engine, not the sampler thread, because
//! their hooks run in its lock, on the call's thread, or both:
//! - a measurement by record ([`Measurement::by_record`]: the tree's memory and the
//!   kernel's marks) keeps each record's figures itself, from the readings the engine
//!   tells it each record saw: it reads this process at every stage boundary (and so
//!   gives the measurements of counters their boundary reading) and takes every full
//!   sample with the calls it fell in;
//! - a measurement of counters ([`Measurement::counters`]: CPU and I/O) gives
//!   cumulative counters, at boundaries and samples, which the engine differences per
//!   call; its hooks fold what the tree's readers read;
//! - a measurement of thread counters ([`Measurement::threads`]: the heap) keeps each
//!   thread's own counters, which the engine marks at every frame's ends on the call's
//!   thread and sweeps at readings.
//!
//! The others are the sampler thread's. The tree's memory, the job's cgroup, the heap
//! and CPU and I/O are measurements of the core: their fields are typed ones of the
//! report, in the core of the same table; their platform readers are in `sys`. A new
//! measurement is a file here, its name in the list of [`open`], and its declaration.

use crate::config::Config;
/// A thread's counters in a measurement of thread counters, and what they held at one
/// moment: three cumulative counts and the level they leave (the second minus the
/// third), with the highest level the thread reached since the engine last set it.
pub(crate) use crate::heap::slots::{Counts, Slot};
use crate::memory::{Descendant, SelfReading, TreeReader, TreeReading};
use crate::report::{Report, SampleReport, StageReport, TimelinePoint};
pub(crate) use stemmon_report::fields::{Field, Measure};

pub(crate) mod cgroup;
pub(crate) mod cpu;
#[cfg(feature = "gpu")]
pub(crate) mod gpu;
pub(crate) mod heap;
pub(crate) mod tree;

/// What a measurement read at one sample, borrowed from it until the next.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Reading<'a> {
    /// One value per field of its [`Measure::fields`], in order.
    pub(crate) figures: &'a [Option<f64>],
    /// One value per series of its [`Measure::series`], in order.
    pub(crate) series: &'a [Option<f64>],
    /// The processes it has a figure for (its [`Measure::process`]), where it read them
    /// anew: a process's figure is the highest seen, and only a new reading raises it.
    pub(crate) processes: &'a [(u32, f64)],
    /// A line for the log, where the reading saw something worth one (an OOM kill).
    pub(crate) note: Option<&'a str>,
    /// A measurement of counters: each counter now (see [`Measurement::counters`]).
    pub(crate) counters: &'a [u64],
}

/// Which edge of a call a boundary reading is at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edge {
    /// Its entry.
    Entry,
    /// Its exit.
    Exit,
    /// The exit of a call of 1 ms or more: it reads the last pid given out, so that of
    /// the processes started in its last clock tick (10 ms), those after it are told
    /// apart (a pread; a hot function's shorter calls skip it).
    LongExit,
}

impl Edge {
    /// The exit of a call that lasted `nanos`.
    pub(crate) fn exit_after(nanos: u64) -> Edge {
        if nanos >= 1_000_000 {
            Edge::LongExit
        } else {
            Edge::Exit
        }
    }
}

/// A call open now, on a thread's stack or apart from it, as the engine tells a
/// measurement by record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpenFrame {
    /// The record the call counts toward.
    pub(crate) record: u32,
    /// Clock ticks at entry; [`POLL`] for one poll of an async call (its call is timed
    /// apart, and open with its own entry).
    pub(crate) entered: u64,
}

/// `OpenFrame::entered` of a poll frame, whose call is timed apart.
pub(crate) const POLL: u64 = u64::MAX;

/// A call at a stage boundary, for a measurement by record's
/// [`boundary_call`](Measurement::boundary_call).
#[derive(Clone, Copy)]
pub(crate) struct CallAt<'a> {
    /// The record the call counts toward.
    pub(crate) record: u32,
    /// Which edge of the call this is.
    pub(crate) edge: Edge,
    /// The records of the frames open on the call's thread, oldest first (its own among
    /// them while it enters).
    pub(crate) stack: &'a [u32],
    /// Clock ticks now, and seconds from the start to now.
    pub(crate) now: u64,
    pub(crate) elapsed: f64,
    /// Seconds from the start to a time in clock ticks.
    pub(crate) seconds: &'a dyn Fn(u64) -> f64,
}

/// The calls a full sample fell in, for a measurement by record's
/// [`sampled_calls`](Measurement::sampled_calls).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SampleCalls<'a> {
    /// The calls open when its reading began...
    pub(crate) before: &'a [OpenFrame],
    /// ...and when it ended, on every thread, async calls included.
    pub(crate) open: &'a [OpenFrame],
    /// Clock ticks when its reading began, and seconds from the start to its end.
    pub(crate) started: u64,
    pub(crate) elapsed: f64,
    /// The record open on the monitor's own thread (`None`: the workflow).
    pub(crate) stage: Option<u32>,
}

/// What a measurement by record made of a full sample.
#[derive(Debug)]
pub(crate) struct Sampled<'a> {
    /// The records the sample counts toward (open as its reading began and still at
    /// its end), sorted: the other measurements' figures of the sample fold into them.
    pub(crate) seen: &'a [u32],
    /// The records that closed in the time the sample covers, where that time was
    /// theirs: figures that cover the time since the previous sample fold into them.
    pub(crate) interval: &'a [u32],
    /// The sample as the report keeps it, its stage left to the engine.
    pub(crate) sample: SampleReport,
    /// Its timeline point, with this measurement's series.
    pub(crate) point: TimelinePoint,
}

/// What a stage boundary read, for a measurement's [`boundary`](Measurement::boundary)
/// hook: this process now, and the descendants as last sampled.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AtBoundary<'a> {
    /// This process (and its reaped children) now.
    pub(crate) reading: &'a SelfReading,
    /// The descendants as the last sample read them.
    pub(crate) descendants: &'a [Descendant],
    /// Whether some of them may have exited since that sample...
    pub(crate) changed: bool,
    /// ...and, per descendant, whether it was found exited.
    pub(crate) gone: &'a [bool],
}

/// What some calls' counters grew by while they were open, for a measurement's
/// [`figures`](Measurement::figures).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Growth<'a> {
    /// One per counter, in order.
    pub(crate) counters: &'a [u64],
    /// The calls' threads' own clock, where it was read at both ends of some call.
    pub(crate) thread_micros: Option<u64>,
    /// A measurement of thread counters: per thread, the highest its level rose above
    /// where one of the calls began, summed over threads.
    pub(crate) peak: u64,
}

/// The table of every thread's counters of a measurement of thread counters (the heap:
/// what `stemmon::Alloc` counted), process-wide: the engine notes the calling thread's
/// at each frame's entry and exit, and sweeps them all for what threads counted with no
/// frame open.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Threads {
    /// The calling thread's counters and their index; `None` for a thread without
    /// counters of its own.
    pub(crate) this_thread: fn() -> Option<(u32, &'static Slot)>,
    /// Every thread's counters claimed so far, by index.
    pub(crate) claimed: fn() -> &'static [Slot],
}

/// A measurement: its declaration and its hooks, the way a `tracing` layer has hooks for
/// what happens to spans. Every hook but [`declared`](Measurement::declared),
/// [`active`](Measurement::active) and [`sample`](Measurement::sample) has a default
/// that does nothing; each kind of measurement the engine holds (of counters, by
/// record, of thread counters) has hooks of its own, grouped below by kind after those
/// of every measurement (see the module docs).
pub(crate) trait Measurement: Send {
    /// What it adds to a report: the typed handles of its figures, its series, its
    /// figure per process and its section's key.
    fn declared(&self) -> &'static Measure;

    /// Whether it measures anything here; an inert measurement's figures stay out of
    /// the report (its section says why).
    fn active(&self) -> bool;

    /// Opens what it reads, on the sampler thread as it begins (NVML is loaded there,
    /// never on the program's threads). Before, [`sample`](Measurement::sample) reads
    /// nothing.
    fn open(&mut self) {}

    /// The pid of the helper process it reads through, once opened: no process of the
    /// tree.
    fn helper(&self) -> Option<u32> {
        None
    }

    /// Ends what it reads, on the sampler thread as it ends (NVML's shutdown). A helper
    /// process stays until the measurement is dropped, after the run's last sample:
    /// reaped before it, its peak would count as the tree's.
    fn close(&mut self) {}

    /// Reads now, for the tree `tree` just read at `elapsed` seconds from the start.
    fn sample(&mut self, tree: &TreeReading, elapsed: f64) -> Reading<'_>;

    /// How many counters it keeps: cumulative figures (CPU time, bytes read) that the
    /// engine publishes at every reading and differences per call, so that a record's
    /// figures are what they grew by while its calls were open. The engine holds a
    /// measurement of counters itself, not the sampler thread: its hooks run in the
    /// engine's lock, so they read nothing slow (they fold what the tree's readers
    /// read). Its [`Reading::counters`] are the counters now.
    fn counters(&self) -> usize {
        0
    }

    /// At a stage boundary that read anew, on the call's thread, in the engine's lock:
    /// a measurement of counters gives them now.
    fn boundary(&mut self, at: &AtBoundary<'_>) -> Option<&[u64]> {
        let _ = at;
        None
    }

    /// A clock of the calling thread's own share (its CPU time), which the engine
    /// reads on the call's thread at entries and exits, at most once a reuse window,
    /// and differences like the counters.
    fn thread_clock(&self) -> Option<fn() -> Option<u64>> {
        None
    }

    /// Whether it is a measurement by record: it keeps each record's figures itself
    /// (the tree's memory and the kernel's marks), from the readings the engine tells it
    /// each record saw, at stage boundaries and samples. The engine holds it, and reads
    /// this process at boundaries through it.
    fn by_record(&self) -> bool {
        false
    }

    /// A measurement by record, at a stage boundary on the call's thread, in the
    /// engine's lock: reads anew, or reuses its newest reading where that one is `young`
    /// (under the reuse window) and nothing says it is stale; hands a fresh reading to
    /// `fresh` (the measurements of counters take theirs from it) before it counts it
    /// toward `call`'s records. Returns its series in a point at a fresh reading, for
    /// the timeline's newest point.
    fn boundary_call(
        &mut self,
        young: bool,
        call: &CallAt<'_>,
        fresh: &mut dyn FnMut(&AtBoundary<'_>),
    ) -> Option<TimelinePoint> {
        let _ = (young, call, fresh);
        None
    }

    /// A measurement by record: calls of each of `records` reused its newest boundary
    /// reading (they came after it).
    fn reused_by(&mut self, records: &[u32]) {
        let _ = records;
    }

    /// A measurement by record: a call of `record`, entered at clock ticks `entered`,
    /// closed after its exit reading; what other threads' readings read while it was
    /// open counts for it.
    fn call_closed(&mut self, record: u32, entered: u64) {
        let _ = (record, entered);
    }

    /// A measurement by record, at a full sample, in the engine's lock: counts
    /// `reading` toward the records `calls` says it fell in (it may mark parts of it).
    /// `None` where it counts nothing.
    fn sampled_calls(
        &mut self,
        reading: &mut TreeReading,
        calls: &SampleCalls<'_>,
    ) -> Option<Sampled<'_>> {
        let _ = (reading, calls);
        None
    }

    /// A measurement by record: keeps a full sample's reading, whose reading began at
    /// clock ticks `started`, once every measurement has read it (its descendants are
    /// the ones later boundaries check).
    fn keep_sample(&mut self, reading: TreeReading, started: u64) {
        let _ = (reading, started);
    }

    /// A measurement by record: a child of this process that exited, read at
    /// `elapsed` seconds before it was reaped (`stemmon run`), for the report's
    /// `processes`.
    fn process_seen(&mut self, process: &Descendant, elapsed: f64) {
        let _ = (process, elapsed);
    }

    /// A measurement by record: another measurement's figure `key` of process `pid`
    /// (the highest is kept).
    fn process_figure(&mut self, pid: u32, key: &'static str, value: f64) {
        let _ = (pid, key, value);
    }

    /// A measurement by record: the exit code of `pid`, reaped by this process.
    fn process_exit_code(&mut self, pid: u32, code: i32) {
        let _ = (pid, code);
    }

    /// A measurement by record: its figures of `record` into `stage`.
    fn stage_report(&self, record: u32, stage: &mut StageReport) {
        let _ = (record, stage);
    }

    /// A measurement by record: the whole run's figures into `report`, whose processes
    /// are in; `path` names a record (`None`: the workflow).
    fn run_report(&self, report: &mut Report, path: &dyn Fn(Option<u32>) -> String) {
        let _ = (report, path);
    }

    /// Whether it is a measurement of thread counters: each thread keeps its own (the
    /// heap). The engine holds it, like a measurement of counters, even where it counts
    /// nothing here (its section says why).
    fn per_thread(&self) -> bool {
        false
    }

    /// A measurement of thread counters: the table of every thread's (see [`Threads`]),
    /// where it counts anything.
    fn threads(&self) -> Option<Threads> {
        None
    }

    /// A measurement of thread counters, at every sweep of them (a fresh boundary
    /// reading, a full sample, a call closing on the monitor's own thread, the end), in
    /// the engine's lock: its series now (the live heap), which the timeline's newest
    /// point is raised to.
    fn swept(&mut self) -> &[Option<f64>] {
        &[]
    }

    /// A measurement of thread counters: the level of every thread's counters together
    /// now (the live heap), for a log line.
    fn level(&self) -> Option<u64> {
        None
    }

    /// A measurement of counters or of thread counters: a record's figures into `out`
    /// (one per declared field, in order, `None` for a computed one, all `None` where
    /// nothing was counted), from what its counters grew by while its calls were open
    /// over `wall_seconds`.
    fn figures(&self, growth: &Growth<'_>, wall_seconds: f64, out: &mut Vec<Option<f64>>) {
        let _ = (growth, wall_seconds);
        out.clear();
    }

    /// A measurement of counters: the whole run's figures over `wall_seconds`, like
    /// [`figures`](Measurement::figures).
    fn run_figures(&self, wall_seconds: f64, out: &mut Vec<Option<f64>>) {
        let _ = wall_seconds;
        out.clear();
    }

    /// Its section of the report (what it is, what it saw, why a figure is missing),
    /// under its declared key; `None` when unchanged since the last call.
    fn section(&mut self) -> Option<serde_json::Value> {
        None
    }
}

/// What a full sample reads: the tree's reader and the measurement sources. The
/// sampler thread owns them (NVML is read there alone) and hands them back for the
/// last sample.
pub(crate) struct SampleReaders {
    /// The tree's memory.
    pub(crate) tree: Box<dyn TreeReader>,
    /// The measurements read at every sample.
    pub(crate) sources: Vec<Box<dyn Measurement>>,
}

/// Notes how the monitor's helper process `pid` ended, if it is one: `stemmon run` calls
/// this (through `Monitor::note_exited_child`) before it reaps a child.
pub(crate) fn note_helper_end(pid: u32) -> bool {
    #[cfg(all(unix, feature = "gpu"))]
    return gpu::helper::note_end(pid);
    #[cfg(not(all(unix, feature = "gpu")))]
    {
        let _ = pid;
        false
    }
}

/// The core's measurements (the cgroup's, read with the tree): the first of [`open`]'s,
/// so that a sample with these alone (the last one, where the sampler thread did not
/// hand its own back) folds each figure into its own key.
pub(crate) fn core(config: &Config) -> Vec<Box<dyn Measurement>> {
    cgroup::open(config).into_iter().collect()
}

/// Declares the measurements read at samples beyond the GPU, each a module with
/// `fn open(&Config) -> Option<Box<dyn Measurement>>` (`None` when turned off), and
/// [`open`], which makes them in the report's order.
macro_rules! measurements {
    ($($name:ident),* $(,)?) => {
        $(mod $name;)*

        /// The measurements of a monitor of `config`, in the report's order, made on the
        /// program's thread: no driver is opened here (the sampler thread opens NVML,
        /// [`Measurement::open`]); a measurement of kernel files may open or probe them,
        /// so that whether it measures is known from the start.
        pub(crate) fn open(config: &Config) -> Vec<Box<dyn Measurement>> {
            // The core's, CPU and I/O and the heap: the engine holds those two (they
            // have counters).
            let core = core(config).into_iter().chain([cpu::open(), heap::open()]);
            if !config.measurements {
                return core.collect();
            }
            let all = core;
            #[cfg(feature = "gpu")]
            let all = all.chain([
                Box::new(gpu::source::Gpu::new(gpu::plan(config))) as Box<dyn Measurement>
            ]);
            $(let all = all.chain($name::open(config));)*
            all.collect()
        }
    };
}

measurements![fds, pressure];
