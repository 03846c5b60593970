//! XML written safely: every attribute value and text goes through [`escape`], so markup
//! characters become entities and control characters (invalid in XML 1.0) are spelled
//! out as `\n`, `\u{1b}`. The SVG stays well-formed whatever a report's names hold.

use std::fmt::{Display, Write as _};

/// `text` as XML character data or an attribute value: markup escaped, and no character
/// XML 1.0 forbids (control characters are spelled out, `U+FFFE`/`U+FFFF` replaced).
pub(crate) fn escape(text: &str) -> String {
    let clean = crate::format::clean(text);
    let mut out = String::with_capacity(clean.len());
    for c in clean.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate, to a tenth of a pixel.
pub(crate) struct Px(pub(crate) f64);

impl Display for Px {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.1}", self.0)
    }
}

/// Writes elements with escaped attributes and text.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) out: String,
}

pub(crate) type Attributes<'a> = &'a [(&'a str, &'a dyn Display)];

impl Writer {
    fn start(&mut self, name: &str, attributes: Attributes<'_>) {
        let _ = write!(self.out, "<{name}");
        for (key, value) in attributes {
            let _ = write!(self.out, " {key}=\"{}\"", escape(&value.to_string()));
        }
    }

    /// `<name a="..."/>`
    pub(crate) fn empty(&mut self, name: &str, attributes: Attributes<'_>) {
        self.start(name, attributes);
        self.out.push_str("/>\n");
    }

    /// `<name a="...">text</name>`
    pub(crate) fn text(&mut self, name: &str, attributes: Attributes<'_>, text: &str) {
        self.start(name, attributes);
        let _ = writeln!(self.out, ">{}</{name}>", escape(text));
    }

    /// `<name a="...">`, closed by [`Writer::close`].
    pub(crate) fn open(&mut self, name: &str, attributes: Attributes<'_>) {
        self.start(name, attributes);
        self.out.push('>');
    }

    pub(crate) fn close(&mut self, name: &str) {
        let _ = writeln!(self.out, "</{name}>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_a_report_is_escaped_and_holds_no_character_xml_forbids() {
        let escaped = escape("a<b>&\"c'\n\u{1b}[31m\u{0}\u{fffe}");
        assert_eq!(
            escaped,
            "a&lt;b&gt;&amp;&quot;c&#39;\\n\\u{1b}[31m\\u{0}\u{fffd}"
        );
    }
}
