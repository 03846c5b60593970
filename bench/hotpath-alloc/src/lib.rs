//! Holds the `heap_hotpath` bench (see `benches/`): hotpath's allocation mode must be
//! the global allocator of a binary of its own, with a feature the other benches'
//! hotpath peer must not get. Its criterion figures go to `$CRITERION_HOME`, where
//! `bench-table` reads them.
