//! Where OTLP goes and what it says about the run, from the OpenTelemetry SDK's standard
//! variables (the `OTEL_*` environment specification) and the builder's `.otlp(endpoint)`.
//!
//! Each signal (metrics, traces) has its endpoint, headers, timeout and compression: the
//! per-signal variable (`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`) wins over the general one
//! (`OTEL_EXPORTER_OTLP_TIMEOUT`), which wins over the default. The environment is read
//! through the closure passed in: no variable is read here.

use super::endpoint::Endpoint;
use crate::error::Error;
use std::time::Duration;

/// The base endpoint: `/v1/metrics` and `/v1/traces` are appended to its path.
pub(crate) const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The metrics endpoint, used as it is.
pub(crate) const METRICS_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// The traces endpoint, used as it is.
pub(crate) const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The service's name: the resource's `service.name`.
pub(crate) const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
/// More resource attributes: `k=v,k2=v2`, percent-encoded.
pub(crate) const RESOURCE_ATTRIBUTES_VAR: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// `true` turns OTLP off.
pub(crate) const SDK_DISABLED_VAR: &str = "OTEL_SDK_DISABLED";
/// The OpenTelemetry SDKs' default timeout of one export.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The protocols asked for; stemmon speaks `http/protobuf` only.
const PROTOCOL_VARS: [&str; 3] = [
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
];

/// Variables of the SDK specification that stemmon does not honour: each one set is
/// named in one warning, so that no setting is dropped without a word.
const NOT_HONOURED: &[&str] = &[
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_INSECURE",
    "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_METRICS_INSECURE",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
    "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
    "OTEL_METRIC_EXPORT_INTERVAL",
    "OTEL_METRIC_EXPORT_TIMEOUT",
    "OTEL_METRICS_EXEMPLAR_FILTER",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_PROPAGATORS",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_EXPORT_TIMEOUT",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_EVENT_COUNT_LIMIT",
    "OTEL_SPAN_LINK_COUNT_LIMIT",
];

/// A signal's variables: `OTEL_EXPORTER_OTLP_<SIGNAL>_*` and `OTEL_<SIGNAL>_EXPORTER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    Metrics,
    Traces,
}

impl Signal {
    /// The word of its variables: `METRICS`, `TRACES`.
    fn upper(self) -> &'static str {
        match self {
            Signal::Metrics => "METRICS",
            Signal::Traces => "TRACES",
        }
    }

    /// Its name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Signal::Metrics => "metrics",
            Signal::Traces => "traces",
        }
    }

    /// The path appended to a base endpoint.
    fn path(self) -> &'static str {
        match self {
            Signal::Metrics => "v1/metrics",
            Signal::Traces => "v1/traces",
        }
    }

    /// The variable that says whether it is exported: `OTEL_METRICS_EXPORTER`.
    pub(crate) fn exporter_var(self) -> String {
        format!("OTEL_{}_EXPORTER", self.upper())
    }

    /// The per-signal form of `OTEL_EXPORTER_OTLP_<what>`.
    fn var(self, what: &str) -> String {
        format!("OTEL_EXPORTER_OTLP_{}_{what}", self.upper())
    }
}

/// Where one signal goes, and how.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// Where it is POSTed.
    pub(crate) endpoint: Endpoint,
    /// Headers of every request (an API key, a tenant), decoded.
    pub(crate) headers: Vec<(String, String)>,
    /// Longest one request may take, connection included.
    pub(crate) timeout: Duration,
    /// Whether the body goes gzip-compressed.
    pub(crate) gzip: bool,
}

/// The header names only: their values are secrets (an API key), and a monitor's
/// `{:?}` must not print them.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Target")
            .field("endpoint", &self.endpoint)
            .field("headers", &names)
            .field("timeout", &self.timeout)
            .field("gzip", &self.gzip)
            .finish()
    }
}

