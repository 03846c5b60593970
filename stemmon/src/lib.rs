//! stemmon measures where a Rust program spends its time and memory, stage by stage,
//! for the whole process tree: the program and every process it starts.
//!
//! Put `#[monitor_main]` on `main` and `#[monitored]` on the functions that are your
//! pipeline's stages:
//!
//! ```no_run
//! use stemmon::{monitor_main, monitored};
//!
//! #[monitored("fit")]
//! fn fit(data: &[f64]) -> f64 {
//!     data.iter().sum::<f64>() / data.len() as f64
//! }
//!
//! #[monitored] // the stage is named after the function: "predict"
//! fn predict(mean: f64, data: &[f64]) -> Result<Vec<f64>, std::io::Error> {
//!     Ok(data.iter().map(|x| x - mean).collect())
//! }
//!
//! #[monitor_main(output = "report.json", sample_interval = 0.5)]
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let data: Vec<f64> = (0..1_000_000).map(f64::from).collect();
//!     let mean = fit(&data);
//!     let residuals = predict(mean, &data)?;
//!     println!("{} residuals", residuals.len());
//!     Ok(())
//! }
//! ```
//!
//! Running it prints live lines such as
//!
//! ```text
//! [stemmon] completed fit (0.01s); elapsed=0.05s; stage=workflow; RSS=12.1 MiB; ...
//! ```
//!
//! and leaves `report.json` ([`Report`]): wall time, per-stage calls and timings, memory
//! peaks of the tree per stage, process counts, and the monitor's own errors.
//!
//! The same is available without attributes through [`Monitor`]:
//!
//! ```
//! # fn main() -> Result<(), stemmon::Error> {
//! let monitor = stemmon::Monitor::builder().log_interval(None).start()?;
//! {
//!     let _stage = monitor.stage("load")?;
//!     let data = vec![0u8; 8 << 20];
//!     std::hint::black_box(&data);
//! }
//! let report = monitor.finish();
//! let load = report.stage("load").unwrap();
//! assert_eq!(load.calls, 1);
//! assert!(load.peaks.peak_parent_rss_bytes.is_some());
//! # Ok(())
//! # }
//! ```
//!
//! The monitor covers every thread of the process: a `#[monitored]` call or a
//! [`stage`] on a spawned or scoped thread, a rayon worker or a tokio worker is
//! recorded too, and nests under the stage open on the monitor's own thread:
//!
//! ```
//! let monitor = stemmon::Monitor::builder().log_interval(None).start()?;
//! {
//!     let _fit = monitor.stage("fit")?;
//!     std::thread::scope(|scope| {
//!         for _ in 0..4 {
//!             scope.spawn(|| drop(stemmon::stage("chunk")));
//!         }
//!     });
//! }
//! let report = monitor.finish();
//! let chunk = report.stage("fit/chunk").unwrap();
//! assert_eq!((chunk.calls, chunk.threads), (4, 4));
//! # Ok::<(), stemmon::Error>(())
//! ```
//!
//! Install [`Alloc`] as the global allocator and each stage also says what it
//! allocated, freed and held on the heap, on every thread (RSS belongs to the process;
//! the heap figures say which stage held the memory):
//!
//! ```
//! #[global_allocator]
//! static ALLOC: stemmon::Alloc = stemmon::Alloc::system();
//! # fn main() {}
//! ```
//!
//! Turn off the default feature `enabled` (`default-features = false`) and both
//! attributes expand to the item exactly as written: no monitor, no thread, no cost.
//!
//! Turn on the feature `tracing` and [`TracingLayer`] makes every `tracing` span a
//! stage: `tracing_subscriber::registry().with(stemmon::TracingLayer::new()).init()`.
//!
//! With the default feature `otlp`, set `OTEL_EXPORTER_OTLP_ENDPOINT` (or call
//! [`MonitorBuilder::otlp`]) and the run's metrics and its trace, a span per stage call,
//! go to an OpenTelemetry collector; [`otlp::send`] sends a finished report.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod builder;
mod cadence;
mod clock;
mod config;
mod context;
mod env;
mod error;
mod export;
mod future;
mod heap;
mod identity;
mod log;
mod main_config;
mod main_guard;
mod memory;
mod monitor;
#[cfg(feature = "otlp")]
pub mod otlp;
mod output;
mod publish;
mod recorder;
pub mod report;
mod sampler;
mod signals;
mod sources;
mod stage;
mod sys;
pub mod testing;
#[cfg(feature = "tracing")]
mod tracing_layer;
mod warn;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

#[cfg(feature = "unstable-readers")]
pub mod readers;

pub use builder::MonitorBuilder;
pub use config::Reader;
pub use error::Error;
pub use heap::Alloc;
pub use monitor::{CommandExit, Monitor};
pub use output::Output;
pub use report::Report;
pub use stage::output_path;
pub use stage::stage;
pub use stage::Stage;
pub use stemmon_macros::{monitor_main, monitored, test};
pub use stemmon_report::settings::Marks;
#[cfg(feature = "tracing")]
pub use tracing_layer::TracingLayer;

/// The body of a GPU helper process: what a program started by
/// [`MonitorBuilder::gpu_helper`] runs. It loads NVML in this process, answers the
/// monitor's questions on stdin and stdout, and returns when the monitor closes its
/// input (or dies). A driver that crashes or hangs then takes this process down, not
/// the monitored one. `stemmon run` starts itself this way.
///
/// ```no_run
/// // The helper's entry point, chosen by an argument the program gives it:
/// fn main() -> std::process::ExitCode {
///     if std::env::args().nth(1).as_deref() == Some("gpu-helper") {
///         return stemmon::serve_gpu_helper();
///     }
///     // ... start a monitor with `.gpu_helper(std::env::current_exe()?, ["gpu-helper"])`
///     std::process::ExitCode::SUCCESS
/// }
/// ```
#[cfg(all(unix, feature = "gpu"))]
pub fn serve_gpu_helper() -> std::process::ExitCode {
    sources::gpu::helper::serve()
}
