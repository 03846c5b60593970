//! `stemmon plot REPORT -o out.html|out.svg`: tree RSS over the run, split into the
//! parent and its children, the high-water bound, stage bands with their names, and the
//! peak marked.
//!
//! The picture is an SVG drawn here. The HTML page holds that same SVG inline with a
//! few lines of inline script for a hover read-out: no network, nothing to fetch.

use crate::format::{bytes, seconds};
use crate::{input, Failure};
use std::fmt::Write as _;
use std::path::PathBuf;
use stemmon::Report;

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
    let report = input::load(&args.report)?;
    let chart = Chart::new(&report).ok_or_else(|| {
        Failure::input(format!(
            "{}: nothing to plot: the report has no timeline and no samples",
            args.report.display()
        ))
    })?;
    let text = if svg_only {
        let mut svg = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        svg.push_str(&chart.svg(true));
        svg
    } else {
        chart.html()
    };
    input::write_file(&output, text.as_bytes())?;
    crate::print_out(&format!("wrote {}\n", output.display()));
    Ok(())
}

const WIDTH: f64 = 1100.0;
const HEIGHT: f64 = 560.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
/// Title, legend and the stage lanes sit above the plot area.
const TOP: f64 = 110.0;
const BOTTOM: f64 = 50.0;
const LANE: f64 = 18.0;

/// Colours, also what the Chromium test looks for in the screenshot.
pub(crate) const PARENT_COLOUR: &str = "#4c72b0";
pub(crate) const CHILDREN_COLOUR: &str = "#dd8452";
const TREE_COLOUR: &str = "#222222";
const BOUND_COLOUR: &str = "#c44e52";
const PEAK_COLOUR: &str = "#8b0000";
const BAND_COLOURS: [&str; 2] = ["#eef1f6", "#f7f3ea"];
const LANE_COLOURS: [&str; 6] = [
    "#8da0cb", "#66c2a5", "#e78ac3", "#a6d854", "#ffd92f", "#b3b3b3",
];

/// One point of the series: [start, end] seconds and the maxima over it.
#[derive(Clone, Copy, Debug)]
struct Point {
    start: f64,
    end: f64,
    tree: Option<u64>,
    parent: Option<u64>,
    children: Option<u64>,
    bound: Option<u64>,
}

/// A stage call drawn as a band: its lane (depth), name and interval.
#[derive(Clone, Debug)]
struct Band {
    depth: usize,
    name: String,
    path: String,
    start: f64,
    end: f64,
}

