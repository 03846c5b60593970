//! The call-path rows of the budget table, a module of `bench-table`: a call on other
//! threads (the book's `cost.md`), a whole run's overhead, a stage boundary's reading, and the `tracing`
//! layer beside its peers (the book's `tracing.md`).

use super::*;

/// Bench 5: a call on a worker thread and on two threads at once, and the scale figures.
pub(super) fn threads(rows: &mut Vec<Row>) {
    let owner = criterion_ns("threads", "owner");
    let worker = criterion_ns("threads", "worker");
    let two = criterion_ns("threads", "two_workers");
    for (figure, ours, peer, theirs, limit) in [
        (
            "#[monitored] call on a worker thread",
            worker,
            "same call on the monitor's thread",
            owner,
            1.2,
        ),
        (
            "#[monitored] call, 2 threads at once",
            two,
            "same call, 1 worker alone",
            worker,
            1.5,
        ),
    ] {
        let budget = format!("≤ {limit}× peer");
        let (Some(ours), Some(theirs)) = (ours, theirs) else {
            rows.push(missing(figure, &budget));
            continue;
        };
        rows.push(within(figure, ours, peer, theirs, budget, limit));
    }
    let scale = result("scale");
    let figure = |key: &str| scale.as_ref()?.get(key)?.as_f64();
    for (figure_name, key, limit, unit) in [
        (
            "100 000 distinct stage paths",
            "distinct_paths_seconds",
            5.0,
            "s",
        ),
        ("recursion 10 000 deep", "recursion_seconds", 10.0, "s"),
        (
            "report after recursion 10 000 deep",
            "recursion_report_bytes",
            64.0 * 1024.0 * 1024.0,
            "B",
        ),
    ] {
        let budget = if unit == "s" {
            format!("< {limit} s")
        } else {
            format!("< {}", bytes(limit))
        };
        let Some(ours) = figure(key) else {
            rows.push(missing(figure_name, &budget));
            continue;
        };
        rows.push(Row {
            figure: figure_name.into(),
            stemmon: if unit == "s" {
                format!("{ours:.3} s")
            } else {
                bytes(ours)
            },
            peer: "(no peer)".into(),
            peer_value: "—".into(),
            ratio: "—".into(),
            budget,
            status: Status::of(ours < limit),
        });
    }
    let (Some(logged), Some(quiet)) = (
        figure("first_completions_logged_seconds"),
        figure("first_completions_quiet_seconds"),
    ) else {
        rows.push(missing("100 000 first completions, log + output file", "—"));
        return;
    };
    rows.push(Row {
        figure: "100 000 first completions, log + output file".into(),
        stemmon: format!("{logged:.3} s"),
        peer: "same, log off, no file".into(),
        peer_value: format!("{quiet:.3} s"),
        ratio: format!("{:.2}", logged / quiet),
        budget: "(no I/O on the caller's thread)".into(),
        status: Status::Info,
    });
}

/// Bench 6: `stemmon run -- CMD` beside CMD run bare: criterion's two halves (one
/// after the other), and the median ratio of pairs timed alternately, which the budget
/// reads.
pub(super) fn run_overhead(rows: &mut Vec<Row>) {
    const BUDGET: f64 = 1.02;
    let figure = "`stemmon run -- CMD`, CMD about 2 s of CPU, 1 s sampling";
    let budget = format!("≤ {BUDGET}× peer");
    if let (Some(ours), Some(theirs)) = (
        criterion_ns("run", "stemmon_run"),
        criterion_ns("run", "bare"),
    ) {
        rows.push(Row {
            figure: format!("{figure} (criterion, one half after the other)"),
            stemmon: time(ours),
            peer: "the same CMD run bare".into(),
            peer_value: time(theirs),
            ratio: format!("{:.3}", ours / theirs),
            budget: "—".into(),
            status: Status::Info,
        });
    }
    let alternating = result("run_overhead").and_then(|r| {
        Some((
            r.get("stemmon_fastest_ms")?.as_f64()?,
            r.get("bare_fastest_ms")?.as_f64()?,
            r.get("median_ratio")?.as_f64()?,
        ))
    });
    let Some((ours, theirs, ratio)) = alternating else {
        rows.push(missing(figure, &budget));
        return;
    };
    rows.push(Row {
        figure: format!("{figure} (pairs timed alternately: fastest of each, median ratio)"),
        stemmon: time(ours * 1e6),
        peer: "the same CMD run bare".into(),
        peer_value: time(theirs * 1e6),
        ratio: format!("{ratio:.3}"),
        budget,
        status: Status::of(ratio <= BUDGET),
    });
}

