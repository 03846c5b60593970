//! Hostile OTLP endpoints on loopback (`tests/support/otlp_hostile.rs`): one that
//! redirects to a second server, one that stalls, one that trickles, one that resets, one
//! that floods, and endpoints that do not parse. `stemmon run -- sh -c 'sleep 0.4; exit 3'`
//! and `stemmon export --format otlp` against each: the exit status and the wall time are
//! those of the same run with no endpoint (within 0.2 s), the report is whole, no secret
//! (the API key of `OTEL_EXPORTER_OTLP_HEADERS`, the URL's password) is in any output,
//! and memory stays bounded.

mod common;

#[path = "../../tests/support/otlp_hostile.rs"]
mod hostile;
#[path = "../../tests/support/otlp.rs"]
mod otlp;

use common::{check_invariants, read_report, stemmon, TempDir, MIB};
use hostile::{Hostile, Mode};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const API_KEY: &str = "k3y-SECRET-9f0e";
const PASSWORD: &str = "hunter2PASS";
const SCRIPT: &str = "sleep 0.4; exit 3";
/// Each request's timeout in these runs: what a stalling endpoint may cost the end of
/// the run.
const TIMEOUT_MS: &str = "50";

/// `stemmon` with no `OTEL_*` variable of the test's own.
fn clean() -> Command {
    let mut command = stemmon();
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("OTEL_") || name == "STEMMON_OTLP_COMMAND_ARGS" {
            command.env_remove(&key);
        }
    }
    command
}

/// `url` (`http://host:port`) with a user and the password in it.
fn with_password(url: &str) -> String {
    url.replacen("http://", &format!("http://alice:{PASSWORD}@"), 1)
}

/// The variables of a run sending to `endpoint`: the API key and the short timeout.
fn vars(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_owned()),
        ("OTEL_EXPORTER_OTLP_HEADERS", format!("x-api-key={API_KEY}")),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", TIMEOUT_MS.to_owned()),
    ]
}

struct Done {
    status: Option<i32>,
    elapsed: Duration,
    stderr: String,
    report: PathBuf,
}

