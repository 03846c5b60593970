//! The requests of a send: the metrics in requests of a bounded size, each handed on as
//! soon as it is whole, and the trace in one.

use super::delivery::Request;
use super::{points, proto, resource, scope, times, trace, Program, Settings, Signal, SCHEMA_URL};
use crate::report::Report;
use prost::Message as _;

/// The metrics request for `report`, and the trace request too with `trace`, each where
/// `settings` sends that signal. Counts the data points and spans.
pub(super) fn requests(
    report: &Report,
    settings: &Settings,
    program: &Program,
    trace: bool,
) -> (Vec<Request>, Counts) {
    let mut requests = Vec::new();
    let data_points = metrics_requests(report, settings, program, &mut |request| {
        requests.push(request)
    });
    let mut counts = Counts {
        data_points,
        spans: 0,
    };
    if let (true, Some((request, spans))) = (trace, trace_request(report, settings, program)) {
        counts.spans = spans;
        requests.push(request);
    }
    (requests, counts)
}

/// The most bytes of metrics one request carries before the next begins: well under
/// what collectors take by default (4 MiB over gRPC), and a few hundred stages' worth.
pub(super) const MAX_METRICS_BODY: usize = 1 << 20;

/// The metrics requests for `report`, each given to `send` as soon as it is whole, where
/// `settings` sends metrics; the count of data points.
pub(super) fn metrics_requests(
    report: &Report,
    settings: &Settings,
    program: &Program,
    send: &mut dyn FnMut(Request),
) -> usize {
    let Some(target) = settings.metrics.as_ref() else {
        return 0;
    };
    let resource = resource(report, settings, program);
    let times = times(report);
    proto::metrics_requests(
        &resource,
        &scope(),
        SCHEMA_URL,
        MAX_METRICS_BODY,
        |each| points::each_metric(report, times, each),
        &mut |body| {
            send(Request {
                signal: Signal::Metrics,
                target: target.clone(),
                body,
            })
        },
    )
}

/// The trace request for `report` where `settings` sends traces, with its count of
/// spans.
pub(super) fn trace_request(
    report: &Report,
    settings: &Settings,
    program: &Program,
) -> Option<(Request, usize)> {
    let target = settings.traces.as_ref()?;
    let resource = resource(report, settings, program);
    let spans = trace::spans(report, times(report).start);
    let count = spans.len();
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
    let request = Request {
        signal: Signal::Traces,
        target: target.clone(),
        body: body.encode_to_vec(),
    };
    Some((request, count))
}

/// How much a send carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) data_points: usize,
    pub(crate) spans: usize,
}
