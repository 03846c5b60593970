//! Export to Prometheus against the real engines (the book's `prometheus.md`): Debian's `prometheus`,
//! `prometheus-pushgateway` and `prometheus-node-exporter` on loopback ports, two ranks
//! of a monitored program through each path, and Prometheus's HTTP API asked for what
//! the reports say. Skipped, with a `SKIPPED:` line, only where the binaries are missing
//! (`.ci/deps` installs them); under CI a missing one fails the test.

#[path = "support/prom.rs"]
mod prom;

use prom::Server;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use stemmon::Report;

const FIXTURE: &str = env!("CARGO_BIN_EXE_fixture-ranked");

/// The variables a test sets itself, cleared from the inherited environment.
const CLEARED: [&str; 11] = [
    "SLURM_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "RANK",
    "STEMMON_LABELS",
    "STEMMON_PROMETHEUS_TEXTFILE_DIR",
    "STEMMON_PUSHGATEWAY_URL",
    "STEMMON_DISABLE",
    "STEMMON_LOG_INTERVAL",
];

/// Whether `test` cannot run for want of `binaries` (it says so: see `cannot_run`).
fn skip_without(test: &str, binaries: &[&'static str]) -> bool {
    let missing = prom::missing(binaries);
    if !missing.is_empty() {
        let why = format!(
            "{} not installed (run `.ci/deps` as root to install them)",
            missing.join(", ")
        );
        stemmon_suite::cannot_run(test, &why);
    }
    !missing.is_empty()
}

/// A run of the fixture: its output, its report and how long it took.
struct Run {
    output: Output,
    report: Report,
    elapsed: Duration,
}

/// Starts the fixture with `vars`; its report goes to `<dir>/<name>.json`.
fn spawn(dir: &Path, name: &str, vars: &[(&str, String)]) -> (std::process::Child, Instant) {
    let mut command = Command::new(FIXTURE);
    for var in CLEARED {
        command.env_remove(var);
    }
    command
        .env("STEMMON_OUTPUT", dir.join(format!("{name}.json")))
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    (
        command.spawn().expect("starting the fixture"),
        Instant::now(),
    )
}

fn wait(dir: &Path, name: &str, (child, started): (std::process::Child, Instant)) -> Run {
    let output = child.wait_with_output().unwrap();
    let elapsed = started.elapsed();
    assert!(
        output.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
    let report = serde_json::from_str(&text).unwrap();
    Run {
        output,
        report,
        elapsed,
    }
}

fn run(dir: &Path, name: &str, vars: &[(&str, String)]) -> Run {
    wait(dir, name, spawn(dir, name, vars))
}

/// Waits until Prometheus holds `count` finished runs (`stemmon_running == 0`): the same
/// scrape carries their final stage series.
fn wait_for_finished(prometheus: &Server, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let finished = prom::query(prometheus, "stemmon_running == 0").len();
        if finished == count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus saw {finished} finished runs of {count} within 20 s:\n{}",
            prometheus.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The names in `dir`, in directory order.
fn file_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// The one series `query` returns.
fn one(prometheus: &Server, query: &str) -> prom::Series {
    let answer = prom::query(prometheus, query);
    assert_eq!(answer.len(), 1, "{query}: {answer:?}");
    answer.into_iter().next().unwrap()
}

#[test]
fn two_ranks_through_textfile_and_pushgateway_reach_prometheus_with_the_reports_figures() {
    if skip_without(
        "two_ranks_through_textfile_and_pushgateway_reach_prometheus_with_the_reports_figures",
        &[prom::PROMETHEUS, prom::PUSHGATEWAY, prom::NODE_EXPORTER],
    ) {
        return;
    }
    let dir = stemmon_suite::temp_dir("prom-e2e");
    let textfiles = dir.path().join("textfile");
    std::fs::create_dir_all(&textfiles).unwrap();
    let gateway = prom::pushgateway(dir.path());
    let node = prom::node_exporter(&textfiles, dir.path());
    let prometheus = prom::prometheus(&gateway, &node, dir.path());
    prom::assert_state_in(dir.path(), &gateway, &prometheus);

    // Textfile: torchrun-style `RANK`. Pushgateway: a Slurm array task's `SLURM_*`.
    let textfile_vars = |rank: u32| {
        vec![
            ("RANK", rank.to_string()),
            ("STEMMON_LABELS", "via=textfile".to_owned()),
            (
                "STEMMON_PROMETHEUS_TEXTFILE_DIR",
                textfiles.display().to_string(),
            ),
        ]
    };
    let push_vars = |rank: u32| {
        vec![
            ("SLURM_JOB_ID", "4242".to_owned()),
            ("SLURM_ARRAY_TASK_ID", "7".to_owned()),
            ("SLURM_PROCID", rank.to_string()),
            ("STEMMON_LABELS", "via=pushgateway".to_owned()),
            ("STEMMON_PUSHGATEWAY_URL", gateway.url.clone()),
        ]
    };
    let started: Vec<_> = (0..2)
        .flat_map(|rank| {
            [
                (format!("textfile-{rank}"), textfile_vars(rank)),
                (format!("push-{rank}"), push_vars(rank)),
            ]
        })
        .map(|(name, vars)| {
            let child = spawn(dir.path(), &name, &vars);
            (name, child)
        })
        .collect();
    let runs: BTreeMap<String, Run> = started
        .into_iter()
        .map(|(name, child)| {
            let run = wait(dir.path(), &name, child);
            (name, run)
        })
        .collect();

    for (name, run) in &runs {
        let report = &run.report;
        let stderr = String::from_utf8_lossy(&run.output.stderr);
        assert_eq!(report.export_error, None, "{name}: {stderr}");
        assert!(!stderr.contains("warning"), "{name}: {stderr}");
        assert!(!report.host.is_empty());
        let rank = &name[name.len() - 1..];
        assert_eq!(report.labels["rank"], rank, "{name}");
        if name.starts_with("push") {
            assert_eq!(report.labels["job_id"], "4242");
            assert_eq!(report.labels["array_task"], "7");
        }
        // Rank r: 2 + r calls of fit, 16 + 16 r MiB held.
        let calls = 2 + rank.parse::<u64>().unwrap();
        assert_eq!(report.stage("fit").unwrap().calls, calls, "{name}");
        assert_eq!(report.stage("fit/step").unwrap().calls, calls, "{name}");
    }

    // The textfile directory holds one `.prom` file per job identity and nothing else.
    let mut files = file_names(&textfiles);
    files.sort();
    let host = &runs["textfile-0"].report.host;
    let expected: Vec<String> = (0..2)
        .map(|rank| format!("stemmon-{host}-rank={rank}-via=textfile.prom"))
        .collect();
    assert_eq!(files, expected);

    wait_for_finished(&prometheus, 4);
    for (name, run) in &runs {
        let report = &run.report;
        let via = if name.starts_with("push") {
            "pushgateway"
        } else {
            "textfile"
        };
        let selector = |stage: &str| {
            format!(
                "{{via=\"{via}\",rank=\"{}\",host=\"{}\",stage=\"{stage}\"}}",
                report.labels["rank"], report.host
            )
        };
        for stage in &report.stages {
            let calls = one(
                &prometheus,
                &format!("stemmon_stage_calls_total{}", selector(&stage.path)),
            );
            assert_eq!(
                calls.value,
                stage.calls.to_string(),
                "{name} {}",
                stage.path
            );
            let peak = one(
                &prometheus,
                &format!("stemmon_stage_peak_tree_rss_bytes{}", selector(&stage.path)),
            );
            let expected = stage.peaks.peak_tree_rss_bytes.expect("a sampled peak");
            assert_eq!(peak.value, expected.to_string(), "{name} {}", stage.path);
            let wall = one(
                &prometheus,
                &format!("stemmon_stage_wall_seconds_total{}", selector(&stage.path)),
            );
            assert_eq!(
                wall.value.parse::<f64>().unwrap(),
                stage.wall_seconds,
                "{name} {}",
                stage.path
            );
            let errors = one(
                &prometheus,
                &format!("stemmon_stage_errors_total{}", selector(&stage.path)),
            );
            assert_eq!(errors.value, "0");
            if via == "pushgateway" {
                assert_eq!(peak.label("job_id"), "4242");
                assert_eq!(peak.label("array_task"), "7");
                assert_eq!(peak.label("job"), "stemmon");
            } else {
                assert_eq!(peak.label("job"), "node");
            }
        }
        let run_selector = format!(
            "{{via=\"{via}\",rank=\"{}\",host=\"{}\"}}",
            report.labels["rank"], report.host
        );
        let peak = one(
            &prometheus,
            &format!("stemmon_peak_tree_rss_bytes{run_selector}"),
        );
        assert_eq!(
            peak.value,
            report.peaks.peak_tree_rss_bytes.unwrap().to_string()
        );
        let wall = one(&prometheus, &format!("stemmon_wall_seconds{run_selector}"));
        assert_eq!(wall.value.parse::<f64>().unwrap(), report.wall_seconds);
    }
    // The ranks are kept apart: their figures differ, and each came back as its own.
    let (r0, r1) = (&runs["push-0"].report, &runs["push-1"].report);
    assert_ne!(
        r0.stage("load").unwrap().peaks.peak_tree_rss_bytes,
        r1.stage("load").unwrap().peaks.peak_tree_rss_bytes
    );
    assert_eq!(
        prom::query(
            &prometheus,
            "stemmon_stage_calls_total{job_id=\"4242\",stage=\"fit\"}"
        )
        .len(),
        2
    );

    // The README's query: the stage with the largest peak across job 4242.
    let top = one(
        &prometheus,
        "topk(1, max by (stage) (stemmon_stage_peak_tree_rss_bytes{job_id=\"4242\"}))",
    );
    let largest = [r0, r1]
        .iter()
        .flat_map(|r| r.stages.iter())
        .filter_map(|s| s.peaks.peak_tree_rss_bytes)
        .max()
        .unwrap();
    assert_eq!(top.value, largest.to_string());
    let top_stage = top.label("stage");
    assert!(
        [r0, r1].iter().any(|r| r
            .stage(top_stage)
            .is_some_and(|s| s.peaks.peak_tree_rss_bytes == Some(largest))),
        "{top_stage} does not hold the peak {largest}"
    );
}

/// The fixture's stages sleep 300 ms (`load`) and 100 ms per `fit` call. A push to a
/// gateway that never answers, made on a stage's own thread, would add its 2 s timeout
/// to the stage: the bounds leave a busy machine everything below that.
fn assert_stages_unharmed(run: &Run) {
    let stdout = String::from_utf8_lossy(&run.output.stdout);
    let expected_sum = 2 * 16 * 256; // one byte per page of 16 MiB, twice
    let result: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rank ")).collect();
    assert_eq!(result, [format!("rank 0: {expected_sum}")]);
    let load = run.report.stage("load").unwrap().wall_seconds;
    assert!((0.3..2.3).contains(&load), "load took {load} s");
    let fit = run.report.stage("fit").unwrap();
    assert_eq!(fit.calls, 2);
    assert!(
        (0.2..2.2).contains(&fit.wall_seconds),
        "fit took {} s",
        fit.wall_seconds
    );
}

#[test]
fn a_pushgateway_that_is_down_costs_nothing_and_is_an_export_error() {
    let dir = stemmon_suite::temp_dir("prom-down");
    let bare = run(dir.path(), "bare", &[]);
    // Nothing listens there: the connection is refused at once.
    let url = format!("http://127.0.0.1:{}", prom::free_port());
    let down = run(
        dir.path(),
        "down",
        &[("STEMMON_PUSHGATEWAY_URL", url.clone())],
    );
    assert_stages_unharmed(&bare);
    assert_stages_unharmed(&down);
    assert_eq!(bare.report.export_error, None);
    let error = down
        .report
        .export_error
        .as_deref()
        .expect("an export error");
    let target = format!(
        "could not push to {url}/metrics/job/stemmon/host/{}",
        down.report.host
    );
    assert!(error.starts_with(&target), "{error}");
    let stderr = String::from_utf8_lossy(&down.output.stderr);
    assert_eq!(
        stderr.matches("warning: could not push").count(),
        1,
        "warned once: {stderr}"
    );
    // Refused at once: less than one push timeout (2 s) in all, however busy the
    // machine makes either run.
    assert!(
        down.elapsed < bare.elapsed + Duration::from_secs(2),
        "down {:?} vs bare {:?}",
        down.elapsed,
        bare.elapsed
    );
}

#[test]
fn a_pushgateway_that_never_answers_costs_at_most_its_timeout_per_push() {
    let dir = stemmon_suite::temp_dir("prom-hang");
    // Accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().collect();
        drop(held);
    });
    let bare = run(dir.path(), "bare", &[]);
    let hung = run(dir.path(), "hung", &[("STEMMON_PUSHGATEWAY_URL", url)]);
    assert_stages_unharmed(&hung);
    let error = hung
        .report
        .export_error
        .as_deref()
        .expect("an export error");
    assert!(
        error.contains("timeout") || error.contains("timed out"),
        "{error}"
    );
    // The pushes run on the sampler thread: at most one in flight when main returns,
    // then the final one, each cut at 2 s; a third would make it 6 s. The rest is what a
    // busy machine adds to one run and not the other.
    let limit = bare.elapsed + Duration::from_secs(4) + Duration::from_millis(1500);
    assert!(
        hung.elapsed < limit,
        "hung {:?} vs bare {:?}",
        hung.elapsed,
        bare.elapsed
    );
}

#[test]
fn a_builder_label_that_prometheus_would_reject_fails_start() {
    let error = stemmon::Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .label("model-name", "a")
        .start()
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("invalid `label`: \"model-name\" is not a Prometheus label name"),
        "{error}"
    );
}

