//! `#[monitor_main]` written below `#[tokio::main]` also works: tokio expands first and
//! leaves a sync `fn main` that builds the runtime, which the monitor then wraps.
#![deny(warnings)]

#[tokio::main(flavor = "current_thread")]
#[stemmon::monitor_main(log_interval = None)]
async fn main() -> Result<(), std::num::ParseIntError> {
    tokio::task::yield_now().await;
    "1".parse::<u8>().map(drop)
}
