//! Heap per stage (the book's `heap.md`) with `stemmon::Alloc` as the real global allocator: who
//! allocated, freed and held what, on every kind of thread.

use std::sync::mpsc;
use std::time::Duration;
use stemmon::report::StageReport;
use stemmon::{monitored, Monitor, Report};
use stemmon_suite::{serial, touched_mib, wait_for_samples, MIB};

#[global_allocator]
static ALLOC: stemmon::Alloc = stemmon::Alloc::system();

fn start() -> Monitor {
    Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(20))
        .start()
        .unwrap()
}

fn stage<'a>(report: &'a Report, path: &str) -> &'a StageReport {
    report.stage(path).unwrap_or_else(|| {
        let paths: Vec<&str> = report.stages.iter().map(|s| s.path.as_str()).collect();
        panic!("no stage {path}: {paths:?}")
    })
}

/// `(allocations, allocated, freed, retained, peak)` of a stage.
fn heap(stage: &StageReport) -> (u64, u64, u64, i64, u64) {
    let h = &stage.heap;
    (
        h.heap_allocations.expect("allocations"),
        h.heap_allocated_bytes.expect("allocated"),
        h.heap_freed_bytes.expect("freed"),
        h.heap_retained_bytes.expect("retained"),
        h.peak_heap_bytes.expect("peak"),
    )
}

fn within(value: u64, expected: u64, fraction: f64) -> bool {
    (value as f64 - expected as f64).abs() <= expected as f64 * fraction
}

#[monitored]
fn load_big(ready: mpsc::Sender<()>, done: mpsc::Receiver<()>) -> usize {
    let block = touched_mib(500);
    ready.send(()).unwrap();
    done.recv().unwrap();
    block.len()
}

/// Allocates nothing: waits until told to start, then until told to stop.
#[monitored]
fn tiny_io(start: mpsc::Receiver<()>, stop: mpsc::Receiver<()>) {
    start.recv().unwrap();
    stop.recv().unwrap();
}

#[test]
fn two_concurrent_stages_each_get_their_own_heap_while_rss_charges_both() {
    let _serial = serial();
    let monitor = start();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let (start_tx, start_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| load_big(ready_tx, done_rx));
        scope.spawn(|| tiny_io(start_rx, stop_rx));
        // Both open at once for real: load_big holds its 500 MiB, tiny_io has started,
        // and the sampler reads the tree twice meanwhile.
        ready_rx.recv().unwrap();
        start_tx.send(()).unwrap();
        wait_for_samples(&monitor, 2);
        stop_tx.send(()).unwrap();
        done_tx.send(()).unwrap();
    });
    let report = monitor.finish();
    let (big, tiny) = (stage(&report, "load_big"), stage(&report, "tiny_io"));
    let mib = |bytes: Option<u64>| bytes.map_or(f64::NAN, |b| b as f64 / MIB as f64);
    println!("stage     heap allocated  peak heap  peak tree RSS  peak parent HWM");
    for s in [big, tiny] {
        println!(
            "{:<9} {:>10.1} MiB {:>6.1} MiB {:>10.1} MiB {:>12.1} MiB",
            s.name,
            mib(s.heap.heap_allocated_bytes),
            mib(s.heap.peak_heap_bytes),
            mib(s.peaks.peak_tree_rss_bytes),
            mib(s.high_water.peak_parent_hwm_bytes),
        );
    }
    let (_, allocated, _, _, peak) = heap(big);
    assert!(within(allocated, 500 * MIB, 0.02), "{allocated}");
    assert!(within(peak, 500 * MIB, 0.02), "{peak}");
    let (_, allocated, _, _, peak) = heap(tiny);
    assert!(allocated < MIB && peak < MIB, "{allocated} {peak}");
    // RSS, the process's, charges both.
    let tiny_rss = tiny.peaks.peak_tree_rss_bytes.unwrap();
    assert!(tiny_rss > 400 * MIB, "RSS peak of tiny_io: {tiny_rss}");
    let h = &report.heap;
    assert!(h.missing.is_none(), "{h:?}");
    assert_eq!(
        h.allocator.as_deref(),
        Some("stemmon::Alloc<std::alloc::System>")
    );
    assert!(h.peak_live_bytes.unwrap() >= 500 * MIB, "{h:?}");
    assert!(h.allocated_bytes.unwrap() >= 500 * MIB, "{h:?}");
    assert!(h.live_bytes.unwrap() < h.peak_live_bytes.unwrap());
    let highest = report
        .timeline
        .iter()
        .filter_map(|p| p.heap_live_bytes)
        .max();
    assert!(highest.unwrap() >= 500 * MIB, "{:?}", report.timeline);
}

