//! Measurement sources beside the tree's memory readers.

#[cfg(feature = "gpu")]
#[allow(dead_code)] // Read by the benchmarks only until the recorder takes its figures.
pub(crate) mod gpu;
