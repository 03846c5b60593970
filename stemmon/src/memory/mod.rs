//! Memory readers: one per source, behind [`TreeReader`]. The sampler does not know
//! which one answered; the report's `sampler` key does.

use std::io;

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
    /// Every process found was read.
    pub rss_complete: bool,
}

/// Reads the memory of a process and all its descendants.
pub trait TreeReader: Send {
    /// The name the report gives this reader (`sampler`).
    fn name(&self) -> &'static str;
    /// Reads the tree rooted at `root` now. An error means the root itself could not
    /// be read; descendants that vanish or deny access only lower the coverage.
    fn read_tree(&mut self, root: u32) -> io::Result<TreeReading>;
}

/// The best reader for this platform.
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

/// The cheap reading of the monitored process alone, taken at stage boundaries.
pub(crate) struct SelfRss {
    #[cfg(target_os = "linux")]
    inner: Option<linux::SelfStatm>,
    #[cfg(not(target_os = "linux"))]
    inner: portable::SysinfoSelf,
}

impl SelfRss {
    pub(crate) fn new() -> SelfRss {
        #[cfg(target_os = "linux")]
        {
            SelfRss {
                inner: linux::SelfStatm::open().ok(),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            SelfRss {
                inner: portable::SysinfoSelf::new(),
            }
        }
    }

    /// RSS of this process now, `None` if it cannot be read.
    pub(crate) fn read(&mut self) -> Option<u64> {
        #[cfg(target_os = "linux")]
        {
            self.inner.as_mut()?.read().ok()
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.inner.read()
        }
    }
}
