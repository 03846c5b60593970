//! An OTLP endpoint, parsed once: the URL that is sent to, and the one shown in every
//! message, warning and report, whose userinfo (`user:password@`) reads `***`.
//!
//! Credentials belong in `OTEL_EXPORTER_OTLP_HEADERS`; a URL's userinfo is still sent
//! (as HTTP basic authentication), but it never reaches a message.

use std::fmt;

/// What an OTLP endpoint accepts.
const OTLP_URL: crate::export::UrlRules = crate::export::UrlRules {
    example: "http://collector:4318",
    tls_feature: "otlp-tls",
};

/// A checked endpoint: `http://[userinfo@]host[:port][/path]`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The URL as given, userinfo included: what is sent to.
    url: String,
    /// The URL with its userinfo as `***`: what is shown.
    shown: String,
}

impl Endpoint {
    /// Parses `url`: `http://` (or `https://` with the `otlp-tls` feature), a host, a
    /// port from 1 to 65535 if one is given, no query or fragment. The error names the
    /// URL as shown, never its userinfo.
    pub(crate) fn parse(url: &str) -> Result<Endpoint, String> {
        let shown = redact(url);
        crate::export::check_url(&shown, OTLP_URL)?;
        if url.contains(['?', '#']) || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{shown:?} must be a plain base URL, without query, fragment or spaces"
            ));
        }
        let (_, rest) = url.split_once("://").unwrap_or(("", url));
        let authority = rest.split('/').next().unwrap_or_default();
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let (host, port) = match host_port.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, "")) => (host, None),
                Some((host, port)) => match port.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(format!("{shown:?} has a bad IPv6 host")),
                },
                None => return Err(format!("{shown:?} has a bad IPv6 host")),
            },
            None => match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            },
        };
        let v6 = host_port.starts_with('[');
        if host.is_empty() || host.contains(['[', ']', '@']) || (!v6 && host.contains(':')) {
            return Err(format!("{shown:?} names no valid host"));
        }
        if let Some(port) = port {
            let valid = port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u16>().is_ok_and(|p| p != 0);
            if !valid {
                return Err(format!(
                    "{shown:?} has port {port:?}, not a number from 1 to 65535"
                ));
            }
        }
        Ok(Endpoint {
            url: url.to_owned(),
            shown,
        })
    }

    /// The base endpoint with the signal's path appended to its own path:
    /// `http://c:4318/prefix` + `v1/traces` = `http://c:4318/prefix/v1/traces`.
    pub(crate) fn join(&self, path: &str) -> Endpoint {
        Endpoint {
            url: format!("{}/{path}", self.url.trim_end_matches('/')),
            shown: format!("{}/{path}", self.shown.trim_end_matches('/')),
        }
    }

    /// The URL to send to.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The URL as every message shows it.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// `message` with the userinfo, should a library have quoted it, as `***`.
    pub(crate) fn scrub(&self, message: &str) -> String {
        match userinfo(&self.url) {
            Some(secret) if !secret.is_empty() => message.replace(secret, "***"),
            _ => message.to_owned(),
        }
    }
}

/// Only the shown form, so that no `{:?}` of a setting prints a secret.
impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Endpoint({:?})", self.shown)
    }
}

use crate::export::{redact, userinfo};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_shown_as_stars_and_scrubbed_from_messages() {
        let e = Endpoint::parse("http://alice:hunter2PASS@127.0.0.1:4318/otlp").unwrap();
        assert_eq!(e.url(), "http://alice:hunter2PASS@127.0.0.1:4318/otlp");
        assert_eq!(e.shown(), "http://***@127.0.0.1:4318/otlp");
        assert_eq!(
            e.join("v1/traces").shown(),
            "http://***@127.0.0.1:4318/otlp/v1/traces"
        );
        assert_eq!(
            e.scrub("failed for alice:hunter2PASS@x"),
            "failed for ***@x"
        );
        assert!(!format!("{e:?}").contains("hunter2"));
        // A `@` in the path is not userinfo.
        assert_eq!(redact("http://h:1/a@b"), "http://h:1/a@b");
        let error = Endpoint::parse("http://u:hunter2PASS@h:99999").unwrap_err();
        assert!(!error.contains("hunter2"), "{error}");
        assert!(error.contains("\"http://***@h:99999\""), "{error}");
    }

    #[test]
    fn a_port_out_of_range_or_a_bad_host_does_not_parse() {
        for bad in [
            "http://127.0.0.1:99999",
            "http://127.0.0.1:0",
            "http://h:",
            "http://h:12ab",
            "http://h:+80",
            "http://[::1",
            "http://[::1]x",
            "http://a:b:c",
            "http://u@",
            "http://u:p w@h",
            "http://u:p?@h",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
        for good in [
            "http://127.0.0.1:65535",
            "http://[::1]:4318/x",
            "http://[::1]",
            "http://collector",
            "http://u@h:1",
        ] {
            assert!(Endpoint::parse(good).is_ok(), "{good}");
        }
    }
}
