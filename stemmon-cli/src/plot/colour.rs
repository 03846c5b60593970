//! The picture's colours, also what the Chromium test looks for in the screenshot.

pub(crate) const PARENT_COLOUR: &str = "#4c72b0";
pub(crate) const CHILDREN_COLOUR: &str = "#dd8452";
pub(crate) const TREE_COLOUR: &str = "#222222";
pub(crate) const HEAP_COLOUR: &str = "#2ca02c";
pub(crate) const GPU_COLOUR: &str = "#17becf";
pub(crate) const BOUND_COLOUR: &str = "#c44e52";
pub(crate) const PEAK_COLOUR: &str = "#8b0000";
pub(crate) const BAND_COLOURS: [&str; 2] = ["#eef1f6", "#f7f3ea"];
pub(crate) const LANE_COLOURS: [&str; 6] = [
    "#8da0cb", "#66c2a5", "#e78ac3", "#a6d854", "#ffd92f", "#b3b3b3",
];
/// The colours of the table's series the picture names no colour for, in turn.
pub(crate) const LINE_COLOURS: [&str; 4] = ["#937860", "#da8bc3", "#8c8c8c", "#ccb974"];
