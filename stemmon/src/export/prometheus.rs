//! A [`Report`] in the Prometheus text format (version 0.0.4), encoded by
//! `prometheus-client`, and its two deliveries: a textfile for node_exporter and a PUT
//! to a Pushgateway.

use crate::export::capital;
use crate::export::sink::{Sink, Warned};
use crate::report::Report;
use base64::Engine as _;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stemmon_report::fields::{Field, Unit, FIELDS};

/// The `Content-Type` of what [`encode`] returns.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The Pushgateway's `job` label: one job for every stemmon process, told apart by
/// `host` and the labels in the grouping key.
pub(crate) const PUSH_JOB: &str = "stemmon";

/// Longest a push may take, connection included: what a dead endpoint costs per push.
pub(crate) const PUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// A sample value: integers stay exact, seconds are floats.
#[derive(Clone, Copy, Debug)]
enum Value {
    Int(u64),
    Float(f64),
}

/// One metric family: a name, its help, its type and its series.
#[derive(Debug)]
struct Family {
    /// Without `_total`: the encoder appends it to counters.
    name: Cow<'static, str>,
    help: Cow<'static, str>,
    counter: bool,
    series: Vec<(Vec<(String, String)>, Value)>,
}

/// The metrics of one report, owned, as a `prometheus-client` collector: the values are
/// a snapshot, so counters are `ConstCounter` and gauges `ConstGauge`.
#[derive(Debug)]
struct Snapshot {
    families: Vec<Family>,
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        for family in self.families.iter().filter(|f| !f.series.is_empty()) {
            let kind = if family.counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut metric = encoder.encode_descriptor(&family.name, &family.help, None, kind)?;
            for (labels, value) in &family.series {
                let series = metric.encode_family(labels)?;
                match (family.counter, *value) {
                    (true, Value::Int(v)) => ConstCounter::new(v).encode(series)?,
                    (true, Value::Float(v)) => ConstCounter::new(v).encode(series)?,
                    (false, Value::Int(v)) => ConstGauge::new(v).encode(series)?,
                    (false, Value::Float(v)) => ConstGauge::new(v).encode(series)?,
                }
            }
        }
        Ok(())
    }
}

