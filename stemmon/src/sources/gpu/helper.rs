//! NVML in a helper process: the monitor's side ([`Client`], on the sampler thread) and
//! the helper's ([`serve`]).
//!
//! A driver's library runs inside the process that loads it: one that crashes kills
//! that process, one that blocks holds its thread. `stemmon run` therefore loads NVML
//! in a process of its own, a child that it starts from its own binary. The two speak
//! one JSON object a line over the child's stdin and stdout:
//!
//! - the monitor says which library to load (`{"library": ...}`), then asks for a
//!   reading of the tree's pids at each sample (`{"seq": 7, "pids": [...], ...}`);
//! - the helper answers once with what NVML said at its start (`{"Info": ...}`), then
//!   each question with its reading (`{"Reading": {"seq": 7, ...}}`).
//!
//! The monitor never blocks on the helper. It asks only when its last question was
//! answered, waits at most [`ANSWER_WAIT`] for the answer, and reads what has come
//! without waiting: an answer that comes later is dropped (it was the tree of an
//! earlier sample), a helper that takes too long leaves that sample without GPU
//! figures, and a helper that dies leaves the rest of the run without them, with why.
//! An answer longer than [`MAX_LINE`] ends the helper.

use super::{GpuInfo, GpuReading, GpuSource};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

pub(crate) use crate::config::HelperCommand as Command;

/// The monitor's helpers, process-wide: which pids they are, so that `stemmon run`'s
/// reaping loop leaves word of how one ended (`note_end`) before it reaps it, and a
/// reaped helper is never signalled.
mod registry {
    use std::sync::{Mutex, PoisonError};

    /// Each helper's pid, and how it ended once a reaper saw it end.
    static HELPERS: Mutex<Vec<(u32, Option<String>)>> = Mutex::new(Vec::new());

    fn helpers() -> std::sync::MutexGuard<'static, Vec<(u32, Option<String>)>> {
        HELPERS.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `pid` is a helper of this process's monitor.
    pub(crate) fn register(pid: u32) {
        helpers().push((pid, None));
    }

    /// Whether `pid` is a helper (not a process of the tree).
    pub(crate) fn is_helper(pid: u32) -> bool {
        helpers().iter().any(|&(helper, _)| helper == pid)
    }

    /// Notes how the helper `pid` ended, before whoever reaps it does (its status is gone
    /// then); nothing for another pid. Returns whether `pid` is a helper.
    pub(crate) fn note_end(pid: u32) -> bool {
        let end = crate::sys::child_end(pid);
        let mut helpers = helpers();
        match helpers.iter_mut().find(|(helper, _)| *helper == pid) {
            Some((_, noted)) => {
                *noted = Some(end.unwrap_or_else(|| "ended".to_owned()));
                true
            }
            None => false,
        }
    }

    /// How the helper `pid` ended, if a reaper noted it.
    pub(crate) fn end_of(pid: u32) -> Option<String> {
        helpers()
            .iter()
            .find(|(helper, _)| *helper == pid)
            .and_then(|(_, end)| end.clone())
    }

    /// Forgets the helper `pid` (stopped and reaped).
    pub(crate) fn forget(pid: u32) {
        helpers().retain(|&(helper, _)| helper != pid);
    }
}

/// The longest line either side reads: the answers hold the tree's processes only
/// (at most [`super::MAX_PROCESSES`] a device, of [`super::MAX_DEVICES`]).
const MAX_LINE: usize = 8 << 20;

/// How long a sample waits for the helper's answer; the NVML calls of a reading take
/// well under a millisecond on a healthy driver.
const ANSWER_WAIT: Duration = Duration::from_millis(20);

/// An answer older than this says the driver is slow, once.
const SLOW: Duration = Duration::from_secs(1);

/// The monitor's first line: the library to load.
#[derive(Serialize, Deserialize)]
struct Hello {
    library: Option<PathBuf>,
}

/// A question: a reading of these pids (each with its start, in seconds since boot).
#[derive(Serialize, Deserialize)]
struct Ask {
    seq: u64,
    pids: Vec<u32>,
    started: Vec<Option<f64>>,
}

/// What the helper says.
#[derive(Serialize, Deserialize)]
enum Answer {
    /// What NVML said at its start, once.
    Info(GpuInfo),
    /// The reading asked for as `seq`.
    Reading { seq: u64, reading: GpuReading },
}

