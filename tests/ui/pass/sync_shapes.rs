//! Every sync fn shape `#[monitored]` accepts, called under a monitor so the
//! expansions run, not only compile.
#![deny(warnings)]

use std::error::Error;
use std::fmt::Display;
use std::num::ParseIntError;
use stemmon::monitored;

#[monitored]
fn free(x: u32) -> u32 {
    x + 1
}

#[monitored("unit")]
fn unit(log: &mut Vec<u32>) {
    log.push(1)
}

#[monitored]
fn explicit_unit() -> () {}

#[monitored]
fn early_return_and_question_mark(text: &str) -> Result<u32, Box<dyn Error>> {
    if text.is_empty() {
        return Err("empty".into());
    }
    let value: u32 = text.parse()?;
    Ok(value)
}

/// Docs and attributes stay on the item.
#[monitored]
#[inline]
#[must_use = "the value is the point"]
pub(crate) fn kept_attributes(a: u8) -> u8 {
    a
}

#[monitored]
fn elided_lifetime(text: &str) -> &str {
    text.trim()
}

#[monitored]
fn explicit_lifetimes<'a, 'b: 'a>(a: &'a str, _b: &'b str) -> &'a str {
    a
}

#[monitored]
fn generic<T, U: Clone>(value: T, other: &U) -> (T, U)
where
    T: Display + Default,
{
    (value, other.clone())
}

#[monitored]
fn const_generic<const N: usize>(values: [u8; N]) -> usize {
    values.len()
}

#[monitored]
fn impl_arg(items: impl IntoIterator<Item = u32>) -> u32 {
    items.into_iter().sum()
}

#[monitored]
fn impl_return(n: u32) -> impl Iterator<Item = u32> {
    0..n
}

#[monitored]
fn nested_impl_return() -> Box<impl Fn(u32) -> u32> {
    Box::new(|x| x * 2)
}

#[monitored]
fn dyn_return(fail: bool) -> Result<(), Box<dyn Error + Send + Sync>> {
    if fail {
        return Err(Box::new(std::fmt::Error));
    }
    Ok(())
}

#[monitored]
fn patterns((a, b): (u32, u32), mut c: u32, _: u32) -> u32 {
    c += a + b;
    c
}

#[monitored]
fn r#match() -> u8 {
    7
}

#[monitored]
unsafe fn raw_read(pointer: *const u32) -> u32 {
    *pointer
}

#[monitored]
extern "C" fn c_abi(x: i32) -> i32 {
    x - 1
}

#[monitored]
fn never_returns() -> ! {
    panic!("never returns")
}

#[monitored]
fn parse(text: &str) -> Result<u32, ParseIntError> {
    text.parse()
}

#[monitored]
#[track_caller]
fn caller_line() -> Result<u32, ParseIntError> {
    Ok(std::panic::Location::caller().line())
}

struct Counter {
    count: u32,
    name: String,
}

impl Counter {
    #[monitored]
    fn by_ref(&self) -> u32 {
        self.count
    }

    #[monitored]
    fn by_mut(&mut self) -> &mut u32 {
        &mut self.count
    }

    #[monitored]
    fn name(&self) -> &str {
        &self.name
    }

    #[monitored]
    fn by_value(self) -> String {
        self.name
    }

    #[monitored]
    fn make() -> Self {
        Counter {
            count: 0,
            name: "c".into(),
        }
    }

    #[monitored]
    fn boxed(self: Box<Self>) -> u32 {
        self.count
    }
}

trait Model {
    fn fit(&mut self, data: &[f64]) -> Result<f64, String>;

    #[monitored]
    fn describe(&self) -> String {
        "model".to_owned()
    }
}

impl Model for Counter {
    #[monitored]
    fn fit(&mut self, data: &[f64]) -> Result<f64, String> {
        if data.is_empty() {
            return Err("no data".to_owned());
        }
        self.count += 1;
        Ok(data.iter().sum())
    }
}

macro_rules! monitored_fn {
    ($name:ident, $stage:literal) => {
        #[monitored($stage)]
        fn $name() -> u8 {
            1
        }
    };
}

monitored_fn!(from_macro, "from macro");

fn main() {
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .unwrap();
    assert_eq!(free(1), 2);
    let mut log = Vec::new();
    unit(&mut log);
    explicit_unit();
    assert_eq!(log, [1]);
    assert!(early_return_and_question_mark("").is_err());
    assert!(early_return_and_question_mark("x").is_err());
    assert_eq!(early_return_and_question_mark("4").unwrap(), 4);
    assert_eq!(kept_attributes(3), 3);
    assert_eq!(elided_lifetime(" a "), "a");
    assert_eq!(explicit_lifetimes("a", "b"), "a");
    assert_eq!(generic(5u8, &"x"), (5, "x"));
    assert_eq!(const_generic([1, 2, 3]), 3);
    assert_eq!(impl_arg(vec![1, 2]), 3);
    assert_eq!(impl_return(3).count(), 3);
    assert_eq!(nested_impl_return()(4), 8);
    assert!(dyn_return(true).is_err());
    assert_eq!(patterns((1, 2), 3, 4), 6);
    assert_eq!(r#match(), 7);
    assert_eq!(unsafe { raw_read(&5) }, 5);
    assert_eq!(c_abi(1), 0);
    // The panic is expected: keep the default hook from printing it.
    std::panic::set_hook(Box::new(|_| {}));
    assert!(std::panic::catch_unwind(|| never_returns()).is_err());
    drop(std::panic::take_hook());
    assert!(parse("x").is_err());
    let mut counter = Counter::make();
    *counter.by_mut() += 2;
    assert_eq!(counter.by_ref(), 2);
    assert_eq!(counter.name(), "c");
    assert_eq!(counter.fit(&[1.0, 2.0]), Ok(3.0));
    assert!(counter.fit(&[]).is_err());
    assert_eq!(counter.describe(), "model");
    assert_eq!(Box::new(Counter::make()).boxed(), 0);
    assert_eq!(counter.by_value(), "c");
    assert_eq!(from_macro(), 1);
    let (line, seen) = (line!(), caller_line());
    assert_eq!(seen, Ok(line), "`#[track_caller]` still sees its caller");

    let report = monitor.finish();
    for path in [
        "free",
        "unit",
        "explicit_unit",
        "kept_attributes",
        "match",
        "never_returns",
        "by_value",
        "boxed",
        "fit",
        "describe",
        "from macro",
    ] {
        assert!(report.stage(path).is_some(), "no stage {path}");
    }
    assert_eq!(
        report.stage("parse").unwrap().error.as_deref(),
        Some("ParseIntError")
    );
    assert_eq!(
        report.stage("fit").unwrap().error.as_deref(),
        Some("String")
    );
    assert_eq!(
        report.stage("never_returns").unwrap().error.as_deref(),
        Some("panic")
    );
}
