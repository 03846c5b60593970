//! Memory readers: one per source, behind [`TreeReader`]. The sampler does not know
//! which one answered; the report's `sampler` key does.
//!
//! Besides sampled RSS, the Linux reader reads the kernel's high-water marks (SPEC §8):
//! each process's `VmHWM`, reset at every reading, the peaks of reaped children, and
//! the job's cgroup. The sampled peak can miss a spike between two samples; the marks
//! cannot, and the true peak lies between the two.

use crate::report::{CgroupReport, HighWaterMarks};
use std::io;

#[cfg(target_os = "linux")]
pub(crate) mod cgroup;
#[cfg(target_os = "linux")]
pub(crate) mod linux;
pub(crate) mod portable;

/// One reading of a process tree. Sizes in bytes; `None` where the source has no figure.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeReading {
    /// RSS of the root plus every descendant read.
    pub tree_rss: Option<u64>,
    /// RSS of the root.
    pub parent_rss: Option<u64>,
    /// RSS of the descendants read.
    pub children_rss: Option<u64>,
    /// Unique set size of the tree (detailed readers only).
    pub tree_uss: Option<u64>,
    /// Proportional set size of the tree (detailed readers only).
    pub tree_pss: Option<u64>,
    /// Physical footprint of the tree (macOS detailed readers only).
    pub tree_physical_footprint: Option<u64>,
    /// Processes found, root included.
    pub process_count: u32,
    /// Processes whose RSS was read.
    pub rss_processes: u32,
    /// Every process found was read, and every `children` file could be listed.
    pub rss_complete: bool,
    /// The root's peak RSS since the previous reading (`VmHWM`, then reset).
    pub parent_hwm: Option<u64>,
    /// The sum of the live descendants' own peaks since the previous full sample.
    pub children_hwm: Option<u64>,
    /// An upper bound of the tree's peak since the previous reading: `parent_hwm` +
    /// `children_hwm` + the peaks of the descendants that exited in the interval.
    pub tree_rss_bound: Option<u64>,
    /// The largest peak of a descendant that exited since the previous reading.
    pub reaped_child_peak: Option<u64>,
    /// The job's cgroup now.
    pub cgroup: Option<CgroupReport>,
    /// The cgroup's highest charge since the previous sample: its charge now, or the
    /// kernel's peak where that rose in the interval.
    pub cgroup_peak: Option<u64>,
    /// OOM kills in the cgroup since the previous sample.
    pub oom_kills: Option<u64>,
    /// Each descendant read, so that a stage-boundary reading can leave out the ones
    /// that have exited since, and count their peaks as reaped.
    pub descendants: Vec<Descendant>,
}

/// One descendant as a full sample read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Descendant {
    /// Its process id.
    pub pid: u32,
    /// Its RSS at the sample.
    pub rss: u64,
    /// The highest of its marks read so far.
    pub peak: u64,
}

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

    /// Turns the high-water marks on or off for the tree rooted at `root`, and says
    /// which of them this reader can read. Off, or missing here, by default.
    fn configure_marks(&mut self, enabled: bool, _root: u32) -> HighWaterMarks {
        HighWaterMarks {
            enabled,
            missing: Some(if enabled {
                format!(
                    "the {} reader has no high-water marks (they are read from /proc, on Linux)",
                    self.name()
                )
            } else {
                "turned off".to_owned()
            }),
            ..HighWaterMarks::default()
        }
    }
}

/// The best reader for this platform (with high-water marks on Linux).
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

/// A stage-boundary reading of the monitored process alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SelfReading {
    /// RSS now.
    pub(crate) rss: u64,
    /// The peak RSS since the previous reading of either kind (`VmHWM`, then reset);
    /// `None` with marks off or unavailable.
    pub(crate) hwm: Option<u64>,
    /// The kernel's peak of the children reaped since the previous reading, if any
    /// was reaped (see [`linux::Reaped`]): also the sign that some last-sampled
    /// children may be gone.
    pub(crate) reaped: Option<u64>,
    /// A child of this process was reaped or has exited since the previous reading:
    /// some last-sampled descendants may be gone.
    pub(crate) children_changed: bool,
}

/// What a stage boundary reads: the monitored process alone, cheaply. The seam beside
/// [`TreeReader`]: the engine holds one per monitor and never reads `/proc` itself.
pub(crate) trait SelfReader: Send {
    /// This process now, `None` if it cannot be read.
    fn read(&mut self) -> Option<SelfReading>;

    /// The sum of the RSS of `descendants` (as last sampled) that are still alive, and
    /// the largest peak of those newly found exited. `gone` keeps, per descendant,
    /// whether it was already found gone, so each is checked until it goes and never
    /// after.
    fn live_children(
        &mut self,
        descendants: &[Descendant],
        gone: &mut Vec<bool>,
    ) -> (u64, Option<u64>);
}

/// The cheap reading of the monitored process alone, taken at stage boundaries: one
/// `pread` of `status`, one write to `clear_refs`, one `getrusage`.
pub(crate) struct ProcSelfReader {
    marks: bool,
    /// `getrusage` stands for `VmHWM` above this (see [`linux::read_self_cheap`]).
    #[cfg(target_os = "linux")]
    floor: u64,
    /// `RUSAGE_CHILDREN` at this reader's previous reading: a change means a child was
    /// reaped, even where a full sample counted its peak first.
    #[cfg(target_os = "linux")]
    last_usage: [i64; 7],
    #[cfg(target_os = "linux")]
    buf: Vec<u8>,
    #[cfg(not(target_os = "linux"))]
    inner: portable::SysinfoSelf,
}

