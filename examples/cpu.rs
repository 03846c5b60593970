//! CPU and I/O per stage: `cargo run --release -p stemmon-examples --example cpu`, then
//! `stemmon show target/stemmon/cpu.json`.
//!
//! Four stages that take about the same wall time and do very different things:
//! `serial` computes on one thread, `parallel` on two, `wait` sleeps, and `children`
//! runs two CPU-bound child processes; `write` writes 64 MiB and syncs it. Their
//! `cpu_cores` tell them apart: about 1, 2, 0 and 2 (on a machine with two free cores).

use std::io::Write as _;
use std::time::{Duration, Instant};
use stemmon::{monitor_main, monitored};

/// Computes for `wall` of wall time on the calling thread.
fn compute(wall: Duration) -> u64 {
    let deadline = Instant::now() + wall;
    let mut x = 1u64;
    while Instant::now() < deadline {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    x
}

#[monitored]
fn serial() -> u64 {
    compute(Duration::from_millis(500))
}

#[monitored]
fn parallel() -> u64 {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| compute(Duration::from_millis(500))))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    })
}

#[monitored]
fn wait() {
    std::thread::sleep(Duration::from_millis(500));
}

#[monitored]
fn children() {
    let busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
    let mut running: Vec<_> = (0..2)
        .map(|_| std::process::Command::new("sh").args(["-c", busy]).spawn())
        .filter_map(Result::ok)
        .collect();
    for child in &mut running {
        let _ = child.wait();
    }
}

#[monitored]
fn write() -> std::io::Result<()> {
    let path = std::path::Path::new("target/stemmon/cpu-example.bin");
    let mut file = std::fs::File::create(path)?;
    let block = vec![7u8; 1 << 20];
    for _ in 0..64 {
        file.write_all(&block)?;
    }
    file.sync_all()?;
    std::fs::remove_file(path)
}

#[monitor_main(output = "target/stemmon/cpu.json", sample_interval = 0.1)]
fn main() -> std::io::Result<()> {
    std::fs::create_dir_all("target/stemmon")?;
    let x = serial() ^ parallel();
    wait();
    children();
    write()?;
    println!("{x}");
    Ok(())
}
