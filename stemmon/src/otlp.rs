//! Sending a finished report to an OpenTelemetry collector over OTLP/HTTP (feature
//! `otlp`), as `stemmon export --format otlp` does.
//!
//! A running monitor sends by itself when [`MonitorBuilder::otlp`](crate::MonitorBuilder::otlp)
//! or `OTEL_EXPORTER_OTLP_ENDPOINT` names an endpoint; this is for a report read back
//! from its file:
//!
//! ```no_run
//! let text = std::fs::read_to_string("report.json")?;
//! let report: stemmon::Report = serde_json::from_str(&text)?;
//! let sent = stemmon::otlp::send(&report, Some("http://localhost:4318"))?;
//! println!("{} data points, {} spans", sent.data_points, sent.spans);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What is sent, and where it appears, is the same as a monitor's final send: the run's
//! and every stage's metrics, and the run as one trace with a span per kept stage call.

use crate::export::otlp;
use crate::report::Report;
use std::fmt;
use std::time::Duration;

/// How long each request may take, connection included, unless
/// `OTEL_EXPORTER_OTLP_TIMEOUT` (or the signal's own) says otherwise: the OpenTelemetry
/// SDKs' default export timeout.
pub const TIMEOUT: Duration = otlp::env::DEFAULT_TIMEOUT;

/// What [`send`] sent, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sent {
    /// Where the metrics were accepted, if they were (the URL's userinfo as `***`).
    pub metrics_url: Option<String>,
    /// Where the trace was accepted, if it was (the URL's userinfo as `***`).
    pub traces_url: Option<String>,
    /// The metrics' data points.
    pub data_points: usize,
    /// The trace's spans, the root included.
    pub spans: usize,
    /// Why each signal that was not accepted failed, one message each (a backend that
    /// takes traces only answers 404 or 405 to the metrics).
    pub refused: Vec<String>,
}

/// Why [`send`] failed: no endpoint, a bad one, or no signal accepted (every failed
/// request's reason, joined by `; `). No message holds an endpoint's userinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendError {
    message: String,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SendError {}

/// Sends the metrics and the trace of `report` now, from the calling thread, each
/// request within its timeout ([`TIMEOUT`] unless a variable says otherwise).
///
/// `endpoint` is a base URL (`http://collector:4318`; `/v1/metrics` and `/v1/traces` are
/// appended) that overrides every endpoint variable; without it, the standard variables
/// say where (`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` /
/// `..._TRACES_ENDPOINT`, used as they are). The headers, timeouts and compression
/// (`OTEL_EXPORTER_OTLP[_{METRICS,TRACES}]_{HEADERS,TIMEOUT,COMPRESSION}`),
/// `OTEL_{METRICS,TRACES}_EXPORTER`, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`
/// are read as a monitor reads them; `OTEL_SDK_DISABLED` is not (sending is what was
/// asked for), and `STEMMON_OTLP_COMMAND_ARGS=1` adds `process.command_args`. The
/// resource is the report's own identity: its run id, host, pid, command and labels.
///
/// `Ok` when any signal was accepted, with [`Sent::refused`] saying which was not; `Err`
/// when none was. No redirect is followed: a 3xx is a failure.
pub fn send(report: &Report, endpoint: Option<&str>) -> Result<Sent, SendError> {
    let env = crate::env::text;
    let (outcomes, counts) =
        otlp::send_report(report, endpoint, &env).map_err(|message| SendError { message })?;
    let mut sent = Sent {
        metrics_url: None,
        traces_url: None,
        data_points: counts.data_points,
        spans: counts.spans,
        refused: Vec::new(),
    };
    for outcome in outcomes {
        match outcome.result {
            Ok(()) => match outcome.signal {
                otlp::Signal::Metrics => sent.metrics_url = Some(outcome.shown),
                otlp::Signal::Traces => sent.traces_url = Some(outcome.shown),
            },
            Err(error) => sent.refused.push(error),
        }
    }
    if sent.metrics_url.is_none() && sent.traces_url.is_none() {
        return Err(SendError {
            message: sent.refused.join("; "),
        });
    }
    Ok(sent)
}
