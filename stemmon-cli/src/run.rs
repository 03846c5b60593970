//! `stemmon run -- CMD ARGS...`: watches any program's whole process tree.
//!
//! stemmon starts CMD as its child and samples the tree rooted at it, so the report's
//! `parent_*` figures are CMD's own. stemmon is a child subreaper (as `tini` is): a
//! process CMD leaves behind is re-parented to stemmon and reaped here, never left a
//! zombie. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to
//! stemmon are passed on to CMD (as tini does); stemmon exits with CMD's status, 128 + N
//! when CMD was killed by signal N.

use crate::Failure;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Duration;
use stemmon_report::settings::{self, Marks, Setting, Value};

/// Runs COMMAND under a monitor of its whole process tree and exits with its status.
///
/// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH are forwarded to
/// COMMAND; stemmon exits with COMMAND's code, or 128 + N when it was killed by signal N. A COMMAND that cannot be started (it does not
/// exist, it is not executable) is bad input: one line on stderr and exit 2.
///
/// stemmon is a child subreaper: processes COMMAND leaves behind are re-parented to
/// stemmon instead of init, and reaped when they exit.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Write the JSON report here (replaced atomically at each log line and at the end).
    /// Without it no report file is written.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Seconds between samples of the process tree.
    #[arg(long, value_name = "S", default_value = "1", value_parser = sample_interval)]
    sample_interval: f64,
    /// Seconds between live lines on stderr, or `none` for no live lines.
    #[arg(long, value_name = "S|none", default_value = "30", value_parser = log_interval)]
    log_interval: LogInterval,
    /// Also read USS and PSS (Linux; the macOS physical footprint is not read yet). Slower.
    #[arg(long)]
    detailed_memory: bool,
    /// How the kernel's high-water marks are read: `keep` (the default) never resets
    /// them, so the command's own peak (its `ru_maxrss`, `VmHWM`, a `/usr/bin/time`
    /// inside the tree) stays true and the whole run's exact figure is its exit's, as
    /// `/usr/bin/time` gets it; `reset` (also `--high-water-marks` alone) resets every
    /// process's mark at each sample, for an exact peak per interval and a tighter
    /// bound, and what the command sees of its own peak is reset too.
    #[arg(
        long,
        value_name = "reset|keep",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "reset",
        value_parser = marks,
        conflicts_with = "no_high_water_marks"
    )]
    high_water_marks: Option<Marks>,
    /// Do not read the kernel's high-water marks at all: RSS samples only.
    /// `STEMMON_HIGH_WATER_MARKS=0` turns them off too.
    #[arg(long)]
    no_high_water_marks: bool,
    /// Put the command's whole argv in the OTLP resource (`process.command_args`); off
    /// by default, since secrets live there. `STEMMON_OTLP_COMMAND_ARGS=1` turns it on too.
    #[arg(long)]
    otlp_command_args: bool,
    /// A label for the report and the exported metrics (repeatable): `--label rank=3`.
    #[arg(long, value_name = "K=V", value_parser = label)]
    label: Vec<(String, String)>,
    /// The command to run, with its arguments (after `--`).
    #[arg(
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug)]
struct LogInterval(Option<f64>);

/// The interval of `setting`, parsed by the settings table (the bounds and message of
/// every surface).
fn interval(setting: &Setting, text: &str) -> Result<LogInterval, String> {
    match setting.parse(text)? {
        Value::Interval(every) => Ok(LogInterval(Some(every.as_secs_f64()))),
        Value::Off => Ok(LogInterval(None)),
        _ => Err(setting.expected()),
    }
}

fn sample_interval(text: &str) -> Result<f64, String> {
    interval(&settings::SAMPLE_INTERVAL, text)?
        .0
        .ok_or_else(|| settings::SAMPLE_INTERVAL.expected())
}

/// `reset` or `keep`, with the settings table's message for anything else.
fn marks(text: &str) -> Result<Marks, String> {
    match settings::HIGH_WATER_MARKS.parse(text)? {
        Value::Marks(marks) => Ok(marks),
        _ => Err(settings::HIGH_WATER_MARKS.expected()),
    }
}

fn log_interval(text: &str) -> Result<LogInterval, String> {
    interval(&settings::LOG_INTERVAL, text)
}

/// `key=value`, checked as the runtime checks a builder's label (a Prometheus label
/// name it does not reserve, a printable value).
fn label(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, not `{text}`"))?;
    stemmon_report::check_label(key, value)?;
    Ok((key.to_owned(), value.to_owned()))
}

#[cfg(unix)]
pub(crate) fn run(args: Args) -> Result<u8, Failure> {
    unix::run(args)
}

#[cfg(not(unix))]
pub(crate) fn run(_args: Args) -> Result<u8, Failure> {
    Err(Failure::input("`stemmon run` needs a Unix system"))
}

