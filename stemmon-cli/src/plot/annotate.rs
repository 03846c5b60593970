//! What is drawn over the series: the marked peak (a circle at an instant, a bar over
//! an interval, a dotted level where the timeline does not say when) and, where the peak
//! is the sampled one, the bound's highest step, each with its label.

use super::colour::{BOUND_COLOUR, PEAK_COLOUR};
use super::frame::{Frame, LEFT, RIGHT, WIDTH};
use super::mark::PeakKind;
use super::model::Chart;
use super::xml::{Px, Writer};

/// The marked peak (a circle at an instant, a bar over an interval, a dotted level where
/// the timeline does not say when) and, where the peak is the sampled one, the bound's
/// highest step.
pub(super) fn marks(w: &mut Writer, chart: &Chart, frame: &Frame) {
    if let Some(peak) = &chart.peak {
        let y = frame.y(peak.bytes as f64);
        w.open("g", &[("id", &"peak"), ("class", &peak_class(peak.kind))]);
        let x = match peak.when {
            Some((from, to)) if frame.x(to) - frame.x(from) >= 2.0 => {
                bar(w, frame.x(from), frame.x(to), y, PEAK_COLOUR, "");
                (frame.x(from) + frame.x(to)) / 2.0
            }
            Some((at, _)) => {
                let x = frame.x(at);
                w.empty(
                    "circle",
                    &[
                        ("cx", &Px(x)),
                        ("cy", &Px(y)),
                        ("r", &6),
                        ("fill", &"none"),
                        ("stroke", &PEAK_COLOUR),
                        ("stroke-width", &2.5),
                    ],
                );
                x
            }
            None => {
                w.empty(
                    "line",
                    &[
                        ("x1", &LEFT),
                        ("x2", &Px(WIDTH - RIGHT)),
                        ("y1", &Px(y)),
                        ("y2", &Px(y)),
                        ("stroke", &PEAK_COLOUR),
                        ("stroke-width", &1.5),
                        ("stroke-dasharray", &"2 3"),
                    ],
                );
                WIDTH - RIGHT - 10.0
            }
        };
        label(
            w,
            x,
            (y - 8.0).max(frame.top + 12.0),
            PEAK_COLOUR,
            &peak.label(),
        );
        w.close("g");
    }
    if let Some(bound) = &chart.bound {
        let y = frame.y(bound.bytes as f64);
        let (x0, x1) = (frame.x(bound.from), frame.x(bound.to));
        w.open("g", &[("id", &"bound-mark")]);
        bar(w, x0, x1, y, BOUND_COLOUR, "bound-bar");
        let text = format!(
            "bound ≤ {}{}",
            crate::format::bytes(Some(bound.bytes)),
            super::mark::during(bound.from, bound.to)
        );
        // Above the peak's label where the two would overlap.
        let peak_y = chart.peak.as_ref().map(|p| frame.y(p.bytes as f64));
        let y = match peak_y {
            Some(peak_y) if (peak_y - y).abs() < 16.0 => y.min(peak_y) - 22.0,
            _ => y - 6.0,
        };
        label(
            w,
            (x0 + x1) / 2.0,
            y.max(frame.top + 12.0),
            BOUND_COLOUR,
            &text,
        );
        w.close("g");
    }
}

/// The `class` of the peak's group: what the figure is (`exact` or `sampled`).
fn peak_class(kind: PeakKind) -> &'static str {
    match kind {
        PeakKind::Exact => "exact",
        PeakKind::Sampled => "sampled",
    }
}

/// A bar with end ticks from `x0` to `x1` at `y`: a figure known over an interval.
pub(super) fn bar(w: &mut Writer, x0: f64, x1: f64, y: f64, colour: &str, class: &str) {
    let path = format!(
        "M{},{} v8 M{},{} H{} M{},{} v8",
        Px(x0),
        Px(y - 4.0),
        Px(x0),
        Px(y),
        Px(x1),
        Px(x1),
        Px(y - 4.0)
    );
    w.empty(
        "path",
        &[
            ("class", &class),
            ("d", &path),
            ("fill", &"none"),
            ("stroke", &colour),
            ("stroke-width", &2.5),
        ],
    );
}

/// A bold label beside `x` (to its left on the right part of the picture).
fn label(w: &mut Writer, x: f64, y: f64, colour: &str, text: &str) {
    let (anchor, dx) = if x > WIDTH * 0.7 {
        ("end", -10.0)
    } else {
        ("start", 10.0)
    };
    w.text(
        "text",
        &[
            ("x", &Px(x + dx)),
            ("y", &Px(y)),
            ("text-anchor", &anchor),
            ("fill", &colour),
            ("font-weight", &"bold"),
        ],
        text,
    );
}
