//! Number formatting shared by tables, HTML and plots.

/// About three significant digits, no exponent: 1234 -> "1234", 98.76 -> "98.8",
/// 9.412 -> "9.41", 0.0523 -> "0.052".
pub fn sig3(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// A plain number without trailing zeros: 3.0 -> "3", 0.25 -> "0.25", 1.5 -> "1.5".
pub fn trim_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" { "0".into() } else { s.to_string() }
}

pub fn opt_sig3(v: Option<f64>) -> String {
    v.map(sig3).unwrap_or_else(|| "-".into())
}

/// Milliseconds with two decimals below 100 ms, else one / none.
pub fn ms(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn opt_ms(v: Option<f64>) -> String {
    v.map(ms).unwrap_or_else(|| "-".into())
}

/// bits/s -> Mbit/s with 3 significant digits (at least 2 decimals below 10).
pub fn mbps(bps: f64) -> String {
    sig3(bps / 1e6)
}

/// Signed difference with the same precision rules, e.g. "+12.3", "-0.52".
pub fn signed(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let s = sig3(v);
    if s.parse::<f64>().is_ok_and(|x| x == 0.0) {
        return "0".into(); // "-0.000" rounds to nothing: no sign
    }
    if v > 0.0 && !s.starts_with('+') && s != "0" && s != "0.000" {
        format!("+{s}")
    } else {
        s
    }
}

/// Relative change in percent, "+3.1%"; "-" when the base is zero or missing.
pub fn pct_change(base: f64, new: f64) -> String {
    if !base.is_finite() || !new.is_finite() || base == 0.0 {
        return "-".into();
    }
    let p = (new - base) / base.abs() * 100.0;
    if p.abs() >= 1000.0 {
        // a change of 10x or more reads better as a factor; past 1000x (a
        // near-zero base, e.g. loopback latency) a ratio means nothing and
        // the absolute difference beside it says it all
        let ratio = new / base;
        return if ratio > 0.0 && ratio < 1000.0 { format!("{ratio:.0}x") } else { "-".into() };
    }
    let s = if p.abs() >= 100.0 { format!("{p:+.0}%") } else { format!("{p:+.1}%") };
    if s == "+0.0%" || s == "-0.0%" {
        "0%".into()
    } else {
        s
    }
}

/// Human duration for sentences: 850 -> "850 ms", 1234 -> "1.2 s".
pub fn human_ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.1} s", v / 1000.0)
    } else {
        // the same digits as the headline's `signed`: 27.6 ms, 0.007 ms
        format!("{} ms", sig3(v))
    }
}

/// Human byte count: "1.5 MB" (decimal units).
pub fn human_bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// Render rows as an aligned text table. The first column is left aligned,
/// the others right aligned. `rows[0]` is the header; a rule follows it.
pub fn text_table(rows: &[Vec<String>]) -> String {
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
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (i, &wi) in w.iter().enumerate() {
            let c = r.get(i).map(String::as_str).unwrap_or("");
            let pad = wi - c.chars().count();
            if i == 0 {
                line.push_str(c);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str("  ");
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if ri == 0 {
            let total: usize = w.iter().sum::<usize>() + 2 * (ncol.saturating_sub(1));
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
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
    fn sig3_rules() {
        assert_eq!(sig3(1234.4), "1234");
        assert_eq!(sig3(98.76), "98.8");
        assert_eq!(sig3(9.412), "9.41");
        assert_eq!(sig3(0.5234), "0.523");
        assert_eq!(sig3(-0.0001), "-0.000");
        assert_eq!(sig3(0.0), "0");
        assert_eq!(signed(12.34), "+12.3");
        assert_eq!(signed(-0.52), "-0.520");
        assert_eq!(pct_change(10.0, 11.0), "+10.0%");
        assert_eq!(pct_change(0.0, 11.0), "-");
        assert_eq!(pct_change(10.0, 250.0), "25x");
        assert_eq!(pct_change(0.004, 95.0), "-", "a ratio of a near-zero base means nothing");
        assert_eq!(pct_change(10.0, -250.0), "-");
        assert_eq!(pct_change(10.0, 100.0), "+900%");
        assert_eq!(human_ms(1234.0), "1.2 s");
        assert_eq!(esc("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
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
