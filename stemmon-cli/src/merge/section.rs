//! The merged report's `merge` key: what each input said, and the spread of each
//! figure over the inputs.

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use std::collections::BTreeMap;
use stemmon_report::fields::{Field, Unit, FIELDS};

/// The merged report's `merge` key (see the module docs).
#[derive(Debug, Default, Serialize)]
pub(super) struct Section {
    /// The reports merged, in the order given.
    pub(super) inputs: Vec<InputRun>,
    /// Every run merged in: the inputs' identities, and those merged inputs held.
    pub(super) runs: Vec<String>,
    /// The index in `inputs` of the report whose timeline, samples, spans and sections
    /// the merged report holds.
    pub(super) timeline_from: usize,
    /// The whole run's figures over the inputs, by field key (with two inputs or more).
    pub(super) run: BTreeMap<&'static str, Spread>,
    /// Each stage's inputs, and its figures over them where two or more ran it, in the
    /// order of `stages`.
    pub(super) stages: Vec<StageSpreads>,
    /// For each of `processes`, the index in `inputs` of the report that saw it.
    pub(super) processes: Vec<usize>,
}

/// One merged report.
#[derive(Debug, Default, Serialize)]
pub(super) struct InputRun {
    /// The file it was read from, as given.
    pub(super) file: String,
    /// Its identity: its `run_id`, else its host, labels, pid and wall time.
    pub(super) identity: String,
    pub(super) host: String,
    /// Its `labels.rank`, if any.
    pub(super) rank: Option<String>,
    pub(super) pid: u32,
    pub(super) wall_seconds: f64,
    /// Its `error`: why its run failed.
    pub(super) error: Option<String>,
}

/// One stage path's figures over the inputs that ran it.
#[derive(Debug, Default)]
pub(super) struct StageSpreads {
    pub(super) path: String,
    /// How many of the inputs ran it.
    pub(super) reports: u32,
    /// The index in `inputs` of the first that ran it (the only one, for one).
    pub(super) first_report: usize,
    /// Its figures over the inputs that ran it, in the order of their keys: none for a
    /// stage one input ran, whose figures are the stage's own (the section stays small
    /// beside the stages however many a report holds). Written beside `path`, each
    /// under its field's key.
    pub(super) figures: Vec<Spread>,
}

impl Serialize for StageSpreads {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut out = serializer.serialize_map(Some(3 + self.figures.len()))?;
        out.serialize_entry("path", &self.path)?;
        out.serialize_entry("reports", &self.reports)?;
        out.serialize_entry("first_report", &self.first_report)?;
        for spread in &self.figures {
            out.serialize_entry(spread.field().key, spread)?;
        }
        out.end()
    }
}

// A field's index fits in a spread's byte.
const _: () = assert!(FIELDS.len() <= u8::MAX as usize);

/// A figure over the records that have it (at least one): 40 bytes, one per figure of
/// each stage of a merge.
#[derive(Clone, Copy, Debug)]
pub(super) struct Spread {
    /// Its field's index in [`FIELDS`].
    field: u8,
    pub(super) count: u32,
    /// The index in `inputs` of the record with the max, the first on a tie.
    pub(super) max_report: usize,
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) sum: f64,
}

impl Spread {
    /// The spread of one `value` of the field at `field` in [`FIELDS`], from input `at`.
    pub(super) fn new(field: usize, at: usize, value: f64) -> Spread {
        Spread {
            field: field as u8,
            count: 1,
            max_report: at,
            min: value,
            max: value,
            sum: value,
        }
    }

    /// Takes in one more `value`, from input `at` (after those taken in already).
    pub(super) fn add(&mut self, at: usize, value: f64) {
        self.count += 1;
        self.min = self.min.min(value);
        if value > self.max {
            self.max = value;
            self.max_report = at;
        }
        self.sum += value;
    }

    /// Its field's index in [`FIELDS`].
    pub(super) fn field_index(&self) -> usize {
        usize::from(self.field)
    }

    /// Its field.
    pub(super) fn field(&self) -> &'static Field {
        &FIELDS[usize::from(self.field)]
    }

    /// The spread of `(input index, value)` pairs of the field at `field`, `None` for
    /// none.
    fn of(field: usize, values: impl IntoIterator<Item = (usize, f64)>) -> Option<Spread> {
        let mut values = values.into_iter();
        let (at, first) = values.next()?;
        let mut spread = Spread::new(field, at, first);
        for (at, value) in values {
            spread.add(at, value);
        }
        Some(spread)
    }
}

impl Serialize for Spread {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Bytes and counts as whole numbers, as a report writes them.
        let whole = matches!(self.field().unit, Unit::Bytes | Unit::Count);
        let number = |value: f64| Number { value, whole };
        let mut out = serializer.serialize_struct("Spread", 6)?;
        out.serialize_field("count", &self.count)?;
        out.serialize_field("min", &number(self.min))?;
        out.serialize_field("mean", &(self.sum / f64::from(self.count)))?;
        out.serialize_field("max", &number(self.max))?;
        out.serialize_field("sum", &number(self.sum))?;
        out.serialize_field("max_report", &self.max_report)?;
        out.end()
    }
}

/// A figure written as a whole number where its unit is one and it is whole.
struct Number {
    value: f64,
    whole: bool,
}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let v = self.value;
        if self.whole && v.fract() == 0.0 && (0.0..u64::MAX as f64).contains(&v) {
            serializer.serialize_u64(v as u64)
        } else if self.whole && v.fract() == 0.0 && (i64::MIN as f64..0.0).contains(&v) {
            serializer.serialize_i64(v as i64)
        } else {
            serializer.serialize_f64(v)
        }
    }
}

/// The spreads of every field over `records`, by key.
pub(super) fn spreads<R>(
    records: &[(usize, &R)],
    of: impl Fn(&Field, &R) -> Option<f64>,
) -> BTreeMap<&'static str, Spread> {
    FIELDS
        .iter()
        .enumerate()
        .filter_map(|(index, field)| {
            let values = records
                .iter()
                .filter_map(|&(at, r)| of(field, r).map(|v| (at, v)));
            Spread::of(index, values).map(|spread| (field.key, spread))
        })
        .collect()
}
