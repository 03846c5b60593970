//! `stemmon-log-lines <report path>`: a short run with the live log on, for the tests
//! that read what a person sees on stderr.

use std::time::Duration;

fn main() -> Result<(), stemmon::Error> {
    let output = std::env::args().nth(1).expect("a report path");
    let monitor = stemmon::Monitor::builder()
        .sample_interval(Duration::from_millis(10))
        .log_interval(Some(Duration::from_millis(40)))
        .output(output)
        .start()?;
    for _ in 0..3 {
        let _load = monitor.stage("load")?;
        std::thread::sleep(Duration::from_millis(30));
    }
    {
        let _fit = monitor.stage("fit")?;
        let _inner = monitor.stage("inner")?;
        std::thread::sleep(Duration::from_millis(120));
    }
    // A quiet panic: the default hook writes its message in pieces, and a log line
    // that the sampler prints meanwhile would land in the middle of one of them.
    std::panic::set_hook(Box::new(|_| {}));
    let _ = std::panic::catch_unwind(|| {
        let _bad = monitor.stage("bad").unwrap();
        panic!("expected");
    });
    drop(std::panic::take_hook());
    monitor.finish();
    Ok(())
}
