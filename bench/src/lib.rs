//! Benchmarks of stemmon against its peers; see benches/.
