//! Memory readers: one per source, behind [`TreeReader`]. The sampler does not know
//! which one answered; the report's `sampler` key does.
//!
//! Besides sampled RSS, the Linux reader reads the kernel's high-water marks (the book's `exact-peaks.md`):
//! each process's `VmHWM`, reset at every reading, the peaks of reaped children, and
//! the job's cgroup. The sampled peak can miss a spike between two samples; the marks
//! cannot, and the true peak lies between the two.
//!
//! This module is the same on every platform: the traits, what a reading holds, and the
//! portable reader (sysinfo). The platform's own readers, and how a monitor makes its
//! readers together, are in [`sys`](crate::sys), chosen once per OS.

use crate::config::{Config, Reader};
use crate::report::HighWaterMarks;
use std::io;

pub(crate) mod portable;
mod reading;

pub use reading::{most_at_once, BoundPart, Descendant, ProcessState, TreeReading, Unread, Usage};

/// Reads the memory of a process and all its descendants.
pub trait TreeReader: Send {
    /// The name the report gives this reader (`sampler`).
    fn name(&self) -> &'static str;
    /// Reads the tree rooted at `root` now. An error means the root itself could not
    /// be read; descendants that vanish or deny access only lower the coverage.
    fn read_tree(&mut self, root: u32) -> io::Result<TreeReading>;
    /// With a root other than this process, also counts this process's other children
    /// (orphans it adopted as a subreaper) as descendants. Ignored where unsupported.
    fn adopt_orphans(&mut self, _adopt: bool) {}

    /// Leaves the process `pid` out of the tree: a child of this process that is the
    /// monitor's own (NVML's helper). Ignored where unsupported.
    fn exclude(&mut self, _pid: u32) {}

    /// Reads every figure afresh at the next reading, those too that it reads less often
    /// than it samples (the cgroup's slower figures, the root's descriptors): before a
    /// run's last sample. Nothing where every figure is read at every sample.
    fn refresh_all(&mut self) {}

    /// Turns the high-water marks on or off for the tree rooted at `root` (reset at
    /// every reading when `reset`, else each runs from its process's start), and says
    /// which of them this reader can read. Off, or missing here, by default.
    fn configure_marks(&mut self, enabled: bool, _reset: bool, _root: u32) -> HighWaterMarks {
        {
            let mut built = HighWaterMarks::default();
            built.enabled = enabled;
            built.missing = Some(if enabled {
                format!(
                    "the {} reader has no high-water marks (they are read from /proc, on Linux)",
                    self.name()
                )
            } else {
                "turned off".to_owned()
            });
            built
        }
    }
}

/// The portable reader (sysinfo), available on every platform.
pub fn portable_reader(detailed: bool) -> Box<dyn TreeReader> {
    Box::new(portable::SysinfoReader::new(detailed))
}

/// How a monitor's readers are made: its reader settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReaderSettings {
    /// Which tree reader.
    pub(crate) kind: Reader,
    /// USS and PSS (Linux), physical footprint (macOS).
    pub(crate) detailed: bool,
    /// Read the high-water marks.
    pub(crate) high_water_marks: bool,
    /// Reset them at every reading.
    pub(crate) reset_marks: bool,
    /// The root of the tree: this process when `None`.
    pub(crate) root: Option<u32>,
    /// With `root`: this process's other children count as descendants too.
    pub(crate) adopted_orphans: bool,
    /// With `root`: the mark of the process that started it, then (the spawn floor).
    pub(crate) spawn_floor: Option<u64>,
}

/// Whether `peak`, an exited root's rusage peak, is that of a program the root ran, not
/// the image of the process that started it, which the kernel carries across `exec`:
/// more than 1 MiB above the spawn floor `floor` (that process's mark when it started
/// the root).
pub(crate) fn above_spawn_floor(peak: u64, floor: u64) -> bool {
    peak > floor.saturating_add(1 << 20)
}