/// Where OTLP goes and what the resource adds to the report's own identity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Where metrics go; `None`: no metrics.
    pub(crate) metrics: Option<Target>,
    /// Where the trace goes; `None`: no trace.
    pub(crate) traces: Option<Target>,
    /// `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`.
    pub(crate) service_name: Option<String>,
    /// `OTEL_RESOURCE_ATTRIBUTES` without `service.name`, decoded, in order.
    pub(crate) resource: Vec<(String, String)>,
    /// Whether the resource carries `process.command_args` (`otlp_command_args`).
    pub(crate) command_args: bool,
}

/// How [`Settings::from_parts`] treats `OTEL_SDK_DISABLED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disable {
    /// `true` turns OTLP off (a monitor).
    Honour,
    /// An explicit send (`stemmon export --format otlp`) goes whatever it says.
    Ignore,
}

impl Settings {
    /// The settings that `builder` (the builder's base endpoint) and the environment ask
    /// for; `None` when no endpoint is set, `OTEL_SDK_DISABLED=true`, or both exporters
    /// are `none`.
    ///
    /// Precedence, lowest first: the builder's endpoint, `OTEL_EXPORTER_OTLP_ENDPOINT`,
    /// the per-signal variable. A bad builder endpoint is an `Error::InvalidConfig`; a bad
    /// variable (endpoint or headers) is one warning, and OTLP is then off. A set
    /// variable that is not honoured (a protocol other than `http/protobuf`, a bad
    /// timeout or compression, one of the specification's that stemmon has no use for)
    /// is warned about once, by name; a bad `OTEL_RESOURCE_ATTRIBUTES` is warned about and
    /// left out, as the specification says.
    pub(crate) fn from_parts(
        builder: Option<&str>,
        disable: Disable,
        env: &dyn Fn(&str) -> Option<String>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Option<Settings>, Error> {
        let builder = match builder {
            Some(endpoint) => {
                Some(
                    Endpoint::parse(endpoint).map_err(|reason| Error::InvalidConfig {
                        setting: "otlp",
                        reason,
                    })?,
                )
            }
            None => None,
        };
        if disable == Disable::Honour && disabled(env, warn) {
            return Ok(None);
        }
        let base = match env(ENDPOINT_VAR) {
            Some(url) => match Endpoint::parse(&url) {
                Ok(endpoint) => Some(endpoint),
                Err(reason) => return off(warn, ENDPOINT_VAR, &reason),
            },
            None => builder,
        };
        let general = match Options::read(env, None, None, warn) {
            Ok(options) => options,
            Err(()) => return Ok(None),
        };
        let mut targets = [None, None];
        for (slot, signal) in targets.iter_mut().zip([Signal::Metrics, Signal::Traces]) {
            let variable = signal.var("ENDPOINT");
            let endpoint = match env(&variable) {
                Some(url) => match Endpoint::parse(&url) {
                    Ok(endpoint) => Some(endpoint),
                    Err(reason) => return off(warn, &variable, &reason),
                },
                None => base.as_ref().map(|base| base.join(signal.path())),
            };
            let Some(endpoint) = endpoint else { continue };
            if !exported(env, signal, warn) {
                continue;
            }
            let Ok(options) = Options::read(env, Some(signal), Some(&general), warn) else {
                return Ok(None);
            };
            *slot = Some(Target {
                endpoint,
                headers: options.headers,
                timeout: options.timeout,
                gzip: options.gzip,
            });
        }
        let [metrics, traces] = targets;
        if metrics.is_none() && traces.is_none() {
            return Ok(None);
        }
        not_honoured(env, warn);
        let mut resource = match env(RESOURCE_ATTRIBUTES_VAR).map(|text| pairs(&text)) {
            None => Vec::new(),
            Some(Ok(pairs)) => pairs,
            Some(Err(reason)) => {
                warn(&format!("ignoring {RESOURCE_ATTRIBUTES_VAR}: {reason}"));
                Vec::new()
            }
        };
        let from_attributes = resource
            .iter()
            .rposition(|(key, _)| key == "service.name")
            .map(|at| resource.remove(at).1);
        resource.retain(|(key, _)| key != "service.name");
        let service_name = env(SERVICE_NAME_VAR)
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .or(from_attributes);
        Ok(Some(Settings {
            metrics,
            traces,
            service_name,
            resource,
            command_args: false,
        }))
    }
}

/// Headers, timeout and compression, of every signal or of one.
#[derive(Clone, Debug)]
struct Options {
    headers: Vec<(String, String)>,
    timeout: Duration,
    gzip: bool,
}

impl Options {
    /// The general options (`signal` `None`), or `signal`'s over `general`. `Err` after
    /// the one warning of headers that do not parse (OTLP is then off).
    fn read(
        env: &dyn Fn(&str) -> Option<String>,
        signal: Option<Signal>,
        general: Option<&Options>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Options, ()> {
        let name = |what: &str| match signal {
            Some(signal) => signal.var(what),
            None => format!("OTEL_EXPORTER_OTLP_{what}"),
        };
        let inherited = general.cloned().unwrap_or(Options {
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            gzip: false,
        });
        let variable = name("HEADERS");
        let headers = match env(&variable).map(|text| headers(&text)) {
            None => inherited.headers,
            Some(Ok(headers)) => headers,
            Some(Err(reason)) => {
                warn(&format!(
                    "OTLP is off: {variable} is not `name=value,...`: {reason}"
                ));
                return Err(());
            }
        };
        let variable = name("TIMEOUT");
        let timeout = match env(&variable) {
            None => inherited.timeout,
            Some(text) => match text.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => {
                    warn(&format!(
                        "ignoring {variable}={text:?}: expected a whole number of \
                         milliseconds, 1 or more"
                    ));
                    inherited.timeout
                }
            },
        };
        let variable = name("COMPRESSION");
        let gzip = match env(&variable) {
            None => inherited.gzip,
            Some(text) => match text.trim().to_ascii_lowercase().as_str() {
                "gzip" => true,
                "none" => false,
                _ => {
                    warn(&format!(
                        "ignoring {variable}={text:?}: expected gzip or none"
                    ));
                    inherited.gzip
                }
            },
        };
        Ok(Options {
            headers,
            timeout,
            gzip,
        })
    }
}

/// `OTEL_<SIGNAL>_EXPORTER`: a list of exporters; `none` turns the signal off, `otlp`
/// (or nothing) leaves it on, any other is warned about and the signal stays on OTLP.
fn exported(
    env: &dyn Fn(&str) -> Option<String>,
    signal: Signal,
    warn: &mut dyn FnMut(&str),
) -> bool {
    let variable = signal.exporter_var();
    let Some(value) = env(&variable) else {
        return true;
    };
    let names: Vec<String> = value
        .split(',')
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    if names.iter().all(|name| name == "none") {
        return false;
    }
    let others: Vec<&String> = names
        .iter()
        .filter(|name| !matches!(name.as_str(), "otlp" | "none"))
        .collect();
    if !others.is_empty() {
        warn(&format!(
            "ignoring {variable}={value:?} but otlp: stemmon exports {} over otlp or not at all \
             (none)",
            signal.name()
        ));
    }
    true
}

/// One warning naming every variable set that stemmon does not honour, and one for a
/// protocol other than `http/protobuf`.
fn not_honoured(env: &dyn Fn(&str) -> Option<String>, warn: &mut dyn FnMut(&str)) {
    let asked: Vec<String> = PROTOCOL_VARS
        .iter()
        .filter_map(|name| Some((name, env(name)?)))
        .filter(|(_, value)| value.trim() != "http/protobuf")
        .map(|(name, value)| format!("{name}={value:?}"))
        .collect();
    if !asked.is_empty() {
        warn(&format!(
            "ignoring {}: stemmon sends OTLP as http/protobuf only",
            asked.join(", ")
        ));
    }
    let mut set: Vec<&str> = NOT_HONOURED
        .iter()
        .copied()
        .filter(|name| env(name).is_some())
        .collect();
    let temporality = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE";
    if env(temporality).is_some_and(|v| !v.trim().eq_ignore_ascii_case("cumulative")) {
        set.push(temporality);
    }
    if env("OTEL_LOGS_EXPORTER").is_some_and(|v| !v.trim().eq_ignore_ascii_case("none")) {
        set.push("OTEL_LOGS_EXPORTER");
    }
    if !set.is_empty() {
        warn(&format!(
            "ignoring {}: stemmon does not honour {}",
            set.join(", "),
            if set.len() == 1 { "it" } else { "them" }
        ));
    }
}

/// One warning for a bad variable; OTLP is then off.
fn off(
    warn: &mut dyn FnMut(&str),
    variable: &str,
    reason: &str,
) -> Result<Option<Settings>, Error> {
    warn(&format!("OTLP is off: ignoring {variable}: {reason}"));
    Ok(None)
}

/// `OTEL_SDK_DISABLED`: `true` (any case) turns OTLP off; `false` or nothing leaves it
/// on; anything else is warned about and read as `false`, as the specification says.
fn disabled(env: &dyn Fn(&str) -> Option<String>, warn: &mut dyn FnMut(&str)) -> bool {
    let Some(value) = env(SDK_DISABLED_VAR) else {
        return false;
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => true,
        "false" | "" => false,
        _ => {
            warn(&format!(
                "ignoring {SDK_DISABLED_VAR}={value:?}: expected true or false"
            ));
            false
        }
    }
}
/// `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs whose names are HTTP header names
/// and whose values hold no control character, once decoded.
fn headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let pairs = pairs(text)?;
    for (name, value) in &pairs {
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if !name.bytes().all(token) {
            return Err(format!("{name:?} is not an HTTP header name"));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!("the value of {name:?} holds a control character"));
        }
    }
    Ok(pairs)
}

