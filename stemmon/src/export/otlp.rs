//! Metrics and a trace over OTLP/HTTP with protobuf bodies, for an OpenTelemetry
//! collector, Grafana / Tempo, Jaeger, Datadog, Honeycomb or Arize Phoenix.
//!
//! Configured by the OpenTelemetry SDKs' standard variables ([`env`](mod@env)) or the builder's
//! `.otlp(endpoint)`. The metrics ([`metrics::METRICS`], made into points by [`points`]) go at every `running` line and at
//! the end, the trace ([`trace`]) at the end; a monitor's requests go out on the
//! `stemmon-otlp` thread ([`delivery`]), so that neither a stage nor the sampler waits for
//! the collector.

mod delivery;
pub(crate) mod endpoint;
pub(crate) mod env;
mod metrics;
mod points;
mod proto;
mod requests;
mod trace;

use crate::config::Config;
use crate::error::Error;
use crate::export::sink::{Sink, Warned};
use crate::report::Report;
use delivery::{Client, Delivery, Request};
pub(crate) use env::{Disable, Settings, Signal};
use points::Times;
use proto::{any_value, ArrayValue, InstrumentationScope, KeyValue, Resource};
pub(crate) use requests::Counts;
use requests::{metrics_requests, requests, trace_request};

/// The semantic conventions the names and attributes follow (version 1.44.0).
pub(crate) const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.44.0";

/// The instrumentation scope of every metric and span.
fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "stemmon".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// The command the report's program was started with (its argv[0]): its command's
/// (`stemmon run`), or the monitored process's in the report's process list.
fn command(report: &Report) -> Option<String> {
    match &report.command {
        Some(argv) => argv.first().cloned(),
        None => {
            let root = report.processes.iter().find(|p| p.pid == report.pid)?;
            root.command.split(' ').next().map(str::to_owned)
        }
    }
    .filter(|command| !command.is_empty())
}

/// The last component of a path, if it has one.
fn file_name(path: &str) -> Option<String> {
    let name = std::path::Path::new(path).file_name()?;
    Some(name.to_string_lossy().into_owned())
}

/// The program the resource describes: its command, file name and path (where known).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Program {
    /// `process.command`: argv[0] as given.
    pub(crate) command: Option<String>,
    /// `process.executable.name`.
    pub(crate) name: Option<String>,
    /// `process.executable.path`: argv[0] where it names a path, or the running
    /// program's own.
    pub(crate) path: Option<String>,
    /// `process.command_args`, sent only with `otlp_command_args`: the whole argv.
    pub(crate) args: Option<Vec<String>>,
}

impl Program {
    /// What the report says of its program.
    fn of(report: &Report) -> Program {
        let command = command(report);
        Program {
            name: command.as_deref().and_then(file_name),
            path: command.clone().filter(|c| c.contains('/')),
            command,
            args: report.command.clone(),
        }
    }

    /// What the report says, filled in with `fallback` (the running program's own).
    fn or(self, fallback: &Program) -> Program {
        Program {
            command: self.command.or_else(|| fallback.command.clone()),
            name: self.name.or_else(|| fallback.name.clone()),
            path: self.path.or_else(|| fallback.path.clone()),
            args: self.args.or_else(|| fallback.args.clone()),
        }
    }
}