impl ReaderSettings {
    /// The reader settings of a monitor's settings.
    pub(crate) fn of(config: &Config) -> ReaderSettings {
        ReaderSettings {
            kind: config.reader,
            detailed: config.detailed_memory,
            high_water_marks: config.high_water_marks,
            reset_marks: config.reset_marks,
            root: config.root,
            adopted_orphans: config.adopted_orphans && config.root.is_some(),
            spawn_floor: config.spawn_floor.filter(|_| config.root.is_some()),
        }
    }

    pub(crate) fn root_pid(&self) -> u32 {
        self.root.unwrap_or_else(std::process::id)
    }
}

/// A stage-boundary reading of the monitored process alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SelfReading {
    /// RSS now.
    pub(crate) rss: u64,
    /// The peak RSS since the previous reading of either kind (`VmHWM`, then reset);
    /// `None` with marks off or unavailable.
    pub(crate) hwm: Option<u64>,
    /// The place of this reading's mark among every reading of it, full samples
    /// included (see [`TreeReading::parent_mark_epoch`]); 0 where not counted.
    pub(crate) epoch: u64,
    /// The peak of a child reaped since the previous reading, where the kernel's
    /// maximum grew: exact.
    pub(crate) reaped: Option<u64>,
    /// The most any child reaped since held, where the kernel says (see
    /// `linux::reaped::Reaped`): for the bound.
    pub(crate) reaped_at_most: Option<u64>,
    /// Every exit of the tree comes with its record: the next sample counts each
    /// exited process that no sample read at its own peak, so this reading's bound
    /// leaves their reaping out (its `reaped` stays the largest exited child's figure).
    pub(crate) exits_recorded: bool,
    /// A child of this process was reaped or has exited since the previous reading:
    /// some last-sampled descendants may be gone.
    pub(crate) children_changed: bool,
    /// Without exit records, where this process reaped a child since the previous
    /// reading: how many processes that no sample read may have ended since then
    /// (`linux::births::Births`). The kernel's figure is the largest of the reaped
    /// children's peaks, so where more than one process may have ended, it bounds no
    /// sum of them.
    pub(crate) ended_unsampled: Option<u32>,
    /// This process's CPU and I/O (`RUSAGE_SELF`, every thread; left out where the
    /// tree's root is another process) plus those of the children it reaped
    /// (`RUSAGE_CHILDREN`); `None` where not read.
    pub(crate) usage: Option<Usage>,
}

/// What a stage boundary reads: the monitored process alone, cheaply. The seam beside
/// [`TreeReader`]: the engine holds one per monitor and never reads `/proc` itself.
pub(crate) trait SelfReader: Send {
    /// This process now, `None` if it cannot be read.
    fn read(&mut self) -> Option<SelfReading>;

    /// Which of `descendants` (as last sampled) are still alive. `gone` keeps, per
    /// descendant, whether it was already found gone, so each is checked until it goes
    /// and never after.
    fn live_children(&mut self, descendants: &[Descendant], gone: &mut Vec<bool>) -> LiveChildren;

    /// Whether a child of this process exited since the last [`read`](Self::read): a
    /// younger reading is stale then. Without a way to tell, never.
    fn children_changed(&mut self) -> bool {
        false
    }

    /// The last process id the kernel gave out in this process's pid namespace: a
    /// process with a higher one started later. `None` where it cannot be read.
    fn last_pid(&mut self) -> Option<u32> {
        None
    }
}

/// What a stage boundary finds of the last-sampled descendants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LiveChildren {
    /// The sum of the RSS of those still alive.
    pub(crate) rss: u64,
    /// The largest peak of those newly found exited.
    pub(crate) exited_peak: Option<u64>,
    /// How many were newly found exited.
    pub(crate) exited: u32,
    /// The sum of their peaks: they may have held them at once.
    pub(crate) exited_peaks: u64,
}
