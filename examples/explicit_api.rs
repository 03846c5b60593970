//! The same kind of report as the quickstart, without attributes: a `Monitor` started
//! by hand, with stages opened by hand.
//!
//! `cargo run -p stemmon-examples --example explicit_api` prints live lines and writes
//! `target/stemmon/explicit_api.json`.

use std::time::Duration;
use stemmon::Monitor;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let monitor = Monitor::builder()
        .sample_interval(Duration::from_millis(100))
        .log_interval(Some(Duration::from_millis(500)))
        .output("target/stemmon/explicit_api.json")
        .start()?;

    let data = {
        let _load = monitor.stage("load")?;
        // `black_box`: an optimised build keeps the data, not just what it computes.
        let data: Vec<f64> =
            std::hint::black_box((0..16_000_000).map(|i| f64::from(i % 1000)).collect());
        std::thread::sleep(Duration::from_millis(300));
        data
    };
    for epoch in 0..3 {
        let _train = monitor.stage("train")?;
        let _step = monitor.stage("step")?;
        let scaled: Vec<f64> = data.iter().map(|x| x * f64::from(epoch + 1)).collect();
        std::thread::sleep(Duration::from_millis(200));
        std::hint::black_box(scaled);
    }

    let report = monitor.finish();
    for stage in &report.stages {
        println!(
            "{:<12} calls={} wall={:.2}s peak parent RSS={} MiB",
            stage.path,
            stage.calls,
            stage.wall_seconds,
            stage.peaks.peak_parent_rss_bytes.unwrap_or(0) >> 20
        );
    }
    Ok(())
}
