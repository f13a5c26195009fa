//! CSV: one row per raw sample (columns in docs/report.md).
use super::Exporter;
use crate::series::{self, secs};
use anyhow::Result;
use bloatlab_results::{Direction, Phase, TestResult};

/// The CSV exporter.
pub struct Csv;

impl Exporter for Csv {
    fn extension(&self) -> &'static str {
        "csv"
    }
    fn to_stdout(&self) -> bool {
        true
    }
    fn render(&self, r: &TestResult, _file_name: &str) -> Result<Vec<u8>> {
        Ok(csv_string(r).into_bytes())
    }
}

/// CSV columns, in order. Documented in docs/report.md.
pub const CSV_COLUMNS: [&str; 17] = [
    "phase", "kind", "t_s", "id", "direction", "rtt_ms", "lost", "owd_up_ms", "owd_down_ms", "bytes",
    "rate_mbps", "cwnd", "retrans", "backlog_packets", "drops", "queue", "dscp",
];

fn f(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        String::new()
    }
}

/// A number at `decimals` places with the trailing zeros dropped (empty
/// when absent or not finite): no float noise such as 0.028964999999999998.
pub(crate) fn num(v: Option<f64>, decimals: usize) -> String {
    match v.filter(|v| v.is_finite()) {
        None => String::new(),
        Some(v) => {
            let s = format!("{v:.decimals$}");
            let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
            if s == "-0" { "0".into() } else { s.to_string() }
        }
    }
}

/// One CSV line of `cells` (each already a field: quoted where it must be).
pub(crate) fn row(cells: &[String]) -> String {
    let mut s = cells.join(",");
    s.push('\n');
    s
}

/// A field quoted as RFC 4180 wants, when it must be.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn dir(d: Direction) -> &'static str {
    d.name()
}

/// Name of the phase containing `t_ns` ("" outside every phase).
fn phase_at<'a>(phases: &[&'a Phase], t_ns: u64) -> &'a str {
    phases.iter().find(|p| t_ns >= p.start_ns && t_ns < p.end_ns).map(|p| p.name.as_str()).unwrap_or("")
}

/// One CSV row, its cells named as [`CSV_COLUMNS`] (empty where a sample has no such value).
#[derive(Default)]
struct Row {
    phase: String,
    kind: &'static str,
    t_s: String,
    id: String,
    direction: &'static str,
    rtt_ms: String,
    lost: String,
    owd_up_ms: String,
    owd_down_ms: String,
    bytes: String,
    rate_mbps: String,
    cwnd: String,
    retrans: String,
    backlog_packets: String,
    drops: String,
    queue: String,
    /// A marked flow's or class probe's DSCP (`--dscp`).
    dscp: String,
}

impl Row {
    fn line(self) -> String {
        let cells = [
            self.phase,
            self.kind.into(),
            self.t_s,
            self.id,
            self.direction.into(),
            self.rtt_ms,
            self.lost,
            self.owd_up_ms,
            self.owd_down_ms,
            self.bytes,
            self.rate_mbps,
            self.cwnd,
            self.retrans,
            self.backlog_packets,
            self.drops,
            self.queue,
            self.dscp,
        ];
        let mut line = cells.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(",");
        line.push('\n');
        line
    }
}

/// A flow's DSCP cell: empty when unmarked.
fn marked(dscp: u8) -> String {
    if dscp == 0 { String::new() } else { dscp.to_string() }
}

fn ms(ns: u64) -> String {
    f(ns as f64 / 1e6, 3)
}

