//! Metrics and a trace over OTLP/HTTP with protobuf bodies (SPEC §16), for an
//! OpenTelemetry collector, Grafana / Tempo, Jaeger, Datadog or Honeycomb.
//!
//! Configured by the OpenTelemetry SDKs' standard variables ([`env`](mod@env)) or the builder's
//! `.otlp(endpoint)`. The metrics ([`metrics::METRICS`], made into points by [`points`]) go at every `running` line and at
//! the end, the trace ([`trace`]) at the end; a monitor's requests go out on the
//! `stemmon-otlp` thread ([`delivery`]), so that neither a stage nor the sampler waits for
//! the collector.

mod delivery;
pub(crate) mod env;
mod metrics;
mod points;
mod proto;
mod trace;

use crate::config::Config;
use crate::error::Error;
use crate::report::Report;
use delivery::{Client, Delivery, Request, Signal};
pub(crate) use env::{Disable, Settings};
use points::Times;
use prost::Message as _;
use proto::{any_value, ArrayValue, InstrumentationScope, KeyValue, Resource};
use std::time::Duration;

/// The semantic conventions the names and attributes follow.
pub(crate) const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.39.0";

/// The instrumentation scope of every metric and span.
fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "stemmon".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// The file name of the program the report is about: its command's (`stemmon run`), or
/// the monitored process's in the report's process list.
fn executable(report: &Report) -> Option<String> {
    let command = match &report.command {
        Some(argv) => argv.first()?.clone(),
        None => {
            let root = report.processes.iter().find(|p| p.pid == report.pid)?;
            root.command.split(' ').next()?.to_owned()
        }
    };
    file_name(&command)
}

/// The last component of a path, if it has one.
fn file_name(path: &str) -> Option<String> {
    let name = std::path::Path::new(path).file_name()?;
    Some(name.to_string_lossy().into_owned())
}

