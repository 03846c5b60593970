//! The page: the chart's SVG inline, its data as JSON for the hover read-out, the script
//! and the style inlined from `plot.js` and `plot.css`. No network: nothing to fetch.

use super::model::Chart;
use super::svg;
use super::xml::escape;
use serde::Serialize;

const STYLE: &str = include_str!("plot.css");
const SCRIPT: &str = include_str!("plot.js");

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
        left: svg::LEFT,
        right: svg::WIDTH - svg::RIGHT,
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
    page.push_str(
        "<p class=\"note\">Each point is the highest reading over its interval; the dashed \
         line is the kernel's high-water bound, which no spike between samples escapes. \
         Hover for values.</p>\n",
    );
    if chart.has_cpu() {
        page.push_str(
            "<p class=\"note\">The lower panel is the whole tree's CPU in cores (user plus \
             system time over wall time): near 0 while it waits, 4 while four cores compute.</p>\n",
        );
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
    use crate::plot::model::{Band, Point};

    #[test]
    fn the_data_cannot_close_its_script_and_reads_back() {
        let chart = Chart {
            title: "t".into(),
            subtitle: String::new(),
            duration: 1.0,
            points: vec![Point {
                start: 0.0,
                end: 1.0,
                tree: Some(1),
                parent: None,
                children: None,
                bound: None,
                heap: None,
                cpu: None,
            }],
            bands: vec![Band {
                depth: 0,
                name: "</script><!--".into(),
                path: "a&b</script>".into(),
                start: 0.0,
                end: 1.0,
            }],
            peak: None,
        };
        let json = script_json(&chart);
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["bands"][0]["path"], "a&b</script>");
        assert_eq!(value["points"][0]["parent"], serde_json::Value::Null);
        assert_eq!(value["right"], svg::WIDTH - svg::RIGHT);
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
}
