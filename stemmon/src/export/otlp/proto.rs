//! The OTLP messages stemmon sends (opentelemetry-proto 1.x: `common`, `resource`,
//! `metrics`, `trace` and the two collector services), declared for `prost` with the
//! field numbers of the `.proto` files.
//!
//! Only the messages and fields stemmon fills are declared: a field left out is one the
//! receiver reads as absent, which protobuf allows. Names follow the `.proto` files (and
//! so `opentelemetry-proto`'s generated types).

#![allow(missing_docs)]

/// `opentelemetry.proto.common.v1.AnyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5")]
    pub(crate) value: Option<any_value::Value>,
}

pub(crate) mod any_value {
    /// The one value an `AnyValue` holds (named as in the `.proto` file).
    #[allow(clippy::enum_variant_names)]
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Value {
        #[prost(string, tag = "1")]
        StringValue(String),
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        #[prost(int64, tag = "3")]
        IntValue(i64),
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
    }
}

/// `opentelemetry.proto.common.v1.ArrayValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub(crate) values: Vec<AnyValue>,
}

/// `opentelemetry.proto.common.v1.KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeyValue {
    #[prost(string, tag = "1")]
    pub(crate) key: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<AnyValue>,
}

/// `opentelemetry.proto.common.v1.InstrumentationScope`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "2")]
    pub(crate) version: String,
}

/// `opentelemetry.proto.resource.v1.Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub(crate) attributes: Vec<KeyValue>,
}

/// `opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest`.
// Encoded by `metrics_requests` field by field; decoded whole by the tests.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportMetricsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub(crate) resource_metrics: Vec<ResourceMetrics>,
}

/// `opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportMetricsServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) partial_success: Option<PartialSuccess>,
}

/// `ExportMetricsPartialSuccess` and `ExportTracePartialSuccess`: field 1 counts the
/// rejected data points or spans.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PartialSuccess {
    #[prost(int64, tag = "1")]
    pub(crate) rejected: i64,
    #[prost(string, tag = "2")]
    pub(crate) error_message: String,
}

/// `opentelemetry.proto.metrics.v1.ResourceMetrics`.
// Encoded by `metrics_requests` field by field; decoded whole by the tests.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub(crate) resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) scope_metrics: Vec<ScopeMetrics>,
    #[prost(string, tag = "3")]
    pub(crate) schema_url: String,
}

/// `opentelemetry.proto.metrics.v1.ScopeMetrics`.
// Encoded by `metrics_requests` field by field; decoded whole by the tests.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopeMetrics {
    #[prost(message, optional, tag = "1")]
    pub(crate) scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) metrics: Vec<Metric>,
    #[prost(string, tag = "3")]
    pub(crate) schema_url: String,
}

/// `opentelemetry.proto.metrics.v1.Metric`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Metric {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "2")]
    pub(crate) description: String,
    #[prost(string, tag = "3")]
    pub(crate) unit: String,
    #[prost(oneof = "metric::Data", tags = "5, 7")]
    pub(crate) data: Option<metric::Data>,
}

pub(crate) mod metric {
    /// A metric's points: a gauge or a sum.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Data {
        #[prost(message, tag = "5")]
        Gauge(super::Gauge),
        #[prost(message, tag = "7")]
        Sum(super::Sum),
    }
}

/// `opentelemetry.proto.metrics.v1.Gauge`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub(crate) data_points: Vec<NumberDataPoint>,
}

/// `opentelemetry.proto.metrics.v1.Sum`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub(crate) data_points: Vec<NumberDataPoint>,
    /// `AggregationTemporality`: [`CUMULATIVE`].
    #[prost(int32, tag = "2")]
    pub(crate) aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub(crate) is_monotonic: bool,
}

/// `AGGREGATION_TEMPORALITY_CUMULATIVE`: every sum counts from the run's start.
pub(crate) const CUMULATIVE: i32 = 2;

/// `opentelemetry.proto.metrics.v1.NumberDataPoint`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NumberDataPoint {
    #[prost(message, repeated, tag = "7")]
    pub(crate) attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub(crate) start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub(crate) time_unix_nano: u64,
    #[prost(oneof = "number_data_point::Value", tags = "4, 6")]
    pub(crate) value: Option<number_data_point::Value>,
}

pub(crate) mod number_data_point {
    /// A point's value: a double or an integer.
    #[derive(Clone, Copy, PartialEq, prost::Oneof)]
    pub(crate) enum Value {
        #[prost(double, tag = "4")]
        AsDouble(f64),
        #[prost(sfixed64, tag = "6")]
        AsInt(i64),
    }
}

/// `opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub(crate) resource_spans: Vec<ResourceSpans>,
}

/// `opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportTraceServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) partial_success: Option<PartialSuccess>,
}

/// `opentelemetry.proto.trace.v1.ResourceSpans`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    pub(crate) resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) scope_spans: Vec<ScopeSpans>,
    #[prost(string, tag = "3")]
    pub(crate) schema_url: String,
}

/// `opentelemetry.proto.trace.v1.ScopeSpans`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopeSpans {
    #[prost(message, optional, tag = "1")]
    pub(crate) scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) spans: Vec<Span>,
    #[prost(string, tag = "3")]
    pub(crate) schema_url: String,
}

/// `opentelemetry.proto.trace.v1.Span`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Span {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) span_id: Vec<u8>,
    /// Empty for a root span.
    #[prost(bytes = "vec", tag = "4")]
    pub(crate) parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    pub(crate) name: String,
    /// `SpanKind`: [`SPAN_KIND_INTERNAL`].
    #[prost(int32, tag = "6")]
    pub(crate) kind: i32,
    #[prost(fixed64, tag = "7")]
    pub(crate) start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    pub(crate) end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    pub(crate) attributes: Vec<KeyValue>,
    #[prost(message, optional, tag = "15")]
    pub(crate) status: Option<Status>,
}

