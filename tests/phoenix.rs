//! OTLP into a real third-party backend: Arize Phoenix (`arize-phoenix` in the
//! virtualenv `.ci/deps` makes at target/phoenix-venv, or the interpreter
//! `STEMMON_PHOENIX_PYTHON` names), served on loopback ports with its working directory in
//! the test's own. The quickstart and a failing run send their traces to it; the spans
//! are read back through Phoenix's REST API and held to the reports: names, parents,
//! durations within 1 ms, the error text. Skipped, with a `SKIPPED:` line, only where
//! Phoenix is not installed; under CI that fails.
//!
//! Phoenix takes traces only (405 on `/v1/metrics`): the runs say
//! `OTEL_METRICS_EXPORTER=none`. It keeps no resource attribute but
//! `openinference.project.name`, so the resource is checked through the project each
//! run names; `service.name` itself is checked against the decoding receiver
//! (tests/otlp.rs).

#[path = "support/otlp.rs"]
mod otlp;
#[path = "support/otlp_run.rs"]
mod otlp_run;

use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use stemmon::Report;

const FIXTURE: &str = env!("CARGO_BIN_EXE_fixture-otlp");

/// Phoenix's interpreter, or `Err` saying why there is none.
fn phoenix_python(workspace: &Path) -> Result<PathBuf, String> {
    let python = match std::env::var_os("STEMMON_PHOENIX_PYTHON") {
        Some(path) => PathBuf::from(path),
        None => workspace.join("target/phoenix-venv/bin/python"),
    };
    match Command::new(&python)
        .args(["-c", "import phoenix.server.main, grpc.aio"])
        .output()
    {
        Ok(output) if output.status.success() => Ok(python),
        Ok(output) => Err(format!(
            "{} cannot import Phoenix ({}); run `.ci/deps`",
            python.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Err(format!(
            "no {} ({error}); run `.ci/deps`, or set STEMMON_PHOENIX_PYTHON",
            python.display()
        )),
    }
}

/// A GET on loopback: the status and the body.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_owned()
    };
    Some((status, body))
}

/// A chunked body, joined.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A running Phoenix; dropping it ends it.
struct Phoenix {
    child: Child,
    port: u16,
    grpc_port: u16,
    log: PathBuf,
}

impl Phoenix {
    fn start(python: &Path, dir: &Path) -> Phoenix {
        let (port, grpc_port) = (otlp::dead_port(), otlp::dead_port());
        let log = dir.join("phoenix.log");
        let child = Command::new(python)
            .arg(otlp_run::workspace().join("tests/support/phoenix_loopback.py"))
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc_port.to_string())
            .env("PHOENIX_WORKING_DIR", dir.join("phoenix"))
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("phoenix.err")).unwrap())
            .spawn()
            .expect("starting Phoenix");
        let phoenix = Phoenix {
            child,
            port,
            grpc_port,
            log,
        };
        // Up once it answers its health check (a first start migrates its database).
        let deadline = Instant::now() + Duration::from_secs(120);
        while get(port, "/healthz").map(|r| r.0) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "Phoenix did not come up: {}",
                std::fs::read_to_string(&phoenix.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        phoenix
    }

    /// Every socket Phoenix listens on, as `ss -ltnp` prints its local address.
    fn listening(&self) -> Vec<String> {
        let output = Command::new("ss")
            .args(["-ltnpH"])
            .output()
            .expect("running ss");
        let pid = format!("pid={},", self.child.id());
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.contains(&pid))
            .filter_map(|line| line.split_whitespace().nth(3).map(str::to_owned))
            .collect()
    }

    /// The spans of `project`, once there are `count` of them.
    fn spans(&self, project: &str, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let path = format!("/v1/projects/{project}/spans?limit=1000");
            if let Some((200, body)) = get(self.port, &path) {
                let body: Value = serde_json::from_str(&body).unwrap();
                let spans = body["data"].as_array().cloned().unwrap_or_default();
                if spans.len() >= count {
                    return spans;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{project}: no {count} spans in 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seconds since the epoch of Phoenix's `2026-12-03T12:00:16.390820+00:00` (UTC).
fn seconds(text: &str) -> f64 {
    let (date, time) = text.split_once('T').unwrap();
    let time = time.trim_end_matches("+00:00").trim_end_matches('Z');
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    // Days since the epoch (Howard Hinnant's days_from_civil).
    let (y, m, day) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9, d[2])
    } else {
        (d[0], d[1] - 3, d[2])
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let t: Vec<f64> = time.split(':').map(|p| p.parse().unwrap()).collect();
    days as f64 * 86_400.0 + t[0] * 3600.0 + t[1] * 60.0 + t[2]
}

/// Holds the spans Phoenix has of `project` to `report`: one per kept call and the root,
/// each named as its stage, under its enclosing stage's span, lasting what the report
/// says within 1 ms, with the report's error text as its status.
fn check(project: &str, spans: &[Value], report: &Report) {
    assert_eq!(spans.len(), report.spans.len() + 1, "{project}: {spans:#?}");
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["context"]["span_id"].as_str().unwrap(), s))
        .collect();
    let duration = |s: &Value| {
        seconds(s["end_time"].as_str().unwrap()) - seconds(s["start_time"].as_str().unwrap())
    };
    let roots: Vec<&Value> = spans.iter().filter(|s| s["parent_id"].is_null()).collect();
    assert_eq!(roots.len(), 1, "{project}");
    let root = roots[0];
    assert_eq!(root["name"], "workflow");
    assert!(
        (duration(root) - report.wall_seconds).abs() < 1e-3,
        "{project}: {root}"
    );
    match &report.error {
        Some(error) => {
            assert_eq!(root["status_code"], "ERROR", "{root}");
            let text = report.error_message.as_ref().unwrap_or(error);
            assert_eq!(root["status_message"], text.as_str());
        }
        None => assert_ne!(root["status_code"], "ERROR", "{root}"),
    }
    // Each call, matched by its stage and start.
    let start = report.start_unix_seconds.unwrap();
    for call in &report.spans {
        let stage = &report.stages[call.stage_id as usize];
        let begins = start + call.start_seconds;
        let span = spans
            .iter()
            .find(|s| {
                s["name"] == stage.name.as_str()
                    && (seconds(s["start_time"].as_str().unwrap()) - begins).abs() < 1e-3
            })
            .unwrap_or_else(|| panic!("{project}: no span for {} at {begins}", stage.path));
        assert!(
            (duration(span) - call.wall_seconds).abs() < 1e-3,
            "{project} {}: {} s against {} s",
            stage.path,
            duration(span),
            call.wall_seconds
        );
        let parent = by_id[span["parent_id"].as_str().unwrap()];
        let expected = match stage.parent_id {
            Some(id) => report.stages[id as usize].name.as_str(),
            None => "workflow",
        };
        assert_eq!(
            parent["name"], expected,
            "{project}: {}'s parent",
            stage.path
        );
        assert_eq!(span["attributes"]["stage.path"], stage.path.as_str());
        match &call.error {
            Some(error) => {
                assert_eq!(span["status_code"], "ERROR", "{span}");
                let text = call.error_message.as_ref().unwrap_or(error);
                assert_eq!(span["status_message"], text.as_str());
            }
            None => assert_ne!(span["status_code"], "ERROR", "{span}"),
        }
    }
}

