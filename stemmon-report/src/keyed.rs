//! Reading a record key by key, so that what a reader does not know costs nothing.
//!
//! A record that holds groups of figures ([`Peaks`], [`HighWater`], ...) beside its own
//! keys is one flat JSON object. Serde's `flatten` reads such an object by first
//! buffering every key it cannot place into a tree of its own (about 32 bytes a value:
//! a 250 MB array under an unknown key costs gigabytes). Here each key goes straight to
//! the field that takes it; a key no field takes is skipped as it is parsed
//! ([`IgnoredAny`]), never kept; the figures of the later sources ([`Figures`]) take only
//! the keys they declare, a section among them through a bounded number of values.

use crate::sections::{ProcessReport, TimelinePoint};
use crate::stage::{CpuIo, HighWater, Peaks, StageHeap, StageReport};
use crate::{Figures, Report};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;
use std::fmt;

/// A record, or a group of its figures, that takes the keys it knows from a JSON object.
pub(crate) trait Keyed {
    /// Reads the value of `key` from `map` into its field: `false` (nothing read) when
    /// no field here is named `key`.
    fn take<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
}

/// The [`Keyed`] impl of a type whose fields are each one key, read as their own type;
/// `then` lists the groups (fields that are [`Keyed`] themselves) asked in turn.
macro_rules! keyed {
    ($type:ty { $($field:ident),* $(,)? } $(charged { $($charged:ident),+ $(,)? })?
     $(then $($group:ident),+)?) => {
        impl Keyed for $type {
            fn take<'de, A: MapAccess<'de>>(
                &mut self,
                key: &str,
                map: &mut A,
            ) -> Result<bool, A::Error> {
                match key {
                    $(stringify!($field) => self.$field = map.next_value()?,)*
                    $($(stringify!($charged) => self.$charged = Charged::read(map)?,)+)?
                    _ => return Ok(false $($(|| self.$group.take(key, map)?)+)?),
                }
                Ok(true)
            }
        }
    };
}

/// `Deserialize` for a record read key by key: every key it does not take is skipped.
macro_rules! deserialize_by_key {
    ($($type:ty),+) => {$(
        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_map(ByKey::<$type>(std::marker::PhantomData))
            }
        }
    )+};
}

keyed!(Peaks {
    peak_tree_rss_bytes,
    peak_parent_rss_bytes,
    peak_children_rss_bytes,
    peak_tree_uss_bytes,
    peak_tree_pss_bytes,
    peak_tree_physical_footprint_bytes,
});

keyed!(HighWater {
    peak_parent_hwm_bytes,
    peak_tree_rss_bound_bytes,
    peak_tree_rss_at_least_bytes,
    peak_reaped_child_rss_bytes,
    peak_cgroup_memory_bytes,
    peak_cgroup_anon_bytes,
    oom_kills,
});

keyed!(StageHeap {
    heap_allocations,
    heap_allocated_bytes,
    heap_freed_bytes,
    heap_retained_bytes,
    peak_heap_bytes,
});

keyed!(CpuIo {
    cpu_user_seconds,
    cpu_system_seconds,
    cpu_cores,
    cpu_thread_seconds,
    io_read_bytes,
    io_write_bytes,
    major_faults,
});

keyed!(Report {
    format_version,
    pid,
    run_id,
    start_unix_seconds,
    running,
    error,
    error_message,
    exit_code,
    wall_seconds,
    sample_interval,
    platform,
    sampler,
    host,
    spawn_floor_bytes,
    detailed_memory,
    high_water_marks,
    sampling_attempts,
    sampling_seconds,
    max_sampling_seconds,
    max_sample_gap_seconds,
    sampling_error,
    output_error,
    export_error,
    samples,
    partial_rss_samples,
    peak_process_count,
    io_missing,
    heap,
    peak_rss_stage,
    peak_rss_elapsed_seconds,
    cgroup,
    latest_sample,
} charged {
    labels,
    command,
    processes,
    threads,
    stages,
    recent_samples,
    timeline,
    spans,
} then peaks, high_water, cpu_io, figures);

