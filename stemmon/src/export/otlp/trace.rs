//! A finished run as one trace: a root span for the run, and a span per kept call
//! ([`Report::spans`]) under the call of its enclosing stage that contains it.
//!
//! The trace id is the run's id, the span ids are derived from it and the span's index,
//! so that sending the same report twice sends the same trace.

use super::points::run_attributes;
use super::proto::{KeyValue, Span, Status, SPAN_KIND_INTERNAL, STATUS_CODE_ERROR};
use crate::report::Report;
use std::collections::HashMap;

/// The name of the root span: stemmon's word for the run outside every stage.
pub(crate) const ROOT_NAME: &str = "workflow";

/// How much later than its parent's a child's end may read: the report's times are
/// rounded sums of the same clock's readings.
const SLACK_SECONDS: f64 = 1e-6;

/// The 16 bytes of the trace: the run id's 32 hex digits, or (a report without one, from
/// before 0.4) a hash of what identifies the run.
pub(crate) fn trace_id(report: &Report) -> [u8; 16] {
    if let Some(id) = report.run_id.as_deref().and_then(parse_hex_16) {
        if id != [0; 16] {
            return id;
        }
    }
    let mut id = [0; 16];
    let text = format!(
        "{}\0{}\0{:?}\0{}",
        report.host, report.pid, report.start_unix_seconds, report.wall_seconds
    );
    id[..8].copy_from_slice(&fnv1a(1, text.as_bytes()).to_be_bytes());
    id[8..].copy_from_slice(&fnv1a(2, text.as_bytes()).to_be_bytes());
    id
}