#[test]
fn builder_settings_write_the_textfile_and_push_to_a_real_pushgateway() {
    if skip_without(
        "builder_settings_write_the_textfile_and_push_to_a_real_pushgateway",
        &[prom::PUSHGATEWAY],
    ) {
        return;
    }
    let dir = stemmon_suite::temp_dir("prom-builder");
    let gateway = prom::pushgateway(dir.path());
    let textfiles = dir.path().join("textfile");
    let monitor = stemmon::Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .sample_interval(Duration::from_millis(20))
        .label("model", "a/b")
        .prometheus_textfile(&textfiles)
        .pushgateway(&gateway.url)
        .start()
        .unwrap();
    {
        let _stage = monitor.stage("load").unwrap();
        std::thread::sleep(Duration::from_millis(60));
    }
    let report = monitor.finish();
    assert_eq!(report.export_error, None);
    assert_eq!(report.labels["model"], "a/b");
    let host = &report.host;

    // Named after the identity; the `/` in the value replaced, so a hash follows.
    let files = file_names(&textfiles);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].starts_with(&format!("stemmon-{host}-model=a_b-")) && files[0].ends_with(".prom"),
        "{files:?}"
    );
    let text = std::fs::read_to_string(textfiles.join(&files[0])).unwrap();
    let calls =
        format!("stemmon_stage_calls_total{{host=\"{host}\",model=\"a/b\",stage=\"load\"}} 1");
    assert!(text.lines().any(|l| l == calls), "{text}");
    assert!(text
        .lines()
        .any(|l| l == format!("stemmon_running{{host=\"{host}\",model=\"a/b\"}} 0")));

    // The Pushgateway holds the group under job="stemmon", the `/` in the value intact.
    let body = ureq::get(&format!("{}/metrics", gateway.url))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    let pushed = body
        .lines()
        .find(|l| l.starts_with("stemmon_stage_calls_total{"))
        .unwrap_or_else(|| panic!("no stage series on the gateway:\n{body}"));
    for label in [
        format!("host=\"{host}\""),
        "job=\"stemmon\"".into(),
        "model=\"a/b\"".into(),
        "stage=\"load\"".into(),
    ] {
        assert!(pushed.contains(&label), "{label} missing in {pushed}");
    }
    assert!(pushed.ends_with(" 1"), "{pushed}");
}

