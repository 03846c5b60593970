//! The call-floor rows of the budget table, a module of `bench-table`: the `call_floor`
//! bench run three times (`call_floor_1` to `_3`), each ratio shown as its minimum and
//! its median over the runs, the budget read on the median (the book's `cost.md`).

use super::*;

/// How many times `bench/run` runs the `call_floor` bench.
const ROUNDS: u32 = 3;

/// One run's criterion medians of the group's functions, in nanoseconds, if every
/// function ran and recorded what it timed.
struct Round {
    plain: f64,
    clock: f64,
    attribute: f64,
    counting_layer: f64,
    tracing_layer: f64,
    fastrace: f64,
    hotpath: f64,
    /// Whether `#[monitored]` opened a stage at all (not with the `enabled` feature off).
    expanded: bool,
}

impl Round {
    fn read(round: u32) -> Option<Round> {
        let group = format!("call_floor_{round}");
        let ns = |function: &str| criterion_ns(&group, function);
        let recorded = result(&group)?;
        let count = |key: &str| recorded.get(key).and_then(Value::as_u64).unwrap_or(0);
        // A subject that recorded nothing timed nothing: the whole run is void. (fastrace
        // reports fewer spans than were timed: when its collector thread falls behind, its
        // bounded queue is full and the caller's thread keeps the rest in a queue of its
        // own, sent with its next spans; those still there at the end are never reported.)
        if count("stemmon_attribute_calls") == 0
            || count("stemmon_span_calls") == 0
            || count("counting_callbacks") == 0
            || count("fastrace_reported_spans") == 0
        {
            return None;
        }
        Some(Round {
            plain: ns("plain")?,
            clock: ns("clock")?,
            attribute: ns("attribute")?,
            counting_layer: ns("counting_layer")?,
            tracing_layer: ns("tracing_layer")?,
            fastrace: ns("fastrace")?,
            hotpath: ns("hotpath")?,
            expanded: recorded.get("macro_expanded").and_then(Value::as_bool) == Some(true),
        })
    }
}

/// The minimum and the median of `values` (not empty).
fn spread(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (values[0], median)
}

/// A row whose figures are `(ours, theirs)` per run: the medians of each side shown, the
/// ratio as "min / median", met when the median ratio meets `met`.
fn floor_row(
    figure: &str,
    peer: &str,
    per_round: &[(f64, f64)],
    budget: &str,
    met: impl Fn(f64) -> bool,
    show: impl Fn(f64) -> String,
) -> Row {
    let (_, ours) = spread(per_round.iter().map(|r| r.0).collect());
    let (_, theirs) = spread(per_round.iter().map(|r| r.1).collect());
    let (min, median) = spread(per_round.iter().map(|r| r.0 / r.1).collect());
    Row {
        figure: format!("{figure} ({} runs)", per_round.len()),
        stemmon: show(ours),
        peer: peer.to_owned(),
        peer_value: show(theirs),
        ratio: format!("min {min:.2}, median {median:.2}"),
        budget: budget.to_owned(),
        status: Status::of(met(median)),
    }
}

/// The `call_floor` rows: bookkeeping over the clock, the call beside fastrace and
/// hotpath, the `TracingLayer` span beside a counting layer's.
pub(super) fn call_floor(rows: &mut Vec<Row>) {
    const BOOKKEEPING_NS: f64 = 10.0;
    const TRACING: f64 = 1.5;
    let bookkeeping = "active #[monitored] call: bookkeeping over its two clock reads";
    let fastrace = "active #[monitored] call, added";
    let tracing = "tracing span new + enter + exit + close: TracingLayer, active monitor";
    let rounds: Vec<Round> = (1..=ROUNDS).filter_map(Round::read).collect();
    if rounds.is_empty() {
        rows.push(missing(bookkeeping, &format!("≤ +{BOOKKEEPING_NS} ns")));
        rows.push(missing(fastrace, "< peer (ratio < 1)"));
        rows.push(missing(fastrace, "< peer (ratio < 1)"));
        rows.push(missing(tracing, &format!("≤ {TRACING}× peer")));
        return;
    }
    let expanded = rounds.iter().all(|r| r.expanded);
    let per = |f: &dyn Fn(&Round) -> (f64, f64)| rounds.iter().map(f).collect::<Vec<_>>();
    // The call less the clock, beside the clock's reads less the body alone.
    let over_clock = per(&|r| (r.attribute - r.clock, r.clock - r.plain));
    let (_, median_over) = spread(over_clock.iter().map(|r| r.0).collect());
    let mut row = floor_row(
        bookkeeping,
        "the two clock reads around the body, added",
        &over_clock,
        &format!("≤ +{BOOKKEEPING_NS} ns"),
        |_| median_over <= BOOKKEEPING_NS,
        added,
    );
    if !expanded {
        row.status = Status::Pending;
    }
    rows.push(row);
    for (peer, name) in [
        (
            per(&|r| (r.attribute - r.plain, r.fastrace - r.plain)),
            "fastrace #[trace] local span (root per 1 000, reported)",
        ),
        (
            per(&|r| (r.attribute - r.plain, r.hotpath - r.plain)),
            "hotpath #[measure]",
        ),
    ] {
        let mut row = floor_row(
            fastrace,
            name,
            &peer,
            "< peer (ratio < 1)",
            |m| m < 1.0,
            added,
        );
        if !expanded {
            row.status = Status::Pending;
        }
        rows.push(row);
    }
    rows.push(floor_row(
        tracing,
        "same span, registry + counting layer",
        &per(&|r| (r.tracing_layer, r.counting_layer)),
        &format!("≤ {TRACING}× peer"),
        |m| m <= TRACING,
        time,
    ));
}
