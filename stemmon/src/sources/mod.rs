//! Measurement sources beside the tree's memory readers.

#[cfg(feature = "gpu")]
pub(crate) mod gpu;
