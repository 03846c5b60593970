//! Sending OTLP requests: an HTTP client with a timeout per request, and the exporter
//! thread (`stemmon-otlp`) that sends a monitor's requests off every other thread.
//!
//! The sampler hands a request to the thread and goes on: one waits at most, and a
//! newer one replaces it (latest wins), so a slow endpoint never holds a sample nor
//! piles up requests. Only the final one is waited for, and for a bounded time.

use super::env::{Signal, Target};
use super::proto::{ExportMetricsServiceResponse, ExportTraceServiceResponse};
use prost::Message as _;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Longest the end of a run waits for its final metrics and trace, whatever the
/// timeouts say: what a dead or slow endpoint can add to a program's run time.
pub(crate) const FINAL_WAIT: Duration = Duration::from_secs(1);

/// The most of a response's body read: a partial success's message, or an error's.
const RESPONSE_LIMIT: u64 = 64 << 10;

/// The `Content-Type` of every request: OTLP/HTTP with protobuf bodies.
const CONTENT_TYPE: &str = "application/x-protobuf";

/// An HTTP client for OTLP: POSTs a protobuf body, follows no redirect.
#[derive(Debug)]
pub(crate) struct Client {
    agent: ureq::Agent,
}

impl Client {
    /// A client that follows no redirect: a 3xx is a failed export, so that no header
    /// (an API key) ever reaches a host the endpoint points to.
    pub(crate) fn new() -> Client {
        let agent = ureq::Agent::config_builder()
            // The status is read here, so that the collector's reason reaches the report.
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("stemmon/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Client { agent }
    }

    /// POSTs `request` within `timeout` (at most its own). It counts as sent only when
    /// the endpoint answered the POST of the whole body with a 2xx; one with a partial
    /// success that rejected points or spans is a failure too, with the collector's
    /// reason. Every message shows the endpoint without its userinfo.
    pub(crate) fn post(&self, request: &Request, timeout: Duration) -> Result<(), String> {
        let target = &request.target;
        let endpoint = &target.endpoint;
        let fail = |why: String| {
            endpoint.scrub(&format!(
                "could not send OTLP to {}: {why}",
                endpoint.shown()
            ))
        };
        let timeout = timeout.min(target.timeout);
        if timeout.is_zero() {
            return Err(fail("no time left".to_owned()));
        }
        let mut http = self
            .agent
            .post(endpoint.url())
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("Content-Type", CONTENT_TYPE);
        for (name, value) in &target.headers {
            http = http.header(name, value);
        }
        let response = if target.gzip {
            http.header("Content-Encoding", "gzip")
                .send(&gzip(&request.body)[..])
        } else {
            http.send(&request.body[..])
        }
        .map_err(|error| fail(error.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .with_config()
            .limit(RESPONSE_LIMIT)
            .read_to_vec()
            .unwrap_or_default();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let reason: String = text.trim().chars().take(200).collect();
            let mut why = if reason.is_empty() {
                format!("HTTP {status}")
            } else {
                format!("HTTP {status}: {}", crate::log::escape(&reason))
            };
            if status.is_redirection() {
                why.push_str(" (redirects are not followed)");
            }
            if matches!(status.as_u16(), 404 | 405) {
                why.push_str(&format!(
                    " (it may not take {name}: {var}=none sends no {name})",
                    name = request.signal.name(),
                    var = request.signal.exporter_var()
                ));
            }
            return Err(fail(why));
        }
        let partial = match request.signal {
            Signal::Metrics => ExportMetricsServiceResponse::decode(body.as_slice())
                .ok()
                .and_then(|r| r.partial_success),
            Signal::Traces => ExportTraceServiceResponse::decode(body.as_slice())
                .ok()
                .and_then(|r| r.partial_success),
        };
        match partial {
            Some(partial) if partial.rejected > 0 => {
                let what = match request.signal {
                    Signal::Metrics => "data points",
                    Signal::Traces => "spans",
                };
                Err(fail(format!(
                    "the collector rejected {} {what}: {}",
                    partial.rejected,
                    crate::log::escape(&partial.error_message)
                )))
            }
            _ => Ok(()),
        }
    }
}

/// `body` gzip-compressed (`Content-Encoding: gzip`, as the SDKs send it).
fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(body);
    encoder.finish().unwrap_or_default()
}

/// One request: its signal, where and how it goes, and its body.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) signal: Signal,
    pub(crate) target: Target,
    pub(crate) body: Vec<u8>,
}