/// What a sample got from the helper.
pub(crate) enum Reply {
    /// NVML has started (or failed to): what it said, and the first reading if it came
    /// in time.
    Info(GpuInfo, Option<GpuReading>),
    /// The reading of this sample's tree.
    Reading(GpuReading),
    /// No reading for this sample; why, the first time the helper is slow.
    Late(Option<String>),
    /// The helper is gone: why, for the report.
    Ended(String),
}

/// The monitor's end of a helper process.
pub(crate) struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// Bytes read that do not end a line yet.
    pending: Vec<u8>,
    seq: u64,
    /// The question not answered yet, and when it was asked.
    asked: Option<(u64, Instant)>,
    /// NVML's start was heard.
    started: bool,
    slow_noted: bool,
}

impl Client {
    /// Starts `command` as the helper, loading `library` (the driver's when `None`).
    pub(crate) fn start(command: &Command, library: Option<&Path>) -> std::io::Result<Client> {
        let mut spawn = std::process::Command::new(&command.program);
        spawn
            .args(&command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // Its own group: a Ctrl-C at the terminal is for the command, not for it.
            spawn.process_group(0);
        }
        let mut child = spawn.spawn()?;
        registry::register(child.id());
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("its pipes were not made"));
        };
        crate::sys::set_nonblocking(&stdout)?;
        let hello = serde_json::to_string(&Hello {
            library: library.map(Path::to_path_buf),
        })?;
        writeln!(stdin, "{hello}")?;
        crate::sys::set_nonblocking(&stdin)?;
        Ok(Client {
            child,
            stdin,
            stdout,
            pending: Vec::new(),
            seq: 0,
            asked: None,
            started: false,
            slow_noted: false,
        })
    }

    /// What this sample gets for the tree `pids` (see the module docs).
    pub(crate) fn read(&mut self, pids: &[u32], started: &[Option<f64>]) -> Reply {
        let mut info = None;
        // What came since the last sample: NVML's start, or a late answer, dropped (it
        // was for an earlier sample's tree).
        let mut late = None;
        // While NVML starts, each sample gives it a moment: a short run still gets
        // its readings.
        let patience = if self.started {
            Duration::ZERO
        } else {
            ANSWER_WAIT
        };
        if let Err(why) = self.drain(&mut info, &mut late, patience) {
            return Reply::Ended(why);
        }
        let mut fresh = None;
        if !self.started {
            return Reply::Late(None);
        }
        if let Some((_, asked_at)) = self.asked {
            if asked_at.elapsed() > SLOW && !std::mem::replace(&mut self.slow_noted, true) {
                return Reply::Late(Some(format!(
                    "NVML took over {} s to answer a reading: samples without an answer \
                     have no GPU figure",
                    SLOW.as_secs()
                )));
            }
            return match info {
                Some(info) => Reply::Info(info, None),
                None => Reply::Late(None),
            };
        }
        self.seq += 1;
        let ask = Ask {
            seq: self.seq,
            pids: pids.to_vec(),
            started: started.to_vec(),
        };
        let Ok(mut line) = serde_json::to_vec(&ask) else {
            return Reply::Late(None);
        };
        line.push(b'\n');
        match self.stdin.write(&line) {
            Ok(written) if written == line.len() => {}
            // A full pipe (a helper that reads no more) or a short write: not asked.
            Ok(_) => return Reply::Ended(self.ended("stopped reading its questions")),
            Err(error) if error.kind() == ErrorKind::WouldBlock => return Reply::Late(None),
            Err(_) => return Reply::Ended(self.ended("closed its input")),
        }
        self.asked = Some((self.seq, Instant::now()));
        if let Err(why) = self.drain(&mut info, &mut fresh, ANSWER_WAIT) {
            return Reply::Ended(why);
        }
        match (info, fresh) {
            (Some(info), reading) => Reply::Info(info, reading),
            (None, Some(reading)) => Reply::Reading(reading),
            (None, None) => Reply::Late(None),
        }
    }

    /// Reads what the helper said, waiting up to `wait` for the answer to the question
    /// asked; an answer to an earlier question is dropped.
    fn drain(
        &mut self,
        info: &mut Option<GpuInfo>,
        fresh: &mut Option<GpuReading>,
        wait: Duration,
    ) -> Result<(), String> {
        let until = Instant::now() + wait;
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match self.stdout.read(&mut chunk) {
                Ok(0) => return Err(self.ended("ended")),
                Ok(read) => {
                    self.pending.extend_from_slice(&chunk[..read]);
                    if self.pending.len() > MAX_LINE && !self.pending.contains(&b'\n') {
                        return Err(self.ended("answered a line of over 8 MiB"));
                    }
                    self.take_lines(info, fresh)?;
                    continue;
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                Err(error) => return Err(self.ended(&format!("could not be read ({error})"))),
            }
            let left = until.saturating_duration_since(Instant::now());
            if fresh.is_some() || (info.is_some() && self.asked.is_none()) || left.is_zero() {
                return Ok(());
            }
            crate::sys::wait_readable(&self.stdout, left);
        }
    }

    /// Parses the whole lines read so far.
    fn take_lines(
        &mut self,
        info: &mut Option<GpuInfo>,
        fresh: &mut Option<GpuReading>,
    ) -> Result<(), String> {
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            match serde_json::from_slice::<Answer>(&line) {
                Ok(Answer::Info(said)) => {
                    self.started = true;
                    *info = Some(said);
                }
                Ok(Answer::Reading { seq, reading }) => {
                    if self.asked.is_some_and(|(asked, _)| asked == seq) {
                        self.asked = None;
                        *fresh = Some(reading);
                    } else {
                        return Err(self.ended("answered a question it was not asked"));
                    }
                }
                Err(_) => return Err(self.ended("answered something that is not a reading")),
            }
        }
        Ok(())
    }

    /// The sentence for a helper that is gone, after `what` it did; it is stopped.
    fn ended(&mut self, what: &str) -> String {
        let end = self.stop();
        format!("the NVML helper process {what}{end}: no GPU figures from then on")
    }

    /// Stops the helper, once: how it ended, as `(killed by SIGSEGV)`, where known.
    fn stop(&mut self) -> String {
        let pid = self.child.id();
        // A helper that `stemmon run` reaped (it reaps every child) is not signalled:
        // its pid may be another process's by now.
        let end = match registry::end_of(pid) {
            Some(end) => Some(end),
            None => {
                let end = crate::sys::child_end(pid);
                if end.is_none() {
                    let _ = self.child.kill();
                }
                let _ = self.child.wait();
                end
            }
        };
        registry::forget(pid);
        end.map_or_else(String::new, |end| format!(" ({end})"))
    }
}

