//! Without `stemmon::Alloc` as the global allocator the heap figures are `null` and
//! the report says why (the book's `heap.md`).

use stemmon::{monitored, Monitor};
use stemmon_suite::serial;

#[monitored]
fn load() -> usize {
    std::hint::black_box(vec![0u8; 1 << 20]).len()
}

#[test]
fn without_the_allocator_the_heap_is_null_and_missing_says_why() {
    let _serial = serial();
    let monitor = Monitor::builder().log_interval(None).start().unwrap();
    assert_eq!(load(), 1 << 20);
    let report = monitor.finish();
    let heap = &report.heap;
    assert_eq!(
        heap.missing.as_deref(),
        Some("stemmon::Alloc is not the global allocator")
    );
    assert_eq!(
        (
            heap.allocator.as_ref(),
            heap.allocations,
            heap.allocated_bytes
        ),
        (None, None, None)
    );
    assert_eq!((heap.live_bytes, heap.peak_live_bytes), (None, None));
    let stage = report.stage("load").unwrap();
    assert_eq!(stage.heap, stemmon::report::StageHeap::default());
    assert!(report.timeline.iter().all(|p| p.heap_live_bytes.is_none()));
    // And in the file: every stage heap key is there, `null`.
    let json = serde_json::to_value(&report).unwrap();
    let keys = [
        "heap_allocations",
        "heap_allocated_bytes",
        "heap_freed_bytes",
        "heap_retained_bytes",
        "peak_heap_bytes",
    ];
    for key in keys {
        assert!(json["stages"][0][key].is_null(), "{key}: {json}");
    }
    assert!(json["heap"]["missing"].is_string());
}
