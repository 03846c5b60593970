//! How many processes may have ended unread since the last sample: without exit records,
//! what tells whether the kernel's figure for the children reaped in an interval (the
//! largest of their peaks, `RUSAGE_CHILDREN`) bounds all of them.
//!
//! The kernel gives pids out in order (`/proc/sys/kernel/ns_last_pid`: the last one
//! given in this pid namespace), threads included. Of those given out since the last
//! sample, the live threads and children of this process have not ended; any other may
//! be a process this process started and reaped. Where the processes that may have ended
//! in one interval are more than one, their reaping is the largest of their peaks, not
//! their sum: those beyond the first ended unseen (the figure is "at least"). A busy
//! machine's other processes take pids too: they can only make the count higher, never
//! a bound of a figure that is not one.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Counted where the pids given out cannot be read or wrapped around: more than one.
const UNKNOWN: u32 = 2;

/// The pids given out since the last sample (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Births {
    /// `ns_last_pid`, opened once (`None` inside: it cannot be).
    file: Option<Option<File>>,
    /// The last pid given out when the last sample began.
    at_sample: Option<u32>,
    /// How many of those given out since may have ended, as counted at the last reaping.
    ended: u32,
}

impl Births {
    /// Counting from the last pid given out now.
    pub(crate) fn now() -> Births {
        let mut births = Births::default();
        births.renew();
        births
    }

    /// Notes the last pid given out as a sample begins: processes started later are
    /// none the sample read.
    pub(crate) fn renew(&mut self) {
        self.at_sample = self.last_pid();
        self.ended = 0;
    }

    /// How many processes started since the last sample may have ended since the
    /// previous call (this process reaped a child since then).
    pub(crate) fn ended_since(&mut self) -> u32 {
        let (Some(from), Some(to)) = (self.at_sample, self.last_pid()) else {
            return UNKNOWN;
        };
        // A wrap past `pid_max` leaves no range to count in.
        let Some(given) = to.checked_sub(from) else {
            return UNKNOWN;
        };
        // One new pid at most: it is the one reaped, and no scan is needed.
        let alive = match given.saturating_sub(self.ended) {
            0 | 1 => 0,
            _ => own_alive_in(from, to),
        };
        let ended = given.saturating_sub(alive);
        let fresh = ended.saturating_sub(self.ended);
        self.ended = self.ended.max(ended);
        fresh
    }

    fn last_pid(&mut self) -> Option<u32> {
        last_pid(&mut self.file)
    }
}

/// The last pid the kernel gave out in this pid namespace, through `file` (opened on
/// first use; `Some(None)`: it cannot be).
pub(crate) fn last_pid(file: &mut Option<Option<File>>) -> Option<u32> {
    let file = file
        .get_or_insert_with(|| File::open("/proc/sys/kernel/ns_last_pid").ok())
        .as_ref()?;
    let mut text = [0u8; 16];
    let read = file.read_at(&mut text, 0).ok()?;
    std::str::from_utf8(&text[..read]).ok()?.trim().parse().ok()
}

/// How many of this process's live threads and children have an id in `(from, to]`.
fn own_alive_in(from: u32, to: u32) -> u32 {
    let within = |id: u32| from < id && id <= to;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut alive = 0;
    let mut children = String::new();
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        alive += u32::from(within(tid));
        children.clear();
        let path = task.path().join("children");
        if let Ok(mut file) = File::open(path) {
            let _ = std::io::Read::read_to_string(&mut file, &mut children);
        }
        alive += children
            .split_ascii_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .filter(|pid| within(*pid))
            .count() as u32;
    }
    alive
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn a_live_child_has_not_ended_and_a_reaped_one_has() {
        let mut births = Births::default();
        births.renew();
        let Some(from) = births.at_sample else {
            panic!("cannot run: /proc/sys/kernel/ns_last_pid cannot be read here");
        };
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let to = births.last_pid().unwrap();
        // Ids in the range are all given out: the count there can only fall.
        let alive = own_alive_in(from, to);
        assert!(alive >= 1, "the live child is alive: {alive}");
        child.kill().unwrap();
        child.wait().unwrap();
        let after = own_alive_in(from, to);
        assert!(
            after < alive,
            "{after} alive after the reaping, {alive} before"
        );
        let ended = births.ended_since();
        assert!(ended >= 1, "the reaped child has ended: {ended}");
    }

    #[test]
    fn without_a_baseline_more_than_one_may_have_ended() {
        assert_eq!(Births::default().ended_since(), UNKNOWN);
    }
}
