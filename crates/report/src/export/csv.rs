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
pub const CSV_COLUMNS: [&str; 16] = [
    "phase", "kind", "t_s", "id", "direction", "rtt_ms", "lost", "owd_up_ms", "owd_down_ms", "bytes",
    "rate_mbps", "cwnd", "retrans", "backlog_packets", "drops", "queue",
];

fn f(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        String::new()
    }
}

fn csv_field(s: &str) -> String {
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

/// The CSV text: a header line with [`CSV_COLUMNS`], then one row per raw
/// sample, phase by phase: probes, witness probes, request/response
/// exchanges, goodput samples, TCP_INFO samples; then lab queue samples.
pub fn csv_string(r: &TestResult) -> String {
    let mut out = String::new();
    out.push_str(&CSV_COLUMNS.join(","));
    out.push('\n');
    let mut row = |cells: [String; 16]| {
        let line: Vec<String> = cells.iter().map(|c| csv_field(c)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    };
    let e = String::new;
    let phases = series::phases(r);
    for p in &phases {
        let name = p.name.clone();
        for (kind, probes) in [("probe", &p.probes), ("witness_probe", &p.witness_probes)] {
            for pr in probes.iter() {
                row([
                    name.clone(),
                    kind.into(),
                    f(secs(pr.t_ns), 6),
                    pr.seq.to_string(),
                    e(),
                    pr.rtt_ns.map(|v| f(v as f64 / 1e6, 3)).unwrap_or_default(),
                    if pr.rtt_ns.is_some() { "0".into() } else { "1".into() },
                    pr.owd_up_ns.map(|v| f(v as f64 / 1e6, 3)).unwrap_or_default(),
                    pr.owd_down_ns.map(|v| f(v as f64 / 1e6, 3)).unwrap_or_default(),
                    e(),
                    e(),
                    e(),
                    e(),
                    e(),
                    e(),
                    e(),
                ]);
            }
        }
        for s in &p.rr {
            row([
                name.clone(),
                "rr".into(),
                f(secs(s.t_ns), 6),
                s.seq.to_string(),
                e(),
                f(s.rtt_ns as f64 / 1e6, 3),
                if s.completed { "0".into() } else { "1".into() },
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
            ]);
        }
        for fl in &p.flows {
            let mut prev: Option<(u64, u64)> = None;
            for g in &fl.goodput {
                let rate = match prev {
                    Some((t0, b0)) if g.t_ns > t0 => f(g.bytes.saturating_sub(b0) as f64 * 8.0 / ((g.t_ns - t0) as f64 / 1e9) / 1e6, 3),
                    _ => String::new(),
                };
                prev = Some((g.t_ns, g.bytes));
                row([
                    name.clone(),
                    "goodput".into(),
                    f(secs(g.t_ns), 6),
                    fl.id.to_string(),
                    dir(fl.direction).into(),
                    e(),
                    e(),
                    e(),
                    e(),
                    g.bytes.to_string(),
                    rate,
                    e(),
                    e(),
                    e(),
                    e(),
                    e(),
                ]);
            }
            for t in &fl.tcp_info {
                row([
                    name.clone(),
                    "tcp_info".into(),
                    f(secs(t.t_ns), 6),
                    fl.id.to_string(),
                    dir(fl.direction).into(),
                    f(t.srtt_us as f64 / 1000.0, 3),
                    e(),
                    e(),
                    e(),
                    t.bytes_acked.to_string(),
                    f(t.delivery_rate_bps as f64 / 1e6, 3),
                    t.cwnd.to_string(),
                    t.total_retrans.to_string(),
                    e(),
                    e(),
                    e(),
                ]);
            }
        }
    }
    if let Some(lab) = &r.lab {
        for q in &lab.queues {
            for s in &q.samples {
                row([
                    phase_at(&phases, s.t_ns).to_string(),
                    "queue".into(),
                    f(secs(s.t_ns), 6),
                    q.role.clone(),
                    e(),
                    e(),
                    e(),
                    e(),
                    e(),
                    s.backlog_bytes.to_string(),
                    e(),
                    e(),
                    e(),
                    s.backlog_packets.to_string(),
                    s.drops.to_string(),
                    format!("{} {}", q.qdisc, q.location).trim().to_string(),
                ]);
            }
        }
    }
    out
}


