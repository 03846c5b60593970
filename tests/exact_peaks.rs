//! Exact peaks (the book's `exact-peaks.md`) against real memory and real children, at 1 s sampling: spikes
//! that a sampler misses are caught by the kernel's high-water marks.

#![cfg(target_os = "linux")]

use std::process::Command;
use std::time::{Duration, Instant};
use stemmon::{Monitor, Report};
// One process-wide monitor at a time, and the process's own marks are shared.
use stemmon_suite::serial;
use stemmon_suite::{touched_mib, Holder, MIB};

const HOLD: &str = env!("CARGO_BIN_EXE_stemmon-hold");

/// A small xorshift generator seeded from the clock: random phases, no dependency.
struct Phases(u64);

impl Phases {
    fn new() -> Phases {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Phases(u64::from(nanos) | 1)
    }

    /// A duration uniform in [0, 1 s): one sample interval.
    fn next(&mut self) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_micros(self.0 % 1_000_000)
    }
}

fn one_second() -> stemmon::MonitorBuilder {
    Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_secs(1))
}

fn mib(bytes: Option<u64>) -> f64 {
    bytes.map_or(f64::NAN, |b| b as f64 / MIB as f64)
}

/// The figure `what`, which the test compares: a `null` fails it, named, rather than
/// comparing as `None` (below every `Some`).
#[track_caller]
fn known(bytes: Option<u64>, what: &str) -> u64 {
    bytes.unwrap_or_else(|| panic!("{what} is null"))
}

/// Touches `size` MiB, holds it for `hold`, frees it.
fn spike(size: u64, hold: Duration) {
    let block = touched_mib(size);
    std::thread::sleep(hold);
    drop(std::hint::black_box(block));
}

#[test]
fn a_100_ms_spike_in_the_process_is_caught_by_its_mark() {
    let _serial = serial();
    let monitor = one_second().start().unwrap();
    let mut phases = Phases::new();
    let trials = 20;
    for trial in 0..trials {
        std::thread::sleep(phases.next());
        let _stage = monitor.stage(format!("spike-{trial:02}")).unwrap();
        spike(300, Duration::from_millis(100));
    }
    let report = monitor.finish();
    let (mut marked, mut bounded, mut sampled) = (0, 0, 0);
    for trial in 0..trials {
        let stage = report.stage(&format!("spike-{trial:02}")).unwrap();
        let hw = &stage.high_water;
        let mark = known(hw.peak_parent_hwm_bytes, "peak_parent_hwm_bytes");
        let bound = known(hw.peak_tree_rss_bound_bytes, "peak_tree_rss_bound_bytes");
        let tree = known(stage.peaks.peak_tree_rss_bytes, "peak_tree_rss_bytes");
        let parent = known(stage.peaks.peak_parent_rss_bytes, "peak_parent_rss_bytes");
        marked += u32::from(mark >= 300 * MIB);
        bounded += u32::from(bound >= 300 * MIB);
        sampled += u32::from(tree >= 300 * MIB);
        // A mark never reads below the sampled peak of the same process.
        assert!(
            mark >= parent.saturating_sub(MIB),
            "trial {trial}: mark {mark}, sampled {parent}"
        );
    }
    eprintln!("process spikes: mark {marked}/20, bound {bounded}/20, sampled {sampled}/20");
    assert!(marked >= 19, "the mark caught {marked} of 20");
    assert!(bounded >= 19, "the bound caught {bounded} of 20");
    let mark = known(report.high_water.peak_parent_hwm_bytes, "the report's mark");
    assert!(mark >= 300 * MIB, "{} MiB", mib(Some(mark)));
    assert!(report.high_water_marks.enabled && report.high_water_marks.parent);
}

