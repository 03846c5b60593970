//! `stemmon` as a local name for something else: the expansions name the runtime crate
//! with a leading `::`, so the local alias does not capture them.
#![deny(warnings)]

use std as stemmon;

#[::stemmon::monitored]
fn double(x: u32) -> Result<u32, stemmon::num::TryFromIntError> {
    u8::try_from(x * 2).map(u32::from)
}

#[::stemmon::monitor_main(log_interval = None)]
fn main() -> stemmon::process::ExitCode {
    match double(2) {
        Ok(4) => stemmon::process::ExitCode::SUCCESS,
        _ => stemmon::process::ExitCode::FAILURE,
    }
}