struct Chart {
    title: String,
    subtitle: String,
    points: Vec<Point>,
    bands: Vec<Band>,
    peak: Option<(f64, u64, String)>,
    duration: f64,
    top: f64,
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A round step for about `count` ticks over `range`: 1, 2 or 5 times a power of ten.
fn nice_step(range: f64, count: f64) -> f64 {
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

fn depth_of(report: &Report, stage_id: u32) -> usize {
    let mut depth = 0;
    let mut parent = report
        .stages
        .get(stage_id as usize)
        .and_then(|s| s.parent_id);
    while let Some(id) = parent {
        depth += 1;
        if depth > report.stages.len() {
            break;
        }
        parent = report.stages.get(id as usize).and_then(|s| s.parent_id);
    }
    depth
}

fn points(report: &Report) -> Vec<Point> {
    if !report.timeline.is_empty() {
        return report
            .timeline
            .iter()
            .map(|p| Point {
                start: p.elapsed_seconds,
                end: p.end_seconds.max(p.elapsed_seconds),
                tree: p.tree_rss_bytes,
                parent: p.parent_rss_bytes,
                children: p.children_rss_bytes,
                bound: p.tree_rss_bound_bytes,
            })
            .collect();
    }
    // A 0.1 report: its raw samples, if it kept any.
    report
        .recent_samples
        .iter()
        .map(|s| Point {
            start: s.elapsed_seconds,
            end: s.elapsed_seconds,
            tree: s.tree_rss_bytes,
            parent: s.parent_rss_bytes,
            children: s.children_rss_bytes,
            bound: None,
        })
        .collect()
}

/// Stage calls to draw, two lanes deep: kept spans, or (0.1) stages entered once.
fn bands(report: &Report) -> Vec<Band> {
    const MAX_DEPTH: usize = 2;
    let mut bands: Vec<Band> = Vec::new();
    let calls: Vec<(u32, f64, f64)> = if report.spans.is_empty() {
        report
            .stages
            .iter()
            .filter(|s| s.calls == 1)
            .map(|s| (s.id, s.start_seconds, s.wall_seconds))
            .collect()
    } else {
        report
            .spans
            .iter()
            .map(|s| (s.stage_id, s.start_seconds, s.wall_seconds))
            .collect()
    };
    for (id, start, wall) in calls {
        let Some(stage) = report.stages.get(id as usize) else {
            continue;
        };
        let depth = depth_of(report, id);
        if depth >= MAX_DEPTH {
            continue;
        }
        let end = start + wall.max(0.0);
        // Calls of one path on several threads, or back to back: one band.
        if let Some(last) = bands
            .iter_mut()
            .rev()
            .find(|b| b.path == stage.path && b.end >= start && b.start <= end)
        {
            last.start = last.start.min(start);
            last.end = last.end.max(end);
            continue;
        }
        bands.push(Band {
            depth,
            name: stage.name.clone(),
            path: stage.path.clone(),
            start,
            end,
        });
    }
    bands.sort_by(|a, b| a.start.total_cmp(&b.start));
    bands
}

impl Chart {
    fn new(report: &Report) -> Option<Chart> {
        let points = points(report);
        if points.is_empty() {
            return None;
        }
        let bands = bands(report);
        let lanes = bands.iter().map(|b| b.depth + 1).max().unwrap_or(0);
        let last = points.iter().map(|p| p.end).fold(0.0, f64::max);
        let band_end = bands.iter().map(|b| b.end).fold(0.0, f64::max);
        let duration = report.wall_seconds.max(last).max(band_end).max(1e-3);
        let peak = match (
            report.peaks.peak_tree_rss_bytes,
            report.peak_rss_elapsed_seconds,
        ) {
            (Some(bytes), Some(at)) => Some((
                at,
                bytes,
                report
                    .peak_rss_stage
                    .clone()
                    .unwrap_or_else(|| "workflow".into()),
            )),
            _ => points
                .iter()
                .filter_map(|p| p.tree.map(|t| (p.start, t)))
                .max_by_key(|(_, t)| *t)
                .map(|(at, t)| (at, t, "workflow".to_owned())),
        };
        let title = match &report.command {
            Some(argv) => format!("stemmon: {}", crate::format::command_line(argv)),
            None => format!("stemmon: pid {}", report.pid),
        };
        let mut subtitle = format!("wall {}", seconds(report.wall_seconds));
        if let Some((at, bytes_at_peak, stage)) = &peak {
            let _ = write!(
                subtitle,
                "; peak tree RSS {} in {stage} at {}",
                bytes(Some(*bytes_at_peak)),
                seconds(*at)
            );
        }
        if let Some(bound) = report.high_water.peak_tree_rss_bound_bytes {
            let _ = write!(subtitle, "; high-water bound {}", bytes(Some(bound)));
        }
        if !report.host.is_empty() {
            let _ = write!(subtitle, "; host {}", report.host);
        }
        Some(Chart {
            title,
            subtitle,
            points,
            bands,
            peak,
            duration,
            top: TOP + LANE * lanes as f64,
        })
    }

    fn y_max(&self) -> u64 {
        let highest = self
            .points
            .iter()
            .flat_map(|p| {
                [
                    p.tree,
                    p.bound,
                    p.parent.zip(p.children).map(|(a, b)| a + b),
                ]
            })
            .flatten()
            .chain(self.peak.as_ref().map(|p| p.1))
            .max()
            .unwrap_or(0);
        highest.max(1 << 20)
    }

    fn x(&self, seconds: f64) -> f64 {
        LEFT + seconds.clamp(0.0, self.duration) / self.duration * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, bytes: f64, scale: f64) -> f64 {
        HEIGHT - BOTTOM - bytes / scale * (HEIGHT - BOTTOM - self.top)
    }

    /// The whole picture; `standalone` adds the XML namespace for a file of its own.
    fn svg(&self, standalone: bool) -> String {
        let mut s = String::new();
        let (unit, unit_name) = if self.y_max() >= 2 << 30 {
            ((1u64 << 30) as f64, "GiB")
        } else {
            ((1u64 << 20) as f64, "MiB")
        };
        let step = nice_step(self.y_max() as f64 / unit * 1.05, 6.0);
        let scale = ((self.y_max() as f64 / unit * 1.05 / step).ceil() * step).max(step) * unit;
        let namespace = if standalone {
            " xmlns=\"http://www.w3.org/2000/svg\""
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<svg{namespace} id=\"chart\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
             viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\" \
             role=\"img\" aria-label=\"{}\">",
            escape(&self.title)
        );
        let _ = writeln!(
            s,
            "<rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"#ffffff\"/>"
        );
        let _ = writeln!(
            s,
            "<text x=\"{LEFT}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}</text>",
            escape(&self.title)
        );
        let _ = writeln!(
            s,
            "<text x=\"{LEFT}\" y=\"44\" fill=\"#444\">{}</text>",
            escape(&self.subtitle)
        );
        self.legend(&mut s);
        let (plot_top, plot_bottom) = (self.top, HEIGHT - BOTTOM);

        // Stage bands: full height for the outermost stages, then a lane per depth.
        for (index, band) in self.bands.iter().filter(|b| b.depth == 0).enumerate() {
            let (x0, x1) = (self.x(band.start), self.x(band.end));
            let _ = writeln!(
                s,
                "<rect class=\"band\" x=\"{x0:.1}\" y=\"{plot_top:.1}\" width=\"{:.1}\" \
                 height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
                (x1 - x0).max(1.0),
                plot_bottom - plot_top,
                BAND_COLOURS[index % 2],
                escape(&band.path)
            );
        }
        let mut colour_of: Vec<&str> = Vec::new();
        for band in &self.bands {
            let (x0, x1) = (self.x(band.start), self.x(band.end));
            let lane_y = TOP + LANE * band.depth as f64 - 4.0;
            let colour_index = match colour_of.iter().position(|p| *p == band.path) {
                Some(i) => i,
                None => {
                    colour_of.push(&band.path);
                    colour_of.len() - 1
                }
            };
            let _ = writeln!(
                s,
                "<rect class=\"lane\" x=\"{x0:.1}\" y=\"{lane_y:.1}\" width=\"{:.1}\" \
                 height=\"{:.1}\" fill=\"{}\" stroke=\"#ffffff\"><title>{} ({})</title></rect>",
                (x1 - x0).max(1.0),
                LANE - 2.0,
                LANE_COLOURS[colour_index % LANE_COLOURS.len()],
                escape(&band.path),
                seconds(band.end - band.start)
            );
            // A name only where it fits (about 7 px a character).
            let room = ((x1 - x0 - 6.0) / 7.0).floor();
            if room >= 2.0 {
                let mut name: String = band.name.chars().take(room as usize).collect();
                if name.len() < band.name.len() {
                    name.pop();
                    name.push('…');
                }
                let _ = writeln!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
                    x0 + 3.0,
                    lane_y + LANE - 6.0,
                    escape(&name)
                );
            }
        }

        // Grid and axes.
        let mut tick = 0.0;
        while tick <= scale / unit + 1e-9 {
            let y = self.y(tick * unit, scale);
            let _ = writeln!(
                s,
                "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#dddddd\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} {unit_name}</text>",
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                trim_number(tick)
            );
            tick += step;
        }
        let time_step = nice_step(self.duration, 10.0);
        let mut t = 0.0;
        while t <= self.duration + 1e-9 {
            let x = self.x(t);
            let _ = writeln!(
                s,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{plot_bottom}\" y2=\"{:.1}\" stroke=\"#888\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}s</text>",
                plot_bottom + 5.0,
                plot_bottom + 18.0,
                trim_number(t)
            );
            t += time_step;
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">seconds since start</text>",
            (LEFT + WIDTH - RIGHT) / 2.0,
            HEIGHT - 10.0
        );

        // Parent, then children stacked on it.
        let parent: Vec<(f64, f64)> = self.steps(|p| p.parent.map(|v| v as f64));
        let stacked: Vec<(f64, f64)> = self.steps(|p| match (p.parent, p.children) {
            (Some(a), Some(b)) => Some((a + b) as f64),
            (a, b) => a.or(b).map(|v| v as f64),
        });
        self.area(
            &mut s,
            &stacked,
            &parent,
            CHILDREN_COLOUR,
            "children",
            scale,
        );
        let floor: Vec<(f64, f64)> = parent.iter().map(|(t, _)| (*t, 0.0)).collect();
        self.area(&mut s, &parent, &floor, PARENT_COLOUR, "parent", scale);
        let tree = self.steps(|p| p.tree.map(|v| v as f64));
        self.line(&mut s, &tree, TREE_COLOUR, "", "tree", scale);
        let bound = self.steps(|p| p.bound.map(|v| v as f64));
        self.line(
            &mut s,
            &bound,
            BOUND_COLOUR,
            " stroke-dasharray=\"6 4\"",
            "bound",
            scale,
        );

        if let Some((at, peak, stage)) = &self.peak {
            let (x, y) = (self.x(*at), self.y(*peak as f64, scale));
            let label = format!("peak {} in {stage} at {}", bytes(Some(*peak)), seconds(*at));
            let anchor = if x > WIDTH * 0.7 { "end" } else { "start" };
            let dx = if anchor == "end" { -10.0 } else { 10.0 };
            let _ = writeln!(
                s,
                "<g id=\"peak\"><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"6\" fill=\"none\" \
                 stroke=\"{PEAK_COLOUR}\" stroke-width=\"2.5\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"{PEAK_COLOUR}\" \
                 font-weight=\"bold\">{}</text></g>",
                x + dx,
                (y - 8.0).max(self.top + 12.0),
                escape(&label)
            );
        }
        let _ = writeln!(
            s,
            "<rect x=\"{LEFT}\" y=\"{plot_top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#888\"/>",
            WIDTH - LEFT - RIGHT,
            plot_bottom - plot_top
        );
        s.push_str("</svg>\n");
        s
    }

    fn legend(&self, s: &mut String) {
        let items: [(&str, &str, &str); 4] = [
            ("parent RSS", PARENT_COLOUR, "area"),
            ("children RSS", CHILDREN_COLOUR, "area"),
            ("tree RSS", TREE_COLOUR, "line"),
            ("high-water bound", BOUND_COLOUR, "dash"),
        ];
        let mut x = LEFT;
        for (name, colour, kind) in items {
            match kind {
                "area" => {
                    let _ = write!(
                        s,
                        "<rect x=\"{x}\" y=\"60\" width=\"14\" height=\"12\" fill=\"{colour}\"/>"
                    );
                }
                _ => {
                    let dash = if kind == "dash" {
                        " stroke-dasharray=\"6 4\""
                    } else {
                        ""
                    };
                    let _ = write!(
                        s,
                        "<line x1=\"{x}\" x2=\"{}\" y1=\"66\" y2=\"66\" stroke=\"{colour}\" \
                         stroke-width=\"2\"{dash}/>",
                        x + 14.0
                    );
                }
            }
            let _ = writeln!(s, "<text x=\"{}\" y=\"71\">{name}</text>", x + 20.0);
            x += 30.0 + name.len() as f64 * 7.0;
        }
        let _ = writeln!(
            s,
            "<circle cx=\"{}\" cy=\"66\" r=\"5\" fill=\"none\" stroke=\"{PEAK_COLOUR}\" stroke-width=\"2\"/>\
             <text x=\"{}\" y=\"71\">sampled peak</text>",
            x + 6.0,
            x + 16.0
        );
        if !self.bands.is_empty() {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#444\">stages</text>",
                LEFT - 6.0,
                TOP + LANE - 8.0
            );
        }
    }

