//! OTLP against a real receiver (the book's `otlp.md`): `tests/support/otlp_receiver.py` on a loopback
//! port decodes every request with the official `opentelemetry-proto` package, and the
//! tests compare what it decoded with the run's report. Skipped, with a `SKIPPED:` line,
//! only where that package is missing (`.ci/deps` installs it); under CI that fails.

#[path = "support/otlp.rs"]
mod otlp;
#[path = "support/otlp_run.rs"]
mod otlp_run;

use otlp::{attributes, metrics, points, stage_point, value, Receiver};
use otlp_run::{python, workspace, Run, CLEARED};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;
use stemmon::Report;

const FIXTURE: &str = env!("CARGO_BIN_EXE_fixture-otlp");

/// A run of the fixture with `vars`, its report in `dir` as `name`.json.
fn run(dir: &Path, name: &str, vars: &[(&str, &str)]) -> Run {
    otlp_run::run(FIXTURE, dir, name, vars)
}

/// Nanoseconds since the epoch of `seconds` into the run, as the exporter counts them.
fn nanos(report: &Report, seconds: f64) -> String {
    let start = (report.start_unix_seconds.unwrap() * 1e9).round() as u64;
    (start + (seconds * 1e9).round() as u64).to_string()
}

fn float(text: &str) -> f64 {
    text.parse()
        .unwrap_or_else(|_| panic!("{text:?} is not a number"))
}

