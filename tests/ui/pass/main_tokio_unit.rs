//! `#[monitor_main]` above a current-thread `#[tokio::main]` returning `()`.
#![deny(warnings)]

#[stemmon::monitor_main(log_interval = None)]
#[tokio::main(flavor = "current_thread")]
async fn main() {
    tokio::task::yield_now().await;
}
