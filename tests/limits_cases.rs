//! `#[stemmon::test]`'s other limits on ground truth: leaks and allocation counts
//! against the allocator's own counts, `max_rss` of a child holding 200 MiB against
//! `wait4`; the suite-wide defaults, the reports of failing tests, the stage table of
//! a failure, `#[tokio::test]`. The failing variants are `#[ignore]`d and run by the
//! tests below in a child of this binary.

use std::process::Command;
use stemmon::monitored;
use stemmon_suite::{temp_dir, Holder, MIB};

#[global_allocator]
static ALLOC: stemmon::Alloc = stemmon::Alloc::system();

const HOLD: &str = env!("CARGO_BIN_EXE_stemmon-hold");

/// Runs the test `name` of this binary alone in a child, with `env`: whether it passed,
/// and its output.
fn run_alone(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--include-ignored", "--nocapture"])
        .envs(env.iter().copied())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the test binary runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// What the test `name` panicked with, from its run alone in a child (which must fail).
fn failure(name: &str, env: &[(&str, &str)]) -> String {
    let (passed, output) = run_alone(name, env);
    assert!(!passed, "{name} passed: {output}");
    let at = output
        .find(&format!("thread '{name}' "))
        .unwrap_or_else(|| panic!("{name} did not panic: {output}"));
    let message: Vec<&str> = output[at..]
        .lines()
        .skip(1)
        .take_while(|line| !line.starts_with("note: ") && !line.starts_with("test result"))
        .collect();
    message.join("\n").trim_end().to_owned()
}

/// The first figure in bytes of a message line: `(1048576 B > 0 B)`.
fn bytes_in(line: &str) -> u64 {
    line.split_once('(')
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {line:?}"))
}

// Leaks: live bytes at return, as the allocator counted them.

#[monitored]
fn scratch(bytes: usize) -> usize {
    let block = vec![1u8; bytes];
    std::hint::black_box(&block).len()
}

#[monitored]
fn load(bytes: usize) -> &'static [u8] {
    Box::leak(vec![1u8; bytes].into_boxed_slice())
}

#[stemmon::test(leaks = "0 B")]
fn frees_all_it_allocates_on_its_threads_and_in_stages() {
    let threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| vec![1u8; MIB as usize].len()))
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total + scratch(MIB as usize), 5 * MIB as usize);
}

#[stemmon::test(leaks = "0 B")]
#[ignore = "fails on purpose: run by a_leak_is_its_exact_bytes_and_the_stage_that_left_them"]
fn leaks_in_a_stage() {
    assert_eq!(scratch(MIB as usize), MIB as usize);
    assert_eq!(load(3 * MIB as usize).len(), 3 * MIB as usize);
}

#[test]
fn a_leak_is_its_exact_bytes_and_the_stage_that_left_them() {
    let message = failure("leaks_in_a_stage", &[]);
    let first = message.lines().next().unwrap();
    assert!(
        first.starts_with("leaks: 3.0 MiB live at return, limit 0.0 MiB"),
        "{message}"
    );
    let leaked = bytes_in(first);
    assert!(
        (3 * MIB..3 * MIB + 16 * 1024).contains(&leaked),
        "{leaked} B live for 3 MiB leaked: {message}"
    );
    assert!(
        message.contains("left live by: load (3.0 MiB)"),
        "{message}"
    );
    assert!(message.contains("scratch"), "the stage table: {message}");
}

// Allocation counts.

#[stemmon::test(max_allocations = 1_100)]
fn a_thousand_boxes_fit_in_1100() {
    let boxes: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
    assert_eq!(boxes.len(), 1000);
}

#[stemmon::test(max_allocations = 950)]
#[ignore = "fails on purpose: run by a_thousand_boxes_are_counted_as_a_thousand_allocations"]
fn a_thousand_boxes_in_950() {
    let boxes: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
    assert_eq!(boxes.len(), 1000);
}