#[test]
fn a_run_reaches_the_receiver_as_its_resource_its_metrics_and_its_trace() {
    let test = "a_run_reaches_the_receiver_as_its_resource_its_metrics_and_its_trace";
    let Some(python) = python(test) else {
        return;
    };
    let dir = stemmon_suite::temp_dir("otlp-run");
    let receiver = Receiver::start(workspace(), &python, &dir, None);
    let run = run(
        &dir,
        "run",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
            ("OTEL_SERVICE_NAME", "trainer"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment.name=test,team=ml%2Fvision,host.name=not-this-one",
            ),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret%3D%3D"),
            ("STEMMON_LABELS", "job_id=j42"),
            ("RANK", "3"),
        ],
    );
    let report = &run.report;
    // `main` returned `Err`: the run failed, and its report says so.
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    let run_error = report.error.clone().expect("the run's error");
    assert_eq!(report.export_error, None, "{}", run.stderr);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);

    let requests = receiver.requests();
    for request in &requests {
        assert_eq!(request["content_type"], "application/x-protobuf");
        assert_eq!(request["headers"]["x-api-key"], "s3cret==");
    }
    let metric_bodies = receiver.bodies("/v1/metrics");
    let traces = receiver.bodies("/v1/traces");
    // At least one `running` line's metrics (every 0.25 s), then the end's; one trace.
    assert!(metric_bodies.len() >= 2, "{requests:#?}");
    assert_eq!(traces.len(), 1);
    assert_eq!(requests.last().unwrap()["path"], "/v1/traces");

    let run_id = report.run_id.clone().unwrap();
    // The run id as a UUID: 8-4-4-4-12 of the same 32 digits.
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &run_id[..8],
        &run_id[8..12],
        &run_id[12..16],
        &run_id[16..20],
        &run_id[20..]
    );
    for body in metric_bodies.iter().chain(&traces) {
        let resource = attributes(otlp::resource(body));
        let expected: BTreeMap<String, String> = [
            ("service.name", "trainer"),
            ("service.instance.id", &uuid),
            // The run's own host wins over the variable's.
            ("host.name", &report.host),
            ("process.pid", &report.pid.to_string()),
            ("process.executable.name", "fixture-otlp"),
            // argv[0], the path the test started it by.
            ("process.executable.path", FIXTURE),
            ("process.command", FIXTURE),
            ("telemetry.sdk.name", "stemmon"),
            ("telemetry.sdk.language", "rust"),
            ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
            ("rank", "3"),
            ("job_id", "j42"),
            ("deployment.environment.name", "test"),
            ("team", "ml/vision"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(resource, expected);
        let schema = body
            .get("resourceMetrics")
            .or(body.get("resourceSpans"))
            .unwrap()[0]["schemaUrl"]
            .as_str()
            .unwrap();
        assert_eq!(schema, "https://opentelemetry.io/schemas/1.44.0");
    }

    // While it ran: `stemmon.running` 1. At the end: 0, and the report's figures.
    let first = metrics(&metric_bodies[0]);
    assert_eq!(value(&points(&first["stemmon.running"])[0]), "1");
    let last = metrics(metric_bodies.last().unwrap());
    assert_eq!(value(&points(&last["stemmon.running"])[0]), "0");

    let load = report.stage("load").unwrap();
    let peak = load.peaks.peak_tree_rss_bytes.unwrap();
    assert!(peak >= 256 << 20, "load peaked at {peak} bytes");
    let stage_peaks = points(&last["stemmon.stage.peak_tree_rss"]);
    assert_eq!(
        value(stage_point(&stage_peaks, "load", &[])),
        peak.to_string()
    );
    assert_eq!(last["stemmon.stage.peak_tree_rss"]["unit"], "By");
    if let Some(bound) = load.high_water.peak_tree_rss_bound_bytes {
        let bounds = points(&last["stemmon.stage.peak_tree_rss_bound"]);
        assert_eq!(value(stage_point(&bounds, "load", &[])), bound.to_string());
    }
    for stage in &report.stages {
        let calls = points(&last["stemmon.stage.calls"]);
        assert_eq!(
            value(stage_point(&calls, &stage.path, &[])),
            stage.calls.to_string(),
            "{}",
            stage.path
        );
        let errors = points(&last["stemmon.stage.errors"]);
        assert_eq!(
            value(stage_point(&errors, &stage.path, &[])),
            stage.errors.to_string()
        );
        let wall = points(&last["stemmon.stage.wall_time"]);
        assert_eq!(
            float(&value(stage_point(&wall, &stage.path, &[]))),
            stage.wall_seconds
        );
    }
    assert_eq!(report.stage("parse").unwrap().errors, 1);
    assert_eq!(report.stage("explode").unwrap().errors, 1);

    // The monitored process alone under the process semantic conventions, as its
    // process.pid says; the whole tree under stemmon.tree.*, in the same units.
    let latest = report.latest_sample.as_ref().unwrap();
    let own = &last["process.memory.usage"];
    assert_eq!(own["unit"], "By");
    assert_eq!(
        value(&points(own)[0]),
        latest.parent_rss_bytes.unwrap().to_string()
    );
    let root = report
        .processes
        .iter()
        .find(|p| p.pid == report.pid)
        .unwrap();
    assert_eq!(
        float(&value(&points(&last["process.cpu.time"])[0])),
        root.cpu_seconds.unwrap()
    );
    // Its virtual memory, threads and open descriptors at the latest sample, as its
    // entry keeps them: ground truth the kernel's, within what a running program moves.
    let virtual_bytes = root.virtual_bytes.unwrap();
    assert!(
        virtual_bytes >= latest.parent_rss_bytes.unwrap(),
        "{root:?}"
    );
    let threads = root.threads.unwrap();
    assert!(
        threads >= 2,
        "the program and the monitor's sampler: {root:?}"
    );
    let fds = root.open_fds.unwrap();
    assert!(fds >= 3, "stdin, stdout, stderr at least: {root:?}");
    for (name, unit, figure) in [
        ("process.memory.virtual", "By", virtual_bytes),
        ("process.thread.count", "{thread}", u64::from(threads)),
        (
            "process.unix.file_descriptor.count",
            "{file_descriptor}",
            u64::from(fds),
        ),
    ] {
        let metric = &last[name];
        assert_eq!(metric["unit"], unit, "{name}");
        assert_eq!(value(&points(metric)[0]), figure.to_string(), "{name}");
    }
    let memory = &last["stemmon.tree.memory.usage"];
    assert_eq!(memory["unit"], "By");
    assert_ne!(memory["sum"].get("isMonotonic"), Some(&Value::Bool(true)));
    assert_eq!(
        value(&points(memory)[0]),
        latest.tree_rss_bytes.unwrap().to_string()
    );
    let cpu = &last["stemmon.tree.cpu.time"];
    assert_eq!(cpu["unit"], "s");
    assert_eq!(cpu["sum"]["isMonotonic"], true);
    assert_eq!(
        cpu["sum"]["aggregationTemporality"],
        "AGGREGATION_TEMPORALITY_CUMULATIVE"
    );
    let cpu_points = points(cpu);
    for (mode, seconds) in [
        ("user", report.cpu_io.cpu_user_seconds),
        ("system", report.cpu_io.cpu_system_seconds),
    ] {
        let point = cpu_points
            .iter()
            .find(|p| attributes(p)["cpu.mode"] == mode)
            .unwrap_or_else(|| panic!("no cpu.mode={mode}"));
        assert_eq!(float(&value(point)), seconds.unwrap(), "{mode}");
        // A cumulative sum counts from the run's start; every point is the report's moment.
        assert_eq!(point["startTimeUnixNano"], nanos(report, 0.0));
        assert_eq!(point["timeUnixNano"], nanos(report, report.wall_seconds));
    }
    if let (Some(read), Some(write)) = (report.cpu_io.io_read_bytes, report.cpu_io.io_write_bytes) {
        let disk = points(&last["stemmon.tree.disk.io"]);
        let by = |direction: &str| {
            disk.iter()
                .find(|p| attributes(p)["disk.io.direction"] == direction)
                .map(value)
        };
        assert_eq!(by("read"), Some(read.to_string()));
        assert_eq!(by("write"), Some(write.to_string()));
    }
    assert_eq!(
        float(&value(&points(&last["process.uptime"])[0])),
        report.wall_seconds
    );
    assert_eq!(
        value(&points(&last["stemmon.peak_tree_rss"])[0]),
        report.peaks.peak_tree_rss_bytes.unwrap().to_string()
    );

    // The trace: the run's id, a root, a span per kept call nested as the stages nest.
    let spans = otlp::spans(&traces[0]);
    assert_eq!(spans.len(), report.spans.len() + 1);
    assert_eq!(report.spans.len(), 7, "every call is kept");
    let ids: HashSet<&str> = spans
        .iter()
        .map(|s| s["spanId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    for span in &spans {
        assert_eq!(span["traceId"], run_id.as_str());
        assert_eq!(span["kind"], "SPAN_KIND_INTERNAL");
        if let Some(parent) = span.get("parentSpanId") {
            assert!(ids.contains(parent.as_str().unwrap()), "{span}");
        }
    }
    let roots: Vec<&Value> = spans
        .iter()
        .filter(|s| s.get("parentSpanId").is_none())
        .collect();
    assert_eq!(roots.len(), 1);
    let root = roots[0];
    assert_eq!(root["name"], "workflow");
    assert_eq!(root["startTimeUnixNano"], nanos(report, 0.0));
    assert_eq!(root["endTimeUnixNano"], nanos(report, report.wall_seconds));
    assert_eq!(root["status"]["code"], "STATUS_CODE_ERROR");
    // The error's Display text, which the report keeps beside its type's name.
    assert_eq!(run_error, "BadInput");
    assert_eq!(report.error_message.as_deref(), Some("bad input"));
    assert_eq!(root["status"]["message"], "bad input");
    let by_name = |name: &str| -> &Value {
        let found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
        assert_eq!(found.len(), 1, "{name}");
        found[0]
    };
    let parent_of = |name: &str| by_name(name)["parentSpanId"].clone();
    for top in ["load", "parse", "explode", "fit"] {
        assert_eq!(parent_of(top), root["spanId"], "{top}");
    }
    assert_eq!(parent_of("step"), by_name("fit")["spanId"]);
    // `chunk` ran on a worker thread: it nests under `fit` on the monitor's thread.
    assert_eq!(parent_of("chunk"), by_name("fit")["spanId"]);
    assert_eq!(parent_of("inner"), by_name("chunk")["spanId"]);
    let chunk = attributes(by_name("chunk"));
    assert_eq!(chunk["stage.path"], "fit/chunk");
    assert_eq!(chunk["thread.name"], "worker");
    assert_ne!(chunk["thread.id"], "0");
    let load_span = by_name("load");
    let load_attributes = attributes(load_span);
    assert_eq!(load_attributes["stage.path"], "load");
    assert_eq!(load_attributes["thread.id"], "0");
    // A span carries its own call's figures, not its stage's totals.
    let load_call = &report.spans[0];
    assert_eq!(
        float(&load_attributes["stemmon.wall_seconds"]),
        load_call.wall_seconds
    );
    for span in &spans {
        let keys = attributes(span);
        for total in [
            "stemmon.calls",
            "stemmon.errors",
            "stemmon.peak_tree_rss_bytes",
        ] {
            assert!(
                span.get("parentSpanId").is_none() || !keys.contains_key(total),
                "{total} on {span}"
            );
        }
    }
    assert_eq!(
        load_span["startTimeUnixNano"],
        nanos(report, load_call.start_seconds)
    );
    // Failed calls: ERROR with the error's Display text where it has one, else the
    // failure as the report records it.
    for (name, message) in [("parse", "bad input"), ("explode", "panic")] {
        let status = &by_name(name)["status"];
        assert_eq!(status["code"], "STATUS_CODE_ERROR", "{name}");
        assert_eq!(status["message"], message, "{name}");
    }
    assert_eq!(
        report.stage("parse").unwrap().error.as_deref(),
        Some("BadInput")
    );
    let parse_call = report
        .spans
        .iter()
        .find(|s| report.stages[s.stage_id as usize].name == "parse")
        .unwrap();
    assert_eq!(parse_call.error_message.as_deref(), Some("bad input"));
    assert!(by_name("fit")
        .get("status")
        .is_none_or(|s| s.get("code").is_none()));
}

#[test]
fn a_dead_or_slow_endpoint_costs_the_run_at_most_the_final_wait_and_is_an_export_error() {
    let test =
        "a_dead_or_slow_endpoint_costs_the_run_at_most_the_final_wait_and_is_an_export_error";
    let Some(python) = python(test) else {
        return;
    };
    let dir = stemmon_suite::temp_dir("otlp-down");
    // Answers every request after 30 s.
    let slow = Receiver::start(workspace(), &python, &dir, Some(30.0));
    let dead = format!("http://127.0.0.1:{}", otlp::dead_port());
    // 16 MiB: the run is mostly sleeps, so a busy machine moves its time little.
    let small = ("OTLP_FIXTURE_MIB", "16");
    let bare = run(&dir, "bare", &[small]);
    assert_eq!(bare.report.export_error, None);
    for (name, url) in [("dead", dead.as_str()), ("slow", slow.url.as_str())] {
        let down = run(&dir, name, &[small, ("OTEL_EXPORTER_OTLP_ENDPOINT", url)]);
        assert_eq!(down.status.code(), bare.status.code(), "{}", down.stderr);
        assert_eq!(down.report.stages.len(), bare.report.stages.len());
        let error = down
            .report
            .export_error
            .as_deref()
            .expect("an export error");
        assert!(
            error.starts_with(&format!("could not send OTLP to {url}/v1/metrics")),
            "{name}: {error}"
        );
        if name == "slow" {
            assert!(error.contains("not done within 1 s"), "{error}");
        }
        assert_eq!(
            down.stderr
                .matches("[stemmon] warning: could not send OTLP")
                .count(),
            1,
            "warned once: {}",
            down.stderr
        );
        // The final wait (1 s) is all the end of the run waits; the rest is what a busy
        // machine adds to one run and not the other.
        assert!(
            down.elapsed < bare.elapsed + Duration::from_secs(2),
            "{name} {:?} vs bare {:?}",
            down.elapsed,
            bare.elapsed
        );
    }
    assert!(
        !slow.bodies("/v1/metrics").is_empty(),
        "the slow one was reached"
    );
}

#[test]
fn the_builders_endpoint_sends_a_monitors_metrics_and_trace_and_a_bad_one_fails_start() {
    let error = stemmon::Monitor::builder()
        .otlp("collector:4318")
        .current_thread_only()
        .start()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid `otlp`: \"collector:4318\" is not an http:// URL (for example \
         http://collector:4318)"
    );
    let test = "the_builders_endpoint_sends_a_monitors_metrics_and_trace_and_a_bad_one_fails_start";
    let Some(python) = python(test) else {
        return;
    };
    if let Some(var) = CLEARED[..10].iter().find(|v| std::env::var_os(v).is_some()) {
        // The variables override the builder, and this test's monitor is in-process.
        stemmon_suite::cannot_run(test, &format!("{var} is set in the test's environment"));
        return;
    }
    let dir = stemmon_suite::temp_dir("otlp-builder");
    let receiver = Receiver::start(workspace(), &python, &dir, None);
    let monitor = stemmon::Monitor::builder()
        .otlp(&receiver.url)
        .log_interval(None)
        .sample_interval(Duration::from_millis(10))
        .current_thread_only()
        .start()
        .unwrap();
    {
        let _work = monitor.stage("work").unwrap();
        drop(stemmon_suite::touched_mib(8));
    }
    let report = monitor.finish();
    assert_eq!(report.export_error, None);
    // With the log off, the end alone sends.
    let bodies = receiver.bodies("/v1/metrics");
    assert_eq!(bodies.len(), 1);
    let calls = points(&metrics(&bodies[0])["stemmon.stage.calls"]);
    assert_eq!(value(stage_point(&calls, "work", &[])), "1");
    let service = attributes(otlp::resource(&bodies[0]))["service.name"].clone();
    assert!(service.starts_with("unknown_service:otlp"), "{service}");
    let traces = receiver.bodies("/v1/traces");
    assert_eq!(traces.len(), 1);
    assert_eq!(otlp::spans(&traces[0]).len(), 2);
}

/// The requests `receiver` got for `path`, whole (headers, encoding, body).
fn requests_to(receiver: &Receiver, path: &str) -> Vec<Value> {
    receiver
        .requests()
        .into_iter()
        .filter(|r| r["path"] == path)
        .collect()
}

#[test]
fn the_variables_choose_each_signal_its_headers_its_compression_and_the_argv() {
    let test = "the_variables_choose_each_signal_its_headers_its_compression_and_the_argv";
    let Some(python) = python(test) else {
        return;
    };
    let dir = stemmon_suite::temp_dir("otlp-variables");
    let small = ("OTLP_FIXTURE_MIB", "16");

    // Metrics off; the trace gzip-compressed, with its own headers instead of the general.
    let receiver = Receiver::start(workspace(), &python, &dir, None);
    let done = run(
        &dir,
        "traces-only",
        &[
            small,
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
            ("OTEL_METRICS_EXPORTER", "none"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-all=1"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-traces=2"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ],
    );
    assert_eq!(done.report.export_error, None, "{}", done.stderr);
    assert!(!done.stderr.contains("warning"), "{}", done.stderr);
    assert!(requests_to(&receiver, "/v1/metrics").is_empty());
    let traces = requests_to(&receiver, "/v1/traces");
    assert_eq!(traces.len(), 1);
    let trace = &traces[0];
    assert_eq!(trace["content_encoding"], "gzip");
    assert_eq!(trace["headers"]["x-traces"], "2");
    assert!(trace["headers"].get("x-all").is_none(), "{trace}");
    // The receiver inflated it into the whole trace; the wire held less.
    let spans = otlp::spans(&trace["body"]);
    assert_eq!(spans.len(), done.report.spans.len() + 1);
    let raw = serde_json::to_string(&trace["body"]).unwrap().len() as u64;
    assert!(trace["wire_bytes"].as_u64().unwrap() < raw, "{trace}");
    // No argv unless asked for.
    assert!(!attributes(otlp::resource(&trace["body"])).contains_key("process.command_args"));

    // The trace off; the metrics gzip-compressed by their own variable; the argv asked for.
    let receiver = Receiver::start(workspace(), &python, &dir, None);
    let done = run(
        &dir,
        "metrics-only",
        &[
            small,
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
            ("OTEL_TRACES_EXPORTER", "none"),
            ("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "x-metrics=3"),
            ("STEMMON_OTLP_COMMAND_ARGS", "1"),
        ],
    );
    assert_eq!(done.report.export_error, None, "{}", done.stderr);
    assert!(requests_to(&receiver, "/v1/traces").is_empty());
    let metrics_sent = requests_to(&receiver, "/v1/metrics");
    assert!(!metrics_sent.is_empty());
    for request in &metrics_sent {
        assert_eq!(request["content_encoding"], "gzip");
        assert_eq!(request["headers"]["x-metrics"], "3");
    }
    let resource = otlp::resource(&metrics_sent[0]["body"]);
    let argv = resource["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv["key"] == "process.command_args")
        .expect("process.command_args");
    assert_eq!(
        argv["value"]["arrayValue"]["values"][0]["stringValue"],
        FIXTURE
    );

    // Both off, or the SDK disabled: nothing sent, nothing warned, no export error.
    let receiver = Receiver::start(workspace(), &python, &dir, None);
    for (name, vars) in [
        (
            "both-none",
            vec![
                ("OTEL_METRICS_EXPORTER", "none"),
                ("OTEL_TRACES_EXPORTER", "none"),
            ],
        ),
        ("disabled", vec![("OTEL_SDK_DISABLED", "true")]),
    ] {
        let mut vars = vars;
        vars.extend([small, ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)]);
        let done = run(&dir, name, &vars);
        assert_eq!(done.report.export_error, None, "{name}");
        assert!(!done.stderr.contains("warning"), "{name}: {}", done.stderr);
    }
    assert!(receiver.requests().is_empty());

    // A set variable that is not honoured: one warning, by name; the rest still goes.
    let receiver = Receiver::start(workspace(), &python, &dir, None);
    let done = run(
        &dir,
        "not-honoured",
        &[
            small,
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "ca.pem"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"),
        ],
    );
    let warnings: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.starts_with("[stemmon] warning: "))
        .collect();
    assert_eq!(
        warnings,
        [
            "[stemmon] warning: ignoring OTEL_EXPORTER_OTLP_TIMEOUT=\"soon\": expected a whole \
             number of milliseconds, 1 or more",
            "[stemmon] warning: ignoring OTEL_EXPORTER_OTLP_COMPRESSION=\"zstd\": expected gzip \
             or none",
            "[stemmon] warning: ignoring OTEL_EXPORTER_OTLP_CERTIFICATE: stemmon does not honour \
             it",
        ],
        "{}",
        done.stderr
    );
    assert_eq!(done.report.export_error, None);
    assert_eq!(requests_to(&receiver, "/v1/traces").len(), 1);
    assert!(requests_to(&receiver, "/v1/metrics")
        .iter()
        .all(|r| r["content_encoding"].is_null()));
}