    /// (seconds, value) corners of a step series: each point holds its maximum over
    /// its interval. A point without the reading breaks nothing: it is skipped.
    fn steps(&self, value: impl Fn(&Point) -> Option<f64>) -> Vec<(f64, f64)> {
        let mut out = Vec::with_capacity(self.points.len() * 2);
        for point in &self.points {
            if let Some(v) = value(point) {
                out.push((point.start, v));
                if point.end > point.start {
                    out.push((point.end, v));
                }
            }
        }
        out
    }

    fn area(
        &self,
        s: &mut String,
        upper: &[(f64, f64)],
        lower: &[(f64, f64)],
        colour: &str,
        id: &str,
        scale: f64,
    ) {
        if upper.is_empty() {
            return;
        }
        let mut path = String::new();
        for (i, (t, v)) in upper.iter().enumerate() {
            let _ = write!(
                path,
                "{}{:.1},{:.1} ",
                if i == 0 { 'M' } else { 'L' },
                self.x(*t),
                self.y(*v, scale)
            );
        }
        let lower_or_floor: Vec<(f64, f64)> = if lower.len() == upper.len() {
            lower.to_vec()
        } else {
            upper.iter().map(|(t, _)| (*t, 0.0)).collect()
        };
        for (t, v) in lower_or_floor.iter().rev() {
            let _ = write!(path, "L{:.1},{:.1} ", self.x(*t), self.y(*v, scale));
        }
        let _ = writeln!(
            s,
            "<path id=\"{id}\" d=\"{}Z\" fill=\"{colour}\" stroke=\"none\"/>",
            path.trim_end()
        );
    }

