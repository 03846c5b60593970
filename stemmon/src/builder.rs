//! `MonitorBuilder`: the settings, their defaults, and their validation.

use crate::config::{Config, Reader};
use crate::error::Error;
use crate::monitor::Monitor;
use std::path::PathBuf;
use std::time::Duration;
use stemmon_report::settings::Marks;

/// Configures and starts a [`Monitor`]; made by [`Monitor::builder`].
///
/// The defaults: a sample every second, a log line every 30 seconds, no output file,
/// RSS and high-water marks (no USS / PSS), summaries only (no raw samples kept), and
/// every thread of the process covered.
///
/// The environment: `STEMMON_HIGH_WATER_MARKS=0` (or `false`, `no`, `off`) turns the
/// high-water marks off at [`start`](Self::start), whatever
/// [`high_water_marks`](Self::high_water_marks) said: reading them resets every
/// process's mark, which changes what the monitored programs see of themselves, and the
/// variable is how whoever runs them says no, everywhere (`#[monitor_main]`, `stemmon
/// run` and a builder alike). `1` changes nothing here: the marks are on by default, and
/// a builder that turned them off keeps them off.
///
/// ```
/// use std::time::Duration;
///
/// let monitor = stemmon::Monitor::builder()
///     .sample_interval(Duration::from_millis(200))
///     .log_interval(None)
///     .label("dataset", "2026-11")
///     .start()?;
/// let report = monitor.finish();
/// assert_eq!(report.labels["dataset"], "2026-11");
/// # Ok::<(), stemmon::Error>(())
/// ```
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until `.start()` is called"]
pub struct MonitorBuilder {
    pub(crate) config: Config,
    /// The environment was read already (`#[monitor_main]`, which warned about it).
    pub(crate) env_read: bool,
}

impl Monitor {
    /// A builder with the default settings.
    pub fn builder() -> MonitorBuilder {
        MonitorBuilder::default()
    }
}

impl MonitorBuilder {
    /// Time between background samples of the process tree, from 1 ms to one day (the
    /// bounds of every surface: `stemmon_report::settings`).
    /// The sampler rests at least half as long again as its last sample took, so that
    /// it stays under half a core: a large tree at a short interval is sampled less
    /// often than asked (the report's `samples` says how often).
    pub fn sample_interval(mut self, interval: Duration) -> Self {
        self.config.sample_interval = interval;
        self
    }

    /// Time between `running` log lines; `None` turns the live log off (the report is
    /// then written at the end only). From 1 ms to one day.
    pub fn log_interval(mut self, interval: Option<Duration>) -> Self {
        self.config.log_interval = interval;
        self
    }

    /// Where to write the JSON report. The path is resolved once, at start; parent
    /// directories are created; a regular file is replaced atomically at each log line
    /// and at the end.
    pub fn output(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.output = Some(path.into());
        self
    }

    /// Also read USS and PSS (Linux; `null` elsewhere, the macOS physical footprint is
    /// not read yet). Slower.
    pub fn detailed_memory(mut self, detailed: bool) -> Self {
        self.config.detailed_memory = detailed;
        self
    }

    /// Keep the last `count` raw samples in the report; 0 keeps summaries only.
    pub fn max_samples(mut self, count: usize) -> Self {
        self.config.max_samples = count;
        self
    }

    /// Cover the calling thread only, instead of every thread of the process, so that
    /// several monitors can run at once on different threads (parallel tests).
    pub fn current_thread_only(mut self) -> Self {
        self.config.current_thread_only = true;
        self
    }

    /// How to read the kernel's high-water marks (Linux): exact peaks that no sample
    /// misses. [`Marks::Reset`] (the default, and `true`) resets every process's mark
    /// at each reading, so that each interval and each stage gets its own exact peak and
    /// the bound is tight, but the program's own `ru_maxrss`, `VmHWM`, a `/usr/bin/time`
    /// around it and a batch system's accounting see reset marks; [`Marks::Keep`] never
    /// resets them, so those stay true (the maxrss the kernel reports at exit is the
    /// run's peak) and the bound sums lifetime peaks; [`Marks::Off`] (and `false`)
    /// samples RSS only. `STEMMON_HIGH_WATER_MARKS=reset|keep|0` overrides it.
    pub fn high_water_marks(mut self, marks: impl Into<Marks>) -> Self {
        set_marks(&mut self.config, marks.into());
        self
    }

    /// Reset every process's high-water mark at each reading (on by default), so that
    /// each interval between readings, and each stage, gets its own exact peak. The
    /// resets change what the monitored processes see of their own peaks (`ru_maxrss`,
    /// `VmHWM`, a `/usr/bin/time` inside the tree); `false` reads each mark as it runs
    /// from its process's start: the programs' own figures stay true, and the bound
    /// (a sum of lifetime peaks) is looser, never lower. `stemmon run` reads them so by
    /// default.
    pub fn reset_marks(mut self, on: bool) -> Self {
        self.config.reset_marks = on;
        self
    }

