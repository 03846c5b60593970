//! The runtime's one warning writer: every warning of the monitor's own (a bad variable,
//! a failed write, a failed export) is one line on stderr, `[stemmon] warning: ...`.

use std::io::Write;

/// Writes `message` as one warning line on stderr; a stderr that cannot be written is
/// ignored (the program's own output is never the monitor's failure).
pub(crate) fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "[stemmon] warning: {message}");
}