/// The stage-boundary reading with CPU and I/O (the book's `cpu-io.md`) beside the same reading
/// without them; the thread's clock, read at a call's exit, counts as added too.
pub(super) fn boundary(rows: &mut Vec<Row>) {
    const BUDGET_NS: f64 = 1_000.0;
    let figure = "stage-boundary reading with CPU and I/O (+ the thread's clock)";
    let budget = "≤ +1 µs".to_owned();
    let interleaved = |key: &str| result("boundary")?.get(key)?.as_f64();
    let figures = (
        interleaved("with_cpu_ns").or_else(|| criterion_ns("boundary", "with_cpu")),
        interleaved("without_cpu_ns").or_else(|| criterion_ns("boundary", "without_cpu")),
        interleaved("thread_clock_ns").or_else(|| criterion_ns("boundary", "thread_clock")),
    );
    let (Some(with), Some(without), Some(clock)) = figures else {
        rows.push(missing(figure, &budget));
        return;
    };
    let added_ns = with - without + clock;
    rows.push(Row {
        figure: figure.into(),
        stemmon: format!("{} ({} with the clock)", time(with), time(with + clock)),
        peer: "the same reading without CPU and I/O".into(),
        peer_value: time(without),
        ratio: added(added_ns),
        budget,
        status: Status::of(added_ns <= BUDGET_NS),
    });
}

/// The peer of the `tracing` layer's rows.
const PEER: &str = "same span, registry + counting layer";

/// Bench 7: a `tracing` span under `TracingLayer` with a monitor running, beside the same
/// span under a registry with a layer that only counts callbacks (the book's `tracing.md`).
pub(super) fn tracing_layer(rows: &mut Vec<Row>) {
    const BUDGET: f64 = 1.5;
    let figure = "tracing span new + enter + exit + close, TracingLayer, active monitor";
    let budget = format!("≤ {BUDGET}× peer");
    let recorded = result("tracing_layer")
        .and_then(|r| r.get("stemmon_span_calls")?.as_u64())
        .unwrap_or(0);
    let (Some(ours), Some(theirs)) = (
        criterion_ns("tracing_layer", "stemmon"),
        criterion_ns("tracing_layer", "counting"),
    ) else {
        rows.push(missing(figure, &budget));
        return;
    };
    let mut row = within(figure, ours, PEER, theirs, budget.clone(), BUDGET);
    if recorded == 0 {
        // A layer that recorded no span timed nothing.
        row.status = Status::Missing;
    }
    rows.push(row);
    // The same two, timed alternately batch by batch (fastest batch of each side).
    let figure = "the same span, timed alternately with the peer (fastest batch)";
    let alternating = result("tracing_layer").and_then(|r| {
        let ours = r.get("alternating_stemmon_ns")?.as_f64()?;
        let theirs = r.get("alternating_counting_ns")?.as_f64()?;
        Some((ours, theirs))
    });
    let Some((ours, theirs)) = alternating.filter(|_| recorded > 0) else {
        rows.push(missing(figure, &budget));
        return;
    };
    rows.push(within(figure, ours, PEER, theirs, budget, BUDGET));
    // Where the cost goes, from the same alternation (no budget of their own).
    let floor = result("tracing_layer").and_then(|r| {
        // A subject that timed or recorded nothing has no figure.
        r.get("timing_spans")?.as_u64().filter(|&n| n > 0)?;
        r.get("stemmon_stage_calls")?.as_u64().filter(|&n| n > 0)?;
        let timing = r.get("alternating_timing_ns")?.as_f64()?;
        let stage = r.get("alternating_stage_ns")?.as_f64()?;
        let clock = r.get("alternating_clock_ns")?.as_f64()?;
        Some((timing, stage, clock))
    });
    let figure = "floor: the same span, a layer that only times it (clock at enter and close)";
    let engine = "engine alone: the same body as a #[monitored] call, no span";
    let bookkeeping = "engine's bookkeeping: that call less two clock reads around the body";
    let Some((timing, stage, clock)) = floor else {
        rows.push(missing(figure, "—"));
        rows.push(missing(engine, "—"));
        rows.push(missing(bookkeeping, "—"));
        return;
    };
    rows.push(Row {
        figure: figure.into(),
        stemmon: time(timing),
        peer: PEER.into(),
        peer_value: time(theirs),
        ratio: format!("{:.2}", timing / theirs),
        budget: "—".into(),
        status: Status::Info,
    });
    let allowance = (BUDGET - 1.0) * theirs;
    rows.push(Row {
        figure: engine.into(),
        stemmon: time(stage),
        peer: format!(
            "the budget's allowance: {:.1} × the counting span",
            BUDGET - 1.0
        ),
        peer_value: time(allowance),
        ratio: format!("{:.2}", stage / allowance),
        budget: "—".into(),
        status: Status::Info,
    });
    // What a span may add to the timing-only floor within the budget, beside what the
    // engine does per call besides reading the clock: the budget is out of reach of any
    // layer while the first is the smaller.
    let room = BUDGET * theirs - timing;
    rows.push(Row {
        figure: bookkeeping.into(),
        stemmon: format!(
            "{} ({} − {} clock)",
            time(stage - clock),
            time(stage),
            time(clock)
        ),
        peer: format!("the budget's room over the floor: {BUDGET} × the counting span − the floor"),
        peer_value: time(room),
        ratio: format!("{:.2}", (stage - clock) / room),
        budget: "—".into(),
        status: Status::Info,
    });
}
