//! A thread that takes the exit records as they come and stamps each with when it came
//! (seconds since boot, the clock of `/proc/PID/stat`'s start times): a record comes as
//! its task exits, so the stamp is its end, and the end less its run time its start.
//! With both, processes that lived and died between two samples are summed only where
//! their lives overlapped, not as if they had all been alive at once.

use super::taskstats::{ExitListener, ExitRecord};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// At most this many records wait for the next sample; past it they are lost (and the
/// sample says that some exit may have gone unread).
const MAX_WAITING: usize = 200_000;

/// A record and when it came, in seconds since boot.
pub(crate) type Stamped = (ExitRecord, f64);

#[derive(Default)]
struct Inbox {
    records: Vec<Stamped>,
    lost: bool,
}

/// The thread and what it has taken. See the module docs.
pub(crate) struct ExitWatch {
    inbox: Arc<Mutex<Inbox>>,
    /// The socket: the thread drains it as records come, and [`ExitWatch::take`] once
    /// more, so that a record the kernel sent before a sample is never missed by it.
    listener: Arc<Mutex<ExitListener>>,
    /// Written to (or closed) to stop the thread.
    wake: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ExitWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExitWatch")
    }
}

/// A pipe: (read end, write end).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for writes of two ints for the whole call.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just returned by pipe2 and belong to nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl ExitWatch {
    /// Registers for the records and starts the thread.
    pub(crate) fn start() -> std::io::Result<ExitWatch> {
        let listener = Arc::new(Mutex::new(ExitListener::open()?));
        let fd = listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .raw_fd();
        let (stop, wake) = pipe()?;
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let shared = Arc::clone(&inbox);
        let socket = Arc::clone(&listener);
        let thread = std::thread::Builder::new()
            .name("stemmon-exits".into())
            .spawn(move || {
                let mut taken = Vec::new();
                loop {
                    let mut fds = [
                        libc::pollfd {
                            fd,
                            events: libc::POLLIN,
                            revents: 0,
                        },
                        libc::pollfd {
                            fd: stop.as_raw_fd(),
                            events: libc::POLLIN,
                            revents: 0,
                        },
                    ];
                    // SAFETY: `fds` is valid for reads and writes of its two entries.
                    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
                    if ready < 0 {
                        if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                            continue;
                        }
                        return;
                    }
                    if fds[1].revents != 0 {
                        return;
                    }
                    let mut listener = socket.lock().unwrap_or_else(PoisonError::into_inner);
                    deliver(&mut listener, &shared, &mut taken);
                }
            })?;
        Ok(ExitWatch {
            inbox,
            listener,
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    /// Moves the records taken since the last call into `out`; whether none was lost.
    pub(crate) fn take(&self, out: &mut Vec<Stamped>) -> bool {
        {
            let mut listener = self.listener.lock().unwrap_or_else(PoisonError::into_inner);
            deliver(&mut listener, &self.inbox, &mut Vec::new());
        }
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        out.append(&mut inbox.records);
        !std::mem::take(&mut inbox.lost)
    }
}

/// Drains the socket into the inbox, stamping each record with now (`taken`: a
/// buffer to reuse).
fn deliver(listener: &mut ExitListener, inbox: &Mutex<Inbox>, taken: &mut Vec<ExitRecord>) {
    taken.clear();
    listener.drain(taken);
    let now = super::platform::boot_seconds().unwrap_or(0.0);
    let lost = listener.take_lost();
    let mut inbox = inbox.lock().unwrap_or_else(PoisonError::into_inner);
    inbox.lost |= lost;
    for record in taken.iter() {
        if inbox.records.len() < MAX_WAITING {
            inbox.records.push((*record, now));
        } else {
            inbox.lost = true;
        }
    }
}

impl Drop for ExitWatch {
    fn drop(&mut self) {
        // Closing the write end wakes the thread's poll (the read end sees end of file).
        drop(self.wake.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
