//! What the attribute expansions call, and nothing else. Not a public API: it changes
//! together with `stemmon-macros`, which is why that crate is pinned exactly.

use crate::monitor::Monitor;
use crate::recorder::short_type_name;
use std::cell::Cell;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::context::enter;
pub use crate::future::{instrument, AsyncStage, Instrumented};
pub use crate::memory::{default_reader, portable_reader, TreeReader, TreeReading};
pub use crate::stage::Stage;

/// Picked by autoref for a `Result`: the `type_name` of the error when it is `Err`.
/// Usage: `(&value).__stemmon_error()` with both traits in scope.
pub trait ErrorOfResult {
    /// `Some(type_name::<E>())` for `Err`, `None` for `Ok`.
    fn __stemmon_error(&self) -> Option<&'static str>;
}

impl<T, E> ErrorOfResult for Result<T, E> {
    #[inline]
    fn __stemmon_error(&self) -> Option<&'static str> {
        match self {
            Ok(_) => None,
            Err(_) => Some(std::any::type_name::<E>()),
        }
    }
}

/// The fallback for every other type: never an error.
pub trait ErrorOfOther {
    /// Always `None`.
    fn __stemmon_error(&self) -> Option<&'static str>;
}

impl<T: ?Sized> ErrorOfOther for &T {
    #[inline]
    fn __stemmon_error(&self) -> Option<&'static str> {
        None
    }
}

/// Calls the closure holding a function's body; gives `return` and `?` in the body a
/// boundary while the return type (from the `let` it is bound to) drives inference.
#[inline(always)]
pub fn call<R, F: FnOnce() -> R>(body: F) -> R {
    body()
}

/// Names the output type of an `async` body, so `?` inside it infers.
#[inline(always)]
pub fn typed_future<R, F: Future<Output = R>>(future: F) -> F {
    future
}

/// Records the error type a call returned on its stage guard.
#[inline]
pub fn set_error(stage: &Stage, type_name: Option<&'static str>) {
    stage.set_error(type_name);
}

/// The arguments of `#[monitor_main(...)]`; `None` where the key was not written.
#[derive(Debug, Default)]
pub struct MainConfig {
    /// `output = "path"`.
    pub output: Option<&'static str>,
    /// `sample_interval = seconds`.
    pub sample_interval: Option<f64>,
    /// `log_interval = seconds` (`Some(Some(_))`) or `log_interval = None` (`Some(None)`).
    pub log_interval: Option<Option<f64>>,
    /// `detailed_memory = bool`.
    pub detailed_memory: Option<bool>,
    /// `max_samples = count`.
    pub max_samples: Option<usize>,
}

/// The monitor of a `#[monitor_main]` function: finalizes on drop, so a return, an
/// `Err` and a panic all leave a report.
#[derive(Debug)]
pub struct MainGuard {
    monitor: Option<Monitor>,
    error: Cell<Option<&'static str>>,
}

impl MainGuard {
    /// Records the error type `main` returned.
    pub fn set_error(&self, type_name: Option<&'static str>) {
        if type_name.is_some() {
            self.error.set(type_name);
        }
    }
}

impl Drop for MainGuard {
    fn drop(&mut self) {
        if let Some(monitor) = self.monitor.take() {
            let error = if std::thread::panicking() {
                Some("panic".to_owned())
            } else {
                self.error.get().map(short_type_name)
            };
            monitor.finish_with_error(error);
        }
    }
}

fn warn(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "[stemmon] warning: {message}");
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn parse_seconds(name: &str, text: &str) -> Option<Duration> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => {
            Duration::try_from_secs_f64(seconds).ok()
        }
        _ => {
            warn(&format!(
                "ignoring {name}={text:?}: expected a positive number of seconds"
            ));
            None
        }
    }
}

/// `STEMMON_DISABLE`: `1`/`true`/`yes`/`on` disable, `0`/`false`/`no`/`off`/empty do not.
fn disabled() -> bool {
    let Some(value) = env("STEMMON_DISABLE") else {
        return false;
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => true,
        "" | "0" | "false" | "no" | "off" => false,
        _ => {
            warn(&format!(
                "ignoring STEMMON_DISABLE={value:?}: expected 1 or 0"
            ));
            false
        }
    }
}

/// Starts the monitor of a `#[monitor_main]` function, with the environment's overrides.
/// A monitor that cannot start is a warning, never the program's failure.
pub fn main_start(config: MainConfig) -> MainGuard {
    let inert = MainGuard {
        monitor: None,
        error: Cell::new(None),
    };
    if disabled() {
        return inert;
    }
    let mut builder = Monitor::builder();
    if let Some(seconds) = config
        .sample_interval
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
    {
        builder = builder.sample_interval(seconds);
    }
    if let Some(log) = config.log_interval {
        builder = builder.log_interval(log.and_then(|s| Duration::try_from_secs_f64(s).ok()));
    }
    if let Some(path) = config.output {
        builder = builder.output(path);
    }
    if let Some(detailed) = config.detailed_memory {
        builder = builder.detailed_memory(detailed);
    }
    if let Some(count) = config.max_samples {
        builder = builder.max_samples(count);
    }
    if let Some(path) = env("STEMMON_OUTPUT").filter(|p| !p.is_empty()) {
        builder = builder.output(PathBuf::from(path));
    }
    if let Some(text) = env("STEMMON_SAMPLE_INTERVAL") {
        if let Some(every) = parse_seconds("STEMMON_SAMPLE_INTERVAL", &text) {
            builder = builder.sample_interval(every);
        }
    }
    if let Some(text) = env("STEMMON_LOG_INTERVAL") {
        if text.trim().eq_ignore_ascii_case("none") {
            builder = builder.log_interval(None);
        } else if let Some(every) = parse_seconds("STEMMON_LOG_INTERVAL", &text) {
            builder = builder.log_interval(Some(every));
        }
    }
    match builder.start() {
        Ok(monitor) => MainGuard {
            monitor: Some(monitor),
            error: Cell::new(None),
        },
        Err(error) => {
            warn(&format!("running without a monitor: {error}"));
            inert
        }
    }
}
