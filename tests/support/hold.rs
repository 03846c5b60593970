//! `stemmon-hold <MiB> [<grandchildren> <grandchild MiB>]`: a process that holds a known
//! amount of touched memory, starts its own children holding theirs, prints `ready`
//! once all of them hold their memory, and exits when its standard input closes.
//!
//! `stemmon-hold spike <MiB> <ms>`: touches `MiB` for `ms` milliseconds, frees it and exits.
//!
//! `stemmon-hold reap-trial <phase ms> <report>`: runs a monitor (1 s samples) that
//! writes `report`, waits `phase` ms, then in stage `spike` runs
//! `stemmon-hold spike 300 100` and reaps it. A fresh process per trial: the kernel's peak of reaped children
//! (`RUSAGE_CHILDREN`) is a maximum over the process's life.

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

fn spike(mib: u64, ms: u64) {
    let held = stemmon_suite::touched_mib(mib);
    std::thread::sleep(Duration::from_millis(ms));
    drop(std::hint::black_box(held));
}

fn reap_trial(phase_ms: u64, report: &str) {
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .output(report)
        .sample_interval(Duration::from_secs(1))
        .start()
        .expect("the monitor starts");
    std::thread::sleep(Duration::from_millis(phase_ms));
    {
        let _spike = monitor.stage("spike").expect("a stage");
        let status = Command::new(std::env::current_exe().unwrap())
            .args(["spike", "300", "100"])
            .status()
            .expect("start the spike");
        assert!(status.success());
    }
    monitor.finish();
    // The ground truth beside the report: the kernel's peak of the children this
    // process reaped (`ru_maxrss`), the spike's child and any other.
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid for writes and outlives the call.
    let result = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(result, 0, "getrusage");
    let bytes = u64::try_from(usage.ru_maxrss).unwrap() * 1024;
    std::fs::write(format!("{report}.maxrss"), bytes.to_string()).expect("write the truth");
}

fn main() {
    let mode: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize| -> u64 { mode[i].parse().expect("a whole number") };
    match mode.first().map(String::as_str) {
        Some("spike") => return spike(number(1), number(2)),
        Some("reap-trial") => return reap_trial(number(1), &mode[2]),
        _ => {}
    }
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are whole numbers"))
        .collect();
    let mib = args.first().copied().unwrap_or(0);
    let grandchildren = args.get(1).copied().unwrap_or(0);
    let grandchild_mib = args.get(2).copied().unwrap_or(0);
    let held = stemmon_suite::touched_mib(mib);
    let mut children: Vec<_> = (0..grandchildren)
        .map(|_| {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .arg(grandchild_mib.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a grandchild");
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line.trim(), "ready");
            child
        })
        .collect();
    println!("ready");
    std::io::stdout().flush().unwrap();
    // Hold until the parent closes our stdin (or dies).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    for child in &mut children {
        drop(child.stdin.take());
        let _ = child.wait();
    }
    std::hint::black_box(&held);
}
