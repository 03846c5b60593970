//! The clock that times stages (the TSC where the kernel trusts it, the monotonic
//! clock elsewhere) against std's `Instant` over one long stage.

use std::time::{Duration, Instant};
use stemmon::Monitor;

#[test]
fn a_ten_second_stage_agrees_with_instant_within_a_thousandth() {
    let monitor = Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .start()
        .unwrap();
    let before = Instant::now();
    let stage = monitor.stage("ten_seconds").unwrap();
    let inside = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let still_inside = Instant::now();
    drop(stage);
    let after = Instant::now();
    let report = monitor.finish();
    let wall = report.stage("ten_seconds").unwrap().wall_seconds;
    // The stage's own clock read falls between `before` and `inside` at the start and
    // between `still_inside` and `after` at the end.
    let shortest = still_inside.duration_since(inside).as_secs_f64();
    let longest = after.duration_since(before).as_secs_f64();
    assert!(
        wall >= shortest * 0.999 && wall <= longest * 1.001,
        "the stage took {wall} s by stemmon's clock, {shortest} to {longest} s by Instant"
    );
}
