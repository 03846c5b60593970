//! The monitor of a `#[monitor_main]` function: started by [`main_start`] with the
//! environment's overrides ([`crate::env`]), finalized when [`MainGuard`] drops, on a
//! return, an `Err` or a panic alike, and on the endings `signals` catches.

use crate::env;
use crate::main_config::{self, MainConfig};
use crate::monitor::Monitor;
use crate::recorder::short_type_name;
use std::cell::{Cell, RefCell};

/// The monitor of a `#[monitor_main]` function: finalizes on drop, so a return, an
/// `Err` and a panic all leave a report.
#[derive(Debug)]
pub struct MainGuard {
    monitor: Option<Monitor>,
    error: Cell<Option<&'static str>>,
    message: RefCell<Option<Box<str>>>,
}

impl MainGuard {
    /// Records the error `main` returned: its type and its `Display` text.
    pub fn set_error(&self, error: Option<crate::__private::CallError>) {
        if let Some(error) = error {
            self.error.set(Some(error.type_name));
            *self.message.borrow_mut() = error.message;
        }
    }
}

impl Drop for MainGuard {
    fn drop(&mut self) {
        if let Some(monitor) = self.monitor.take() {
            let error = if std::thread::panicking() {
                Some("panic".to_owned())
            } else {
                self.error.get().map(short_type_name)
            };
            if !std::thread::panicking() {
                monitor.set_error_message(self.message.borrow_mut().take());
            }
            match error {
                Some(error) => monitor.finish_with_error(error),
                None => monitor.finish(),
            };
        }
    }
}

/// Starts the monitor of a `#[monitor_main]` function, with the environment's overrides.
/// A monitor that cannot start is a warning, never the program's failure.
///
/// The monitor also ends, with a final report, on SIGINT and SIGTERM (then the signal's
/// default action runs) and on `std::process::exit` (see `signals`).
pub fn main_start(config: MainConfig) -> MainGuard {
    let inert = MainGuard {
        monitor: None,
        error: Cell::new(None),
        message: RefCell::new(None),
    };
    let (builder, warnings) = main_config::resolve(&config, &env::var);
    for warning in &warnings {
        crate::warn::warn(warning);
    }
    let Some(builder) = builder else {
        return inert;
    };
    match builder.start() {
        Ok(monitor) => {
            // harden: the signal thread and the exit hook finalize this monitor.
            monitor.finalize_on_endings();
            crate::signals::install(crate::monitor::finalize_process_monitor);
            MainGuard {
                monitor: Some(monitor),
                error: Cell::new(None),
                message: RefCell::new(None),
            }
        }
        Err(error) => {
            crate::warn::warn(&format!("running without a monitor: {error}"));
            inert
        }
    }
}
