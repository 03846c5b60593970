//! Memory readers: one per source, behind [`TreeReader`]. The sampler does not know
//! which one answered; the report's `sampler` key does.
//!
//! Besides sampled RSS, the Linux reader reads the kernel's high-water marks (SPEC §8):
//! each process's `VmHWM`, reset at every reading, the peaks of reaped children, and
//! the job's cgroup. The sampled peak can miss a spike between two samples; the marks
//! cannot, and the true peak lies between the two.
//!
//! A monitor makes its readers together with [`Readers::new`]: on Linux they share
//! that monitor's ledger (`linux::Ledger`), so each interval of the marks is counted
//! once and by that monitor alone; nothing here is process-wide.

use crate::config::{Config, Reader};
use crate::report::HighWaterMarks;
use std::io;
use std::sync::Arc;

#[cfg(target_os = "linux")]
pub(crate) mod cgroup;
#[cfg(target_os = "linux")]
pub(crate) mod linux;
pub(crate) mod portable;
mod reading;

pub use reading::{BoundPart, Descendant, TreeReading, Usage};

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

#[cfg(feature = "unstable-readers")]
/// The best reader for this platform (with high-water marks on Linux), on a ledger of
/// its own: for a reader used alone (the benchmarks). A monitor makes its readers
/// together, on one ledger.
pub fn default_reader(detailed: bool) -> Box<dyn TreeReader> {
    #[cfg(target_os = "linux")]
    {
        Box::new(linux::ProcReader::new(detailed))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Box::new(portable::SysinfoReader::new(detailed))
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
        }
    }

    fn root_pid(&self) -> u32 {
        self.root.unwrap_or_else(std::process::id)
    }
}

/// One monitor's readers, made together on one ledger (Linux), so that every interval
/// of the kernel's marks is counted once and by that monitor alone: the tree reader
/// the sampler owns, the boundary reader the engine owns, and a handle that makes
/// another tree reader on the same ledger (for a last sample taken while the sampler
/// still holds its own, as on a signal).
pub(crate) struct Readers {
    /// The full tree sample.
    pub(crate) tree: Box<dyn TreeReader>,
    /// The reading of this process alone at stage boundaries.
    pub(crate) boundary: Box<dyn SelfReader>,
    /// The marks as asked and as the tree reader can read them.
    pub(crate) marks: HighWaterMarks,
    /// Makes another tree reader on the same ledger.
    pub(crate) spare: ReaderHandle,
}

impl Readers {
    /// Makes the readers, turns the marks on or off (probing, on Linux, that this
    /// process may reset them, which starts the first interval) and says which marks
    /// can be read.
    pub(crate) fn new(settings: ReaderSettings) -> Readers {
        #[cfg(target_os = "linux")]
        let spare = ReaderHandle {
            settings,
            ledger: Arc::new(linux::Ledger::new()),
        };
        #[cfg(not(target_os = "linux"))]
        let spare = ReaderHandle { settings };
        let mut tree: Box<dyn TreeReader> = match settings.kind {
            Reader::Portable => portable_reader(settings.detailed),
            #[cfg(target_os = "linux")]
            _ => Box::new(linux::ProcReader::on_ledger(
                Arc::clone(&spare.ledger),
                settings.detailed,
            )),
            #[cfg(not(target_os = "linux"))]
            _ => default_reader(settings.detailed),
        };
        tree.adopt_orphans(settings.adopted_orphans);
        let marks = tree.configure_marks(
            settings.high_water_marks,
            settings.reset_marks,
            settings.root_pid(),
        );
        // The boundary reads this process's marks only when it is the root.
        let boundary_marks = marks.parent && settings.root.is_none();
        #[cfg(target_os = "linux")]
        let boundary: Box<dyn SelfReader> = {
            let reader = linux::ProcSelfReader::new(
                Arc::clone(&spare.ledger),
                boundary_marks,
                settings.reset_marks,
            );
            Box::new(match settings.root {
                Some(_) => reader.without_self_usage(),
                None => reader,
            })
        };
        #[cfg(not(target_os = "linux"))]
        let boundary: Box<dyn SelfReader> = {
            let _ = boundary_marks;
            Box::new(portable::SysinfoSelf::new())
        };
        Readers {
            tree,
            boundary,
            marks,
            spare,
        }
    }
}

/// Makes tree readers on one monitor's ledger, configured as that monitor's.
#[derive(Clone)]
pub(crate) struct ReaderHandle {
    settings: ReaderSettings,
    #[cfg(target_os = "linux")]
    ledger: Arc<linux::Ledger>,
}

impl std::fmt::Debug for ReaderHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderHandle")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ReaderHandle {
    /// Another tree reader of the monitor: it continues from the last sample of any
    /// other (the marks' intervals, the reaped children, the cgroup's figures), and its
    /// samples never overlap theirs. Its own files open at its first sample.
    pub(crate) fn tree_reader(&self) -> Box<dyn TreeReader> {
        let ReaderSettings {
            kind,
            detailed,
            high_water_marks,
            adopted_orphans,
            ..
        } = self.settings;
        match kind {
            Reader::Portable => portable_reader(detailed),
            #[cfg(target_os = "linux")]
            _ => {
                let mut reader = linux::ProcReader::on_ledger(Arc::clone(&self.ledger), detailed);
                reader.adopt_orphans(adopted_orphans);
                reader.set_marks(
                    high_water_marks,
                    self.settings.reset_marks,
                    self.settings.root_pid(),
                );
                Box::new(reader)
            }
            #[cfg(not(target_os = "linux"))]
            _ => {
                let _ = (high_water_marks, adopted_orphans);
                default_reader(detailed)
            }
        }
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
    /// The peak of a child reaped since the previous reading, where the kernel's
    /// maximum grew: exact.
    pub(crate) reaped: Option<u64>,
    /// The most any child reaped since held, where the kernel says (see
    /// `linux::reaped::Reaped`): for the bound.
    pub(crate) reaped_at_most: Option<u64>,
    /// A child of this process was reaped or has exited since the previous reading:
    /// some last-sampled descendants may be gone.
    pub(crate) children_changed: bool,
    /// This process's CPU and I/O (`RUSAGE_SELF`, every thread; left out where the
    /// tree's root is another process) plus those of the children it reaped
    /// (`RUSAGE_CHILDREN`); `None` where not read.
    pub(crate) usage: Option<Usage>,
}

