//! What the attribute expansions call, and nothing else. Not a public API: it changes
//! together with `stemmon-macros`, which is why that crate is pinned exactly.

use std::future::Future;

pub use crate::future::{instrument, AsyncStage, Instrumented};
pub use crate::main_config::MainConfig;
pub use crate::main_guard::{main_start, MainGuard};
pub use crate::stage::enter;
pub use crate::stage::Stage;
pub use crate::testing::{Limits, Passed};
pub use stemmon_report::settings::Marks;

/// Raw ticks of the clock that times stage calls: the benches time its bare reads
/// beside a call's.
#[inline]
pub fn clock_ticks() -> u64 {
    crate::clock::shared().raw()
}

/// Runs a `#[stemmon::test]` body under its limits.
#[track_caller]
pub fn run_test<R: Passed>(
    limits: Limits,
    module: &str,
    function: &str,
    body: impl FnOnce() -> R,
) -> R {
    crate::testing::run_test(limits, module, function, body)
}

/// Runs a `#[stemmon::test(rayon)]` body on the test's own rayon pool.
#[cfg(feature = "rayon")]
#[track_caller]
pub fn run_test_rayon<R: Passed + Send>(
    limits: Limits,
    module: &str,
    function: &str,
    body: impl FnOnce() -> R + Send,
) -> R {
    crate::testing::run_test_rayon(limits, module, function, body)
}

/// A call's `Err`, as the expansion saw it: its type's name, and the first line of its
/// `Display` text (at most 256 characters) where the type has one.
#[derive(Debug)]
pub struct CallError {
    pub(crate) type_name: &'static str,
    pub(crate) message: Option<Box<str>>,
}

/// The most characters of an error's `Display` text kept.
const MESSAGE_CHARS: usize = 256;

/// The first line of `error`'s `Display`, at most [`MESSAGE_CHARS`] characters: the
/// formatting stops there, so a huge message costs no more than that.
fn first_line(error: &dyn std::fmt::Display) -> Box<str> {
    struct Bounded(String, usize);
    impl std::fmt::Write for Bounded {
        fn write_str(&mut self, text: &str) -> std::fmt::Result {
            for c in text.chars() {
                if c == '\n' || self.1 == MESSAGE_CHARS {
                    return Err(std::fmt::Error);
                }
                self.0.push(c);
                self.1 += 1;
            }
            Ok(())
        }
    }
    let mut line = Bounded(String::new(), 0);
    let _ = std::fmt::write(&mut line, format_args!("{error}"));
    line.0.trim_end().into()
}

/// The value a `#[monitored]` body returned, for the three traits below (autoderef
/// specialization: `(&&&ErrorOf(&value)).__stemmon_error()` takes the first that
/// applies, with all three in scope).
pub struct ErrorOf<'a, T: ?Sized>(pub &'a T);

/// Picked first for a `Result` whose error has `Display`: its type and text.
pub trait ErrorOfDisplay {
    /// The error's type and `Display` text for `Err`, `None` for `Ok`.
    fn __stemmon_error(&self) -> Option<CallError>;
}

impl<T, E: std::fmt::Display> ErrorOfDisplay for &&ErrorOf<'_, Result<T, E>> {
    #[inline]
    fn __stemmon_error(&self) -> Option<CallError> {
        match self.0 {
            Ok(_) => None,
            Err(error) => Some(CallError {
                type_name: std::any::type_name::<E>(),
                message: Some(first_line(error)),
            }),
        }
    }
}

/// Picked next for any `Result`: the `type_name` of the error when it is `Err`.
pub trait ErrorOfResult {
    /// `Some` with `type_name::<E>()` for `Err`, `None` for `Ok`.
    fn __stemmon_error(&self) -> Option<CallError>;
}

impl<T, E> ErrorOfResult for &ErrorOf<'_, Result<T, E>> {
    #[inline]
    fn __stemmon_error(&self) -> Option<CallError> {
        match self.0 {
            Ok(_) => None,
            Err(_) => Some(CallError {
                type_name: std::any::type_name::<E>(),
                message: None,
            }),
        }
    }
}

/// The fallback for every other type: never an error.
pub trait ErrorOfOther {
    /// Always `None`.
    fn __stemmon_error(&self) -> Option<CallError>;
}

impl<T: ?Sized> ErrorOfOther for ErrorOf<'_, T> {
    #[inline]
    fn __stemmon_error(&self) -> Option<CallError> {
        None
    }
}

/// Calls the closure holding a function's body; gives `return` and `?` in the body a
/// boundary while the return type (from the `let` it is bound to) drives inference.
#[inline(always)]
pub fn call<R, F: FnOnce() -> R>(body: F) -> R {
    body()
}

/// Names the output type of an `async` body, so `?` inside it infers.
#[inline(always)]
pub fn typed_future<R, F: Future<Output = R>>(future: F) -> F {
    future
}

/// Records the error a call returned on its stage guard.
#[inline(always)]
pub fn set_error(stage: &Stage, error: Option<CallError>) {
    stage.set_error(error);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The three borrows are the specialization, as the expansion writes them.
    #[allow(clippy::needless_borrow)]
    fn an_errors_text_is_its_first_line_and_at_most_256_characters() {
        struct Long;
        impl std::fmt::Display for Long {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // Far more than is kept: the formatting stops at the bound.
                for _ in 0..1_000_000 {
                    f.write_str("ab")?;
                }
                Ok(())
            }
        }
        assert_eq!(
            first_line(&"a worker failed: signal: 6\nbacktrace"),
            "a worker failed: signal: 6".into()
        );
        assert_eq!(first_line(&Long).chars().count(), MESSAGE_CHARS);
        let ok: Result<(), std::io::Error> = Ok(());
        assert!((&&&ErrorOf(&ok)).__stemmon_error().is_none());
        let failed: Result<(), Box<dyn std::error::Error>> = Err("no such file".into());
        let error = (&&&ErrorOf(&failed)).__stemmon_error().unwrap();
        assert_eq!(error.message.as_deref(), Some("no such file"));
        assert!(error.type_name.contains("Box<dyn"), "{}", error.type_name);
        struct Opaque;
        let opaque: Result<(), Opaque> = Err(Opaque);
        let error = (&&&ErrorOf(&opaque)).__stemmon_error().unwrap();
        assert_eq!(error.message, None);
        assert!((&&&ErrorOf(&5u8)).__stemmon_error().is_none());
    }
}
