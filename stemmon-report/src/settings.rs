//! Every setting of a monitor, declared once: its name (the builder method and the
//! `#[monitor_main]` key), what it takes, its default, its environment variable, its
//! `stemmon run` flag and its doc line. The runtime, the attribute macros and the
//! command all parse a value with [`Setting::parse`], so the same bad value gets the
//! same message everywhere.
//!
//! Precedence, lowest first: the default, the builder or the attribute, the
//! environment, the command's flag. A bad value from the environment is one warning and
//! leaves the setting below it as it is; from the builder it is an `Error` at `start`;
//! from the attribute a compile error at the value; from a flag exit 2.

use std::fmt;
use std::time::Duration;

/// The shortest interval any surface accepts: one millisecond (a shorter one would
/// spend the program's time sampling).
pub const MIN_INTERVAL_SECONDS: f64 = 0.001;
/// The longest interval any surface accepts: one day.
pub const MAX_INTERVAL_SECONDS: f64 = 86_400.0;

/// What a setting takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// Seconds from [`MIN_INTERVAL_SECONDS`] to [`MAX_INTERVAL_SECONDS`]; with
    /// `none_ok`, also `none` (off).
    Interval {
        /// `none` turns it off.
        none_ok: bool,
    },
    /// `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`.
    Flag,
    /// A whole number, 0 or more.
    Count,
    /// The path of a file (not a directory).
    File,
    /// The path of a directory.
    Directory,
    /// An `http://` (or `https://`) base URL.
    Url,
    /// `key=value` pairs, comma-separated.
    Labels,
    /// A path to a library or a program.
    Path,
    /// `reset` or `keep` (a [`Marks`]), or a flag: `0` turns the marks off, `1` keeps
    /// the default.
    Marks,
    /// A size in bytes: a number and a unit, `64 MiB`, `1.5 GiB`, `512 KiB`, `0 B`
    /// (binary units; `kB`, `MB`, `GB` are powers of 1000; no unit: bytes).
    Size,
}

/// How the kernel's high-water marks are read (the `high_water_marks` setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Marks {
    /// Read and reset at every reading: each interval, and so each stage, gets its own
    /// exact peak and the bound is tight; what the processes see of their own peaks
    /// (`ru_maxrss`, `VmHWM`, `/usr/bin/time`, a batch system's accounting) is reset too.
    Reset,
    /// Read, never reset: every mark runs from its process's start, so the programs' own
    /// figures stay true (the maxrss the kernel reports at exit is the run's true
    /// peak); a stage's exact peak is then its process's peak so far, and the bound sums
    /// lifetime peaks (looser, never lower).
    Keep,
    /// Not read: RSS samples only.
    Off,
}

impl From<bool> for Marks {
    /// `true`: [`Marks::Reset`], the library's default; `false`: [`Marks::Off`].
    fn from(on: bool) -> Marks {
        if on {
            Marks::Reset
        } else {
            Marks::Off
        }
    }
}

/// A value parsed by [`Setting::parse`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// An interval.
    Interval(Duration),
    /// `none`: off.
    Off,
    /// A flag.
    Flag(bool),
    /// A count.
    Count(u64),
    /// A path, URL or label list, as given.
    Text(String),
    /// `reset` or `keep`.
    Marks(Marks),
    /// A size, in bytes.
    Size(u64),
}

/// One setting (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The builder method and the `#[monitor_main]` key: `sample_interval`.
    pub name: &'static str,
    /// What it takes.
    pub kind: Kind,
    /// Its default, as the docs write it.
    pub default: &'static str,
    /// Whether `#[monitor_main(...)]` takes it as a key.
    pub attribute: bool,
    /// The environment variable that overrides it, if any.
    pub env: Option<&'static str>,
    /// The `stemmon run` flag that sets it, if any.
    pub flag: Option<&'static str>,
    /// One line for the docs.
    pub doc: &'static str,
}

/// Seconds between samples of the process tree.
pub const SAMPLE_INTERVAL: Setting = Setting {
    name: "sample_interval",
    kind: Kind::Interval { none_ok: false },
    default: "1 s",
    attribute: true,
    env: Some("STEMMON_SAMPLE_INTERVAL"),
    flag: Some("--sample-interval"),
    doc: "seconds between samples of the whole process tree",
};

