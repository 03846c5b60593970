//! The figures a record holds beyond the typed fields: those of the sources added since
//! 0.4 (the GPU's), kept by key so that a new source adds keys without a new field in
//! every type. In the JSON they are keys like any other. On reading, a record keeps only
//! the figures its sources declare (each a number or `null`) and their sections (`gpu`,
//! `merge`, of a bounded size); a key no reader knows is skipped unkept.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Figures by report key (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Figures(BTreeMap<String, serde_json::Value>);

impl Figures {
    /// The figure `key` as a number, `None` where absent, `null` or not a number.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.0.get(key).and_then(serde_json::Value::as_f64)
    }

    /// The figure `key` as a whole number of bytes or a count.
    pub fn count(&self, key: &str) -> Option<u64> {
        self.0.get(key).and_then(serde_json::Value::as_u64)
    }

    /// The value at `key` as it is (an object for a section such as `gpu`).
    pub fn value(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.get(key)
    }

    /// Sets `key` to a whole number, or to `null` for `None`.
    pub fn set_count(&mut self, key: &str, value: Option<u64>) {
        self.0.insert(
            key.to_owned(),
            value.map_or(serde_json::Value::Null, Into::into),
        );
    }

    /// Sets `key` to a number, or to `null` for `None` (or a value that is not finite):
    /// a whole one below 2^53 is written as an integer, as bytes and counts are.
    pub fn set_number(&mut self, key: &str, value: Option<f64>) {
        let value = match value.filter(|v| v.is_finite()) {
            None => serde_json::Value::Null,
            Some(v) if v >= 0.0 && v.fract() == 0.0 && v < 9_007_199_254_740_992.0 => {
                (v as u64).into()
            }
            Some(v) => v.into(),
        };
        self.0.insert(key.to_owned(), value);
    }

    /// Sets `key` to `value` (a section, an array).
    pub fn set_value(&mut self, key: &str, value: serde_json::Value) {
        self.0.insert(key.to_owned(), value);
    }

    /// Whether no figure is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys held, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}