impl Snapshot {
    /// The families of the book's `prometheus.md`; a reading the report lacks (`null`) has no series.
    fn of(report: &Report, host: &str, labels: &BTreeMap<String, String>) -> Snapshot {
        let base: Vec<(String, String)> = std::iter::once(("host".to_owned(), host.to_owned()))
            .chain(labels.iter().map(|(k, v)| (k.clone(), v.clone())))
            .collect();
        let with_stage = |path: &str| {
            let mut labels = base.clone();
            labels.push(("stage".to_owned(), path.to_owned()));
            labels
        };
        let run = |name: Cow<'static, str>, help: Cow<'static, str>, value: Option<Value>| Family {
            name,
            help,
            counter: false,
            series: value.map(|v| (base.clone(), v)).into_iter().collect(),
        };
        let latest = report.latest_sample.as_ref();
        let mut families = vec![
            run(
                "stemmon_running".into(),
                "1 while the monitor runs, 0 once it finished.".into(),
                Some(Value::Int(u64::from(report.running))),
            ),
            run(
                "stemmon_wall_seconds".into(),
                "Seconds since the monitor started (until it finished).".into(),
                Some(Value::Float(report.wall_seconds)),
            ),
            run(
                "stemmon_tree_rss_bytes".into(),
                "RSS of the process tree at the latest sample.".into(),
                latest.and_then(|s| s.tree_rss_bytes).map(Value::Int),
            ),
            run(
                "stemmon_peak_tree_rss_bytes".into(),
                "Highest sampled RSS of the process tree.".into(),
                report.peaks.peak_tree_rss_bytes.map(Value::Int),
            ),
            run(
                "stemmon_peak_tree_rss_bound_bytes".into(),
                "Upper bound of the tree's peak RSS from the kernel's high-water marks.".into(),
                report.high_water.peak_tree_rss_bound_bytes.map(Value::Int),
            ),
            run(
                "stemmon_processes".into(),
                "Processes in the tree at the latest sample.".into(),
                latest.map(|s| Value::Int(u64::from(s.process_count))),
            ),
        ];
        let per_stage = |name: Cow<'static, str>,
                         help: Cow<'static, str>,
                         counter,
                         value: &dyn Fn(usize) -> Option<Value>| Family {
            name,
            help,
            counter,
            series: report
                .stages
                .iter()
                .enumerate()
                .filter_map(|(i, stage)| value(i).map(|v| (with_stage(&stage.path), v)))
                .collect(),
        };
        // The run's peaks beyond the book's `prometheus.md`'s families, and every stage figure with an
        // exported metric, from the field table; CPU is exported by mode below.
        for field in FIELDS.iter().filter(|f| f.key != "cpu_seconds") {
            let Some(export) = field.export else {
                continue;
            };
            let value = |v: Option<f64>| v.map(|v| value_of(field, v));
            let run_name = format!("stemmon_{}", export.name);
            if !export.counter && !families.iter().any(|f| f.name == run_name) {
                families.push(run(
                    owned(run_name),
                    owned(format!("{} (the whole run).", capital(field.meaning))),
                    value(field.of_run(report)),
                ));
            }
            families.push(per_stage(
                owned(format!("stemmon_stage_{}", export.name)),
                owned(format!(
                    "{} while the stage was open.",
                    capital(field.meaning)
                )),
                export.counter,
                &|i| value(field.of_stage(&report.stages[i])),
            ));
        }
        let stages = &report.stages;
        // CPU by `mode`, as node_exporter's `node_cpu_seconds_total`: their sum is the total.
        let mut cpu = Vec::new();
        for stage in stages {
            for (mode, seconds) in [
                ("user", stage.cpu_io.cpu_user_seconds),
                ("system", stage.cpu_io.cpu_system_seconds),
            ] {
                if let Some(seconds) = seconds.filter(|s| s.is_finite() && *s >= 0.0) {
                    let mut labels = with_stage(&stage.path);
                    labels.push(("mode".to_owned(), mode.to_owned()));
                    cpu.push((labels, Value::Float(seconds)));
                }
            }
        }
        families.push(Family {
            name: "stemmon_stage_cpu_seconds".into(),
            help: "CPU seconds of the whole process tree while the stage was open, by mode.".into(),
            counter: true,
            series: cpu,
        });
        Snapshot { families }
    }
}

/// A figure as a sample value: whole numbers stay exact, seconds and cores are floats.
fn value_of(field: &Field, value: f64) -> Value {
    match field.unit {
        Unit::Bytes | Unit::Count if value >= 0.0 => Value::Int(value.round() as u64),
        _ => Value::Float(value),
    }
}

/// A name or help made from the field table: owned.
fn owned(text: String) -> Cow<'static, str> {
    Cow::Owned(text)
}

/// `report` in the Prometheus text format; every series carries `host` and `labels`,
/// the per-stage ones also `stage` (the stage's path).
pub(crate) fn encode(report: &Report, host: &str, labels: &BTreeMap<String, String>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot::of(report, host, labels)));
    let mut text = String::new();
    // Writing into a String cannot fail, and the collector's values are always encodable.
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
        .expect("encoding into a String");
    text
}

/// Longest a textfile's name gets before the hash: well below a file name's 255 bytes.
const MAX_NAME_BYTES: usize = 120;

/// The textfile's name in the collector directory, after the job's identity and not the
/// pid, so that a rerun of the same job replaces its own file:
/// `stemmon-<host>-<label>=<value>....prom`, labels in name order. Characters outside
/// `[A-Za-z0-9_.-]` become `_`; when one did, or the name passes 120 bytes (then cut),
/// `-<hash>` follows: 8 hex digits of the exact identity (FNV-1a, the same in every
/// version and on every machine), so two identities never share a file.
pub(crate) fn textfile_name(host: &str, labels: &BTreeMap<String, String>) -> String {
    let mut name = String::from("stemmon-");
    let mut lossy = push_safe(&mut name, host);
    for (label, value) in labels {
        name.push('-');
        lossy |= push_safe(&mut name, label);
        name.push('=');
        lossy |= push_safe(&mut name, value);
    }
    if lossy || name.len() > MAX_NAME_BYTES {
        // Only ASCII was pushed: any byte is a character boundary.
        name.truncate(MAX_NAME_BYTES);
        let mut hash = Fnv1a::default();
        hash.write(host.as_bytes());
        for (label, value) in labels {
            hash.write(&[0]);
            hash.write(label.as_bytes());
            hash.write(&[0]);
            hash.write(value.as_bytes());
        }
        name.push_str(&format!("-{:08x}", hash.0 as u32));
    }
    name.push_str(".prom");
    name
}

