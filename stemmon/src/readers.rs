//! The readers one sample is made of, for the benchmark crate (`bench/`) to time beside
//! their peers: one full tree sample, one boundary reading, one GPU reading. Behind the
//! feature `unstable-readers`, off by default: not a stable API (a monitor's reader is
//! chosen with `MonitorBuilder::reader`).

pub use crate::memory::{Descendant, TreeReader, TreeReading};
#[cfg(feature = "gpu")]
pub use crate::sources::gpu::{
    DeviceInfo, DeviceReading, GpuInfo, GpuReading, GpuSource, ProcessGpu, Reason,
};

/// The default reader, reading every process's `stat` and `io` at every sample (the
/// monitor's reader reads them at most every 10 ms per process): what a full sample
/// costs, for the benchmark of a tree sample against its floor.
pub fn full_reader(detailed: bool) -> Box<dyn TreeReader> {
    crate::sys::full_reader(detailed)
}

/// The best reader for this platform (with high-water marks where it has them), on a
/// ledger of its own.
pub fn default_reader(detailed: bool) -> Box<dyn TreeReader> {
    crate::sys::default_reader(detailed)
}

/// The stage-boundary reading of this process, as the engine takes it, for the
/// benchmark of what CPU and I/O add to it (the book's `cpu-io.md`: at most 1 µs).
pub struct BoundaryReader(Box<dyn crate::memory::SelfReader>);

impl BoundaryReader {
    /// A boundary reader on a ledger of its own; `marks` reads and resets the
    /// high-water mark, `cpu` reads CPU and I/O (`getrusage`).
    pub fn new(marks: bool, cpu: bool) -> BoundaryReader {
        BoundaryReader(crate::sys::boundary_reader_alone(marks, cpu))
    }

    /// One reading: this process's RSS, and its CPU microseconds where read.
    pub fn read(&mut self) -> Option<(u64, Option<u64>)> {
        let reading = self.0.read()?;
        Some((reading.rss, reading.usage.map(|u| u.cpu_micros())))
    }
}

/// The calling thread's CPU time in microseconds, as a call's exit reads it
/// (`getrusage(RUSAGE_THREAD)`).
pub fn thread_cpu_micros() -> Option<u64> {
    crate::sys::thread_cpu_micros()
}
