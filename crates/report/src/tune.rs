//! `bloatlab tune`'s before/after table and its HTML report: the figures
//! the results and the search already carry, side by side.
use crate::fmt::{ms, rate, signed, text_table};
use bloatlab_results::TestResult;
use bloatlab_tune::driver::{one_way_phase, word, Direction, TuneDoc};
use bloatlab_tune::search::Outcome;

fn grade(r: &TestResult) -> String {
    r.headline.grade.clone().unwrap_or_else(|| "-".into())
}

fn goodput(r: &TestResult, d: Direction) -> Option<f64> {
    one_way_phase(r, d).map(|p| match d {
        Direction::Down => p.summary.download_bps,
        Direction::Up => p.summary.upload_bps,
    })
}

fn added(r: &TestResult, d: Option<Direction>) -> String {
    let p = match d {
        Some(d) => one_way_phase(r, d),
        None => r.scenarios.iter().find(|p| p.uploads > 0 && p.downloads > 0),
    };
    match p.and_then(|p| p.summary.added_latency_ms.map(|a| (a, p.summary.still_rising))) {
        Some((a, rising)) => format!("{} ms{}", signed(a), if rising { " (still rising)" } else { "" }),
        None => "-".into(),
    }
}

/// The rows of the before/after table: (what, before, after).
pub fn tune_rows(doc: &TuneDoc) -> Vec<Vec<String>> {
    let Some(b) = &doc.before else { return vec![] };
    let a = doc.after.as_ref();
    let col = |f: &dyn Fn(&TestResult) -> String| vec![f(b), a.map(f).unwrap_or_else(|| "-".into())];
    let mut rows = vec![vec!["".into(), "before".into(), if doc.dry_run { "(dry run)".into() } else { "after".into() }]];
    let mut row = |name: &str, f: &dyn Fn(&TestResult) -> String| {
        let mut r = vec![name.to_string()];
        r.extend(col(f));
        rows.push(r);
    };
    row("grade", &grade);
    row("idle latency p50", &|r| r.headline.idle_latency_ms.map(|v| format!("{} ms", ms(v))).unwrap_or_else(|| "-".into()));
    row("loaded latency p50 (worst)", &|r| r.headline.loaded_latency_ms.map(|v| format!("{} ms", ms(v))).unwrap_or_else(|| "-".into()));
    for d in [Direction::Down, Direction::Up] {
        row(&format!("{} goodput", word(d)), &|r| goodput(r, d).map(rate).unwrap_or_else(|| "-".into()));
        row(&format!("{} added latency", word(d)), &|r| added(r, Some(d)));
    }
    row("both ways added latency", &|r| added(r, None));
    row("RPM (worst)", &|r| r.headline.rpm.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()));
    if let Some(a) = a {
        for d in [Direction::Down, Direction::Up] {
            if let (Some(gb), Some(ga)) = (goodput(b, d), goodput(a, d)) {
                if gb > 0.0 {
                    rows.push(vec![format!("{} goodput kept", word(d)), String::new(), format!("{:.0}%", ga / gb * 100.0)]);
                }
            }
        }
    }
    rows
}

/// What the search found per direction, one line each.
pub fn tune_search_lines(doc: &TuneDoc) -> Vec<String> {
    let mut v = vec![];
    for s in &doc.searches {
        let steps = doc.steps.iter().filter(|x| x.direction == s.direction).count();
        v.push(match &s.outcome {
            Outcome::NotBloated { added_ms } => format!("{}: {} ms under load, within the {} ms target: left alone", word(s.direction), signed(*added_ms), ms(doc.target_added_ms)),
            Outcome::NotControllable { rate_bps, added_ms } => format!(
                "{}: still +{} ms with the shaper at {} (half the line): not a queue this router can take; left alone",
                word(s.direction),
                ms(*added_ms),
                rate(*rate_bps)
            ),
            Outcome::Found { rate_bps, goodput_bps, added_ms, share_of_line, exact } => format!(
                "{}: shaper at {} -> {} goodput ({:.0}% of the unshaped line's), {} ms under load; {steps} step(s){}",
                word(s.direction),
                rate(*rate_bps),
                rate(*goodput_bps),
                share_of_line * 100.0,
                signed(*added_ms),
                if *exact { "" } else { ", the budget ended the search" }
            ),
        });
    }
    if let Some(l) = &doc.local {
        // --local: each setting of the host's queue tried, then how it ended
        for (i, st) in l.steps.iter().enumerate() {
            v.push(format!(
                "upload step {}: {} -> {} goodput, {} ms under load{}, {:.1}% of the probes lost: {}",
                i + 1,
                st.setting.name(),
                rate(st.goodput_bps),
                signed(st.added_ms),
                if st.still_rising { " and still rising" } else { "" },
                st.lost_pct,
                if st.held { "latency holds" } else { "too long" }
            ));
        }
        v.push(l.outcome.clone());
    }
    v
}

