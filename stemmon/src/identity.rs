//! Who this process is in a larger job (the book's `prometheus.md`): the host, and labels from the
//! scheduler's environment, the builder and `STEMMON_LABELS`.
//!
//! The labels go into the report and onto every exported metric series, so they must be
//! valid Prometheus label names and values; a bad one is never sent.

use crate::config::Config;
use crate::error::Error;
use std::collections::BTreeMap;

/// Extra labels for every monitor of the process: `"k=v,k=v"`.
pub(crate) const LABELS_VAR: &str = "STEMMON_LABELS";

/// Labels taken from the scheduler's or launcher's environment, each from the first
/// variable of its list that is set: Slurm, Open MPI, MPICH / Intel MPI, torchrun.
const FROM_ENVIRONMENT: [(&str, &[&str]); 3] = [
    ("job_id", &["SLURM_JOB_ID"]),
    ("array_task", &["SLURM_ARRAY_TASK_ID"]),
    (
        "rank",
        &["SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"],
    ),
];

/// The host name and the labels of this monitor.
///
/// Precedence, lowest first: the scheduler's variables, the builder's `.label(k, v)`,
/// `STEMMON_LABELS` (the environment of one run overrides what the code says, as
/// `STEMMON_OUTPUT` does). A bad builder label is an `Error::InvalidConfig`; a bad
/// label from the environment is dropped with a one-line warning on stderr.
pub(crate) fn collect(config: &Config) -> Result<(String, BTreeMap<String, String>), Error> {
    collect_from(
        config,
        |name| crate::env::var(name).and_then(|v| v.into_string().ok()),
        &mut |message| crate::warn::warn(message),
    )
}

/// [`collect`] with the environment and the warning sink given, for tests.
fn collect_from(
    config: &Config,
    env: impl Fn(&str) -> Option<String>,
    warn: &mut dyn FnMut(&str),
) -> Result<(String, BTreeMap<String, String>), Error> {
    let mut labels = BTreeMap::new();
    for (label, variables) in FROM_ENVIRONMENT {
        let found = variables
            .iter()
            .find_map(|variable| env(variable).map(|value| (*variable, value)));
        if let Some((variable, value)) = found {
            match check_value(&value) {
                Ok(()) => {
                    labels.insert(label.to_owned(), value);
                }
                Err(reason) => warn(&format!(
                    "ignoring {variable}={value:?} as label `{label}`: {reason}"
                )),
            }
        }
    }
    for (name, value) in &config.labels {
        check_label(name, value).map_err(|reason| Error::InvalidConfig {
            setting: "label",
            reason,
        })?;
        labels.insert(name.clone(), value.clone());
    }
    if let Some(text) = env(LABELS_VAR) {
        for (name, value) in parse_labels(&text, warn) {
            labels.insert(name, value);
        }
    }
    Ok((host_name(), labels))
}

/// Parses `"k=v,k=v"`; a malformed or invalid pair is dropped with a warning.
fn parse_labels(text: &str, warn: &mut dyn FnMut(&str)) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    for pair in text
        .split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
    {
        let checked = match pair.split_once('=') {
            None => Err("expected `name=value`".to_owned()),
            Some((name, value)) => {
                let (name, value) = (name.trim(), value.trim());
                check_label(name, value).map(|()| (name.to_owned(), value.to_owned()))
            }
        };
        match checked {
            Ok(label) => labels.push(label),
            Err(reason) => warn(&format!("ignoring {LABELS_VAR} entry {pair:?}: {reason}")),
        }
    }
    labels
}

pub(crate) use stemmon_report::{check_label, check_label_value as check_value};

