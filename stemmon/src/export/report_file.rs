//! The report file, a sink: every report rewritten whole through [`Output`], the final
//! one synced to disk. Its failures are the report's `output_error`; it says what became
//! of them on stderr: the first failure once, and at the end what became of the final
//! report after failures.

use super::sink::{Sink, Warned};
use crate::output::Output;
use crate::report::Report;
use std::path::Path;

/// The report file of one monitor.
#[derive(Debug)]
pub(crate) struct ReportFile {
    /// Where the report goes, resolved once at start (or why it cannot go anywhere).
    output: Result<Output, String>,
    /// The first failed write's message.
    first: Option<String>,
    /// How many writes failed.
    failed_writes: u64,
    /// Whether the first failure was warned about.
    warned: Warned,
}

impl ReportFile {
    /// Resolves the report's path now (anchoring a relative one at the current directory
    /// and removing temporary files that dead writers left beside it).
    pub(crate) fn resolve(path: &Path) -> ReportFile {
        ReportFile {
            output: Output::resolve(path)
                .map_err(|e| format!("could not write the report to {}: {e}", path.display())),
            first: None,
            failed_writes: 0,
            warned: Warned::default(),
        }
    }

    /// Writes `report` pretty-printed, or compact where the disk is full; synced with
    /// `durable`.
    fn write(&self, report: &Report, durable: bool) -> Result<(), String> {
        let output = match &self.output {
            Err(message) => return Err(message.clone()),
            Ok(output) => output,
        };
        let failed = |error: std::io::Error| {
            format!(
                "could not write the report to {}: {error}",
                output.path().display()
            )
        };
        let pretty = serde_json::to_vec_pretty(report).map_err(|e| failed(e.into()))?;
        match output.write(&pretty, durable) {
            // Out of space: the replacement needs room for both copies at once, so a
            // report over half of what is free could never land. The same report
            // without indentation is about a third smaller.
            Err(error) if is_out_of_space(&error) => {
                let compact = serde_json::to_vec(report).map_err(|e| failed(e.into()))?;
                output.write(&compact, durable).map_err(failed)
            }
            written => written.map_err(failed),
        }
    }

    /// Keeps a failed write, and says what happened: the first failure once, and at the
    /// end (`last`) what became of the final report after failures (it landed, or not:
    /// for the reason already warned, or a new one).
    fn tell(&mut self, written: &Result<(), String>, last: bool) {
        let first = self.first.clone();
        if let Err(message) = written {
            self.failed_writes += 1;
            self.first.get_or_insert_with(|| message.clone());
        }
        let failed = self.failed_writes;
        let s = |n: u64| if n == 1 { "" } else { "s" };
        match (written, last) {
            (Err(message), false) => {
                let _ = self.warned.once(Err(message.clone()));
            }
            (Err(message), true) if first.as_ref() == Some(message) => {
                crate::warn::warn(&format!(
                    "the final report was not written either, for the same reason \
                     ({failed} failed write{} in all)",
                    s(failed)
                ));
            }
            (Err(message), true) => {
                crate::warn::warn(&format!("the final report was not written: {message}"));
            }
            (Ok(()), true) if failed > 0 => {
                crate::warn::warn(&format!(
                    "the final report was written to {}; {failed} earlier write{} failed \
                     (the first is its output_error)",
                    self.target(),
                    s(failed)
                ));
            }
            (Ok(()), _) => {}
        }
    }
}

impl Sink for ReportFile {
    fn name(&self) -> &'static str {
        "report file"
    }

    fn target(&self) -> String {
        match &self.output {
            Ok(output) => output.path().display().to_string(),
            Err(_) => "its file".to_owned(),
        }
    }

    fn send(&mut self, report: &Report, last: bool) -> Result<(), String> {
        let written = self.write(report, last);
        self.tell(&written, last);
        written
    }
}

/// Whether `error` says the disk (or the user's quota) is full.
fn is_out_of_space(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::StorageFull || error.raw_os_error() == Some(libc_edquot())
}

/// `EDQUOT`: the quota's "disk full".
fn libc_edquot() -> i32 {
    #[cfg(unix)]
    {
        libc::EDQUOT
    }
    #[cfg(not(unix))]
    {
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_is_returned_each_time_warned_once_and_counted() {
        let dir = std::env::temp_dir().join(format!("stemmon-report-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("report.json");
        let mut file = ReportFile::resolve(&path);
        assert_eq!(file.name(), "report file");
        assert_eq!(file.target(), path.display().to_string());
        file.send(&Report::default(), false).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().starts_with('{'));
        // A directory where the file should be: the rename fails.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let error = file.send(&Report::default(), false).unwrap_err();
        let expected = format!("could not write the report to {}: ", path.display());
        assert!(error.starts_with(&expected), "{error}");
        assert!(file.warned.warned());
        assert_eq!(file.send(&Report::default(), false).unwrap_err(), error);
        assert_eq!((file.failed_writes, file.first.as_ref()), (2, Some(&error)));
        // The final report lands after all: the first failure stays the one kept.
        std::fs::remove_dir(&path).unwrap();
        file.send(&Report::default(), true).unwrap();
        assert_eq!((file.failed_writes, file.first.as_ref()), (2, Some(&error)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_that_cannot_be_resolved_fails_every_write_with_its_reason() {
        let mut file = ReportFile::resolve(Path::new(""));
        let error = file.send(&Report::default(), true).unwrap_err();
        assert!(
            error.starts_with("could not write the report to : "),
            "{error}"
        );
        assert_eq!(file.target(), "its file");
    }
}
