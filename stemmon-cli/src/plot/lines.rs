//! The series the plot draws beyond the tree's RSS and CPU, taken from the report
//! crate's table ([`SERIES`]): those in bytes are lines of the memory panel, and every
//! other unit is a panel of its own under it ([`super::panel`]). A new series of the
//! table is drawn without a change here.

use super::colour::{GPU_COLOUR, HEAP_COLOUR, LINE_COLOURS};
use stemmon::report::TimelinePoint;
use stemmon_report::fields::{Series as Declared, Unit, SERIES};

/// The series the picture has kept its own id and colour for, by key: `(key, id,
/// colour)`. Any other series is drawn with its key as id and a colour of
/// [`LINE_COLOURS`].
const NAMED: [(&str, &str, &str); 2] = [
    ("heap_live_bytes", "heap", HEAP_COLOUR),
    ("tree_gpu_bytes", "gpu", GPU_COLOUR),
];

/// A series of the table as drawn: a sampled figure of the timeline, drawn (in the
/// picture, its legend or panel title, and the read-out) when some point has it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Line {
    /// The SVG element's `id`.
    pub(crate) id: &'static str,
    /// Its name in the legend, the panel's title, the read-out and the caption.
    pub(crate) name: &'static str,
    /// The colour it is drawn in.
    pub(crate) colour: &'static str,
    /// The series it draws: its unit, its figure at a point, its peak's field.
    pub(crate) series: Declared,
}

impl Line {
    /// Its unit.
    pub(crate) fn unit(&self) -> Unit {
        self.series.unit
    }

    /// Its figure at a timeline point.
    pub(crate) fn of_point(&self, point: &TimelinePoint) -> Option<f64> {
        self.series.of_point(point)
    }
}

/// The lines of `table`, in its order: the named ones as the picture has always drawn
/// them, the others by key with the palette's colours in turn.
pub(crate) fn of(table: &[Declared]) -> Vec<Line> {
    let mut unnamed = 0;
    table
        .iter()
        .map(|series| {
            let (id, colour) = match NAMED.iter().find(|(key, ..)| *key == series.key) {
                Some(&(_, id, colour)) => (id, colour),
                None => {
                    unnamed += 1;
                    (series.key, LINE_COLOURS[(unnamed - 1) % LINE_COLOURS.len()])
                }
            };
            Line {
                id,
                name: series.label,
                colour,
                series: *series,
            }
        })
        .collect()
}

/// The lines of the report crate's table.
pub(crate) fn all() -> Vec<Line> {
    of(SERIES)
}

/// Whether `line` is drawn on the memory panel (its figures are bytes).
pub(crate) fn on_memory(line: &Line) -> bool {
    line.unit() == Unit::Bytes
}

/// The units of the panels under the memory panel: every unit but bytes that a line of
/// `lines` has, in the order of the first line of each.
pub(crate) fn panel_units(lines: &[Line]) -> Vec<Unit> {
    let mut units: Vec<Unit> = Vec::new();
    for line in lines.iter().filter(|l| !on_memory(l)) {
        if !units.contains(&line.unit()) {
            units.push(line.unit());
        }
    }
    units
}
