//! The clock that times every stage call, one for the process.

use std::sync::OnceLock;

/// The process's call clock, made (and calibrated) at the first use.
pub(crate) fn shared() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}