/// What the exporter thread is asked to do.
#[derive(Debug)]
enum Job {
    /// Send these (a `running` line's metrics), each with the request timeout.
    Now(Vec<Request>),
    /// Send these (the final metrics and the trace) by `deadline`, then stop.
    Last(Vec<Request>, Instant),
}

#[derive(Debug, Default)]
struct State {
    pending: Option<Job>,
    /// A failure not yet handed to the caller.
    failure: Option<String>,
    /// The final job's outcome, once it ran.
    last: Option<Result<(), String>>,
    /// The monitor is gone: stop after the job in hand.
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The exporter thread of one monitor, and its hand-off.
#[derive(Debug)]
pub(crate) struct Delivery {
    shared: Arc<Shared>,
    /// Why the thread is not there, if it could not be started.
    missing: Option<String>,
    final_wait: Duration,
}

impl Delivery {
    /// Starts the `stemmon-otlp` thread, which sends with `client`; the end of the run
    /// waits `final_wait` at most.
    pub(crate) fn start(client: Client, final_wait: Duration) -> Delivery {
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("stemmon-otlp".into())
                .spawn(move || run(&shared, &client))
        };
        Delivery {
            shared,
            missing: thread
                .err()
                .map(|e| format!("could not start the stemmon-otlp thread: {e}")),
            final_wait,
        }
    }

    /// Hands `requests` to the thread, replacing any it has not begun; returns a failure
    /// of an earlier hand-off that was not returned yet.
    pub(crate) fn send(&self, requests: Vec<Request>) -> Result<(), String> {
        if let Some(missing) = &self.missing {
            return Err(missing.clone());
        }
        let mut state = self.shared.lock();
        state.pending = Some(Job::Now(requests));
        self.shared.changed.notify_all();
        state.failure.take().map_or(Ok(()), Err)
    }

    /// Hands the final `requests` to the thread and waits for them, at most the final
    /// wait: a request in flight is finished first, then these go with what is left.
    pub(crate) fn finish(&self, requests: Vec<Request>) -> Result<(), String> {
        if let Some(missing) = &self.missing {
            return Err(missing.clone());
        }
        let deadline = Instant::now() + self.final_wait;
        let urls: Vec<String> = requests
            .iter()
            .map(|r| r.target.endpoint.shown().to_owned())
            .collect();
        let mut state = self.shared.lock();
        state.pending = Some(Job::Last(requests, deadline));
        self.shared.changed.notify_all();
        loop {
            if let Some(outcome) = state.last.take() {
                return outcome;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "could not send OTLP to {}: not done within {} s, when the run ended",
                    urls.join(" and "),
                    self.final_wait.as_secs_f64()
                ));
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.changed.notify_all();
    }
}

