//! How the inputs' figures combine into one record, by the field table's `fold`.

use stemmon::report::StageReport;
use stemmon_report::fields::{field, Field, Fold, Unit, FIELDS};
use stemmon_report::read::MAX_SECONDS;

/// How `values` combine by `fold`; `None` without any (or for a figure recomputed).
pub(super) fn fold(fold: Fold, values: impl Iterator<Item = f64>) -> Option<f64> {
    match fold {
        Fold::Sum => values.reduce(|a, b| a + b),
        Fold::Max => values.reduce(f64::max),
        Fold::Derived => None,
    }
}

/// A figure as a report may hold it: seconds and cores within `0..=MAX_SECONDS`.
pub(super) fn within(unit: Unit, value: f64) -> f64 {
    match unit {
        Unit::Seconds | Unit::Cores => value.clamp(0.0, MAX_SECONDS),
        Unit::Share => value.clamp(0.0, 1.0),
        _ => value,
    }
}

/// Sets every field of `record` the table lets be set, folded from `of` over `records`
/// (a figure computed from others is left for [`recompute`]).
pub(super) fn fold_fields<R>(
    record: &mut StageReport,
    records: &[(usize, &R)],
    of: impl Fn(&Field, &R) -> Option<f64>,
) {
    for field in FIELDS
        .iter()
        .filter(|f| f.is_key() && f.fold != Fold::Derived)
    {
        let value = fold(field.fold, records.iter().filter_map(|(_, r)| of(field, r)));
        if let Some(value) = value {
            field.set(record, Some(within(field.unit, value)));
        }
    }
}

/// The figures computed from others, recomputed: `cpu_cores`, the CPU seconds of
/// `record` over `wall`, the wall seconds of the records that had CPU figures.
pub(super) fn recompute(record: &mut StageReport, wall: f64) {
    let (Some(cpu), Some(cores)) = (field("cpu_seconds"), field("cpu_cores")) else {
        return;
    };
    let value = cpu
        .of_stage(record)
        .filter(|_| wall > 0.0)
        .map(|cpu| within(Unit::Cores, cpu / wall));
    cores.set(record, value);
}

/// The bounds of the book's `exact-peaks.md` in a merged record: where an input had the sampled figure but
/// not its bound, the highest bound read may be below it, and the sampled one stands.
pub(super) fn keep_bounds(
    peaks: &stemmon::report::Peaks,
    high_water: &mut stemmon::report::HighWater,
) {
    let raise = |bound: &mut Option<u64>, floor: Option<u64>| {
        if let (Some(b), Some(f)) = (bound.as_mut(), floor) {
            *b = (*b).max(f);
        }
    };
    raise(
        &mut high_water.peak_tree_rss_bound_bytes,
        peaks.peak_tree_rss_bytes,
    );
    raise(
        &mut high_water.peak_parent_hwm_bytes,
        peaks.peak_parent_rss_bytes,
    );
}

/// The value all of `values` agree on, else `None`.
pub(super) fn agreed<T: PartialEq>(mut values: impl Iterator<Item = T>) -> Option<T> {
    let first = values.next()?;
    values.all(|v| v == first).then_some(first)
}
