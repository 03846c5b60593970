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

/// How long each request may take, connection included: the OpenTelemetry SDKs'
/// default export timeout.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What [`send`] sent, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sent {
    /// Where the metrics went, if anywhere.
    pub metrics_url: Option<String>,
    /// Where the trace went, if anywhere.
    pub traces_url: Option<String>,
    /// The metrics' data points.
    pub data_points: usize,
    /// The trace's spans, the root included.
    pub spans: usize,
}

/// Why [`send`] failed: no endpoint, a bad one, or a request that failed (every failed
/// request's reason, joined by `; `).
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
/// request within [`TIMEOUT`].
///
/// `endpoint` is a base URL (`http://collector:4318`; `/v1/metrics` and `/v1/traces` are
/// appended) that overrides every endpoint variable; without it, the standard variables
/// say where (`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` /
/// `..._TRACES_ENDPOINT`, used as they are). `OTEL_EXPORTER_OTLP_HEADERS`,
/// `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` are read as a monitor reads them;
/// `OTEL_SDK_DISABLED` is not (sending is what was asked for). The resource is the
/// report's own identity: its run id, host, pid, command and labels.
pub fn send(report: &Report, endpoint: Option<&str>) -> Result<Sent, SendError> {
    let env = crate::env::text;
    otlp::send_report(report, endpoint, &env, TIMEOUT)
        .map(|(settings, counts)| Sent {
            metrics_url: settings.metrics_url,
            traces_url: settings.traces_url,
            data_points: counts.data_points,
            spans: counts.spans,
        })
        .map_err(|message| SendError { message })
}
