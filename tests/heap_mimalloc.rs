//! `stemmon::Alloc` wrapping another allocator (mimalloc) as the real global
//! allocator: the same exact counts, and the report names the inner allocator.

use std::time::Duration;
use stemmon::{monitored, Monitor};
use stemmon_suite::serial;

#[global_allocator]
static ALLOC: stemmon::Alloc<mimalloc::MiMalloc> = stemmon::Alloc::new(mimalloc::MiMalloc);

#[monitored]
fn strings() -> usize {
    (0..500u32)
        .map(|i| std::hint::black_box(vec![i as u8; 40]).len())
        .sum()
}

#[monitored]
fn keep() -> Vec<u32> {
    vec![9; 1 << 20]
}

#[test]
fn mimalloc_wrapped_counts_exactly_and_is_named() {
    let _serial = serial();
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(20))
        .start()
        .unwrap();
    // On a thread of its own: nothing else is swept into these stages.
    let kept = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                assert_eq!(strings(), 500 * 40);
                keep()
            })
            .join()
            .unwrap()
    });
    let report = monitor.finish();
    assert_eq!(
        report.heap.allocator.as_deref(),
        Some("stemmon::Alloc<mimalloc::MiMalloc>")
    );
    let heap = &report.stage("strings").unwrap().heap;
    // One 40-byte buffer per item, each freed at once.
    assert_eq!(heap.heap_allocations, Some(500));
    assert_eq!(heap.heap_allocated_bytes, Some(500 * 40));
    assert_eq!(heap.heap_freed_bytes, Some(500 * 40));
    assert_eq!(heap.heap_retained_bytes, Some(0));
    assert_eq!(heap.peak_heap_bytes, Some(40));
    let heap = &report.stage("keep").unwrap().heap;
    assert_eq!(heap.heap_retained_bytes, Some(4 << 20));
    assert_eq!(heap.peak_heap_bytes, Some(4 << 20));
    assert_eq!(kept.len(), 1 << 20);
    assert!(report.heap.live_bytes.unwrap() >= 4 << 20);
}
