//! What the platform gives the rest of the runtime on Linux (see `sys`).

use super::{Ledger, ProcReader, ProcSelfReader};
use crate::config::Reader;
use crate::memory::{portable_reader, Descendant, ReaderSettings, SelfReader, TreeReader};
use std::sync::Arc;

/// Makes tree readers on one monitor's ledger, configured as that monitor's.
#[derive(Clone)]
pub(crate) struct ReaderHandle {
    settings: ReaderSettings,
    ledger: Arc<Ledger>,
}

impl std::fmt::Debug for ReaderHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderHandle")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ReaderHandle {
    /// A handle on a new ledger, which counts the children reaped from now on.
    pub(crate) fn new(settings: ReaderSettings) -> ReaderHandle {
        ReaderHandle {
            settings,
            ledger: Arc::new(Ledger::with_spawn_floor(settings.spawn_floor)),
        }
    }

    /// The monitor's first tree reader, whose marks its owner configures.
    pub(crate) fn first_tree_reader(&self) -> Box<dyn TreeReader> {
        match self.settings.kind {
            Reader::Portable => portable_reader(self.settings.detailed),
            _ => Box::new(ProcReader::on_ledger(
                Arc::clone(&self.ledger),
                self.settings.detailed,
            )),
        }
    }

    /// Another tree reader of the monitor: it continues from the last sample of any
    /// other (the marks' intervals, the reaped children, the cgroup's figures), and its
    /// samples never overlap theirs. Its own files open at its first sample.
    pub(crate) fn tree_reader(&self) -> Box<dyn TreeReader> {
        let settings = self.settings;
        match settings.kind {
            Reader::Portable => portable_reader(settings.detailed),
            _ => {
                let mut reader = ProcReader::on_ledger(Arc::clone(&self.ledger), settings.detailed);
                reader.adopt_orphans(settings.adopted_orphans);
                reader.set_marks(
                    settings.high_water_marks,
                    settings.reset_marks,
                    settings.root_pid(),
                );
                Box::new(reader)
            }
        }
    }

    /// The stage-boundary reader of this process, reading its marks when `marks`.
    pub(crate) fn boundary_reader(&self, marks: bool) -> Box<dyn SelfReader> {
        let reader =
            ProcSelfReader::new(Arc::clone(&self.ledger), marks, self.settings.reset_marks);
        Box::new(match self.settings.root {
            Some(_) => reader.without_self_usage(),
            None => reader,
        })
    }
}

/// The best reader for this platform (with high-water marks), on a ledger of its own:
/// for a reader used alone (the benchmarks).
#[cfg(feature = "unstable-readers")]
pub(crate) fn default_reader(detailed: bool) -> Box<dyn TreeReader> {
    Box::new(ProcReader::new(detailed))
}

/// The default reader reading every process's `stat` and `io` at every sample (the
/// benchmark's full sample).
#[cfg(feature = "unstable-readers")]
pub(crate) fn full_reader(detailed: bool) -> Box<dyn TreeReader> {
    Box::new(ProcReader::new(detailed).reading_usage_every_sample())
}

/// A boundary reader of this process on a ledger of its own (the benchmark's).
#[cfg(feature = "unstable-readers")]
pub(crate) fn boundary_reader_alone(marks: bool, cpu: bool) -> Box<dyn SelfReader> {
    let reader = ProcSelfReader::new(Arc::new(Ledger::new()), marks, marks);
    Box::new(if cpu { reader } else { reader.without_cpu() })
}

/// A child of this process that has exited and waits to be reaped, as a process of the
/// report: its peak, final counters and exit code (`waitid(WNOWAIT)`, which leaves it
/// to be reaped). `None` if `pid` is no such child.
pub(crate) fn exited_child(pid: u32) -> Option<Descendant> {
    let zombie = super::reaped::zombie(pid)?;
    Some(Descendant {
        pid,
        exited_peak: Some(zombie.peak),
        ppid: std::process::id(),
        usage: zombie.usage,
        exit_code: zombie.exit_code,
        ..Descendant::default()
    })
}

/// How finely a process's start time is known, in seconds: one clock tick of
/// `/proc/PID/stat` (`USER_HZ`, 10 ms on most kernels).
pub(crate) fn start_tick_seconds() -> f64 {
    1.0 / super::procfs::clock_ticks().max(1) as f64
}

/// Seconds since boot now (`CLOCK_BOOTTIME`, the clock of `/proc/PID/stat`'s start
/// times).
pub(crate) fn boot_seconds() -> Option<f64> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is valid for writes and outlives the call; CLOCK_BOOTTIME is a
    // valid clock on every Linux this builds for.
    let done = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
    (done == 0).then(|| now.tv_sec as f64 + now.tv_nsec as f64 / 1e9)
}

/// The calling thread's CPU time (user plus system) in microseconds
/// (`getrusage(RUSAGE_THREAD)`).
pub(crate) fn thread_cpu_micros() -> Option<u64> {
    Some(super::reaped::thread_cpu_micros())
}

/// Whether the process `pid` has exited: gone, or a zombie child of this process.
/// A stage-boundary reading leaves such descendants out of the last sample's sum.
pub(crate) fn has_exited(pid: u32) -> bool {
    super::reaped::has_exited(pid)
}

pub(crate) use super::files::kernel_host_name;
#[cfg(feature = "gpu")]
pub(crate) use super::files::process_status;
pub(crate) use super::sampled::{open_fds, MemoryPressure};

/// Registers this process for the expedited `membarrier`; whether it works here.
pub(crate) fn register_barrier() -> bool {
    const QUERY: libc::c_long = 0;
    const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    let supported = unsafe { libc::syscall(libc::SYS_membarrier, QUERY, 0 as libc::c_long) };
    if supported < 0 || supported & PRIVATE_EXPEDITED == 0 {
        return false;
    }
    // SAFETY: as above.
    let registered = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            REGISTER_PRIVATE_EXPEDITED,
            0 as libc::c_long,
        )
    };
    registered == 0
}

/// A full memory barrier on every CPU running a thread of this process; false if the
/// kernel refused (then the caller must not rely on it).
pub(crate) fn heavy_barrier() -> bool {
    const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0 as libc::c_long) == 0 }
}
