//! Measurement sources read at every full sample, each a module behind [`Source`]: what
//! it reads, the figures it adds to every record open at the sample (keys of the field
//! table, `stemmon_report::fields`, each folded by its declared `fold`), the timeline's
//! series it adds, a figure per process, and a section of the report. The engine
//! aggregates them without knowing any of them; the report, `show`, `compare`, `merge`,
//! the exporters and `plot` take them from the field table.
//!
//! The tree's memory, the kernel's marks, the cgroup, the heap and CPU are read at
//! stage boundaries as well as at samples, on the calls' own threads: they keep their
//! engine in `recorder`, their platform readers in `sys`, and their fields in the same
//! table. A source that is read at samples only is a file here and one line in
//! [`open`].

use crate::config::Config;
use crate::memory::{TreeReader, TreeReading};

#[cfg(feature = "gpu")]
pub(crate) mod gpu;

/// What a source read at one sample, borrowed from it until the next.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Reading<'a> {
    /// One value per key of [`Source::fields`], in order.
    pub(crate) figures: &'a [Option<u64>],
    /// One value per key of [`Source::series`], in order.
    pub(crate) series: &'a [Option<u64>],
    /// The processes it has a figure for (the key [`Source::process_field`]).
    pub(crate) processes: &'a [(u32, u64)],
}

/// A measurement read at every full sample, on the sampler thread (see the module docs).
pub(crate) trait Source: Send {
    /// Whether it measures anything here; an inert source's figures stay out of the
    /// report (its section says why).
    fn active(&self) -> bool;

    /// The keys of the field table it fills in every record open at a sample.
    fn fields(&self) -> &'static [&'static str];

    /// The keys it adds to each timeline point (the highest over the point's samples).
    fn series(&self) -> &'static [&'static str];

    /// The key of its figure of each process (`processes[]`), the highest seen.
    fn process_field(&self) -> Option<&'static str>;

    /// Opens what it reads, on the sampler thread as it begins (NVML is loaded there,
    /// never on the program's threads). Before, [`sample`](Source::sample) reads
    /// nothing.
    fn open(&mut self) {}

    /// The pid of the helper process it reads through, once opened: no process of the
    /// tree.
    fn helper(&self) -> Option<u32> {
        None
    }

    /// Ends what it reads, on the sampler thread as it ends (NVML's shutdown). A helper
    /// process stays until the source is dropped, after the run's last sample: reaped
    /// before it, its peak would count as the tree's.
    fn close(&mut self) {}

    /// Reads now, for the tree `tree` just read.
    fn sample(&mut self, tree: &TreeReading) -> Reading<'_>;

    /// Its section of the report (`gpu`: what it is, what it saw, why a figure is
    /// missing): the key and the value, `None` when unchanged since the last call.
    fn section(&mut self) -> Option<(&'static str, serde_json::Value)>;
}

/// What a full sample reads: the tree's reader and the measurement sources. The
/// sampler thread owns them (NVML is read there alone) and hands them back for the
/// last sample.
pub(crate) struct SampleReaders {
    /// The tree's memory.
    pub(crate) tree: Box<dyn TreeReader>,
    /// The sources read at every sample.
    pub(crate) sources: Vec<Box<dyn Source>>,
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

/// The sources of a monitor of `config`, in the report's order. Nothing is opened
/// here, on the program's thread: the sampler thread opens each ([`Source::open`]).
pub(crate) fn open(config: &Config) -> Vec<Box<dyn Source>> {
    let _ = config;
    let sources = std::iter::empty::<Box<dyn Source>>();
    #[cfg(feature = "gpu")]
    let sources =
        sources.chain([Box::new(gpu::source::Gpu::new(gpu::plan(config))) as Box<dyn Source>]);
    sources.collect()
}
