//! The kernel's exit records (taskstats over generic netlink): as each task of the
//! machine exits, the kernel sends every listener registered for its CPU a record with
//! the task's own high-water RSS (`hiwater_rss`, its memory's peak, unmerged with any
//! child's), its parent and thread group, and its I/O counters. That is how a
//! descendant that another process reaps, or that lives and dies between two samples,
//! is still accounted at its own peak.
//!
//! Registering needs `CAP_NET_ADMIN` (root has it, in CI and in most containers).
//! Written here on `libc` alone: the protocol is three messages (resolve the family,
//! register a CPU mask, receive), and a netlink crate would bring a generic attribute
//! framework for them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `NETLINK_GENERIC`'s controller, and its request for a family's id.
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
/// `<linux/taskstats.h>`.
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_NEW: u8 = 2;
const TASKSTATS_CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
const TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK: u16 = 4;
const TASKSTATS_TYPE_PID: u16 = 1;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_PID: u16 = 4;
/// Offsets in `struct taskstats` (stable: the struct only grows at its end).
const AC_PPID: usize = 132;
const AC_ETIME_MICROS: usize = 144;
const HIWATER_RSS_KIB: usize = 200;
const READ_CHAR: usize = 216;
const WRITE_CHAR: usize = 224;
const READ_BYTES: usize = 248;
const WRITE_BYTES: usize = 256;
/// `ac_tgid`, from version 13 of the struct on.
const AC_TGID: usize = 368;
const NLMSG_HDR: usize = 16;
const GENL_HDR: usize = 4;
/// Room for a few thousand records between two samples.
const RECEIVE_BUFFER: libc::c_int = 8 << 20;

/// One exiting task's record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExitRecord {
    /// The thread's id.
    pub(crate) tid: u32,
    /// Its process (thread group); the thread's id where the kernel does not say.
    pub(crate) tgid: u32,
    /// The process that was its parent as it exited (who reaps it).
    pub(crate) ppid: u32,
    /// The peak RSS of its memory, in bytes: for a thread, its process's so far.
    pub(crate) hiwater: u64,
    /// How long it ran, in microseconds.
    pub(crate) elapsed_micros: u64,
    /// This thread's own I/O: bytes passed to read/write calls, and storage bytes.
    pub(crate) read_char: u64,
    pub(crate) write_char: u64,
    pub(crate) read_bytes: u64,
    pub(crate) write_bytes: u64,
}

/// A socket registered for the exit records of every CPU. See the module docs.
pub(crate) struct ExitListener {
    fd: OwnedFd,
    family: u16,
    mask: Vec<u8>,
    buf: Vec<u8>,
    seq: u32,
    /// Records were dropped (the receive buffer overflowed) since [`take_lost`].
    lost: bool,
}

impl std::fmt::Debug for ExitListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExitListener")
            .field("family", &self.family)
            .finish()
    }
}

/// Appends a netlink attribute (padded to 4 bytes).
fn attr(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len() + (4 - len % 4) % 4, 0);
}

/// Walks the attributes of `data`: `(type, payload)`.
fn attrs(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([data[0], data[1]]));
        let kind = u16::from_ne_bytes([data[2], data[3]]) & 0x3fff;
        if len < 4 || len > data.len() {
            return None;
        }
        let payload = &data[4..len];
        data = &data[((len + 3) & !3).min(data.len())..];
        Some((kind, payload))
    })
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(data.get(at..at + 8)?.try_into().ok()?))
}

