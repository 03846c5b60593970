//! What `#[stemmon::test(...)]` runs: the limits with the suite's defaults, a re-run in
//! a child process where `max_rss` needs the test's process to itself, the body, the
//! check.

use super::check;
use super::figures::{Bounds, Figures};
use super::limits::Limits;
use super::rss;

/// What a test returns when it passed without running here (its re-run ran it).
pub trait Passed {
    /// The passing value.
    fn passed() -> Self;
}

impl Passed for () {
    fn passed() -> Self {}
}

impl<E> Passed for Result<(), E> {
    fn passed() -> Self {
        Ok(())
    }
}

/// The harness's name of the test `function` in `module` (`module_path!()`, whose
/// first segment is the crate): `inner::function`.
pub(crate) fn harness_name(module: &str, function: &str) -> String {
    match module.split_once("::") {
        Some((_, rest)) => format!("{rest}::{function}"),
        None => function.to_owned(),
    }
}

/// How `max_rss` is measured for this run of the test.
enum Rss {
    /// No `max_rss`, or this is the re-run (its parent checks it), or the process is
    /// the test's own (nextest): measured here.
    Here,
    /// Re-run in a child process, measured with `wait4`.
    Child,
}

fn rss_mode(limits: &mut Limits, name: &str) -> Rss {
    if limits.bounds.max_rss.is_none() {
        return Rss::Here;
    }
    if crate::env::test_child().as_deref() == Some(name) {
        limits.bounds.rss_elsewhere = true;
        return Rss::Here;
    }
    if crate::env::process_per_test(name) {
        return Rss::Here;
    }
    Rss::Child
}

/// Runs the test `function` of `module` under `limits`; panics with the message of
/// the limits it broke.
#[track_caller]
pub(crate) fn run_test<R: Passed>(
    limits: Limits,
    module: &str,
    function: &str,
    body: impl FnOnce() -> R,
) -> R {
    let name = harness_name(module, function);
    let mut limits = limits;
    limits.bounds.name = name.clone();
    let mut limits = limits.with_defaults();
    if let Rss::Child = rss_mode(&mut limits, &name) {
        in_child(&limits, &name);
        return R::passed();
    }
    let watch = limits
        .start()
        .unwrap_or_else(|e| panic!("stemmon::test: {e}"));
    let out = body();
    if let Err(exceeded) = watch.finish() {
        panic!("{exceeded}");
    }
    out
}

/// The same, the body on the test's own rayon pool.
#[cfg(feature = "rayon")]
#[track_caller]
pub(crate) fn run_test_rayon<R: Passed + Send>(
    limits: Limits,
    module: &str,
    function: &str,
    body: impl FnOnce() -> R + Send,
) -> R {
    let name = harness_name(module, function);
    let mut limits = limits;
    limits.bounds.name = name.clone();
    limits.rayon = true;
    let mut limits = limits.with_defaults();
    if let Rss::Child = rss_mode(&mut limits, &name) {
        in_child(&limits, &name);
        return R::passed();
    }
    let watch = limits
        .start()
        .unwrap_or_else(|e| panic!("stemmon::test: {e}"));
    let out = watch.run(body);
    if let Err(exceeded) = watch.finish() {
        panic!("{exceeded}");
    }
    out
}

/// Runs the test in a child process and checks its tree's peak RSS; the child checks
/// the heap limits and its failure is this test's.
#[track_caller]
fn in_child(limits: &Limits, name: &str) {
    let rerun = rss::rerun(name).unwrap_or_else(|e| {
        panic!("max_rss: the test could not be run again in a child process: {e}")
    });
    if !rerun.passed {
        panic!("{}", rss::child_panic(&rerun.output));
    }
    let only_rss = Bounds {
        name: name.to_owned(),
        max_rss: limits.bounds.max_rss,
        ..Bounds::default()
    };
    let figures = Figures {
        max_rss_bytes: rerun.peak,
        ..Figures::default()
    };
    if let Err(exceeded) = check::limits(&only_rss, figures, None) {
        panic!("{exceeded}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harness_name_drops_the_crate() {
        assert_eq!(harness_name("limits", "a"), "a");
        assert_eq!(harness_name("limits::inner::deep", "a"), "inner::deep::a");
    }
}