impl ProcSelfReader {
    /// A reader of this process; `marks` reads and resets its high-water mark too.
    pub(crate) fn new(marks: bool) -> ProcSelfReader {
        #[cfg(target_os = "linux")]
        let mut buf = Vec::with_capacity(2048);
        ProcSelfReader {
            marks,
            #[cfg(target_os = "linux")]
            floor: if marks {
                linux::self_exec_floor(&mut buf)
            } else {
                0
            },
            #[cfg(target_os = "linux")]
            last_usage: linux::reaped_and_usage().1,
            #[cfg(target_os = "linux")]
            buf,
            #[cfg(not(target_os = "linux"))]
            inner: portable::SysinfoSelf::new(),
        }
    }
}

impl SelfReader for ProcSelfReader {
    fn read(&mut self) -> Option<SelfReading> {
        #[cfg(target_os = "linux")]
        {
            let (reaped, usage) = linux::reaped_and_usage();
            let reaped_any = std::mem::replace(&mut self.last_usage, usage) != usage;
            let children_changed = reaped_any || linux::any_zombie_child();
            let reaped = reaped.filter(|_| self.marks).map(|r| r.peak);
            let status = linux::read_self_cheap(&mut self.buf, self.marks, self.floor).ok()?;
            Some(SelfReading {
                rss: status.rss?,
                hwm: status.hwm.filter(|_| self.marks),
                reaped,
                children_changed,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = self.marks;
            Some(SelfReading {
                rss: self.inner.read()?,
                hwm: None,
                reaped: None,
                children_changed: false,
            })
        }
    }

    fn live_children(
        &mut self,
        descendants: &[Descendant],
        gone: &mut Vec<bool>,
    ) -> (u64, Option<u64>) {
        live_children_rss(descendants, gone)
    }
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
/// largest peak of those newly found exited. `gone` keeps, per descendant, whether it
/// was already found gone, so each is checked until it goes and never after; one found
/// here is not counted as reaped again by the next sample.
pub(crate) fn live_children_rss(
    descendants: &[Descendant],
    gone: &mut Vec<bool>,
) -> (u64, Option<u64>) {
    gone.resize(descendants.len(), false);
    let (mut sum, mut exited_peak) = (0, None);
    for (&Descendant { pid, rss, peak }, gone) in descendants.iter().zip(gone.iter_mut()) {
        if !*gone && has_exited(pid) {
            *gone = true;
            exited_peak = exited_peak.max(Some(peak));
            #[cfg(target_os = "linux")]
            linux::counted_as_exited(pid);
        }
        if !*gone {
            sum += rss;
        }
    }
    (sum, exited_peak)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    #[ignore = "a measurement: cargo test --release -p stemmon --lib boundary_reading_cost \
                -- --ignored --nocapture"]
    fn boundary_reading_cost() {
        use std::hint::black_box;
        use std::time::Instant;
        let calls = 20_000u32;
        // Below the floor (the launcher's peak from before exec) `status` is read.
        let mut reader = ProcSelfReader::new(true);
        let started = Instant::now();
        for _ in 0..calls {
            black_box(reader.read());
        }
        let below = started.elapsed() / calls;
        let mut block = vec![0u8; (reader.floor + (64 << 20)) as usize];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        let started = Instant::now();
        for _ in 0..calls {
            black_box(reader.read());
        }
        let marks = started.elapsed() / calls;
        drop(black_box(block));
        let mut plain = ProcSelfReader::new(false);
        let started = Instant::now();
        for _ in 0..calls {
            black_box(plain.read());
        }
        let rss_only = started.elapsed() / calls;
        let statm = std::fs::File::open("/proc/self/statm").unwrap();
        let mut buf = [0u8; 256];
        let started = Instant::now();
        for _ in 0..calls {
            black_box(std::os::unix::fs::FileExt::read_at(&statm, &mut buf, 0).unwrap());
        }
        let statm_cost = started.elapsed() / calls;
        let started = Instant::now();
        for _ in 0..calls {
            // SAFETY: an all-zero rusage is valid; getrusage only writes into it.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: a valid pointer to a live rusage.
            black_box(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) });
        }
        let rusage_cost = started.elapsed() / calls;
        println!("statm pread: {statm_cost:?}; getrusage: {rusage_cost:?}");
        let mut kids: Vec<_> = (0..10)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let descendants: Vec<_> = kids
            .iter()
            .map(|k| Descendant {
                pid: k.id(),
                rss: 1,
                peak: 1,
            })
            .collect();
        let mut gone = Vec::new();
        let started = Instant::now();
        for _ in 0..calls {
            black_box(live_children_rss(&descendants, &mut gone));
        }
        let check = started.elapsed() / calls;
        for kid in &mut kids {
            kid.kill().unwrap();
            kid.wait().unwrap();
        }
        println!(
            "boundary reading: {marks:?} with marks (statm, getrusage, clear_refs), {below:?} \
             below the exec floor (status), {rss_only:?} RSS only; exited-children check of \
             10 descendants: {check:?}"
        );
    }
}
