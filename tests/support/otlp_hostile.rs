//! Hostile OTLP endpoints on loopback, each a thread per connection in the test's own
//! process: one that redirects, stalls, trickles, resets, floods or records. Each keeps
//! what it saw (when a request arrived, when the client let go of it, its headers), so
//! that a test measures the client's timeout on the server's side of the socket.
#![allow(dead_code)] // Each test binary uses a part of this module.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the endpoint does with each request.
#[derive(Clone, Debug)]
pub enum Mode {
    /// Answers `302 Found` with `Location:` this URL.
    Redirect(String),
    /// Reads the request, then never answers: holds the connection until the client
    /// closes it.
    Stall,
    /// Reads the request, then sends its answer's status line a byte every 50 ms.
    Trickle,
    /// Reads the request's head, then resets the connection (RST) without an answer.
    Reset,
    /// Reads the request, then answers 200 with an endless body as fast as it can.
    Flood,
    /// Reads the request and answers 200 with an empty body: the host a redirect points
    /// to, which must never hear from the client.
    Record,
}

/// One request the endpoint saw.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The request line and headers, as sent.
    pub head: String,
    /// The body's length as read.
    pub body_bytes: usize,
    /// When the whole request had arrived.
    pub arrived: Instant,
    /// When the client closed the connection (or it failed), if it has.
    pub closed: Option<Instant>,
}

#[derive(Default)]
struct Log {
    seen: Mutex<Vec<Seen>>,
    changed: Condvar,
    connections: Mutex<usize>,
}

/// A running hostile endpoint; it lives as long as the test process.
pub struct Hostile {
    /// Its base endpoint, `http://127.0.0.1:PORT`.
    pub url: String,
    log: Arc<Log>,
}

impl Hostile {
    /// Starts an endpoint that behaves as `mode`.
    pub fn start(mode: Mode) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Log::default());
        let shared = Arc::clone(&log);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                *shared.connections.lock().unwrap() += 1;
                let (mode, log) = (mode.clone(), Arc::clone(&shared));
                std::thread::spawn(move || serve(stream, &mode, &log));
            }
        });
        Hostile { url, log }
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.seen.lock().unwrap().clone()
    }

    /// Connections accepted so far, whether or not a request came on them.
    pub fn connections(&self) -> usize {
        *self.log.connections.lock().unwrap()
    }

    /// Waits (at most `within`) until `count` requests have been seen and let go of by
    /// the client; returns what was seen.
    pub fn closed(&self, count: usize, within: Duration) -> Vec<Seen> {
        let deadline = Instant::now() + within;
        let mut seen = self.log.seen.lock().unwrap();
        loop {
            let done = seen.iter().filter(|s| s.closed.is_some()).count();
            let left = deadline.saturating_duration_since(Instant::now());
            if done >= count || left.is_zero() {
                return seen.clone();
            }
            seen = self.log.changed.wait_timeout(seen, left).unwrap().0;
        }
    }
}

/// Reads one request: its head, and its body if `body`. `None` if the client went away.
fn read_request(reader: &mut BufReader<TcpStream>, body: bool) -> Option<(String, usize)> {
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().ok()?;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    if body {
        let mut bytes = vec![0; length];
        reader.read_exact(&mut bytes).ok()?;
    }
    Some((head, if body { length } else { 0 }))
}

fn serve(stream: TcpStream, mode: &Mode, log: &Log) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let whole = !matches!(mode, Mode::Reset);
    // A redirect and a recorder answer every request of a kept-alive connection.
    while let Some((head, body_bytes)) = read_request(&mut reader, whole) {
        let index = {
            let mut seen = log.seen.lock().unwrap();
            seen.push(Seen {
                head,
                body_bytes,
                arrived: Instant::now(),
                closed: None,
            });
            seen.len() - 1
        };
        let again = answer(&stream, &mut reader, mode);
        if !again {
            let mut seen = log.seen.lock().unwrap();
            seen[index].closed = Some(Instant::now());
            log.changed.notify_all();
            return;
        }
    }
}

/// Acts on one request as `mode` says; `true` if the connection takes another.
fn answer(stream: &TcpStream, reader: &mut BufReader<TcpStream>, mode: &Mode) -> bool {
    let mut out = stream;
    match mode {
        Mode::Redirect(to) => {
            let reply = format!(
                "HTTP/1.1 302 Found\r\nlocation: {to}/v1/metrics\r\ncontent-length: 0\r\n\r\n"
            );
            return out.write_all(reply.as_bytes()).is_ok();
        }
        Mode::Record => {
            return out
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                .is_ok();
        }
        Mode::Stall => drain(reader),
        Mode::Trickle => {
            for byte in b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
                .iter()
                .cycle()
            {
                if out.write_all(&[*byte]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
                if peer_closed(stream) {
                    break;
                }
            }
        }
        Mode::Reset => {
            // SO_LINGER 0: the close sends RST.
            let _ = socket_linger_zero(stream);
        }
        Mode::Flood => {
            let _ =
                out.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\r\n");
            let chunk = vec![0x0a; 64 << 10];
            while out.write_all(&chunk).is_ok() {}
        }
    }
    false
}

/// Reads until the client closes the connection (or it fails).
fn drain(reader: &mut BufReader<TcpStream>) {
    let mut sink = [0; 4096];
    while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
}

/// Whether the client has closed its side (a read would return 0 at once).
fn peer_closed(stream: &TcpStream) -> bool {
    let _ = stream.set_nonblocking(true);
    let mut byte = [0; 1];
    let closed = matches!((&*stream).read(&mut byte), Ok(0));
    let _ = stream.set_nonblocking(false);
    closed
}

fn socket_linger_zero(stream: &TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is the live socket `stream` owns, and `linger` is a valid
    // `struct linger` whose size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