#[monitored]
fn boxes() -> u64 {
    let mut sum = 0;
    for i in 0..1000u64 {
        let boxed = Box::new(i);
        sum += **std::hint::black_box(&boxed);
    }
    sum
}

#[test]
fn a_known_loop_counts_exactly() {
    let _serial = serial();
    let monitor = start();
    // On a thread of its own, with nothing open on the monitor's thread: what other
    // threads of the test harness allocate meanwhile is swept to no stage.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for _ in 0..3 {
                assert_eq!(boxes(), 499_500);
            }
        });
    });
    let report = monitor.finish();
    // Three calls of 1000 boxes of 8 bytes, each freed at once: at most one held.
    assert_eq!(heap(stage(&report, "boxes")), (3000, 24_000, 24_000, 0, 8));
}

const BUFFER: usize = 3 << 20;

#[monitored]
fn make() -> Vec<u8> {
    vec![7u8; BUFFER]
}

#[monitored]
fn consume(buffer: Vec<u8>) -> usize {
    let len = buffer.len();
    drop(buffer);
    len
}

#[test]
fn memory_returned_to_the_caller_is_retained_by_its_maker_and_freed_by_a_later_stage() {
    let _serial = serial();
    let monitor = start();
    // On a thread of its own, as above.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let buffer = make();
            assert_eq!(consume(buffer), BUFFER);
        });
    });
    let report = monitor.finish();
    let n = BUFFER as u64;
    assert_eq!(heap(stage(&report, "make")), (1, n, 0, n as i64, n));
    assert_eq!(heap(stage(&report, "consume")), (0, 0, n, -(n as i64), 0));
}

#[monitored]
fn spiky() -> Vec<u8> {
    let big = std::hint::black_box(vec![1u8; 200 << 20]);
    drop(big);
    vec![2u8; 50 << 20]
}

#[monitored]
fn outer_of_spiky() -> usize {
    spiky().len()
}

#[test]
fn a_peak_inside_a_stage_is_its_highest_not_its_end() {
    let _serial = serial();
    let monitor = start();
    // On a thread of its own, as above.
    std::thread::scope(|scope| {
        scope.spawn(|| assert_eq!(outer_of_spiky(), 50 << 20));
    });
    let report = monitor.finish();
    let (_, allocated, freed, retained, peak) = heap(stage(&report, "outer_of_spiky/spiky"));
    assert!(within(peak, 200 * MIB, 0.01), "{peak}");
    assert!(within(retained as u64, 50 * MIB, 0.01), "{retained}");
    assert!(within(allocated, 250 * MIB, 0.01) && within(freed, 200 * MIB, 0.01));
    // The caller includes it, and freed the 50 MiB itself.
    let (_, allocated, freed, retained, peak) = heap(stage(&report, "outer_of_spiky"));
    assert!(within(peak, 200 * MIB, 0.01), "{peak}");
    assert!(within(allocated, 250 * MIB, 0.01) && within(freed, 250 * MIB, 0.01));
    assert!(retained.unsigned_abs() < 64 << 10, "{retained}");
}

#[monitored]
fn produce() -> Vec<u64> {
    vec![5u64; 1 << 18]
}

#[monitored]
fn drop_elsewhere(buffer: Vec<u64>) -> usize {
    let len = buffer.len();
    drop(buffer);
    len
}

#[test]
fn a_buffer_made_on_one_thread_and_dropped_on_another_counts_in_both_stages() {
    let _serial = serial();
    let monitor = start();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(move || tx.send(produce()).unwrap());
        scope.spawn(move || drop_elsewhere(rx.recv().unwrap()));
    });
    let report = monitor.finish();
    let n = 8u64 << 18;
    assert_eq!(heap(stage(&report, "produce")), (1, n, 0, n as i64, n));
    assert_eq!(
        heap(stage(&report, "drop_elsewhere")),
        (0, 0, n, -(n as i64), 0)
    );
}

#[monitored]
fn fit_parallel() -> usize {
    use rayon::prelude::*;
    (0..1000u32)
        .into_par_iter()
        .map(|i| std::hint::black_box(vec![i as u8; 4096]).len())
        .sum()
}

