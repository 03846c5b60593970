//! `#[monitor_main]` on fns other than the entry point: `-> impl Termination`, `-> !`
//! shapes, a `pub` fn with docs, and `log_interval = None`.
#![deny(warnings)]

use std::process::{ExitCode, Termination};

/// Runs with a monitor of its own.
#[stemmon::monitor_main(log_interval = None)]
pub fn run() -> impl Termination {
    ExitCode::SUCCESS
}

#[stemmon::monitor_main(log_interval = None)]
#[allow(unreachable_code)]
fn stop() -> ! {
    std::process::exit(0)
}

fn main() {
    let _ = run();
    stop()
}