/// Appends `text` with every character outside `[A-Za-z0-9_.-]` as `_`; says whether
/// one was replaced.
fn push_safe(name: &mut String, text: &str) -> bool {
    let mut replaced = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            name.push(c);
        } else {
            name.push('_');
            replaced = true;
        }
    }
    replaced
}

/// The 64-bit FNV-1a hash: tiny, and stable, unlike std's `DefaultHasher`.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Replaces `path` (a `.prom` file) atomically with `text`, with the writer of the report
/// ([`Output`](crate::output::Output)): a link or FIFO another user planted in a shared
/// textfile directory is replaced, never followed. The temporary file,
/// `.<name>.stemmon-<pid>-<random>.tmp` beside it, is one node_exporter ignores (it reads
/// `*.prom`), and is removed if the write fails or its writer was killed.
pub(crate) fn write_textfile(path: &Path, text: &str) -> Result<(), String> {
    crate::output::Output::resolve(path)
        .and_then(|output| output.write(text.as_bytes(), false))
        .map_err(|error| format!("could not write {}: {error}", path.display()))
}

/// `<url>/metrics/job/stemmon/host/<host>/<name>/<value>...`: the Pushgateway's
/// grouping key. A value that is not plainly `[A-Za-z0-9._~-]` goes as
/// `<name>@base64/<URL-safe base64>`, which also carries a `/`.
pub(crate) fn grouping_url(base: &str, host: &str, labels: &BTreeMap<String, String>) -> String {
    let mut url = format!("{}/metrics/job/{PUSH_JOB}", base.trim_end_matches('/'));
    for (name, value) in std::iter::once(("host", host)).chain(
        labels
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str())),
    ) {
        let plain = !value.is_empty()
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'));
        if plain {
            url.push_str(&format!("/{name}/{value}"));
        } else {
            let encoded = base64::engine::general_purpose::URL_SAFE.encode(value);
            url.push_str(&format!("/{name}@base64/{encoded}"));
        }
    }
    url
}

/// A Pushgateway endpoint, a sink: the grouping URL and a client with short timeouts.
#[derive(Debug)]
pub(crate) struct Pushgateway {
    url: String,
    /// The URL as every message shows it: its userinfo (`user:password@`) as `***`.
    shown: String,
    agent: ureq::Agent,
    /// The `host` label of every series.
    host: String,
    /// The identity's labels, on every series.
    labels: BTreeMap<String, String>,
    warned: Warned,
}

impl Pushgateway {
    /// A client for the group of `host` and `labels` on the Pushgateway at `base`.
    pub(crate) fn new(base: &str, host: &str, labels: &BTreeMap<String, String>) -> Pushgateway {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(PUSH_TIMEOUT))
            // A redirect is a failed push: the request's credentials never reach the host
            // it names.
            .max_redirects(0)
            // The status is checked here, so that the gateway's reason reaches the report.
            .http_status_as_error(false)
            .build()
            .into();
        let url = grouping_url(base, host, labels);
        Pushgateway {
            shown: crate::export::redact(&url),
            url,
            agent,
            host: host.to_owned(),
            labels: labels.clone(),
            warned: Warned::default(),
        }
    }

    /// The URL pushed to, as shown (its userinfo as `***`).
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// Replaces the group's metrics with `text` (HTTP PUT).
    pub(crate) fn push(&self, text: &str) -> Result<(), String> {
        let secret = crate::export::userinfo(&self.url).filter(|info| !info.is_empty());
        let fail = |why: String| {
            let why = secret.map_or_else(|| why.clone(), |secret| why.replace(secret, "***"));
            format!("could not push to {}: {why}", self.shown)
        };
        let response = self
            .agent
            .put(&self.url)
            .header("Content-Type", CONTENT_TYPE)
            .send(text.as_bytes())
            .map_err(|error| fail(error.to_string()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        if status.is_redirection() {
            return Err(fail(format!("HTTP {status} (redirects are not followed)")));
        }
        let body = response
            .into_body()
            .with_config()
            .limit(4096)
            .read_to_string()
            .unwrap_or_default();
        let reason = body.trim();
        Err(fail(if reason.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {reason}")
        }))
    }
}

