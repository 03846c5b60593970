//! Prints the budget table of a bench run: each stemmon figure beside its peer's from
//! the same run, the ratio, the budget (the book's `cost.md`) and whether it is met.
//!
//! Reads criterion's estimates (median per iteration) under `$CRITERION_HOME` and the
//! other figures under `$STEMMON_BENCH_OUT` (see `stemmon_bench::out_dir`); also writes
//! the table as Markdown to `table.md` there. Run by `bash bench/run`.

use serde_json::Value;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use stemmon_bench::{criterion_dir, out_dir};

#[path = "../call_rows.rs"]
mod call_rows;
#[path = "../floor_rows.rs"]
mod floor_rows;
#[path = "../heap_rows.rs"]
mod heap_rows;
#[path = "../sample_rows.rs"]
mod sample_rows;

/// One line of the table.
struct Row {
    figure: String,
    stemmon: String,
    peer: String,
    peer_value: String,
    ratio: String,
    budget: String,
    status: Status,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Met,
    NotMet,
    /// `#[monitored]` opened no stage (the `enabled` feature is off): its rows time nothing.
    Pending,
    /// The bench that makes this figure did not run or failed.
    Missing,
    /// A figure without a budget, shown for context.
    Info,
}

impl Status {
    fn of(met: bool) -> Status {
        if met {
            Status::Met
        } else {
            Status::NotMet
        }
    }

    fn label(self) -> &'static str {
        match self {
            Status::Met => "met",
            Status::NotMet => "NOT MET",
            Status::Pending => "NOT MEASURED: #[monitored] opened no stage",
            Status::Missing => "MISSING",
            Status::Info => "info",
        }
    }
}

/// Criterion's median time per iteration of `group/function`, in nanoseconds.
fn criterion_ns(group: &str, function: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(function)
        .join("new/estimates.json");
    read_json(&path)?
        .pointer("/median/point_estimate")?
        .as_f64()
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
}

fn result(name: &str) -> Option<Value> {
    read_json(&out_dir().join(format!("{name}.json")))
}

/// The fastest alternating batch of `key` in what bench `name` wrote
/// (`fastest_batch_ns`, see `stemmon_bench::fastest_alternating`).
fn fastest_batch(name: &str) -> impl Fn(&str) -> Option<f64> {
    let result = result(name);
    move |key| {
        result
            .as_ref()?
            .pointer(&format!("/fastest_batch_ns/{key}"))?
            .as_f64()
    }
}

fn time(ns: f64) -> String {
    match ns.abs() {
        n if n < 1e3 => format!("{ns:.2} ns"),
        n if n < 1e6 => format!("{:.1} µs", ns / 1e3),
        _ => format!("{:.2} ms", ns / 1e6),
    }
}

fn added(ns: f64) -> String {
    format!("{}{}", if ns < 0.0 { "" } else { "+" }, time(ns))
}

fn bytes(n: f64) -> String {
    match n.abs() {
        b if b < 1024.0 => format!("{n:.0} B"),
        b if b < 1024.0 * 1024.0 => format!("{:.1} KiB", n / 1024.0),
        _ => format!("{:.1} MiB", n / (1024.0 * 1024.0)),
    }
}

fn missing(figure: &str, budget: &str) -> Row {
    Row {
        figure: figure.to_owned(),
        stemmon: "—".into(),
        peer: "—".into(),
        peer_value: "—".into(),
        ratio: "—".into(),
        budget: budget.to_owned(),
        status: Status::Missing,
    }
}

/// A row of two times: ours beside the peer's, met when their ratio is at most `limit`.
fn within(
    figure: impl Into<String>,
    ours: f64,
    peer: impl Into<String>,
    theirs: f64,
    budget: String,
    limit: f64,
) -> Row {
    Row {
        figure: figure.into(),
        stemmon: time(ours),
        peer: peer.into(),
        peer_value: time(theirs),
        ratio: format!("{:.2}", ours / theirs),
        budget,
        status: Status::of(ours / theirs <= limit),
    }
}

/// Bench 1: the added cost of a call with no active monitor: criterion's medians, and
/// the same calls timed in alternating batches (the fastest of each), since the medians
/// are timed one after the other and drift between them is of the budget's size.
fn no_monitor(rows: &mut Vec<Row>, expanded: Option<bool>) {
    let fastest = fastest_batch("no_monitor");
    let medians = |key: &str| criterion_ns("no_monitor", key);
    no_monitor_rows(rows, expanded, &medians, "");
    no_monitor_rows(rows, expanded, &fastest, ", alternating batches (fastest)");
}

/// The `enter()` and `#[monitored]` rows of bench 1, with figures from `ns`.
fn no_monitor_rows(
    rows: &mut Vec<Row>,
    expanded: Option<bool>,
    ns: &dyn Fn(&str) -> Option<f64>,
    how: &str,
) {
    const BUDGET: f64 = 1.0;
    for (function, figure) in [
        ("enter", "call, no monitor: hand-written enter() guard"),
        ("attribute", "call, no monitor: #[monitored]"),
    ] {
        let figure = format!("{figure}{how}");
        let budget = format!("≤ +{} added", time(BUDGET));
        let (Some(plain), Some(with)) = (ns("plain"), ns(function)) else {
            rows.push(missing(&figure, &budget));
            continue;
        };
        let status = if function == "attribute" && expanded != Some(true) {
            Status::Pending
        } else {
            Status::of(with - plain <= BUDGET)
        };
        rows.push(Row {
            figure,
            stemmon: format!("{} ({})", added(with - plain), time(with)),
            peer: "same fn without it".into(),
            peer_value: time(plain),
            ratio: format!("{:.2}", with / plain),
            budget,
            status,
        });
    }
}