/// Seconds between `running` log lines, or none.
pub const LOG_INTERVAL: Setting = Setting {
    name: "log_interval",
    kind: Kind::Interval { none_ok: true },
    default: "30 s",
    attribute: true,
    env: Some("STEMMON_LOG_INTERVAL"),
    flag: Some("--log-interval"),
    doc: "seconds between live lines on stderr (and report rewrites), or `none`",
};

/// The report file.
pub const OUTPUT: Setting = Setting {
    name: "output",
    kind: Kind::File,
    default: "none (no file)",
    attribute: true,
    env: Some("STEMMON_OUTPUT"),
    flag: Some("--output"),
    doc: "the JSON report's path, replaced atomically at each log line and at the end",
};

/// USS, PSS (Linux), physical footprint (macOS).
pub const DETAILED_MEMORY: Setting = Setting {
    name: "detailed_memory",
    kind: Kind::Flag,
    default: "false",
    attribute: true,
    env: None,
    flag: Some("--detailed-memory"),
    doc: "also read USS and PSS (Linux); slower",
};

/// Raw samples kept in the report.
pub const MAX_SAMPLES: Setting = Setting {
    name: "max_samples",
    kind: Kind::Count,
    default: "0 (summaries only)",
    attribute: true,
    env: None,
    flag: None,
    doc: "how many of the latest raw samples the report keeps",
};

/// The kernel's high-water marks: reset at each reading, kept, or not read.
pub const HIGH_WATER_MARKS: Setting = Setting {
    name: "high_water_marks",
    kind: Kind::Marks,
    default: "reset (stemmon run: keep)",
    attribute: true,
    env: Some("STEMMON_HIGH_WATER_MARKS"),
    flag: Some("--high-water-marks"),
    doc: "`reset`: exact peaks per interval and stage, a tight bound, but the programs' own \
          ru_maxrss and /usr/bin/time see reset marks; `keep`: those stay true, the bound is \
          looser; 0 turns the marks off",
};

/// Labels of the report and the metrics.
pub const LABELS: Setting = Setting {
    name: "label",
    kind: Kind::Labels,
    default: "the scheduler's job_id, array_task and rank",
    attribute: false,
    env: Some("STEMMON_LABELS"),
    flag: Some("--label"),
    doc: "labels of the report and every exported series (`k=v,k=v`)",
};

/// node_exporter's textfile directory.
pub const PROMETHEUS_TEXTFILE: Setting = Setting {
    name: "prometheus_textfile",
    kind: Kind::Directory,
    default: "none",
    attribute: false,
    env: Some("STEMMON_PROMETHEUS_TEXTFILE_DIR"),
    flag: None,
    doc: "write the metrics as a .prom file in this directory (node_exporter's textfile collector)",
};

/// A Pushgateway.
pub const PUSHGATEWAY: Setting = Setting {
    name: "pushgateway",
    kind: Kind::Url,
    default: "none",
    attribute: false,
    env: Some("STEMMON_PUSHGATEWAY_URL"),
    flag: None,
    doc: "push the metrics to this Pushgateway",
};

/// An OTLP/HTTP endpoint.
pub const OTLP: Setting = Setting {
    name: "otlp",
    kind: Kind::Url,
    default: "none",
    attribute: false,
    env: Some("OTEL_EXPORTER_OTLP_ENDPOINT"),
    flag: Some("--endpoint"),
    doc: "send metrics and the run's trace to this OTLP/HTTP endpoint (and the standard \
          OTEL_* variables)",
};

/// The argv on OTLP.
pub const OTLP_COMMAND_ARGS: Setting = Setting {
    name: "otlp_command_args",
    kind: Kind::Flag,
    default: "false",
    attribute: false,
    env: Some("STEMMON_OTLP_COMMAND_ARGS"),
    flag: Some("--otlp-command-args"),
    doc: "put the program's whole argv in the OTLP resource as `process.command_args` \
          (off: secrets live there)",
};

