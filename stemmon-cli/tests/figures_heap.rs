//! The heap figures end to end: this test binary installs `stemmon::Alloc`, runs two
//! stages with known allocations under a real monitor, and the command reads the
//! report the runtime wrote: `show`'s heap columns, `compare --metric heap`, the plot's
//! heap line, the chrome trace's heap counter.

mod common;

use common::{chrome_counter_max, stemmon, TempDir, MIB};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: stemmon::Alloc = stemmon::Alloc::system();

/// The cells of the stage table's row for `name`, trimmed.
fn row(out: &str, name: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with('│'))
        .map(|l| {
            l.trim_matches('│')
                .split('┆')
                .map(|c| c.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .find(|cells| cells[0] == name)
        .unwrap_or_else(|| panic!("no row {name} in\n{out}"))
}

#[test]
fn the_heap_columns_of_a_real_run_match_what_its_stages_allocated() {
    let dir = TempDir::new("figures-heap");
    let path = dir.path().join("report.json");
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(20))
        .output(&path)
        .start()
        .unwrap();
    let kept = {
        let _stage = monitor.stage("hold");
        let mut block = vec![0u8; 64 * MIB as usize];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        block
    };
    // Still held, outside any stage (the summaries allocate), until two samples have
    // seen it: the timeline's live heap shows it.
    let seen = monitor.summary().samples;
    let deadline = Instant::now() + Duration::from_secs(60);
    while monitor.summary().samples < seen + 2 {
        assert!(Instant::now() < deadline, "the sampler never sampled");
        std::thread::yield_now();
    }
    {
        let _stage = monitor.stage("release");
        drop(kept);
    }
    let report = monitor.finish();
    assert!(report.heap.allocator.is_some(), "{:?}", report.heap);
    let hold = report.stage("hold").unwrap();
    let allocated = hold.heap.heap_allocated_bytes.unwrap();
    assert!(
        (64 * MIB..64 * MIB + MIB).contains(&allocated),
        "hold allocated {allocated}"
    );

    let out = stemmon().arg("show").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let header = row(&text, "stage");
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let hold_row = row(&text, "hold");
    assert_eq!(hold_row[at("heap allocated")], "64.0 MiB", "{text}");
    assert_eq!(hold_row[at("retained")], "64.0 MiB", "{text}");
    // `release` freed what `hold` made: it retains less than nothing.
    assert_eq!(row(&text, "release")[at("retained")], "-64.0 MiB", "{text}");
    assert!(text.contains("\nheap:       stemmon::Alloc"), "{text}");

    let out = stemmon()
        .arg("compare")
        .arg(&path)
        .arg(&path)
        .args(["--metric", "heap"])
        .output()
        .unwrap();
    let compared = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{compared}");
    assert!(compared.starts_with("memory compared: the bytes allocated on the heap"));

    let svg = dir.path().join("plot.svg");
    let out = stemmon()
        .arg("plot")
        .arg(&path)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains("id=\"heap\""));
    let most = chrome_counter_max(&path, "live heap", "MiB");
    assert!(
        (64.0..80.0).contains(&most),
        "the live heap counter: {most} MiB"
    );
}