/// `stemmon run` of [`SCRIPT`] with `vars`, a `running` line (and its metrics) every
/// 0.1 s.
fn run(dir: &Path, name: &str, vars: &[(&str, String)]) -> Done {
    let report = dir.join(format!("{name}.json"));
    let mut command = clean();
    command
        .args(["run", "--log-interval", "0.1", "-o"])
        .arg(&report)
        .args(["--", "sh", "-c", SCRIPT])
        .envs(vars.iter().map(|(k, v)| (k, v)));
    let started = Instant::now();
    let output = command.output().unwrap();
    Done {
        status: output.status.code(),
        elapsed: started.elapsed(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        report,
    }
}

/// The peak RSS of the same `stemmon run`, as `wait4` gives it.
fn run_maxrss(dir: &Path, vars: &[(&str, String)]) -> u64 {
    let report = dir.join("maxrss.json");
    let stemmon = env!("CARGO_BIN_EXE_stemmon");
    let mut argv: Vec<String> = vec!["env".into()];
    argv.extend(vars.iter().map(|(k, v)| format!("{k}={v}")));
    argv.extend(
        [stemmon, "run", "--log-interval", "0.1", "-o"]
            .map(str::to_owned)
            .into_iter()
            .chain([report.to_string_lossy().into_owned()])
            .chain(["--", "sh", "-c", SCRIPT].map(str::to_owned)),
    );
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    common::wait4_maxrss(&argv)
}

/// Fails if a secret is in `text` (`what` says where).
fn no_secret(text: &str, what: &str) {
    for secret in [API_KEY, PASSWORD] {
        assert!(!text.contains(secret), "{secret} in {what}: {text}");
    }
}

/// Every output of a finished run: its stderr, its report, and `stemmon show`'s.
fn no_secret_anywhere(done: &Done, name: &str) {
    no_secret(&done.stderr, &format!("{name}'s stderr"));
    no_secret(
        &std::fs::read_to_string(&done.report).unwrap(),
        &format!("{name}'s report"),
    );
    let show = clean().arg("show").arg(&done.report).output().unwrap();
    assert_eq!(show.status.code(), Some(0), "{show:?}");
    no_secret(&String::from_utf8_lossy(&show.stdout), "show's stdout");
    no_secret(&String::from_utf8_lossy(&show.stderr), "show's stderr");
}

fn export(report: &Path, vars: &[(&str, String)]) -> Output {
    clean()
        .args(["export", "--format", "otlp"])
        .arg(report)
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

#[test]
fn a_hostile_endpoint_costs_the_run_nothing_follows_no_redirect_and_sees_no_secret_leave() {
    let dir = TempDir::new("otlp-hostile");
    let bare = run(dir.path(), "bare", &[]);
    assert_eq!(bare.status, Some(3), "{}", bare.stderr);
    let bare_rss = run_maxrss(dir.path(), &[]);
    // The host a redirect points to: it must hear nothing.
    let elsewhere = Hostile::start(Mode::Record);
    for (name, mode, reason) in [
        (
            "redirect",
            Mode::Redirect(elsewhere.url.clone()),
            Some("HTTP 302 Found (redirects are not followed)"),
        ),
        ("stall", Mode::Stall, None),
        ("trickle", Mode::Trickle, None),
        ("reset", Mode::Reset, None),
        ("flood", Mode::Flood, None),
    ] {
        let server = Hostile::start(mode);
        let endpoint = with_password(&server.url);
        let vars = vars(&endpoint);
        let done = run(dir.path(), name, &vars);
        eprintln!(
            "{name}: {:.3} s against {:.3} s with no endpoint",
            done.elapsed.as_secs_f64(),
            bare.elapsed.as_secs_f64()
        );
        assert_eq!(done.status, Some(3), "{name}: {}", done.stderr);
        assert!(
            done.elapsed < bare.elapsed + Duration::from_millis(200),
            "{name}: {:?} against {:?} with no endpoint",
            done.elapsed,
            bare.elapsed
        );
        let report = read_report(&done.report);
        check_invariants(&report);
        assert_eq!((report.exit_code, report.running), (Some(3), false));
        assert_eq!(report.stages.len(), read_report(&bare.report).stages.len());
        let shown = server.url.replacen("http://", "http://***@", 1);
        match (name, &report.export_error) {
            // A flood is a 200: accepted, its body read no further than the limit.
            ("flood", _) => {}
            (_, Some(error)) => {
                assert!(
                    error.starts_with(&format!("could not send OTLP to {shown}/v1/metrics")),
                    "{name}: {error}"
                );
                if let Some(reason) = reason {
                    assert!(error.contains(reason), "{name}: {error}");
                }
            }
            (_, None) => panic!("{name}: no export error: {}", done.stderr),
        }
        assert!(!server.seen().is_empty(), "{name} was never reached");
        no_secret_anywhere(&done, name);
        // `stemmon export` of the same report: exit 2 when nothing was accepted, its
        // output free of secrets whatever happened.
        let output = export(&done.report, &vars);
        let code = output.status.code();
        assert_eq!(
            code,
            Some(if name == "flood" { 0 } else { 2 }),
            "{output:?}"
        );
        no_secret(&String::from_utf8_lossy(&output.stdout), "export's stdout");
        no_secret(&String::from_utf8_lossy(&output.stderr), "export's stderr");
        // Memory: whatever the endpoint sends back (a flood of 64 KiB writes), within
        // 16 MiB of the run with no endpoint.
        let rss = run_maxrss(dir.path(), &vars);
        eprintln!("{name}: {} KiB against {} KiB", rss >> 10, bare_rss >> 10);
        assert!(
            rss < bare_rss + 16 * MIB,
            "{name}: {} MiB against {} MiB",
            rss / MIB,
            bare_rss / MIB
        );
    }
    assert_eq!(elsewhere.connections(), 0, "a redirect was followed");
}

#[test]
fn an_endpoint_that_does_not_parse_turns_otlp_off_with_one_warning_and_no_password() {
    let dir = TempDir::new("otlp-unparsable");
    let bare = run(dir.path(), "bare", &[]);
    for (name, endpoint, reason) in [
        (
            "port",
            format!("http://alice:{PASSWORD}@127.0.0.1:99999"),
            "has port \"99999\", not a number from 1 to 65535",
        ),
        (
            "host",
            format!("http://alice:{PASSWORD}@/v1"),
            "names no valid host",
        ),
    ] {
        let done = run(dir.path(), name, &vars(&endpoint));
        assert_eq!(done.status, Some(3), "{}", done.stderr);
        assert!(done.elapsed < bare.elapsed + Duration::from_millis(200));
        let warnings: Vec<&str> = done
            .stderr
            .lines()
            .filter(|l| l.contains("warning"))
            .collect();
        assert_eq!(warnings.len(), 1, "{name}: {}", done.stderr);
        assert!(
            warnings[0].starts_with(
                "[stemmon] warning: OTLP is off: ignoring OTEL_EXPORTER_OTLP_ENDPOINT: \
                 \"http://***@"
            ) && warnings[0].contains(reason),
            "{name}: {}",
            warnings[0]
        );
        let report = read_report(&done.report);
        check_invariants(&report);
        assert_eq!(report.export_error, None);
        no_secret_anywhere(&done, name);
        let output = clean()
            .args(["export", "--format", "otlp", "--endpoint", &endpoint])
            .arg(&done.report)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(reason), "{stderr}");
        no_secret(&stderr, "export's stderr");
    }
}

#[test]
fn each_request_waits_its_own_timeout_measured_by_the_server_within_ten_percent() {
    let dir = TempDir::new("otlp-timeouts");
    let bare = run(dir.path(), "bare", &[]);
    let server = Hostile::start(Mode::Stall);
    // `stemmon export`: each signal its own timeout, one after the other.
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", server.url.clone()),
        ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "400".to_owned()),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "800".to_owned()),
    ];
    let output = export(&bare.report, &vars);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let seen = server.closed(2, Duration::from_secs(10));
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (request, path, ms) in [
        (&seen[0], "/v1/metrics", 400.0),
        (&seen[1], "/v1/traces", 800.0),
    ] {
        assert!(
            request.head.starts_with(&format!("POST {path} ")),
            "{request:?}"
        );
        let held = (request.closed.unwrap() - request.arrived).as_secs_f64() * 1e3;
        eprintln!("{path}: held {held:.1} ms for a {ms} ms timeout");
        assert!(
            (ms * 0.9..=ms * 1.1).contains(&held),
            "{path}: held {held:.0} ms for a {ms} ms timeout"
        );
    }
    // `stemmon run`: the end waits the timeout (bounded by 1 s), no running line.
    let server = Hostile::start(Mode::Stall);
    let report = dir.path().join("end.json");
    let output = clean()
        .args(["run", "--log-interval", "none", "-o"])
        .arg(&report)
        .args(["--", "sh", "-c", "exit 3"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url)
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let seen = server.closed(1, Duration::from_secs(10));
    let held = (seen[0].closed.unwrap() - seen[0].arrived).as_secs_f64() * 1e3;
    eprintln!("the end of a run: held {held:.1} ms for a 300 ms timeout");
    assert!(
        (270.0..=330.0).contains(&held),
        "held {held:.0} ms for 300 ms"
    );
    let error = read_report(&report).export_error.unwrap();
    assert!(error.contains("not done within 0.3 s"), "{error}");
}
