//! `stemmon run -- CMD` beside CMD run bare: a CPU-bound shell loop of about 2 s, with
//! the default 1 s sampling. Budget (the book's `cost.md`): CMD's wall time within 2 % of bare.
//!
//! The `stemmon` binary is the release build next to this bench (`bash bench/run`
//! builds it), or `$STEMMON_BIN`.

use criterion::Criterion;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Alternating pairs of bare and `stemmon run` after criterion's two halves.
const ROUNDS: usize = 7;

/// About 2 s of one core in a POSIX shell, no I/O: the kind of work a pipeline does.
const LOOP: &str = "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done";

fn stemmon_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("STEMMON_BIN") {
        return PathBuf::from(path);
    }
    // target/release/deps/run_overhead-… → target/release/stemmon
    let exe = std::env::current_exe().expect("the bench knows where it is");
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|release| release.join("stemmon"))
        .expect("a target directory")
}

fn run(command: &mut Command) {
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the command runs");
    assert!(status.success(), "{status:?}");
}

fn main() {
    let stemmon = stemmon_binary();
    assert!(
        stemmon.exists(),
        "no stemmon binary at {}: run `cargo build --release -p stemmon-cli` first",
        stemmon.display()
    );
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(25))
        .sample_size(10)
        .configure_from_args();
    let mut group = c.benchmark_group("run");
    group.bench_function("bare", |b| {
        b.iter(|| run(Command::new("sh").args(["-c", LOOP])))
    });
    let stemmon_run = || {
        run(Command::new(&stemmon)
            .args(["run", "--sample-interval", "1", "--log-interval", "none"])
            .args(["--", "sh", "-c", LOOP]))
    };
    group.bench_function("stemmon_run", |b| b.iter(stemmon_run));
    group.finish();

    // The two halves above run one after the other: on a VM whose CPU is stolen by
    // its neighbours for minutes at a time, that drift alone moves their ratio by 20 %.
    // Timed alternately, each pair sees the same machine: the budget reads the median
    // of the pairs' ratios, and each side's fastest run.
    let timed = |f: &dyn Fn()| {
        let start = Instant::now();
        f();
        start.elapsed().as_secs_f64() * 1e3
    };
    let (mut bare, mut ours, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let b = timed(&|| run(Command::new("sh").args(["-c", LOOP])));
        let s = timed(&stemmon_run);
        bare.push(b);
        ours.push(s);
        ratios.push(s / b);
    }
    ratios.sort_by(f64::total_cmp);
    let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let result = serde_json::json!({
        "rounds": ROUNDS,
        "bare_fastest_ms": fastest(&bare),
        "stemmon_fastest_ms": fastest(&ours),
        "median_ratio": ratios[ratios.len() / 2],
    });
    stemmon_bench::write_result("run_overhead", &result).expect("the result is written");
    c.final_summary();
}
