//! Where a monitor's reports go besides its live lines, each destination a [`Sink`]:
//! the report file ([`ReportFile`]), and the metrics where a cluster's monitoring gathers
//! them: a Prometheus textfile for node_exporter, a Pushgateway (the book's
//! `prometheus.md`), an OpenTelemetry collector over OTLP (the book's `otlp.md`), or
//! several.
//!
//! The metrics' sinks are chosen once, at start ([`Exporter::from_config`]); the
//! features' choices are made in `chosen.rs`. They run on the sampler thread (or the
//! finishing one), never inside a stage; OTLP's requests go out on a thread of their
//! own. Each sink owns its failures: one is returned as text for the report's
//! `export_error` (`output_error` for the report file) and warned once on stderr, once
//! per sink.

#[cfg(feature = "otlp")]
pub(crate) mod otlp;
#[cfg(feature = "prometheus")]
mod prometheus;

mod chosen;
mod report_file;
pub(crate) mod sink;

use crate::config::Config;
use crate::error::Error;
use crate::report::Report;
pub(crate) use report_file::ReportFile;
pub(crate) use sink::Sink;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `text` with its first letter upper case: a field's meaning opening a help line or a
/// description. Used by the Prometheus and OTLP modules: a build with neither feature
/// has no use for it.
#[allow(dead_code)]
fn capital(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

/// Overrides `.prometheus_textfile(dir)` for every monitor of the process.
pub(crate) const TEXTFILE_VAR: &str = "STEMMON_PROMETHEUS_TEXTFILE_DIR";
/// Overrides `.pushgateway(url)` for every monitor of the process.
pub(crate) const PUSHGATEWAY_VAR: &str = "STEMMON_PUSHGATEWAY_URL";

/// The metrics exporter of one monitor: its sinks, chosen at start, in the order they
/// send (the textfile, the Pushgateway, OTLP).
#[derive(Debug)]
pub(crate) struct Exporter {
    sinks: Vec<Box<dyn Sink>>,
}

impl Exporter {
    /// The exporter that `config` and the environment ask for, `None` if neither asks.
    /// `host` and `labels` come from [`identity::collect`](crate::identity::collect).
    ///
    /// A non-empty `STEMMON_PROMETHEUS_TEXTFILE_DIR` / `STEMMON_PUSHGATEWAY_URL` wins
    /// over the builder, and so do the `OTEL_*` variables over `.otlp(endpoint)`. A bad
    /// builder value is an `Error::InvalidConfig`; a bad variable is ignored with a
    /// warning (a bad OTLP one turns OTLP off).
    pub(crate) fn from_config(
        config: &Config,
        host: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Option<Exporter>, Error> {
        Exporter::from_parts(config, host, labels, crate::env::text, &mut |message| {
            warn(message)
        })
    }

    fn from_parts(
        config: &Config,
        host: &str,
        labels: &BTreeMap<String, String>,
        env: impl Fn(&str) -> Option<String>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Option<Exporter>, Error> {
        let dir = match env(TEXTFILE_VAR) {
            Some(dir) => Some(PathBuf::from(dir)),
            None => match &config.prometheus_textfile {
                Some(dir) if dir.as_os_str().is_empty() => {
                    return Err(Error::InvalidConfig {
                        setting: "prometheus_textfile",
                        reason: "must name a directory".into(),
                    })
                }
                dir => dir.clone(),
            },
        };
        let url = match env(PUSHGATEWAY_VAR) {
            Some(url) => match check_url(&redact(&url), PUSHGATEWAY_URL) {
                Ok(()) => Some(url),
                Err(reason) => {
                    let shown = redact(&url);
                    warn(&format!("ignoring {PUSHGATEWAY_VAR}={shown:?}: {reason}"));
                    config.pushgateway.clone()
                }
            },
            None => config.pushgateway.clone(),
        };
        if let Some(url) = &url {
            check_url(&redact(url), PUSHGATEWAY_URL).map_err(|reason| Error::InvalidConfig {
                setting: "pushgateway",
                reason,
            })?;
        }
        let (dir, url) = chosen::prometheus_asked(dir, url, config, warn)?;
        let otlp = chosen::otlp(config, &env, warn)?;
        let mut sinks = chosen::prometheus(dir, url, host, labels);
        sinks.extend(otlp);
        if sinks.is_empty() {
            return Ok(None);
        }
        Ok(Some(Exporter { sinks }))
    }

    /// Sends `report` to every sink: writes the textfile, pushes to the Pushgateway and
    /// hands the OTLP metrics to their thread, whichever are configured; with `last`
    /// (the end of the run), OTLP's final metrics and trace are waited for, a bounded
    /// time. On failure returns what went wrong (every failure, joined by `; `); each
    /// sink warns on stderr about its first failure only.
    pub(crate) fn export(&mut self, report: &Report, last: bool) -> Result<(), String> {
        let errors: Vec<String> = self
            .sinks
            .iter_mut()
            .filter_map(|sink| sink.send(report, last).err())
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// The userinfo of `url` (before the last `@` of its authority), if it has one.
pub(crate) fn userinfo(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    Some(authority.rsplit_once('@')?.0)
}

/// `url` with its userinfo as `***`: `http://***@host:4318/path`.
pub(crate) fn redact(url: &str) -> String {
    match (url.split_once("://"), userinfo(url)) {
        (Some((scheme, rest)), Some(info)) => {
            format!("{scheme}://***{}", &rest[info.len()..])
        }
        _ => url.to_owned(),
    }
}

/// What an endpoint setting accepts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UrlRules {
    /// An `http://` URL of the kind, for the message.
    pub(crate) example: &'static str,
    /// The feature that lets it be `https://`.
    pub(crate) tls_feature: &'static str,
}

/// The Pushgateway's URL.
const PUSHGATEWAY_URL: UrlRules = UrlRules {
    example: "http://pushgateway:9091",
    tls_feature: "pushgateway-tls",
};

/// An `http://host[:port][/prefix]` URL (or `https://` with a TLS feature), without a
/// query or fragment.
pub(crate) fn check_url(url: &str, rules: UrlRules) -> Result<(), String> {
    let rest = if let Some(rest) = url.strip_prefix("http://") {
        rest
    } else if let Some(rest) = url.strip_prefix("https://") {
        if !chosen::TLS {
            return Err(format!(
                "{url:?} is https, which needs stemmon's `{}` feature",
                rules.tls_feature
            ));
        }
        rest
    } else {
        return Err(format!(
            "{url:?} is not an http:// URL (for example {})",
            rules.example
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{url:?} names no host"));
    }
    if url.contains(['?', '#']) || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{url:?} must be a plain base URL, without query, fragment or spaces"
        ));
    }
    Ok(())
}

pub(crate) use crate::warn::warn;

#[cfg(all(test, feature = "prometheus"))]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn build(
        config: &Config,
        vars: &[(&str, &str)],
    ) -> (Result<Option<Exporter>, String>, Vec<String>) {
        let vars: HashMap<_, _> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let labels = BTreeMap::from([("rank".to_owned(), "3".to_owned())]);
        let mut warnings = Vec::new();
        let result = Exporter::from_parts(
            config,
            "h1",
            &labels,
            |name| vars.get(name).cloned(),
            &mut |w| warnings.push(w.to_owned()),
        )
        .map_err(|e| e.to_string());
        (result, warnings)
    }

    /// The name and the target of each sink of `exporter`, in order.
    fn sinks(exporter: &Exporter) -> Vec<(&'static str, String)> {
        exporter
            .sinks
            .iter()
            .map(|sink| (sink.name(), sink.target()))
            .collect()
    }

    #[test]
    fn nothing_configured_means_no_exporter() {
        assert!(build(&Config::default(), &[]).0.unwrap().is_none());
    }

    #[test]
    fn the_environment_overrides_the_builder() {
        let config = Config {
            prometheus_textfile: Some("from-builder".into()),
            pushgateway: Some("http://builder:9091".into()),
            ..Config::default()
        };
        let (exporter, warnings) = build(
            &config,
            &[
                (TEXTFILE_VAR, "from-env"),
                (PUSHGATEWAY_VAR, "http://env:9091/"),
            ],
        );
        let exporter = exporter.unwrap().unwrap();
        let sinks = sinks(&exporter);
        assert_eq!(
            sinks.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
            ["textfile", "pushgateway"]
        );
        let file = PathBuf::from(&sinks[0].1);
        assert_eq!(file.parent().unwrap(), std::path::Path::new("from-env"));
        assert_eq!(
            file.file_name().unwrap().to_str().unwrap(),
            "stemmon-h1-rank=3.prom"
        );
        assert_eq!(
            sinks[1].1,
            "http://env:9091/metrics/job/stemmon/host/h1/rank/3"
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn a_bad_builder_url_fails_start_and_a_bad_variable_is_ignored() {
        let config = Config {
            pushgateway: Some("gw:9091".into()),
            ..Config::default()
        };
        let error = build(&config, &[]).0.unwrap_err();
        assert!(error.starts_with("invalid `pushgateway`: "), "{error}");
        assert!(error.contains("not an http:// URL"), "{error}");

        let (exporter, warnings) = build(&Config::default(), &[(PUSHGATEWAY_VAR, "ftp://x")]);
        assert!(exporter.unwrap().is_none());
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("STEMMON_PUSHGATEWAY_URL=\"ftp://x\""));

        for bad in ["http://", "http:///x", "http://h?x=1", "http://h b"] {
            assert!(check_url(bad, PUSHGATEWAY_URL).is_err(), "{bad}");
        }
        assert!(check_url("http://127.0.0.1:9091/prefix", PUSHGATEWAY_URL).is_ok());
    }

    #[test]
    fn an_empty_textfile_dir_fails_start() {
        let config = Config {
            prometheus_textfile: Some(PathBuf::new()),
            ..Config::default()
        };
        let error = build(&config, &[]).0.unwrap_err();
        assert_eq!(
            error,
            "invalid `prometheus_textfile`: must name a directory"
        );
    }

    #[test]
    fn an_unwritable_textfile_is_an_error_at_every_export_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("stemmon-export-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A directory where the file should be: the rename fails.
        let config = Config {
            prometheus_textfile: Some(dir.clone()),
            ..Config::default()
        };
        let mut exporter = build(&config, &[]).0.unwrap().unwrap();
        std::fs::create_dir(&sinks(&exporter)[0].1).unwrap();
        let error = exporter.export(&Report::default(), false).unwrap_err();
        assert!(error.starts_with("could not write "), "{error}");
        let again = exporter.export(&Report::default(), true).unwrap_err();
        assert_eq!(again, error);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_sinks_failure_is_in_the_error_in_order() {
        let dir = std::env::temp_dir().join(format!("stemmon-export-both-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Nothing listens there once the listener is gone: the push is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = Config {
            prometheus_textfile: Some(dir.clone()),
            pushgateway: Some(format!("http://127.0.0.1:{port}")),
            ..Config::default()
        };
        let mut exporter = build(&config, &[]).0.unwrap().unwrap();
        std::fs::create_dir(&sinks(&exporter)[0].1).unwrap();
        let error = exporter.export(&Report::default(), false).unwrap_err();
        let (textfile, push) = error.split_once("; ").unwrap();
        assert!(textfile.starts_with("could not write "), "{error}");
        assert!(
            push.starts_with(&format!("could not push to http://127.0.0.1:{port}/")),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(all(test, not(feature = "prometheus")))]
mod without_the_feature {
    use super::*;

    #[test]
    fn the_builder_is_refused_and_a_variable_is_warned_about() {
        let labels = BTreeMap::new();
        let config = Config {
            pushgateway: Some("http://gw:9091".into()),
            ..Config::default()
        };
        let error = Exporter::from_parts(&config, "h", &labels, |_| None, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "invalid `pushgateway`: this stemmon was built without its `prometheus` feature"
        );
        let mut warnings = Vec::new();
        let exporter = Exporter::from_parts(
            &Config::default(),
            "h",
            &labels,
            |name| (name == TEXTFILE_VAR).then(|| "dir".to_owned()),
            &mut |w| warnings.push(w.to_owned()),
        )
        .unwrap();
        assert!(exporter.is_none());
        assert_eq!(
            warnings,
            [
                "ignoring STEMMON_PROMETHEUS_TEXTFILE_DIR: this stemmon was built without its \
              `prometheus` feature"
            ]
        );
    }
}
