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


/// One flow slot's series for the flent document: its direction, slot index,
/// mean rate per bin (Mbit/s, `None` where the bin had no sample) and raw values.
type SlotSeries = (Direction, usize, Vec<Option<f64>>, Vec<Value>);

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
    let m = &r.metadata;
    let step_ns = ((m.sample_interval_ms * 1e6) as u64).max(10_000_000);
    let step_s = step_ns as f64 / 1e9;
    let phases = series::phases(r);
    let end_ns = phases.iter().map(|p| p.end_ns).max().unwrap_or(0);
    let n = (end_ns.div_ceil(step_ns) as usize).max(1);
    let x_values: Vec<f64> = (0..n).map(|i| round3((i + 1) as f64 * step_s)).collect();
    let t0 = m.start_unix_ns as f64 / 1e9;
    let max_up = r.scenarios.iter().map(|p| p.uploads).max().unwrap_or(0) as usize;
    let max_down = r.scenarios.iter().map(|p| p.downloads).max().unwrap_or(0) as usize;

    let mut results: Map<String, Value> = Map::new();
    let mut raw: Map<String, Value> = Map::new();
    let mut series_meta: Map<String, Value> = Map::new();
    let bin_of = |t_ns: u64| -> Option<usize> {
        if t_ns == 0 {
            return Some(0);
        }
        let i = (t_ns.div_ceil(step_ns) as usize).saturating_sub(1);
        (i < n).then_some(i)
    };

    // Flows: per slot rate per bin, averaged over the bin's goodput intervals.
    let mut per_dir_slots: Vec<SlotSeries> = vec![];
    for (d, count, dname) in [(Direction::Up, max_up, "upload"), (Direction::Down, max_down, "download")] {
        for slot in 0..count {
            let mut sums = vec![(0.0f64, 0usize); n];
            let mut raws = vec![];
            for p in &phases {
                let Some(fl) = p.flows.iter().filter(|f| f.direction == d).nth(slot) else { continue };
                for (t, bps) in series::flow_rate(fl) {
                    let t_ns = (t * 1e9) as u64;
                    if let Some(b) = bin_of(t_ns) {
                        sums[b].0 += bps / 1e6;
                        sums[b].1 += 1;
                    }
                    raws.push(json!({"t": t0 + t, "val": round3(bps / 1e6), "flow_id": fl.id, "scenario": p.name}));
                }
            }
            let vals: Vec<Option<f64>> = sums.iter().map(|(s, c)| if *c > 0 { Some(round3(s / *c as f64)) } else { None }).collect();
            let _ = dname;
            per_dir_slots.push((d, slot, vals, raws));
        }
    }
    let mut dir_sum: [Vec<Option<f64>>; 2] = [vec![None; n], vec![None; n]];
    for (d, slot, vals, raws) in per_dir_slots {
        let di = if d == Direction::Up { 0 } else { 1 };
        let dname = if di == 0 { "upload" } else { "download" };
        for (i, v) in vals.iter().enumerate() {
            if let Some(v) = v {
                dir_sum[di][i] = Some(dir_sum[di][i].unwrap_or(0.0) + v);
            }
        }
        let name = format!("TCP {dname} BE::{}", slot + 1);
        let meanv = mean(&vals.iter().flatten().copied().collect::<Vec<_>>());
        series_meta.insert(name.clone(), json!({"UNITS": "Mbits/s", "MEAN_VALUE": meanv.map(round3)}));
        results.insert(name.clone(), json!(vals));
        raw.insert(name, Value::Array(raws));
    }
    // Sums and averages per direction (over the flows present in the bin).
    for (di, dname, count) in [(0usize, "upload", max_up), (1, "download", max_down)] {
        if count == 0 {
            continue;
        }
        let sum: Vec<Option<f64>> = dir_sum[di].iter().map(|v| v.map(round3)).collect();
        let mut avg = vec![None; n];
        for (i, v) in sum.iter().enumerate() {
            if let Some(v) = v {
                let present = (1..=count)
                    .filter(|s| results.get(&format!("TCP {dname} BE::{s}")).and_then(|a| a.get(i)).is_some_and(|x| !x.is_null()))
                    .count();
                avg[i] = Some(round3(v / present.max(1) as f64));
            }
        }
        for (suffix, vals) in [("sum", sum), ("avg", avg)] {
            let name = format!("TCP {dname} {suffix}");
            let meanv = mean(&vals.iter().flatten().copied().collect::<Vec<_>>());
            series_meta.insert(name.clone(), json!({"UNITS": "Mbits/s", "MEAN_VALUE": meanv.map(round3)}));
            results.insert(name, json!(vals));
        }
    }
    if max_up + max_down > 0 {
        let tot: Vec<Option<f64>> = (0..n)
            .map(|i| match (dir_sum[0][i], dir_sum[1][i]) {
                (None, None) => None,
                (a, b) => Some(round3(a.unwrap_or(0.0) + b.unwrap_or(0.0))),
            })
            .collect();
        series_meta.insert("TCP totals".into(), json!({"UNITS": "Mbits/s"}));
        results.insert("TCP totals".into(), json!(tot));
    }

    // Probes: mean RTT per bin; raw = every received probe.
    let probe_series = |get: &dyn Fn(&Phase) -> &Vec<bloatlab_results::Probe>| {
        let mut sums = vec![(0.0f64, 0usize); n];
        let mut raws = vec![];
        for p in &phases {
            for pr in get(p) {
                if let Some(rtt) = pr.rtt_ns {
                    let ms = rtt as f64 / 1e6;
                    if let Some(b) = bin_of(pr.t_ns) {
                        sums[b].0 += ms;
                        sums[b].1 += 1;
                    }
                    raws.push(json!({"t": t0 + secs(pr.t_ns), "val": round3(ms), "seq": pr.seq}));
                }
            }
        }
        let vals: Vec<Option<f64>> = sums.iter().map(|(s, c)| if *c > 0 { Some(round3(s / *c as f64)) } else { None }).collect();
        (vals, raws)
    };
    let (ping, ping_raw) = probe_series(&|p: &Phase| &p.probes);
    let ping_mean = mean(&ping.iter().flatten().copied().collect::<Vec<_>>());
    series_meta.insert("Ping (ms) UDP BE".into(), json!({"UNITS": "ms", "MEAN_VALUE": ping_mean.map(round3)}));
    series_meta.insert("Ping (ms) avg".into(), json!({"UNITS": "ms", "MEAN_VALUE": ping_mean.map(round3)}));
    results.insert("Ping (ms) UDP BE".into(), json!(ping.clone()));
    results.insert("Ping (ms) avg".into(), json!(ping));
    raw.insert("Ping (ms) UDP BE".into(), Value::Array(ping_raw));
    if phases.iter().any(|p| !p.witness_probes.is_empty()) {
        let (w, wraw) = probe_series(&|p: &Phase| &p.witness_probes);
        series_meta.insert("Ping (ms) witness".into(), json!({"UNITS": "ms"}));
        results.insert("Ping (ms) witness".into(), json!(w));
        raw.insert("Ping (ms) witness".into(), Value::Array(wraw));
    }
    // --ping / --tcp-ping targets: the first ICMP one under flent's own
    // name "Ping (ms) ICMP", others with their target appended.
    let mut first_icmp = true;
    for info in &m.pings {
        let mut sums = vec![(0.0f64, 0usize); n];
        let mut raws = vec![];
        for p in &phases {
            for ps in p.pings.iter().filter(|ps| ps.target == info.target) {
                for (i, x) in ps.samples.iter().enumerate() {
                    if let Some(rtt) = x.rtt_ns {
                        let ms = rtt as f64 / 1e6;
                        if let Some(b) = bin_of(x.t_ns) {
                            sums[b].0 += ms;
                            sums[b].1 += 1;
                        }
                        raws.push(json!({"t": t0 + secs(x.t_ns), "val": round3(ms), "seq": i}));
                    }
                }
            }
        }
        let vals: Vec<Option<f64>> = sums.iter().map(|(s, c)| if *c > 0 { Some(round3(s / *c as f64)) } else { None }).collect();
        let name = match info.target.strip_prefix("icmp ") {
            Some(_) if first_icmp => {
                first_icmp = false;
                "Ping (ms) ICMP".to_string()
            }
            Some(h) => format!("Ping (ms) ICMP {h}"),
            None => format!("Ping (ms) TCP connect {}", info.target.trim_start_matches("tcp ")),
        };
        let meanv = mean(&vals.iter().flatten().copied().collect::<Vec<_>>());
        series_meta.insert(name.clone(), json!({"UNITS": "ms", "MEAN_VALUE": meanv.map(round3)}));
        results.insert(name.clone(), json!(vals));
        raw.insert(name, Value::Array(raws));
    }

    let total = round3(secs(end_ns));
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
    let metadata = json!({
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
        "TOTAL_LENGTH": total,
        "STEP_SIZE": step_s,
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
        "SERIES_META": series_meta,
        "BLOATLAB_PHASES": phase_list,
        "BLOATLAB_CC": m.cc,
        "BLOATLAB_COMPLETE": r.complete,
    });
    json!({
        "version": 4,
        "metadata": metadata,
        "x_values": x_values,
        "results": results,
        "raw_values": raw,
    })
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