#[test]
fn rayon_workers_allocations_count_toward_the_stage_they_run_for() {
    let _serial = serial();
    // The pool's threads exist before the monitor: their start-up is nobody's.
    rayon::broadcast(|_| ());
    let monitor = start();
    assert_eq!(fit_parallel(), 4096 * 1000);
    let report = monitor.finish();
    let (allocations, allocated, freed, _, peak) = heap(stage(&report, "fit_parallel"));
    assert!(allocations >= 1000, "{allocations}");
    // Every buffer, counted once. Any thread with no stage open counts toward the
    // stage open on the monitor's thread (the test harness's threads too, the book's `guide/threads.md`):
    // the upper bound leaves room for them, not for a second count.
    assert!(
        (4096 * 1000..2 * 4096 * 1000).contains(&allocated),
        "{allocated}"
    );
    assert!(freed >= 4096 * 1000, "{freed}");
    // Each worker held a buffer at a time; the sum of the workers' highest.
    assert!((4096..8 << 20).contains(&peak), "{peak}");
}

#[monitored]
async fn fetch_two() -> usize {
    let first = std::hint::black_box(vec![1u8; 1 << 20]);
    tokio::task::yield_now().await;
    let second = std::hint::black_box(vec![2u8; 1 << 20]);
    tokio::task::yield_now().await;
    first.len() + second.len()
}

#[test]
fn an_async_stage_on_tokio_workers_sums_its_polls() {
    let _serial = serial();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let monitor = start();
    let len = runtime.block_on(async { tokio::spawn(fetch_two()).await.unwrap() });
    assert_eq!(len, 2 << 20);
    let report = monitor.finish();
    drop(runtime);
    let (allocations, allocated, freed, retained, peak) = heap(stage(&report, "fetch_two"));
    assert!(allocations >= 2, "{allocations}");
    assert!(
        (2 * MIB..2 * MIB + (64 << 10)).contains(&allocated),
        "{allocated}"
    );
    assert!((2 * MIB..2 * MIB + (64 << 10)).contains(&freed), "{freed}");
    assert!(retained.unsigned_abs() < 64 << 10, "{retained}");
    // The highest of one poll (measured from that poll's entry, the book's `heap.md`).
    assert!((MIB..2 * MIB + (64 << 10)).contains(&peak), "{peak}");
}

#[monitored]
fn short_lived() -> Vec<u8> {
    vec![3u8; 1 << 20]
}

#[test]
fn a_thread_that_exits_before_finish_keeps_its_counts() {
    let _serial = serial();
    let monitor = start();
    let held = std::thread::spawn(short_lived).join().unwrap();
    let report = monitor.finish();
    assert_eq!(held.len(), 1 << 20);
    let n = 1u64 << 20;
    assert_eq!(heap(stage(&report, "short_lived")), (1, n, 0, n as i64, n));
}

#[monitored]
fn brief(n: usize) -> usize {
    std::hint::black_box(vec![5u8; n]).len()
}

#[test]
fn more_threads_over_a_run_than_heap_slots_each_count_toward_their_stage() {
    let _serial = serial();
    let monitor = start();
    // More threads than there are slots (4096), four at a time: each hands its slot
    // on as it exits, and a thread that starts later continues its counters.
    const SPAWNERS: u64 = 4;
    const EACH: u64 = 1_500;
    std::thread::scope(|scope| {
        for _ in 0..SPAWNERS {
            scope.spawn(|| {
                for _ in 0..EACH {
                    assert_eq!(std::thread::spawn(|| brief(4096)).join().unwrap(), 4096);
                }
            });
        }
    });
    let report = monitor.finish();
    let threads = SPAWNERS * EACH;
    assert_eq!(stage(&report, "brief").calls, threads);
    let (allocations, allocated, freed, retained, peak) = heap(stage(&report, "brief"));
    let n = threads * 4096;
    assert_eq!(
        (allocations, allocated, freed, retained),
        (threads, n, n, 0)
    );
    // The sum of each slot's highest: a few slots took turns.
    assert!((4096..=64 * 4096).contains(&peak), "{peak}");
}

#[test]
fn a_thread_on_a_handed_on_slot_gets_its_own_peak_not_the_last_owners() {
    let _serial = serial();
    // A thread that held 8 MiB and exited: its slot, handed on, last peaked there.
    std::thread::spawn(|| drop(std::hint::black_box(vec![7u8; 8 << 20])))
        .join()
        .unwrap();
    let monitor = start();
    let (go, may_go) = mpsc::channel::<()>();
    let (done, is_done) = mpsc::channel();
    std::thread::scope(|scope| {
        // The next thread to start takes that slot; nothing open on it, so what it
        // holds is swept to the stage open on the monitor's thread.
        scope.spawn(move || {
            may_go.recv().unwrap();
            drop(std::hint::black_box(vec![8u8; 1 << 20]));
            done.send(()).unwrap();
        });
        let _fork = monitor.stage("fork").unwrap();
        go.send(()).unwrap();
        is_done.recv().unwrap();
    });
    let report = monitor.finish();
    let (_, allocated, _, _, peak) = heap(stage(&report, "fork"));
    assert!(allocated >= MIB, "{allocated}");
    // Its 1 MiB: not nothing (below the last owner's 8 MiB), not the 8 MiB.
    assert!((MIB..4 * MIB).contains(&peak), "{peak}");
}