#[test]
fn a_100_ms_spike_in_a_reaped_child_is_caught_by_the_bound() {
    let _serial = serial();
    let dir = stemmon_suite::temp_dir("reap-trials");
    let mut phases = Phases::new();
    let (mut bounded, mut reaped, mut sampled, mut kept) = (0, 0, 0, 0);
    // A fresh process per trial, two at a time: see `stemmon-hold reap-trial`.
    for pair in 0..10 {
        let runs: Vec<_> = (0..2)
            .map(|i| {
                let path = dir.join(format!("trial-{pair}-{i}.json"));
                let phase = phases.next().as_millis().to_string();
                let child = Command::new(HOLD)
                    .args(["reap-trial", &phase])
                    .arg(&path)
                    .spawn()
                    .unwrap();
                (child, path)
            })
            .collect();
        for (mut child, path) in runs {
            assert!(child.wait().unwrap().success());
            let report: Report =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let stage = report.stage("spike").unwrap();
            let hw = &stage.high_water;
            let bound = known(hw.peak_tree_rss_bound_bytes, "peak_tree_rss_bound_bytes");
            let children = known(
                stage.peaks.peak_children_rss_bytes,
                "peak_children_rss_bytes",
            );
            bounded += u32::from(bound >= 300 * MIB);
            sampled += u32::from(children >= 300 * MIB);
            // What the kernel kept of the child once reaped (`ru_maxrss`, written by the
            // trial). A sample that read the child after it freed the spike, just
            // before it exited, reset its mark: the kernel then keeps only what it held
            // since, and the spike is in the bound through that sample's mark.
            let truth_path = format!("{}.maxrss", path.display());
            let truth: u64 = std::fs::read_to_string(&truth_path)
                .unwrap()
                .parse()
                .unwrap();
            if truth >= 300 * MIB {
                kept += 1;
                // No reaped peak (`null`) is a miss, as is one below the spike.
                let caught = hw
                    .peak_reaped_child_rss_bytes
                    .is_some_and(|p| p >= 300 * MIB);
                reaped += u32::from(caught);
                if !caught {
                    eprintln!("missed: {stage:?}\n{:?}", report.high_water);
                }
            } else {
                eprintln!(
                    "the kernel kept {} MiB of the child (its mark reset by a sample)",
                    mib(Some(truth))
                );
            }
            // The child's peak is its own: well under twice the spike.
            assert!(
                hw.peak_reaped_child_rss_bytes.is_none_or(|p| p < 400 * MIB),
                "reaped {} MiB",
                mib(hw.peak_reaped_child_rss_bytes)
            );
            assert!(report.high_water_marks.reaped);
        }
    }
    eprintln!(
        "child spikes: bound {bounded}/20, reaped {reaped}/{kept} (of those the kernel kept \
         the spike of), sampled {sampled}/20"
    );
    assert!(bounded >= 19, "the bound caught {bounded} of 20");
    // A sample lands in the last milliseconds of a child's life in a few trials at most.
    assert!(
        kept >= 15,
        "the kernel kept the spike of only {kept} of 20 children"
    );
    assert!(
        reaped + 1 >= kept,
        "the reaped peak caught {reaped} of the {kept} the kernel kept"
    );
}

