//! Attribute macros of stemmon: `#[monitored]` and `#[monitor_main]`.
//!
//! Use them through the `stemmon` crate, which re-exports them and holds the runtime
//! their expansions call (`::stemmon::__private`, pinned to this crate's exact version).
//! With the `stemmon` feature `enabled` off, both expand to the item exactly as written.
#![warn(missing_docs)]

mod args;
mod expand;
mod item;
mod limits;

use proc_macro::TokenStream;

/// Records each call of a fn as a stage of the running monitor, on whichever thread
/// the call runs.
///
/// `#[monitored]` names the stage after the fn; `#[monitored("name")]` names it
/// explicitly. It applies to free fns, methods (`&self`, `&mut self`, `self`), fns in
/// trait impls, generic fns, `impl Trait` arguments and returns, `unsafe fn` and
/// `async fn`. Attributes, docs, visibility and the whole signature are kept.
///
/// - A call nested in another monitored call is a child stage (`"fit/inner"`); repeated
///   calls of one path are aggregated (`calls`, total / min / max wall time, peaks).
/// - Every thread of the process is recorded: a call on a spawned or scoped thread, a
///   rayon worker or a tokio worker nests under the stage open on the monitor's own
///   thread, and `threads` counts the threads a stage's calls ran on.
/// - `return`, `?` and panics all close the stage. A call that panics is recorded with
///   `error: "panic"`; one that returns `Err(e)` with the short type name of `e`
///   (`"ParseIntError"`). The panic or the `Err` reaches the caller unchanged.
/// - An `async fn` is one stage from its first poll to its completion, across awaits,
///   entered on every poll; a future dropped before it completes is recorded with
///   `error: "cancelled"`.
/// - With no monitor running the call records nothing and costs one relaxed atomic load
///   and a branch. A monitor started with `current_thread_only` records the calls of its
///   own thread alone: calls on other threads then record nothing.
/// - On a `const fn` it is a compile error: a stage reads the clock at run time.
/// - For a fn returning `impl Trait`, the stage covers the call that builds the value,
///   not work the value does later (an iterator's items, for example).
/// - A `#[track_caller]` fn keeps its body inline (a closure would report its own
///   location as the caller's), so its stage records panics but not the `Err` type.
///
// The example checks what is recorded: with the `enabled` feature off nothing is, so
// `cargo test -p stemmon-macros --no-default-features` does not run it.
#[cfg_attr(feature = "enabled", doc = "```")]
#[cfg_attr(not(feature = "enabled"), doc = "```ignore")]
/// use stemmon::monitored;
///
/// #[monitored] // the stage is named "parse"
/// fn parse(text: &str) -> Result<u32, std::num::ParseIntError> {
///     text.trim().parse()
/// }
///
/// #[monitored("load all")]
/// fn load(lines: &[&str]) -> Result<u32, std::num::ParseIntError> {
///     let mut sum = 0;
///     for line in lines {
///         sum += parse(line)?;
///     }
///     Ok(sum)
/// }
///
/// let monitor = stemmon::Monitor::builder().log_interval(None).start()?;
/// assert_eq!(load(&["1", " 2"]), Ok(3));
/// assert!(load(&["1", "x"]).is_err());
/// let report = monitor.finish();
/// let load = report.stage("load all").unwrap();
/// assert_eq!((load.calls, load.errors), (2, 1));
/// let parse = report.stage("load all/parse").unwrap();
/// assert_eq!((parse.calls, parse.errors), (4, 1));
/// assert_eq!(parse.error.as_deref(), Some("ParseIntError"));
/// # Ok::<(), stemmon::Error>(())
/// ```
///
/// # Equivalent code without `#[monitored]`
///
/// The body runs in a closure typed by the return type, so `return` and `?` come back to
/// the expansion, which records an `Err` before the guard closes the stage (the
/// closure's return type, unlike a `let` type, lets every `return` in the body coerce as
/// it does in the fn):
///
/// ```
/// fn parse(text: &str) -> Result<u32, std::num::ParseIntError> {
///     let __stemmon_stage = ::stemmon::__private::enter("parse");
///     let __stemmon_ret = ::stemmon::__private::call(
///         move || -> Result<u32, std::num::ParseIntError> { text.trim().parse() },
///     );
///     ::stemmon::__private::set_error(&__stemmon_stage, {
///         use ::stemmon::__private::{ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
///         (&&&::stemmon::__private::ErrorOf(&__stemmon_ret)).__stemmon_error()
///     });
///     __stemmon_ret
/// }
/// # assert_eq!(parse("7"), Ok(7));
/// ```
///
/// A fn that returns `()`, `!` or `impl Trait` (no `Err` to record, or no type to name),
/// or that is `#[track_caller]`, keeps its block as it is, in the guard's scope:
///
/// ```
/// fn report(total: u32) {
///     let __stemmon_stage = ::stemmon::__private::enter("report");
///     { println!("{total}") }
/// }
/// # report(1);
/// ```
///
/// An `async fn` wraps its body in a future that opens the stage at the first poll and
/// hands the stage back with the output. The never-taken first `return` fixes the async
/// block's output type before the body's own `return`s are checked, so they coerce as
/// they do in the fn:
///
/// ```
/// async fn fetch(id: u32) -> Result<u32, std::io::Error> {
///     let (__stemmon_ret, mut __stemmon_stage) =
///         ::stemmon::__private::instrument::<Result<u32, std::io::Error>, _>("fetch", async move {
///             if false {
///                 return ::core::option::Option::<Result<u32, std::io::Error>>::None.unwrap();
///             }
///             { Ok(id + 1) }
///         })
///         .await;
///     __stemmon_stage.set_error({
///         use ::stemmon::__private::{ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
///         (&&&::stemmon::__private::ErrorOf(&__stemmon_ret)).__stemmon_error()
///     });
///     __stemmon_ret
/// }
/// # let _ = fetch(1);
/// ```
#[proc_macro_attribute]
pub fn monitored(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::monitored(args.into(), item.into()).into()
}

