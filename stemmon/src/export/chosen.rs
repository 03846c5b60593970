//! Which sinks this build can make: the features' choices, gathered here so that the
//! exporter itself names none. A feature compiled out makes no sink: a setting of the
//! builder that asks for it fails the start, a variable that asks for it is ignored with
//! a warning.

use super::sink::Sink;
use crate::config::Config;
use crate::error::Error;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Whether `https://` URLs can be sent to: ureq has rustls (either TLS feature).
pub(crate) const TLS: bool = cfg!(any(feature = "pushgateway-tls", feature = "otlp-tls"));

/// The textfile directory and Pushgateway URL this build can serve: with the
/// `prometheus` feature, those asked for.
#[cfg(feature = "prometheus")]
pub(crate) fn prometheus_asked(
    dir: Option<PathBuf>,
    url: Option<String>,
    _config: &Config,
    _warn: &mut dyn FnMut(&str),
) -> Result<(Option<PathBuf>, Option<String>), Error> {
    Ok((dir, url))
}

/// Without the `prometheus` feature: a textfile or Pushgateway asked for by the builder
/// fails the start, one asked for by a variable is ignored with a warning.
#[cfg(not(feature = "prometheus"))]
pub(crate) fn prometheus_asked(
    dir: Option<PathBuf>,
    url: Option<String>,
    config: &Config,
    warn: &mut dyn FnMut(&str),
) -> Result<(Option<PathBuf>, Option<String>), Error> {
    use super::{PUSHGATEWAY_VAR, TEXTFILE_VAR};
    const WHY: &str = "this stemmon was built without its `prometheus` feature";
    for (asked, setting, var, by_builder) in [
        (
            dir.is_some(),
            "prometheus_textfile",
            TEXTFILE_VAR,
            config.prometheus_textfile.is_some(),
        ),
        (
            url.is_some(),
            "pushgateway",
            PUSHGATEWAY_VAR,
            config.pushgateway.is_some(),
        ),
    ] {
        if asked && by_builder {
            return Err(Error::InvalidConfig {
                setting,
                reason: WHY.into(),
            });
        }
        if asked {
            warn(&format!("ignoring {var}: {WHY}"));
        }
    }
    Ok((None, None))
}

/// The sinks of the textfile in `dir` and the Pushgateway at `url` (as
/// [`prometheus_asked`] left them), in that order.
#[cfg(feature = "prometheus")]
pub(crate) fn prometheus(
    dir: Option<PathBuf>,
    url: Option<String>,
    host: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<Box<dyn Sink>> {
    super::prometheus::sinks(dir, url, host, labels)
}

/// Without the `prometheus` feature: none ([`prometheus_asked`] left nothing to make).
#[cfg(not(feature = "prometheus"))]
pub(crate) fn prometheus(
    _dir: Option<PathBuf>,
    _url: Option<String>,
    _host: &str,
    _labels: &BTreeMap<String, String>,
) -> Vec<Box<dyn Sink>> {
    Vec::new()
}

/// The OTLP sink that `config` and the environment ask for, if any.
#[cfg(feature = "otlp")]
pub(crate) fn otlp(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
    warn: &mut dyn FnMut(&str),
) -> Result<Option<Box<dyn Sink>>, Error> {
    super::otlp::sink(config, env, warn)
}

/// Without the `otlp` feature: none, whatever is asked for.
#[cfg(not(feature = "otlp"))]
pub(crate) fn otlp(
    _config: &Config,
    _env: &dyn Fn(&str) -> Option<String>,
    _warn: &mut dyn FnMut(&str),
) -> Result<Option<Box<dyn Sink>>, Error> {
    Ok(None)
}