/// The message for a command that could not be started.
fn spawn_failure(program: &OsString, error: &std::io::Error) -> Failure {
    let program = program.to_string_lossy();
    let why = match error.kind() {
        ErrorKind::NotFound => "no such command".to_owned(),
        ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => error.to_string(),
    };
    Failure::input(format!("cannot run `{program}`: {why}"))
}

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[cfg(unix)]
mod unix {
    use super::*;
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
    use signal_hook::iterator::exfiltrator::WithOrigin;
    use signal_hook::iterator::SignalsInfo;
    use std::process::Command;
    use std::sync::{Arc, Mutex, PoisonError};

    pub(super) fn run(args: Args) -> Result<u8, Failure> {
        become_subreaper();
        // Installed before CMD starts, so that no signal sent in between ends stemmon.
        // CMD's pid, 0 when there is none: held locked while a signal is sent, so that
        // CMD is never reaped (and its pid reused) between the read and the kill.
        // A signal that comes before CMD exists waits in `pending` and is sent as it starts.
        let child_pid = Arc::new(Mutex::new(Target::default()));
        // What tini forwards: a hang-up no longer kills stemmon and orphans CMD.
        let forwarded = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH];
        let mut signals = SignalsInfo::<WithOrigin>::new(forwarded)
            .map_err(|e| Failure::input(format!("cannot install signal handlers: {e}")))?;
        let handle = signals.handle();
        let forwarder = {
            let child_pid = Arc::clone(&child_pid);
            std::thread::Builder::new()
                .name("stemmon-signals".into())
                .spawn(move || {
                    for origin in signals.forever() {
                        let mut target = child_pid.lock().unwrap_or_else(PoisonError::into_inner);
                        let pid = target.pid;
                        if pid == 0 && !target.started {
                            target.pending.push(origin.signal);
                        }
                        // A terminal's Ctrl-C (sent by the kernel, to the whole foreground
                        // group) already reached CMD if CMD is still in stemmon's group:
                        // then pass on only what a process sent to stemmon alone.
                        if pid > 0 && !(origin.process.is_none() && in_our_group(pid)) {
                            // SAFETY: kill has no memory-safety preconditions; CMD is not
                            // reaped while the lock is held, so `pid` is still CMD's.
                            unsafe { libc::kill(pid, origin.signal) };
                        }
                    }
                })
                .map_err(|e| Failure::input(format!("cannot start a thread: {e}")))?
        };

        let argv = &args.command;
        // What the kernel carries into CMD's own peak across its `exec`: this process's.
        let spawn_floor = own_high_water_mark();
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .spawn()
            .map_err(|e| spawn_failure(&argv[0], &e))?;
        let pid = child.id();
        {
            let mut target = child_pid.lock().unwrap_or_else(PoisonError::into_inner);
            (target.pid, target.started) = (pid as libc::pid_t, true);
            for signal in target.pending.drain(..) {
                // SAFETY: kill has no memory-safety preconditions; CMD is not reaped yet.
                unsafe { libc::kill(pid as libc::pid_t, signal) };
            }
        }
        // stemmon reaps CMD itself (below), with every orphan: the handle is not needed.
        drop(child);

