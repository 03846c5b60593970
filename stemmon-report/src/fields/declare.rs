//! How a figure is declared: every column of the field table in one call, and its
//! exported metric.

use super::{Access, Export, Field, Fold, Metric, Source, Unit};

/// A field of `key`: where it comes from, its unit, its fold, its label and meaning,
/// the `compare --metric` groups that judge it, its exported metric and how it is read
/// and written.
#[allow(clippy::too_many_arguments)] // One declaration: every column of the table.
pub(crate) const fn declare(
    key: &'static str,
    source: Source,
    unit: Unit,
    fold: Fold,
    words: (&'static str, &'static str),
    metrics: &'static [Metric],
    export: Option<Export>,
    access: Access,
) -> Field {
    Field {
        key,
        source,
        unit,
        fold,
        label: words.0,
        meaning: words.1,
        metrics,
        export,
        column: false,
        stage: access.0,
        run: access.1,
        set: access.2,
        set_run: None,
    }
}

/// Exported as a gauge (a peak): `stemmon_<name>`, `stemmon.<otlp>`.
pub(crate) const fn gauge(name: &'static str, otlp: &'static str) -> Option<Export> {
    Some(Export {
        name,
        otlp,
        counter: false,
    })
}

/// Exported as a counter (a sum over calls): `stemmon_<name>_total`, `stemmon.<otlp>`.
pub(crate) const fn counter(name: &'static str, otlp: &'static str) -> Option<Export> {
    Some(Export {
        name,
        otlp,
        counter: true,
    })
}
