//! Sends a report's metrics where a cluster's monitoring gathers them (SPEC §10): a
//! Prometheus textfile for node_exporter, a Pushgateway, or both.
//!
//! Runs on the sampler thread (or the finishing one), never inside a stage. A failure
//! is returned as text for the report's `export_error` and warned once on stderr.

mod prometheus;

use crate::config::Config;
use crate::error::Error;
use crate::report::Report;
use prometheus::Pushgateway;
use std::collections::BTreeMap;
use std::path::PathBuf;

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
    textfile: Option<PathBuf>,
    pushgateway: Option<Pushgateway>,
    warned: bool,
}

impl Exporter {
    /// The exporter that `config` and the environment ask for, `None` if neither asks.
    /// `host` and `labels` come from [`identity::collect`](crate::identity::collect).
    ///
    /// A non-empty `STEMMON_PROMETHEUS_TEXTFILE_DIR` / `STEMMON_PUSHGATEWAY_URL` wins
    /// over the builder. A bad builder value is an `Error::InvalidConfig`; a bad variable
    /// is ignored with a warning.
    pub(crate) fn from_config(
        config: &Config,
        host: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Option<Exporter>, Error> {
        Exporter::from_parts(
            config,
            host,
            labels,
            |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()),
            &mut |message| warn(message),
        )
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
            Some(url) => match check_url(&url) {
                Ok(()) => Some(url),
                Err(reason) => {
                    warn(&format!("ignoring {PUSHGATEWAY_VAR}={url:?}: {reason}"));
                    config.pushgateway.clone()
                }
            },
            None => config.pushgateway.clone(),
        };
        if let Some(url) = &url {
            check_url(url).map_err(|reason| Error::InvalidConfig {
                setting: "pushgateway",
                reason,
            })?;
        }
        if dir.is_none() && url.is_none() {
            return Ok(None);
        }
        Ok(Some(Exporter {
            textfile: dir.map(|dir| prometheus::textfile_path(&dir, host, labels)),
            pushgateway: url.map(|url| Pushgateway::new(&url, host, labels)),
            host: host.to_owned(),
            labels: labels.clone(),
            warned: false,
        }))
    }

    /// Writes the textfile and pushes to the Pushgateway, whichever are configured. On
    /// failure returns what went wrong (both, if both failed), warning on stderr the
    /// first time only.
    pub(crate) fn export(&mut self, report: &Report) -> Result<(), String> {
        let text = prometheus::encode(report, &self.host, &self.labels);
        let mut errors = Vec::new();
        if let Some(path) = &self.textfile {
            errors.extend(prometheus::write_textfile(path, &text).err());
        }
        if let Some(gateway) = &self.pushgateway {
            errors.extend(gateway.push(&text).err());
        }
        if errors.is_empty() {
            return Ok(());
        }
        let message = errors.join("; ");
        if !std::mem::replace(&mut self.warned, true) {
            warn(&message);
        }
        Err(message)
    }

    /// The textfile this exporter replaces, if any.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn textfile(&self) -> Option<&std::path::Path> {
        self.textfile.as_deref()
    }

    /// The Pushgateway URL (with the grouping key) this exporter pushes to, if any.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn push_url(&self) -> Option<&str> {
        self.pushgateway.as_ref().map(Pushgateway::url)
    }
}

/// An `http://host[:port][/prefix]` URL (or `https://` with the `pushgateway-tls`
/// feature), without a query or fragment.
fn check_url(url: &str) -> Result<(), String> {
    let rest = if let Some(rest) = url.strip_prefix("http://") {
        rest
    } else if let Some(rest) = url.strip_prefix("https://") {
        if !cfg!(feature = "pushgateway-tls") {
            return Err(format!(
                "{url:?} is https, which needs stemmon's `pushgateway-tls` feature"
            ));
        }
        rest
    } else {
        return Err(format!(
            "{url:?} is not an http:// URL (for example http://pushgateway:9091)"
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

fn warn(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "[stemmon] warning: {message}");
}

#[cfg(test)]
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
            assert!(check_url(bad).is_err(), "{bad}");
        }
        assert!(check_url("http://127.0.0.1:9091/prefix").is_ok());
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
        let error = exporter.export(&Report::default()).unwrap_err();
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