    fn line(
        &self,
        s: &mut String,
        series: &[(f64, f64)],
        colour: &str,
        extra: &str,
        id: &str,
        scale: f64,
    ) {
        if series.is_empty() {
            return;
        }
        let points: Vec<String> = series
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", self.x(*t), self.y(*v, scale)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline id=\"{id}\" points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.8\"{extra}/>",
            points.join(" ")
        );
    }

    /// The page: the chart inline, a read-out that follows the pointer, no network.
    fn html(&self) -> String {
        let data: Vec<String> = self
            .points
            .iter()
            .map(|p| {
                let n = |v: Option<u64>| v.map_or("null".to_owned(), |v| v.to_string());
                format!(
                    "[{},{},{},{},{},{}]",
                    p.start,
                    p.end,
                    n(p.tree),
                    n(p.parent),
                    n(p.children),
                    n(p.bound)
                )
            })
            .collect();
        let bands: Vec<String> = self
            .bands
            .iter()
            .map(|b| {
                format!(
                    "[{},{},{}]",
                    b.start,
                    b.end,
                    serde_json::to_string(&b.path).unwrap_or_else(|_| "\"\"".into())
                )
            })
            .collect();
        // `</` cannot occur inside the script: stage names are JSON-escaped and `<` made `\u003c`.
        let data = format!(
            "{{\"points\":[{}],\"bands\":[{}],\"left\":{LEFT},\"right\":{},\"duration\":{}}}",
            data.join(","),
            bands.join(","),
            WIDTH - RIGHT,
            self.duration
        )
        .replace('<', "\\u003c");
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <link rel=\"icon\" href=\"data:,\">\n<title>{title}</title>\n<style>\n{STYLE}</style>\n\
             </head>\n<body>\n<main>\n<div id=\"frame\">\n{svg}<div id=\"readout\" hidden></div>\n\
             </div>\n<p class=\"note\">Each point is the highest reading over its interval; \
             the dashed line is the kernel's high-water bound, which no spike between samples \
             escapes. Hover for values.</p>\n</main>\n\
             <script id=\"data\" type=\"application/json\">{data}</script>\n\
             <script>\n{SCRIPT}</script>\n</body>\n</html>\n",
            title = escape(&self.title),
            svg = self.svg(false),
        )
    }
}

