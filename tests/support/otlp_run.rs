//! Runs of an OTLP fixture for the tests of tests/otlp*.rs: the `OTEL_*` variables and
//! the schedulers' labels come from the test alone. Needs `mod otlp` (support/otlp.rs)
//! beside it.
#![allow(dead_code)] // Each test binary uses a part of this module.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use stemmon::Report;

/// The variables a run takes from the test alone: the OpenTelemetry ones and the
/// schedulers' labels.
pub const CLEARED: [&str; 16] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SDK_DISABLED",
    "SLURM_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "RANK",
];

pub fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The receiver's interpreter, or `None` after saying why `test` cannot run.
pub fn python(test: &str) -> Option<PathBuf> {
    super::otlp::python(workspace())
        .map_err(|why| stemmon_suite::cannot_run(test, &why))
        .ok()
}

/// A run of the fixture: how it ended, its report, its stderr and how long it took.
pub struct Run {
    pub status: ExitStatus,
    pub report: Report,
    /// The report file's text, as written.
    pub report_text: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs `fixture` with `vars` and nothing of the test's own OTLP environment, its report
/// in `dir` as `name`.json.
pub fn run(fixture: &str, dir: &Path, name: &str, vars: &[(&str, &str)]) -> Run {
    let mut command = stemmon_suite::fixture_command(fixture);
    for var in CLEARED {
        command.env_remove(var);
    }
    for (var, _) in std::env::vars_os() {
        let name = var.to_string_lossy();
        if name.starts_with("OTEL_") || name == "STEMMON_OTLP_COMMAND_ARGS" {
            command.env_remove(&var);
        }
    }
    let report = dir.join(format!("{name}.json"));
    command
        .env("STEMMON_OUTPUT", &report)
        .envs(vars.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let output = command.output().expect("running the fixture");
    let elapsed = started.elapsed();
    Run {
        status: output.status,
        report_text: std::fs::read_to_string(&report).unwrap_or_default(),
        report: stemmon_suite::read_report(&report),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed,
    }
}
