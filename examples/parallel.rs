//! Stages on every thread:
//! `cargo run --release -p stemmon-examples --example parallel --features parallel`.
//!
//! `predict` runs on the main thread and fans its inputs out over rayon's workers;
//! each `score` call on a worker nests under the stage open on the main thread, so the
//! report has one record `predict/score` holding every call from every worker, with
//! `threads` saying how many ran it.

use rayon::prelude::*;
use stemmon::{monitor_main, monitored};

#[monitored]
fn score(x: u64) -> f64 {
    // A little arithmetic per item: the kind of work a model's predict does.
    (0..16).fold(x as f64, |acc, i| (acc * 1.000_1 + i as f64).sqrt())
}

#[monitored]
fn predict(inputs: &[u64]) -> Vec<f64> {
    inputs.par_iter().map(|&x| score(x)).collect()
}

#[monitor_main(output = "target/stemmon/parallel.json", log_interval = 1.0)]
fn main() {
    let inputs: Vec<u64> = (0..2_000_000).collect();
    let scores = predict(&inputs);
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    println!("{} scores, mean {mean:.3}", scores.len());
}
