//! The one table renderer and HTML escaping; the numbers in the cells come
//! from `bloatlab_model::fmt` (re-exported here), the one number formatter.
pub use bloatlab_model::fmt::*;

/// How [`table`] draws rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Aligned columns, the first left aligned, the others right aligned,
    /// a rule under the header.
    Text,
    /// A markdown pipe table padded for the terminal: the same text reads
    /// well printed and renders as a table when saved as .md.
    Markdown,
}

/// The same rows as a scrolling HTML table of `class` (the report's
/// tables): `rows[0]` is the header, every cell escaped.
pub fn html_table(class: &str, rows: &[Vec<String>]) -> String {
    use std::fmt::Write;
    let mut s = format!("<div class=\"scroll\"><table class=\"{}\"><thead><tr>", esc(class));
    for h in rows.first().into_iter().flatten() {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for row in rows.iter().skip(1) {
        s.push_str("<tr>");
        for c in row {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>\n");
    s
}

/// The one table renderer: `rows[0]` is the header. Short rows are padded
/// with empty cells.
pub fn table(rows: &[Vec<String>], style: Style) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let ncol = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut w = vec![0usize; ncol];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let cell = |r: &Vec<String>, i: usize| r.get(i).map(String::as_str).unwrap_or("").to_string();
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (i, &wi) in w.iter().enumerate() {
            let c = cell(r, i);
            let pad = " ".repeat(wi - c.chars().count());
            match style {
                Style::Text if i == 0 => line.push_str(&format!("{c}{pad}")),
                Style::Text => line.push_str(&format!("  {pad}{c}")),
                Style::Markdown => line.push_str(&format!("| {c}{pad} ")),
            }
        }
        match style {
            Style::Text => out.push_str(line.trim_end()),
            Style::Markdown => out.push_str(&format!("{line}|")),
        }
        out.push('\n');
        if ri == 0 {
            match style {
                Style::Text => {
                    out.push_str(&"-".repeat(w.iter().sum::<usize>() + 2 * ncol.saturating_sub(1)))
                }
                Style::Markdown => out.push_str(&format!(
                    "|{}|",
                    w.iter()
                        .map(|&k| format!(" {} ", "-".repeat(k)))
                        .collect::<Vec<_>>()
                        .join("|")
                )),
            }
            out.push('\n');
        }
    }
    out
}

/// [`table`] in [`Style::Text`].
pub fn text_table(rows: &[Vec<String>]) -> String {
    table(rows, Style::Text)
}

/// [`table`] in [`Style::Markdown`] with a separate header.
pub fn md_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut all = vec![headers.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    all.extend(
        rows.iter()
            .map(|r| r.iter().take(headers.len()).cloned().collect()),
    );
    table(&all, Style::Markdown)
}

/// Escape text for HTML / XML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn escapes() {
        assert_eq!(esc("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
    }

    #[test]
    fn markdown_table_pads_and_rules() {
        let t = md_table(&["a", "bb"], &[vec!["long".into(), "1".into()]]);
        assert_eq!(t, "| a    | bb |\n| ---- | -- |\n| long | 1  |\n");
    }

    #[test]
    fn table_aligns() {
        let t = text_table(&[
            vec!["a".into(), "bb".into()],
            vec!["long".into(), "1".into()],
        ]);
        assert_eq!(t, "a     bb\n--------\nlong   1\n");
    }
}

/// An SVG document as an element to inline in HTML: any XML prolog dropped
/// (the SVG element carries its own viewBox).
pub(crate) fn svg_inline(svg: &str) -> String {
    let s = match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    };
    s.to_string()
}