/// The NVML library.
pub const NVML_LIBRARY: Setting = Setting {
    name: "nvml_library",
    kind: Kind::Path,
    default: "libnvidia-ml.so.1",
    attribute: false,
    env: Some("STEMMON_NVML_LIBRARY"),
    flag: None,
    doc: "the NVIDIA driver's NVML library the GPU figures are read through",
};

/// Whether the GPU is read at all.
pub const GPU: Setting = Setting {
    name: "gpu",
    kind: Kind::Flag,
    default: "true",
    attribute: false,
    env: Some("STEMMON_GPU"),
    flag: None,
    doc: "read the GPUs' memory through NVML (`0` turns the GPU source off: no driver \
          is loaded)",
};

/// No monitor at all.
pub const DISABLE: Setting = Setting {
    name: "disable",
    kind: Kind::Flag,
    default: "false",
    attribute: false,
    env: Some("STEMMON_DISABLE"),
    flag: None,
    doc: "`#[monitor_main]` starts no monitor at all",
};

/// Every setting, in the docs' order.
pub const SETTINGS: &[Setting] = &[
    OUTPUT,
    SAMPLE_INTERVAL,
    LOG_INTERVAL,
    DETAILED_MEMORY,
    MAX_SAMPLES,
    HIGH_WATER_MARKS,
    LABELS,
    PROMETHEUS_TEXTFILE,
    PUSHGATEWAY,
    OTLP,
    OTLP_COMMAND_ARGS,
    NVML_LIBRARY,
    GPU,
    DISABLE,
];

/// `#[stemmon::test(max_heap = ..)]`: the test's peak live heap.
pub const MAX_HEAP: Setting = Setting {
    name: "max_heap",
    kind: Kind::Size,
    default: "none",
    attribute: false,
    env: Some("STEMMON_TEST_MAX_HEAP"),
    flag: None,
    doc: "the most heap a test may hold at once, over all the threads it starts",
};

/// `#[stemmon::test(max_allocated = ..)]`: the bytes a test allocates in all.
pub const MAX_ALLOCATED: Setting = Setting {
    name: "max_allocated",
    kind: Kind::Size,
    default: "none",
    attribute: false,
    env: Some("STEMMON_TEST_MAX_ALLOCATED"),
    flag: None,
    doc: "the most bytes a test may allocate in all",
};

/// `#[stemmon::test(max_allocations = ..)]`: how many allocations a test makes.
pub const MAX_ALLOCATIONS: Setting = Setting {
    name: "max_allocations",
    kind: Kind::Count,
    default: "none",
    attribute: false,
    env: Some("STEMMON_TEST_MAX_ALLOCATIONS"),
    flag: None,
    doc: "the most allocations a test may make",
};

/// `#[stemmon::test(leaks = ..)]`: the heap a test may leave live when it returns.
pub const LEAKS: Setting = Setting {
    name: "leaks",
    kind: Kind::Size,
    default: "none",
    attribute: false,
    env: Some("STEMMON_TEST_LEAKS"),
    flag: None,
    doc: "the most heap a test may leave live when it returns",
};

/// `#[stemmon::test(max_rss = ..)]`: the peak RSS of the test's process tree.
pub const MAX_RSS: Setting = Setting {
    name: "max_rss",
    kind: Kind::Size,
    default: "none",
    attribute: false,
    env: Some("STEMMON_TEST_MAX_RSS"),
    flag: None,
    doc: "the most resident memory a process of the test's tree may reach",
};

/// Where a failing test's report goes.
pub const TEST_REPORTS: Setting = Setting {
    name: "test_reports",
    kind: Kind::Directory,
    default: "none (no file)",
    attribute: false,
    env: Some("STEMMON_TEST_REPORTS"),
    flag: None,
    doc: "a failing `#[stemmon::test]` writes its report in this directory",
};

/// The limits of `#[stemmon::test]` and `stemmon::testing::Limits`, in the docs' order.
pub const TEST_LIMITS: &[Setting] = &[MAX_HEAP, MAX_ALLOCATED, MAX_ALLOCATIONS, LEAKS, MAX_RSS];