/// A phase's probes and witness probes, then its request/response exchanges.
fn probe_rows(p: &Phase, out: &mut String) {
    let plain = [("probe", None, &p.probes), ("witness_probe", None, &p.witness_probes)];
    let classes = p.class_probes.iter().map(|c| ("class_probe", Some(c.dscp), &c.probes));
    for (kind, dscp, probes) in plain.into_iter().chain(classes) {
        for pr in probes.iter() {
            out.push_str(
                &Row {
                    phase: p.name.clone(),
                    kind,
                    t_s: f(secs(pr.t_ns), 6),
                    id: pr.seq.to_string(),
                    rtt_ms: pr.rtt_ns.map(ms).unwrap_or_default(),
                    lost: if pr.rtt_ns.is_some() { "0" } else { "1" }.into(),
                    owd_up_ms: pr.owd_up_ns.map(|v| f(v as f64 / 1e6, 3)).unwrap_or_default(),
                    owd_down_ms: pr.owd_down_ns.map(|v| f(v as f64 / 1e6, 3)).unwrap_or_default(),
                    dscp: dscp.map(|d| d.to_string()).unwrap_or_default(),
                    ..Default::default()
                }
                .line(),
            );
        }
    }
    for s in &p.rr {
        out.push_str(
            &Row {
                phase: p.name.clone(),
                kind: "rr",
                t_s: f(secs(s.t_ns), 6),
                id: s.seq.to_string(),
                rtt_ms: ms(s.rtt_ns),
                lost: if s.completed { "0" } else { "1" }.into(),
                ..Default::default()
            }
            .line(),
        );
    }
}

/// A phase's flows: each goodput sample (with the rate since the one
/// before), then each TCP_INFO sample.
fn flow_rows(p: &Phase, out: &mut String) {
    for fl in &p.flows {
        let mut prev: Option<(u64, u64)> = None;
        for g in &fl.goodput {
            let rate_mbps = match prev {
                Some((t0, b0)) if g.t_ns > t0 => f(g.bytes.saturating_sub(b0) as f64 * 8.0 / ((g.t_ns - t0) as f64 / 1e9) / 1e6, 3),
                _ => String::new(),
            };
            prev = Some((g.t_ns, g.bytes));
            out.push_str(
                &Row {
                    phase: p.name.clone(),
                    kind: "goodput",
                    t_s: f(secs(g.t_ns), 6),
                    id: fl.id.to_string(),
                    direction: dir(fl.direction),
                    dscp: marked(fl.dscp),
                    bytes: g.bytes.to_string(),
                    rate_mbps,
                    ..Default::default()
                }
                .line(),
            );
        }
        for t in &fl.tcp_info {
            out.push_str(
                &Row {
                    phase: p.name.clone(),
                    kind: "tcp_info",
                    t_s: f(secs(t.t_ns), 6),
                    id: fl.id.to_string(),
                    direction: dir(fl.direction),
                    dscp: marked(fl.dscp),
                    rtt_ms: f(t.srtt_us as f64 / 1000.0, 3),
                    bytes: t.bytes_acked.to_string(),
                    rate_mbps: f(t.delivery_rate_bps as f64 / 1e6, 3),
                    cwnd: t.cwnd.to_string(),
                    retrans: t.total_retrans.to_string(),
                    ..Default::default()
                }
                .line(),
            );
        }
    }
}

/// A lab's queue samples, each with the phase it fell in.
fn queue_rows(r: &TestResult, phases: &[&Phase], out: &mut String) {
    for q in r.lab.iter().flat_map(|l| l.queues.iter()) {
        for s in &q.samples {
            out.push_str(
                &Row {
                    phase: phase_at(phases, s.t_ns).to_string(),
                    kind: "queue",
                    t_s: f(secs(s.t_ns), 6),
                    id: q.role.clone(),
                    bytes: s.backlog_bytes.to_string(),
                    backlog_packets: s.backlog_packets.to_string(),
                    drops: s.drops.to_string(),
                    queue: format!("{} {}", q.qdisc, q.location).trim().to_string(),
                    ..Default::default()
                }
                .line(),
            );
        }
    }
}

/// The CSV text: a header line with [`CSV_COLUMNS`], then one row per raw
/// sample, phase by phase: probes, witness probes, request/response
/// exchanges, goodput samples, TCP_INFO samples; then lab queue samples.
pub fn csv_string(r: &TestResult) -> String {
    let mut out = CSV_COLUMNS.join(",") + "\n";
    let phases = series::phases(r);
    for p in &phases {
        probe_rows(p, &mut out);
        flow_rows(p, &mut out);
    }
    queue_rows(r, &phases, &mut out);
    out
}

