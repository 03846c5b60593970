//! The runtime under stress: deep recursion, deep nesting, 1 ms sampling of many
//! children and a soak stay small, fast and flat. Each test prints its figures; the
//! bounds are generous, for a loaded 2-core machine.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use stemmon::{monitored, Monitor, Report};
// A process-wide monitor covers every thread: the tests that start one must not overlap.
use stemmon_suite::{cannot_run, serial, wait_for_samples, MIB};

fn report_bytes(report: &Report) -> usize {
    serde_json::to_vec(report).unwrap().len()
}

/// This process's resident set, from `/proc/self/status`.
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Runs `body` on a thread with a stack large enough for deep recursion.
fn on_big_stack<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(512 * MIB as usize)
        .spawn(body)
        .unwrap()
        .join()
        .unwrap()
}

/// `expr → term → expr ...`: a recursive-descent parser's mutual recursion.
#[monitored]
fn expr(depth: u32) -> u64 {
    if depth == 0 {
        1
    } else {
        term(depth - 1) + 1
    }
}

#[monitored]
fn term(depth: u32) -> u64 {
    if depth == 0 {
        1
    } else {
        expr(depth - 1) + 1
    }
}

#[test]
fn mutual_recursion_ten_thousand_deep_is_two_records() {
    let _serial = serial();
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(5))
        .start()
        .unwrap();
    let started = Instant::now();
    // 10 000 levels of each: expr, term, expr, ... 20 000 calls in all.
    let depth = on_big_stack(|| expr(19_999));
    let took = started.elapsed();
    let report = monitor.finish();
    let bytes = report_bytes(&report);
    println!(
        "mutual recursion 10 000 deep: {:.3} s, {} records, report {:.1} KiB",
        took.as_secs_f64(),
        report.stages.len(),
        bytes as f64 / 1024.0
    );
    assert_eq!(depth, 20_000);
    let paths: Vec<&str> = report.stages.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["expr", "expr/term"]);
    assert_eq!(report.stage("expr").unwrap().calls, 10_000);
    assert_eq!(report.stage("expr/term").unwrap().calls, 10_000);
    assert_eq!(report.stage("expr").unwrap().threads, 1);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(bytes < MIB as usize, "{bytes} bytes");
}

#[test]
fn two_thousand_distinct_stages_nested_stay_small_and_fast() {
    let _serial = serial();
    const DEPTH: usize = 2_000;
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(5))
        .start()
        .unwrap();
    let rss_before = rss_bytes();
    let started = Instant::now();
    let mut guards = Vec::with_capacity(DEPTH);
    for depth in 0..DEPTH {
        guards.push(stemmon::stage(format!("level{depth}")));
    }
    let mid = monitor.summary();
    while let Some(guard) = guards.pop() {
        drop(guard);
    }
    let took = started.elapsed();
    let rss_after = rss_bytes();
    let report = monitor.finish();
    let bytes = report_bytes(&report);
    let growth = rss_after.zip(rss_before).map(|(a, b)| a.saturating_sub(b));
    println!(
        "{DEPTH} nested stages: {:.3} s with a snapshot open at the bottom, RSS +{:.1} MiB, \
         report {:.1} MiB (O(depth²): each stage's `path` holds its full path)",
        took.as_secs_f64(),
        growth.map_or(f64::NAN, |g| g as f64 / MIB as f64),
        bytes as f64 / MIB as f64
    );
    assert_eq!(report.stages.len(), DEPTH);
    let deepest = report.stages.last().unwrap();
    let expected: Vec<String> = (0..DEPTH).map(|d| format!("level{d}")).collect();
    assert_eq!(deepest.path, expected.join("/"));
    assert_eq!(deepest.parent_id, Some(DEPTH as u32 - 2));
    assert!(report.stages.iter().all(|s| s.calls == 1));
    assert_eq!(mid.stages.len(), DEPTH, "every stage open at the summary");
    assert!(mid.stages.iter().all(|s| s.calls == 1));
    assert!(took < Duration::from_secs(2), "{took:?}");
    // The report holds ~2 000² / 2 path segments (~16 MiB), the summary a second one.
    assert!(bytes < 32 * MIB as usize, "{bytes} bytes");
    if let Some(growth) = growth {
        assert!(growth < 128 * MIB, "RSS grew {growth} bytes");
    }
}