/// `SPAN_KIND_INTERNAL`: a stage is work inside the program, not a call across processes.
pub(crate) const SPAN_KIND_INTERNAL: i32 = 1;

/// `opentelemetry.proto.trace.v1.Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Status {
    #[prost(string, tag = "2")]
    pub(crate) message: String,
    /// `StatusCode`: [`STATUS_CODE_ERROR`] for a failed call, else unset (0).
    #[prost(int32, tag = "3")]
    pub(crate) code: i32,
}

/// `STATUS_CODE_ERROR`.
pub(crate) const STATUS_CODE_ERROR: i32 = 2;

/// Helpers to write attributes.
impl KeyValue {
    /// A string attribute.
    pub(crate) fn string(key: &str, value: &str) -> KeyValue {
        KeyValue::of(key, any_value::Value::StringValue(value.to_owned()))
    }

    /// An integer attribute.
    pub(crate) fn int(key: &str, value: i64) -> KeyValue {
        KeyValue::of(key, any_value::Value::IntValue(value))
    }

    /// An attribute of any value.
    pub(crate) fn of(key: &str, value: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue { value: Some(value) }),
        }
    }
}

/// The bytes of `ExportMetricsServiceRequest`s of one resource and one scope, whose
/// metrics `metrics` gives one at a time (to the function it is handed): each is encoded
/// as it comes and dropped, so that the messages are never all held at once, only the
/// bytes of one request. A request is given to `send` once its metrics pass `max_body`
/// bytes (a report of 100 000 stages: some 40 MB of bytes in all, against some 150 MB of
/// messages), so that no more than one request's bytes are held either, and no
/// collector's request limit is met. Each is the same bytes as `encode_to_vec` of its
/// whole message. Returns the data points counted.
pub(crate) fn metrics_requests(
    resource: &Resource,
    scope: &InstrumentationScope,
    schema_url: &str,
    max_body: usize,
    metrics: impl FnOnce(&mut dyn FnMut(Metric)),
    send: &mut dyn FnMut(Vec<u8>),
) -> usize {
    let mut request = MetricsBody::new(resource, scope, schema_url);
    let mut points = 0;
    metrics(&mut |metric: Metric| {
        points += match &metric.data {
            Some(metric::Data::Gauge(g)) => g.data_points.len(),
            Some(metric::Data::Sum(s)) => s.data_points.len(),
            None => 0,
        };
        request.push(&metric);
        if request.metrics_len() >= max_body {
            send(request.finish());
        }
    });
    if request.metrics_len() > 0 {
        send(request.finish());
    }
    points
}

/// One metrics request's bytes as its metrics come, with room at the front for what
/// precedes them, written once their length is known.
struct MetricsBody<'a> {
    resource: &'a Resource,
    scope: &'a InstrumentationScope,
    schema_url: &'a str,
    resource_len: usize,
    scope_len: usize,
    room: usize,
    body: Vec<u8>,
}

impl<'a> MetricsBody<'a> {
    fn new(
        resource: &'a Resource,
        scope: &'a InstrumentationScope,
        schema_url: &'a str,
    ) -> MetricsBody<'a> {
        use prost::encoding::message;
        let heads = 2 * (1 + 10);
        let (resource_len, scope_len) = (
            message::encoded_len(1, resource),
            message::encoded_len(1, scope),
        );
        let room = heads + resource_len + scope_len;
        MetricsBody {
            resource,
            scope,
            schema_url,
            resource_len,
            scope_len,
            room,
            body: vec![0u8; room],
        }
    }

    fn push(&mut self, metric: &Metric) {
        prost::encoding::message::encode(2, metric, &mut self.body);
    }

    fn metrics_len(&self) -> usize {
        self.body.len() - self.room
    }

    /// The request's bytes; the builder starts the next request, empty.
    fn finish(&mut self) -> Vec<u8> {
        use prost::encoding::{
            encode_key, encode_varint, encoded_len_varint, message, string, WireType,
        };
        let (room, schema_url) = (self.room, self.schema_url);
        let mut body = std::mem::replace(&mut self.body, vec![0u8; room]);
        // `ScopeMetrics`: scope (1), the metrics (2), schema_url (3).
        let metrics_len = body.len() - room;
        let schema_len = if schema_url.is_empty() {
            0
        } else {
            string::encoded_len(3, &schema_url.to_owned())
        };
        let scope_metrics_len = self.scope_len + metrics_len + schema_len;
        // `ResourceMetrics`: resource (1), scope_metrics (2), schema_url (3).
        let resource_metrics_len = self.resource_len
            + 1
            + encoded_len_varint(scope_metrics_len as u64)
            + scope_metrics_len
            + schema_len;
        let mut head = Vec::with_capacity(room);
        encode_key(1, WireType::LengthDelimited, &mut head);
        encode_varint(resource_metrics_len as u64, &mut head);
        message::encode(1, self.resource, &mut head);
        encode_key(2, WireType::LengthDelimited, &mut head);
        encode_varint(scope_metrics_len as u64, &mut head);
        message::encode(1, self.scope, &mut head);
        let start = room - head.len();
        body[start..room].copy_from_slice(&head);
        body.drain(..start);
        if !schema_url.is_empty() {
            let schema = schema_url.to_owned();
            string::encode(3, &schema, &mut body);
            string::encode(3, &schema, &mut body);
        }
        body
    }
}
