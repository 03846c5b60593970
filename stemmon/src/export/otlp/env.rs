//! Where OTLP goes and what it says about the run, from the OpenTelemetry SDK's standard
//! variables (the `OTEL_*` environment specification) and the builder's `.otlp(endpoint)`.
//!
//! The environment is read through the closure passed in: no variable is read here.

use crate::error::Error;

/// The base endpoint: `/v1/metrics` and `/v1/traces` are appended to its path.
pub(crate) const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The metrics endpoint, used as it is.
pub(crate) const METRICS_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// The traces endpoint, used as it is.
pub(crate) const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// Headers of every request: `k=v,k2=v2`, percent-encoded.
pub(crate) const HEADERS_VAR: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// The service's name: the resource's `service.name`.
pub(crate) const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
/// More resource attributes: `k=v,k2=v2`, percent-encoded.
pub(crate) const RESOURCE_ATTRIBUTES_VAR: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// `true` turns OTLP off.
pub(crate) const SDK_DISABLED_VAR: &str = "OTEL_SDK_DISABLED";
/// The protocols asked for; stemmon speaks `http/protobuf` only.
const PROTOCOL_VARS: [&str; 3] = [
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
];

/// Where OTLP goes and what the resource adds to the report's own identity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Where metrics are POSTed; `None`: no metrics.
    pub(crate) metrics_url: Option<String>,
    /// Where the trace is POSTed; `None`: no trace.
    pub(crate) traces_url: Option<String>,
    /// Headers of every request (an API key, a tenant), decoded.
    pub(crate) headers: Vec<(String, String)>,
    /// `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`.
    pub(crate) service_name: Option<String>,
    /// `OTEL_RESOURCE_ATTRIBUTES` without `service.name`, decoded, in order.
    pub(crate) resource: Vec<(String, String)>,
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
    /// for; `None` when no endpoint is set or `OTEL_SDK_DISABLED=true`.
    ///
    /// Precedence, lowest first: the builder's endpoint, `OTEL_EXPORTER_OTLP_ENDPOINT`,
    /// the per-signal variable. A bad builder endpoint is an `Error::InvalidConfig`; a bad
    /// variable (endpoint or headers) is one warning, and OTLP is then off. A protocol
    /// other than `http/protobuf` is warned about once and ignored; a bad
    /// `OTEL_RESOURCE_ATTRIBUTES` is warned about and left out, as the specification says.
    pub(crate) fn from_parts(
        builder: Option<&str>,
        disable: Disable,
        env: &dyn Fn(&str) -> Option<String>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Option<Settings>, Error> {
        if let Some(endpoint) = builder {
            check_url(endpoint).map_err(|reason| Error::InvalidConfig {
                setting: "otlp",
                reason,
            })?;
        }
        if disable == Disable::Honour && disabled(env, warn) {
            return Ok(None);
        }
        let base = match env(ENDPOINT_VAR) {
            Some(url) => match check_url(&url) {
                Ok(()) => Some(url),
                Err(reason) => return off(warn, ENDPOINT_VAR, &url, &reason),
            },
            None => builder.map(str::to_owned),
        };
        let mut urls = [None, None];
        for (slot, (variable, path)) in urls.iter_mut().zip([
            (METRICS_ENDPOINT_VAR, "v1/metrics"),
            (TRACES_ENDPOINT_VAR, "v1/traces"),
        ]) {
            *slot = match env(variable) {
                Some(url) => match check_url(&url) {
                    Ok(()) => Some(url),
                    Err(reason) => return off(warn, variable, &url, &reason),
                },
                None => base.as_deref().map(|base| signal_url(base, path)),
            };
        }
        let [metrics_url, traces_url] = urls;
        if metrics_url.is_none() && traces_url.is_none() {
            return Ok(None);
        }
        let headers = match env(HEADERS_VAR).map(|text| headers(&text)) {
            None => Vec::new(),
            Some(Ok(headers)) => headers,
            Some(Err(reason)) => {
                warn(&format!(
                    "OTLP is off: {HEADERS_VAR} is not `name=value,...`: {reason}"
                ));
                return Ok(None);
            }
        };
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
            metrics_url,
            traces_url,
            headers,
            service_name,
            resource,
        }))
    }
}

/// One warning for a bad variable; OTLP is then off.
fn off(
    warn: &mut dyn FnMut(&str),
    variable: &str,
    value: &str,
    reason: &str,
) -> Result<Option<Settings>, Error> {
    warn(&format!(
        "OTLP is off: ignoring {variable}={value:?}: {reason}"
    ));
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

/// The base endpoint with the signal's path appended to its own path:
/// `http://c:4318/prefix` + `v1/traces` = `http://c:4318/prefix/v1/traces`.
pub(crate) fn signal_url(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// What an OTLP endpoint accepts.
const OTLP_URL: crate::export::UrlRules = crate::export::UrlRules {
    example: "http://collector:4318",
    tls_feature: "otlp-tls",
};

/// An `http://host[:port][/path]` URL (or `https://` with the `otlp-tls` feature),
/// without a query or fragment.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    crate::export::check_url(url, OTLP_URL)
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
            settings.metrics_url.as_deref(),
            settings.traces_url.as_deref(),
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
                w[0].starts_with(&format!("OTLP is off: ignoring {variable}={value:?}: ")),
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
            let error = check_url("https://api.honeycomb.io").unwrap_err();
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
        assert_eq!(
            s.unwrap().unwrap().headers,
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
}