/// Fifty children that sleep until killed.
struct Sleepers(Vec<Child>);

impl Sleepers {
    fn start(count: usize) -> Option<Sleepers> {
        let mut children = Vec::with_capacity(count);
        for _ in 0..count {
            let child = Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .spawn()
                .ok()?;
            children.push(child);
        }
        Some(Sleepers(children))
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// CPU seconds (user + system) of this process's thread named `name`.
fn thread_cpu_seconds(name: &str) -> Option<f64> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            return task_cpu_seconds(&dir.join("stat"));
        }
    }
    None
}

/// CPU seconds (user + system) in a `/proc/.../stat` file.
fn task_cpu_seconds(stat: &std::path::Path) -> Option<f64> {
    let ticks = 100.0; // USER_HZ on Linux
    let stat = std::fs::read_to_string(stat).ok()?;
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

#[monitored]
fn unit_of_work(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..2_000 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x
}

/// What sampling at `interval` for `run` costs: the sampler thread's CPU (its own
/// `/proc` figures), the report's `sampling_seconds`, and the work rate of a busy loop.
struct Cost {
    sampler_cpu: Option<f64>,
    sampling_seconds: f64,
    wall: f64,
    samples: u64,
    rate: f64,
    /// Seconds of the busy loop.
    busy: f64,
    /// The loop thread's own CPU seconds, if known.
    own_cpu: Option<f64>,
}

fn sampling_cost(interval: Duration, run: Duration) -> Cost {
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(interval)
        .start()
        .unwrap();
    // The sampler thread names itself as it starts: after a sample it has.
    wait_for_samples(&monitor, 1);
    let cpu_before = thread_cpu_seconds("stemmon-sampler");
    let own = std::path::Path::new("/proc/thread-self/stat");
    let own_before = task_cpu_seconds(own);
    let _loop = stemmon::stage("busy");
    let started = Instant::now();
    let mut units = 0u64;
    let mut sink = 0u64;
    while started.elapsed() < run {
        sink = sink.wrapping_add(unit_of_work(units));
        units += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_after = thread_cpu_seconds("stemmon-sampler");
    let own_after = task_cpu_seconds(own);
    std::hint::black_box(sink);
    drop(_loop);
    let report = monitor.finish();
    Cost {
        sampler_cpu: cpu_after
            .zip(cpu_before)
            .map(|(after, before)| (after - before) / elapsed),
        sampling_seconds: report.sampling_seconds,
        wall: report.wall_seconds,
        samples: report.samples,
        rate: units as f64 / elapsed,
        busy: elapsed,
        own_cpu: own_after.zip(own_before).map(|(a, b)| a - b),
    }
}

#[test]
fn sampling_fifty_children_every_millisecond_costs_under_half_a_core() {
    let _serial = serial();
    if !std::path::Path::new("/proc/self/task").exists() {
        return cannot_run("sampling_fifty_children", "no /proc");
    }
    let Some(children) = Sleepers::start(50) else {
        return cannot_run("sampling_fifty_children", "cannot start `sleep`");
    };
    // Rounds alternate, so the machine's own load falls on both alike; the best round
    // of each counts for the work rate, all of them for the sampler's CPU.
    let run = Duration::from_secs(1);
    let (mut slow, mut fast) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        slow.push(sampling_cost(Duration::from_millis(500), run));
        fast.push(sampling_cost(Duration::from_millis(1), run));
    }
    drop(children);
    let best = |costs: &[Cost]| costs.iter().map(|c| c.rate).fold(0.0, f64::max);
    // Work per second the loop thread was on a CPU: whether it runs slower, apart from
    // how much of the machine it gets.
    let per_cpu = |costs: &[Cost]| {
        let (work, cpu) = costs.iter().fold((0.0, 0.0), |(work, cpu), c| {
            (work + c.rate * c.busy, cpu + c.own_cpu.unwrap_or(f64::NAN))
        });
        work / cpu
    };
    let cpu_ratio = per_cpu(&fast) / per_cpu(&slow);
    let loop_share = |costs: &[Cost]| {
        let cpu: f64 = costs.iter().map(|c| c.own_cpu.unwrap_or(f64::NAN)).sum();
        cpu / costs.iter().map(|c| c.busy).sum::<f64>()
    };
    println!(
        "the loop thread had {:.0} % of a core at 0.5 s sampling, {:.0} % at 1 ms; its \
         work per CPU second at 1 ms is {:.1} % of that at 0.5 s",
        loop_share(&slow) * 100.0,
        loop_share(&fast) * 100.0,
        cpu_ratio * 100.0
    );
    let ratio = best(&fast) / best(&slow);
    let wall: f64 = fast.iter().map(|c| c.wall).sum();
    let samples: u64 = fast.iter().map(|c| c.samples).sum();
    let sampling: f64 = fast.iter().map(|c| c.sampling_seconds).sum();
    let cpu: Option<f64> = fast
        .iter()
        .map(|c| c.sampler_cpu.map(|cpu| cpu * c.busy))
        .sum::<Option<f64>>()
        .map(|cpu| cpu / fast.iter().map(|c| c.busy).sum::<f64>());
    println!(
        "50 children sampled at 1 ms: {samples} samples in {wall:.2} s, sampler thread \
         {:.1} % of a core ({:.1} % of the wall time reading, by `sampling_seconds`); \
         work rate {:.0}/s vs {:.0}/s at 0.5 s sampling ({:.1} %), best of 3 each",
        cpu.unwrap_or(f64::NAN) * 100.0,
        sampling / wall * 100.0,
        best(&fast),
        best(&slow),
        ratio * 100.0
    );
    let fast = Cost {
        sampler_cpu: cpu,
        sampling_seconds: sampling,
        wall,
        samples,
        rate: best(&fast),
        busy: 0.0,
        own_cpu: None,
    };
    assert!(fast.samples > 30, "{} samples", fast.samples);
    assert!(fast.sampling_seconds < fast.wall);
    let cpu = fast
        .sampler_cpu
        .expect("the sampler thread is named stemmon-sampler");
    // Unoptimized or not, and however slow the machine is at `/proc`: the sampler rests
    // half as long again as each sample took (it read 98 % of a core in a debug build
    // and 70 % in an optimized one before it did; 38-39 % with the rest).
    let budget = 0.5;
    assert!(
        cpu < budget,
        "the sampler used {:.1} % of a core",
        cpu * 100.0
    );
    // The work rate (issue 16: within 15 % of its rate at 0.5 s sampling) is asserted
    // per CPU second of the loop thread: on a loaded machine the process gets a share
    // of the CPU, and the wall-clock rate (printed above) moves with that share; the
    // work done in each second the thread was on a CPU moves only if sampling slows
    // the work itself (cache, `/proc` locks).
    assert!(
        cpu_ratio > 0.85,
        "at 1 ms sampling the loop did {:.1} % of the work per CPU second it did at 0.5 s",
        cpu_ratio * 100.0
    );
}

#[monitored]
fn tick(x: u64) -> u64 {
    std::hint::black_box(x + 1)
}

#[monitored]
fn pause() {
    // Just over the 1 ms under which a call may skip the shared state: kept in `spans`.
    std::thread::sleep(Duration::from_micros(1_100));
}

/// What a soak looks like at one point.
struct SoakPoint {
    rss: Option<u64>,
    bytes: usize,
    samples: u64,
    points: usize,
    spans: usize,
}

/// RSS (read first, with no report alive) and the report at this point of a soak.
fn soak_point(monitor: &Monitor) -> SoakPoint {
    let rss = rss_bytes();
    let report = monitor.summary();
    SoakPoint {
        rss,
        bytes: report_bytes(&report),
        samples: report.samples,
        points: report.timeline.len(),
        spans: report.spans.len(),
    }
}

#[test]
fn a_soak_stays_flat_once_the_timeline_and_spans_are_full() {
    let _serial = serial();
    let monitor = Monitor::builder()
        .log_interval(Some(Duration::from_millis(100)))
        .sample_interval(Duration::from_millis(1))
        .start()
        .unwrap();
    let run = Duration::from_secs(12);
    let started = Instant::now();
    // Workers fill `spans` with calls just over a millisecond; main makes many short ones.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    pause();
                }
            })
        })
        .collect();
    let trace = std::env::var_os("STRESS_TRACE").is_some();
    let mut summarized = Duration::ZERO;
    let mut third = None;
    let mut x = 0;
    while started.elapsed() < run {
        for _ in 0..1_000 {
            x = tick(x);
        }
        std::thread::yield_now();
        // A summary every half second, as a program watching itself would take: the
        // measuring summaries' own memory is in RSS from the first ones on.
        if started.elapsed() >= summarized {
            let point = soak_point(&monitor);
            if trace {
                println!(
                    "{:.1} s: RSS {:?}, report {} bytes, {} points, {} spans",
                    started.elapsed().as_secs_f64(),
                    point.rss,
                    point.bytes,
                    point.points,
                    point.spans
                );
            }
            summarized += Duration::from_millis(500);
        }
        if third.is_none() && started.elapsed() >= run / 3 {
            third = Some(soak_point(&monitor));
        }
    }
    let end = soak_point(&monitor);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }
    drop(monitor.finish());
    let third = third.unwrap();
    let rss_growth = end.rss.zip(third.rss).map(|(e, t)| e as i64 - t as i64);
    let report_growth = end.bytes as f64 / third.bytes as f64 - 1.0;
    println!(
        "soak {:.0} s at 1 ms samples: at 1/3 {} samples, {} timeline points, {} spans, \
         report {:.1} KiB; at the end {} samples, {} points, {} spans, report {:.1} KiB \
         ({:+.2} %); RSS {:+.0} KiB after the first third",
        run.as_secs_f64(),
        third.samples,
        third.points,
        third.spans,
        third.bytes as f64 / 1024.0,
        end.samples,
        end.points,
        end.spans,
        end.bytes as f64 / 1024.0,
        report_growth * 100.0,
        rss_growth.map_or(f64::NAN, |g| g as f64 / 1024.0),
    );
    assert_eq!(x % 1_000, 0);
    // The caps are reached by the first third (2 000 samples, 10 000 spans).
    assert_eq!(third.points, 2_000, "timeline full at 1/3");
    assert_eq!(third.spans, 10_000, "spans full at 1/3");
    assert_eq!((end.points, end.spans), (2_000, 10_000));
    assert!(
        report_growth < 0.02,
        "report grew {:.2} %",
        report_growth * 100.0
    );
    if let Some(growth) = rss_growth {
        assert!(growth < 256 * 1024, "RSS grew {growth} bytes");
    }
}

