//! The measurements read at every full sample, each a module behind [`Measurement`]. A
//! measurement declares what it adds to a report in a file of
//! `stemmon_report::fields::measures` (its figures, each a typed [`Field`] with its unit
//! and fold, its timeline series, its figure per process, its section, its
//! `compare --metric`), and reads here, on the sampler thread. The engine aggregates its
//! figures by the declaration alone, without knowing any of them; the report, `show`,
//! `compare`, `merge`, `plot`, the live line and the exporters take them from the same
//! declaration.
//!
//! The job's cgroup is a measurement of the core: the tree's reader reads it with the
//! tree, and its declaration's fields are typed ones of the report, in the core table.
//! The tree's memory, the kernel's marks, the heap and CPU are read at stage boundaries
//! as well as at samples, on the calls' own threads: they keep their engine in
//! `recorder`, their platform readers in `sys`, and their fields in the core of the
//! same table. A measurement read at samples only is a file here, its name in the list
//! of [`open`], and its declaration.

use crate::config::Config;
use crate::memory::{TreeReader, TreeReading};
pub(crate) use stemmon_report::fields::{Field, Measure};

pub(crate) mod cgroup;
#[cfg(feature = "gpu")]
pub(crate) mod gpu;

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
}

/// A measurement read at every full sample, on the sampler thread (see the module docs).
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

    /// Reads now, for the tree `tree` just read.
    fn sample(&mut self, tree: &TreeReading) -> Reading<'_>;

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
            let core = core(config);
            if !config.measurements {
                return core;
            }
            let all = core.into_iter();
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
