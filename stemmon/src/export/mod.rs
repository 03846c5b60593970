//! Sends a report's metrics where a cluster's monitoring gathers them: a Prometheus
//! textfile for node_exporter, a Pushgateway (the book's `prometheus.md`), an OpenTelemetry collector over
//! OTLP (the book's `otlp.md`), or several.
//!
//! Runs on the sampler thread (or the finishing one), never inside a stage; OTLP's
//! requests go out on a thread of their own. A failure is returned as text for the
//! report's `export_error` and warned once on stderr, once per kind of export.
//!
//! The report file is a [`Sink`], [`ReportFile`]: a destination that sends each report
//! its own way and owns its failures.

#[cfg(feature = "otlp")]
pub(crate) mod otlp;
#[cfg(feature = "prometheus")]
mod prometheus;
mod report_file;
pub(crate) mod sink;

use crate::config::Config;
use crate::error::Error;
use crate::report::Report;
#[cfg(feature = "prometheus")]
use prometheus::Pushgateway;
pub(crate) use report_file::ReportFile;
pub(crate) use sink::Sink;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `text` with its first letter upper case: a field's meaning opening a help line or a
/// description.
#[cfg_attr(not(any(feature = "otlp", feature = "prometheus")), allow(dead_code))]
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

/// The metrics exporter of one monitor.
#[derive(Debug)]
pub(crate) struct Exporter {
    host: String,
    labels: BTreeMap<String, String>,
    /// The `.prom` file of this job's identity, which this process replaces.
    #[cfg(feature = "prometheus")]
    textfile: Option<PathBuf>,
    #[cfg(feature = "prometheus")]
    pushgateway: Option<Pushgateway>,
    #[cfg(feature = "otlp")]
    otlp: Option<otlp::Exporter>,
    warned: bool,
    warned_otlp: bool,
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
        #[cfg(not(feature = "prometheus"))]
        let (dir, url) = without_prometheus(dir, url, config, warn)?;
        #[cfg(feature = "otlp")]
        let otlp = otlp::Exporter::from_parts(config, &env, warn)?;
        #[cfg(feature = "otlp")]
        let none = dir.is_none() && url.is_none() && otlp.is_none();
        #[cfg(not(feature = "otlp"))]
        let none = dir.is_none() && url.is_none();
        if none {
            return Ok(None);
        }
        Ok(Some(Exporter {
            #[cfg(feature = "prometheus")]
            textfile: dir.map(|dir| prometheus::textfile_path(&dir, host, labels)),
            #[cfg(feature = "prometheus")]
            pushgateway: url.map(|url| Pushgateway::new(&url, host, labels)),
            #[cfg(feature = "otlp")]
            otlp,
            host: host.to_owned(),
            labels: labels.clone(),
            warned: false,
            warned_otlp: false,
        }))
    }

    /// Writes the textfile, pushes to the Pushgateway and hands the OTLP metrics to their
    /// thread, whichever are configured; with `last` (the end of the run), OTLP's final
    /// metrics and trace are waited for, a bounded time. On failure returns what went
    /// wrong (every failure, joined by `; `), warning on stderr the first time only for
    /// Prometheus and for OTLP each.
    #[cfg_attr(
        not(any(feature = "prometheus", feature = "otlp")),
        allow(unused_mut, unused_variables)
    )]
    pub(crate) fn export(&mut self, report: &Report, last: bool) -> Result<(), String> {
        let mut errors: Vec<String> = Vec::new();
        #[cfg(not(feature = "prometheus"))]
        let _ = (&self.host, &self.labels, &mut self.warned);
        #[cfg(feature = "prometheus")]
        if self.textfile.is_some() || self.pushgateway.is_some() {
            let text = prometheus::encode(report, &self.host, &self.labels);
            let mut failed = Vec::new();
            if let Some(path) = &self.textfile {
                failed.extend(prometheus::write_textfile(path, &text).err());
            }
            if let Some(gateway) = &self.pushgateway {
                failed.extend(gateway.push(&text).err());
            }
            if !failed.is_empty() && !std::mem::replace(&mut self.warned, true) {
                warn(&failed.join("; "));
            }
            errors.extend(failed);
        }
        #[cfg(feature = "otlp")]
        if let Some(otlp) = &self.otlp {
            if let Err(error) = otlp.export(report, last) {
                if !std::mem::replace(&mut self.warned_otlp, true) {
                    warn(&error);
                }
                errors.push(error);
            }
        }
        #[cfg(not(feature = "otlp"))]
        let _ = (last, &mut self.warned_otlp);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// The textfile this exporter replaces, if any.
    #[cfg(feature = "prometheus")]
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn textfile(&self) -> Option<&std::path::Path> {
        self.textfile.as_deref()
    }

    /// The Pushgateway URL (with the grouping key) this exporter pushes to, if any.
    #[cfg(feature = "prometheus")]
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn push_url(&self) -> Option<&str> {
        self.pushgateway.as_ref().map(Pushgateway::shown)
    }
}

/// Without the `prometheus` feature: a textfile or Pushgateway asked for by the builder
/// fails the start, one asked for by a variable is ignored with a warning.
#[cfg(not(feature = "prometheus"))]
fn without_prometheus(
    dir: Option<PathBuf>,
    url: Option<String>,
    config: &Config,
    warn: &mut dyn FnMut(&str),
) -> Result<(Option<PathBuf>, Option<String>), Error> {
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

/// Whether `https://` URLs can be sent to: ureq has rustls (either TLS feature).
const TLS: bool = cfg!(any(feature = "pushgateway-tls", feature = "otlp-tls"));

/// An `http://host[:port][/prefix]` URL (or `https://` with a TLS feature), without a
/// query or fragment.
pub(crate) fn check_url(url: &str, rules: UrlRules) -> Result<(), String> {
    let rest = if let Some(rest) = url.strip_prefix("http://") {
        rest
    } else if let Some(rest) = url.strip_prefix("https://") {
        if !TLS {
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
        let file = exporter.textfile().unwrap();
        assert_eq!(file.parent().unwrap(), std::path::Path::new("from-env"));
        assert_eq!(
            file.file_name().unwrap().to_str().unwrap(),
            "stemmon-h1-rank=3.prom"
        );
        assert_eq!(
            exporter.push_url().unwrap(),
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
    fn an_unwritable_textfile_is_an_error_once_warned_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("stemmon-export-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A directory where the file should be: the rename fails.
        let config = Config {
            prometheus_textfile: Some(dir.clone()),
            ..Config::default()
        };
        let mut exporter = build(&config, &[]).0.unwrap().unwrap();
        std::fs::create_dir(exporter.textfile().unwrap()).unwrap();
        let error = exporter.export(&Report::default(), false).unwrap_err();
        assert!(error.starts_with("could not write "), "{error}");
        assert!(exporter.warned);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
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