/// Bench 2: the added cost of a call under an active monitor, beside the peers.
fn active(rows: &mut Vec<Row>, expanded: Option<bool>) {
    let plain = criterion_ns("active", "plain");
    let peers = [
        ("tracing", "tracing #[instrument] (registry + layer)"),
        ("hotpath", "hotpath #[measure]"),
    ];
    for (function, figure) in [
        ("enter", "call, active monitor: hand-written enter() guard"),
        ("attribute", "call, active monitor: #[monitored]"),
    ] {
        for (peer, peer_name) in peers {
            let budget = "< peer (ratio < 1)".to_owned();
            let (Some(plain), Some(with), Some(other)) = (
                plain,
                criterion_ns("active", function),
                criterion_ns("active", peer),
            ) else {
                rows.push(missing(figure, &budget));
                continue;
            };
            let (ours, theirs) = (with - plain, other - plain);
            let status = if function == "attribute" && expanded != Some(true) {
                Status::Pending
            } else {
                Status::of(ours < theirs)
            };
            rows.push(Row {
                figure: figure.to_owned(),
                stemmon: added(ours),
                peer: peer_name.to_owned(),
                peer_value: added(theirs),
                ratio: format!("{:.2}", ours / theirs),
                budget,
                status,
            });
        }
    }
}

/// Bench 2, memory: what 10 million active calls leave behind.
fn footprint(rows: &mut Vec<Row>, expanded: Option<bool>) {
    const HEAP_BUDGET: f64 = 64.0 * 1024.0;
    const RSS_BUDGET: f64 = 1024.0 * 1024.0;
    let data = result("footprint");
    let figure =
        |key: &str, field: &str| data.as_ref()?.pointer(&format!("/{key}/{field}"))?.as_f64();
    let calls = data
        .as_ref()
        .and_then(|d| d.pointer("/stemmon_enter/calls")?.as_u64())
        .unwrap_or(10_000_000);
    let millions = calls / 1_000_000;
    for (key, name) in [
        ("stemmon_enter", "enter() guard"),
        ("stemmon_attribute", "#[monitored]"),
    ] {
        for (field, what, limit, peer) in [
            ("heap_growth_bytes", "heap", HEAP_BUDGET, "tracing"),
            ("heap_growth_bytes", "heap", HEAP_BUDGET, "hotpath"),
            ("rss_growth_bytes", "RSS", RSS_BUDGET, "hotpath"),
        ] {
            let figure_name = format!("{what} growth over {millions}M active calls: {name}");
            let budget = format!("constant: ≤ {}", bytes(limit));
            let (Some(ours), Some(theirs)) = (figure(key, field), figure(peer, field)) else {
                rows.push(missing(&figure_name, &budget));
                continue;
            };
            let status = if key == "stemmon_attribute" && expanded != Some(true) {
                Status::Pending
            } else {
                Status::of(ours <= limit)
            };
            rows.push(Row {
                figure: figure_name,
                stemmon: bytes(ours),
                peer: format!("{peer} (same calls)"),
                peer_value: bytes(theirs),
                ratio: "—".into(),
                budget,
                status,
            });
        }
    }
}

fn render(rows: &[Row]) -> String {
    let header = [
        "figure",
        "stemmon",
        "peer",
        "peer figure",
        "stemmon/peer",
        "budget",
        "result",
    ];
    let cells: Vec<[&str; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.figure.as_str(),
                r.stemmon.as_str(),
                r.peer.as_str(),
                r.peer_value.as_str(),
                r.ratio.as_str(),
                r.budget.as_str(),
                r.status.label(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str; 7]| {
        let mut out = String::from("|");
        for (cell, width) in cells.iter().zip(widths) {
            let pad = width - cell.chars().count();
            let _ = write!(out, " {cell}{} |", " ".repeat(pad));
        }
        out.push('\n');
        out
    };
    let mut out = line(&header);
    out.push('|');
    for width in widths {
        let _ = write!(out, "{}|", "-".repeat(width + 2));
    }
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row));
    }
    out
}

fn main() {
    let expanded = result("active_call").and_then(|r| r.get("macro_expanded")?.as_bool());
    let mut rows = Vec::new();
    no_monitor(&mut rows, expanded);
    active(&mut rows, expanded);
    floor_rows::call_floor(&mut rows);
    footprint(&mut rows, expanded);
    sample_rows::tree(&mut rows);
    sample_rows::tree_floor(&mut rows);
    sample_rows::whole_sample(&mut rows);
    call_rows::boundary(&mut rows);
    sample_rows::sampler(&mut rows);
    call_rows::threads(&mut rows);
    call_rows::run_overhead(&mut rows);
    call_rows::tracing_layer(&mut rows);
    heap_rows::heap(&mut rows);
    heap_rows::test_limits(&mut rows);
    sample_rows::gpu_sample(&mut rows);

    let table = render(&rows);
    println!("{table}");
    let count = |status| rows.iter().filter(|r| r.status == status).count();
    let budgeted = rows
        .iter()
        .filter(|r| matches!(r.status, Status::Met | Status::NotMet))
        .count();
    println!(
        "{} of {budgeted} budgets met; {} not met; {} not measured (#[monitored] opened no stage); {} missing",
        count(Status::Met),
        count(Status::NotMet),
        count(Status::Pending),
        count(Status::Missing),
    );
    println!("Times are criterion medians per call; added = call minus the same fn without instrumentation, same run.");
    if let Err(error) = fs::write(out_dir().join("table.md"), &table) {
        eprintln!("could not write table.md: {error}");
    }
}