fn trim_number(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

const STYLE: &str = "body { margin: 16px; font-family: sans-serif; color: #222; background: #fff; }
#frame { position: relative; width: 1100px; }
#readout { position: absolute; pointer-events: none; background: rgba(255,255,255,0.95);
  border: 1px solid #999; padding: 6px 8px; font-size: 12px; white-space: pre; }
.note { color: #555; font-size: 13px; max-width: 1100px; }
";

const SCRIPT: &str = r##""use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const svg = document.getElementById("chart");
  const readout = document.getElementById("readout");
  const cursor = document.createElementNS("http://www.w3.org/2000/svg", "line");
  cursor.setAttribute("stroke", "#555");
  cursor.setAttribute("visibility", "hidden");
  cursor.setAttribute("y1", "0");
  cursor.setAttribute("y2", svg.getAttribute("height"));
  svg.appendChild(cursor);
  const mib = (v) => (v === null ? "-" : (v / 1048576).toFixed(1) + " MiB");
  svg.addEventListener("mousemove", function (event) {
    const box = svg.getBoundingClientRect();
    const x = event.clientX - box.left;
    const t = (x - data.left) / (data.right - data.left) * data.duration;
    if (t < 0 || t > data.duration || data.points.length === 0) {
      readout.hidden = true;
      cursor.setAttribute("visibility", "hidden");
      return;
    }
    let best = data.points[0];
    for (const p of data.points) {
      if (Math.abs((p[0] + p[1]) / 2 - t) < Math.abs((best[0] + best[1]) / 2 - t)) best = p;
    }
    const stages = data.bands.filter((b) => b[0] <= t && t <= b[1]).map((b) => b[2]);
    readout.textContent = "t = " + best[0].toFixed(2) + " s\ntree " + mib(best[2]) +
      "\nparent " + mib(best[3]) + "\nchildren " + mib(best[4]) + "\nbound " + mib(best[5]) +
      "\nstage " + (stages.length ? stages.join(", ") : "workflow");
    readout.style.left = Math.min(x + 14, box.width - 180) + "px";
    readout.style.top = (event.clientY - box.top + 14) + "px";
    readout.hidden = false;
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    cursor.setAttribute("visibility", "visible");
  });
  svg.addEventListener("mouseleave", function () {
    readout.hidden = true;
    cursor.setAttribute("visibility", "hidden");
  });
  document.body.dataset.ready = String(data.points.length);
})();
"##;