/// Where the textfile goes: `dir` joined with [`textfile_name`]. Temporary files that
/// dead writers of any stemmon textfile left in `dir` are removed (never a `.prom` file:
/// one of another identity is that job's last word).
pub(crate) fn textfile_path(dir: &Path, host: &str, labels: &BTreeMap<String, String>) -> PathBuf {
    crate::output::remove_stale_temporaries_in(dir, |target| {
        target.starts_with("stemmon-") && target.ends_with(".prom")
    });
    dir.join(textfile_name(host, labels))
}

impl Sink for Pushgateway {
    fn name(&self) -> &'static str {
        "pushgateway"
    }

    fn target(&self) -> String {
        self.shown().to_owned()
    }

    fn send(&mut self, report: &Report, _last: bool) -> Result<(), String> {
        let pushed = self.push(&encode(report, &self.host, &self.labels));
        self.warned.once(pushed)
    }
}

/// The textfile for node_exporter, a sink: the metrics of each report in the `.prom`
/// file of this job's identity, which this process replaces.
#[derive(Debug)]
pub(crate) struct Textfile {
    /// `dir` joined with [`textfile_name`].
    path: PathBuf,
    /// The `host` label of every series.
    host: String,
    /// The identity's labels, on every series.
    labels: BTreeMap<String, String>,
    warned: Warned,
}

impl Textfile {
    /// The textfile of `host` and `labels` in `dir` (see [`textfile_path`]).
    pub(crate) fn new(dir: &Path, host: &str, labels: &BTreeMap<String, String>) -> Textfile {
        Textfile {
            path: textfile_path(dir, host, labels),
            host: host.to_owned(),
            labels: labels.clone(),
            warned: Warned::default(),
        }
    }
}

impl Sink for Textfile {
    fn name(&self) -> &'static str {
        "textfile"
    }

    fn target(&self) -> String {
        self.path.display().to_string()
    }

    fn send(&mut self, report: &Report, _last: bool) -> Result<(), String> {
        let written = write_textfile(&self.path, &encode(report, &self.host, &self.labels));
        self.warned.once(written)
    }
}

