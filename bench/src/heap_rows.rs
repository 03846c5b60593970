//! The heap bench's rows of the budget table (the book's `heap.md`), a module of `bench-table`:
//! `stemmon::Alloc` per allocation + free pair over System, with and without a
//! monitor, on two threads, beside `stats_alloc` and hotpath's allocation mode, and
//! an active `#[monitored]` call with `Alloc` installed beside the old peers.

use super::{added, criterion_ns, fastest_batch, missing, time, within, Row, Status};

/// The rows of the `test_limits` bench: a pair inside a `#[stemmon::test]` beside plain
/// heap monitoring (a monitor and a stage), for context (no budget).
pub(super) fn test_limits(rows: &mut Vec<Row>) {
    let fastest = fastest_batch("test_limits");
    for (figure, system, ours) in [
        (
            "alloc+free pair, monitor + stage (fastest)",
            "system_in_stage",
            "alloc_monitor_stage",
        ),
        (
            "alloc+free pair, inside #[stemmon::test] (fastest)",
            "system_in_test",
            "alloc_in_test",
        ),
    ] {
        let (Some(system), Some(ours)) = (fastest(system), fastest(ours)) else {
            rows.push(missing(figure, "—"));
            continue;
        };
        rows.push(Row {
            figure: figure.into(),
            stemmon: format!("{} ({})", added(ours - system), time(ours)),
            peer: "System alone".into(),
            peer_value: time(system),
            ratio: format!("{:.2}", ours / system),
            budget: "—".into(),
            status: Status::Info,
        });
    }
}

/// Every row of the heap bench.
pub(super) fn heap(rows: &mut Vec<Row>) {
    let system = criterion_ns("heap", "system");
    let no_monitor = criterion_ns("heap", "alloc_no_monitor");
    let in_stage = criterion_ns("heap", "alloc_monitor_stage");
    for (figure, ours, limit) in [
        (
            "alloc+free pair, no monitor: stemmon::Alloc",
            no_monitor,
            2.0,
        ),
        (
            "alloc+free pair, monitor running, in a stage: stemmon::Alloc",
            in_stage,
            8.0,
        ),
    ] {
        let budget = format!("≤ +{} added", time(limit));
        let (Some(system), Some(ours)) = (system, ours) else {
            rows.push(missing(figure, &budget));
            continue;
        };
        rows.push(Row {
            figure: figure.into(),
            stemmon: format!("{} ({})", added(ours - system), time(ours)),
            peer: "System alone".into(),
            peer_value: time(system),
            ratio: format!("{:.2}", ours / system),
            budget,
            status: Status::of(ours - system <= limit),
        });
    }
    // The same, timed in alternating batches (the fastest of each): steadier on a
    // shared machine than the medians above.
    let fastest = fastest_batch("heap");
    for (figure, system, ours, limit) in [
        (
            "alloc+free pair, no monitor, alternating batches (fastest)",
            fastest("system"),
            fastest("alloc_no_monitor"),
            2.0,
        ),
        (
            "alloc+free pair, monitor + stage, alternating batches (fastest)",
            fastest("system_in_stage"),
            fastest("alloc_monitor_stage"),
            8.0,
        ),
    ] {
        let budget = format!("≤ +{} added", time(limit));
        let (Some(system), Some(ours)) = (system, ours) else {
            rows.push(missing(figure, &budget));
            continue;
        };
        rows.push(Row {
            figure: figure.into(),
            stemmon: format!("{} ({})", added(ours - system), time(ours)),
            peer: "System alone".into(),
            peer_value: time(system),
            ratio: format!("{:.2}", ours / system),
            budget,
            status: Status::of(ours - system <= limit),
        });
    }
    if let (Some(system), Some(ours), Some(theirs)) = (
        fastest("system"),
        fastest("alloc_no_monitor"),
        fastest("stats_alloc"),
    ) {
        let (ours, theirs) = ((ours - system).max(0.0), theirs - system);
        rows.push(Row {
            figure: "alloc+free pair added over System, alternating batches (fastest)".into(),
            stemmon: added(ours),
            peer: "stats_alloc `StatsAlloc<System>`".into(),
            peer_value: added(theirs),
            ratio: format!("{:.2}", ours / theirs),
            budget: "< peer (ratio < 1)".into(),
            status: Status::of(ours < theirs),
        });
    }
    let (one, two) = (
        criterion_ns("heap", "one_thread"),
        criterion_ns("heap", "two_threads"),
    );
    let figure = "alloc+free pair, 2 threads at once (per pair)";
    match (one, two) {
        (Some(one), Some(two)) => rows.push(within(
            figure,
            two,
            "same, 1 thread alone",
            one,
            "≤ 1.2× peer".into(),
            1.2,
        )),
        _ => rows.push(missing(figure, "≤ 1.2× peer")),
    }
    if let (Some(one), Some(two)) = (
        criterion_ns("heap", "one_thread_system"),
        criterion_ns("heap", "two_threads_system"),
    ) {
        rows.push(Row {
            figure: "System alone, 2 threads at once (per pair): the machine's scaling".into(),
            stemmon: "—".into(),
            peer: "same, 1 thread alone".into(),
            peer_value: format!("{} / {}", time(two), time(one)),
            ratio: format!("{:.2}", two / one),
            budget: "—".into(),
            status: Status::Info,
        });
    }
    for (peer, name) in [
        (
            criterion_ns("heap", "stats_alloc"),
            "stats_alloc `StatsAlloc<System>`",
        ),
        (
            criterion_ns("heap_hotpath", "hotpath_alloc"),
            "hotpath alloc mode (hotpath-alloc)",
        ),
    ] {
        let figure = "alloc+free pair added over System, monitor + stage";
        let budget = "< peer (ratio < 1)";
        let (Some(system), Some(ours), Some(theirs)) = (system, in_stage, peer) else {
            rows.push(missing(figure, budget));
            continue;
        };
        // A cost at or below System's counts as nothing added.
        let (ours, theirs) = ((ours - system).max(0.0), theirs - system);
        rows.push(Row {
            figure: figure.into(),
            stemmon: added(ours),
            peer: name.into(),
            peer_value: added(theirs),
            ratio: format!("{:.2}", ours / theirs),
            budget: budget.into(),
            status: Status::of(ours < theirs),
        });
    }
    let plain = criterion_ns("heap_active", "plain");
    let attribute = criterion_ns("heap_active", "attribute");
    let active_plain = criterion_ns("active", "plain");
    for (peer, name) in [
        ("tracing", "tracing #[instrument] (registry + layer)"),
        ("hotpath", "hotpath #[measure]"),
    ] {
        let figure = "call, active monitor, stemmon::Alloc installed: #[monitored]";
        let budget = "< peer (ratio < 1)";
        let theirs = criterion_ns("active", peer);
        let (Some(plain), Some(with), Some(active_plain), Some(theirs)) =
            (plain, attribute, active_plain, theirs)
        else {
            rows.push(missing(figure, budget));
            continue;
        };
        let (ours, theirs) = (with - plain, theirs - active_plain);
        rows.push(Row {
            figure: figure.into(),
            stemmon: added(ours),
            peer: name.into(),
            peer_value: added(theirs),
            ratio: format!("{:.2}", ours / theirs),
            budget: budget.into(),
            status: Status::of(ours < theirs),
        });
    }
}