keyed!(StageReport {
    id,
    name,
    path,
    parent_id,
    calls,
    errors,
    threads,
    start_seconds,
    wall_seconds,
    min_wall_seconds,
    max_wall_seconds,
    error,
    samples,
    partial_rss_samples,
    peak_process_count,
} then peaks, high_water, heap, cpu_io, figures);

keyed!(ProcessReport {
    pid,
    ppid,
    command,
    first_seconds,
    last_seconds,
    peak_rss_bytes,
    exit_maxrss_bytes,
    cpu_seconds,
    exit_code,
    virtual_bytes, threads, open_fds,
} then figures);

keyed!(TimelinePoint {
    elapsed_seconds,
    end_seconds,
    tree_rss_bytes,
    parent_rss_bytes,
    children_rss_bytes,
    tree_rss_bound_bytes,
    cgroup_memory_bytes,
    process_count,
    heap_live_bytes,
    cpu_cores,
    samples,
} then figures);

deserialize_by_key!(Report, StageReport, ProcessReport, TimelinePoint);

thread_local! {
    /// Bytes the records being read may still take, `None` when unbounded.
    static BUDGET: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `read` with `bytes` to spend on the records of collections (each charged its
/// size in memory): a report of many tiny records (`[{}, {}, ...]`, three bytes of
/// JSON for hundreds in memory) is refused before it costs more than that.
pub(crate) fn with_budget<R>(bytes: u64, read: impl FnOnce() -> R) -> R {
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET.with(|budget| budget.set(self.0));
        }
    }
    let _restore = Restore(BUDGET.with(|budget| budget.replace(Some(bytes))));
    read()
}

/// Spends `bytes` of the budget, or fails past it.
fn charge<E: de::Error>(bytes: usize) -> Result<(), E> {
    BUDGET.with(|budget| match budget.get() {
        None => Ok(()),
        Some(left) => match left.checked_sub(bytes as u64) {
            Some(left) => {
                budget.set(Some(left));
                Ok(())
            }
            None => Err(E::custom(
                "it holds more records than a report of its size can (many tiny ones?)",
            )),
        },
    })
}

/// A collection read with each element charged to the budget.
trait Charged: Sized {
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error>;
}

impl<T: for<'de> Deserialize<'de>> Charged for Vec<T> {
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        map.next_value_seed(ChargedSeq(std::marker::PhantomData))
    }
}

impl<T: for<'de> Deserialize<'de>> Charged for Option<Vec<T>> {
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        struct Seed<T>(std::marker::PhantomData<T>);
        impl<'de, T: for<'a> Deserialize<'a>> DeserializeSeed<'de> for Seed<T> {
            type Value = Option<Vec<T>>;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_option(self)
            }
        }
        impl<'de, T: for<'a> Deserialize<'a>> Visitor<'de> for Seed<T> {
            type Value = Option<Vec<T>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array or null")
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                ChargedSeq(std::marker::PhantomData)
                    .deserialize(d)
                    .map(Some)
            }
        }
        map.next_value_seed(Seed(std::marker::PhantomData))
    }
}

impl Charged for std::collections::BTreeMap<String, String> {
    fn read<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        struct Seed;
        impl<'de> DeserializeSeed<'de> for Seed {
            type Value = std::collections::BTreeMap<String, String>;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_map(self)
            }
        }
        impl<'de> Visitor<'de> for Seed {
            type Value = std::collections::BTreeMap<String, String>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = std::collections::BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, String>()? {
                    // Two strings and a tree node's share.
                    charge(2 * std::mem::size_of::<String>() + 32)?;
                    out.insert(key, value);
                }
                Ok(out)
            }
        }
        map.next_value_seed(Seed)
    }
}

/// An array whose elements are charged their size in memory.
struct ChargedSeq<T>(std::marker::PhantomData<T>);

