//! `stemmon export --format otlp` against the real receiver of the root package's tests
//! (`tests/support/otlp_receiver.py`, decoding with the official `opentelemetry-proto`
//! package): a report written by the runtime reaches it as metrics and a trace, and a
//! dead endpoint is exit 2 with one line.

mod common;

#[path = "../../tests/support/otlp.rs"]
mod otlp;

use common::{cannot_run, staged_report, stemmon, TempDir, Workload};
use otlp::{attributes, metrics, points, stage_point, value, Receiver};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The receiver's interpreter, for `test`, which [cannot run](cannot_run) without it.
fn python(test: &str) -> Option<PathBuf> {
    otlp::python(&workspace())
        .map_err(|why| cannot_run(test, &why))
        .ok()
}

/// `stemmon export --format otlp` with `args`, no `OTEL_*` variable inherited.
fn export(args: &[&str]) -> std::process::Output {
    let mut command = stemmon();
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    command
        .args(["export", "--format", "otlp"])
        .args(args)
        .env("OTEL_SERVICE_NAME", "replay")
        .output()
        .unwrap()
}

#[test]
fn export_otlp_sends_a_reports_metrics_and_trace_and_a_dead_endpoint_is_exit_2() {
    let test = "export_otlp_sends_a_reports_metrics_and_trace_and_a_dead_endpoint_is_exit_2";
    let Some(python) = python(test) else {
        return;
    };
    let dir = TempDir::new("export-otlp");
    let path = staged_report(dir.path(), "staged.json", Workload::default(), 2);
    let report = common::read_report(&path);
    let receiver = Receiver::start(&workspace(), &python, dir.path(), None);

    let output = export(&["--endpoint", &receiver.url, path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            format!(
                "sent {} data points to {}/v1/metrics",
                {
                    let body = &receiver.bodies("/v1/metrics")[0];
                    metrics(body)
                        .values()
                        .map(|m| points(m).len())
                        .sum::<usize>()
                },
                receiver.url
            ),
            format!(
                "sent {} spans to {}/v1/traces",
                report.spans.len() + 1,
                receiver.url
            ),
        ]
    );

    let metric_bodies = receiver.bodies("/v1/metrics");
    let traces = receiver.bodies("/v1/traces");
    assert_eq!((metric_bodies.len(), traces.len()), (1, 1));
    let resource = attributes(otlp::resource(&metric_bodies[0]));
    assert_eq!(resource["service.name"], "replay");
    // The run id, written as a UUID.
    let id = report.run_id.as_ref().unwrap();
    assert_eq!(resource["service.instance.id"].replace('-', ""), *id);
    assert_eq!(resource["service.instance.id"].len(), 36);
    assert_eq!(resource["telemetry.sdk.name"], "stemmon");
    assert!(!resource.contains_key("process.command_args"));
    assert_eq!(resource["rank"], "2");
    let last = metrics(&metric_bodies[0]);
    let peaks = points(&last["stemmon.stage.peak_tree_rss"]);
    for stage in &report.stages {
        if let Some(peak) = stage.peaks.peak_tree_rss_bytes {
            assert_eq!(
                value(stage_point(&peaks, &stage.path, &[])),
                peak.to_string()
            );
        }
    }
    let calls = points(&last["stemmon.stage.calls"]);
    assert_eq!(value(stage_point(&calls, "predict/chunk", &[])), "2");
    let spans = otlp::spans(&traces[0]);
    assert_eq!(spans.len(), report.spans.len() + 1);
    let id = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no span {name}"))["spanId"]
            .clone()
    };
    for chunk in spans.iter().filter(|s| s["name"] == "chunk") {
        assert_eq!(chunk["parentSpanId"], id("predict"));
    }

    // Sending the same report again sends the same trace.
    assert_eq!(
        export(&["--endpoint", &receiver.url, path.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(otlp::spans(&receiver.bodies("/v1/traces")[1]), spans);

    let dead = format!("http://127.0.0.1:{}", otlp::dead_port());
    let output = export(&["--endpoint", &dead, path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "stemmon: OTLP export failed: could not send OTLP to {dead}/v1/metrics: "
        )),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());

    // No endpoint anywhere, and a bad one: exit 2, one line, nothing sent.
    for (args, expected) in [
        (vec![], "stemmon: OTLP export failed: no OTLP endpoint: "),
        (
            vec!["--endpoint", "collector:4318"],
            "stemmon: OTLP export failed: \"collector:4318\" is not an http:// URL",
        ),
    ] {
        let mut args = args;
        args.push(path.to_str().unwrap());
        let output = export(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(expected), "{stderr}");
    }
    assert_eq!(receiver.bodies("/v1/traces").len(), 2);
}

#[test]
fn a_backend_that_takes_one_signal_is_exit_0_with_a_warning_naming_the_other() {
    let test = "a_backend_that_takes_one_signal_is_exit_0_with_a_warning_naming_the_other";
    let Some(python) = python(test) else {
        return;
    };
    let dir = TempDir::new("export-otlp-one-signal");
    let path = staged_report(dir.path(), "staged.json", Workload::default(), 1);
    let path = path.to_str().unwrap();
    // Traces only, as Phoenix or Tempo: 405 on /v1/metrics.
    let traces_only = Receiver::start_with(
        &workspace(),
        &python,
        dir.path(),
        &["--refuse", "/v1/metrics"],
    );
    let output = export(&["--endpoint", &traces_only.url, path]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.starts_with("sent ") && stdout.contains(" spans to "),
        "{stdout}"
    );
    assert_eq!(
        stderr.trim_end(),
        format!(
            "stemmon: warning: not sent: could not send OTLP to {}/v1/metrics: HTTP 405 Method \
             Not Allowed (it may not take metrics: OTEL_METRICS_EXPORTER=none sends no metrics)",
            traces_only.url
        )
    );
    assert_eq!(traces_only.bodies("/v1/traces").len(), 1);
    // Told so, it sends none.
    let mut command = stemmon();
    let output = command
        .args([
            "export",
            "--format",
            "otlp",
            "--endpoint",
            &traces_only.url,
            path,
        ])
        .env("OTEL_METRICS_EXPORTER", "none")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
    // Neither accepted: exit 2, one line naming both.
    let neither = Receiver::start_with(
        &workspace(),
        &python,
        dir.path(),
        &["--refuse", "/v1/metrics", "--refuse", "/v1/traces"],
    );
    let output = export(&["--endpoint", &neither.url, path]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("/v1/metrics: HTTP 405") && stderr.contains("/v1/traces: HTTP 405"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}
