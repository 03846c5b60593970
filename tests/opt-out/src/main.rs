//! Built with `stemmon = { default-features = false }`: `#[monitor_main]` and
//! `#[monitored]` must expand to the items exactly as written. It prints what it saw;
//! tests/opt_out.rs asserts on that, on the files left behind and on the log.

use std::num::ParseIntError;
use std::time::Duration;
use stemmon::{monitor_main, monitored};

// With the feature off, `stemmon::Alloc` is the inner allocator and nothing else.
#[global_allocator]
static ALLOC: stemmon::Alloc = stemmon::Alloc::system();

#[monitored]
fn parse(text: &str) -> Result<u32, ParseIntError> {
    text.trim().parse()
}

#[monitored("fit")]
fn fit(data: &[u32]) -> u32 {
    data.iter().sum()
}

#[monitored]
async fn later(value: u32) -> u32 {
    value + 1
}

/// Polls a future that never waits, without a runtime.
fn ready<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => unreachable!("`later` never waits"),
    }
}

/// The explicit API still compiles with the feature off.
#[allow(dead_code)]
fn explicit_api() -> Result<stemmon::Report, stemmon::Error> {
    let monitor = stemmon::Monitor::builder().log_interval(None).start()?;
    drop(monitor.stage("explicit")?);
    Ok(monitor.finish())
}

fn thread_names() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return vec!["<no /proc>".to_owned()];
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[monitor_main(
    output = "opt-out-report.json",
    sample_interval = 0.01,
    log_interval = 0.01
)]
fn main() -> Result<(), ParseIntError> {
    println!("threads at start: {}", thread_names().join(","));
    println!("parse 42: {:?}", parse(" 42 "));
    println!("parse x: {}", parse("x").is_err());
    println!("fit: {}", fit(&[1, 2, 3]));
    println!("later: {}", ready(later(6)));
    // Long enough for a 10 ms sampler and log, had the attributes started one.
    std::thread::sleep(Duration::from_millis(100));
    println!("threads at end: {}", thread_names().join(","));
    parse("7")?;
    Ok(())
}
