//! Heap per stage, with mimalloc counted by `stemmon::Alloc`:
//! `cargo run --release -p stemmon-examples --example heap --features heap`.
//!
//! Two stages run at once on two threads: `load_big` holds 500 MiB, `tiny_io` waits
//! without allocating. RSS belongs to the process, so both stages see the same
//! 500 MiB peak of RSS; the heap columns say which of them held it.

use std::sync::mpsc;
use std::time::Duration;
use stemmon::{monitored, Monitor};

#[global_allocator]
static ALLOC: stemmon::Alloc<mimalloc::MiMalloc> = stemmon::Alloc::new(mimalloc::MiMalloc);

const MIB: usize = 1 << 20;

#[monitored]
fn load_big(ready: mpsc::Sender<()>, done: mpsc::Receiver<()>) -> usize {
    let mut block = vec![0u8; 500 * MIB];
    // Touch every page, so the 500 MiB are resident and RSS shows them.
    for page in block.chunks_mut(4096) {
        page[0] = 1;
    }
    let _ = ready.send(());
    let _ = done.recv();
    std::hint::black_box(&block).len()
}

#[monitored]
fn tiny_io(stop: mpsc::Receiver<()>) {
    let _ = stop.recv();
}

fn main() -> Result<(), stemmon::Error> {
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(50))
        .output("target/stemmon/heap.json")
        .start()?;
    let (ready_tx, ready_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| load_big(ready_tx, done_rx));
        scope.spawn(|| tiny_io(stop_rx));
        // Both open while load_big holds its memory, for a few samples.
        let _ = ready_rx.recv();
        std::thread::sleep(Duration::from_millis(300));
        let _ = stop_tx.send(());
        let _ = done_tx.send(());
    });
    let report = monitor.finish();
    let mib = |bytes: Option<u64>| bytes.map_or(f64::NAN, |b| b as f64 / MIB as f64);
    println!(
        "allocator: {}",
        report.heap.allocator.as_deref().unwrap_or("none")
    );
    println!("| stage | peak tree RSS | peak parent HWM | heap allocated | peak heap |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for stage in &report.stages {
        println!(
            "| {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            stage.path,
            mib(stage.peaks.peak_tree_rss_bytes),
            mib(stage.high_water.peak_parent_hwm_bytes),
            mib(stage.heap.heap_allocated_bytes),
            mib(stage.heap.peak_heap_bytes),
        );
    }
    Ok(())
}