/// A child of this process that has exited and waits to be reaped, as a process of the
/// report: its peak, final counters and exit code (`waitid(WNOWAIT)`, which leaves it
/// to be reaped). `None` if `pid` is no such child, or off Linux.
pub(crate) fn exited_child(pid: u32) -> Option<Descendant> {
    #[cfg(target_os = "linux")]
    {
        let zombie = linux::reaped::zombie(pid)?;
        Some(Descendant {
            pid,
            exited_peak: Some(zombie.peak),
            ppid: std::process::id(),
            usage: zombie.usage,
            exit_code: zombie.exit_code,
            ..Descendant::default()
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// How finely a process's start time is known, in seconds: one clock tick of
/// `/proc/PID/stat` (`USER_HZ`, 10 ms on most kernels).
pub fn start_tick_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        1.0 / linux::procfs::clock_ticks().max(1) as f64
    }
    #[cfg(not(target_os = "linux"))]
    {
        0.01
    }
}

/// Seconds since boot now (`CLOCK_BOOTTIME`, the clock of `/proc/PID/stat`'s start
/// times) on Linux, `None` elsewhere.
pub(crate) fn boot_seconds() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is valid for writes and outlives the call; CLOCK_BOOTTIME is a
        // valid clock on every Linux this builds for.
        let done = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
        (done == 0).then(|| now.tv_sec as f64 + now.tv_nsec as f64 / 1e9)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The calling thread's CPU time (user plus system) in microseconds:
/// `getrusage(RUSAGE_THREAD)` on Linux, `None` elsewhere.
pub(crate) fn thread_cpu_micros() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        Some(linux::reaped::thread_cpu_micros())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
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
}

/// Whether the process `pid` has exited: gone, or a zombie child of this process.
/// A stage-boundary reading leaves such descendants out of the last sample's sum.
pub(crate) fn has_exited(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        linux::has_exited(pid)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        false
    }
}

/// The sum of the RSS of `descendants` (as last sampled) that are still alive, and the
/// largest peak of those newly found exited, each of which is given to `exited`.
/// `gone` keeps, per descendant, whether it was already found gone, so each is checked
/// until it goes and never after.
pub(crate) fn live_children_rss(
    descendants: &[Descendant],
    gone: &mut Vec<bool>,
    mut exited: impl FnMut(u32),
) -> LiveChildren {
    gone.resize(descendants.len(), false);
    let (mut sum, mut exited_peak) = (0, None);
    for (&Descendant { pid, rss, peak, .. }, gone) in descendants.iter().zip(gone.iter_mut()) {
        if !*gone && has_exited(pid) {
            *gone = true;
            exited_peak = exited_peak.max(Some(peak));
            exited(pid);
        }
        if !*gone {
            sum += rss;
        }
    }
    LiveChildren {
        rss: sum,
        exited_peak,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn settings(high_water_marks: bool) -> ReaderSettings {
        ReaderSettings::of(&Config {
            high_water_marks,
            ..Config::default()
        })
    }

    #[test]
    fn the_spare_reader_continues_the_samplers_interval() {
        let _mark = linux::tests::self_mark();
        let me = std::process::id();
        let mut readers = Readers::new(settings(true));
        assert!(
            readers.marks.parent && readers.marks.reaped,
            "{:?}",
            readers.marks
        );
        readers.tree.read_tree(me).unwrap();
        let mib = linux::tests::past_reaped_maximum(64);
        let status = linux::tests::python_holding(mib)
            .status()
            .expect("python3 runs");
        assert!(status.success());
        // The signal path: the sampler keeps its reader, the last sample takes another.
        let last = readers.spare.tree_reader().read_tree(me).unwrap();
        let peak = last
            .reaped_child_peak
            .expect("the final interval keeps the reaping");
        assert!(peak >= mib << 20, "{peak}");
        assert!(last.tree_rss_bound.is_some(), "{last:?}");
        // Configured as the sampler's: its cgroup is read too.
        let sampler = readers.tree.read_tree(me).unwrap();
        assert_eq!(last.cgroup.is_some(), sampler.cgroup.is_some());
    }

    #[test]
    fn the_spare_reader_keeps_the_marks_off() {
        let readers = Readers::new(settings(false));
        assert!(!readers.marks.enabled);
        let reading = readers
            .spare
            .tree_reader()
            .read_tree(std::process::id())
            .unwrap();
        assert_eq!((reading.parent_hwm, reading.tree_rss_bound), (None, None));
        let portable = Readers::new(ReaderSettings {
            kind: Reader::Portable,
            ..settings(true)
        });
        assert_eq!(portable.spare.tree_reader().name(), "sysinfo");
        assert!(!portable.marks.parent);
    }
}