impl<'de, T: for<'a> Deserialize<'a>> DeserializeSeed<'de> for ChargedSeq<T> {
    type Value = Vec<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: for<'a> Deserialize<'a>> Visitor<'de> for ChargedSeq<T> {
    type Value = Vec<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::new();
        while let Some(element) = seq.next_element::<T>()? {
            charge(std::mem::size_of::<T>())?;
            out.push(element);
        }
        Ok(out)
    }
}

/// The most values a section holds: far more than a GPU section of 64 devices or the
/// merge of 10 000 runs, and a few MiB in memory.
pub(crate) const MAX_SECTION_VALUES: usize = 200_000;

impl Keyed for Figures {
    fn take<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        if let Some(skip) = crate::fields::section(key) {
            let mut left = MAX_SECTION_VALUES;
            let value = map.next_value_seed(Bounded {
                key,
                left: &mut left,
                skip,
            })?;
            self.set_value(key, value);
        } else if crate::fields::figure_keys().any(|k| k == key)
            || crate::fields::field(key).is_some_and(|f| f.is_key())
        {
            // A figure is a number or `null`: anything else is refused, not kept.
            let value: Option<serde_json::Number> = map.next_value()?;
            self.set_value(key, value.map_or(serde_json::Value::Null, Into::into));
        } else {
            return Ok(false);
        }
        Ok(true)
    }
}

/// The visitor of a record read by key.
struct ByKey<T>(std::marker::PhantomData<T>);

impl<'de, T: Keyed + Default> Visitor<'de> for ByKey<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut record = T::default();
        while let Some(Key(key)) = map.next_key()? {
            if !record.take(&key, &mut map)? {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(record)
    }
}

/// A key, borrowed from the input where it can be.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// A section's JSON value, refused past a number of values (`left`, shared by its
/// nested values), so that a hostile section costs at most a few MiB; the keys `skip`
/// of its top object are skipped.
struct Bounded<'a> {
    key: &'a str,
    left: &'a mut usize,
    skip: &'a [&'a str],
}

