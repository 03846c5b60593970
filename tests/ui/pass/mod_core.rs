//! A crate with its own `mod core` and `mod std`: the expansions reach std as `::core`
//! and the runtime as `::stemmon`, so these cannot capture them.
#![deny(warnings)]
#![allow(dead_code)]

mod core {}
mod std {}

#[stemmon::monitored]
fn parse(text: &str) -> Result<u32, ::std::num::ParseIntError> {
    text.parse()
}

#[stemmon::monitored]
async fn later() -> Option<u8> {
    Some(1)
}

#[stemmon::monitor_main(sample_interval = 0.5, log_interval = None, max_samples = 2)]
fn main() -> Result<(), ::std::num::ParseIntError> {
    let _ = later();
    parse("1").map(drop)
}
