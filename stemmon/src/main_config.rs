//! The settings of a `#[monitor_main]` program: the attribute's keys ([`MainConfig`])
//! with the `STEMMON_*` environment overrides on top (read by `env`). Every bad value is
//! one warning and leaves the attribute's setting as it is; a program never fails on
//! its environment.

use crate::builder::MonitorBuilder;
use crate::env::Overrides;
use crate::monitor::Monitor;
use std::ffi::OsString;
use std::time::Duration;
use stemmon_report::settings;

/// The arguments of `#[monitor_main(...)]`; `None` where the key was not written.
#[derive(Debug, Default)]
pub struct MainConfig {
    /// `output = "path"`.
    pub output: Option<&'static str>,
    /// `sample_interval = seconds`.
    pub sample_interval: Option<f64>,
    /// `log_interval = seconds` (`Some(Some(_))`) or `log_interval = None` (`Some(None)`).
    pub log_interval: Option<Option<f64>>,
    /// `detailed_memory = bool`.
    pub detailed_memory: Option<bool>,
    /// `max_samples = count`.
    pub max_samples: Option<usize>,
    /// `high_water_marks = "reset" | "keep" | bool`.
    pub high_water_marks: Option<settings::Marks>,
}

/// The attribute's settings with the environment's overrides on top, or `None` when
/// `STEMMON_DISABLE` asks for no monitor. Every bad value adds one warning and leaves
/// the attribute's setting as it is.
fn builder_for(config: &MainConfig, overrides: &mut Overrides<'_>) -> Option<MonitorBuilder> {
    if overrides.disabled() {
        return None;
    }
    let mut builder = Monitor::builder();
    // The macro checked the attribute's values against the same table.
    let seconds = |s: f64| Duration::try_from_secs_f64(s).ok();
    if let Some(every) = config.sample_interval.and_then(seconds) {
        builder = builder.sample_interval(every);
    }
    if let Some(log) = config.log_interval {
        builder = builder.log_interval(log.and_then(seconds));
    }
    if let Some(path) = config.output {
        builder = builder.output(path);
    }
    if let Some(detailed) = config.detailed_memory {
        builder = builder.detailed_memory(detailed);
    }
    if let Some(count) = config.max_samples {
        builder = builder.max_samples(count);
    }
    if let Some(marks) = config.high_water_marks {
        builder = builder.high_water_marks(marks);
    }
    if let Some(path) = overrides.output() {
        builder = builder.output(path);
    }
    if let Some(Some(every)) = overrides.interval(&settings::SAMPLE_INTERVAL) {
        builder = builder.sample_interval(every);
    }
    if let Some(log) = overrides.interval(&settings::LOG_INTERVAL) {
        builder = builder.log_interval(log);
    }
    match overrides.marks() {
        Some(Some(marks)) => builder = builder.high_water_marks(marks),
        // `1`: on, with the attribute's resets.
        Some(None) => builder.config.high_water_marks = true,
        None => {}
    }
    // Read and warned about here: `start` does not read the variable again.
    builder.env_read = true;
    Some(builder)
}