#[test]
fn an_unwritable_textfile_directory_is_an_export_error_not_a_failure() {
    let dir = stemmon_suite::temp_dir("prom-unwritable");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let monitor = stemmon::Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .prometheus_textfile(file.join("sub"))
        .start()
        .unwrap();
    let report = monitor.finish();
    let error = report.export_error.as_deref().expect("an export error");
    assert!(error.starts_with("could not write "), "{error}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "mine",
        "never clobbered"
    );
}

#[test]
fn reruns_of_one_job_replace_its_textfile_which_promtool_accepts() {
    let test = "reruns_of_one_job_replace_its_textfile_which_promtool_accepts";
    if skip_without(test, &["promtool"]) {
        return;
    }
    let dir = stemmon_suite::temp_dir("prom-reruns");
    let textfiles = dir.path().join("textfile");
    std::fs::create_dir_all(&textfiles).unwrap();
    // What a dead writer of another job left: its last word, kept.
    let other = textfiles.join("stemmon-elsewhere-rank=9.prom");
    std::fs::write(&other, "stemmon_running{host=\"elsewhere\",rank=\"9\"} 0\n").unwrap();
    let vars = vec![
        ("SLURM_JOB_ID", "77".to_owned()),
        ("RANK", "1".to_owned()),
        (
            "STEMMON_PROMETHEUS_TEXTFILE_DIR",
            textfiles.display().to_string(),
        ),
    ];
    let mut pids = Vec::new();
    let mut host = String::new();
    for rerun in 0..3 {
        let run = run(dir.path(), &format!("rerun-{rerun}"), &vars);
        assert_eq!(run.report.export_error, None);
        pids.push(run.report.pid);
        host = run.report.host;
    }
    pids.dedup();
    assert_eq!(pids.len(), 3, "three processes");
    let mut files = file_names(&textfiles);
    files.sort();
    let ours = format!("stemmon-{host}-job_id=77-rank=1.prom");
    assert_eq!(files, [other.file_name().unwrap().to_str().unwrap(), &ours]);
    let text = std::fs::read_to_string(textfiles.join(&ours)).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("stemmon_processes{") && l.ends_with(" 1")),
        "{text}"
    );
    assert!(!text.contains("process_count"), "{text}");
    let file = std::fs::File::open(textfiles.join(&ours)).unwrap();
    let checked = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(file)
        .output()
        .expect("run promtool");
    assert!(
        checked.status.success(),
        "promtool check metrics rejects the textfile:\n{}{}\n{text}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}