/// The run id (32 hex digits) as a UUID, `8-4-4-4-12`; a report without one gets the
/// trace's id, so that the trace and the instance agree.
fn instance_id(report: &Report) -> String {
    let hex: String = trace::trace_id(report)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The resource of `report`: `service.name` (`OTEL_SERVICE_NAME`, else `service.name` in
/// `OTEL_RESOURCE_ATTRIBUTES`, else `unknown_service:<executable>` as the SDKs default),
/// `service.instance.id` (the run id as a UUID), `host.name`, `process.pid`,
/// `process.executable.name`, `process.executable.path`, `process.command`,
/// `telemetry.sdk.*`, `process.command_args` only with `otlp_command_args`, each label
/// under its own name, then the rest of `OTEL_RESOURCE_ATTRIBUTES`. Where the variable
/// names an attribute stemmon sets, the program's own value wins, as the specification
/// has the resource a program provides win over the variable's.
fn resource(report: &Report, settings: &Settings, program: &Program) -> Resource {
    let service = settings
        .service_name
        .clone()
        .unwrap_or_else(|| match &program.name {
            Some(name) => format!("unknown_service:{name}"),
            None => "unknown_service".to_owned(),
        });
    let mut attributes = vec![
        KeyValue::string("service.name", &service),
        KeyValue::string("service.instance.id", &instance_id(report)),
    ];
    if !report.host.is_empty() {
        attributes.push(KeyValue::string("host.name", &report.host));
    }
    attributes.push(KeyValue::int("process.pid", i64::from(report.pid)));
    for (key, value) in [
        ("process.executable.name", &program.name),
        ("process.executable.path", &program.path),
        ("process.command", &program.command),
    ] {
        if let Some(value) = value {
            attributes.push(KeyValue::string(key, value));
        }
    }
    attributes.extend([
        KeyValue::string("telemetry.sdk.name", "stemmon"),
        KeyValue::string("telemetry.sdk.language", "rust"),
        KeyValue::string("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
    ]);
    if let (true, Some(argv)) = (settings.command_args, &program.args) {
        let values = argv
            .iter()
            .map(|arg| proto::AnyValue {
                value: Some(any_value::Value::StringValue(arg.clone())),
            })
            .collect();
        attributes.push(KeyValue::of(
            "process.command_args",
            any_value::Value::ArrayValue(ArrayValue { values }),
        ));
    }
    for (name, value) in &report.labels {
        if !attributes.iter().any(|kv| &kv.key == name) {
            attributes.push(KeyValue::string(name, value));
        }
    }
    for (key, value) in &settings.resource {
        if !attributes.iter().any(|kv| &kv.key == key) {
            attributes.push(KeyValue::string(key, value));
        }
    }
    Resource { attributes }
}

/// The start of the run and the report's moment, in nanoseconds since the Unix epoch; a
/// report from before 0.4 (no `start_unix_seconds`) is taken to have ended now.
fn times(report: &Report) -> Times {
    let nanos = |seconds: f64| {
        let nanos = (seconds.max(0.0) * 1e9).round();
        if nanos.is_finite() && nanos < u64::MAX as f64 {
            nanos as u64
        } else {
            u64::MAX
        }
    };
    let wall = nanos(report.wall_seconds);
    let start = match report.start_unix_seconds {
        Some(start) => nanos(start),
        None => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            now.saturating_sub(wall)
        }
    };
    Times {
        start,
        now: start.saturating_add(wall),
    }
}

/// The OTLP exporter of one monitor: its settings and its `stemmon-otlp` thread.
#[derive(Debug)]
pub(crate) struct Exporter {
    settings: Settings,
    /// The running program's own command, name and path, where the report lacks them.
    program: Program,
    delivery: Delivery,
    warned: Warned,
}

impl Exporter {
    /// The exporter `config` (`.otlp(endpoint)`, `.otlp_command_args(on)`) and the
    /// environment ask for, `None` if neither names an endpoint (see
    /// [`Settings::from_parts`]).
    pub(crate) fn from_parts(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Option<Exporter>, Error> {
        let Some(mut settings) =
            Settings::from_parts(config.otlp.as_deref(), Disable::Honour, env, warn)?
        else {
            return Ok(None);
        };
        settings.command_args = command_args(env, warn).unwrap_or(config.otlp_command_args);
        let program = match &config.command {
            Some(argv) => Program {
                command: argv.first().cloned(),
                name: argv.first().and_then(|command| file_name(command)),
                path: argv.first().filter(|c| c.contains('/')).cloned(),
                args: Some(argv.clone()),
            },
            None => {
                let exe = std::env::current_exe().ok();
                let exe = exe.as_ref().map(|p| p.to_string_lossy().into_owned());
                let args = std::env::args_os()
                    .map(|arg| arg.to_string_lossy().into_owned())
                    .collect();
                Program {
                    command: None,
                    name: exe.as_deref().and_then(file_name),
                    path: exe,
                    args: Some(args),
                }
            }
        };
        // The end of the run waits the longest timeout, bounded by FINAL_WAIT.
        let final_wait = [&settings.metrics, &settings.traces]
            .into_iter()
            .flatten()
            .map(|target| target.timeout)
            .max()
            .unwrap_or(delivery::FINAL_WAIT)
            .min(delivery::FINAL_WAIT);
        let delivery = Delivery::start(Client::new(), final_wait);
        Ok(Some(Exporter {
            settings,
            program,
            delivery,
            warned: Warned::default(),
        }))
    }

    /// Hands the metrics of `report` to the exporter thread, or, with `last`, the final
    /// metrics and the trace, waiting for them at most the end's wait. Returns the
    /// failure of this send (`last`) or of an earlier one not yet returned.
    pub(crate) fn export(&self, report: &Report, last: bool) -> Result<(), String> {
        let program = Program::of(report).or(&self.program);
        let (requests, _) = requests(report, &self.settings, &program, last);
        if last {
            self.delivery.finish(requests)
        } else {
            self.delivery.send(requests)
        }
    }
}

impl Sink for Exporter {
    fn name(&self) -> &'static str {
        "otlp"
    }

    fn target(&self) -> String {
        let shown: Vec<&str> = [&self.settings.metrics, &self.settings.traces]
            .into_iter()
            .flatten()
            .map(|target| target.endpoint.shown())
            .collect();
        shown.join(" ")
    }

    fn send(&mut self, report: &Report, last: bool) -> Result<(), String> {
        let sent = self.export(report, last);
        self.warned.once(sent)
    }
}

/// The OTLP sink that `config` and the environment ask for, if any (see
/// [`Exporter::from_parts`]).
pub(crate) fn sink(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
    warn: &mut dyn FnMut(&str),
) -> Result<Option<Box<dyn Sink>>, Error> {
    let exporter = Exporter::from_parts(config, env, warn)?;
    Ok(exporter.map(|exporter| Box::new(exporter) as Box<dyn Sink>))
}

/// `STEMMON_OTLP_COMMAND_ARGS`, parsed by the settings table: `None` unset; a bad value
/// is warned about and ignored.
fn command_args(env: &dyn Fn(&str) -> Option<String>, warn: &mut dyn FnMut(&str)) -> Option<bool> {
    use stemmon_report::settings::{Value, OTLP_COMMAND_ARGS};
    let name = OTLP_COMMAND_ARGS.env?;
    let text = env(name)?;
    match OTLP_COMMAND_ARGS.parse(&text) {
        Ok(Value::Flag(on)) => Some(on),
        Ok(_) => None,
        Err(expected) => {
            warn(&crate::env::warning(name, &text, &expected));
            None
        }
    }
}

/// What one signal's send came to: where it went (as shown) and, if it failed, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) signal: Signal,
    pub(crate) shown: String,
    pub(crate) result: Result<(), String>,
}

/// Sends the metrics and the trace of a finished `report` from the calling thread, each
/// request within its timeout (`OTEL_EXPORTER_OTLP[_<SIGNAL>]_TIMEOUT`, else 10 s);
/// `endpoint` (a base endpoint) overrides the environment's; `STEMMON_OTLP_COMMAND_ARGS`
/// adds `process.command_args`. `Err` when nothing could be sent (no endpoint, a bad one);
/// otherwise each signal's outcome.
pub(crate) fn send_report(
    report: &Report,
    endpoint: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<Outcome>, Counts), String> {
    let mut warnings = Vec::new();
    let settings = match endpoint {
        Some(endpoint) => {
            endpoint::Endpoint::parse(endpoint)?;
            // The endpoint given wins over every endpoint variable.
            let overridden = |name: &str| match name {
                env::ENDPOINT_VAR => Some(endpoint.to_owned()),
                env::METRICS_ENDPOINT_VAR | env::TRACES_ENDPOINT_VAR => None,
                name => env(name),
            };
            Settings::from_parts(None, Disable::Ignore, &overridden, &mut |w| {
                warnings.push(w.to_owned())
            })
        }
        None => Settings::from_parts(None, Disable::Ignore, env, &mut |w| {
            warnings.push(w.to_owned())
        }),
    }
    .map_err(|e| e.to_string())?;
    let Some(mut settings) = settings else {
        return Err(match warnings.pop() {
            Some(warning) => warning,
            None if [Signal::Metrics, Signal::Traces].iter().all(|s| {
                env(&s.exporter_var()).is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
            }) =>
            {
                "nothing to send: OTEL_METRICS_EXPORTER and OTEL_TRACES_EXPORTER are none"
                    .to_owned()
            }
            None => format!(
                "no OTLP endpoint: give one, or set {} (or {} and {})",
                env::ENDPOINT_VAR,
                env::METRICS_ENDPOINT_VAR,
                env::TRACES_ENDPOINT_VAR
            ),
        });
    };
    settings.command_args =
        command_args(env, &mut |w| warnings.push(w.to_owned())).unwrap_or(false);
    for warning in &warnings {
        super::warn(warning);
    }
    // One request built and sent at a time: a report of 100 000 stages never holds
    // more than one body.
    let program = Program::of(report);
    let client = Client::new();
    let mut outcomes = Vec::new();
    // A signal's first failure ends its requests: the rest would fail alike. Its
    // outcome is its first failure, else its success.
    let mut send = |request: Request| {
        let signal = request.signal;
        let known = outcomes.iter().position(|o: &Outcome| o.signal == signal);
        if known.is_some_and(|at| outcomes[at].result.is_err()) {
            return;
        }
        let outcome = Outcome {
            signal,
            shown: request.target.endpoint.shown().to_owned(),
            result: client.post(&request, request.target.timeout),
        };
        match known {
            Some(at) => outcomes[at] = outcome,
            None => outcomes.push(outcome),
        }
    };
    let data_points = metrics_requests(report, &settings, &program, &mut send);
    let mut counts = Counts {
        data_points,
        spans: 0,
    };
    if let Some((request, spans)) = trace_request(report, &settings, &program) {
        counts.spans = spans;
        send(request);
    }
    Ok((outcomes, counts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn target(url: &str) -> env::Target {
        env::Target {
            endpoint: endpoint::Endpoint::parse(url).unwrap(),
            headers: Vec::new(),
            timeout: Duration::from_secs(1),
            gzip: false,
        }
    }

    fn settings() -> Settings {
        Settings {
            metrics: Some(target("http://c:4318/v1/metrics")),
            traces: Some(target("http://c:4318/v1/traces")),
            resource: vec![
                ("host.name".into(), "from-variable".into()),
                ("deployment.environment.name".into(), "prod".into()),
            ],
            ..Settings::default()
        }
    }

    fn report() -> Report {
        {
            let mut built = Report::default();
            built.pid = 4242;
            built.run_id = Some("0123456789abcdef0123456789abcdef".into());
            built.start_unix_seconds = Some(1_700_000_000.5);
            built.wall_seconds = 2.25;
            built.host = "node-7".into();
            built.labels = BTreeMap::from([("rank".to_owned(), "3".to_owned())]);
            built.command = Some(vec!["/usr/bin/python3".into(), "train.py".into()]);
            built
        }
    }

    #[test]
    fn the_resource_is_the_reports_identity_and_the_variables_attributes() {
        let report = report();
        let resource = resource(&report, &settings(), &Program::of(&report));
        let keys: Vec<&str> = resource
            .attributes
            .iter()
            .map(|kv| kv.key.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "service.name",
                "service.instance.id",
                "host.name",
                "process.pid",
                "process.executable.name",
                "process.executable.path",
                "process.command",
                "telemetry.sdk.name",
                "telemetry.sdk.language",
                "telemetry.sdk.version",
                "rank",
                "deployment.environment.name"
            ]
        );
        let get = |key: &str| {
            resource
                .attributes
                .iter()
                .find(|kv| kv.key == key)
                .unwrap()
                .clone()
        };
        assert_eq!(
            get("service.name"),
            KeyValue::string("service.name", "unknown_service:python3")
        );
        // The run id as a UUID.
        assert_eq!(
            get("service.instance.id"),
            KeyValue::string(
                "service.instance.id",
                "01234567-89ab-cdef-0123-456789abcdef"
            )
        );
        // The program's own host wins over the variable's.
        assert_eq!(get("host.name"), KeyValue::string("host.name", "node-7"));
        assert_eq!(get("process.pid"), KeyValue::int("process.pid", 4242));
        assert_eq!(
            get("process.executable.path"),
            KeyValue::string("process.executable.path", "/usr/bin/python3")
        );
        assert_eq!(
            get("telemetry.sdk.language"),
            KeyValue::string("telemetry.sdk.language", "rust")
        );
        // The argv only when asked for.
        let asked = Settings {
            command_args: true,
            ..settings()
        };
        let with_args = super::resource(&report, &asked, &Program::of(&report));
        assert!(with_args
            .attributes
            .iter()
            .any(|kv| kv.key == "process.command_args"));
        let named = Settings {
            service_name: Some("trainer".into()),
            ..settings()
        };
        let resource = super::resource(&Report::default(), &named, &Program::default());
        assert_eq!(
            resource.attributes[0],
            KeyValue::string("service.name", "trainer")
        );
        let bare = super::resource(
            &Report::default(),
            &Settings::default(),
            &Program::default(),
        );
        assert_eq!(
            bare.attributes[0],
            KeyValue::string("service.name", "unknown_service")
        );
        let KeyValue { value, .. } = &bare.attributes[1];
        let Some(proto::AnyValue {
            value: Some(any_value::Value::StringValue(uuid)),
        }) = value
        else {
            panic!("{value:?}")
        };
        assert_eq!(
            uuid.split('-').map(str::len).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
    }

    #[test]
    fn times_count_from_the_runs_start_on_the_wall_clock() {
        assert_eq!(
            times(&report()),
            Times {
                start: 1_700_000_000_500_000_000,
                now: 1_700_000_002_750_000_000
            }
        );
        // Before 0.4: it ended now.
        let old = {
            let mut built = Report::default();
            built.wall_seconds = 10.0;
            built
        };
        let times = times(&old);
        assert_eq!(times.now - times.start, 10_000_000_000);
        assert!(times.start > 1_700_000_000_000_000_000);
    }

    /// The request is encoded a metric at a time, into the bytes the whole message
    /// encodes to.
    #[test]
    fn the_metrics_request_is_the_whole_messages_bytes_and_counts_its_points() {
        use prost::Message as _;
        let mut report = report();
        report.peaks.peak_tree_rss_bytes = Some(5 << 20);
        for (path, calls) in [("load", 3), ("fit", 1), ("fit/step", 40)] {
            let mut stage = crate::report::StageReport::default();
            stage.path = path.into();
            stage.calls = calls;
            stage.wall_seconds = 0.5;
            stage.peaks.peak_tree_rss_bytes = Some(calls << 20);
            report.stages.push(stage);
        }
        let settings = settings();
        let program = Program::of(&report);
        let (requests, counts) = requests(&report, &settings, &program, false);
        let metrics = points::metrics(&report, times(&report));
        let points: usize = metrics
            .iter()
            .map(|m| match &m.data {
                Some(proto::metric::Data::Gauge(g)) => g.data_points.len(),
                Some(proto::metric::Data::Sum(s)) => s.data_points.len(),
                None => 0,
            })
            .sum();
        assert!(
            metrics.len() > 3 && points > 9,
            "{} metrics, {points} points",
            metrics.len()
        );
        let whole = proto::ExportMetricsServiceRequest {
            resource_metrics: vec![proto::ResourceMetrics {
                resource: Some(resource(&report, &settings, &program)),
                scope_metrics: vec![proto::ScopeMetrics {
                    scope: Some(scope()),
                    metrics,
                    schema_url: SCHEMA_URL.to_owned(),
                }],
                schema_url: SCHEMA_URL.to_owned(),
            }],
        };
        assert_eq!(requests[0].body, whole.encode_to_vec());
        assert_eq!(counts.data_points, points);
    }

    /// A report of 20 000 stages: its metrics go in several requests, none much past
    /// [`requests::MAX_METRICS_BODY`], each a whole message, its points all there once.
    fn many_stages() -> Report {
        let mut report = report();
        for i in 0..20_000u64 {
            let mut stage = crate::report::StageReport::default();
            stage.path = format!("load/part-{i}");
            stage.calls = 1;
            stage.wall_seconds = 0.5;
            stage.peaks.peak_tree_rss_bytes = Some(i << 10);
            report.stages.push(stage);
        }
        report
    }

    #[test]
    fn a_large_reports_metrics_go_in_requests_of_a_bounded_size() {
        use prost::Message as _;
        let report = many_stages();
        let (requests, counts) = requests(&report, &settings(), &Program::default(), false);
        assert!(requests.len() > 3, "{} requests", requests.len());
        let mut points = 0;
        for request in &requests {
            assert_eq!(request.signal, Signal::Metrics);
            // Cut once past the size: at most one metric message of MAX_POINTS beyond.
            assert!(
                request.body.len() < requests::MAX_METRICS_BODY * 3 / 2,
                "{}",
                request.body.len()
            );
            let decoded = proto::ExportMetricsServiceRequest::decode(&request.body[..]).unwrap();
            let resource = &decoded.resource_metrics[0];
            assert!(resource.resource.is_some());
            for metric in &resource.scope_metrics[0].metrics {
                let held = match &metric.data {
                    Some(proto::metric::Data::Gauge(g)) => g.data_points.len(),
                    Some(proto::metric::Data::Sum(s)) => s.data_points.len(),
                    None => 0,
                };
                assert!(
                    held <= points::MAX_POINTS,
                    "{held} points in {}",
                    metric.name
                );
                points += held;
            }
        }
        assert_eq!(points, counts.data_points);
        assert!(points > 4 * 20_000, "{points}");
    }

    #[test]
    fn a_refused_signal_is_not_sent_again_in_the_same_send() {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (told, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let (mut line, mut length, mut path) = (String::new(), 0, String::new());
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    if path.is_empty() {
                        path = line.split(' ').nth(1).unwrap_or("").to_owned();
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(value) = lower.strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap();
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                // Metrics are refused (a traces-only backend); traces taken.
                let status = if path == "/v1/metrics" { 404 } else { 200 };
                let _ = told.send(path);
                let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
                let _ = (&stream).write_all(reply.as_bytes());
            }
        });
        let (outcomes, _) = send_report(&many_stages(), Some(&url), &|_| None).unwrap();
        let paths: Vec<String> = heard.try_iter().collect();
        let metrics = paths.iter().filter(|p| *p == "/v1/metrics").count();
        assert_eq!(metrics, 1, "{paths:?}");
        assert_eq!(paths.iter().filter(|p| *p == "/v1/traces").count(), 1);
        assert_eq!(outcomes.len(), 2, "{outcomes:?}");
        assert!(outcomes[0].result.is_err() && outcomes[1].result.is_ok());
    }

    #[test]
    fn a_signal_without_an_endpoint_is_not_sent_and_the_trace_goes_at_the_end_only() {
        let report = report();
        let program = Program::default();
        let (running, counts) = requests(&report, &settings(), &program, false);
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].target.endpoint.url(), "http://c:4318/v1/metrics");
        assert_eq!(counts.spans, 0);
        assert!(counts.data_points > 0);
        let (last, counts) = requests(&report, &settings(), &program, true);
        assert_eq!(last.len(), 2);
        assert_eq!(last[1].target.endpoint.url(), "http://c:4318/v1/traces");
        assert_eq!(counts.spans, 1, "the root alone");
        let traces_only = Settings {
            metrics: None,
            ..settings()
        };
        let (last, _) = requests(&report, &traces_only, &program, true);
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].signal, Signal::Traces);
    }

    #[test]
    fn sending_needs_an_endpoint_and_says_how_to_give_one() {
        let error = send_report(&report(), None, &|_| None).unwrap_err();
        assert!(error.starts_with("no OTLP endpoint: "), "{error}");
        let error = send_report(&report(), Some("c:4318"), &|_| None).unwrap_err();
        assert!(error.contains("is not an http:// URL"), "{error}");
        let none = |name: &str| name.ends_with("S_EXPORTER").then(|| "none".to_owned());
        let error = send_report(&report(), Some("http://c:4318"), &none).unwrap_err();
        assert_eq!(
            error,
            "nothing to send: OTEL_METRICS_EXPORTER and OTEL_TRACES_EXPORTER are none"
        );
    }

    #[test]
    fn the_docs_table_names_every_metric_and_attribute() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/otlp.md");
        let Ok(docs) = std::fs::read_to_string(path) else {
            // A packaged crate has no book.
            return crate::env::cannot_run("the docs table", "no docs/src/otlp.md here");
        };
        // name -> (kind, unit), from the rows of the table of otlp.md and of each
        // measurement's page (a measurement's metrics are on its own page).
        let mut rows = std::collections::BTreeMap::new();
        let pages = stemmon_report::fields::MEASURES.iter().map(|m| {
            let path = format!("{}/../docs/src/{}", env!("CARGO_MANIFEST_DIR"), m.page);
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
        });
        for text in std::iter::once(docs).chain(pages) {
            let Some(table) = text.split("<!-- otlp-table").nth(1) else {
                continue;
            };
            for line in table.lines().skip(3) {
                if !line.starts_with('|') {
                    break;
                }
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let name = cells[1].trim_matches('`').to_owned();
                let unit = cells[3].trim_matches('`').to_owned();
                assert!(
                    rows.insert(name, (cells[2].to_owned(), unit)).is_none(),
                    "{line}"
                );
            }
        }
        let mut sent = std::collections::BTreeSet::new();
        for entry in metrics::metrics() {
            sent.insert(entry.name);
            let kind = format!("{:?}", entry.kind);
            assert_eq!(
                rows.get(entry.name),
                Some(&(kind, entry.unit.to_owned())),
                "{}: the docs' row",
                entry.name
            );
        }
        // Every attribute of the resource, a span and a point.
        let mut report = report();
        report.run_id = Some("0123456789abcdef0123456789abcdef".into());
        report.labels.clear();
        report.stages = vec![{
            let mut built = crate::report::StageReport::default();
            built.name = "s".into();
            built.path = "s".into();
            built
        }];
        report.threads = vec![{
            let mut built = crate::report::ThreadReport::default();
            built.name = Some("main".into());
            built
        }];
        report.spans = vec![crate::report::Span::default()];
        let asked = Settings {
            command_args: true,
            resource: Vec::new(),
            ..settings()
        };
        let mut attributes: Vec<String> = resource(&report, &asked, &Program::of(&report))
            .attributes
            .into_iter()
            .map(|kv| kv.key)
            .collect();
        let spans = trace::spans(&report, 0);
        attributes.extend(spans[1].attributes.iter().map(|kv| kv.key.clone()));
        for key in &attributes {
            let (kind, _) = rows
                .get(key.as_str())
                .unwrap_or_else(|| panic!("{key}: no row in the docs' table"));
            assert!(
                ["resource", "span", "span, point"].contains(&kind.as_str()),
                "{key}: {kind}"
            );
        }
        // And nothing the table calls sent that is not.
        for (name, (kind, _)) in &rows {
            match kind.as_str() {
                "not sent" => assert!(!sent.contains(name.as_str()), "{name} is sent"),
                "resource" | "span" | "span, point" => {
                    assert!(attributes.contains(name), "{name} is not set")
                }
                _ => assert!(sent.contains(name.as_str()), "{name} is not sent"),
            }
        }
    }
}
