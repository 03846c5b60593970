//! The measurements, one file each: what each adds to a report. A new one is a file
//! here and its name in the list below. The core's measurements (the tree's memory, the
//! job's cgroup, the heap, CPU and I/O) have their figures in the core table and typed
//! fields of the report, and are not in the list.

pub mod cgroup;
pub mod cpu;
pub mod heap;
pub mod tree;

/// The core's measurements: their figures are in the core table and typed fields of
/// the report, documented on the reference page.
pub const CORE: &[&super::Measure] = &[
    &tree::MEASURE,
    &cgroup::MEASURE,
    &heap::MEASURE,
    &cpu::MEASURE,
];

/// Declares each measurement's module and the list of them, in the report's order.
macro_rules! measures {
    ($($name:ident),* $(,)?) => {
        $(pub mod $name;)*
        /// Every measurement, in the report's order.
        pub(super) const ALL: &[&super::Measure] = &[$(&$name::MEASURE),*];
    };
}

measures![gpu, fds, pressure];