    /// Adds a label to the report and to every exported metric series. Names are
    /// Prometheus label names (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`; `host`,
    /// `job`, `stage` and `instance` are reserved); values are non-empty and printable,
    /// at most 1 KiB. A bad one fails `start`. It overrides the `job_id`, `array_task` and
    /// `rank` found in the scheduler's environment; `STEMMON_LABELS="k=v,k=v"` overrides it.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.labels.push((key.into(), value.into()));
        self
    }

    /// Writes the metrics, in Prometheus text format, to one `.prom` file in `dir` for
    /// node_exporter's textfile collector, at each `running` log line and at the end:
    /// `stemmon-<host>-<pid>.prom`, replaced atomically. `STEMMON_PROMETHEUS_TEXTFILE_DIR`
    /// overrides it. A failed write is the report's `export_error`, never the program's.
    pub fn prometheus_textfile(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.prometheus_textfile = Some(dir.into());
        self
    }

    /// Pushes the metrics to the Pushgateway at `url` (`http://host:9091`; `https://`
    /// with the `pushgateway-tls` feature), grouped by job (`stemmon`), host and labels,
    /// at each `running` log line and at the end, from the sampler thread with a 2 s
    /// timeout. `STEMMON_PUSHGATEWAY_URL` overrides it. A failed push is the report's
    /// `export_error`, never the program's.
    pub fn pushgateway(mut self, url: impl Into<String>) -> Self {
        self.config.pushgateway = Some(url.into());
        self
    }

    /// Sends metrics and a trace over OTLP/HTTP (protobuf) to the OpenTelemetry collector
    /// at `endpoint`, its base URL (`http://collector:4318`: `/v1/metrics` and
    /// `/v1/traces` are appended; `https://` with the `otlp-tls` feature). The metrics go
    /// at each `running` log line and at the end, the trace (a span per kept stage call)
    /// at the end, from a thread of their own with the timeout per request
    /// (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s by default); the end of the run waits for them
    /// that long, at most 1 s. No redirect is followed.
    ///
    /// The OpenTelemetry SDKs' variables override it: `OTEL_EXPORTER_OTLP_ENDPOINT`, the
    /// per-signal `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` / `..._TRACES_ENDPOINT` (used as
    /// they are), `OTEL_EXPORTER_OTLP[_{METRICS,TRACES}]_{HEADERS,TIMEOUT,COMPRESSION}`,
    /// `OTEL_{METRICS,TRACES}_EXPORTER` (`none` sends no such signal),
    /// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_SDK_DISABLED=true` turns
    /// OTLP off. Credentials go in `OTEL_EXPORTER_OTLP_HEADERS`: a URL's `user:password@`
    /// is shown as `***` everywhere. A failed send is the report's `export_error`, never
    /// the program's. A bad `endpoint` (a port out of range included) fails
    /// [`start`](Self::start).
    #[cfg(feature = "otlp")]
    pub fn otlp(mut self, endpoint: impl Into<String>) -> Self {
        self.config.otlp = Some(endpoint.into());
        self
    }

    /// Whether the OTLP resource carries `process.command_args`, the program's whole
    /// argv (off by default, as the semantic conventions have it: secrets live there).
    /// `STEMMON_OTLP_COMMAND_ARGS` overrides it.
    #[cfg(feature = "otlp")]
    pub fn otlp_command_args(mut self, on: bool) -> Self {
        self.config.otlp_command_args = on;
        self
    }

    /// Chooses the memory source; [`Reader::Native`] by default.
    pub fn reader(mut self, reader: Reader) -> Self {
        self.config.reader = reader;
        self
    }

    /// Samples the tree rooted at another process (one this process started) instead
    /// of this one: the report's `parent_*` figures are then that process's. This is
    /// how `stemmon run` watches a command.
    pub fn root_process(mut self, pid: u32) -> Self {
        self.config.root = Some(pid);
        self
    }

    /// With [`root_process`](Self::root_process): also counts this process's other
    /// children, and their descendants, as descendants of the tree. A subreaper
    /// (`PR_SET_CHILD_SUBREAPER`, as `stemmon run` is) adopts the processes the watched
    /// command leaves behind; with this they stay in the tree. Linux only.
    pub fn adopted_orphans(mut self, on: bool) -> Self {
        self.config.adopted_orphans = on;
        self
    }

    /// With [`root_process`](Self::root_process): the high-water mark (`VmHWM`) of the
    /// process that started the root, when it started it. The kernel carries it into
    /// the root's own `ru_maxrss` across `exec` (the peak of the image it replaced), so
    /// the root's exit figure, and `/usr/bin/time`'s for it, never read below it; the
    /// report's `spawn_floor_bytes` says so. More than 1 MiB above it, the exited root's
    /// rusage raises its exact peak: the peak of a program it replaced by `exec`, which
    /// its exit record does not have. `stemmon run` passes its own.
    pub fn spawn_floor(mut self, bytes: u64) -> Self {
        self.config.spawn_floor = Some(bytes);
        self
    }

    /// Whether the GPUs' memory is read through NVML (on by default, where stemmon was
    /// built with the `gpu` feature). `false` loads no driver at all: the way to keep a
    /// driver that crashes or hangs out of the program (`STEMMON_GPU=0` does the same
    /// at run time, and wins over this).
    pub fn gpu(mut self, on: bool) -> Self {
        self.config.gpu = on;
        self
    }

    /// Makes none of the measurements read at samples (GPU, open descriptors, memory
    /// pressure): the benches time a sample without them beside one with them.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn without_measurements(mut self) -> Self {
        self.config.measurements = false;
        self
    }

    /// Reads NVML in a helper process, started as `program args...`, instead of in this
    /// process: a driver that crashes then takes only the helper down, and the report
    /// says so. The program must call [`serve_gpu_helper`](crate::serve_gpu_helper)
    /// when started with these arguments (`stemmon run` starts itself this way). The
    /// helper is a child of this process: a program that reaps every child
    /// (`waitpid(-1)`) should not use this. Without the `gpu` feature it does nothing.
    pub fn gpu_helper(
        mut self,
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<std::ffi::OsString>>,
    ) -> Self {
        self.config.gpu_helper = Some(crate::config::HelperCommand {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// Records the argv of the monitored command in the report's `command`.
    pub fn command(mut self, argv: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.config.command = Some(argv.into_iter().map(Into::into).collect());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        let invalid = |setting, reason: &str| {
            Err(Error::InvalidConfig {
                setting,
                reason: reason.to_owned(),
            })
        };
        let config = &self.config;
        // The bounds and the message of the settings table, as on every surface.
        use stemmon_report::settings::{LOG_INTERVAL, SAMPLE_INTERVAL};
        if let Err(expected) = SAMPLE_INTERVAL.check_seconds(config.sample_interval.as_secs_f64()) {
            return invalid("sample_interval", &expected);
        }
        if let Some(every) = config.log_interval {
            if let Err(expected) = LOG_INTERVAL.check_seconds(every.as_secs_f64()) {
                return invalid("log_interval", &expected);
            }
        }
        if let Some(path) = &config.output {
            if path.as_os_str().is_empty() || path.file_name().is_none() {
                return invalid("output", "must name a file");
            }
        }
        for (name, value) in &config.labels {
            crate::identity::check_label(name, value)
                .or_else(|reason| invalid("label", &reason))?;
        }
        Ok(())
    }

    /// Starts the monitor: makes it the process's monitor (or, with
    /// [`current_thread_only`](Self::current_thread_only), the calling thread's), takes
    /// the first sample, starts the `stemmon-sampler` thread and logs `started`.
    ///
    /// Fails if a setting is out of range, if a monitor already covers this thread, or
    /// if the thread cannot be started.
    pub fn start(mut self) -> Result<Monitor, Error> {
        self.validate()?;
        if !self.env_read {
            let (on, warnings) = crate::env::marks_override(&crate::env::var);
            for warning in &warnings {
                crate::warn::warn(warning);
            }
            self.apply_marks_override(on);
        }
        Monitor::start(self.config)
    }

    /// What `STEMMON_HIGH_WATER_MARKS` does to this builder: `0` turns the marks off,
    /// `reset` and `keep` set them so, `1` (`None` here) leaves them as set.
    pub(crate) fn apply_marks_override(&mut self, marks: Option<Marks>) {
        if let Some(marks) = marks {
            set_marks(&mut self.config, marks);
        }
    }
}

/// `marks` in `config`: whether the marks are read, and reset.
fn set_marks(config: &mut Config, marks: Marks) {
    match marks {
        Marks::Off => config.high_water_marks = false,
        marks => {
            config.high_water_marks = true;
            config.reset_marks = marks == Marks::Reset;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn a_builders_start_turns_the_marks_off_for_a_zero_and_only_then() {
        let read = |value: &str| {
            let value = OsString::from(value);
            crate::env::marks_override(&move |name: &str| {
                (name == "STEMMON_HIGH_WATER_MARKS").then(|| value.clone())
            })
        };
        for (value, set, expected) in [
            ("0", true, false),
            ("off", true, false),
            ("1", true, true),
            ("1", false, false),
            ("", true, true),
        ] {
            let (on, warnings) = read(value);
            assert_eq!(!warnings.is_empty(), value.is_empty(), "{value}");
            let mut builder = Monitor::builder().high_water_marks(set);
            builder.apply_marks_override(on);
            assert_eq!(builder.config.high_water_marks, expected, "{value} {set}");
        }
        assert_eq!(crate::env::marks_override(&|_| None), (None, Vec::new()));
    }
}