/// The whole terminal summary of a tune.
pub fn tune_table(doc: &TuneDoc) -> String {
    let mut s = text_table(&tune_rows(doc));
    s.push('\n');
    for l in tune_search_lines(doc) {
        s.push_str(&l);
        s.push('\n');
    }
    s.push_str(&format!(
        "{}: {} ({}); search {:.0} s, {}\n",
        if doc.local.is_some() { "queue" } else { "shaper" },
        doc.shaper,
        doc.shaper_why,
        doc.search_seconds,
        bloatlab_model::fmt::human_bytes(doc.search_bytes)
    ));
    s
}

/// Write `tune.html` (one file, plots inline), `tune.steps.png` and
/// `tune.cdf.png` (latency before and after) into `dir`; returns the HTML's path.
pub fn write_tune_report(doc: &TuneDoc, dir: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let html = dir.join("tune.html");
    std::fs::write(&html, tune_html(doc)?).with_context(|| format!("writing {}", html.display()))?;
    if !doc.steps.is_empty() {
        crate::plot::tune::tune_steps_png(doc, &dir.join("tune.steps.png"))?;
    }
    if let (Some(b), Some(a)) = (&doc.before, &doc.after) {
        let runs = [crate::Run { label: "before", result: b }, crate::Run { label: "after", result: a }];
        crate::plot_runs(&runs, crate::PlotKind::Cdf, crate::Format::Png, &dir.join("tune.cdf.png"))?;
    }
    Ok(html)
}

/// `bloatlab tune --report`: the before/after table, what the search
/// found, its steps (plot and table), then the two results compared.
pub fn tune_html(doc: &bloatlab_tune::driver::TuneDoc) -> anyhow::Result<String> {
    use crate::fmt::esc;
    use crate::html::{compare_body, page};
    use crate::Run;
    use std::fmt::Write as _;
    let mut b = String::new();
    let _ = writeln!(
        b,
        "<header><h1>bloatlab tune: {}</h1><p>Server {}; target: at most +{} ms under load; {}: {} ({}).</p></header>",
        esc(&doc.wan),
        esc(&doc.server),
        crate::fmt::ms(doc.target_added_ms),
        if doc.local.is_some() { "queue" } else { "shaper" },
        esc(&doc.shaper),
        esc(&doc.shaper_why)
    );
    b.push_str("<h2>Before and after</h2>\n<table class=\"compare\"><tbody>");
    for (i, row) in tune_rows(doc).iter().enumerate() {
        let tag = if i == 0 { "th" } else { "td" };
        b.push_str("<tr>");
        for c in row {
            let _ = write!(b, "<{tag}>{}</{tag}>", esc(c));
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table>\n<ul>");
    for l in tune_search_lines(doc) {
        let _ = write!(b, "<li>{}</li>", esc(&l));
    }
    b.push_str("</ul>\n");
    if let Some(p) = &doc.settings {
        let _ = writeln!(b, "<h2>The setting</h2>\n<pre>{}</pre>", esc(&p.script()));
    }
    if let Some((l, s)) = doc.local.as_ref().and_then(|l| l.setting.map(|s| (l, s))) {
        let _ = writeln!(b, "<h2>The setting</h2>\n<pre>{}</pre>", esc(&l.before.script(&s, l.bql_bytes.unwrap_or(0))));
    }
    if !doc.steps.is_empty() {
        b.push_str("<h2>The search</h2>\n");
        match crate::plot::tune::tune_steps_svg(doc) {
            Ok(svg) => {
                let _ = writeln!(
                    b,
                    "<figure class=\"plot-tune\">{}<figcaption>Each step: a short loaded test one way with the shaper at that rate (numbered in order). Green held the target (added latency at most the target, and not still rising), red did not.</figcaption></figure>",
                    crate::fmt::svg_inline(&svg)
                );
            }
            Err(e) => {
                let _ = writeln!(b, "<p class=\"note\">No search plot: {}.</p>", esc(&e.to_string()));
            }
        }
        b.push_str("<table class=\"compare\"><thead><tr><th>#</th><th>direction</th><th>shaper rate</th><th>goodput</th><th>added latency</th><th>held</th><th>time</th></tr></thead><tbody>");
        for (i, s) in doc.steps.iter().enumerate() {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ms{}</td><td>{}</td><td>{:.1} s</td></tr>",
                i + 1,
                bloatlab_tune::driver::word(s.direction),
                s.step.rate_bps.map(crate::fmt::rate).unwrap_or_else(|| "-".into()),
                crate::fmt::rate(s.step.goodput_bps),
                crate::fmt::signed(s.step.added_ms),
                if s.step.still_rising { ", still rising" } else { "" },
                if s.step.held { "yes" } else { "no" },
                s.seconds
            );
        }
        b.push_str("</tbody></table>\n");
    }
    if let (Some(before), Some(after)) = (&doc.before, &doc.after) {
        let runs = [Run { label: "before", result: before }, Run { label: "after", result: after }];
        b.push_str(&compare_body(&runs)?);
    }
    Ok(page(&format!("bloatlab tune — {}", doc.wan), &b))
}
