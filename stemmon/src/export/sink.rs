//! One destination of a monitor's reports: the Prometheus textfile, the Pushgateway,
//! OTLP, the report file. The set is chosen once, at start; each sink sends in its own
//! way and owns its failures: it returns each one as text and warns on stderr about the
//! first one only.

use crate::report::Report;

/// A destination of a monitor's reports, chosen at start.
pub(crate) trait Sink: Send + std::fmt::Debug {
    /// What this sink is, in a word: `textfile`, `pushgateway`, `otlp`, `report file`.
    #[cfg_attr(not(test), allow(dead_code))]
    fn name(&self) -> &'static str;

    /// Where this sink sends, as its messages show it: a path, or a URL with its
    /// userinfo as `***`.
    fn target(&self) -> String;

    /// Sends `report`; `last` says it is the run's final one (the report file is then
    /// synced to disk, OTLP's trace goes too and is waited for, a bounded time). On
    /// failure returns what went wrong, having warned on stderr if this sink had not
    /// warned before.
    fn send(&mut self, report: &Report, last: bool) -> Result<(), String>;
}

/// Whether a sink has warned about a failure: its first failure is one warning line on
/// stderr, the later ones are only returned.
#[derive(Debug, Default)]
pub(crate) struct Warned(bool);

impl Warned {
    /// `result`, warning about its failure first if none was warned about before.
    pub(crate) fn once(&mut self, result: Result<(), String>) -> Result<(), String> {
        if let Err(message) = &result {
            if !std::mem::replace(&mut self.0, true) {
                crate::warn::warn(message);
            }
        }
        result
    }

    /// Whether a failure was warned about.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn warned(&self) -> bool {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_warned_about_and_every_result_is_returned() {
        let mut warned = Warned::default();
        assert_eq!(warned.once(Ok(())), Ok(()));
        assert!(!warned.warned());
        assert_eq!(warned.once(Err("first".into())), Err("first".into()));
        assert!(warned.warned());
        assert_eq!(warned.once(Err("second".into())), Err("second".into()));
        assert_eq!(warned.once(Ok(())), Ok(()));
        assert!(warned.warned());
    }
}