        let monitor = start_monitor(&args, pid, spawn_floor);
        let (status, signal) = wait_for(pid as libc::pid_t, monitor.as_ref());
        // CMD has exited but is not reaped yet: the last sample finds it (a zombie, with
        // nothing resident, whose final interval is in its rusage) instead of a missing
        // process. A non-zero exit or a signal is the run's failure, named in the report.
        // The monitor itself says what became of the report (written after failures,
        // or not), each failure once.
        if let Some(monitor) = monitor {
            monitor.finish_command(match signal {
                Some(number) => stemmon::CommandExit::Signal {
                    number,
                    name: signal_name(number),
                },
                None => stemmon::CommandExit::Code(i32::from(status)),
            });
        }
        // No signal is passed on once CMD's pid may be reused.
        child_pid.lock().unwrap_or_else(PoisonError::into_inner).pid = 0;
        reap(pid as libc::pid_t);
        handle.close();
        let _ = forwarder.join();
        Ok(status)
    }

    /// Where forwarded signals go: CMD's pid once it started (0 again once it may be
    /// reaped), and the signals that came before it started.
    #[derive(Default)]
    struct Target {
        pid: libc::pid_t,
        started: bool,
        pending: Vec<libc::c_int>,
    }

    /// This process's `VmHWM`, in bytes, where `/proc` has it.
    fn own_high_water_mark() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
        let kib: u64 = line["VmHWM:".len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    }

    fn start_monitor(args: &Args, pid: u32, spawn_floor: Option<u64>) -> Option<stemmon::Monitor> {
        let mut builder = stemmon::Monitor::builder()
            .root_process(pid)
            // The orphans this subreaper adopts from CMD stay in the tree.
            .adopted_orphans(true)
            .command(
                args.command
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned()),
            )
            .sample_interval(seconds(args.sample_interval))
            .log_interval(args.log_interval.0.map(seconds))
            .detailed_memory(args.detailed_memory);
        // NVML in a helper process: a driver that crashes or hangs costs only the GPU
        // figures, never the command's exit status or its report.
        if let Ok(me) = std::env::current_exe() {
            builder = builder.gpu_helper(me, [crate::GPU_HELPER]);
        }
        builder =
            builder.high_water_marks(match (args.no_high_water_marks, args.high_water_marks) {
                (true, _) => Marks::Off,
                (false, marks) => marks.unwrap_or(Marks::Keep),
            });
        if let Some(floor) = spawn_floor {
            builder = builder.spawn_floor(floor);
        }
        if args.otlp_command_args {
            builder = builder.otlp_command_args(true);
        }
        if let Some(output) = &args.output {
            builder = builder.output(output);
        }
        for (key, value) in &args.label {
            builder = builder.label(key, value);
        }
        match builder.start() {
            Ok(monitor) => Some(monitor),
            Err(error) => {
                // The monitor's failure is not the command's: it runs on, unwatched.
                crate::print_err(&format!("stemmon: warning: not monitoring: {error}"));
                None
            }
        }
    }

    /// Whether `pid` is in stemmon's own process group (CMD may have left it).
    fn in_our_group(pid: libc::pid_t) -> bool {
        // SAFETY: getpgid and getpgrp take plain integers and touch no memory.
        unsafe { libc::getpgid(pid) == libc::getpgrp() }
    }

    /// Asks the kernel to re-parent orphaned descendants to this process.
    fn become_subreaper() {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // SAFETY: PR_SET_CHILD_SUBREAPER takes one integer argument and touches no memory.
            let done = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            if done != 0 {
                crate::print_err(&format!(
                    "stemmon: warning: cannot become a subreaper ({}); orphans of the \
                     command will not be reaped here",
                    std::io::Error::last_os_error()
                ));
            }
        }
    }

    /// Waits until CMD exits, reaping every other child (re-parented orphans) meanwhile,
    /// and returns CMD's status as an exit code, with the signal that killed it if one
    /// did. CMD itself is left to [`reap`].
    fn wait_for(pid: libc::pid_t, monitor: Option<&stemmon::Monitor>) -> (u8, Option<libc::c_int>) {
        loop {
            // SAFETY: an all-zero siginfo_t is a valid value; waitid fills it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `info` is a valid, writable siginfo_t for the whole call.
            let done =
                unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if done != 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == ErrorKind::Interrupted {
                    continue;
                }
                // ECHILD: nothing left to wait for; CMD is gone without a status.
                return (255, None);
            }
            // SAFETY: waitid succeeded with WEXITED, so the fields of a child event are set.
            let (who, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
            if who == pid {
                return match code {
                    libc::CLD_EXITED => ((status & 0xff) as u8, None),
                    _ => ((128 + status).clamp(0, 255) as u8, Some(status)),
                };
            }
            if who > 0 {
                // Its exit code and final CPU, for the report's `processes`.
                if let Some(monitor) = monitor {
                    monitor.note_exited_child(who as u32);
                }
                reap(who);
            }
        }
    }

    /// `SIGTERM` for 15, and so on; `signal 42` for one without a common name.
    fn signal_name(signal: libc::c_int) -> String {
        let name = match signal {
            libc::SIGHUP => "SIGHUP",
            libc::SIGINT => "SIGINT",
            libc::SIGQUIT => "SIGQUIT",
            libc::SIGILL => "SIGILL",
            libc::SIGABRT => "SIGABRT",
            libc::SIGBUS => "SIGBUS",
            libc::SIGFPE => "SIGFPE",
            libc::SIGKILL => "SIGKILL",
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGPIPE => "SIGPIPE",
            libc::SIGALRM => "SIGALRM",
            libc::SIGTERM => "SIGTERM",
            libc::SIGUSR1 => "SIGUSR1",
            libc::SIGUSR2 => "SIGUSR2",
            libc::SIGXCPU => "SIGXCPU",
            _ => return format!("signal {signal}"),
        };
        name.to_owned()
    }

    /// Collects the exit status of the exited child `pid`.
    fn reap(pid: libc::pid_t) {
        loop {
            let mut status = 0;
            // SAFETY: `status` is a valid, writable int.
            let done = unsafe { libc::waitpid(pid, &mut status, 0) };
            if done >= 0 || std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
                return;
            }
        }
    }
}