/// The thread: takes the latest job, sends it, keeps the outcome; ends after the final
/// job or once the monitor is gone.
fn run(shared: &Shared, client: &Client) {
    // What this thread allocates is the monitor's, no stage's (the book's `heap.md`).
    crate::heap::slots::mark_own_thread();
    loop {
        let job = {
            let mut state = shared.lock();
            loop {
                if let Some(job) = state.pending.take() {
                    break job;
                }
                if state.closed {
                    return;
                }
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        let (requests, deadline) = match job {
            Job::Now(requests) => (requests, None),
            Job::Last(requests, deadline) => (requests, Some(deadline)),
        };
        let mut errors = Vec::new();
        // A signal's first failure ends its requests: the rest would fail alike.
        let mut failed: Vec<Signal> = Vec::new();
        for request in &requests {
            if failed.contains(&request.signal) {
                continue;
            }
            // Each request within its own timeout, the final ones by the deadline too.
            let timeout = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => request.target.timeout,
            };
            if let Err(error) = client.post(request, timeout) {
                errors.push(error);
                failed.push(request.signal);
            }
        }
        let outcome = if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        };
        let mut state = shared.lock();
        if deadline.is_some() {
            state.last = Some(outcome);
            shared.changed.notify_all();
            return;
        }
        if let Err(error) = outcome {
            state.failure = Some(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;

    /// A loopback server that reads each request's body, reports it, and answers
    /// `status` after `delay`.
    fn server(status: u16, delay: Duration) -> (String, mpsc::Receiver<(String, Vec<u8>)>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (sent, received) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let sent = sent.clone();
                std::thread::spawn(move || serve(stream, status, delay, &sent));
            }
        });
        (url, received)
    }

    fn serve(
        stream: TcpStream,
        status: u16,
        delay: Duration,
        sent: &mpsc::Sender<(String, Vec<u8>)>,
    ) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        loop {
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let _ = sent.send((head, body));
            std::thread::sleep(delay);
            let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 4\r\n\r\nnope");
            if (&stream).write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }

    /// A request of `signal` to `url` with `headers`, `timeout` and `gzip`.
    fn to(signal: Signal, url: &str, headers: &[(&str, &str)], gzip: bool) -> Request {
        Request {
            signal,
            target: Target {
                endpoint: super::super::endpoint::Endpoint::parse(url).unwrap(),
                headers: headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                timeout: Duration::from_secs(30),
                gzip,
            },
            body: Vec::new(),
        }
    }

    fn request(url: &str, body: &[u8]) -> Request {
        Request {
            body: body.to_vec(),
            ..to(Signal::Metrics, &format!("{url}/v1/metrics"), &[], false)
        }
    }

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn a_request_carries_the_headers_and_the_body_and_a_refusal_is_an_error() {
        let (url, received) = server(200, Duration::ZERO);
        let client = Client::new();
        let target = format!("{url}/v1/metrics");
        let mut sent = to(Signal::Metrics, &target, &[("x-api-key", "s3cret")], false);
        sent.body = b"\x0a\x00".to_vec();
        client.post(&sent, LONG).unwrap();
        let (head, body) = received.recv().unwrap();
        assert!(head.starts_with("POST /v1/metrics HTTP/1.1\r\n"), "{head}");
        let head = head.to_ascii_lowercase();
        assert!(
            head.contains("content-type: application/x-protobuf\r\n"),
            "{head}"
        );
        assert!(head.contains("x-api-key: s3cret\r\n"), "{head}");
        assert_eq!(body, b"\x0a\x00");

        let (url, _received) = server(503, Duration::ZERO);
        let error = client
            .post(
                &to(Signal::Traces, &format!("{url}/v1/traces"), &[], false),
                LONG,
            )
            .unwrap_err();
        assert_eq!(
            error,
            format!("could not send OTLP to {url}/v1/traces: HTTP 503 Service Unavailable: nope")
        );
    }

    #[test]
    fn a_partial_success_that_rejected_points_is_an_error() {
        // Answers a partial success: field 1 { rejected 3, "bad unit" }.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/metrics", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap() > 2 {
                line.clear();
            }
            let body = ExportMetricsServiceResponse {
                partial_success: Some(super::super::proto::PartialSuccess {
                    rejected: 3,
                    error_message: "bad unit".into(),
                }),
            }
            .encode_to_vec();
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            (&stream).write_all(head.as_bytes()).unwrap();
            (&stream).write_all(&body).unwrap();
        });
        let error = Client::new()
            .post(&to(Signal::Metrics, &url, &[], false), LONG)
            .unwrap_err();
        assert!(
            error.ends_with(": the collector rejected 3 data points: bad unit"),
            "{error}"
        );
    }

    #[test]
    fn a_hand_off_never_waits_and_the_latest_replaces_one_not_begun() {
        // Every answer takes 300 ms: the first request holds the thread meanwhile.
        let (url, received) = server(200, Duration::from_millis(300));
        let delivery = Delivery::start(Client::new(), Duration::from_secs(5));
        delivery.send(vec![request(&url, b"1")]).unwrap();
        // The thread has taken the first when the server has it.
        assert_eq!(received.recv().unwrap().1, b"1");
        let began = Instant::now();
        for body in [b"2", b"3", b"4"] {
            delivery.send(vec![request(&url, body)]).unwrap();
        }
        assert!(
            began.elapsed() < Duration::from_millis(300),
            "a hand-off waited"
        );
        assert_eq!(
            received.recv().unwrap().1,
            b"4",
            "the latest replaced 2 and 3"
        );
        // The final waits for the request in flight, then goes itself.
        delivery.finish(vec![request(&url, b"last")]).unwrap();
        assert_eq!(received.recv().unwrap().1, b"last");
        assert!(received.try_recv().is_err());
    }

    #[test]
    fn a_slow_endpoint_costs_the_end_of_a_run_the_final_wait_and_an_error() {
        let (url, received) = server(200, Duration::from_secs(30));
        let delivery = Delivery::start(Client::new(), Duration::from_millis(300));
        delivery.send(vec![request(&url, b"1")]).unwrap();
        assert_eq!(received.recv().unwrap().1, b"1");
        let began = Instant::now();
        let error = delivery.finish(vec![request(&url, b"last")]).unwrap_err();
        let waited = began.elapsed();
        assert!(
            (Duration::from_millis(300)..Duration::from_secs(5)).contains(&waited),
            "{waited:?}"
        );
        assert_eq!(
            error,
            format!(
                "could not send OTLP to {url}/v1/metrics: not done within 0.3 s, when the run \
                 ended"
            )
        );
    }

    #[test]
    fn a_dead_endpoints_failure_is_returned_at_the_next_hand_off_and_at_the_end() {
        // Bound, then closed: nothing listens there.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let delivery = Delivery::start(Client::new(), FINAL_WAIT);
        delivery.send(vec![request(&url, b"1")]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let error = loop {
            std::thread::sleep(Duration::from_millis(5));
            match delivery.send(Vec::new()) {
                Err(error) => break error,
                Ok(()) => assert!(Instant::now() < deadline, "no failure within 10 s"),
            }
        };
        assert!(
            error.starts_with(&format!("could not send OTLP to {url}/v1/metrics: ")),
            "{error}"
        );
        let error = delivery.finish(vec![request(&url, b"last")]).unwrap_err();
        assert!(error.starts_with("could not send OTLP to "), "{error}");
    }

    #[test]
    fn a_redirect_is_a_failure_that_is_not_followed_and_a_gzip_body_inflates_to_the_body() {
        // Answers 307 to a second server, which must never be reached.
        let (elsewhere, reached) = server(200, Duration::ZERO);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    line.clear();
                }
                let reply = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: {elsewhere}/v1/traces\r\n\
                     content-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = (&stream).write_all(reply.as_bytes());
            }
        });
        let error = Client::new()
            .post(
                &to(Signal::Traces, &url, &[("x-api-key", "k")], false),
                LONG,
            )
            .unwrap_err();
        assert_eq!(
            error,
            format!(
                "could not send OTLP to {url}: HTTP 307 Temporary Redirect (redirects are not \
                 followed)"
            )
        );
        assert!(reached.try_recv().is_err(), "the redirect was followed");

        let (url, received) = server(200, Duration::ZERO);
        let mut sent = to(Signal::Metrics, &format!("{url}/v1/metrics"), &[], true);
        sent.body = vec![7; 10_000];
        Client::new().post(&sent, LONG).unwrap();
        let (head, body) = received.recv().unwrap();
        assert!(
            head.to_ascii_lowercase()
                .contains("content-encoding: gzip\r\n"),
            "{head}"
        );
        assert!(body.len() < 1_000, "{} bytes on the wire", body.len());
        let mut inflated = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut inflated)
            .unwrap();
        assert_eq!(inflated, sent.body);
    }

    #[test]
    fn a_405_names_the_signal_and_the_variable_that_stops_it() {
        let (url, _received) = server(405, Duration::ZERO);
        let error = Client::new()
            .post(
                &to(Signal::Metrics, &format!("{url}/v1/metrics"), &[], false),
                LONG,
            )
            .unwrap_err();
        assert!(
            error.ends_with(
                "HTTP 405 Method Not Allowed: nope (it may not take metrics: \
                 OTEL_METRICS_EXPORTER=none sends no metrics)"
            ),
            "{error}"
        );
    }
}
