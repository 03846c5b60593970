//! The picture's geometry: its size, where figures land ([`Frame`]), the round steps
//! of its axes, the time axis both panels share, and the corners of a step series.

use super::model::Chart;
use super::series::Step;
use super::xml::{Px, Writer};

pub(crate) const WIDTH: f64 = 1100.0;
pub(crate) const HEIGHT: f64 = 560.0;
pub(crate) const LEFT: f64 = 80.0;
pub(crate) const RIGHT: f64 = 30.0;
/// Title, legend and the stage lanes sit above the plot area.
pub(crate) const TOP: f64 = 110.0;
pub(crate) const BOTTOM: f64 = 50.0;
pub(crate) const LANE: f64 = 18.0;

/// Where figures land on the picture.
pub(super) struct Frame {
    pub(super) duration: f64,
    pub(super) top: f64,
    /// Bytes at the top of the plot area.
    pub(super) scale: f64,
    /// Bytes per axis unit, and its name.
    pub(super) unit: (f64, &'static str),
    pub(super) step: f64,
}

impl Frame {
    pub(super) fn of(chart: &Chart) -> Frame {
        let highest = chart.highest() as f64;
        let unit = if highest >= (2u64 << 30) as f64 {
            ((1u64 << 30) as f64, "GiB")
        } else {
            ((1u64 << 20) as f64, "MiB")
        };
        let step = nice_step(highest / unit.0 * 1.05, 6.0);
        let scale = ((highest / unit.0 * 1.05 / step).ceil() * step).max(step) * unit.0;
        Frame {
            duration: chart.duration,
            top: TOP + LANE * chart.lanes() as f64,
            scale,
            unit,
            step,
        }
    }

    pub(super) fn x(&self, seconds: f64) -> f64 {
        LEFT + seconds.clamp(0.0, self.duration) / self.duration * (WIDTH - LEFT - RIGHT)
    }

    pub(super) fn y(&self, bytes: f64) -> f64 {
        HEIGHT - BOTTOM - bytes.min(self.scale) / self.scale * (HEIGHT - BOTTOM - self.top)
    }
}

/// A round step for about `count` ticks over `range`: 1, 2 or 5 times a power of ten.
pub(super) fn nice_step(range: f64, count: f64) -> f64 {
    let raw = (range / count).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

pub(super) fn trim_number(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The time axis under a panel whose plot ends at `plot_bottom`: a tick and its
/// seconds at every round step, and the axis's name at `label_y`. The memory panel and
/// the CPU panel share it, on the same frame.
pub(super) fn time_axis(w: &mut Writer, frame: &Frame, plot_bottom: f64, label_y: f64) {
    let time_step = nice_step(frame.duration, 10.0);
    let mut t = 0.0;
    while t <= frame.duration * (1.0 + 1e-9) {
        let x = frame.x(t);
        w.empty(
            "line",
            &[
                ("x1", &Px(x)),
                ("x2", &Px(x)),
                ("y1", &Px(plot_bottom)),
                ("y2", &Px(plot_bottom + 5.0)),
                ("stroke", &"#888"),
            ],
        );
        w.text(
            "text",
            &[
                ("x", &Px(x)),
                ("y", &Px(plot_bottom + 18.0)),
                ("text-anchor", &"middle"),
            ],
            &format!("{}s", trim_number(t)),
        );
        t += time_step;
    }
    w.text(
        "text",
        &[
            ("x", &Px((LEFT + WIDTH - RIGHT) / 2.0)),
            ("y", &Px(label_y)),
            ("text-anchor", &"middle"),
            ("fill", &"#444"),
        ],
        "seconds since start",
    );
}

/// (seconds, value) corners of a step series: two a step, each step flat over the time
/// it covers ([`super::model`] says which), so consecutive steps meet in a vertical edge.
pub(super) fn corners<T: Copy>(steps: &[Step<T>], value: impl Fn(T) -> f64) -> Vec<(f64, f64)> {
    steps
        .iter()
        .flat_map(|s| [(s.from, value(s.value)), (s.to, value(s.value))])
        .collect()
}
