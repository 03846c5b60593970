//! A small pipeline under the two attributes: `cargo run -p stemmon-examples --example quickstart`.
//!
//! `#[monitor_main]` starts a monitor that samples the whole process tree every 0.2 s,
//! prints a live line every second (and one per finished stage), and writes
//! `target/stemmon/quickstart.json` (or where `STEMMON_OUTPUT` says) when `main` ends. Each `#[monitored]` fn is a stage:
//!
//! - `fit` builds and scans about 200 MiB for about a second;
//! - `predict` is short and small;
//! - `workers` starts three worker processes (this same program, run with
//!   `--worker <MiB>`) that each hold their own memory for 1.5 s, and waits for them.
//!   The report counts them in `peak_process_count` and `peak_children_rss_bytes`.

use std::error::Error;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};
use stemmon::{monitor_main, monitored};

const FIT_MIB: usize = 200;
const WORKERS: usize = 3;
const WORKER_MIB: usize = 64;

/// A "model": the mean and spread of the training data.
struct Model {
    mean: f64,
    scale: f64,
}

/// `len` MiB of f64 values, every page written so that all of it is resident.
fn make_data(mib: usize) -> Vec<f64> {
    let len = mib * (1 << 20) / std::mem::size_of::<f64>();
    (0..len).map(|i| (i % 1000) as f64).collect()
}

#[monitored]
fn fit() -> Model {
    let started = Instant::now();
    // `black_box`: an optimised build keeps the data (else it computes the sums without
    // ever holding it, and the stage holds 3 MiB, not 200), and each pass reads it anew.
    let data = std::hint::black_box(make_data(FIT_MIB));
    // Scan the data again and again for about a second: a stage worth sampling.
    let (mut mean, mut spread, mut passes) = (0.0, 0.0, 0u32);
    while passes == 0 || started.elapsed() < Duration::from_secs(1) {
        let data = std::hint::black_box(&data);
        mean = data.iter().sum::<f64>() / data.len() as f64;
        spread = data.iter().map(|x| (x - mean).abs()).sum::<f64>() / data.len() as f64;
        // Each pass's figures are used, so no pass is skipped as dead work.
        std::hint::black_box((mean, spread));
        passes += 1;
    }
    println!("fit: {passes} passes over {FIT_MIB} MiB");
    Model {
        mean,
        scale: spread.max(1.0),
    }
}

#[monitored]
fn predict(model: &Model, inputs: &[f64]) -> Vec<f64> {
    inputs
        .iter()
        .map(|x| (x - model.mean) / model.scale)
        .collect()
}

#[monitored("workers")]
fn run_workers(count: usize, mib: usize) -> Result<(), Box<dyn Error>> {
    let program = std::env::current_exe()?;
    let mut workers = Vec::with_capacity(count);
    for _ in 0..count {
        let worker = Command::new(&program)
            .args(["--worker", &mib.to_string()])
            // A worker is part of this run's tree, not a monitored run of its own.
            .env("STEMMON_DISABLE", "1")
            .spawn()?;
        workers.push(worker);
    }
    for mut worker in workers {
        let status: ExitStatus = worker.wait()?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }
    Ok(())
}

/// The worker process: holds `mib` MiB for 1.5 s, then exits.
fn worker(mib: usize) {
    let data = std::hint::black_box(make_data(mib));
    std::thread::sleep(Duration::from_millis(1500));
    std::hint::black_box(&data);
}

#[monitor_main(
    output = "target/stemmon/quickstart.json",
    sample_interval = 0.2,
    log_interval = 1
)]
fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, mib] = args.as_slice() {
        if flag == "--worker" {
            worker(mib.parse()?);
            return Ok(());
        }
    }
    let model = fit();
    let inputs: Vec<f64> = (0..1_000_000).map(f64::from).collect();
    let predictions = predict(&model, &inputs);
    println!("predict: {} predictions", predictions.len());
    run_workers(WORKERS, WORKER_MIB)?;
    // The path the monitor writes: the attribute's, or STEMMON_OUTPUT's where it is set.
    match stemmon::output_path() {
        Some(path) => println!("workers: {WORKERS} done; the report is {}", path.display()),
        None => println!("workers: {WORKERS} done; no report is written"),
    }
    Ok(())
}
