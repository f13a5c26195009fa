//! flent's data file: `.flent.gz`, gzip JSON in flent's format version 4,
//! openable with `flent -i FILE` (see docs/report.md).
use super::Exporter;
use bloatlab_metrics::mean;
use crate::series::{self, secs};
use anyhow::Result;
use bloatlab_results::{Direction, Phase, TestResult};
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Map, Value};
use std::io::Write;

/// The flent exporter.
pub struct Flent;

impl Exporter for Flent {
    fn extension(&self) -> &'static str {
        "flent.gz"
    }
    fn to_stdout(&self) -> bool {
        false
    }
    fn render(&self, r: &TestResult, file_name: &str) -> Result<Vec<u8>> {
        let mut doc = flent_document(r);
        doc["metadata"]["DATA_FILENAME"] = Value::String(file_name.to_string());
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&serde_json::to_vec(&doc)?)?;
        Ok(gz.finish()?)
    }
}

/// flent's name for the test whose series layout we follow. Its plots
/// (`totals`, `ping`, `ping_cdf`, `download`, `upload`, `box_*`, ...) glob
/// the series below; its stream counts come from TEST_PARAMETERS.
pub const FLENT_TEST_NAME: &str = "rrul_be_nflows";

/// Unix ns -> "YYYY-MM-DDTHH:MM:SS.ffffffZ" (UTC), the form flent parses.
pub(crate) fn flent_time(unix_ns: u64) -> String {
    let t = bloatlab_model::units::UtcTime::from_unix_ns(unix_ns);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        t.nanos / 1000
    )
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}


/// Build flent's JSON document (format version 4) for a result.
///
/// The whole test (idle baseline then scenarios, on the test clock) is one
/// flent time axis with step = the goodput sample interval. Series:
/// `TCP upload BE::N` / `TCP download BE::N` (the N-th upload/download flow of
/// whichever scenario runs at that time), `TCP upload sum|avg`,
/// `TCP download sum|avg`, `TCP totals` (Mbit/s), `Ping (ms) UDP BE` (bloatlab's
/// UDP probes, mean per step), `Ping (ms) avg`, and, when present, `Ping (ms)
/// witness`, `Ping (ms) ICMP` (the first --ping target; others append their
/// host) and `Ping (ms) TCP connect HOST:PORT`. Raw values keep every probe and every goodput interval.
pub fn flent_document(r: &TestResult) -> Value {
    let phases = series::phases(r);
    let mut doc = Doc::new(r, &phases);
    doc.flows(r, &phases);
    doc.probes(&phases);
    doc.pings(r, &phases);
    let metadata = doc.metadata(r, &phases);
    json!({
        "version": 4,
        "metadata": metadata,
        "x_values": doc.x_values(),
        "results": doc.results,
        "raw_values": doc.raw,
    })
}

/// A flent document being built: its time axis and its series.
struct Doc {
    step_ns: u64,
    /// Bins on the time axis.
    n: usize,
    end_ns: u64,
    /// The test's start, Unix seconds (raw values carry absolute times).
    t0: f64,
    results: Map<String, Value>,
    raw: Map<String, Value>,
    series_meta: Map<String, Value>,
}

impl Doc {
    fn new(r: &TestResult, phases: &[&Phase]) -> Doc {
        let m = &r.metadata;
        let step_ns = ((m.sample_interval_ms * 1e6) as u64).max(10_000_000);
        let end_ns = phases.iter().map(|p| p.end_ns).max().unwrap_or(0);
        Doc {
            step_ns,
            n: (end_ns.div_ceil(step_ns) as usize).max(1),
            end_ns,
            t0: m.start_unix_ns as f64 / 1e9,
            results: Map::new(),
            raw: Map::new(),
            series_meta: Map::new(),
        }
    }

    fn step_s(&self) -> f64 {
        self.step_ns as f64 / 1e9
    }

    fn x_values(&self) -> Vec<f64> {
        (0..self.n).map(|i| round3((i + 1) as f64 * self.step_s())).collect()
    }

    /// The bin a time on the test clock falls in (flent's x value is the bin's end).
    fn bin_of(&self, t_ns: u64) -> Option<usize> {
        if t_ns == 0 {
            return Some(0);
        }
        let i = (t_ns.div_ceil(self.step_ns) as usize).saturating_sub(1);
        (i < self.n).then_some(i)
    }

    /// The mean per bin of (time, value) points; `None` where a bin has none.
    fn binned(&self, points: impl IntoIterator<Item = (u64, f64)>) -> Vec<Option<f64>> {
        let mut sums = vec![(0.0f64, 0usize); self.n];
        for (t_ns, v) in points {
            if let Some(b) = self.bin_of(t_ns) {
                sums[b].0 += v;
                sums[b].1 += 1;
            }
        }
        sums.iter().map(|(s, c)| if *c > 0 { Some(round3(s / *c as f64)) } else { None }).collect()
    }

