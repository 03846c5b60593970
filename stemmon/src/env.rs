//! The environment, read here and nowhere else in the runtime: [`var`] is the one door
//! to it (the exporters, the identity's labels, the GPU library and the builder's
//! override each get their variables through it), and the `STEMMON_*` overrides of a
//! `#[monitor_main]` program are parsed here (for `main_config`) against the settings table
//! (`stemmon_report::settings`), so a bad value reads the same as from any other
//! surface. Every bad value is one warning and leaves the attribute's setting as it
//! is; a program never fails on its environment.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;
use stemmon_report::settings::{self, Marks, Setting, Value};

/// The value of the environment variable `name`, as the process has it.
pub(crate) fn var(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// The value of `name` as UTF-8 text, `None` where unset, empty or not UTF-8.
pub(crate) fn text(name: &str) -> Option<String> {
    var(name)
        .and_then(|value| value.into_string().ok())
        .filter(|value| !value.trim().is_empty())
}

/// The environment as the overrides see it: a lookup and a place for warnings, so that
/// they can be tested without touching the process's environment.
pub(crate) struct Overrides<'a> {
    pub(crate) lookup: &'a dyn Fn(&str) -> Option<OsString>,
    pub(crate) warnings: Vec<String>,
}

impl Overrides<'_> {
    /// `setting`'s variable parsed by the table; a bad value (or one that is not UTF-8)
    /// is warned about and skipped.
    fn value(&mut self, setting: &Setting) -> Option<Value> {
        let name = setting.env?;
        let text = match (self.lookup)(name)?.into_string() {
            Ok(text) => text,
            Err(raw) => {
                self.bad(name, &raw.to_string_lossy(), "text in UTF-8");
                return None;
            }
        };
        match setting.parse(&text) {
            Ok(value) => Some(value),
            Err(expected) => {
                self.warnings.push(warning(name, &text, &expected));
                None
            }
        }
    }

    fn bad(&mut self, name: &str, value: &str, expected: &str) {
        self.warnings
            .push(warning(name, value, &format!("expected {expected}")));
    }

    /// `STEMMON_DISABLE`: set to a true value, no monitor at all (empty: unset).
    pub(crate) fn disabled(&mut self) -> bool {
        let set = (self.lookup)("STEMMON_DISABLE")
            .is_some_and(|v| !v.to_string_lossy().trim().is_empty());
        set && matches!(self.value(&settings::DISABLE), Some(Value::Flag(true)))
    }

    pub(crate) fn interval(&mut self, setting: &Setting) -> Option<Option<Duration>> {
        match self.value(setting)? {
            Value::Interval(every) => Some(Some(every)),
            Value::Off => Some(None),
            _ => None,
        }
    }

    pub(crate) fn output(&mut self) -> Option<PathBuf> {
        match self.value(&settings::OUTPUT)? {
            Value::Text(text) if PathBuf::from(&text).file_name().is_some() => {
                Some(PathBuf::from(text))
            }
            Value::Text(text) => {
                let expected = settings::OUTPUT.expected();
                self.warnings
                    .push(warning("STEMMON_OUTPUT", &text, &expected));
                None
            }
            _ => None,
        }
    }

    /// `STEMMON_HIGH_WATER_MARKS`: `reset`, `keep`, `0` (off), or `1` (`Some(None)`:
    /// on, resets as the program set them).
    /// A flag setting's variable (`STEMMON_GPU`).
    #[cfg(feature = "gpu")]
    pub(crate) fn flag(&mut self, setting: &Setting) -> Option<bool> {
        match self.value(setting)? {
            Value::Flag(on) => Some(on),
            _ => None,
        }
    }

    pub(crate) fn marks(&mut self) -> Option<Option<Marks>> {
        match self.value(&settings::HIGH_WATER_MARKS)? {
            Value::Marks(marks) => Some(Some(marks)),
            Value::Flag(on) => Some((!on).then_some(Marks::Off)),
            _ => None,
        }
    }
}

/// The one form of the warning for a bad variable.
pub(crate) fn warning(name: &str, value: &str, expected: &str) -> String {
    format!("ignoring {name}={value:?}: {expected}; the program's own setting stands")
}

/// `STEMMON_HIGH_WATER_MARKS` under `lookup`, for [`MonitorBuilder::start`]: what it
/// sets, or the warning for a bad value.
pub(crate) fn marks_override(
    lookup: &dyn Fn(&str) -> Option<OsString>,
) -> (Option<Marks>, Vec<String>) {
    let mut overrides = Overrides {
        lookup,
        warnings: Vec::new(),
    };
    // `1` leaves the builder's setting as it is.
    let marks = overrides.marks().flatten();
    (marks, overrides.warnings)
}

/// The `STEMMON_TEST_*` defaults of `#[stemmon::test]` that are set: each limit and its
/// value (a size in bytes, or a count). A bad value is one warning and no default.
pub(crate) fn test_limits() -> Vec<(&'static Setting, u64)> {
    let lookup = |name: &str| var(name);
    let mut overrides = Overrides {
        lookup: &lookup,
        warnings: Vec::new(),
    };
    let mut limits = Vec::new();
    for setting in settings::TEST_LIMITS {
        let set = setting.env.and_then(text).is_some();
        if let Some(Value::Size(bytes) | Value::Count(bytes)) =
            set.then(|| overrides.value(setting)).flatten()
        {
            limits.push((setting, bytes));
        }
    }
    for warning in &overrides.warnings {
        crate::warn::warn(warning);
    }
    limits
}

/// `STEMMON_TEST_REPORTS`: where failing tests keep their reports.
pub(crate) fn test_reports() -> Option<PathBuf> {
    text(settings::TEST_REPORTS.env?).map(PathBuf::from)
}

/// The environment marker of a `#[stemmon::test]` re-run: the name of the test it runs.
pub(crate) const TEST_CHILD: &str = "STEMMON_TEST_CHILD";

/// The test a re-run of the test binary runs (its marker), if this is one.
pub(crate) fn test_child() -> Option<String> {
    text(TEST_CHILD)
}

/// Whether the test `name` has this process to itself (`cargo nextest` runs it here,
/// one test a process; a child a test started inherits the variables, not the name).
pub(crate) fn process_per_test(name: &str) -> bool {
    text("NEXTEST_EXECUTION_MODE").as_deref() == Some("process-per-test")
        && text("NEXTEST_TEST_NAME").as_deref() == Some(name)
}

#[cfg(feature = "gpu")]
/// `setting`'s flag variable under `lookup` (`STEMMON_GPU`): the flag, or the warning
/// for a bad value.
pub(crate) fn flag_override(
    setting: &Setting,
    lookup: &dyn Fn(&str) -> Option<OsString>,
) -> (Option<bool>, Vec<String>) {
    let mut overrides = Overrides {
        lookup,
        warnings: Vec::new(),
    };
    let on = overrides.flag(setting);
    (on, overrides.warnings)
}

/// Says that `test` cannot run here and why; the caller then returns. Under CI (`CI` set
/// and not `false` or `0`), where every test must run, it fails the test instead, so a
/// skip is never a silent pass. The runtime's own tests' form of the suite's
/// `cannot_run` (the suite depends on the runtime).
#[cfg(test)]
#[track_caller]
pub(crate) fn cannot_run(test: &str, why: &str) {
    use std::io::Write;
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    assert!(!ci, "{test} cannot run under CI: {why}");
    // Straight to the process's stderr: the harness captures `eprintln!` of a test that
    // passes.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {why}");
}
