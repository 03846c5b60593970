//! The OTLP/HTTP receiver the tests send to (`otlp_receiver.py`, decoding with the
//! official `opentelemetry-proto` package), run on loopback from the test's directory.
#![allow(dead_code)] // Each test binary uses a part of this module.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The interpreter that has `opentelemetry-proto`: `STEMMON_OTLP_PYTHON`, else the
/// virtualenv `.ci/deps` makes at `<workspace>/target/otlp-venv`. `Err` says why there
/// is none.
pub fn python(workspace: &Path) -> Result<PathBuf, String> {
    let python = match std::env::var_os("STEMMON_OTLP_PYTHON") {
        Some(path) => PathBuf::from(path),
        None => workspace.join("target/otlp-venv/bin/python"),
    };
    let probe = "import opentelemetry.proto.collector.trace.v1.trace_service_pb2";
    match Command::new(&python).args(["-c", probe]).output() {
        Ok(output) if output.status.success() => Ok(python),
        Ok(output) => Err(format!(
            "{} cannot import opentelemetry-proto ({}); run `.ci/deps`",
            python.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Err(format!(
            "no {} ({error}); run `.ci/deps`, or set STEMMON_OTLP_PYTHON",
            python.display()
        )),
    }
}

/// A running receiver; dropping it ends it.
pub struct Receiver {
    child: Child,
    /// Its base endpoint, `http://127.0.0.1:PORT`.
    pub url: String,
    out: PathBuf,
}

impl Receiver {
    /// Starts the receiver with `python`, its requests logged in `dir`; with `delay`, it
    /// answers each request that many seconds late.
    pub fn start(workspace: &Path, python: &Path, dir: &Path, delay: Option<f64>) -> Receiver {
        let delay = delay.map(|d| d.to_string());
        let args: Vec<&str> = match &delay {
            Some(delay) => vec!["--delay", delay],
            None => Vec::new(),
        };
        Receiver::start_with(workspace, python, dir, &args)
    }

    /// Starts the receiver with `args` (`--delay S`, `--status CODE`, `--refuse PATH`),
    /// its requests logged in a file of its own in `dir`.
    pub fn start_with(workspace: &Path, python: &Path, dir: &Path, args: &[&str]) -> Receiver {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = dir.join(format!("otlp-{}-{n}.jsonl", std::process::id()));
        let mut command = Command::new(python);
        command
            .arg(workspace.join("tests/support/otlp_receiver.py"))
            .arg(&out)
            .args(args);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the OTLP receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the receiver printed {line:?}, not its port"));
        Receiver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            out,
        }
    }

    /// Every request received so far, in order: `{"path", "headers", "body"}`, the
    /// body as `MessageToDict` gives it (ids as hex).
    pub fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }

    /// The bodies of the requests to `path` (`/v1/metrics`, `/v1/traces`).
    pub fn bodies(&self, path: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["path"] == path)
            .map(|r| r["body"].clone())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port on loopback that nothing listens on (bound, then closed).
pub fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The attributes of an OTLP JSON object (`resource`, a point, a span) as `key ->
/// value`, each value as text: a string as it is, an int64 as its digits, a double as
/// JSON prints it, an array as JSON.
pub fn attributes(object: &Value) -> std::collections::BTreeMap<String, String> {
    object["attributes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|kv| {
            let value = &kv["value"];
            let text = if let Some(s) = value["stringValue"].as_str() {
                s.to_owned()
            } else if let Some(i) = value["intValue"].as_str() {
                i.to_owned()
            } else if let Some(d) = value.get("doubleValue") {
                d.to_string()
            } else {
                value.to_string()
            };
            (kv["key"].as_str().unwrap().to_owned(), text)
        })
        .collect()
}

/// The one resource of a metrics or traces request body.
pub fn resource(body: &Value) -> &Value {
    let list = body
        .get("resourceMetrics")
        .or_else(|| body.get("resourceSpans"))
        .expect("resourceMetrics or resourceSpans");
    assert_eq!(list.as_array().unwrap().len(), 1, "{body}");
    &list[0]["resource"]
}

/// The metrics of a metrics request body, by name.
pub fn metrics(body: &Value) -> std::collections::BTreeMap<String, Value> {
    body["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_owned(), m.clone()))
        .collect()
}

/// The points of a metric (gauge or sum).
pub fn points(metric: &Value) -> Vec<Value> {
    let data = metric
        .get("gauge")
        .or_else(|| metric.get("sum"))
        .unwrap_or_else(|| panic!("neither gauge nor sum: {metric}"));
    data["dataPoints"].as_array().unwrap().clone()
}

/// A point's value as text: an integer's digits (`asInt`), or a double as JSON prints it.
pub fn value(point: &Value) -> String {
    match point.get("asInt") {
        Some(int) => int.as_str().unwrap().to_owned(),
        None => point["asDouble"].to_string(),
    }
}

/// The point of `metric` whose `stage.path` is `path` (and whose other attributes
/// include `with`).
pub fn stage_point<'a>(points: &'a [Value], path: &str, with: &[(&str, &str)]) -> &'a Value {
    points
        .iter()
        .find(|p| {
            let attributes = attributes(p);
            attributes.get("stage.path").map(String::as_str) == Some(path)
                && with
                    .iter()
                    .all(|(k, v)| attributes.get(*k).map(String::as_str) == Some(*v))
        })
        .unwrap_or_else(|| panic!("no point for {path} {with:?} in {points:?}"))
}

/// The spans of a traces request body.
pub fn spans(body: &Value) -> Vec<Value> {
    body["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap()
        .clone()
}