    /// Add a series (with its mean in SERIES_META when `with_mean`) and its raw values.
    fn insert(&mut self, name: &str, units: &str, vals: Vec<Option<f64>>, raws: Option<Vec<Value>>, with_mean: bool) {
        let meta = if with_mean {
            let meanv = mean(&vals.iter().flatten().copied().collect::<Vec<_>>());
            json!({"UNITS": units, "MEAN_VALUE": meanv.map(round3)})
        } else {
            json!({"UNITS": units})
        };
        self.series_meta.insert(name.into(), meta);
        self.results.insert(name.into(), json!(vals));
        if let Some(raws) = raws {
            self.raw.insert(name.into(), Value::Array(raws));
        }
    }

    /// Flows: per slot the mean rate per bin over the bin's goodput
    /// intervals; per direction their sum and average; the total.
    fn flows(&mut self, r: &TestResult, phases: &[&Phase]) {
        let max_up = r.scenarios.iter().map(|p| p.uploads).max().unwrap_or(0) as usize;
        let max_down = r.scenarios.iter().map(|p| p.downloads).max().unwrap_or(0) as usize;
        let n = self.n;
        let mut dir_sum: [Vec<Option<f64>>; 2] = [vec![None; n], vec![None; n]];
        for (di, d, count) in [(0usize, Direction::Up, max_up), (1, Direction::Down, max_down)] {
            let dname = flent_direction(d);
            // how many slots had a value in each bin, for the average
            let mut present = vec![0usize; n];
            for slot in 0..count {
                let mut points = vec![];
                let mut raws = vec![];
                for p in phases {
                    let Some(fl) = p.flows.iter().filter(|f| f.direction == d).nth(slot) else { continue };
                    for (t, bps) in series::flow_rate(fl) {
                        points.push(((t * 1e9) as u64, bps / 1e6));
                        raws.push(json!({"t": self.t0 + t, "val": round3(bps / 1e6), "flow_id": fl.id, "scenario": p.name}));
                    }
                }
                let vals = self.binned(points);
                for (i, v) in vals.iter().enumerate() {
                    if let Some(v) = v {
                        dir_sum[di][i] = Some(dir_sum[di][i].unwrap_or(0.0) + v);
                        present[i] += 1;
                    }
                }
                self.insert(&format!("TCP {dname} BE::{}", slot + 1), "Mbits/s", vals, Some(raws), true);
            }
            if count == 0 {
                continue;
            }
            let sum: Vec<Option<f64>> = dir_sum[di].iter().map(|v| v.map(round3)).collect();
            let avg: Vec<Option<f64>> = sum.iter().zip(&present).map(|(v, k)| v.map(|v| round3(v / (*k).max(1) as f64))).collect();
            self.insert(&format!("TCP {dname} sum"), "Mbits/s", sum, None, true);
            self.insert(&format!("TCP {dname} avg"), "Mbits/s", avg, None, true);
        }
        if max_up + max_down > 0 {
            let tot: Vec<Option<f64>> = (0..n)
                .map(|i| match (dir_sum[0][i], dir_sum[1][i]) {
                    (None, None) => None,
                    (a, b) => Some(round3(a.unwrap_or(0.0) + b.unwrap_or(0.0))),
                })
                .collect();
            self.insert("TCP totals", "Mbits/s", tot, None, false);
        }
    }

    /// One probe stream: the mean RTT per bin, and every received probe.
    fn probe_series(&self, phases: &[&Phase], get: fn(&Phase) -> &Vec<bloatlab_results::Probe>) -> (Vec<Option<f64>>, Vec<Value>) {
        let received = || phases.iter().flat_map(|p| get(p).iter()).filter_map(|pr| pr.rtt_ns.map(|rtt| (pr, rtt as f64 / 1e6)));
        let vals = self.binned(received().map(|(pr, ms)| (pr.t_ns, ms)));
        let raws = received().map(|(pr, ms)| json!({"t": self.t0 + secs(pr.t_ns), "val": round3(ms), "seq": pr.seq})).collect();
        (vals, raws)
    }

    /// bloatlab's UDP probes (flent's "Ping (ms) UDP BE" and "avg"), and the witness's.
    fn probes(&mut self, phases: &[&Phase]) {
        let (ping, ping_raw) = self.probe_series(phases, |p| &p.probes);
        self.insert("Ping (ms) UDP BE", "ms", ping.clone(), Some(ping_raw), true);
        self.insert("Ping (ms) avg", "ms", ping, None, true);
        if phases.iter().any(|p| !p.witness_probes.is_empty()) {
            let (w, wraw) = self.probe_series(phases, |p| &p.witness_probes);
            self.insert("Ping (ms) witness", "ms", w, Some(wraw), false);
        }
    }

