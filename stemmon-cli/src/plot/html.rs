//! The page: the chart's SVG inline, its data as JSON for the hover read-out, the script
//! and the style inlined from `plot.js` and `plot.css`. No network: nothing to fetch.

use super::model::Chart;
use super::xml::escape;
use super::{frame, svg};
use serde::Serialize;

const STYLE: &str = include_str!("plot.css");
const SCRIPT: &str = include_str!("plot.js");

/// What the lines mean, under the picture (the rules of [`super::model`]).
const NOTE: &str = "Memory is sampled: each reading is drawn where it was taken (a merged \
    point's maximum over the span it stands for), and between two readings the line stays at \
    the lower one. The dashed line is the kernel's high-water bound, which no spike between \
    samples escapes, except where the title says that processes ended unseen (it is then \
    only at least the peak); it and CPU cover the time since their previous reading. The marked peak \
    is the exact one where the process was the whole tree, else the sampled one, with the \
    bound above it. Hover for values, or open the page at #t=SECONDS.";

/// What the script reads: the chart, and where its time axis lies on the picture.
#[derive(Serialize)]
struct Data<'a> {
    #[serde(flatten)]
    chart: &'a Chart,
    left: f64,
    right: f64,
}

/// The chart's data as JSON that can sit inside `<script>`: no `<`, `>` or `&` (so no
/// `</script>` nor `<!--`), each written as its `\u` escape, which JSON reads back the same.
fn script_json(chart: &Chart) -> String {
    let data = Data {
        chart,
        left: frame::LEFT,
        right: frame::WIDTH - frame::RIGHT,
    };
    // A tree of plain numbers, strings and lists: it always serialises.
    let json = serde_json::to_string(&data).unwrap_or_else(|_| "{}".into());
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

pub(crate) fn render(chart: &Chart) -> String {
    let mut page = String::with_capacity(64 * 1024);
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str("<link rel=\"icon\" href=\"data:,\">\n");
    page.push_str(&format!("<title>{}</title>\n", escape(&chart.title)));
    page.push_str(&format!("<style>\n{STYLE}</style>\n"));
    page.push_str("</head>\n<body>\n<main>\n<div id=\"frame\">\n");
    page.push_str(&svg::render(chart, false));
    page.push_str("<div id=\"readout\" hidden></div>\n</div>\n");
    page.push_str(&format!("<p class=\"note\">{}</p>\n", escape(NOTE)));
    if chart.has_cpu() {
        page.push_str(
            "<p class=\"note\">The lower panel is the whole tree's CPU in cores (user plus \
             system time over wall time): near 0 while it waits, 4 while four cores compute.</p>\n",
        );
    }
    if !chart.series.panels.is_empty() {
        let titles: Vec<String> = chart
            .series
            .panels
            .iter()
            .map(super::panel::title)
            .collect();
        page.push_str(&format!(
            "<p class=\"note\">{}</p>\n",
            escape(&format!(
                "The panels under it, one a unit: {}. Each reading is drawn as memory is \
                 (a point's maximum over its span, the lower one between two readings).",
                titles.join("; ")
            ))
        ));
    }
    page.push_str("</main>\n");
    page.push_str(&format!(
        "<script id=\"data\" type=\"application/json\">{}</script>\n",
        script_json(chart)
    ));
    page.push_str(&format!("<script>\n{SCRIPT}</script>\n</body>\n</html>\n"));
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::model::Band;
    use crate::plot::point::Point;

    #[test]
    fn the_data_cannot_close_its_script_and_reads_back() {
        let chart = Chart::of_points(
            vec![Point {
                start: 0.0,
                end: 1.0,
                tree: Some(1),
                parent: None,
                children: None,
                bound: None,
                lines: Vec::new(),
                others: Vec::new(),
                cpu: None,
            }],
            vec![Band {
                depth: 0,
                name: "</script><!--".into(),
                path: "a&b</script>".into(),
                start: 0.0,
                end: 1.0,
            }],
            1.0,
        );
        let json = script_json(&chart);
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["bands"][0]["path"], "a&b</script>");
        assert_eq!(value["points"][0]["parent"], serde_json::Value::Null);
        assert_eq!(value["right"], frame::WIDTH - frame::RIGHT);
        let page = render(&chart);
        assert_eq!(
            page.matches("</script>").count(),
            2,
            "only the two closing tags"
        );
        assert!(
            !page.contains("https://") && !page.contains(" src="),
            "nothing to fetch"
        );
    }

    /// The JSON the page's script reads, as it is in the page.
    fn data_of(page: &str) -> serde_json::Value {
        let start = page
            .find("<script id=\"data\" type=\"application/json\">")
            .unwrap();
        let json = &page[start..];
        let json = &json[json.find('>').unwrap() + 1..json.find("</script>").unwrap()];
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_page_s_data_holds_the_steps_the_picture_draws_and_the_exact_peak() {
        let chart = Chart::new(&crate::plot::model::tests::spike_report()).unwrap();
        let data = data_of(&render(&chart));
        let mib = f64::from(1 << 20);
        let step = |series: &str, index: usize| -> Vec<f64> {
            data["series"][series][index]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        };
        // [from, to, value, point]: the spike read at 1.05 s is drawn there, and the gap
        // to the next reading at the lower of the two ...
        assert_eq!(step("tree", 2), [1.05, 1.05, 300.0 * mib, 1.0]);
        assert_eq!(
            step("tree", 3),
            [1.05, 2.03, (33u64 * (1 << 20) / 10) as f64, 2.0]
        );
        // ... the bound and CPU cover the interval since the previous reading.
        assert_eq!(step("bound", 2), [1.05, 2.03, 320.0 * mib, 2.0]);
        assert_eq!(step("cpu", 0), [0.05, 1.05, 4.0, 1.0]);
        assert_eq!(data["peak"]["kind"], "exact");
        assert_eq!(data["peak"]["bytes"], 320u64 << 20);
        assert_eq!(data["peak"]["when"], serde_json::json!([1.05, 2.03]));
    }
}
