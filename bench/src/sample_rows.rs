//! The sampler's rows of the budget table, a module of `bench-table`: a tree sample
//! beside sysinfo and psutil and beside its floor (the book's `cost.md`), the GPU reading beside bare NVML
//! (the book's `gpu.md`), and the sampler thread's CPU.

use super::*;

/// Bench 3: one full tree sample (RSS and high-water marks) beside sysinfo and psutil;
/// the budgets are 1/4 and 1/8 of theirs at 10 descendants, 1/2 and 1/4 at 100.
pub(super) fn tree(rows: &mut Vec<Row>) {
    for (size, sysinfo_budget, psutil_budget) in [(10, 4.0, 8.0), (100, 2.0, 4.0)] {
        let group = format!("tree_{size}");
        let ours = criterion_ns(&group, "stemmon");
        let psutil = result(&group).and_then(|r| r.pointer("/psutil/median_ns")?.as_f64());
        let peers = [
            (
                "sysinfo all-process refresh",
                criterion_ns(&group, "sysinfo"),
                Some(sysinfo_budget),
            ),
            (
                "psutil children(recursive) + memory_info",
                psutil,
                Some(psutil_budget),
            ),
            (
                "sysinfo refresh without tasks",
                criterion_ns(&group, "sysinfo_no_tasks"),
                None,
            ),
        ];
        for (peer, theirs, factor) in peers {
            let figure = format!("one tree sample, {size} descendants");
            let budget = factor.map_or("—".into(), |f| format!("≤ 1/{f} of peer"));
            let (Some(ours), Some(theirs)) = (ours, theirs) else {
                rows.push(missing(&figure, &budget));
                continue;
            };
            let ratio = ours / theirs;
            rows.push(Row {
                figure,
                stemmon: time(ours),
                peer: peer.to_owned(),
                peer_value: time(theirs),
                ratio: format!("{ratio:.3} (1/{:.1})", 1.0 / ratio),
                budget,
                status: factor.map_or(Status::Info, |f| Status::of(ratio <= 1.0 / f)),
            });
        }
    }
}

/// Bench 3, beside its floor: the same sample as the `pread`s and writes alone through
/// kept descriptors (`stemmon_bench::Floor`), same tree, same run, the two timed
/// alternately; at most 1.3× of it.
pub(super) fn tree_floor(rows: &mut Vec<Row>) {
    const BUDGET: f64 = 1.3;
    for size in [10, 100] {
        let group = format!("tree_{size}");
        let figure = format!("tree sample vs floor, {size} descendants");
        let budget = format!("≤ {BUDGET}× floor");
        // The medians of the two timed alternately (the bench's `interleaved`): on a
        // machine whose load shifts between criterion's runs, the ratio that holds.
        let data = result(&group);
        let interleaved = |key: &str| {
            data.as_ref()?
                .pointer(&format!("/interleaved/{key}"))?
                .as_f64()
        };
        let (Some(ours), Some(floor)) = (
            interleaved("stemmon_ns").or_else(|| criterion_ns(&group, "stemmon")),
            interleaved("floor_ns").or_else(|| criterion_ns(&group, "floor")),
        ) else {
            rows.push(missing(&figure, &budget));
            continue;
        };
        let files = data
            .as_ref()
            .and_then(|r| {
                let processes = r.get("floor_processes")?.as_u64()?;
                let tasks = r.get("floor_children_files")?.as_u64()?;
                Some(format!(
                    " ({processes} status + {processes} clear_refs + {processes} stat + {processes} io + {tasks} children)"
                ))
            })
            .unwrap_or_default();
        rows.push(within(
            figure,
            ours,
            format!("floor: kept-fd pread/write only{files}"),
            floor,
            budget,
            BUDGET,
        ));
    }
}

