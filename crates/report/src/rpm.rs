//! The terminal table of a `bloatlab rpm` result.
use bloatlab_results::RpmResult;

use crate::fmt::{opt_ms, rate, text_table};

/// One row per stage: RPM and its four parts, goodput, connections,
/// confidence (the header first).
fn rpm_rows(r: &RpmResult) -> Vec<Vec<String>> {
    let mut rows = vec![["stage", "RPM", "round ms", "tcp_f", "tls_f", "http_f", "http_s", "goodput", "conns", "probes", "confidence"]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
    for s in &r.stages {
        rows.push(vec![
            s.direction.to_string(),
            s.rpm.map(crate::fmt::int3).unwrap_or_else(|| "-".into()),
            opt_ms(s.round_trip_ms),
            opt_ms(s.tcp_foreign_ms),
            opt_ms(s.tls_foreign_ms),
            opt_ms(s.http_foreign_ms),
            opt_ms(s.http_self_ms),
            rate(s.goodput_bps),
            s.connections.to_string(),
            s.probes.len().to_string(),
            s.confidence.clone(),
        ]);
    }
    rows
}

/// What the table's numbers mean and the conditions they hold for, a line each.
fn rpm_notes(r: &RpmResult) -> Vec<String> {
    let mut out = vec![];
    for s in &r.stages {
        if let Some(w) = &s.low_because {
            out.push(format!("{}: low confidence: {w}", s.direction));
        }
        if s.probes_failed > 0 {
            out.push(format!("{}: {} probe(s) failed or not started", s.direction, s.probes_failed));
        }
        if s.connections_failed > 0 {
            out.push(format!(
                "{}: {} more load-generating connection(s) could not be opened ({}); the stage went on with {}",
                s.direction,
                s.connections_failed,
                s.connection_error.as_deref().unwrap_or("no reason recorded"),
                s.connections
            ));
        }
        if s.handshake_retransmits > 0 {
            out.push(format!(
                "{}: {} of {} foreign probes had a handshake packet retransmitted (a drop at a full queue costs a retransmission \
                 timeout, 1 s for a SYN): tcp_f and tls_f include loss recovery, not only queueing",
                s.direction, s.handshake_retransmits, s.foreign_probes
            ));
        }
    }
    out.push(format!(
        "RPM per {}: 60000 / (1/6 (tcp_f + tls_f + http_f) + 1/2 http_s), each a 95% trimmed mean (ms) of the last {} intervals' probes; \
         _f = a fresh connection, _s = a load-generating one",
        r.method.specification, r.method.mad
    ));
    out.push(format!(
        "server {} ({}, {} {}, certificate {}), client cc {}, kernel {}",
        r.server_address,
        r.http_version,
        r.tls.version,
        r.tls.cipher,
        match (r.tls.verified, r.tls.pinned) {
            (true, true) => "pinned by SHA-256",
            (true, false) => "verified",
            (false, _) => "NOT verified (--insecure)",
        },
        r.cc,
        r.client.kernel_or_note(),
    ));
    out
}

/// The terminal table of an RPM result, then its notes.
pub fn rpm_table(r: &RpmResult) -> String {
    let mut out = text_table(&rpm_rows(r));
    for l in rpm_notes(r) {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// A self-contained HTML page for an RPM result: the table, the plot
/// (inline SVG) and the conditions.
pub fn rpm_html(r: &RpmResult) -> anyhow::Result<String> {
    use crate::fmt::esc;
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>bloatlab rpm {url}</title>\n<style>\
body{{font-family:sans-serif;margin:1.5em auto;max-width:1150px;color:#222}} pre{{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:12px}}\
.cards{{display:flex;gap:1em;flex-wrap:wrap}} .card{{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;min-width:12em}}\
.k{{color:#666;font-size:13px}} .v{{font-size:28px;font-weight:bold}} .u{{color:#666;font-size:13px}} svg{{width:100%;height:auto;display:block}}\
table{{border-collapse:collapse;font-size:13px;margin:1em 0}} th,td{{padding:4px 9px;text-align:right;border-bottom:1px solid #ddd}} th:first-child,td:first-child{{text-align:left}}\
.note{{color:#555;font-size:13px;margin:.3em 0}} .scroll{{overflow-x:auto}} figure{{margin:1em 0}}</style></head>\n\
<body><h1>Responsiveness (RPM) of {url}</h1>\n<p>{spec}, measured {time} by bloatlab {ver}: working conditions from HTTP/2 load-generating connections, \
foreign probes on fresh connections and self probes on the loaded ones.</p>\n{section}</body></html>\n",
        url = esc(&r.url),
        spec = esc(&r.method.specification),
        time = esc(&r.start_time),
        ver = esc(&r.bloatlab_version),
        section = rpm_section(r)?,
    ))
}

/// The cards (RPM per stage), the table and the plot of an RPM result: its
/// own page's body, and a section of a `bloatlab test --rpm` report.
pub fn rpm_section(r: &RpmResult) -> anyhow::Result<String> {
    use crate::fmt::esc;
    let svg = crate::plot::rpm_svg_string(r)?;
    let mut cards = String::new();
    for s in &r.stages {
        cards.push_str(&format!(
            "<div class=\"card\"><div class=\"k\">{} RPM</div><div class=\"v\">{}</div><div class=\"u\">{} confidence{}</div></div>",
            esc(s.direction.name()),
            s.rpm.map(crate::fmt::int3).unwrap_or_else(|| "-".into()),
            esc(&s.confidence),
            s.low_because.as_deref().map(|w| format!(": {}", esc(w))).unwrap_or_default()
        ));
    }
    let notes: String = rpm_notes(r).iter().map(|l| format!("<p class=\"note\">{}</p>", esc(l))).collect();
    let table = crate::fmt::html_table("rpm", &rpm_rows(r));
    Ok(format!("<section class=\"cards\">{cards}</section>\n{table}{notes}\n<figure class=\"plot-rpm\">{}</figure>\n", crate::fmt::svg_inline(&svg)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::RpmStage;

    #[test]
    fn a_stage_row_shows_rpm_its_parts_and_why_confidence_is_low() {
        let mut r = RpmResult::default();
        r.method.specification = "draft-x".into();
        r.method.mad = 4;
        r.stages.push(RpmStage {
            direction: bloatlab_model::RpmDirection::Download,
            rpm: Some(2000.0),
            confidence: "low".into(),
            low_because: Some("goodput not stable within 20 s".into()),
            goodput_bps: 9.5e6,
            connections: 16,
            tcp_foreign_ms: Some(10.0),
            tls_foreign_ms: Some(20.0),
            http_foreign_ms: Some(30.0),
            http_self_ms: Some(40.0),
            round_trip_ms: Some(30.0),
            ..Default::default()
        });
        let t = rpm_table(&r);
        assert!(t.contains("download"), "{t}");
        assert!(t.contains("  2000  "), "{t}");
        assert!(t.contains("  30.0  "), "the weighted round trip (10+20+30)/6+40/2 = 30 ms: {t}");
        assert!(t.contains("9.50 Mbit/s"), "{t}");
        assert!(t.contains("download: low confidence: goodput not stable within 20 s"), "{t}");
        assert!(t.contains("NOT verified"), "{t}");
        // what set the figure besides queueing, said under the table
        r.stages[0].handshake_retransmits = 29;
        r.stages[0].foreign_probes = 200;
        r.stages[0].connections_failed = 1;
        r.stages[0].connection_error = Some("no TLS handshake within 10 s".into());
        let t = rpm_table(&r);
        assert!(t.contains("download: 29 of 200 foreign probes had a handshake packet retransmitted"), "{t}");
        assert!(t.contains("download: 1 more load-generating connection(s) could not be opened (no TLS handshake within 10 s); the stage went on with 16"), "{t}");
        // The HTML page carries the table and an SVG plot.
        r.stages[0].intervals.push(bloatlab_results::RpmInterval { t_s: 1.0, goodput_bps: 9e6, moving_average_bps: 9e6, connections: 1, rpm: None });
        r.stages[0].probes.push(bloatlab_results::RpmProbe { t_s: 0.5, kind: "http_self".into(), rtt_ms: 40.0 });
        let h = rpm_html(&r).unwrap();
        assert!(h.contains("<svg") && h.contains("download RPM") && h.contains("2000") && h.contains("low confidence"), "{}", &h[..500]);
    }
}
