//! The figures a record holds beyond the typed fields: those of the sources added since
//! 0.4 (the GPU's, the open descriptors', the memory pressure's), kept by key so that a new source adds keys without a new field in
//! every type. In the JSON they are keys like any other. On reading, a record keeps only
//! the figures its sources declare (each a number or `null`) and their sections (`gpu`,
//! `merge`, of a bounded size); a key no reader knows is skipped unkept.
//!
//! A record holds a few of them (a measurement's two or three), and a report may hold
//! 100 000 records: they are a short list sorted by key, each key the table's own
//! `'static` text where the table declares it, not a map with its nodes and a copy of
//! every key.

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Figures by report key (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures(Vec<(Cow<'static, str>, serde_json::Value)>);

impl Serialize for Figures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key.as_ref(), value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Figures {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Figures, D::Error> {
        let map = BTreeMap::<String, serde_json::Value>::deserialize(deserializer)?;
        let mut figures = Figures::default();
        for (key, value) in map {
            figures.set_value(&key, value);
        }
        Ok(figures)
    }
}

/// `key` as the table's own text where a measurement declares it (no copy), else a copy.
fn interned(key: &str) -> Cow<'static, str> {
    if let Some(known) = crate::fields::figure_keys()
        .chain(crate::fields::section_keys())
        .find(|k| *k == key)
    {
        return Cow::Borrowed(known);
    }
    Cow::Owned(key.to_owned())
}

impl Figures {
    /// The figure `key` as a number, `None` where absent, `null` or not a number.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(serde_json::Value::as_f64)
    }

    fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|at| &self.0[at].1)
    }

    /// The figure `key` as a whole number of bytes or a count.
    pub fn count(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(serde_json::Value::as_u64)
    }

    /// The value at `key` as it is (an object for a section such as `gpu`).
    pub fn value(&self, key: &str) -> Option<&serde_json::Value> {
        self.get(key)
    }

    /// Sets `key` to a whole number, or to `null` for `None`.
    pub fn set_count(&mut self, key: &str, value: Option<u64>) {
        self.set_value(key, value.map_or(serde_json::Value::Null, Into::into));
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
        self.set_value(key, value);
    }

    /// Sets `key` to `value` (a section, an array).
    pub fn set_value(&mut self, key: &str, value: serde_json::Value) {
        match self.0.binary_search_by(|(k, _)| k.as_ref().cmp(key)) {
            Ok(at) => self.0[at].1 = value,
            Err(at) => {
                // Exactly as many as held: a record holds two or three for good.
                self.0.reserve_exact(1);
                self.0.insert(at, (interned(key), value));
            }
        }
    }

    /// Whether no figure is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys held, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(key, _)| key.as_ref())
    }
}