/// A new run id: 128 bits as 32 hex digits, from the host, the pid, the time and
/// std's per-process random hash keys, so that two runs never share one (not even
/// two monitors of one process, which differ in the time and in the keys' counter).
pub(crate) fn run_id(host: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let half = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.write(host.as_bytes());
        hasher.write_u32(std::process::id());
        hasher.write_u128(now);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

/// The machine's host name, `"unknown"` if the OS does not say.
pub(crate) fn host_name() -> String {
    sysinfo::System::host_name()
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(crate::sys::kernel_host_name)
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(
        config: &Config,
        vars: &[(&str, &str)],
    ) -> (Result<BTreeMap<String, String>, String>, Vec<String>) {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut warnings = Vec::new();
        let result = collect_from(config, |name| vars.get(name).cloned(), &mut |w| {
            warnings.push(w.to_owned())
        });
        (
            result.map(|(_, labels)| labels).map_err(|e| e.to_string()),
            warnings,
        )
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn slurm_variables_give_job_array_task_and_rank() {
        let (got, warnings) = run(
            &Config::default(),
            &[
                ("SLURM_JOB_ID", "4711"),
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_PROCID", "5"),
                ("RANK", "9"),
            ],
        );
        assert_eq!(
            got.unwrap(),
            labels(&[("job_id", "4711"), ("array_task", "3"), ("rank", "5")])
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn rank_comes_from_the_first_launcher_variable_set() {
        let (got, _) = run(&Config::default(), &[("PMI_RANK", "2"), ("RANK", "7")]);
        assert_eq!(got.unwrap(), labels(&[("rank", "2")]));
        let (got, _) = run(&Config::default(), &[("RANK", "7")]);
        assert_eq!(got.unwrap(), labels(&[("rank", "7")]));
        let (got, _) = run(&Config::default(), &[("OMPI_COMM_WORLD_RANK", "1")]);
        assert_eq!(got.unwrap(), labels(&[("rank", "1")]));
    }

    #[test]
    fn builder_labels_override_the_scheduler_and_the_environment_overrides_both() {
        let config = Config {
            labels: vec![("rank".into(), "40".into()), ("model".into(), "a".into())],
            ..Config::default()
        };
        let (got, warnings) = run(
            &config,
            &[
                ("RANK", "1"),
                ("STEMMON_LABELS", " model = b , dataset=2026-11,, "),
            ],
        );
        assert_eq!(
            got.unwrap(),
            labels(&[("rank", "40"), ("model", "b"), ("dataset", "2026-11")])
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn bad_environment_labels_are_dropped_with_a_warning_naming_them() {
        let (got, warnings) = run(
            &Config::default(),
            &[
                ("STEMMON_LABELS", "ok=1,2bad=x,host=h,noequals,__x=1,empty="),
                ("SLURM_JOB_ID", "12\n3"),
            ],
        );
        assert_eq!(got.unwrap(), labels(&[("ok", "1")]));
        assert_eq!(warnings.len(), 6, "{warnings:?}");
        assert!(
            warnings[0].contains("SLURM_JOB_ID=\"12\\n3\""),
            "{}",
            warnings[0]
        );
        assert!(warnings[0].contains("control character"), "{}", warnings[0]);
        assert!(warnings[1].contains("STEMMON_LABELS entry \"2bad=x\""));
        assert!(warnings[2].contains("reserved"), "{}", warnings[2]);
        assert!(warnings[3].contains("expected `name=value`"));
        assert!(warnings[4].contains("`__`"));
        assert!(warnings[5].contains("empty"));
    }

    #[test]
    fn a_bad_builder_label_fails_with_the_setting_named() {
        for (name, value, why) in [
            ("rank-2", "1", "not a Prometheus label name"),
            ("stage", "x", "reserved"),
            ("job", "x", "reserved"),
            ("__name__", "x", "`__`"),
            ("", "x", "not a Prometheus label name"),
            ("model", "", "empty"),
            ("model", "a\tb", "control character"),
        ] {
            let config = Config {
                labels: vec![(name.into(), value.into())],
                ..Config::default()
            };
            let error = run(&config, &[]).0.unwrap_err();
            assert!(error.starts_with("invalid `label`: "), "{error}");
            assert!(error.contains(why), "{name}={value:?}: {error}");
        }
        let long = "x".repeat(1025);
        assert!(check_label("model", &long)
            .unwrap_err()
            .contains("1025 bytes"));
        assert!(check_label("_ok9", "any printable text / ü").is_ok());
    }

    #[test]
    fn run_ids_are_32_hex_digits_and_never_repeat() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| run_id("h")).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids
            .iter()
            .all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())));
    }

    #[test]
    fn host_name_matches_the_kernels() {
        let host = host_name();
        assert!(!host.is_empty());
        if let Ok(kernel) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
            assert_eq!(host, kernel.trim());
        }
    }
}
