//! The root's virtual memory, threads and open descriptors: gauges that OTLP sends as
//! the monitored process's, read at most once every [`STATE_EVERY`]. Listing
//! `/proc/PID/fd` and reading the whole `status` of this process cost a tenth of a
//! sample of ten descendants; the figures they give change slowly.

use super::procfs::{self, ProcPath};
use crate::memory::ProcessState;
use std::time::{Duration, Instant};

/// The root's state is read again once it is this old.
pub(crate) const STATE_EVERY: Duration = Duration::from_secs(1);

/// The root's last state, and when and of which process it was read.
#[derive(Debug, Default)]
pub(crate) struct RootState {
    last: Option<(Instant, u32, ProcessState)>,
}

impl RootState {
    /// The root's state: read now where the last reading is older than
    /// [`STATE_EVERY`] or of another process, else the last one.
    pub(crate) fn of(&mut self, pid: u32, status: &procfs::Status) -> ProcessState {
        let now = Instant::now();
        match self.last {
            Some((at, of, state)) if of == pid && now.duration_since(at) < STATE_EVERY => state,
            _ => {
                let state = read(pid, status);
                self.last = Some((now, pid, state));
                state
            }
        }
    }
}

/// The root's virtual memory and threads (from the `status` just read) and its open
/// descriptors (the entries of `/proc/PID/fd`).
fn read(pid: u32, status: &procfs::Status) -> ProcessState {
    let fds = std::fs::read_dir(ProcPath::of(pid, "fd").as_path())
        .ok()
        .map(|dir| dir.count() as u32);
    // This process's own status is read in part (its marks): the rest, here.
    let whole = status.size.is_none().then(|| {
        std::fs::read(ProcPath::of(pid, "status").as_path())
            .map(|text| procfs::parse_status(&text))
            .unwrap_or_default()
    });
    let status = whole.as_ref().unwrap_or(status);
    ProcessState {
        virtual_bytes: status.size,
        threads: status.threads,
        open_fds: fds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_read_again_only_once_old_or_of_another_process() {
        let me = std::process::id();
        let mut state = RootState::default();
        let first = state.of(me, &procfs::Status::default());
        assert!(first.open_fds.is_some_and(|n| n > 0), "{first:?}");
        assert!(first.threads.is_some() && first.virtual_bytes.is_some());
        // A new descriptor is not seen within the second ...
        let extra = std::fs::File::open("/proc/self/stat").unwrap();
        assert_eq!(state.of(me, &procfs::Status::default()), first);
        // ... and is, once the reading is old.
        let (at, pid, kept) = state.last.unwrap();
        state.last = Some((at - STATE_EVERY, pid, kept));
        let later = state.of(me, &procfs::Status::default());
        assert!(later.open_fds > first.open_fds, "{later:?} after {first:?}");
        drop(extra);
    }
}