impl Client {
    /// The helper's pid: no process of the tree.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Notes how the helper `pid` ended, if it is one (see [`registry::note_end`]).
pub(crate) fn note_end(pid: u32) -> bool {
    registry::note_end(pid)
}

impl Drop for Client {
    fn drop(&mut self) {
        if registry::is_helper(self.child.id()) {
            self.stop();
        }
    }
}

/// The helper's side: loads NVML as the first line says, answers every question, and
/// exits when its input ends. The exit code is 0, or 2 for a first line that is not a
/// library.
pub(crate) fn serve() -> std::process::ExitCode {
    crate::sys::die_with_parent();
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut stdout = std::io::stdout().lock();
    let mut line = Vec::new();
    let Some(hello) = next_line(&mut input, &mut line)
        .and_then(|line| serde_json::from_slice::<Hello>(line).ok())
    else {
        return std::process::ExitCode::from(2);
    };
    let mut source = GpuSource::open(hello.library.as_deref());
    if say(&mut stdout, &Answer::Info(source.info().clone())).is_err() {
        return std::process::ExitCode::SUCCESS;
    }
    while let Some(text) = next_line(&mut input, &mut line) {
        let Ok(ask) = serde_json::from_slice::<Ask>(text) else {
            continue;
        };
        let reading = source.read(&ask.pids, &ask.started).clone();
        let answer = Answer::Reading {
            seq: ask.seq,
            reading,
        };
        if say(&mut stdout, &answer).is_err() {
            break;
        }
    }
    std::process::ExitCode::SUCCESS
}

/// The next line of `input`, at most [`MAX_LINE`] bytes; `None` at its end.
fn next_line<'a>(input: &mut impl BufRead, line: &'a mut Vec<u8>) -> Option<&'a [u8]> {
    line.clear();
    let read = input.take(MAX_LINE as u64).read_until(b'\n', line).ok()?;
    (read > 0).then_some(line.as_slice())
}

fn say(out: &mut impl Write, answer: &Answer) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, answer)?;
    out.write_all(b"\n")?;
    out.flush()
}
