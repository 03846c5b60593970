//! `-> Result<impl Trait, E>`: the `Err` type is still recorded, `?` and early returns
//! still convert and coerce, sync and async.
#![deny(warnings)]

use std::future::Future;
use std::num::ParseIntError;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use stemmon::monitored;

#[monitored]
fn rows(text: &str) -> Result<impl Iterator<Item = u32> + '_, ParseIntError> {
    if text.is_empty() {
        return Ok(None.into_iter().chain(Some(0)));
    }
    let first: u32 = text.split(',').next().unwrap_or("").parse()?;
    Ok(Some(first).into_iter().chain(None))
}

#[monitored]
fn boxed(fail: bool) -> Result<Box<impl Fn(u32) -> u32>, Box<dyn std::error::Error>> {
    if fail {
        return Err("failed".into());
    }
    Ok(Box::new(|x| x + 1))
}

#[monitored]
async fn later(text: &str) -> Result<impl std::fmt::Display + '_, ParseIntError> {
    let _: u32 = text.parse()?;
    Ok(text)
}

fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut context) {
            return value;
        }
    }
}

fn main() {
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .unwrap();
    assert_eq!(rows("3,4").unwrap().collect::<Vec<_>>(), [3]);
    assert_eq!(rows("").unwrap().collect::<Vec<_>>(), [0]);
    assert!(rows("x").is_err());
    assert_eq!(boxed(false).unwrap()(1), 2);
    assert!(boxed(true).is_err());
    assert_eq!(block_on(later("5")).unwrap().to_string(), "5");
    assert!(block_on(later("y")).is_err());
    let report = monitor.finish();
    for (path, error) in [
        ("rows", "ParseIntError"),
        ("boxed", "Box<dyn Error>"),
        ("later", "ParseIntError"),
    ] {
        let stage = report.stage(path).unwrap();
        assert_eq!(stage.errors, 1, "{path}");
        assert_eq!(stage.error.as_deref(), Some(error), "{path}");
    }
}