/// The record in a `TASKSTATS_TYPE_STATS` payload of the task `tid`.
fn parse_stats(tid: u32, stats: &[u8]) -> Option<ExitRecord> {
    let version = u16::from_ne_bytes(stats.get(0..2)?.try_into().ok()?);
    let tgid = if version >= 13 {
        u32_at(stats, AC_TGID).filter(|t| *t != 0).unwrap_or(tid)
    } else {
        tid
    };
    Some(ExitRecord {
        tid,
        tgid,
        ppid: u32_at(stats, AC_PPID)?,
        hiwater: u64_at(stats, HIWATER_RSS_KIB)?.saturating_mul(1024),
        elapsed_micros: u64_at(stats, AC_ETIME_MICROS)?,
        read_char: u64_at(stats, READ_CHAR)?,
        write_char: u64_at(stats, WRITE_CHAR)?,
        read_bytes: u64_at(stats, READ_BYTES)?,
        write_bytes: u64_at(stats, WRITE_BYTES)?,
    })
}

/// The exit records in one datagram (a `TASKSTATS_CMD_NEW` message per task; the
/// thread group's own message carries no memory figure and is skipped).
fn parse_records(family: u16, mut data: &[u8], out: &mut Vec<ExitRecord>) {
    while data.len() >= NLMSG_HDR {
        let len = u32_at(data, 0).unwrap_or(0) as usize;
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        if len < NLMSG_HDR || len > data.len() {
            return;
        }
        let message = &data[NLMSG_HDR..len];
        if kind == family && message.len() >= GENL_HDR && message[0] == TASKSTATS_CMD_NEW {
            for (outer, nested) in attrs(&message[GENL_HDR..]) {
                if outer != TASKSTATS_TYPE_AGGR_PID {
                    continue;
                }
                let mut tid = None;
                for (inner, payload) in attrs(nested) {
                    match inner {
                        TASKSTATS_TYPE_PID => tid = u32_at(payload, 0),
                        TASKSTATS_TYPE_STATS => {
                            if let Some(record) = tid.and_then(|t| parse_stats(t, payload)) {
                                out.push(record);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        data = &data[((len + 3) & !3).min(data.len())..];
    }
}

/// The CPU list the kernel knows of (`0-N`), NUL-terminated.
fn possible_cpus() -> Vec<u8> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| {
            // SAFETY: sysconf takes a plain integer and touches no memory.
            let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1);
            format!("0-{}", n - 1)
        });
    let mut mask = text.into_bytes();
    mask.push(0);
    mask
}

impl ExitListener {
    /// Opens a socket and registers it for every CPU's exit records. Fails without
    /// `CAP_NET_ADMIN` (`EPERM`), or where the kernel has no taskstats.
    pub(crate) fn open() -> io::Result<ExitListener> {
        // SAFETY: socket takes plain integers and returns a new descriptor or -1.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_GENERIC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor just returned to this function and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero sockaddr_nl is valid: family set below, port 0 lets
        // the kernel choose, no groups.
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `address` is a valid sockaddr_nl for the length given.
        let bound = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&address as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if bound != 0 {
            return Err(io::Error::last_os_error());
        }
        let size = RECEIVE_BUFFER;
        for option in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: `size` is a valid c_int for the length given.
            let set = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    option,
                    (&size as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if set == 0 {
                break;
            }
        }
        // The setup's answers come within this; the records are then taken without waiting.
        let timeout = libc::timeval {
            tv_sec: 2,
            tv_usec: 0,
        };
        // SAFETY: `timeout` is a valid timeval for the length given.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&timeout as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        let mut listener = ExitListener {
            fd,
            family: 0,
            mask: possible_cpus(),
            buf: vec![0; 64 << 10],
            seq: 0,
            lost: false,
        };
        listener.family = listener.resolve_family()?;
        let mask = listener.mask.clone();
        listener.request(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, &mask, &mut Vec::new())?;
        Ok(listener)
    }

    /// Sends one request and waits for its answer.
    fn send(
        &mut self,
        kind: u16,
        cmd: u8,
        version: u8,
        attr_kind: u16,
        payload: &[u8],
    ) -> io::Result<u32> {
        self.seq += 1;
        let mut body = vec![cmd, version, 0, 0];
        attr(&mut body, attr_kind, payload);
        let mut message = Vec::with_capacity(NLMSG_HDR + body.len());
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
        message.extend_from_slice(&((NLMSG_HDR + body.len()) as u32).to_ne_bytes());
        message.extend_from_slice(&kind.to_ne_bytes());
        message.extend_from_slice(&flags.to_ne_bytes());
        message.extend_from_slice(&self.seq.to_ne_bytes());
        message.extend_from_slice(&0u32.to_ne_bytes());
        message.extend_from_slice(&body);
        // SAFETY: `message` is valid for reads of its length for the whole call.
        let sent = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                message.as_ptr().cast(),
                message.len(),
                0,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(self.seq)
    }

    /// One datagram into `self.buf`, waiting (setup) or not: its length, 0 when none waits.
    fn receive(&mut self, wait: bool) -> io::Result<usize> {
        let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
        loop {
            // SAFETY: `buf` is valid for writes of its length for the whole call.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    flags,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) if !wait => return Ok(0),
                Some(libc::ENOBUFS) => self.lost = true,
                _ => return Err(error),
            }
        }
    }

    /// The controller's answer with the family id of `TASKSTATS`.
    fn resolve_family(&mut self) -> io::Result<u16> {
        let seq = self.send(
            GENL_ID_CTRL,
            CTRL_CMD_GETFAMILY,
            1,
            CTRL_ATTR_FAMILY_NAME,
            b"TASKSTATS\0",
        )?;
        let mut family = None;
        loop {
            let n = self.receive(true)?;
            let mut data = &self.buf[..n];
            while data.len() >= NLMSG_HDR {
                let len = (u32_at(data, 0).unwrap_or(0) as usize).clamp(NLMSG_HDR, data.len());
                let kind = u16::from_ne_bytes([data[4], data[5]]);
                let message = &data[NLMSG_HDR..len];
                if u32_at(data, 8) == Some(seq) {
                    if kind == GENL_ID_CTRL && message.len() >= GENL_HDR {
                        for (attr_kind, payload) in attrs(&message[GENL_HDR..]) {
                            if attr_kind == CTRL_ATTR_FAMILY_ID && payload.len() >= 2 {
                                family = Some(u16::from_ne_bytes([payload[0], payload[1]]));
                            }
                        }
                    } else if kind == libc::NLMSG_ERROR as u16 {
                        let code = u32_at(message, 0).unwrap_or(0) as i32;
                        if code < 0 {
                            return Err(io::Error::from_raw_os_error(-code));
                        }
                        return family.ok_or_else(|| io::Error::other("no TASKSTATS family"));
                    }
                }
                data = &data[((len + 3) & !3).min(data.len())..];
            }
        }
    }

    /// Sends a taskstats request with one attribute and waits for its acknowledgement;
    /// records that come first go into `records`.
    fn request(
        &mut self,
        attr_kind: u16,
        payload: &[u8],
        records: &mut Vec<ExitRecord>,
    ) -> io::Result<()> {
        let seq = self.send(self.family, TASKSTATS_CMD_GET, 1, attr_kind, payload)?;
        loop {
            let n = self.receive(true)?;
            let mut data = &self.buf[..n];
            while data.len() >= NLMSG_HDR {
                let len = (u32_at(data, 0).unwrap_or(0) as usize).clamp(NLMSG_HDR, data.len());
                let kind = u16::from_ne_bytes([data[4], data[5]]);
                if kind == libc::NLMSG_ERROR as u16 && u32_at(data, 8) == Some(seq) {
                    let code = u32_at(&data[NLMSG_HDR..len], 0).unwrap_or(0) as i32;
                    return if code < 0 {
                        Err(io::Error::from_raw_os_error(-code))
                    } else {
                        Ok(())
                    };
                }
                parse_records(self.family, &data[..len], records);
                data = &data[((len + 3) & !3).min(data.len())..];
            }
        }
    }

    /// Appends every record that arrived since the last call, without waiting.
    pub(crate) fn drain(&mut self, out: &mut Vec<ExitRecord>) {
        // At most this many datagrams a call: a machine that never stops exiting
        // cannot keep a sample here.
        for _ in 0..100_000 {
            match self.receive(false) {
                Ok(0) => return,
                Ok(n) => {
                    let family = self.family;
                    parse_records(family, &self.buf[..n], out);
                }
                Err(_) => {
                    self.lost = true;
                    return;
                }
            }
        }
    }

    /// The socket, for `poll`.
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Whether records were dropped since the last call (the buffer overflowed).
    pub(crate) fn take_lost(&mut self) -> bool {
        std::mem::take(&mut self.lost)
    }
}

impl Drop for ExitListener {
    fn drop(&mut self) {
        // Closing the socket ends the registration too; this ends it at once.
        let mask = self.mask.clone();
        let _ = self.send(
            self.family,
            TASKSTATS_CMD_GET,
            1,
            TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK,
            &mask,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this process may register (CAP_NET_ADMIN): the tests that need it say so.
    fn listener() -> Option<ExitListener> {
        match ExitListener::open() {
            Ok(listener) => Some(listener),
            Err(e) => {
                crate::env::cannot_run("taskstats", &format!("no taskstats here: {e}"));
                None
            }
        }
    }

    #[test]
    fn an_exiting_child_is_recorded_at_its_own_peak_with_its_parent() {
        let Some(mut listener) = listener() else {
            return;
        };
        let mut child = std::process::Command::new("python3")
            .args(["-c", "b = b'x' * (96 << 20)"])
            .spawn()
            .unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let mut records = Vec::new();
        listener.drain(&mut records);
        let own: Vec<_> = records.iter().filter(|r| r.tgid == pid).collect();
        assert!(
            !own.is_empty(),
            "no record of {pid} among {}",
            records.len()
        );
        let peak = own.iter().map(|r| r.hiwater).max().unwrap();
        assert!((96 << 20..160 << 20).contains(&peak), "{peak}");
        assert!(own.iter().all(|r| r.ppid == std::process::id()), "{own:?}");
    }

    #[test]
    fn records_are_read_from_nested_attributes() {
        let mut stats = vec![0u8; 416];
        stats[0..2].copy_from_slice(&13u16.to_ne_bytes());
        stats[AC_PPID..AC_PPID + 4].copy_from_slice(&7u32.to_ne_bytes());
        stats[HIWATER_RSS_KIB..HIWATER_RSS_KIB + 8].copy_from_slice(&2048u64.to_ne_bytes());
        stats[WRITE_CHAR..WRITE_CHAR + 8].copy_from_slice(&5u64.to_ne_bytes());
        stats[AC_TGID..AC_TGID + 4].copy_from_slice(&40u32.to_ne_bytes());
        let mut nested = Vec::new();
        attr(&mut nested, TASKSTATS_TYPE_PID, &41u32.to_ne_bytes());
        attr(&mut nested, TASKSTATS_TYPE_STATS, &stats);
        let mut body = vec![TASKSTATS_CMD_NEW, 1, 0, 0];
        attr(&mut body, TASKSTATS_TYPE_AGGR_PID, &nested);
        let mut message = ((NLMSG_HDR + body.len()) as u32).to_ne_bytes().to_vec();
        message.extend_from_slice(&30u16.to_ne_bytes());
        message.extend_from_slice(&[0; 10]);
        message.extend_from_slice(&body);
        let mut out = Vec::new();
        parse_records(30, &message, &mut out);
        assert_eq!(
            out,
            vec![ExitRecord {
                tid: 41,
                tgid: 40,
                ppid: 7,
                hiwater: 2 << 20,
                write_char: 5,
                ..ExitRecord::default()
            }]
        );
        out.clear();
        parse_records(31, &message, &mut out);
        assert!(out.is_empty(), "another family's message");
    }
}