#[test]
fn a_thread_that_takes_an_ended_samplers_slot_is_charged_only_its_own() {
    let _serial = serial();
    let monitor = start();
    let (ended, has_ended) = mpsc::channel();
    let (leave, may_leave) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        // A second monitor, of its own thread, whose sampler allocates at every sample
        // (on a slot of its own, skipped by the first monitor's sweeps) and exits at
        // its finish, handing the slot on; its thread stays, so that the sampler's slot
        // is the next one handed out.
        scope.spawn(move || {
            let other = Monitor::builder()
                .log_interval(None)
                .sample_interval(Duration::from_millis(1))
                .current_thread_only()
                .start()
                .unwrap();
            wait_for_samples(&other, 50);
            drop(other.finish());
            ended.send(()).unwrap();
            may_leave.recv().unwrap();
        });
        has_ended.recv().unwrap();
        // The first monitor's sweeps saw the ended sampler's slot since.
        wait_for_samples(&monitor, 2);
        let (go, may_go) = mpsc::channel::<()>();
        let (done, is_done) = mpsc::channel();
        let worker = scope.spawn(move || {
            may_go.recv().unwrap();
            // Nothing open on this thread: swept to the stage open on the monitor's.
            let block = std::hint::black_box(vec![6u8; 1 << 20]);
            done.send(block.len()).unwrap();
        });
        {
            let _fork = monitor.stage("fork").unwrap();
            go.send(()).unwrap();
            assert_eq!(is_done.recv().unwrap(), 1 << 20);
        }
        worker.join().unwrap();
        leave.send(()).unwrap();
    });
    let report = monitor.finish();
    let (allocations, allocated, _, _, _) = heap(stage(&report, "fork"));
    // The worker's one megabyte and a few small allocations, not the sampler's.
    assert!(allocations < 20, "{allocations} allocations");
    assert!(
        (MIB..MIB + (64 << 10)).contains(&allocated),
        "{allocated} bytes"
    );
}

#[test]
fn a_monitor_of_its_own_thread_charges_no_other_threads_allocations() {
    let _serial = serial();
    let monitor = Monitor::builder()
        .log_interval(None)
        .current_thread_only()
        .start()
        .unwrap();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let other = std::thread::spawn(move || {
        go_rx.recv().unwrap();
        let block = std::hint::black_box(vec![1u8; 8 << 20]);
        done_tx.send(()).unwrap();
        block.len()
    });
    {
        let _mine = monitor.stage("mine").unwrap();
        // The other thread allocates 8 MiB while `mine` is open.
        go_tx.send(()).unwrap();
        done_rx.recv().unwrap();
    }
    assert_eq!(other.join().unwrap(), 8 << 20);
    let report = monitor.finish();
    let (_, allocated, _, _, peak) = heap(stage(&report, "mine"));
    assert!(
        allocated < 64 << 10 && peak < 64 << 10,
        "{allocated} {peak}"
    );
}

#[monitored]
fn holding(ready: mpsc::Sender<()>, done: mpsc::Receiver<()>) -> usize {
    let block = std::hint::black_box(vec![4u8; 2 << 20]);
    ready.send(()).unwrap();
    done.recv().unwrap();
    block.len()
}

#[test]
fn a_call_still_open_shows_what_it_counted_so_far() {
    let _serial = serial();
    let monitor = start();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| holding(ready_tx, done_rx));
        ready_rx.recv().unwrap();
        let open = monitor.summary();
        let (allocations, allocated, _, retained, peak) = heap(stage(&open, "holding"));
        assert!(allocations >= 1, "{allocations}");
        assert!(
            (2 * MIB..2 * MIB + (64 << 10)).contains(&allocated),
            "{allocated}"
        );
        assert!(retained >= 2 << 20 && peak >= 2 << 20, "{retained} {peak}");
        done_tx.send(()).unwrap();
    });
    let report = monitor.finish();
    let (_, allocated, freed, retained, _) = heap(stage(&report, "holding"));
    // Closed: counted once, not again on top of what the open call showed.
    assert!(
        (2 * MIB..2 * MIB + (64 << 10)).contains(&allocated),
        "{allocated}"
    );
    assert!(
        freed >= 2 << 20 && retained.unsigned_abs() < 64 << 10,
        "{freed} {retained}"
    );
}
