//! The examples of stemmon live in `examples/*.rs`; this package has no library of its own.