/// Stage `a` holds a 200 MiB child long enough to be sampled, then reaps it; stage `b`
/// opens `gap` later and must carry none of it.
fn reaped_child_does_not_pollute_the_next_stage(gap: Duration) {
    let _serial = serial();
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    {
        let _a = monitor.stage("a").unwrap();
        let child = Holder::start(HOLD, 200, 0, 0);
        stemmon_suite::wait_for_samples(&monitor, 2);
        child.stop(); // reaped here
    }
    std::thread::sleep(gap);
    {
        let _b = monitor.stage("b").unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let report = monitor.finish();
    let a = report.stage("a").unwrap();
    let b = report.stage("b").unwrap();
    let a_children = known(a.peaks.peak_children_rss_bytes, "a's children peak");
    assert!(
        a_children >= 190 * MIB,
        "a sample saw the child: {} MiB",
        mib(Some(a_children))
    );
    let a_reaped = known(a.high_water.peak_reaped_child_rss_bytes, "a's reaped peak");
    assert!(
        a_reaped >= 190 * MIB,
        "a reaped it: {} MiB",
        mib(Some(a_reaped))
    );
    let parent = known(b.peaks.peak_parent_rss_bytes, "b's parent peak");
    let b_children = known(b.peaks.peak_children_rss_bytes, "b's children peak");
    assert!(
        b_children < 10 * MIB,
        "b carries the dead child: children {} MiB",
        mib(Some(b_children))
    );
    let b_tree = known(b.peaks.peak_tree_rss_bytes, "b's tree peak");
    assert!(
        b_tree < parent + 10 * MIB,
        "b's tree peak {} MiB, parent {} MiB",
        mib(Some(b_tree)),
        mib(Some(parent))
    );
    assert_eq!(b.high_water.peak_reaped_child_rss_bytes, None);
    let b_bound = known(b.high_water.peak_tree_rss_bound_bytes, "b's bound");
    assert!(
        b_bound < parent + 20 * MIB,
        "b's bound {} MiB",
        mib(Some(b_bound))
    );
}

#[test]
fn a_stage_opened_just_after_a_reaped_child_carries_none_of_it() {
    // Inside the 1 ms reuse window: b reuses a's closing reading.
    reaped_child_does_not_pollute_the_next_stage(Duration::ZERO);
}

#[test]
fn a_stage_opened_a_few_ms_after_a_reaped_child_carries_none_of_it() {
    reaped_child_does_not_pollute_the_next_stage(Duration::from_millis(3));
}

#[test]
fn a_20_ms_stage_that_allocates_and_frees_100_mib_shows_it_in_its_mark() {
    let _serial = serial();
    let monitor = one_second().start().unwrap();
    std::thread::sleep(Duration::from_millis(10));
    {
        let _burst = monitor.stage("burst").unwrap();
        let started = Instant::now();
        drop(std::hint::black_box(touched_mib(100)));
        std::thread::sleep(Duration::from_millis(20).saturating_sub(started.elapsed()));
    }
    {
        let _quiet = monitor.stage("quiet").unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = monitor.finish();
    let burst = report.stage("burst").unwrap();
    let quiet = report.stage("quiet").unwrap();
    let baseline = quiet.peaks.peak_parent_rss_bytes.unwrap();
    let mark = burst.high_water.peak_parent_hwm_bytes.unwrap();
    assert!(
        mark >= baseline + 95 * MIB,
        "burst mark {} MiB over a baseline of {} MiB",
        mib(Some(mark)),
        mib(Some(baseline))
    );
    // The quiet stage after it has its own interval: the burst is not in its mark.
    let quiet_mark = quiet.high_water.peak_parent_hwm_bytes.unwrap();
    assert!(
        quiet_mark < baseline + 20 * MIB,
        "quiet mark {} MiB",
        mib(Some(quiet_mark))
    );
}

#[test]
fn marks_turned_off_leave_everything_else_working() {
    let _serial = serial();
    let monitor = one_second().high_water_marks(false).start().unwrap();
    {
        let _stage = monitor.stage("work").unwrap();
        spike(50, Duration::from_millis(10));
    }
    let report = monitor.finish();
    assert!(!report.high_water_marks.enabled);
    assert_eq!(
        report.high_water_marks.missing.as_deref(),
        Some("turned off")
    );
    let work = report.stage("work").unwrap();
    assert_eq!(work.high_water.peak_parent_hwm_bytes, None);
    assert_eq!(work.high_water.peak_tree_rss_bound_bytes, None);
    assert!(work.peaks.peak_parent_rss_bytes.is_some());
    assert!(report.samples >= 1);
}

#[test]
fn the_environment_turns_marks_off_for_monitor_main() {
    let dir = stemmon_suite::temp_dir("marks-env");
    let path = dir.join("report.json");
    let run = Command::new(env!("CARGO_BIN_EXE_fixture-main-ok"))
        .env("STEMMON_HIGH_WATER_MARKS", "0")
        .env("STEMMON_OUTPUT", &path)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let report: Report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(!report.high_water_marks.enabled);
    assert_eq!(
        report.high_water_marks.missing.as_deref(),
        Some("turned off")
    );
    assert_eq!(report.high_water.peak_parent_hwm_bytes, None);
    assert!(report.peaks.peak_parent_rss_bytes.is_some());
}

#[test]
fn the_portable_reader_says_which_marks_are_missing() {
    let _serial = serial();
    let monitor = one_second()
        .reader(stemmon::Reader::Portable)
        .start()
        .unwrap();
    {
        let _stage = monitor.stage("work").unwrap();
    }
    let report = monitor.finish();
    let marks = &report.high_water_marks;
    assert!(marks.enabled && !marks.parent && !marks.descendants && !marks.reaped);
    assert!(
        marks.missing.as_deref().unwrap().contains("sysinfo"),
        "{marks:?}"
    );
    assert_eq!(report.high_water.peak_tree_rss_bound_bytes, None);
    assert!(report
        .stage("work")
        .unwrap()
        .peaks
        .peak_parent_rss_bytes
        .is_some());
}

/// A spike inside a stage on a worker thread, while the monitor's own thread opens and
/// closes short stages every couple of milliseconds: each of those boundary readings
/// resets the process's mark, yet the worker's stage still gets the spike.
#[test]
fn a_spike_on_a_worker_survives_the_resets_of_another_threads_stages() {
    let _serial = serial();
    let mut phases = Phases::new();
    let monitor = one_second().start().unwrap();
    let trials = 5;
    for trial in 0..trials {
        std::thread::sleep(phases.next());
        let done = std::sync::atomic::AtomicBool::new(false);
        let (entered, is_entered) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Entered while main has nothing open: a top-level stage.
                let _hold = stemmon::stage(format!("worker-{trial}"));
                entered.send(()).unwrap();
                // Well after main's short stages have begun, and well before they end.
                std::thread::sleep(Duration::from_millis(30));
                spike(300, Duration::from_millis(100));
                std::thread::sleep(Duration::from_millis(30));
                done.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            is_entered.recv().unwrap();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let _tick = monitor.stage("tick").unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        });
    }
    let report = monitor.finish();
    for trial in 0..trials {
        let worker = report.stage(&format!("worker-{trial}")).unwrap();
        let mark = known(worker.high_water.peak_parent_hwm_bytes, "the worker's mark");
        assert!(mark >= 300 * MIB, "trial {trial}: {} MiB", mib(Some(mark)));
        let bound = known(
            worker.high_water.peak_tree_rss_bound_bytes,
            "the worker's bound",
        );
        assert!(
            bound >= 300 * MIB,
            "trial {trial}: {} MiB",
            mib(Some(bound))
        );
    }
    // The ticks ran beside the spike: some saw it, none claims more than the process held.
    let tick = report.stage("tick").unwrap();
    assert!(tick.calls > 50 * trials);
}

