//! The compile-time opt-out: `tests/opt-out` is a crate of its own that depends on
//! stemmon with `default-features = false`. Built and run here, it must leave no report,
//! print no log line and start no sampler thread, while its functions behave as written.

use std::path::Path;
use std::process::Command;
use stemmon_suite::temp_dir;

#[test]
fn with_the_enabled_feature_off_the_attributes_leave_no_trace() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crate_dir = workspace.join("tests/opt-out");
    // Resolve to the versions the workspace uses, already downloaded and locked.
    std::fs::copy(workspace.join("Cargo.lock"), crate_dir.join("Cargo.lock")).unwrap();
    let dir = temp_dir("opt-out");
    let env_report = dir.join("env-report.json");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .arg("run")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(workspace.join("target/opt-out"))
        .current_dir(&dir)
        .env("STEMMON_OUTPUT", &env_report)
        .env_remove("STEMMON_DISABLE")
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );

    // The functions behave as written.
    for line in ["parse 42: Ok(42)", "parse x: true", "fit: 6", "later: 7"] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no {line:?} in\n{stdout}"
        );
    }
    // No monitor: no log line, no report where the attribute or the environment says.
    assert!(!stdout.contains("[stemmon]"), "{stdout}");
    assert!(!stderr.contains("[stemmon]"), "{stderr}");
    assert!(!env_report.exists());
    assert!(!dir.join("opt-out-report.json").exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "no file at all"
    );
    // No sampler thread, at the start or after 100 ms.
    let threads: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("threads at "))
        .collect();
    assert_eq!(threads.len(), 2, "{stdout}");
    if cfg!(target_os = "linux") {
        for line in threads {
            assert!(!line.contains("<no /proc>"), "{line}");
            assert!(!line.contains("stemmon-sampler"), "{line}");
        }
    }
}