#[test]
fn a_thousand_boxes_are_counted_as_a_thousand_allocations() {
    let message = failure("a_thousand_boxes_in_950", &[]);
    // `max_allocations: 1001 allocations, limit 950`: the boxes and the Vec.
    let count: u64 = message
        .strip_prefix("max_allocations: ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert!((1001..=1005).contains(&count), "{message}");
    assert!(message.ends_with("allocations, limit 950"), "{message}");
}

// max_rss: a child holding 200 MiB, against wait4.

/// Holds 200 MiB in a child, reaps it, and writes the kernel's peak of the reaped
/// children (`RUSAGE_CHILDREN`, what wait4 gave) where `LIMITS_RSS_TRUTH` says.
fn hold_200_mib_in_a_child() {
    Holder::start(HOLD, 200, 0, 0).stop();
    if let Some(path) = std::env::var_os("LIMITS_RSS_TRUTH") {
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is valid for writes and outlives the call.
        let read = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
        assert_eq!(read, 0);
        std::fs::write(path, (usage.ru_maxrss as u64 * 1024).to_string()).unwrap();
    }
}

#[stemmon::test(max_rss = "260 MiB")]
fn a_child_holding_200_mib_fits_in_260() {
    hold_200_mib_in_a_child();
}

#[stemmon::test(max_rss = "150 MiB")]
#[ignore = "fails on purpose: run by max_rss_is_the_peak_wait4_gives"]
fn a_child_holding_200_mib_in_150() {
    hold_200_mib_in_a_child();
}

#[test]
fn max_rss_is_the_peak_wait4_gives() {
    let dir = temp_dir("limits-rss");
    let truth = dir.path().join("truth");
    let message = failure(
        "a_child_holding_200_mib_in_150",
        &[("LIMITS_RSS_TRUTH", truth.to_str().unwrap())],
    );
    let first = message.lines().next().unwrap();
    assert!(first.starts_with("max_rss: "), "{message}");
    assert!(first.contains("peak RSS, limit 150.0 MiB"), "{message}");
    let peak = bytes_in(first);
    let truth: u64 = std::fs::read_to_string(&truth).unwrap().parse().unwrap();
    assert!(truth >= 200 * MIB, "the child held {truth} B");
    // The test's process is far smaller than its child: the tree's peak is the child's.
    assert_eq!(peak, truth, "{message}");
}

// Suite-wide defaults, and reports of failing tests.

#[stemmon::test]
#[ignore = "run by the_suite_default_applies_and_a_test_own_value_wins"]
fn holds_2_mib_with_no_limit_of_its_own() {
    let block = vec![1u8; 2 * MIB as usize];
    std::hint::black_box(&block);
}

#[stemmon::test(max_heap = "3 MiB")]
#[ignore = "run by the_suite_default_applies_and_a_test_own_value_wins"]
fn holds_2_mib_within_its_own_3() {
    let block = vec![1u8; 2 * MIB as usize];
    std::hint::black_box(&block);
}

#[test]
fn the_suite_default_applies_and_a_test_own_value_wins() {
    let dir = temp_dir("limits-reports");
    let reports = dir.path().to_str().unwrap();
    let env = [
        ("STEMMON_TEST_MAX_HEAP", "1 MiB"),
        ("STEMMON_TEST_REPORTS", reports),
    ];
    let message = failure("holds_2_mib_with_no_limit_of_its_own", &env);
    assert!(
        message.starts_with("max_heap: 2.0 MiB held, limit 1.0 MiB"),
        "{message}"
    );
    let report = dir.path().join("holds_2_mib_with_no_limit_of_its_own.json");
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("the failing test's report"))
            .unwrap();
    assert!(
        kept["message"].as_str().unwrap().starts_with("max_heap: "),
        "{kept}"
    );
    assert!(
        kept["figures"]["peak_heap_bytes"].as_u64().unwrap() >= 2 * MIB,
        "{kept}"
    );

    let (passed, output) = run_alone("holds_2_mib_within_its_own_3", &env);
    assert!(passed, "{output}");
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files, 1, "a passing test writes nothing");
}

// Async tests, on either side of #[tokio::test].

#[stemmon::test(max_heap = "1.5 MiB")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_on_a_worker_counts_for_its_test() {
    let held = tokio::spawn(async { vec![1u8; MIB as usize] })
        .await
        .unwrap();
    assert_eq!(held.len(), MIB as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[stemmon::test(max_heap = "1 MiB")]
#[ignore = "fails on purpose: run by a_task_on_a_tokio_worker_is_counted"]
async fn a_task_holding_2_mib_in_1() {
    let held = tokio::spawn(async { vec![1u8; 2 * MIB as usize] })
        .await
        .unwrap();
    assert_eq!(held.len(), 2 * MIB as usize);
}

#[test]
fn a_task_on_a_tokio_worker_is_counted() {
    let message = failure("a_task_holding_2_mib_in_1", &[]);
    assert!(
        message.starts_with("max_heap: 2.0 MiB held, limit 1.0 MiB"),
        "{message}"
    );
}

// `#[test]` goes below the attribute (above it, it has run before the attribute can
// see it, and the test would be registered twice).
#[stemmon::test(max_allocated = "1 MiB")]
#[test]
fn with_test_written_out_too() {
    assert_eq!(vec![0u8; 1000].len(), 1000);
}