/// The sinks of the textfile in `dir` and of the Pushgateway at `url`, whichever is
/// given, in that order.
pub(crate) fn sinks(
    dir: Option<PathBuf>,
    url: Option<String>,
    host: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<Box<dyn Sink>> {
    let textfile = dir.map(|dir| Box::new(Textfile::new(&dir, host, labels)) as Box<dyn Sink>);
    let pushgateway =
        url.map(|url| Box::new(Pushgateway::new(&url, host, labels)) as Box<dyn Sink>);
    textfile.into_iter().chain(pushgateway).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Peaks, SampleReport, StageReport};

    fn report() -> Report {
        let stage = |path: &str, calls, errors, wall, peak| {
            let mut built = StageReport::default();
            built.path = path.into();
            built.name = path.rsplit('/').next().unwrap().into();
            built.calls = calls;
            built.errors = errors;
            built.wall_seconds = wall;
            built.peaks = {
                let mut built = Peaks::default();
                built.peak_tree_rss_bytes = peak;
                built
            };
            built
        };
        let mut report = {
            let mut built = Report::default();
            built.running = true;
            built.wall_seconds = 1.25;
            built.peaks = {
                let mut built = Peaks::default();
                built.peak_tree_rss_bytes = Some(9_007_199_254_740_993);
                built
            };
            built.latest_sample = Some({
                let mut built = SampleReport::default();
                built.tree_rss_bytes = Some(4096);
                built.process_count = 3;
                built
            });
            built.stages = vec![
                stage("load", 2, 1, 0.5, Some(1000)),
                stage("load/parse \"x\"", 7, 0, 0.125, None),
            ];
            built
        };
        report.high_water.peak_tree_rss_bound_bytes = Some(5000);
        report
    }

    #[test]
    fn heap_and_cpu_families_have_series_only_for_stages_with_the_figures() {
        let mut report = report();
        report.stages[0].heap.heap_allocated_bytes = Some(1 << 33);
        report.stages[0].heap.peak_heap_bytes = Some(500 << 20);
        report.stages[0].cpu_io.cpu_user_seconds = Some(1.5);
        report.stages[0].cpu_io.cpu_system_seconds = Some(0.25);
        let text = encode(&report, "h", &BTreeMap::new());
        for line in [
            "# TYPE stemmon_stage_heap_allocated_bytes_total counter",
            "stemmon_stage_heap_allocated_bytes_total{host=\"h\",stage=\"load\"} 8589934592",
            "# TYPE stemmon_stage_peak_heap_bytes gauge",
            "stemmon_stage_peak_heap_bytes{host=\"h\",stage=\"load\"} 524288000",
            "# TYPE stemmon_stage_cpu_seconds_total counter",
            "stemmon_stage_cpu_seconds_total{host=\"h\",stage=\"load\",mode=\"user\"} 1.5",
            "stemmon_stage_cpu_seconds_total{host=\"h\",stage=\"load\",mode=\"system\"} 0.25",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
        assert_eq!(text.matches("stage=\"load/parse").count(), 3, "{text}");
        let without = encode(&super::tests::report(), "h", &BTreeMap::new());
        assert!(
            !without.contains("heap") && !without.contains("cpu"),
            "{without}"
        );
    }

    #[test]
    fn the_text_has_every_family_with_host_labels_and_stage() {
        let labels = BTreeMap::from([("rank".to_owned(), "1".to_owned())]);
        let text = encode(&report(), "node-7", &labels);
        let expected = [
            "# TYPE stemmon_running gauge",
            "stemmon_running{host=\"node-7\",rank=\"1\"} 1",
            "stemmon_wall_seconds{host=\"node-7\",rank=\"1\"} 1.25",
            "stemmon_tree_rss_bytes{host=\"node-7\",rank=\"1\"} 4096",
            // Integers stay exact beyond 2^53.
            "stemmon_peak_tree_rss_bytes{host=\"node-7\",rank=\"1\"} 9007199254740993",
            "stemmon_peak_tree_rss_bound_bytes{host=\"node-7\",rank=\"1\"} 5000",
            "stemmon_processes{host=\"node-7\",rank=\"1\"} 3",
            "# TYPE stemmon_stage_calls_total counter",
            "stemmon_stage_calls_total{host=\"node-7\",rank=\"1\",stage=\"load\"} 2",
            "stemmon_stage_calls_total{host=\"node-7\",rank=\"1\",stage=\"load/parse \\\"x\\\"\"} 7",
            "# TYPE stemmon_stage_errors_total counter",
            "stemmon_stage_errors_total{host=\"node-7\",rank=\"1\",stage=\"load\"} 1",
            "# TYPE stemmon_stage_wall_seconds_total counter",
            "stemmon_stage_wall_seconds_total{host=\"node-7\",rank=\"1\",stage=\"load\"} 0.5",
            "# TYPE stemmon_stage_peak_tree_rss_bytes gauge",
            "stemmon_stage_peak_tree_rss_bytes{host=\"node-7\",rank=\"1\",stage=\"load\"} 1000",
        ];
        for line in expected {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
        // A stage without a reading has no series; a family without series no header.
        assert!(!text.contains("stage=\"load/parse \\\"x\\\"\"} 1000"));
        assert!(!text.contains("stemmon_stage_peak_tree_rss_bound_bytes"));
        assert!(!text.contains("# EOF"), "Prometheus text, not OpenMetrics");
    }

    #[test]
    fn a_finished_report_reads_zero_running() {
        let mut report = report();
        report.running = false;
        let text = encode(&report, "h", &BTreeMap::new());
        assert!(text.lines().any(|l| l == "stemmon_running{host=\"h\"} 0"));
    }

    #[test]
    fn grouping_key_puts_awkward_values_in_base64() {
        let labels = BTreeMap::from([
            ("job_id".to_owned(), "4711".to_owned()),
            ("model".to_owned(), "a/b c".to_owned()),
        ]);
        assert_eq!(
            grouping_url("http://gw:9091/", "node-1.cluster", &labels),
            "http://gw:9091/metrics/job/stemmon/host/node-1.cluster/job_id/4711/model@base64/YS9iIGM="
        );
    }

    #[test]
    fn textfile_names_are_the_identity_safe_and_stable() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(textfile_name("n1.c", &labels(&[])), "stemmon-n1.c.prom");
        assert_eq!(
            textfile_name("n1", &labels(&[("rank", "3"), ("job_id", "4711")])),
            "stemmon-n1-job_id=4711-rank=3.prom"
        );
        // A replaced character or a long name gets the identity's hash: never shared.
        let slash = textfile_name("n1", &labels(&[("model", "a/b")]));
        let underscore = textfile_name("n1", &labels(&[("model", "a_b")]));
        assert_eq!(underscore, "stemmon-n1-model=a_b.prom");
        assert!(slash.starts_with("stemmon-n1-model=a_b-"), "{slash}");
        assert_eq!(slash.len(), underscore.len() + 9);
        assert_eq!(slash, textfile_name("n1", &labels(&[("model", "a/b")])));
        // Pinned: the same job gets the same file from every version.
        assert_eq!(
            textfile_name("a/b c", &labels(&[])),
            format!("stemmon-a_b_c-{:08x}.prom", {
                let mut h = Fnv1a::default();
                h.write(b"a/b c");
                h.0 as u32
            })
        );
        let mut h = Fnv1a::default();
        h.write(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c, "FNV-1a of \"a\"");
        let long = textfile_name("n1", &labels(&[("path", &"x".repeat(1000))]));
        assert_eq!(long.len(), MAX_NAME_BYTES + 9 + ".prom".len());
        assert_ne!(
            long,
            textfile_name("n1", &labels(&[("path", &"x".repeat(999))]))
        );
        for name in [slash, long] {
            assert!(name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-=".contains(&b)));
        }
    }
}

#[cfg(test)]
mod sinks {
    use super::*;

    #[test]
    fn a_textfile_that_cannot_be_written_fails_each_send_and_is_warned_about_once() {
        let dir =
            std::env::temp_dir().join(format!("stemmon-textfile-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let labels = BTreeMap::from([("rank".to_owned(), "3".to_owned())]);
        let mut sink = Textfile::new(&dir, "h1", &labels);
        assert_eq!(sink.name(), "textfile");
        assert_eq!(
            sink.target(),
            dir.join("stemmon-h1-rank=3.prom").display().to_string()
        );
        // A directory where the file should be: the rename fails.
        std::fs::create_dir(&sink.path).unwrap();
        assert!(!sink.warned.warned());
        let error = sink.send(&Report::default(), false).unwrap_err();
        assert!(error.starts_with("could not write "), "{error}");
        assert!(sink.warned.warned());
        assert_eq!(sink.send(&Report::default(), true).unwrap_err(), error);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_sinks_are_the_textfile_then_the_pushgateway_whichever_is_given() {
        let labels = BTreeMap::new();
        let names = |dir: Option<&str>, url: Option<&str>| -> Vec<&'static str> {
            let dir = dir.map(|dir| std::env::temp_dir().join(dir));
            sinks(dir, url.map(str::to_owned), "h", &labels)
                .iter()
                .map(|sink| sink.name())
                .collect()
        };
        assert!(names(None, None).is_empty());
        assert_eq!(names(Some("stemmon-sinks-unit"), None), ["textfile"]);
        assert_eq!(names(None, Some("http://gw:9091")), ["pushgateway"]);
        assert_eq!(
            names(Some("stemmon-sinks-unit"), Some("http://gw:9091")),
            ["textfile", "pushgateway"]
        );
    }
}

#[cfg(test)]
mod hostile {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    #[test]
    fn a_redirecting_gateway_is_a_failed_push_and_no_password_is_shown() {
        // The host a redirect names: it must hear nothing.
        let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
        elsewhere.set_nonblocking(true).unwrap();
        let target = elsewhere.local_addr().unwrap();
        let gateway = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = gateway.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = gateway.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let answer = format!(
                "HTTP/1.1 302 Found\r\nLocation: http://{target}/metrics\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            stream.write_all(answer.as_bytes()).unwrap();
        });
        let base = format!("http://alice:hunter2PASS@127.0.0.1:{port}");
        let push = Pushgateway::new(&base, "host", &BTreeMap::new());
        assert!(!push.shown().contains("hunter2PASS"), "{}", push.shown());
        let error = push.push("up 1\n").unwrap_err();
        server.join().unwrap();
        assert!(
            error.contains("HTTP 302 Found (redirects are not followed)"),
            "{error}"
        );
        assert!(error.contains("http://***@127.0.0.1:"), "{error}");
        assert!(!error.contains("hunter2PASS"), "{error}");
        assert!(elsewhere.accept().is_err(), "the redirect was followed");
    }
}
