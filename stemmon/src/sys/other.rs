//! What the platform gives the rest of the runtime where there is no `/proc` reader:
//! sysinfo's readers, without high-water marks, CPU per thread, or the processes'
//! start times (see `sys`).

use crate::memory::{portable_reader, Descendant, ReaderSettings, SelfReader, TreeReader};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

/// Makes tree readers configured as one monitor's.
#[derive(Clone, Debug)]
pub(crate) struct ReaderHandle {
    settings: ReaderSettings,
}

impl ReaderHandle {
    /// A handle for a monitor of `settings`.
    pub(crate) fn new(settings: ReaderSettings) -> ReaderHandle {
        ReaderHandle { settings }
    }

    /// The monitor's first tree reader.
    pub(crate) fn first_tree_reader(&self) -> Box<dyn TreeReader> {
        portable_reader(self.settings.detailed)
    }

    /// Another tree reader of the monitor.
    pub(crate) fn tree_reader(&self) -> Box<dyn TreeReader> {
        portable_reader(self.settings.detailed)
    }

    /// The stage-boundary reader of this process (no marks here).
    pub(crate) fn boundary_reader(&self, _marks: bool) -> Box<dyn SelfReader> {
        Box::new(SysinfoSelf::new())
    }
}

/// No kernel host name beyond sysinfo's here.
pub(crate) fn kernel_host_name() -> Option<String> {
    None
}

/// No count of a process's open descriptors here.
pub(crate) fn open_fds(_pid: u32, _path: &mut String) -> std::io::Result<u64> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// No memory pressure stall information here: [`MemoryPressure::open`] says so.
#[derive(Debug)]
pub(crate) struct MemoryPressure(());

impl MemoryPressure {
    /// Unsupported here.
    pub(crate) fn open() -> std::io::Result<MemoryPressure> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    /// Never reached: nothing opens.
    pub(crate) fn source(&self) -> &'static str {
        "system"
    }

    /// Never reached: nothing opens.
    pub(crate) fn some_micros(&mut self) -> std::io::Result<u64> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

/// No process status file here: the GPU's pids are matched as NVML gives them.
#[cfg(feature = "gpu")]
pub(crate) fn process_status(
    _pid: u32,
    _buf: &mut Vec<u8>,
    _path: &mut String,
) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// The best reader for this platform: sysinfo's.
#[cfg(feature = "unstable-readers")]
pub(crate) fn default_reader(detailed: bool) -> Box<dyn TreeReader> {
    portable_reader(detailed)
}

/// The full sample: sysinfo's.
#[cfg(feature = "unstable-readers")]
pub(crate) fn full_reader(detailed: bool) -> Box<dyn TreeReader> {
    portable_reader(detailed)
}

/// A boundary reader of this process (sysinfo's; no marks or CPU here).
#[cfg(feature = "unstable-readers")]
pub(crate) fn boundary_reader_alone(_marks: bool, _cpu: bool) -> Box<dyn SelfReader> {
    Box::new(SysinfoSelf::new())
}

/// No exited child is read here (no `waitid` rusage).
pub(crate) fn exited_child(_pid: u32) -> Option<Descendant> {
    None
}

/// A clock tick of the processes' start times (not read here).
pub(crate) fn start_tick_seconds() -> f64 {
    0.01
}

/// Not read here: every descendant counts for every stage of an interval.
pub(crate) fn boot_seconds() -> Option<f64> {
    None
}

/// Not read here.
pub(crate) fn thread_cpu_micros() -> Option<u64> {
    None
}

/// Not checked here: the last sample stands until the next.
pub(crate) fn has_exited(_pid: u32) -> bool {
    false
}

/// No expedited barrier here: callers fall back to their slower path.
pub(crate) fn register_barrier() -> bool {
    false
}

/// No expedited barrier here.
pub(crate) fn heavy_barrier() -> bool {
    false
}

/// The monitored process alone, through sysinfo.
pub(crate) struct SysinfoSelf {
    system: Option<System>,
    pid: Pid,
}

impl SysinfoSelf {
    pub(crate) fn new() -> SysinfoSelf {
        SysinfoSelf {
            system: System::new().ok(),
            pid: Pid::from_u32(std::process::id()),
        }
    }
}

impl crate::memory::SelfReader for SysinfoSelf {
    fn read(&mut self) -> Option<crate::memory::SelfReading> {
        let system = self.system.as_mut()?;
        system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            false,
            ProcessRefreshKind::nothing().with_memory(),
        );
        Some(crate::memory::SelfReading {
            rss: system.process(self.pid)?.memory(),
            ..crate::memory::SelfReading::default()
        })
    }

    fn live_children(
        &mut self,
        descendants: &[crate::memory::Descendant],
        gone: &mut Vec<bool>,
    ) -> crate::memory::LiveChildren {
        super::live_children_rss(descendants, gone, |_| {})
    }
}