impl Bounded<'_> {
    fn count<E: de::Error>(&mut self) -> Result<(), E> {
        match self.left.checked_sub(1) {
            Some(left) => {
                *self.left = left;
                Ok(())
            }
            None => Err(E::custom(format_args!(
                "the `{}` section holds more than {MAX_SECTION_VALUES} values",
                self.key
            ))),
        }
    }

    fn again(&mut self) -> Bounded<'_> {
        Bounded {
            key: self.key,
            left: self.left,
            skip: &[],
        }
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = serde_json::Value;

    fn deserialize<D: Deserializer<'de>>(mut self, d: D) -> Result<Self::Value, D::Error> {
        self.count()?;
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut values = Vec::new();
        while let Some(value) = seq.next_element_seed(self.again())? {
            values.push(value);
        }
        Ok(values.into())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values = serde_json::Map::new();
        while let Some(Key(key)) = map.next_key()? {
            if self.skip.contains(&&*key) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.count()?;
            let value = map.next_value_seed(self.again())?;
            values.insert(key.into_owned(), value);
        }
        Ok(values.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sections::{ProcessReport, TimelinePoint};

    /// Every key a record writes is one it reads: a field added to a type but not to its
    /// list here would be lost on reading.
    fn reads_every_key_it_writes<T: serde::Serialize + Default + Keyed>(what: &str) {
        let written = serde_json::to_value(T::default()).unwrap();
        for (key, value) in written.as_object().unwrap() {
            let one = serde_json::json!({ key: value }).to_string();
            let mut de = serde_json::Deserializer::from_str(&one);
            struct Probe<T>(std::marker::PhantomData<T>, String);
            impl<'de, T: Keyed + Default> Visitor<'de> for Probe<T> {
                type Value = bool;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
                    let _: Option<Key> = map.next_key()?;
                    T::default().take(&self.1, &mut map)
                }
            }
            let taken = de
                .deserialize_map(Probe::<T>(std::marker::PhantomData, key.clone()))
                .unwrap();
            assert!(taken, "{what} writes `{key}` but does not read it");
        }
    }

    #[test]
    fn every_record_reads_every_key_it_writes() {
        reads_every_key_it_writes::<Report>("Report");
        reads_every_key_it_writes::<StageReport>("StageReport");
        reads_every_key_it_writes::<ProcessReport>("ProcessReport");
        reads_every_key_it_writes::<TimelinePoint>("TimelinePoint");
    }

    #[test]
    fn the_keys_written_only_when_set_read_back() {
        // Keys left out while `None` (`skip_serializing_if`), which a default record
        // does not write.
        let high_water = |floor, anon| crate::HighWater {
            peak_tree_rss_at_least_bytes: Some(floor),
            peak_cgroup_anon_bytes: Some(anon),
            ..crate::HighWater::default()
        };
        let stage = StageReport {
            high_water: high_water(9, 10),
            ..StageReport::default()
        };
        let report = Report {
            error_message: Some("bad input".into()),
            high_water: high_water(7, 8),
            stages: vec![stage],
            ..Report::default()
        };
        let text = serde_json::to_string(&report).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back.error_message.as_deref(), Some("bad input"), "{text}");
        assert_eq!(back.high_water, report.high_water, "{text}");
        assert_eq!(
            back.stages[0].high_water, report.stages[0].high_water,
            "{text}"
        );
    }

    #[test]
    fn unknown_keys_are_skipped_and_figures_kept() {
        let text = r#"{"pid": 3, "later": [1, [2, {"x": 3}]], "peak_tree_gpu_bytes": 5,
                       "gpu": {"devices": [{"id": 0}]}, "stages": [{"id": 0, "unknown": {}}]}"#;
        let report: Report = serde_json::from_str(text).unwrap();
        assert_eq!(report.pid, 3);
        assert_eq!(report.figures.count("peak_tree_gpu_bytes"), Some(5));
        assert!(report.figures.value("gpu").is_some());
        assert_eq!(report.figures.keys().count(), 2, "{:?}", report.figures);
        assert!(report.stages[0].figures.is_empty());
        let bad_figure = r#"{"peak_tree_gpu_bytes": [1, 2]}"#;
        assert!(serde_json::from_str::<Report>(bad_figure).is_err());
    }

    #[test]
    fn records_past_the_budget_are_refused() {
        let many = format!(r#"{{"stages": [{}{{}}]}}"#, "{},".repeat(999));
        let stage = std::mem::size_of::<StageReport>() as u64;
        let fits = with_budget(1000 * stage, || serde_json::from_str::<Report>(&many));
        assert_eq!(fits.unwrap().stages.len(), 1000);
        let refused = with_budget(999 * stage, || serde_json::from_str::<Report>(&many));
        assert!(refused
            .unwrap_err()
            .to_string()
            .contains("more records than"));
        // Unbounded outside a budget, and the budget is gone after one.
        assert!(serde_json::from_str::<Report>(&many).is_ok());
    }

    #[test]
    fn a_section_past_its_values_is_refused() {
        let many = format!(r#"{{"gpu": [{}0]}}"#, "0,".repeat(MAX_SECTION_VALUES));
        let error = serde_json::from_str::<Report>(&many)
            .unwrap_err()
            .to_string();
        assert!(error.contains("holds more than"), "{error}");
        let fits = format!(r#"{{"gpu": [{}0]}}"#, "0,".repeat(MAX_SECTION_VALUES - 2));
        assert!(serde_json::from_str::<Report>(&fits).is_ok());
        let merge = r#"{"merge": {"inputs": [{"host": "a"}], "stages": [{"path": "x"}]}}"#;
        let report: Report = serde_json::from_str(merge).unwrap();
        let section = report.figures.value("merge").unwrap();
        assert_eq!(section["inputs"][0]["host"], "a");
        assert!(section.get("stages").is_none(), "{section}");
    }
}