fn parse_hex_16(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut bytes = [0; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

/// 64-bit FNV-1a of `salt` and `bytes`: stable across versions and machines.
fn fnv1a(salt: u64, bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in salt.to_le_bytes().iter().chain(bytes) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The id of span `index` (0 the root, `i + 1` the report's span `i`): never zero.
pub(crate) fn span_id(trace: &[u8; 16], index: usize) -> [u8; 8] {
    let hash = fnv1a(index as u64, trace);
    if hash == 0 { 1u64 } else { hash }.to_be_bytes()
}

/// Nanoseconds since the Unix epoch of `seconds` after `start` (ns), saturating.
fn at(start: u64, seconds: f64) -> u64 {
    let offset = (seconds.max(0.0) * 1e9).round();
    start.saturating_add(if offset.is_finite() {
        offset as u64
    } else {
        u64::MAX
    })
}

/// Every span of the trace of `report`, which started at `start` (ns since the epoch):
/// the root first, then one per kept call whose stage the report holds.
pub(crate) fn spans(report: &Report, start: u64) -> Vec<Span> {
    let trace = trace_id(report);
    let root_id = span_id(&trace, 0);
    // The error's `Display` text where the report has it, else how it failed (its type,
    // `panic`, `cancelled`).
    let status = |error: &Option<String>, text: &Option<String>| {
        error.as_ref().map(|error| Status {
            message: status_message(text.as_deref().unwrap_or(error)),
            code: STATUS_CODE_ERROR,
        })
    };
    let mut spans = vec![Span {
        trace_id: trace.to_vec(),
        span_id: root_id.to_vec(),
        parent_span_id: Vec::new(),
        name: ROOT_NAME.to_owned(),
        kind: SPAN_KIND_INTERNAL,
        start_time_unix_nano: start,
        end_time_unix_nano: at(start, report.wall_seconds),
        attributes: run_attributes(report),
        status: status(&report.error, &report.error_message),
    }];
    let parents = parents(report);
    let thread_names: HashMap<u32, &str> = report
        .threads
        .iter()
        .filter_map(|t| Some((t.id, t.name.as_deref()?)))
        .collect();
    for (index, call) in report.spans.iter().enumerate() {
        let Some(stage) = report.stages.get(call.stage_id as usize) else {
            continue;
        };
        let parent = match parents[index] {
            Some(parent) => span_id(&trace, parent + 1),
            None => root_id,
        };
        let mut attributes = vec![
            KeyValue::string("stage.path", &stage.path),
            KeyValue::int("thread.id", i64::from(call.thread)),
        ];
        if let Some(name) = thread_names.get(&call.thread) {
            attributes.push(KeyValue::string("thread.name", name));
        }
        // The call's own figures; the stage's totals are on the metrics alone.
        attributes.push(KeyValue::of(
            "stemmon.wall_seconds",
            super::proto::any_value::Value::DoubleValue(call.wall_seconds),
        ));
        let begin = at(start, call.start_seconds);
        spans.push(Span {
            trace_id: trace.to_vec(),
            span_id: span_id(&trace, index + 1).to_vec(),
            parent_span_id: parent.to_vec(),
            name: stage.name.clone(),
            kind: SPAN_KIND_INTERNAL,
            start_time_unix_nano: begin,
            end_time_unix_nano: at(begin, call.wall_seconds),
            attributes,
            status: status(&call.error, &call.error_message),
        });
    }
    spans
}

/// The most characters of a span's status message.
pub(crate) const STATUS_CHARS: usize = 256;

/// An error as a span's status message: its first line, at most [`STATUS_CHARS`]
/// characters, control characters escaped (`\u{1b}`).
pub(crate) fn status_message(error: &str) -> String {
    let line = error.lines().next().unwrap_or_default().trim_end();
    let cut: String = line.chars().take(STATUS_CHARS).collect();
    crate::log::escape(&cut).into_owned()
}

/// When one kept call ran, and its index in the report's spans.
struct Interval {
    start: f64,
    end: f64,
    index: usize,
}

/// For each of the report's spans, the index of its parent span, `None` for the root:
/// the call of the nearest enclosing stage that contains it in time, on its own thread,
/// else on the monitor's thread (0), where a worker's stage nests (fork-join).
pub(crate) fn parents(report: &Report) -> Vec<Option<usize>> {
    // The calls of each stage on each thread, by start: one stage's calls on one thread
    // never overlap, so the one that may contain a time is the last that began before it.
    let mut calls: HashMap<(u32, u32), Vec<Interval>> = HashMap::new();
    for (index, span) in report.spans.iter().enumerate() {
        calls
            .entry((span.stage_id, span.thread))
            .or_default()
            .push(Interval {
                start: span.start_seconds,
                end: span.start_seconds + span.wall_seconds,
                index,
            });
    }
    for list in calls.values_mut() {
        list.sort_by(|a, b| a.start.total_cmp(&b.start));
    }
    let containing = |stage: u32, thread: u32, start: f64, end: f64| {
        let list = calls.get(&(stage, thread))?;
        let before = list.partition_point(|call| call.start <= start);
        let call = list.get(before.checked_sub(1)?)?;
        (end <= call.end + SLACK_SECONDS).then_some(call.index)
    };
    report
        .spans
        .iter()
        .map(|span| {
            let end = span.start_seconds + span.wall_seconds;
            let mut stage = report.stages.get(span.stage_id as usize)?.parent_id;
            // A report's parents are checked for cycles where it is read; the bound
            // keeps a hostile one from looping here all the same.
            for _ in 0..report.stages.len() {
                let ancestor = stage?;
                let found =
                    containing(ancestor, span.thread, span.start_seconds, end).or_else(|| {
                        (span.thread != 0)
                            .then(|| containing(ancestor, 0, span.start_seconds, end))
                            .flatten()
                    });
                if found.is_some() {
                    return found;
                }
                stage = report.stages.get(ancestor as usize)?.parent_id;
            }
            None
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Span as Call, StageReport, ThreadReport};

    fn stage(id: u32, name: &str, path: &str, parent: Option<u32>) -> StageReport {
        {
            let mut built = StageReport::default();
            built.id = id;
            built.name = name.into();
            built.path = path.into();
            built.parent_id = parent;
            built.calls = 1;
            built
        }
    }

    fn call(stage_id: u32, thread: u32, start: f64, wall: f64) -> Call {
        let mut call = Call::default();
        call.stage_id = stage_id;
        call.thread = thread;
        call.start_seconds = start;
        call.wall_seconds = wall;
        call
    }

    fn report() -> Report {
        {
            let mut built = Report::default();
            built.run_id = Some("00112233445566778899aabbccddeeff".into());
            built.wall_seconds = 10.0;
            built.stages = vec![
                stage(0, "fit", "fit", None),
                stage(1, "chunk", "fit/chunk", Some(0)),
                stage(2, "inner", "fit/chunk/inner", Some(1)),
                stage(3, "predict", "predict", None),
            ];
            built.threads = vec![
                {
                    let mut built = ThreadReport::default();
                    built.id = 0;
                    built.name = Some("main".into());
                    built.calls = 3;
                    built
                },
                {
                    let mut built = ThreadReport::default();
                    built.id = 1;
                    built.name = None;
                    built.calls = 3;
                    built
                },
            ];
            built.spans = vec![
                // 0: fit, twice on main
                call(0, 0, 1.0, 2.0),
                call(0, 0, 4.0, 2.0),
                // 2: chunk on main inside the second fit
                call(1, 0, 4.5, 0.5),
                // 3: chunk on worker 1 inside the first fit (fork-join)
                call(1, 1, 1.5, 1.0),
                // 4: inner on worker 1 inside its chunk
                call(2, 1, 1.75, 0.25),
                // 5: inner on worker 1 whose chunk was not kept: under the fit on main
                call(2, 1, 4.1, 0.1),
                // 6: predict, top level
                call(3, 0, 7.0, 1.0),
                // 7: chunk on a worker outside any fit call: the root
                call(1, 1, 6.5, 0.1),
            ];
            built
        }
    }

    #[test]
    fn each_call_nests_under_the_enclosing_stages_call_that_contains_it() {
        assert_eq!(
            parents(&report()),
            [None, None, Some(1), Some(0), Some(3), Some(1), None, None]
        );
    }

    #[test]
    fn the_trace_is_the_run_with_its_ids_times_names_and_errors() {
        let mut report = report();
        report.error = Some("panic".into());
        report.spans[4].error = Some("std::io::Error".into());
        let start = 1_700_000_000_000_000_000;
        let spans = spans(&report, start);
        assert_eq!(spans.len(), 9);
        let trace = trace_id(&report);
        assert_eq!(trace[0], 0x00);
        assert_eq!(trace[15], 0xff);
        let root = &spans[0];
        assert_eq!(root.name, ROOT_NAME);
        assert!(root.parent_span_id.is_empty());
        assert_eq!(root.end_time_unix_nano, start + 10_000_000_000);
        assert_eq!(
            root.status,
            Some(Status {
                message: "panic".into(),
                code: STATUS_CODE_ERROR
            })
        );
        let ids: Vec<&[u8]> = spans.iter().map(|s| s.span_id.as_slice()).collect();
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        for span in &spans[1..] {
            assert_eq!(span.trace_id, trace);
            assert!(ids.contains(&span.parent_span_id.as_slice()));
        }
        let inner = &spans[5];
        assert_eq!(inner.name, "inner");
        assert_eq!(inner.parent_span_id, spans[4].span_id);
        assert_eq!(inner.start_time_unix_nano, start + 1_750_000_000);
        assert_eq!(inner.end_time_unix_nano, start + 2_000_000_000);
        assert_eq!(inner.status.as_ref().unwrap().message, "std::io::Error");
        assert_eq!(spans[1].status, None);
        assert!(spans[1]
            .attributes
            .contains(&KeyValue::string("thread.name", "main")));
        assert_eq!(
            spans[4].attributes[..2],
            [
                KeyValue::string("stage.path", "fit/chunk"),
                KeyValue::int("thread.id", 1)
            ]
        );
        // The same report gives the same trace.
        assert_eq!(super::spans(&report, start), spans);
    }

    #[test]
    fn a_report_without_a_run_id_or_with_a_hostile_tree_still_gets_a_trace() {
        let mut report = report();
        report.run_id = None;
        let id = trace_id(&report);
        assert_ne!(id, [0; 16]);
        assert_eq!(id, trace_id(&report));
        // A parent cycle and a span of a stage that is not there.
        report.stages[0].parent_id = Some(2);
        report.spans.push(call(99, 0, 1.0, 1.0));
        let spans = spans(&report, 0);
        assert_eq!(spans.len(), 9);
        assert_eq!(span_id(&trace_id(&report), 0).len(), 8);
    }

    #[test]
    fn a_status_message_is_the_errors_first_line_bounded_and_escaped() {
        assert_eq!(
            status_message("a worker failed\nat line 2"),
            "a worker failed"
        );
        assert_eq!(status_message("bell \u{7} here"), "bell \\u{7} here");
        let long = "x".repeat(1000);
        assert_eq!(status_message(&long).chars().count(), STATUS_CHARS);
        assert_eq!(status_message(""), "");
    }
}