/// Issue 25's soak: 60 s of `#[monitored]` calls in a tight loop (over a million a second
/// in a release build), sampling every 10 ms and logging every 0.1 s, in a process of its
/// own (`fixture-soak`). Once the timeline is full (2 000 points, about 20 s in), the
/// process's own memory (`RssAnon`: its binary's pages, which new code paths fault in,
/// left out) stays within 256 KiB of what it was then.
#[test]
fn a_60_second_soak_at_10_ms_samples_stays_within_256_kib_once_the_timeline_is_full() {
    let _serial = serial();
    let output = Command::new(env!("CARGO_BIN_EXE_fixture-soak"))
        .args(["60", "10", "100"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    // `<elapsed s> <RSS KiB> <timeline points> <samples> <calls> anon=<KiB> ...`
    let lines: Vec<(f64, u64, usize, u64, u64)> = text
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let anon = fields[5].strip_prefix("anon=").unwrap();
            (
                fields[0].parse().unwrap(),
                fields[1].parse().unwrap(),
                fields[2].parse().unwrap(),
                fields[4].parse().unwrap(),
                anon.parse().unwrap(),
            )
        })
        .collect();
    let full = lines
        .iter()
        .position(|&(_, _, points, _, _)| points == 2_000)
        .unwrap_or_else(|| panic!("the timeline never filled:\n{text}"));
    let at_full = lines[full].4;
    let highest = lines[full..].iter().map(|l| l.4).max().unwrap();
    let (end, _, _, calls, _) = *lines.last().unwrap();
    println!(
        "soak: {:.1} M calls/s; timeline full at {:.0} s with {at_full} KiB anonymous; \
         highest after {highest} KiB ({:+} KiB); RSS {} -> {} KiB",
        calls as f64 / end / 1e6,
        lines[full].0,
        highest as i64 - at_full as i64,
        lines[full].1,
        lines.last().unwrap().1,
    );
    assert!(end >= 59.0, "the soak ended early:\n{text}");
    assert!(
        lines.len() >= 50 && lines[full].0 < 40.0,
        "too few samples for a soak:\n{text}"
    );
    assert!(
        highest <= at_full + 256,
        "grew {} KiB after the timeline was full:\n{text}",
        highest - at_full
    );
}
