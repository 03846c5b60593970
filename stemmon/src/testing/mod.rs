//! Memory limits in ordinary tests: what `#[stemmon::test(...)]` runs, and
//! [`Limits`] for code that cannot take the attribute.
//!
//! A test's figures are those of its own thread and of every thread it starts while
//! the limits are on: `std::thread::spawn`, `std::thread::scope`, and (with the
//! `rayon` feature and the attribute's `rayon` key, or `Limits::rayon`) rayon inside
//! the test, on a pool of the test's own. Threads started by the test are attributed
//! with the `testing` feature (Linux with glibc), which wraps `pthread_create` in the
//! program; without it only the test's own thread counts. Tests running beside it on
//! the harness's other threads are never counted.
//!
//! ```
//! #[global_allocator]
//! static ALLOC: stemmon::Alloc = stemmon::Alloc::system();
//!
//! # fn main() {
//! let watch = stemmon::testing::Limits::new("fills_a_buffer")
//!     .max_heap("2 MiB")
//!     .leaks("0 B")
//!     .start()
//!     .unwrap();
//! let buffer = vec![0u8; 1 << 20];
//! drop(buffer);
//! let figures = watch.finish().unwrap();
//! assert!(figures.peak_heap_bytes >= 1 << 20);
//! # }
//! ```

mod check;
mod figures;
mod limits;
#[cfg(feature = "rayon")]
mod pool;
mod rss;
mod run;
#[cfg(all(feature = "testing", target_os = "linux", target_env = "gnu"))]
mod spawn;
mod table;

pub use figures::{Exceeded, Figures};
pub use limits::{Limits, Watch};
pub(crate) use run::run_test;
#[cfg(feature = "rayon")]
pub(crate) use run::run_test_rayon;
pub use run::Passed;
