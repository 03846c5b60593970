//! The metric entries made into OTLP: the metrics of a report, and its figures as span
//! attributes.

use super::metrics::{metrics as entries, Figure, Kind};
use super::proto::{self, metric, number_data_point, KeyValue, Metric, NumberDataPoint};
use crate::report::Report;

/// A figure as a point's value; `None` for a float that is not finite.
pub(crate) fn point_value(figure: Figure) -> Option<number_data_point::Value> {
    match figure {
        Figure::Int(v) => Some(number_data_point::Value::AsInt(
            i64::try_from(v).unwrap_or(i64::MAX),
        )),
        Figure::Float(v) => v
            .is_finite()
            .then_some(number_data_point::Value::AsDouble(v)),
    }
}

/// A figure as a span attribute's value.
pub(crate) fn attribute_value(figure: Figure) -> Option<proto::any_value::Value> {
    Some(match point_value(figure)? {
        number_data_point::Value::AsInt(v) => proto::any_value::Value::IntValue(v),
        number_data_point::Value::AsDouble(v) => proto::any_value::Value::DoubleValue(v),
    })
}

/// The times of every point: the run's start (for the cumulative sums) and the
/// report's moment, in nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Times {
    pub(crate) start: u64,
    pub(crate) now: u64,
}

/// The metrics of `report`, one per entry name that has a point.
#[cfg(test)]
pub(crate) fn metrics(report: &Report, times: Times) -> Vec<Metric> {
    let mut metrics = Vec::new();
    each_metric(report, times, |metric| metrics.push(metric));
    metrics
}

/// The most data points one metric message holds: a metric with more (one point a
/// stage, in a report of 100 000 stages) is given as several messages of the same name,
/// so that neither its points nor a request are ever held whole.
pub(crate) const MAX_POINTS: usize = 2_048;

/// Gives each metric of `report` to `each` (one per entry name that has a point, in
/// messages of at most [`MAX_POINTS`] points), so that only one message's points are
/// held at a time: a report of 100 000 stages has some thirty metrics of 100 000 points
/// each.
pub(crate) fn each_metric(report: &Report, times: Times, mut each: impl FnMut(Metric)) {
    let mut open: Option<Metric> = None;
    let mut held = 0;
    for entry in entries() {
        let point = |value, mut attributes: Vec<KeyValue>| {
            attributes.extend(entry.attribute.map(|(k, v)| KeyValue::string(k, v)));
            NumberDataPoint {
                attributes,
                start_time_unix_nano: if entry.kind == Kind::Gauge {
                    0
                } else {
                    times.start
                },
                time_unix_nano: times.now,
                value: Some(value),
            }
        };
        let mut add = |point: NumberDataPoint| {
            // A new name, or a full message: the one open is given first.
            if let Some(full) = open.take_if(|m| m.name != entry.name || held >= MAX_POINTS) {
                each(full);
                held = 0;
            }
            let metric = open.get_or_insert_with(|| Metric {
                name: entry.name.to_owned(),
                description: entry.description.to_owned(),
                unit: entry.unit.to_owned(),
                data: Some(match entry.kind {
                    Kind::Gauge => metric::Data::Gauge(proto::Gauge {
                        data_points: Vec::new(),
                    }),
                    kind => metric::Data::Sum(proto::Sum {
                        data_points: Vec::new(),
                        aggregation_temporality: proto::CUMULATIVE,
                        is_monotonic: kind == Kind::Counter,
                    }),
                }),
            });
            match &mut metric.data {
                Some(metric::Data::Gauge(g)) => g.data_points.push(point),
                Some(metric::Data::Sum(s)) => s.data_points.push(point),
                None => {}
            }
            held += 1;
        };
        if entry.source.is_run() {
            if let Some(value) = entry.source.of_run(report).and_then(point_value) {
                add(point(value, Vec::new()));
            }
        } else {
            for stage in &report.stages {
                if let Some(value) = entry.source.of_stage(stage).and_then(point_value) {
                    add(point(
                        value,
                        vec![KeyValue::string("stage.path", &stage.path)],
                    ));
                }
            }
        }
    }
    if let Some(last) = open {
        each(last);
    }
}