/// Bench 3, the whole sample: a running monitor's `sampling_seconds / sampling_attempts`
/// (its reading, the sources and the fold into the open stages) beside the floor, in
/// alternating rounds; at most 1.3× of it. Then what the measurements add to it.
pub(super) fn whole_sample(rows: &mut Vec<Row>) {
    const BUDGET: f64 = 1.3;
    for size in [10, 100] {
        let group = format!("tree_{size}");
        let figure = format!("whole sample of a running monitor vs floor, {size} descendants");
        let budget = format!("≤ {BUDGET}× floor");
        let data = result(&group);
        let figure_of = |key: &str| {
            data.as_ref()?
                .pointer(&format!("/whole_sample/{key}"))?
                .as_f64()
        };
        let (Some(ours), Some(floor)) = (figure_of("monitor_ns"), figure_of("floor_ns")) else {
            rows.push(missing(&figure, &budget));
            continue;
        };
        rows.push(within(
            figure,
            ours,
            "floor: kept-fd pread/write only, timed in the rounds between".to_owned(),
            floor,
            budget,
            BUDGET,
        ));
        measurements(rows, size, data.as_ref());
    }
}

/// The measurements read at samples (open descriptors, memory pressure, the GPU): the
/// whole sample with them beside the same monitor's without them, in the same rounds
/// (the median round of their ratio); at most 5% more, the noise of one round.
fn measurements(rows: &mut Vec<Row>, size: u32, data: Option<&serde_json::Value>) {
    const BUDGET: f64 = 1.05;
    let figure = format!("whole sample with the measurements vs without, {size} descendants");
    let budget = format!("≤ {BUDGET}× without");
    let figure_of = |key: &str| data?.pointer(&format!("/measurements/{key}"))?.as_f64();
    let (Some(with), Some(without)) = (figure_of("with_ns"), figure_of("without_ns")) else {
        rows.push(missing(&figure, &budget));
        return;
    };
    rows.push(within(
        figure,
        with,
        "the same monitor without them, in the same rounds".to_owned(),
        without,
        budget,
        BUDGET,
    ));
}

/// The GPU reading beside the same NVML calls made bare (the book's `gpu.md`), same library, same
/// run, the two timed alternately; at most 2× of them.
pub(super) fn gpu_sample(rows: &mut Vec<Row>) {
    const BUDGET: f64 = 2.0;
    let data = result("gpu_sample");
    let interleaved = |key: &str| {
        data.as_ref()?
            .pointer(&format!("/interleaved/{key}"))?
            .as_f64()
    };
    let library = data
        .as_ref()
        .and_then(|d| d.get("library")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "fake".into());
    let figure = format!("GPU reading, 10 pids, 2 devices ({library} NVML)");
    let budget = format!("≤ {BUDGET}× bare");
    let (Some(ours), Some(bare)) = (
        interleaved("stemmon_ns").or_else(|| criterion_ns("gpu_sample", "stemmon")),
        interleaved("bare_ns").or_else(|| criterion_ns("gpu_sample", "bare")),
    ) else {
        rows.push(missing(&figure, &budget));
        return;
    };
    rows.push(within(
        figure,
        ours,
        "the same NVML calls through nvml-wrapper",
        bare,
        budget,
        BUDGET,
    ));
}

/// Bench 4: the sampler thread's CPU at the default interval.
pub(super) fn sampler(rows: &mut Vec<Row>) {
    const BUDGET: f64 = 0.001;
    let figure = "sampler thread CPU, 1 s interval, 10 descendants";
    let budget = format!("< {:.1} % of a core", BUDGET * 100.0);
    let Some(data) = result("sampler_cpu") else {
        rows.push(missing(figure, &budget));
        return;
    };
    let Some(fraction) = data.get("core_fraction").and_then(Value::as_f64) else {
        rows.push(missing(figure, &budget));
        return;
    };
    let per_sample = data
        .get("mean_sample_seconds")
        .and_then(Value::as_f64)
        .map_or("—".into(), |s| format!("{} per sample", time(s * 1e9)));
    rows.push(Row {
        figure: figure.into(),
        stemmon: format!("{:.4} % of a core", fraction * 100.0),
        peer: "(no peer; the monitor's own timing)".into(),
        peer_value: per_sample,
        ratio: "—".into(),
        budget,
        status: Status::of(fraction < BUDGET),
    });
}
