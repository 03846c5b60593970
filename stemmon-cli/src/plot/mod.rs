//! `stemmon plot REPORT -o out.html|out.svg`: tree RSS over the run, split into the
//! parent and its children, the high-water bound, stage bands with their names, and the
//! peak marked (the exact one where it is known); the series of the report crate's table
//! ([`lines`]) in bytes on the memory panel where the timeline has them (the live heap of
//! stemmon 0.3, the tree's GPU memory of 0.4), a CPU panel (cores over time) under it,
//! and a panel for each other unit the table's series and the timeline have (open
//! descriptors, memory pressure), on the same time axis and stage bands ([`panel`]).
//!
//! [`model`] takes what to show from the report once, and says when each series is
//! drawn; [`svg`] draws it (with [`xml`]'s escaping writer); [`html`] puts that same SVG
//! in a page with the data as JSON and an inline script (`plot.js`) for a hover
//! read-out drawn from the same steps: no network, nothing to fetch.

mod annotate;
mod colour;
mod cpu;
mod frame;
mod html;
mod lines;
mod mark;
mod model;
mod panel;
mod point;
mod series;
mod svg;
mod xml;

use crate::{input, Failure};
use std::path::PathBuf;

/// Draws a report's memory over time: an HTML page (hover for values) or a static SVG,
/// chosen by the output's extension.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The report to plot. It needs a `timeline` (written by stemmon 0.2), or raw samples.
    report: PathBuf,
    /// Where to write the picture: `*.html` (default `REPORT.html`) or `*.svg`.
    #[arg(short, long, value_name = "OUT.html|OUT.svg")]
    output: Option<PathBuf>,
}

pub(crate) fn plot(args: &Args) -> Result<(), Failure> {
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| args.report.with_extension("html"));
    let extension = output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let svg_only = match extension.as_deref() {
        Some("svg") => true,
        Some("html" | "htm") => false,
        _ => {
            return Err(Failure::input(format!(
                "{}: the output must end in .html or .svg",
                output.display()
            )))
        }
    };
    input::not_an_input(&output, &[&args.report])?;
    let report = input::load(&args.report)?.report;
    let chart = model::Chart::new(&report).ok_or_else(|| {
        Failure::input(format!(
            "{}: nothing to plot: the report has no timeline and no samples",
            args.report.display()
        ))
    })?;
    let text = if svg_only {
        svg::render(&chart, true)
    } else {
        html::render(&chart)
    };
    input::write_file(&output, text.as_bytes())?;
    crate::print_out(&format!("wrote {}\n", output.display()));
    Ok(())
}
