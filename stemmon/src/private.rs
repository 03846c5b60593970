//! What the attribute expansions call, and nothing else. Not a public API: it changes
//! together with `stemmon-macros`, which is why that crate is pinned exactly.

use std::future::Future;

pub use crate::future::{instrument, AsyncStage, Instrumented};
pub use crate::main_config::MainConfig;
pub use crate::main_guard::{main_start, MainGuard};
pub use crate::stage::enter;
pub use crate::stage::Stage;
pub use crate::testing::{Limits, Passed};

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

/// Picked by autoref for a `Result`: the `type_name` of the error when it is `Err`.
/// Usage: `(&value).__stemmon_error()` with both traits in scope.
pub trait ErrorOfResult {
    /// `Some(type_name::<E>())` for `Err`, `None` for `Ok`.
    fn __stemmon_error(&self) -> Option<&'static str>;
}

impl<T, E> ErrorOfResult for Result<T, E> {
    #[inline]
    fn __stemmon_error(&self) -> Option<&'static str> {
        match self {
            Ok(_) => None,
            Err(_) => Some(std::any::type_name::<E>()),
        }
    }
}

/// The fallback for every other type: never an error.
pub trait ErrorOfOther {
    /// Always `None`.
    fn __stemmon_error(&self) -> Option<&'static str>;
}

impl<T: ?Sized> ErrorOfOther for &T {
    #[inline]
    fn __stemmon_error(&self) -> Option<&'static str> {
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

/// Records the error type a call returned on its stage guard.
#[inline]
pub fn set_error(stage: &Stage, type_name: Option<&'static str>) {
    stage.set_error(type_name);
}
