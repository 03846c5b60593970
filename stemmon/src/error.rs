use std::fmt;
use std::io;

/// Everything that can go wrong when starting or driving a [`Monitor`](crate::Monitor).
///
/// Failures of the monitor's own work after it started (a `/proc` read, a report write)
/// are not errors: they land in the report's `sampling_error` / `output_error`.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A builder value is out of range, for example a zero `sample_interval`.
    InvalidConfig {
        /// The builder method whose value was rejected.
        setting: &'static str,
        /// Why it was rejected and what is accepted.
        reason: String,
    },
    /// `start()` was called on a thread that already has an active monitor.
    AlreadyActive,
    /// A stage name was empty.
    EmptyStageName,
    /// The sampler thread could not be started.
    Spawn(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidConfig { setting, reason } => write!(f, "invalid `{setting}`: {reason}"),
            Error::AlreadyActive => f.write_str(
                "a monitor is already active on this thread; use `monitor.stage(..)` for nested \
                 stages, or finish the running monitor before starting another",
            ),
            Error::EmptyStageName => f.write_str("a stage name must not be empty"),
            Error::Spawn(e) => write!(f, "could not start the `stemmon-sampler` thread: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Spawn(e) => Some(e),
            _ => None,
        }
    }
}