impl Setting {
    /// The limit `#[stemmon::test]` names `key`.
    pub fn of_test_limit(key: &str) -> Option<&'static Setting> {
        TEST_LIMITS.iter().find(|s| s.name == key)
    }

    /// The setting `#[monitor_main]` names `key`, if it takes one.
    pub fn of_attribute(key: &str) -> Option<&'static Setting> {
        SETTINGS.iter().find(|s| s.attribute && s.name == key)
    }

    /// What it takes, as a message ends: `expected a number of seconds from 0.001 to
    /// 86400`.
    pub fn expected(&self) -> String {
        let what = match self.kind {
            Kind::Interval { none_ok: false } => seconds_range(),
            Kind::Interval { none_ok: true } => format!("{}, or none", seconds_range()),
            Kind::Flag => "1 or 0 (true or false)".to_owned(),
            Kind::Count => "a whole number, 0 or more".to_owned(),
            Kind::File => "the path of a file".to_owned(),
            Kind::Directory => "the path of a directory".to_owned(),
            Kind::Url => "an http:// URL".to_owned(),
            Kind::Labels => "key=value pairs, comma-separated".to_owned(),
            Kind::Path => "a path".to_owned(),
            Kind::Marks => "reset or keep, or 0 (off)".to_owned(),
            Kind::Size => "a size such as 64 MiB, 1.5 GiB or 0 B".to_owned(),
        };
        format!("expected {what}")
    }

    /// Parses `text`; the error is [`expected`](Setting::expected) with what was given.
    pub fn parse(&self, text: &str) -> Result<Value, String> {
        let trimmed = text.trim();
        let parsed = match self.kind {
            Kind::Interval { none_ok } => {
                if none_ok && trimmed.eq_ignore_ascii_case("none") {
                    Some(Value::Off)
                } else {
                    trimmed
                        .parse::<f64>()
                        .ok()
                        .and_then(interval)
                        .map(Value::Interval)
                }
            }
            Kind::Flag => parse_flag(trimmed).map(Value::Flag),
            Kind::Marks => match trimmed.to_ascii_lowercase().as_str() {
                "reset" => Some(Value::Marks(Marks::Reset)),
                "keep" => Some(Value::Marks(Marks::Keep)),
                _ => parse_flag(trimmed).map(Value::Flag),
            },
            Kind::Count => trimmed.parse().ok().map(Value::Count),
            Kind::Size => parse_size(trimmed).map(Value::Size),
            Kind::File => {
                let file = !text.is_empty() && !text.ends_with('/') && !text.ends_with("/.");
                file.then(|| Value::Text(text.to_owned()))
            }
            Kind::Directory | Kind::Url | Kind::Labels | Kind::Path => {
                (!trimmed.is_empty()).then(|| Value::Text(text.to_owned()))
            }
        };
        parsed.ok_or_else(|| self.expected())
    }

    /// An interval given as a number of seconds (the attribute's literal, the builder's
    /// `Duration`): the same bounds and message as [`parse`](Setting::parse).
    pub fn check_seconds(&self, seconds: f64) -> Result<Duration, String> {
        interval(seconds).ok_or_else(|| self.expected())
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

fn seconds_range() -> String {
    format!("a number of seconds from {MIN_INTERVAL_SECONDS} to {MAX_INTERVAL_SECONDS}")
}

/// `seconds` as an interval, if within the bounds.
fn interval(seconds: f64) -> Option<Duration> {
    let in_range =
        seconds.is_finite() && (MIN_INTERVAL_SECONDS..=MAX_INTERVAL_SECONDS).contains(&seconds);
    in_range
        .then(|| Duration::try_from_secs_f64(seconds).ok())
        .flatten()
}

/// `64 MiB`, `1.5GiB`, `512 kB`, `100`: a number (a fraction allowed) and an optional
/// unit, case-insensitive; `None` for anything else, a negative number, or more than
/// `u64::MAX` bytes.
fn parse_size(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: String = number.chars().filter(|&c| c != '_').collect();
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return None;
    }
    let number: f64 = number.parse().ok()?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kib" | "k" => 1024.0,
        "mib" | "m" => 1024.0 * 1024.0,
        "gib" | "g" => 1024.0 * 1024.0 * 1024.0,
        "tib" | "t" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return None,
    };
    let bytes = (number * scale).round();
    (bytes.is_finite() && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// `1`/`true`/`yes`/`on` and `0`/`false`/`no`/`off`.
fn parse_flag(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_bounded_the_same_way_whatever_the_surface() {
        let expected = "expected a number of seconds from 0.001 to 86400";
        assert_eq!(SAMPLE_INTERVAL.expected(), expected);
        for bad in [
            "0.0005", "86401", "0", "-1", "nan", "inf", "1e400", "soon", "",
        ] {
            assert_eq!(
                SAMPLE_INTERVAL.parse(bad),
                Err(expected.to_owned()),
                "{bad}"
            );
        }
        assert_eq!(
            SAMPLE_INTERVAL.check_seconds(0.0005),
            Err(expected.to_owned())
        );
        assert_eq!(
            SAMPLE_INTERVAL.parse(" 0.001 "),
            Ok(Value::Interval(Duration::from_millis(1)))
        );
        assert_eq!(
            SAMPLE_INTERVAL.parse("86400"),
            Ok(Value::Interval(Duration::from_secs(86_400)))
        );
        assert_eq!(LOG_INTERVAL.parse("None"), Ok(Value::Off));
        assert_eq!(SAMPLE_INTERVAL.parse("none"), Err(expected.to_owned()));
        assert!(LOG_INTERVAL.expected().ends_with(", or none"));
    }

    #[test]
    fn sizes_take_a_number_and_a_unit() {
        let size = |text: &str| MAX_HEAP.parse(text);
        assert_eq!(size("64 MiB"), Ok(Value::Size(64 << 20)));
        assert_eq!(size("1.5GiB"), Ok(Value::Size(3 << 29)));
        assert_eq!(size(" 0 B "), Ok(Value::Size(0)));
        assert_eq!(size("512 kb"), Ok(Value::Size(512_000)));
        assert_eq!(size("10_000"), Ok(Value::Size(10_000)));
        let expected = "expected a size such as 64 MiB, 1.5 GiB or 0 B";
        for bad in [
            "",
            "MiB",
            "-1 MiB",
            "64 MB/s",
            "1e3",
            ".5 GiB",
            "64 mebibytes",
        ] {
            assert_eq!(size(bad), Err(expected.to_owned()), "{bad}");
        }
    }

    #[test]
    fn flags_counts_and_files() {
        assert_eq!(HIGH_WATER_MARKS.parse("off"), Ok(Value::Flag(false)));
        assert_eq!(HIGH_WATER_MARKS.parse("YES"), Ok(Value::Flag(true)));
        assert!(HIGH_WATER_MARKS.parse("maybe").is_err());
        assert_eq!(
            HIGH_WATER_MARKS.parse(" Keep "),
            Ok(Value::Marks(Marks::Keep))
        );
        assert_eq!(
            HIGH_WATER_MARKS.parse("reset"),
            Ok(Value::Marks(Marks::Reset))
        );
        assert_eq!(
            HIGH_WATER_MARKS.parse("sometimes"),
            Err("expected reset or keep, or 0 (off)".to_owned())
        );
        assert_eq!(MAX_SAMPLES.parse("12"), Ok(Value::Count(12)));
        assert!(MAX_SAMPLES.parse("-1").is_err());
        assert!(OUTPUT.parse("dir/").is_err());
        assert!(OUTPUT.parse("").is_err());
        assert_eq!(OUTPUT.parse("r.json"), Ok(Value::Text("r.json".into())));
    }

    #[test]
    fn every_setting_is_named_once_and_the_attribute_keys_are_found() {
        let mut names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SETTINGS.len());
        assert_eq!(
            Setting::of_attribute("sample_interval"),
            Some(&SAMPLE_INTERVAL)
        );
        assert_eq!(Setting::of_attribute("label"), None);
        let keys: Vec<&str> = SETTINGS
            .iter()
            .filter(|s| s.attribute)
            .map(|s| s.name)
            .collect();
        assert_eq!(
            keys,
            [
                "output",
                "sample_interval",
                "log_interval",
                "detailed_memory",
                "max_samples",
                "high_water_marks"
            ]
        );
    }
}