    /// --ping / --tcp-ping targets: the first ICMP one under flent's own
    /// name "Ping (ms) ICMP", others with their target appended.
    fn pings(&mut self, r: &TestResult, phases: &[&Phase]) {
        let mut first_icmp = true;
        for info in &r.metadata.pings {
            let samples = || {
                phases
                    .iter()
                    .flat_map(|p| p.pings.iter().filter(|ps| ps.target == info.target))
                    .flat_map(|ps| ps.samples.iter().enumerate())
                    .filter_map(|(i, x)| x.rtt_ns.map(|rtt| (i, x.t_ns, rtt as f64 / 1e6)))
            };
            let vals = self.binned(samples().map(|(_, t, ms)| (t, ms)));
            let raws = samples().map(|(i, t, ms)| json!({"t": self.t0 + secs(t), "val": round3(ms), "seq": i})).collect();
            let name = match info.target.strip_prefix("icmp ") {
                Some(_) if first_icmp => {
                    first_icmp = false;
                    "Ping (ms) ICMP".to_string()
                }
                Some(h) => format!("Ping (ms) ICMP {h}"),
                None => format!("Ping (ms) TCP connect {}", info.target.trim_start_matches("tcp ")),
            };
            self.insert(&name, "ms", vals, Some(raws), true);
        }
    }

    /// flent's metadata: what, when, where, and the series' units and means.
    fn metadata(&mut self, r: &TestResult, phases: &[&Phase]) -> Value {
        let m = &r.metadata;
        let max_up = r.scenarios.iter().map(|p| p.uploads).max().unwrap_or(0);
        let max_down = r.scenarios.iter().map(|p| p.downloads).max().unwrap_or(0);
        let mut title = format!("bloatlab {}", m.scenario_definitions.join(" "));
        if let Some(lab) = &r.lab {
            title.push_str(&format!(" (lab, {})", lab.backend));
        }
        let phase_list: Vec<Value> = phases
            .iter()
            .map(|p| json!({"name": p.name, "start_s": round3(secs(p.start_ns)), "end_s": round3(secs(p.end_ns)), "uploads": p.uploads, "downloads": p.downloads}))
            .collect();
        let ip_version = if m.server_address.contains('[') || m.server_address.matches(':').count() > 1 { 6 } else { 4 };
        let host = m.server_address.rsplit_once(':').map(|(h, _)| h.trim_matches(['[', ']'])).unwrap_or(&m.server_address).to_string();
        json!({
            "NAME": FLENT_TEST_NAME,
            "TITLE": title,
            "NOTE": format!("Exported by bloatlab {} from a bloatlab result; phases: {}", m.bloatlab_version,
                phases.iter().map(|p| format!("{} {:.1}-{:.1} s", p.name, secs(p.start_ns), secs(p.end_ns))).collect::<Vec<_>>().join(", ")),
            "TIME": flent_time(m.start_unix_ns),
            "T0": flent_time(m.start_unix_ns),
            "HOST": host,
            "HOSTS": [host],
            "LOCAL_HOST": m.client.hostname,
            "LENGTH": m.scenario_duration_s,
            "TOTAL_LENGTH": round3(secs(self.end_ns)),
            "STEP_SIZE": self.step_s(),
            "IP_VERSION": ip_version,
            "TEST_PARAMETERS": {"upload_streams": max_up.to_string(), "download_streams": max_down.to_string()},
            "FLENT_VERSION": format!("bloatlab-{}", m.bloatlab_version),
            "DATA_FILENAME": Value::Null,
            "BATCH_NAME": Value::Null,
            "BATCH_TIME": Value::Null,
            "BATCH_TITLE": Value::Null,
            "BATCH_UUID": Value::Null,
            "KERNEL_NAME": m.client.os.split_whitespace().next().unwrap_or(""),
            "KERNEL_RELEASE": m.client.kernel,
            "EGRESS_INFO": Value::Null,
            "SERIES_META": std::mem::take(&mut self.series_meta),
            "BLOATLAB_PHASES": phase_list,
            "BLOATLAB_CC": m.cc,
            "BLOATLAB_COMPLETE": r.complete,
        })
    }
}

/// flent's word for a direction in its series names.
fn flent_direction(d: Direction) -> &'static str {
    match d {
        Direction::Up => "upload",
        Direction::Down => "download",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn flent_time_format() {
        assert_eq!(super::flent_time(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(super::flent_time(1_795_327_200_123_456_789), "2026-11-22T06:00:00.123456Z");
        assert_eq!(super::flent_time(951_782_400_000_000_000), "2000-02-29T00:00:00.000000Z");
    }
}
