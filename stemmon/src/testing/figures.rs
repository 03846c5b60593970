//! What a test measured, and the failure that names the limit it broke.

use std::fmt;

/// A test's figures, over its own thread and the threads it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Figures {
    /// Whether `stemmon::Alloc` counted the heap (the heap figures are 0 otherwise).
    pub heap_counted: bool,
    /// Allocations made (a `realloc` counts as one).
    pub allocations: u64,
    /// Bytes allocated in all.
    pub allocated_bytes: u64,
    /// The highest live heap (allocated minus freed since the start) at any moment,
    /// across the test's threads at once.
    pub peak_heap_bytes: u64,
    /// Live heap left when the test returned, once the threads it started had exited
    /// (negative when it freed more than it allocated).
    pub live_bytes: i64,
    /// The peak RSS of the test's process tree (the largest of its processes'
    /// high-water marks, as the kernel keeps them), when `max_rss` was asked for.
    pub max_rss_bytes: Option<u64>,
}

/// The limits a test is checked against, in bytes (or a count).
#[derive(Clone, Debug, Default)]
pub(crate) struct Bounds {
    /// The test's name (its report's file name).
    pub(crate) name: String,
    pub(crate) max_heap: Option<u64>,
    pub(crate) max_allocated: Option<u64>,
    pub(crate) max_allocations: Option<u64>,
    pub(crate) leaks: Option<u64>,
    pub(crate) max_rss: Option<u64>,
    /// The child of a re-run under `cargo test`: its parent checks `max_rss`.
    pub(crate) rss_elsewhere: bool,
}

impl Bounds {
    /// Whether a heap limit is set.
    pub(crate) fn wants_heap(&self) -> bool {
        self.max_heap.is_some()
            || self.max_allocated.is_some()
            || self.max_allocations.is_some()
            || self.leaks.is_some()
    }
}

/// A limit a test broke: the message names the limit first (`max_heap: 32.0 MiB
/// held, limit 30.0 MiB`), then the test's stage table when it had stages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exceeded {
    /// The whole message, as the failing test panics with it.
    pub message: String,
    /// The figures measured.
    pub figures: Figures,
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exceeded {}
