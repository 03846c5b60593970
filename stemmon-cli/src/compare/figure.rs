//! The figures `compare` judges: the field table's ([`stemmon_report::fields`]). Each
//! `--metric` judges the fields whose `metrics` name it, in the table's order, with the
//! table's label, meaning and unit; `exact` keeps its own rule ([`super::figures`]).

use super::Args;
use stemmon_report::fields::{Field, Metric, Unit, FIELDS};

/// A figure `compare` judges: a field of the table.
pub(super) type Figure = &'static Field;

/// The fields `metric` judges, in the table's order.
pub(super) fn judged_by(metric: Metric) -> Vec<Figure> {
    FIELDS
        .iter()
        .filter(|field| field.metrics.contains(&metric))
        .collect()
}

/// Whether two figures are the same field.
pub(super) fn same(a: Figure, b: Figure) -> bool {
    a.key == b.key
}

/// A value of the figure as printed, by its unit.
pub(super) fn show(figure: Figure, value: Option<f64>) -> String {
    crate::format::figure(figure.unit, value)
}

/// The growth in percent past which NEW fails: the time threshold for CPU seconds (10 %
/// by default, a loaded machine does not stretch CPU time as it does wall time), the
/// memory one for the rest (bytes).
pub(super) fn limit(figure: Figure, args: &Args) -> f64 {
    match figure.unit {
        Unit::Seconds => args.max_time_increase.unwrap_or(10.0),
        _ => args.max_memory_increase,
    }
}