#[test]
fn a_peak_that_another_monitors_reset_ended_still_counts() {
    // Two monitors of their own threads, marks on both: the kernel keeps one mark for
    // the process, and each monitor's readings reset it.
    let _serial = serial();
    let (spiked, has_spiked) = std::sync::mpsc::channel();
    let (reset, was_reset) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let other = scope.spawn(move || {
            let monitor = one_second().current_thread_only().start().unwrap();
            has_spiked.recv().unwrap();
            // A stage's entry reading: it reads the process's mark and resets it.
            drop(monitor.stage("after").unwrap());
            reset.send(()).unwrap();
            monitor.finish()
        });
        let monitor = one_second().current_thread_only().start().unwrap();
        let baseline = {
            let _spike = monitor.stage("spike").unwrap();
            drop(std::hint::black_box(touched_mib(200)));
            // The other monitor ends this interval before this stage's exit reading.
            spiked.send(()).unwrap();
            was_reset.recv().unwrap();
            fresh_rss()
        };
        let report = monitor.finish();
        let other = other.join().unwrap();
        let mark = known(
            report
                .stage("spike")
                .unwrap()
                .high_water
                .peak_parent_hwm_bytes,
            "the spike's mark",
        );
        assert!(
            mark >= baseline + 190 * MIB,
            "the spike's mark {} MiB over {} MiB now",
            mib(Some(mark)),
            mib(Some(baseline))
        );
        // The other monitor's reading saw it too (before its stage: in its run's mark).
        let seen = known(
            other.high_water.peak_parent_hwm_bytes,
            "the other run's mark",
        );
        assert!(seen >= baseline + 190 * MIB, "{} MiB", mib(Some(seen)));
    });
}

/// This process's RSS now, from a fresh read of `/proc/self/status`.
fn fresh_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}