/// `k=v,k2=v2` with each key and value trimmed and percent-decoded (the W3C Baggage
/// form the `OTEL_*` lists use); empty entries are skipped. Any malformed entry makes
/// the whole list an error, as the specification asks.
pub(crate) fn pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key, value)) = entry.split_once('=') else {
            return Err(format!("{entry:?} is not `name=value`"));
        };
        let key = percent_decode(key.trim())?;
        if key.is_empty() {
            return Err(format!("{entry:?} has no name"));
        }
        pairs.push((key, percent_decode(value.trim())?));
    }
    Ok(pairs)
}

/// `%XX` escapes decoded, the result UTF-8.
fn percent_decode(text: &str) -> Result<String, String> {
    let bad = || format!("{text:?} holds a bad %-escape");
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = bytes.get(at + 1..at + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{text:?} does not decode to UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Headers of every request: `k=v,k2=v2`, percent-encoded.
    const HEADERS_VAR: &str = "OTEL_EXPORTER_OTLP_HEADERS";
    use std::collections::HashMap;

    fn settings(
        builder: Option<&str>,
        vars: &[(&str, &str)],
    ) -> (Result<Option<Settings>, String>, Vec<String>) {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut warnings = Vec::new();
        let result = Settings::from_parts(
            builder,
            Disable::Honour,
            &|name| vars.get(name).cloned(),
            &mut |w| warnings.push(w.to_owned()),
        )
        .map_err(|e| e.to_string());
        (result, warnings)
    }

    fn urls(settings: &Settings) -> (Option<&str>, Option<&str>) {
        (
            settings.metrics.as_ref().map(|t| t.endpoint.url()),
            settings.traces.as_ref().map(|t| t.endpoint.url()),
        )
    }

    #[test]
    fn nothing_set_means_no_otlp() {
        assert_eq!(settings(None, &[]), (Ok(None), vec![]));
        // Headers alone name no endpoint.
        assert_eq!(settings(None, &[(HEADERS_VAR, "a=b")]).0, Ok(None));
    }

    #[test]
    fn the_base_endpoint_gets_the_signal_paths_and_a_per_signal_one_is_used_as_it_is() {
        let (s, w) = settings(Some("http://builder:4318"), &[]);
        let s = s.unwrap().unwrap();
        assert_eq!(
            urls(&s),
            (
                Some("http://builder:4318/v1/metrics"),
                Some("http://builder:4318/v1/traces")
            )
        );
        assert!(w.is_empty());
        // The variable wins over the builder; a path and a trailing slash are kept apart.
        let (s, _) = settings(
            Some("http://builder:4318"),
            &[(ENDPOINT_VAR, "http://env:4318/otlp/")],
        );
        assert_eq!(
            urls(&s.unwrap().unwrap()),
            (
                Some("http://env:4318/otlp/v1/metrics"),
                Some("http://env:4318/otlp/v1/traces")
            )
        );
        let (s, _) = settings(
            None,
            &[
                (ENDPOINT_VAR, "http://env:4318"),
                (TRACES_ENDPOINT_VAR, "http://tempo:4318/custom"),
            ],
        );
        assert_eq!(
            urls(&s.unwrap().unwrap()),
            (
                Some("http://env:4318/v1/metrics"),
                Some("http://tempo:4318/custom")
            )
        );
        // A per-signal variable alone sends that signal alone.
        let (s, _) = settings(
            None,
            &[(METRICS_ENDPOINT_VAR, "http://m:9090/otlp/v1/metrics")],
        );
        assert_eq!(
            urls(&s.unwrap().unwrap()),
            (Some("http://m:9090/otlp/v1/metrics"), None)
        );
    }

    #[test]
    fn a_bad_builder_endpoint_fails_start_and_a_bad_variable_turns_otlp_off_with_one_warning() {
        let error = settings(Some("collector:4318"), &[]).0.unwrap_err();
        assert_eq!(
            error,
            "invalid `otlp`: \"collector:4318\" is not an http:// URL (for example \
             http://collector:4318)"
        );
        for (variable, value) in [
            (ENDPOINT_VAR, "grpc://c:4317"),
            (METRICS_ENDPOINT_VAR, "http://"),
            (TRACES_ENDPOINT_VAR, "http://c:4318/v1/traces?x=1"),
        ] {
            let (s, w) = settings(Some("http://builder:4318"), &[(variable, value)]);
            assert_eq!(s, Ok(None), "{variable}");
            assert_eq!(w.len(), 1, "{w:?}");
            assert!(
                w[0].starts_with(&format!("OTLP is off: ignoring {variable}: {value:?} ")),
                "{w:?}"
            );
        }
        let (s, w) = settings(Some("http://c:4318"), &[(HEADERS_VAR, "x-key")]);
        assert_eq!(s, Ok(None));
        assert_eq!(
            w,
            [
                "OTLP is off: OTEL_EXPORTER_OTLP_HEADERS is not `name=value,...`: \"x-key\" is \
              not `name=value`"
            ]
        );
        if !cfg!(any(feature = "otlp-tls", feature = "pushgateway-tls")) {
            let error = Endpoint::parse("https://api.honeycomb.io").unwrap_err();
            assert!(error.contains("`otlp-tls` feature"), "{error}");
        }
    }

    #[test]
    fn otel_sdk_disabled_true_turns_it_off_and_anything_but_false_is_warned_about() {
        let on = [(ENDPOINT_VAR, "http://c:4318")];
        for value in ["true", "TRUE", " True "] {
            let (s, w) = settings(None, &[on[0], (SDK_DISABLED_VAR, value)]);
            assert_eq!((s, w.len()), (Ok(None), 0), "{value}");
        }
        let (s, w) = settings(None, &[on[0], (SDK_DISABLED_VAR, "false")]);
        assert!(s.unwrap().is_some() && w.is_empty());
        let (s, w) = settings(None, &[on[0], (SDK_DISABLED_VAR, "1")]);
        assert!(s.unwrap().is_some());
        assert_eq!(
            w,
            ["ignoring OTEL_SDK_DISABLED=\"1\": expected true or false"]
        );
        // The builder's endpoint is checked even when the variable turns OTLP off.
        assert!(settings(Some("nope"), &[(SDK_DISABLED_VAR, "true")])
            .0
            .is_err());
        // An explicit send ignores it.
        let vars: HashMap<&str, &str> = [on[0], (SDK_DISABLED_VAR, "true")].into();
        let s = Settings::from_parts(
            None,
            Disable::Ignore,
            &|name| vars.get(name).map(|v| v.to_string()),
            &mut |_| {},
        );
        assert!(s.unwrap().is_some());
    }

    #[test]
    fn headers_are_percent_decoded_and_checked() {
        let (s, w) = settings(
            None,
            &[
                (ENDPOINT_VAR, "http://c:4318"),
                (
                    HEADERS_VAR,
                    "x-honeycomb-team=abc%3D%3D , Authorization=Basic%20dXNlcjpwYXNz,,",
                ),
            ],
        );
        assert!(w.is_empty(), "{w:?}");
        let s = s.unwrap().unwrap();
        // A monitor's `{:?}` names the headers, never their values.
        let debug = format!("{s:?}");
        assert!(
            debug.contains("x-honeycomb-team") && !debug.contains("abc=="),
            "{debug}"
        );
        assert_eq!(
            s.metrics.unwrap().headers,
            [
                ("x-honeycomb-team".to_owned(), "abc==".to_owned()),
                ("Authorization".to_owned(), "Basic dXNlcjpwYXNz".to_owned())
            ]
        );
        for bad in ["a b=c", "a=%0D%0AInjected: 1", "a=%zz", "a=%e2%28", "=v"] {
            assert!(headers(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn protocols_other_than_http_protobuf_are_warned_about_once_and_ignored() {
        let (s, w) = settings(
            None,
            &[
                (ENDPOINT_VAR, "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
                ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf"),
            ],
        );
        assert!(s.unwrap().is_some());
        assert_eq!(
            w,
            ["ignoring OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\", \
              OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"http/json\": stemmon sends OTLP as \
              http/protobuf only"]
        );
    }

    #[test]
    fn the_service_name_comes_from_otel_service_name_then_the_resource_attributes() {
        let base = (ENDPOINT_VAR, "http://c:4318");
        let attributes = (
            RESOURCE_ATTRIBUTES_VAR,
            "deployment.environment.name=prod,service.name=from-attrs,team=ml%2Fvision",
        );
        let (s, _) = settings(None, &[base, attributes]);
        let s = s.unwrap().unwrap();
        assert_eq!(s.service_name.as_deref(), Some("from-attrs"));
        assert_eq!(
            s.resource,
            [
                ("deployment.environment.name".to_owned(), "prod".to_owned()),
                ("team".to_owned(), "ml/vision".to_owned())
            ]
        );
        let (s, _) = settings(None, &[base, attributes, (SERVICE_NAME_VAR, "trainer")]);
        assert_eq!(s.unwrap().unwrap().service_name.as_deref(), Some("trainer"));
        // A malformed list is left out whole, with a warning; OTLP stays on.
        let (s, w) = settings(None, &[base, (RESOURCE_ATTRIBUTES_VAR, "a=1,b")]);
        let s = s.unwrap().unwrap();
        assert!(s.resource.is_empty());
        assert_eq!(
            w,
            ["ignoring OTEL_RESOURCE_ATTRIBUTES: \"b\" is not `name=value`"]
        );
    }

    fn target(s: &Settings, signal: Signal) -> Option<&Target> {
        match signal {
            Signal::Metrics => s.metrics.as_ref(),
            Signal::Traces => s.traces.as_ref(),
        }
    }

    #[test]
    fn an_exporter_set_to_none_sends_no_such_signal_and_both_none_is_no_otlp() {
        let base = (ENDPOINT_VAR, "http://c:4318");
        let (s, w) = settings(None, &[base, ("OTEL_METRICS_EXPORTER", "none")]);
        let s = s.unwrap().unwrap();
        assert_eq!(urls(&s), (None, Some("http://c:4318/v1/traces")));
        assert!(w.is_empty(), "{w:?}");
        let (s, _) = settings(None, &[base, ("OTEL_TRACES_EXPORTER", " None ")]);
        assert_eq!(
            urls(&s.unwrap().unwrap()),
            (Some("http://c:4318/v1/metrics"), None)
        );
        let (s, w) = settings(
            None,
            &[
                base,
                ("OTEL_METRICS_EXPORTER", "none"),
                ("OTEL_TRACES_EXPORTER", "none"),
            ],
        );
        assert_eq!((s, w.len()), (Ok(None), 0));
        let (s, w) = settings(None, &[base, ("OTEL_TRACES_EXPORTER", "otlp,console")]);
        assert!(s.unwrap().unwrap().traces.is_some());
        assert_eq!(
            w,
            [
                "ignoring OTEL_TRACES_EXPORTER=\"otlp,console\" but otlp: stemmon exports traces \
              over otlp or not at all (none)"
            ]
        );
    }

    #[test]
    fn headers_timeouts_and_compression_per_signal_win_over_the_general_ones() {
        let (s, w) = settings(
            None,
            &[
                (ENDPOINT_VAR, "http://c:4318"),
                (HEADERS_VAR, "x-all=1"),
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-traces=2"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
                ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "250"),
                ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
                ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none"),
            ],
        );
        assert!(w.is_empty(), "{w:?}");
        let s = s.unwrap().unwrap();
        let metrics = target(&s, Signal::Metrics).unwrap();
        let traces = target(&s, Signal::Traces).unwrap();
        assert_eq!(metrics.headers, [("x-all".to_owned(), "1".to_owned())]);
        assert_eq!(traces.headers, [("x-traces".to_owned(), "2".to_owned())]);
        assert_eq!(metrics.timeout, Duration::from_millis(250));
        assert_eq!(traces.timeout, Duration::from_millis(1500));
        assert!(metrics.gzip && !traces.gzip);
        // Nothing set: the SDKs' defaults.
        let (s, _) = settings(None, &[(ENDPOINT_VAR, "http://c:4318")]);
        let s = s.unwrap().unwrap();
        let traces = target(&s, Signal::Traces).unwrap();
        assert_eq!((traces.timeout, traces.gzip), (DEFAULT_TIMEOUT, false));
    }

    #[test]
    fn a_bad_timeout_or_compression_is_warned_about_by_name_and_the_default_stands() {
        let (s, w) = settings(
            None,
            &[
                (ENDPOINT_VAR, "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2s"),
                ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0"),
                ("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "zstd"),
            ],
        );
        let s = s.unwrap().unwrap();
        assert_eq!(target(&s, Signal::Traces).unwrap().timeout, DEFAULT_TIMEOUT);
        assert!(!target(&s, Signal::Metrics).unwrap().gzip);
        assert_eq!(
            w,
            [
                "ignoring OTEL_EXPORTER_OTLP_TIMEOUT=\"2s\": expected a whole number of \
                 milliseconds, 1 or more",
                "ignoring OTEL_EXPORTER_OTLP_METRICS_COMPRESSION=\"zstd\": expected gzip or none",
                "ignoring OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=\"0\": expected a whole number of \
                 milliseconds, 1 or more",
            ]
        );
    }

    #[test]
    fn a_set_variable_stemmon_does_not_honour_is_named_in_one_warning() {
        let (s, w) = settings(
            None,
            &[
                (ENDPOINT_VAR, "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", "ca.pem"),
                ("OTEL_TRACES_SAMPLER", "always_off"),
                ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta"),
                ("OTEL_LOGS_EXPORTER", "none"),
            ],
        );
        assert!(s.unwrap().is_some());
        assert_eq!(
            w,
            [
                "ignoring OTEL_EXPORTER_OTLP_CERTIFICATE, OTEL_TRACES_SAMPLER, \
              OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: stemmon does not honour them"
            ]
        );
        // Without OTLP, nothing to warn about.
        let (_, w) = settings(None, &[("OTEL_TRACES_SAMPLER", "always_off")]);
        assert!(w.is_empty());
    }

    #[test]
    fn a_port_out_of_range_turns_otlp_off_with_one_warning_that_shows_no_password() {
        let (s, w) = settings(
            Some("http://c:4318"),
            &[(ENDPOINT_VAR, "http://alice:hunter2PASS@127.0.0.1:99999")],
        );
        assert_eq!(s, Ok(None));
        assert_eq!(
            w,
            ["OTLP is off: ignoring OTEL_EXPORTER_OTLP_ENDPOINT: \"http://***@127.0.0.1:99999\" \
              has port \"99999\", not a number from 1 to 65535"]
        );
        let error = settings(Some("http://u:hunter2PASS@c:0"), &[])
            .0
            .unwrap_err();
        assert!(!error.contains("hunter2"), "{error}");
    }
}