/// Builds the quickstart with the examples' `otlp` feature, as the docs run it.
fn quickstart() -> PathBuf {
    let target = otlp_run::workspace().join("target");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .current_dir(otlp_run::workspace())
        .args([
            "build",
            "--quiet",
            "-p",
            "stemmon-examples",
            "--example",
            "quickstart",
        ])
        .args(["--features", "otlp", "--target-dir"])
        .arg(&target)
        .status()
        .expect("running cargo build");
    assert!(status.success(), "building the quickstart failed");
    target.join("debug/examples/quickstart")
}

#[test]
fn phoenix_on_loopback_holds_the_quickstarts_trace_and_a_failing_runs_as_the_reports_say() {
    let test =
        "phoenix_on_loopback_holds_the_quickstarts_trace_and_a_failing_runs_as_the_reports_say";
    let python = match phoenix_python(otlp_run::workspace()) {
        Ok(python) => python,
        Err(why) => return stemmon_suite::cannot_run(test, &why),
    };
    let quickstart = quickstart();
    let dir = stemmon_suite::temp_dir("phoenix");
    let started = Instant::now();
    let phoenix = Phoenix::start(&python, &dir);
    let up = started.elapsed();
    // Every port it opened is on loopback: its HTTP port and its gRPC port.
    let listening = phoenix.listening();
    assert_eq!(listening.len(), 2, "{listening:?}");
    for (address, port) in listening.iter().zip([phoenix.port, phoenix.grpc_port]) {
        let _ = port;
        assert!(
            address.starts_with("127.0.0.1:") || address.starts_with("[::ffff:127.0.0.1]:"),
            "Phoenix listens on {address}: {listening:?}"
        );
    }
    for port in [phoenix.port, phoenix.grpc_port] {
        assert!(
            listening.iter().any(|a| a.ends_with(&format!(":{port}"))),
            "{port} in {listening:?}"
        );
    }

    let endpoint = format!("http://127.0.0.1:{}", phoenix.port);
    let vars = |project: &str| {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
            ("OTEL_METRICS_EXPORTER", "none".to_owned()),
            ("OTEL_SERVICE_NAME", project.to_owned()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                format!("openinference.project.name={project}"),
            ),
        ]
    };
    // The quickstart, as a user runs it.
    let report_path = dir.join("quickstart.json");
    let mut command = stemmon_suite::fixture_command(quickstart.to_str().unwrap());
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(var);
        }
    }
    let output = command
        .current_dir(&dir)
        .env("STEMMON_OUTPUT", &report_path)
        .envs(vars("quickstart"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let report = stemmon_suite::read_report(&report_path);
    assert_eq!(report.export_error, None);
    check(
        "quickstart",
        &phoenix.spans("quickstart", report.spans.len() + 1),
        &report,
    );

    // A failing run: `main` and two stages fail.
    let vars = vars("failing");
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut with_small = vars.clone();
    with_small.push(("OTLP_FIXTURE_MIB", "16"));
    let failing = otlp_run::run(FIXTURE, &dir, "failing", &with_small);
    assert_eq!(failing.status.code(), Some(1), "{}", failing.stderr);
    assert_eq!(failing.report.export_error, None, "{}", failing.stderr);
    assert!(failing.report.error.is_some());
    let spans = phoenix.spans("failing", failing.report.spans.len() + 1);
    check("failing", &spans, &failing.report);
    let errors = spans.iter().filter(|s| s["status_code"] == "ERROR").count();
    assert_eq!(errors, 3, "the run, parse and explode");
    // The errors' own text, as the program would print it, not their type's name.
    let parse = spans.iter().find(|s| s["name"] == "parse").unwrap();
    assert_eq!(parse["status_message"], "bad input");
    eprintln!(
        "Phoenix was up in {:.1} s; the test took {:.1} s",
        up.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
