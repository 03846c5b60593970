//! What a monitor holds and burns outside the calls themselves:
//!
//! - memory held after 10 million calls under an active monitor (aggregated by stage
//!   path, so it must stay constant), beside the same calls of the tracing and hotpath
//!   peers: live heap bytes (a counting allocator) and RSS, after a warm-up of 1 million;
//! - the `stemmon-sampler` thread's CPU at the default 1 s interval, as a fraction of one
//!   core, while the process has 10 descendants. Budget (the book's `cost.md`): < 0.1 %.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};
use stemmon_bench::{self_rss_bytes, thread_cpu, write_result, Tree};
use tracing_subscriber::layer::SubscriberExt as _;

/// Counts the bytes live on the heap, across all threads.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counts are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

mod subjects;

use subjects::{attribute, enter, hotpath_measure, tracing_instrument};

const WARM_CALLS: u64 = 1_000_000;
const CALLS: u64 = 10_000_000;

/// Heap and RSS growth over `CALLS` calls of `f`, after `WARM_CALLS`.
fn growth(f: fn(u64) -> u64) -> serde_json::Value {
    for i in 0..WARM_CALLS {
        black_box(f(black_box(i)));
    }
    settle();
    let (heap, rss) = (LIVE.load(Ordering::Relaxed), self_rss_bytes().unwrap_or(0));
    let started = Instant::now();
    for i in 0..CALLS {
        black_box(f(black_box(i)));
    }
    let seconds = started.elapsed().as_secs_f64();
    settle();
    serde_json::json!({
        "calls": CALLS,
        "heap_growth_bytes": LIVE.load(Ordering::Relaxed) - heap,
        "rss_growth_bytes": self_rss_bytes().unwrap_or(0) as i64 - rss as i64,
        "ns_per_call": seconds * 1e9 / CALLS as f64,
    })
}

/// Lets background threads (hotpath's drain, stemmon's sampler) catch up.
fn settle() {
    std::thread::sleep(Duration::from_millis(300));
}

fn sampler_cpu(seconds: u64) -> serde_json::Value {
    let tree = Tree::spawn(10).expect("the tree starts");
    let monitor = stemmon::Monitor::builder()
        .start()
        .expect("the monitor starts");
    // Leave the start-up (first sample, thread start) out of the window.
    std::thread::sleep(Duration::from_millis(1500));
    let before = thread_cpu("stemmon-sampler").expect("the sampler thread runs");
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let after = thread_cpu("stemmon-sampler").expect("the sampler thread runs");
    let wall_ns = started.elapsed().as_nanos() as f64;
    let report = monitor.finish();
    drop(tree);
    let schedstat = after
        .schedstat_ns
        .zip(before.schedstat_ns)
        .map(|(a, b)| (a - b) as f64 / wall_ns);
    let stat = (after.stat_ns - before.stat_ns) as f64 / wall_ns;
    serde_json::json!({
        "window_seconds": wall_ns / 1e9,
        "core_fraction_schedstat": schedstat,
        "core_fraction_stat": stat,
        "core_fraction": schedstat.unwrap_or(stat),
        "process_count": report.peak_process_count,
        "sampling_attempts": report.sampling_attempts,
        "mean_sample_seconds": report.sampling_seconds / report.sampling_attempts.max(1) as f64,
    })
}

fn main() {
    if std::env::args().any(|arg| arg == "--list") {
        // `cargo bench -- --list` lists benches; this one has no criterion functions.
        return;
    }
    let seconds = std::env::var("STEMMON_BENCH_CPU_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    eprintln!("footprint: sampler CPU over {seconds} s at the default interval");
    let cpu = sampler_cpu(seconds);
    write_result("sampler_cpu", &cpu).expect("the result is written");

    eprintln!("footprint: memory over {CALLS} calls each");
    let subscriber =
        tracing_subscriber::registry().with(tracing_subscriber::layer::Identity::new());
    tracing::subscriber::set_global_default(subscriber).expect("no other subscriber is set");
    let hotpath_guard = hotpath::HotpathGuardBuilder::new("footprint")
        .format(hotpath::Format::Json)
        .output_path(stemmon_bench::out_dir().join("hotpath_footprint.json"))
        .build();
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .expect("the monitor starts");
    let stemmon_enter = growth(enter);
    let stemmon_attribute = growth(attribute);
    let tracing = growth(tracing_instrument);
    let hotpath = growth(hotpath_measure);
    let report = monitor.finish();
    drop(hotpath_guard);
    let result = serde_json::json!({
        "stemmon_enter": stemmon_enter,
        "stemmon_attribute": stemmon_attribute,
        "stemmon_stages": report.stages.len(),
        "stemmon_enter_calls": report.stage("enter").map_or(0, |s| s.calls),
        "tracing": tracing,
        "hotpath": hotpath,
    });
    write_result("footprint", &result).expect("the result is written");
    println!(
        "{}",
        serde_json::to_string_pretty(&result).unwrap_or_default()
    );
}
