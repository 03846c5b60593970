//! What the benchmark crate (`bench/`) times besides the expansions: one full tree
//! sample through the default reader. Not a public API; the reader choice of users is
//! `MonitorBuilder::reader`.

pub use crate::memory::{default_reader, Descendant, TreeReader, TreeReading};
