//! A tokio pipeline instrumented with `tracing` alone:
//! `cargo run -p stemmon-examples --example tracing --features tracing`.
//!
//! `stemmon::TracingLayer` turns every span into a stage: `#[instrument]` functions and
//! the span each task runs in. The task spans' parent is `pipeline`, so on whichever
//! worker they run they nest as `pipeline/part`, and the functions they call as
//! `pipeline/part/load` and `pipeline/part/checksum`. The report (also written to
//! `target/stemmon/tracing.json`) gives each span its calls, wall time and the tree's
//! peak RSS while it was open.

use stemmon::TracingLayer;
use tracing::{info_span, instrument, Instrument as _};
use tracing_subscriber::prelude::*;

const MIB: usize = 1 << 20;

/// `mib` MiB, every page written, so really resident.
fn touched_mib(mib: usize) -> Vec<u8> {
    let mut block = vec![0u8; mib * MIB];
    for page in block.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(block)
}

/// Reads one part of the input: here, 16 MiB of memory really resident.
#[instrument]
async fn load(part: u64) -> Vec<u8> {
    tokio::task::yield_now().await;
    let mut block = touched_mib(16);
    block[0] = part as u8;
    block
}

#[instrument(skip(data))]
fn checksum(data: &[u8]) -> u64 {
    data.iter().step_by(4096).map(|&b| u64::from(b)).sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The global default: every tokio worker sees the layer too.
    tracing_subscriber::registry()
        .with(TracingLayer::new())
        .init();
    let monitor = stemmon::Monitor::builder()
        .output("target/stemmon/tracing.json")
        .log_interval(None)
        .start()?;

    // `pipeline` is entered whenever the main future is polled; a span that is never
    // entered is no stage.
    let pipeline = info_span!("pipeline");
    let total = async {
        let tasks: Vec<_> = (0..8)
            .map(|part| {
                let task = async move {
                    let data = load(part).await;
                    checksum(&data)
                };
                let span = info_span!(parent: &pipeline, "part", part);
                tokio::spawn(task.instrument(span))
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await?;
        }
        Ok::<u64, tokio::task::JoinError>(total)
    }
    .instrument(pipeline.clone())
    .await?;
    drop(pipeline);

    let report = monitor.finish();
    println!("checksum {total}; report in target/stemmon/tracing.json\n");
    println!(
        "{:<26} {:>5} {:>9} {:>15} {:>16}",
        "stage", "calls", "wall", "peak tree RSS", "exact peak (HWM)"
    );
    let mib = |bytes: Option<u64>| {
        bytes.map_or("—".to_owned(), |b| {
            format!("{:.1} MiB", b as f64 / MIB as f64)
        })
    };
    for stage in &report.stages {
        println!(
            "{:<26} {:>5} {:>8.3}s {:>15} {:>16}",
            stage.path,
            stage.calls,
            stage.wall_seconds,
            mib(stage.peaks.peak_tree_rss_bytes),
            mib(stage.high_water.peak_parent_hwm_bytes),
        );
    }
    Ok(())
}