/// The builder for `config` under the environment `lookup` answers for (`None` when
/// `STEMMON_DISABLE` asks for no monitor), and the warnings, one per bad value.
pub(crate) fn resolve(
    config: &MainConfig,
    lookup: &dyn Fn(&str) -> Option<OsString>,
) -> (Option<MonitorBuilder>, Vec<String>) {
    let mut overrides = Overrides {
        lookup,
        warnings: Vec::new(),
    };
    let builder = builder_for(config, &mut overrides);
    (builder, overrides.warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;
    use stemmon_report::settings::Value;

    /// The builder's config and the warnings for `config` under the environment `env`.
    fn start_with(
        config: &MainConfig,
        env: &[(&str, OsString)],
    ) -> (Option<crate::config::Config>, Vec<String>) {
        let env: HashMap<String, OsString> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        let (builder, warnings) = resolve(config, &move |name: &str| env.get(name).cloned());
        (builder.map(|b| b.config), warnings)
    }

    fn attribute() -> MainConfig {
        MainConfig {
            output: Some("attr.json"),
            sample_interval: Some(0.05),
            log_interval: Some(Some(0.1)),
            high_water_marks: Some(settings::Marks::Off),
            ..MainConfig::default()
        }
    }

    fn parse_interval(text: &str) -> Option<Duration> {
        match settings::SAMPLE_INTERVAL.parse(text) {
            Ok(Value::Interval(every)) => Some(every),
            _ => None,
        }
    }

    #[test]
    fn intervals_are_range_checked() {
        for good in ["0.001", "1", " 2.5 ", "86400", "1e-3"] {
            assert!(parse_interval(good).is_some(), "{good}");
        }
        for bad in [
            "",
            "fast",
            "0",
            "-1",
            "1e-12",
            "0.0009",
            "86400.001",
            "1e19",
            "1e308",
            "1e400",
            "NaN",
            "inf",
            "-inf",
            "0x10",
        ] {
            assert_eq!(parse_interval(bad), None, "{bad}");
        }
        assert_eq!(parse_interval("0.25"), Some(Duration::from_millis(250)));
    }

    #[test]
    fn each_bad_value_gets_one_warning_naming_it_and_the_attribute_stands() {
        let values = ["1e19", "1e308", "1e-12", "NaN", "inf", "", "-1", "fast"];
        for value in values {
            let (config, warnings) = start_with(
                &attribute(),
                &[
                    ("STEMMON_SAMPLE_INTERVAL", value.into()),
                    ("STEMMON_LOG_INTERVAL", value.into()),
                    ("STEMMON_HIGH_WATER_MARKS", value.into()),
                ],
            );
            let config = config.unwrap();
            assert_eq!(config.sample_interval, Duration::from_millis(50), "{value}");
            assert_eq!(config.log_interval, Some(Duration::from_millis(100)));
            assert!(!config.high_water_marks);
            assert_eq!(warnings.len(), 3, "{value}: {warnings:?}");
            for (warning, name) in warnings.iter().zip([
                "STEMMON_SAMPLE_INTERVAL",
                "STEMMON_LOG_INTERVAL",
                "STEMMON_HIGH_WATER_MARKS",
            ]) {
                assert!(
                    warning.starts_with(&format!("ignoring {name}={value:?}: expected ")),
                    "{warning}"
                );
            }
        }
    }

    #[test]
    fn good_values_override_the_attribute() {
        let (config, warnings) = start_with(
            &attribute(),
            &[
                ("STEMMON_SAMPLE_INTERVAL", "0.02".into()),
                ("STEMMON_LOG_INTERVAL", "NONE".into()),
                ("STEMMON_OUTPUT", "env.json".into()),
                ("STEMMON_HIGH_WATER_MARKS", "1".into()),
                ("STEMMON_DISABLE", "0".into()),
            ],
        );
        assert_eq!(warnings, Vec::<String>::new());
        let config = config.unwrap();
        assert_eq!(config.sample_interval, Duration::from_millis(20));
        assert_eq!(config.log_interval, None);
        assert_eq!(config.output, Some(PathBuf::from("env.json")));
        assert!(config.high_water_marks);
        // And without the environment, the attribute's keys reach the builder.
        let (config, _) = start_with(&attribute(), &[]);
        let config = config.unwrap();
        assert_eq!(config.output, Some(PathBuf::from("attr.json")));
        assert!(!config.high_water_marks);
    }

    #[test]
    fn the_builder_is_marked_as_having_read_the_environment() {
        // `start` does not read it again (nor warn about it twice).
        let (builder, _) = resolve(&attribute(), &|_| None);
        assert!(builder.unwrap().env_read);
    }

    #[cfg(unix)]
    #[test]
    fn a_bad_output_is_warned_about_and_the_attribute_path_kept() {
        use std::os::unix::ffi::OsStringExt;
        for (value, expected) in [
            (OsString::new(), "\"\""),
            (
                OsString::from_vec(b"r\xffport.json".to_vec()),
                "\"r\u{fffd}port.json\"",
            ),
            (OsString::from("reports/"), "\"reports/\""),
            (OsString::from(".."), "\"..\""),
        ] {
            let (config, warnings) = start_with(&attribute(), &[("STEMMON_OUTPUT", value)]);
            assert_eq!(config.unwrap().output, Some(PathBuf::from("attr.json")));
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(
                warnings[0].starts_with(&format!("ignoring STEMMON_OUTPUT={expected}: ")),
                "{warnings:?}"
            );
        }
    }

    #[test]
    fn stemmon_disable_turns_the_monitor_off_and_a_bad_value_does_not() {
        for on in ["1", "true", "YES", "on"] {
            let (config, warnings) = start_with(&attribute(), &[("STEMMON_DISABLE", on.into())]);
            assert!(config.is_none() && warnings.is_empty(), "{on}");
        }
        for off in ["0", "", "off"] {
            let (config, warnings) = start_with(&attribute(), &[("STEMMON_DISABLE", off.into())]);
            assert!(config.is_some() && warnings.is_empty(), "{off}");
        }
        let (config, warnings) = start_with(&attribute(), &[("STEMMON_DISABLE", "maybe".into())]);
        assert!(config.is_some());
        assert_eq!(
            warnings,
            ["ignoring STEMMON_DISABLE=\"maybe\": expected 1 or 0 (true or false); the program's own \
              setting stands"]
        );
    }
}
