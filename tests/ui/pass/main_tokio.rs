//! `#[monitor_main]` above `#[tokio::main]` with `?` in an async body.
#![deny(warnings)]

use stemmon::{monitor_main, monitored};

#[monitored]
async fn read(text: &str) -> Result<u32, std::num::ParseIntError> {
    tokio::task::yield_now().await;
    text.parse()
}

#[monitor_main(log_interval = None, sample_interval = 1)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let value = read("41").await?;
    assert_eq!(value + 1, 42);
    Ok(())
}
