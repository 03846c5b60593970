//! Endings other than a return from `main`: SIGINT, SIGTERM and `std::process::exit`.
//!
//! [`install`] starts a thread named `stemmon-signals` that waits for SIGINT and SIGTERM
//! through `signal-hook` (no hand-written handler: the handler only wakes the thread).
//! On a signal the thread calls the finalizer with the signal's name, which leaves the
//! final report (`running: false`, `error: "SIGTERM"`), then runs the signal's default
//! action: the process ends killed by that signal, so a shell sees 130 / 143 and a
//! scheduler sees what it sent. A finalizer that takes longer than [`PATIENCE`] is not
//! waited for: the program never hangs on its monitor.
//!
//! A signal the process ignores when `install` runs (`nohup`, a background job of a
//! script) stays ignored, and one that already has a handler is left to it.
//!
//! `install` also registers an exit hook (`atexit`): `std::process::exit` anywhere
//! calls the finalizer with no error, so that ending leaves a final report too.

use std::sync::{Once, OnceLock};
use std::time::Duration;

/// Ends the process-wide monitor with an error (the signal's name), or none.
pub(crate) type Finalize = fn(Option<&'static str>);

/// How long a signal waits for the final report before its default action runs.
const PATIENCE: Duration = Duration::from_secs(5);

static FINALIZE: OnceLock<Finalize> = OnceLock::new();
/// The process that installed the hook: a child forked without `exec` inherits the
/// hook, and must neither finalize its parent's monitor nor wait on its locks.
static INSTALLED_BY: OnceLock<u32> = OnceLock::new();

/// Makes SIGINT, SIGTERM and `process::exit` call `finalize` first; once per process
/// (later calls do nothing). Failures (no thread, no handler) are ignored: the program
/// then ends as it would without stemmon.
pub(crate) fn install(finalize: Finalize) {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = FINALIZE.set(finalize);
        let _ = INSTALLED_BY.set(std::process::id());
        install_exit_hook();
        #[cfg(unix)]
        watch_signals(finalize);
    });
}

/// Runs at `exit`, after `main` returned (then there is nothing left to finalize) or
/// from `std::process::exit`.
extern "C" fn at_exit() {
    if INSTALLED_BY.get() != Some(&std::process::id()) {
        return;
    }
    if let Some(finalize) = FINALIZE.get() {
        // A panic must not cross the C boundary; the report is best effort here.
        let _ = std::panic::catch_unwind(|| finalize(None));
    }
}

fn install_exit_hook() {
    #[cfg(unix)]
    // SAFETY: `at_exit` is an `extern "C" fn()` with no arguments that lives for the
    // whole program, as `atexit` requires; it catches every panic before returning.
    let _ = unsafe { libc::atexit(at_exit) };
}

/// The signals to watch: SIGINT and SIGTERM, unless ignored or handled already.
#[cfg(unix)]
fn watched() -> Vec<libc::c_int> {
    [libc::SIGINT, libc::SIGTERM]
        .into_iter()
        .filter(|&signal| has_default_action(signal))
        .collect()
}

#[cfg(unix)]
fn has_default_action(signal: libc::c_int) -> bool {
    let mut current = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a null new action only queries; `current` is valid, writable memory for
    // one `sigaction`, which the call fills in when it returns 0.
    let queried = unsafe { libc::sigaction(signal, std::ptr::null(), current.as_mut_ptr()) };
    // SAFETY: zeroed is a valid `sigaction` (plain integers and pointers), and a
    // successful call wrote the current one.
    let current = unsafe { current.assume_init() };
    queried == 0 && current.sa_sigaction == libc::SIG_DFL
}

#[cfg(unix)]
fn name(signal: libc::c_int) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

#[cfg(unix)]
fn watch_signals(finalize: Finalize) {
    use signal_hook::iterator::Signals;
    let signals = watched();
    if signals.is_empty() {
        return;
    }
    let Ok(mut signals) = Signals::new(signals) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("stemmon-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                finalize_within(finalize, name(signal), PATIENCE);
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                // Not reached for SIGINT / SIGTERM; if it were, end as the shell would.
                std::process::exit(128 + signal);
            }
        });
}

/// Calls `finalize(Some(error))` on a thread of its own and waits for it at most
/// `patience`.
#[cfg_attr(not(unix), allow(dead_code))]
fn finalize_within(finalize: Finalize, error: &'static str, patience: Duration) {
    let (done, finished) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("stemmon-finalize".into())
        .spawn(move || {
            finalize(Some(error));
            let _ = done.send(());
        });
    if spawned.is_ok() {
        let _ = finished.recv_timeout(patience);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Instant;

    static CALLS: AtomicU32 = AtomicU32::new(0);

    fn quick(error: Option<&'static str>) {
        assert_eq!(error, Some("SIGTERM"));
        CALLS.fetch_add(1, Ordering::SeqCst);
    }

    fn stuck(_: Option<&'static str>) {
        std::thread::sleep(Duration::from_secs(60));
    }

    #[test]
    fn a_finalizer_is_waited_for_but_not_forever() {
        finalize_within(quick, "SIGTERM", Duration::from_secs(10));
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        let started = Instant::now();
        finalize_within(stuck, "SIGTERM", Duration::from_millis(100));
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100) && waited < Duration::from_secs(5));
    }

    #[cfg(unix)]
    #[test]
    fn only_signals_left_at_their_default_are_watched() {
        assert!(has_default_action(libc::SIGUSR1));
        // SAFETY: SIG_IGN for SIGUSR2, which nothing else in this test binary uses.
        unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
        assert!(!has_default_action(libc::SIGUSR2));
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
        assert_eq!(name(libc::SIGINT), "SIGINT");
    }
}