/// The resource of `report`: `service.name` (`OTEL_SERVICE_NAME`, else `service.name` in
/// `OTEL_RESOURCE_ATTRIBUTES`, else `unknown_service:<executable>` as the SDKs default),
/// `service.instance.id` (the run id), `host.name`, `process.pid`,
/// `process.command_args`, each label under its own name, then the rest of
/// `OTEL_RESOURCE_ATTRIBUTES`. Where the variable names an attribute stemmon sets, the
/// program's own value wins, as the specification has the resource a program provides
/// win over the variable's.
fn resource(report: &Report, settings: &Settings, executable: Option<&str>) -> Resource {
    let service = settings
        .service_name
        .clone()
        .unwrap_or_else(|| match executable {
            Some(name) => format!("unknown_service:{name}"),
            None => "unknown_service".to_owned(),
        });
    let mut attributes = vec![KeyValue::string("service.name", &service)];
    if let Some(id) = &report.run_id {
        attributes.push(KeyValue::string("service.instance.id", id));
    }
    if !report.host.is_empty() {
        attributes.push(KeyValue::string("host.name", &report.host));
    }
    attributes.push(KeyValue::int("process.pid", i64::from(report.pid)));
    if let Some(argv) = &report.command {
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
        attributes.push(KeyValue::string(name, value));
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

/// The metrics request for `report`, and the trace request too with `trace`, each where
/// `settings` sends that signal. Counts the data points and spans.
fn requests(
    report: &Report,
    settings: &Settings,
    executable: Option<&str>,
    trace: bool,
) -> (Vec<Request>, Counts) {
    let resource = resource(report, settings, executable);
    let times = times(report);
    let mut requests = Vec::new();
    let mut counts = Counts::default();
    if let Some(url) = &settings.metrics_url {
        let metrics = points::metrics(report, times);
        counts.data_points = metrics
            .iter()
            .map(|m| match &m.data {
                Some(proto::metric::Data::Gauge(g)) => g.data_points.len(),
                Some(proto::metric::Data::Sum(s)) => s.data_points.len(),
                None => 0,
            })
            .sum();
        let body = proto::ExportMetricsServiceRequest {
            resource_metrics: vec![proto::ResourceMetrics {
                resource: Some(resource.clone()),
                scope_metrics: vec![proto::ScopeMetrics {
                    scope: Some(scope()),
                    metrics,
                    schema_url: SCHEMA_URL.to_owned(),
                }],
                schema_url: SCHEMA_URL.to_owned(),
            }],
        };
        requests.push(Request {
            signal: Signal::Metrics,
            url: url.clone(),
            body: body.encode_to_vec(),
        });
    }
    if let (true, Some(url)) = (trace, &settings.traces_url) {
        let spans = trace::spans(report, times.start);
        counts.spans = spans.len();
        let body = proto::ExportTraceServiceRequest {
            resource_spans: vec![proto::ResourceSpans {
                resource: Some(resource),
                scope_spans: vec![proto::ScopeSpans {
                    scope: Some(scope()),
                    spans,
                    schema_url: SCHEMA_URL.to_owned(),
                }],
                schema_url: SCHEMA_URL.to_owned(),
            }],
        };
        requests.push(Request {
            signal: Signal::Traces,
            url: url.clone(),
            body: body.encode_to_vec(),
        });
    }
    (requests, counts)
}

/// How much a send carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) data_points: usize,
    pub(crate) spans: usize,
}

/// The OTLP exporter of one monitor: its settings and its `stemmon-otlp` thread.
#[derive(Debug)]
pub(crate) struct Exporter {
    settings: Settings,
    /// The program's file name, for `unknown_service:<executable>`.
    executable: Option<String>,
    delivery: Delivery,
}

impl Exporter {
    /// The exporter `config` (`.otlp(endpoint)`) and the environment ask for, `None` if
    /// neither names an endpoint (see [`Settings::from_parts`]).
    pub(crate) fn from_parts(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Option<Exporter>, Error> {
        let Some(settings) =
            Settings::from_parts(config.otlp.as_deref(), Disable::Honour, env, warn)?
        else {
            return Ok(None);
        };
        let executable = match &config.command {
            Some(argv) => argv.first().and_then(|command| file_name(command)),
            None => std::env::current_exe()
                .ok()
                .and_then(|path| file_name(&path.to_string_lossy())),
        };
        let delivery = Delivery::start(Client::new(settings.headers.clone()));
        Ok(Some(Exporter {
            settings,
            executable,
            delivery,
        }))
    }

    /// Hands the metrics of `report` to the exporter thread, or, with `last`, the final
    /// metrics and the trace, waiting for them at most [`delivery::FINAL_WAIT`]. Returns
    /// the failure of this send (`last`) or of an earlier one not yet returned.
    pub(crate) fn export(&self, report: &Report, last: bool) -> Result<(), String> {
        let executable = executable(report).or_else(|| self.executable.clone());
        let (requests, _) = requests(report, &self.settings, executable.as_deref(), last);
        if last {
            self.delivery.finish(requests)
        } else {
            self.delivery.send(requests)
        }
    }
}

/// Sends the metrics and the trace of a finished `report` from the calling thread, each
/// request within `timeout`; `endpoint` (a base endpoint) overrides the environment's.
pub(crate) fn send_report(
    report: &Report,
    endpoint: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    timeout: Duration,
) -> Result<(Settings, Counts), String> {
    let mut warnings = Vec::new();
    let settings = match endpoint {
        Some(endpoint) => {
            env::check_url(endpoint)?;
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
    let Some(settings) = settings else {
        return Err(match warnings.pop() {
            Some(warning) => warning,
            None => format!(
                "no OTLP endpoint: give one, or set {} (or {} and {})",
                env::ENDPOINT_VAR,
                env::METRICS_ENDPOINT_VAR,
                env::TRACES_ENDPOINT_VAR
            ),
        });
    };
    for warning in &warnings {
        super::warn(warning);
    }
    let (requests, counts) = requests(report, &settings, executable(report).as_deref(), true);
    let client = Client::new(settings.headers.clone());
    let errors: Vec<String> = requests
        .iter()
        .filter_map(|r| client.post(r.signal, &r.url, &r.body, timeout).err())
        .collect();
    if errors.is_empty() {
        Ok((settings, counts))
    } else {
        Err(errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn settings() -> Settings {
        Settings {
            metrics_url: Some("http://c:4318/v1/metrics".into()),
            traces_url: Some("http://c:4318/v1/traces".into()),
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
        let resource = resource(&report(), &settings(), executable(&report()).as_deref());
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
                "process.command_args",
                "rank",
                "deployment.environment.name"
            ]
        );
        assert_eq!(
            resource.attributes[0],
            KeyValue::string("service.name", "unknown_service:python3")
        );
        // The program's own host wins over the variable's.
        assert_eq!(
            resource.attributes[2],
            KeyValue::string("host.name", "node-7")
        );
        assert_eq!(resource.attributes[3], KeyValue::int("process.pid", 4242));
        assert_eq!(resource.attributes[5], KeyValue::string("rank", "3"));
        let named = Settings {
            service_name: Some("trainer".into()),
            ..settings()
        };
        let resource = super::resource(&Report::default(), &named, None);
        assert_eq!(
            resource.attributes[0],
            KeyValue::string("service.name", "trainer")
        );
        let bare = super::resource(&Report::default(), &Settings::default(), None);
        assert_eq!(
            bare.attributes[0],
            KeyValue::string("service.name", "unknown_service")
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

    #[test]
    fn a_signal_without_an_endpoint_is_not_sent_and_the_trace_goes_at_the_end_only() {
        let report = report();
        let (running, counts) = requests(&report, &settings(), None, false);
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].url, "http://c:4318/v1/metrics");
        assert_eq!(counts.spans, 0);
        assert!(counts.data_points > 0);
        let (last, counts) = requests(&report, &settings(), None, true);
        assert_eq!(last.len(), 2);
        assert_eq!(last[1].url, "http://c:4318/v1/traces");
        assert_eq!(counts.spans, 1, "the root alone");
        let traces_only = Settings {
            metrics_url: None,
            ..settings()
        };
        let (last, _) = requests(&report, &traces_only, None, true);
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].signal, Signal::Traces);
    }

    #[test]
    fn sending_needs_an_endpoint_and_says_how_to_give_one() {
        let error = send_report(&report(), None, &|_| None, Duration::from_secs(1)).unwrap_err();
        assert!(error.starts_with("no OTLP endpoint: "), "{error}");
        let error =
            send_report(&report(), Some("c:4318"), &|_| None, Duration::from_secs(1)).unwrap_err();
        assert!(error.contains("is not an http:// URL"), "{error}");
    }
}