/// Runs the program's `main` under a monitor that samples the whole process tree,
/// prints live lines and writes the report.
///
/// Keys, all optional:
///
/// | key | value | default |
/// | --- | --- | --- |
/// | `output` | `"path/report.json"` | no file |
/// | `sample_interval` | seconds, `0.5` or `2` | `1` |
/// | `log_interval` | seconds, or `None` to turn the live log off | `30` |
/// | `detailed_memory` | `true` / `false`: USS and PSS (Linux), footprint (macOS) | `false` |
/// | `max_samples` | how many raw samples the report keeps; `0` keeps summaries | `0` |
/// | `high_water_marks` | `"reset"` / `"keep"` / `false`: the kernel's exact peaks (Linux); `"reset"` gives each stage its own and a tight bound, but the program's own `ru_maxrss` and `/usr/bin/time` see reset marks; `"keep"` leaves those true | `"reset"` |
///
/// Intervals range from 0.001 s (one millisecond) to 86400 s (one day).
///
/// It accepts `fn main()`, `fn main() -> Result<..>`, `fn main() -> ExitCode`, and an
/// `async fn main` under a runtime attribute written below it (`#[tokio::main]`).
/// The report is written when `main` returns, returns `Err` (the report's `error` is
/// the error's short type name) and when it panics (`error: "panic"`); the `Err` or the
/// panic then goes on as without the attribute, with the same exit code. It is also
/// written, with `running: false`, when the program is ended by SIGINT or SIGTERM
/// (`error: "SIGINT"` / `"SIGTERM"`; then the signal's default action ends the process,
/// so the exit status is unchanged) and when it calls `std::process::exit`.
///
/// At run time, the environment overrides the keys: `STEMMON_OUTPUT=path`,
/// `STEMMON_SAMPLE_INTERVAL=seconds`, `STEMMON_LOG_INTERVAL=seconds|none`,
/// `STEMMON_HIGH_WATER_MARKS=reset|keep|0`, and `STEMMON_DISABLE=1` runs without a monitor.
/// A value that does not parse or is out of range (intervals from 0.001 to 86400 s) gets
/// one warning on stderr naming the variable and the value, and the key's value is used.
/// A monitor that cannot start is a warning on stderr, never the program's failure.
///
/// ```no_run
/// use stemmon::{monitor_main, monitored};
///
/// #[monitored]
/// fn fit(data: &[f64]) -> f64 {
///     data.iter().sum::<f64>() / data.len() as f64
/// }
///
/// #[monitor_main(output = "target/report.json", sample_interval = 0.5, log_interval = 10)]
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let data: Vec<f64> = std::fs::read_to_string("data.txt")?
///         .lines()
///         .map(str::parse)
///         .collect::<Result<_, _>>()?;
///     println!("mean {}", fit(&data));
///     Ok(())
/// }
/// ```
///
/// With tokio, write `#[monitor_main]` above `#[tokio::main]`: the monitor then starts
/// inside the runtime, on the thread that blocks on `main`'s future, and ends when that
/// future does. `#[monitored]` calls on tokio's worker threads are recorded too, nested
/// under the stage open on that thread.
///
/// ```no_run
/// #[stemmon::monitor_main(log_interval = None)]
/// #[tokio::main]
/// async fn main() {
///     // ...
/// }
/// ```
///
/// # Equivalent code without `#[monitor_main]`
///
/// ```no_run
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let __stemmon_main = ::stemmon::__private::main_start(::stemmon::__private::MainConfig {
///         output: ::core::option::Option::Some("target/report.json"),
///         sample_interval: ::core::option::Option::Some(0.5),
///         log_interval: ::core::option::Option::Some(::core::option::Option::Some(10.0)),
///         detailed_memory: ::core::option::Option::None,
///         max_samples: ::core::option::Option::None,
///         high_water_marks: ::core::option::Option::None,
///     });
///     let __stemmon_ret = ::stemmon::__private::call(move || -> Result<(), Box<dyn std::error::Error>> {
///         let text = std::fs::read_to_string("data.txt")?;
///         println!("{} lines", text.lines().count());
///         Ok(())
///     });
///     __stemmon_main.set_error({
///         use ::stemmon::__private::{ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
///         (&&&::stemmon::__private::ErrorOf(&__stemmon_ret)).__stemmon_error()
///     });
///     __stemmon_ret
///     // `__stemmon_main` drops here, or while a panic unwinds: it finalizes the monitor,
///     // logs `finished` or `failed (..)` and writes the report.
/// }
/// ```
///
/// A `main` that returns `()` keeps its block as it is, after `main_start`; an
/// `async fn main` runs its block as `typed_future::<R, _>(async move { .. }).await`
/// (with the typed first `return` of `#[monitored] async fn`) in place of the closure.
#[proc_macro_attribute]
pub fn monitor_main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::monitor_main(args.into(), item.into()).into()
}

/// Memory limits on an ordinary test: `#[stemmon::test(max_heap = "64 MiB")]`.
///
/// Keys, all optional: `max_heap = "64 MiB"` (the test's peak live heap),
/// `max_allocated = "1 GiB"` (bytes allocated in all), `max_allocations = 10_000`,
/// `leaks = "0 B"` (live heap left at return), `max_rss = "300 MiB"` (the peak RSS of
/// the test's process tree), and `rayon` (the body runs on a rayon pool of the test's
/// own; the `stemmon` feature `rayon`). Sizes are read as every stemmon setting reads
/// them; a bad one is a compile error at its literal. Unset limits take the
/// `STEMMON_TEST_*` variables' values.
///
/// It goes on a test fn with or without `#[test]` (it adds one where none is), and on
/// an `async fn` above `#[tokio::test]`. A test that breaks a limit panics with a
/// message that starts with the limit's key (`max_heap: 32.0 MiB held, limit 30.0
/// MiB`). The heap limits need `stemmon::Alloc` as the global allocator; the figures
/// count the threads the test starts with the `stemmon` feature `testing`. See
/// `stemmon::testing`.
///
/// Equivalent code without `#[stemmon::test]` (with `max_rss`, the attribute also
/// re-runs the test in a child process under plain `cargo test`):
///
/// ```no_run
/// # #[global_allocator]
/// # static ALLOC: stemmon::Alloc = stemmon::Alloc::system();
/// # fn main() {
/// let watch = stemmon::testing::Limits::new("my_test").max_heap("64 MiB").start().unwrap();
/// // the test's body
/// if let Err(exceeded) = watch.finish() {
///     panic!("{exceeded}");
/// }
/// # }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::test(args.into(), item.into()).into()
}