/// The run's figures as the root span's attributes, `stemmon.<key>`.
pub(crate) fn run_attributes(report: &Report) -> Vec<KeyValue> {
    entries()
        .iter()
        .filter_map(|entry| Some((entry.key, entry.source.of_run(report)?)))
        .filter_map(|(key, figure)| {
            Some(KeyValue::of(
                &format!("stemmon.{key}"),
                attribute_value(figure)?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::StageReport;
    use crate::report::{Peaks, SampleReport};

    fn report() -> Report {
        let mut report = {
            let mut built = Report::default();
            built.running = false;
            built.wall_seconds = 2.5;
            built.latest_sample = Some({
                let mut built = SampleReport::default();
                built.tree_rss_bytes = Some(300 << 20);
                built.parent_rss_bytes = Some(100 << 20);
                built.process_count = 2;
                built
            });
            built.pid = 7;
            built.processes = vec![{
                let mut built = crate::report::ProcessReport::default();
                built.pid = 7;
                built.cpu_seconds = Some(0.75);
                built
            }];
            built.peaks = {
                let mut built = Peaks::default();
                built.peak_tree_rss_bytes = Some(u64::MAX);
                built
            };
            built.stages = vec![
                {
                    let mut built = StageReport::default();
                    built.path = "load".into();
                    built.calls = 3;
                    built.wall_seconds = 1.25;
                    built
                },
                {
                    let mut built = StageReport::default();
                    built.path = "load/parse".into();
                    built.calls = 1;
                    built.errors = 1;
                    built
                },
            ];
            built
        };
        report.cpu_io.cpu_user_seconds = Some(1.5);
        report.cpu_io.cpu_system_seconds = Some(f64::NAN);
        report.stages[0].peaks.peak_tree_rss_bytes = Some(256 << 20);
        report.stages[0].cpu_io.cpu_system_seconds = Some(0.25);
        report
    }

    fn find<'a>(metrics: &'a [Metric], name: &str) -> &'a Metric {
        metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
    }

    fn points(metric: &Metric) -> &[NumberDataPoint] {
        match metric.data.as_ref().unwrap() {
            metric::Data::Gauge(g) => &g.data_points,
            metric::Data::Sum(s) => &s.data_points,
        }
    }

    #[test]
    fn the_reports_figures_become_points_with_their_kind_attributes_and_times() {
        let times = Times {
            start: 1_000,
            now: 2_000,
        };
        let metrics = metrics(&report(), times);
        // The monitored process alone under `process.*`, the tree under `stemmon.tree.*`.
        let own = points(find(&metrics, "process.memory.usage"));
        assert_eq!(
            own[0].value,
            Some(number_data_point::Value::AsInt(100 << 20))
        );
        let own_cpu = points(find(&metrics, "process.cpu.time"));
        assert_eq!(
            own_cpu[0].value,
            Some(number_data_point::Value::AsDouble(0.75))
        );
        assert!(own_cpu[0].attributes.is_empty());
        let memory = find(&metrics, "stemmon.tree.memory.usage");
        assert_eq!(memory.unit, "By");
        let Some(metric::Data::Sum(sum)) = &memory.data else {
            panic!("an UpDownCounter is a non-monotonic sum");
        };
        assert!(!sum.is_monotonic);
        assert_eq!(sum.aggregation_temporality, proto::CUMULATIVE);
        assert_eq!(
            sum.data_points,
            [NumberDataPoint {
                attributes: vec![],
                start_time_unix_nano: 1_000,
                time_unix_nano: 2_000,
                value: Some(number_data_point::Value::AsInt(300 << 20)),
            }]
        );
        // A float that is not finite has no point; its namesake keeps its own.
        let cpu = points(find(&metrics, "stemmon.tree.cpu.time"));
        assert_eq!(cpu.len(), 1);
        assert_eq!(cpu[0].attributes, [KeyValue::string("cpu.mode", "user")]);
        assert_eq!(cpu[0].value, Some(number_data_point::Value::AsDouble(1.5)));
        // Past i64, an integer saturates; a gauge has no start time.
        let peak = points(find(&metrics, "stemmon.peak_tree_rss"));
        assert_eq!(
            peak[0].value,
            Some(number_data_point::Value::AsInt(i64::MAX))
        );
        assert_eq!(peak[0].start_time_unix_nano, 0);
        // Stages: one point per stage with the figure, `stage.path` first.
        let calls = points(find(&metrics, "stemmon.stage.calls"));
        assert_eq!(calls.len(), 2);
        assert_eq!(
            calls[1].attributes,
            [KeyValue::string("stage.path", "load/parse")]
        );
        let stage_peak = points(find(&metrics, "stemmon.stage.peak_tree_rss"));
        assert_eq!(stage_peak.len(), 1);
        assert_eq!(
            stage_peak[0].value,
            Some(number_data_point::Value::AsInt(256 << 20))
        );
        let stage_cpu = points(find(&metrics, "stemmon.stage.cpu.time"));
        assert_eq!(
            stage_cpu[0].attributes,
            [
                KeyValue::string("stage.path", "load"),
                KeyValue::string("cpu.mode", "system")
            ]
        );
        // A figure no record has sends no metric at all.
        assert!(!metrics.iter().any(|m| m.name == "stemmon.heap.live"));
    }

    #[test]
    fn the_root_spans_attributes_are_the_runs_figures_under_their_report_keys() {
        let run = run_attributes(&report());
        assert!(run.contains(&KeyValue::int("stemmon.running", 0)));
        assert!(run.contains(&KeyValue::int("stemmon.tree_rss_bytes", 300 << 20)));
    }
}
