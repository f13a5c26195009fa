//! The printed tables: seed-style for the four recipes, generic for sweeps.
//! Every table is markdown (pipe tables padded for the terminal), so the
//! same text is printed and saved as table.md.
use crate::params::{RecipeKind, TimerSpec};
use crate::recipe::Recipe;
use crate::rows::Row;
use crate::points::PointOutcome;
use crate::units::fmt_duration_ns;
pub use bloatlab_report::fmt::md_table;
use bloatlab_report::fmt::{duration_ns as fmt_duration_sig3, rate as fmt_rate_human, sig3};
use bloatlab_results::{LatencyStats, TestResult};

fn ms(v: f64) -> String {
    format!("{}ms", bloatlab_report::fmt::ms(v))
}

/// Seed 000's latency cell: "min 2.6ms avg 3.3ms max 23ms mdev 2.9ms n 50".
pub fn ping_cell(l: &LatencyStats) -> String {
    if l.received == 0 {
        return format!("no replies (n 0, {} lost)", l.lost);
    }
    let mut s = format!(
        "min {} avg {} max {} mdev {} n {}",
        ms(l.min_ms),
        ms(l.avg_ms),
        ms(l.max_ms),
        ms(l.mdev_ms),
        l.received
    );
    if l.lost > 0 {
        s.push_str(&format!(" ({} lost)", l.lost));
    }
    s
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

fn load_name(u: u32, d: u32) -> String {
    let one = |n: u32, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    match (u, d) {
        (u, 0) => one(u, "upload"),
        (0, d) => one(d, "download"),
        (u, d) => format!("{} + {}", one(u, "upload"), one(d, "download")),
    }
}

/// Group key: every swept parameter except `except`, plus the repetition.
fn group_key(o: &PointOutcome, except: &str) -> String {
    o.point
        .params
        .iter()
        .filter(|(k, _)| k != except)
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn groups<'a>(outs: &'a [PointOutcome], except: &str) -> Vec<(String, Vec<&'a PointOutcome>)> {
    let mut sorted: Vec<&PointOutcome> = outs.iter().collect();
    sorted.sort_by_key(|o| (o.point.combo, o.point.rep));
    let mut g: Vec<(String, Vec<&PointOutcome>)> = vec![];
    for o in sorted {
        let k = group_key(o, except);
        match g.iter_mut().find(|(n, _)| *n == k) {
            Some((_, v)) => v.push(o),
            None => g.push((k, vec![o])),
        }
    }
    g
}

fn param<'a>(o: &'a PointOutcome, k: &str) -> Option<&'a str> {
    o.values.iter().find(|(n, _)| n == k).map(|(_, v)| v.text.as_str())
}

/// "blab-1a2b3c-router/wan" -> "router/wan": lab ids differ per point.
fn strip_lab_id(loc: &str) -> String {
    match loc.strip_prefix("blab-") {
        Some(rest) if rest.len() > 7 && rest.as_bytes()[6] == b'-' => rest[7..].to_string(),
        _ => loc.to_string(),
    }
}

/// One line of context for a lab result: what explains its numbers.
pub fn lab_context(r: &TestResult) -> String {
    let mut parts = vec![];
    if let Some(l) = &r.lab {
        parts.push(format!("backend {}", l.backend));
        let q: Vec<String> = l.queues.iter().map(|q| format!("{} {} at {}", q.role, q.qdisc, strip_lab_id(&q.location))).collect();
        if !q.is_empty() {
            parts.push(format!("queues: {}", q.join(", ")));
        }
        parts.push(format!("offloads {}", l.offloads));
        parts.push(format!("kernel {}", l.kernel));
    }
    parts.push(format!("cc {}", r.metadata.cc));
    if r.metadata.socket.mss > 0 {
        parts.push(format!("MSS {}", r.metadata.socket.mss));
    }
    parts.join("; ")
}

fn failures(outs: &[PointOutcome]) -> String {
    let bad: Vec<String> = outs
        .iter()
        .filter(|o| !o.ok)
        .map(|o| {
            let p = o.point.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            format!("- point {} ({}): {}", o.point.index, if p.is_empty() { "-".into() } else { p }, o.status)
        })
        .collect();
    if bad.is_empty() {
        String::new()
    } else {
        format!("\nPoints without a complete result:\n{}\n", bad.join("\n"))
    }
}

pub fn render(r: &Recipe, outs: &[PointOutcome]) -> String {
    let body = match r.report.table.as_str() {
        "txqueuelen" => txqueuelen(outs),
        "sendstalls" => sendstalls(outs),
        "loadlatency" => loadlatency(outs),
        "pacing" => pacing(outs),
        _ => generic(r, outs),
    };
    format!("{body}{}", failures(outs))
}

/// Seeds 000/002: queue | test | latency | added | goodput | analytic max queue delay | queue seen.
fn txqueuelen(outs: &[PointOutcome]) -> String {
    let mut out = String::new();
    for (key, g) in groups(outs, "queue") {
        let Some(first) = g.iter().find_map(|o| o.lab.as_ref()) else { continue };
        let title = {
            let mut t = vec![];
            for k in ["rate", "bottleneck"] {
                if !key.contains(&format!("{k}=")) {
                    if let Some(v) = g.iter().find_map(|o| param(o, k)) {
                        t.push(format!("{k}={v}"));
                    }
                }
            }
            if !key.is_empty() {
                t.insert(0, key.clone());
            }
            t.join(" ")
        };
        out.push_str(&format!("### {title}\n\n{}\n\n", lab_context(first)));
        let headers = ["queue", "test", "latency", "added p50", "goodput", "max queue delay (N*MTU*8/rate)", "queue seen: max backlog / drops", "seed 000 / 002"];
        let mut rows = vec![];
        let mut notes: Vec<String> = vec![];
        if let Some(idle) = &first.idle {
            let [mn, avg, mx, md] = crate::seeds::SEED000_IDLE;
            let seed = format!("000 idle: {mn}/{avg}/{mx}/{md} ms");
            rows.push(vec!["-".into(), "idle network, to server".into(), ping_cell(&idle.summary.latency), "-".into(), "-".into(), "-".into(), "-".into(), seed]);
            if let Some(w) = &idle.summary.witness_latency {
                rows.push(vec!["-".into(), "idle network, to witness".into(), ping_cell(w), "-".into(), "-".into(), "-".into(), "-".into(), "-".into()]);
            }
        }
        for o in &g {
            let Some(res) = &o.lab else { continue };
            let queue = param(o, "queue").unwrap_or("-").to_string();
            let rep = if o.point.rep > 1 { format!(" (rep {})", o.point.rep) } else { String::new() };
            for (ph, row) in res.scenarios.iter().zip(o.rows.iter().skip(res.idle.is_some() as usize)) {
                let s = &ph.summary;
                let goodput = match (ph.uploads > 0, ph.downloads > 0) {
                    (true, false) => fmt_rate_human(s.upload_bps),
                    (false, true) => fmt_rate_human(s.download_bps),
                    _ => format!("{} up, {} down", fmt_rate_human(s.upload_bps), fmt_rate_human(s.download_bps)),
                };
                let delay = opt(row.get(RecipeKind::Lab, "analytic_queue_delay_ms"), |v| format!("{} ms", sig3(v)));
                let seen = match (row.get(RecipeKind::Lab, "bottleneck_max_backlog_pkts"), row.get(RecipeKind::Lab, "bottleneck_drops")) {
                    (Some(b), Some(d)) => format!("{b:.0} pkts / {d:.0}"),
                    _ => match (row.get(RecipeKind::Lab, "local_max_backlog_pkts"), row.get(RecipeKind::Lab, "local_drops")) {
                        (Some(b), Some(d)) => format!("{b:.0} pkts / {d:.0} (local)"),
                        _ => "-".into(),
                    },
                };
                let load = load_name(ph.uploads, ph.downloads);
                let packets = res.lab.as_ref().and_then(|l| l.config.queue_spec.as_ref()).and_then(|q| q.fifo_packets());
                let rate = res.lab.as_ref().and_then(|l| if ph.uploads > 0 { l.config.rate_up_bps } else { l.config.rate_down_bps });
                let seed = crate::seeds::txqueuelen_cell(packets, rate);
                rows.push(vec![queue.clone(), format!("{load}, to server{rep}"), ping_cell(&s.latency), opt(s.added_latency_ms, ms), goodput.clone(), delay.clone(), seen.clone(), seed]);
                if let Some(w) = &s.witness_latency {
                    rows.push(vec![queue.clone(), format!("{load}, to witness{rep}"), ping_cell(w), opt(s.witness_added_latency_ms, ms), goodput.clone(), delay.clone(), seen.clone(), "-".into()]);
                }
                // Where ours differs from the seed: a 1-packet FIFO starves one TCP flow here,
                // while seed 000's scp time did not change.
                let share = rate.and_then(|r| bloatlab_metrics::goodput_share(s.upload_bps + s.download_bps, r));
                if let (Some(1), Some(sh)) = (packets, share) {
                    if sh < 0.8 && !notes.iter().any(|n| n.starts_with("fifo:1 ")) {
                        notes.push(format!(
                            "fifo:1 here carries {:.0}% of the link where seed 000 saw scp's time unchanged: seed 000 set the txqueuelen of the sender's own \
                             wifi interface, whose driver ring and 802.11 MAC queues (not counted by txqueuelen) kept a slow link busy; here the 1-packet FIFO \
                             is the whole bottleneck queue of a wired router, and one TCP flow cannot keep it filled between its bursts (a queue of at least a \
                             bandwidth-delay product is needed for a single flow).",
                            sh * 100.0
                        ));
                    }
                }
            }
        }
        out.push_str(&md_table(&headers, &rows));
        out.push_str("\nseed 000: an XO-1.5 laptop's own wifi txqueuelen under scp (its table: min/avg/max/mdev of 50 pings); seed 002: the most latency \
                      a 1000-packet txqueue builds at that rate (\"up to 120 ms ... 10 Mb/s: up to 1.2s\"). Ours: a router's FIFO of N full frames at the lab's rate.\n");
        for n in notes {
            out.push_str(&format!("\nnote: {n}\n"));
        }
        out.push('\n');
    }
    out
}

/// Seed 001: local drops, cwnd reductions, goodput per queue length.
fn sendstalls(outs: &[PointOutcome]) -> String {
    let mut out = String::new();
    for (key, g) in groups(outs, "queue") {
        let Some(first) = g.iter().find_map(|o| o.lab.as_ref()) else { continue };
        if !key.is_empty() {
            out.push_str(&format!("### {key}\n\n"));
        }
        let dur = first.scenarios.first().map(|p| (p.end_ns - p.start_ns) as f64 / 1e9).unwrap_or(0.0);
        out.push_str(&format!("{}; scenario length {:.0} s\n\n", lab_context(first), dur));
        let headers = ["queue", "local drops", "drops/s", "cwnd reductions", "CWR entries", "retransmits", "goodput", "local backlog max", "mean cwnd", "RTT p50"];
        let mut rows = vec![];
        for o in &g {
            let Some(res) = &o.lab else { continue };
            for (ph, row) in res.scenarios.iter().zip(o.rows.iter().skip(res.idle.is_some() as usize)) {
                let secs = (ph.end_ns - ph.start_ns) as f64 / 1e9;
                let g = |m: &str| row.get(RecipeKind::Lab, m);
                rows.push(vec![
                    param(o, "queue").unwrap_or("-").to_string() + &if o.point.rep > 1 { format!(" (rep {})", o.point.rep) } else { String::new() },
                    opt(g("local_drops"), |v| format!("{v:.0}")),
                    opt(g("local_drops"), |v| sig3(v / secs.max(1e-9))),
                    opt(g("cwnd_reductions"), |v| format!("{v:.0}")),
                    opt(g("cwr_entries"), |v| format!("{v:.0}")),
                    opt(g("retransmits"), |v| format!("{v:.0}")),
                    fmt_rate_human(ph.summary.upload_bps + ph.summary.download_bps),
                    opt(g("local_max_backlog_pkts"), |v| format!("{v:.0} pkts")),
                    opt(g("mean_cwnd"), sig3),
                    if ph.summary.latency.received > 0 { ms(ph.summary.latency.p50_ms) } else { "-".into() },
                ]);
            }
        }
        out.push_str(&md_table(&headers, &rows));
        out.push_str("\ncwnd reductions and CWR entries are counted between TCP_INFO samples (at the sample interval), so they are lower bounds.\n");
        out.push_str(&format!(
            "\nseed 001 (2003): send stalls vanished from a txqueuelen of about {} packets up. Here they vanish much earlier: TCP Small Queues \
             (Linux 3.6+) keep only a few packets per socket in the sender's own qdisc, so a local queue of ~20 packets no longer overflows.\n\n",
            crate::seeds::SEED001_NO_STALLS_FROM
        ));
    }
    out
}

fn kib(bps: f64) -> String {
    format!("{:.0} KiB/s", bps / 8.0 / 1024.0)
}

/// Seed 003: the four headline numbers and one line per scenario.
fn loadlatency(outs: &[PointOutcome]) -> String {
    let mut out = String::new();
    for o in outs {
        let Some(res) = &o.lab else { continue };
        let p = o.point.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        if !p.is_empty() || outs.len() > 1 {
            out.push_str(&format!("### point {} {p}\n\n", o.point.index));
        }
        out.push_str(&format!("{}\n\n", lab_context(res)));
        let h = &res.headline;
        let hz = |v: Option<f64>| v.map(|x| format!("{} Hz", sig3(x))).unwrap_or_else(|| "-".into());
        out.push_str("```\n");
        out.push_str(&format!("    Upload Capacity: {}\n", kib(h.upload_capacity_bps)));
        out.push_str(&format!("  Download Capacity: {}\n", kib(h.download_capacity_bps)));
        out.push_str(&format!("Link Responsiveness: {}\n", hz(h.link_responsiveness_hz)));
        out.push_str(&format!("    Flow Smoothness: {}\n", hz(h.flow_smoothness_hz)));
        let (su, sd, sr, ss) = crate::seeds::SEED003;
        out.push_str(&format!(
            "   (seed 003, 100base-TX LAN with standard configurations: {su:.0} KiB/s up, {sd:.0} KiB/s down, {sr} Hz responsiveness, {ss} Hz smoothness)\n\n"
        ));
        for (i, ph) in res.scenarios.iter().enumerate() {
            let mut parts = vec![];
            if ph.uploads > 0 {
                parts.push(format!("{} up", kib(ph.summary.upload_bps)));
            }
            if ph.downloads > 0 {
                parts.push(format!("{} down", kib(ph.summary.download_bps)));
            }
            if let Some(s) = ph.summary.smoothness_hz {
                parts.push(format!("{s:.2} Hz smoothness"));
            }
            out.push_str(&format!("Scenario {}: {} uploads, {} downloads... {}\n", i + 1, ph.uploads, ph.downloads, parts.join(", ")));
        }
        out.push_str("```\n\n");
        let headers = ["scenario", "up", "down", "responsiveness", "smoothness", "latency p50", "latency p99", "added p50", "UDP RPM", "GB/month up/down"];
        let rows: Vec<Vec<String>> = res
            .scenarios
            .iter()
            .map(|ph| {
                let s = &ph.summary;
                vec![
                    ph.name.clone(),
                    if ph.uploads > 0 { kib(s.upload_bps) } else { "-".into() },
                    if ph.downloads > 0 { kib(s.download_bps) } else { "-".into() },
                    match (s.responsiveness_hz, s.responsiveness_ms) {
                        (Some(hz), Some(m)) => format!("{} Hz ({})", sig3(hz), ms(m)),
                        _ => "-".into(),
                    },
                    match (s.smoothness_hz, s.smoothness_ms) {
                        (Some(hz), Some(m)) => format!("{hz:.2} Hz ({})", ms(m)),
                        _ => "-".into(),
                    },
                    if s.latency.received > 0 { ms(s.latency.p50_ms) } else { "-".into() },
                    if s.latency.received > 0 { ms(s.latency.p99_ms) } else { "-".into() },
                    opt(s.added_latency_ms, ms),
                    opt(s.rpm, |v| format!("{v:.0}")),
                    format!("{:.0} / {:.0}", s.upload_gb_per_month, s.download_gb_per_month),
                ]
            })
            .collect();
        out.push_str(&md_table(&headers, &rows));
        if let Some(idle) = &res.idle {
            out.push_str(&format!("\nIdle baseline: {}\n", ping_cell(&idle.summary.latency)));
        }
        out.push('\n');
    }
    out
}

/// Seed 004: achieved vs idealized rate per t_ipi, per timer strategy.
fn pacing(outs: &[PointOutcome]) -> String {
    let mut out = String::new();
    let mut timers: Vec<String> = vec![];
    for o in outs {
        if let Some(p) = &o.pacing {
            if !timers.contains(&p.timer) {
                timers.push(p.timer.clone());
            }
        }
    }
    let first = outs.iter().find_map(|o| o.pacing.as_ref());
    if let Some(p) = first {
        let m = &p.metadata;
        let line = outs.iter().filter_map(|o| o.pacing.as_ref()).map(|p| p.line_rate_bps).fold(0.0, f64::max);
        out.push_str(&format!(
            "Payload {} B ({} B on a wire), idealized rate = 1/t_ipi x {} B x 8 (payload; the ratio is the same for wire bytes); emulated line for tick/ccid3 timers {}; kernel {} (CONFIG_HZ {}), {} CPUs, load {}; {}.\n\n",
            p.payload_bytes, p.wire_bytes, p.payload_bytes, if line > 0.0 { fmt_rate_human(line) } else { "-".into() }, m.kernel, m.kernel_hz, m.cpus, m.loadavg, m.transport
        ));
    }
    for t in &timers {
        let mut pts: Vec<&crate::pacing::PacingResult> = outs.iter().filter_map(|o| o.pacing.as_ref()).filter(|p| &p.timer == t).collect();
        pts.sort_by_key(|p| p.ipi_ns);
        let spec = TimerSpec::parse(t).ok();
        let gran = spec.and_then(|s| s.gran_ns());
        let is_ccid3 = matches!(spec, Some(TimerSpec::Ccid3 { .. }));
        out.push_str(&format!("### timer {t}{}\n\n", gran.map(|g| format!(" (t_gran {})", fmt_duration_ns(g))).unwrap_or_default()));
        let headers = [
            "t_ipi", "ideal", "achieved", "achieved/ideal", "model", "sent/ideal", "burst factor", "max back-to-back", "gaps within 10%", "gap p50",
            "gap p99", "lost", "host stalls",
        ];
        let rows: Vec<Vec<String>> = pts
            .iter()
            .map(|p| {
                vec![
                    fmt_duration_ns(p.ipi_ns),
                    fmt_rate_human(p.ideal_bps),
                    fmt_rate_human(p.achieved_bps),
                    format!("{:.4}", p.ratio),
                    p.model_ratio.map(|m| format!("{m:.4}")).unwrap_or_else(|| "-".into()),
                    format!("{:.4}", p.sent_ratio),
                    format!("{:.2}", p.burst_factor),
                    p.max_back_to_back.to_string(),
                    format!("{:.1}%", p.gaps_within_10pct * 100.0),
                    fmt_duration_sig3(p.gap_p50_ns),
                    fmt_duration_sig3(p.gap_p99_ns),
                    format!("{} of {}", p.lost, p.sent),
                    match &p.host {
                        Some(h) => format!("{} of {}{}", h.stalls, h.waits + p.sent, if h.disturbed { " *" } else { "" }),
                        None => "-".into(),
                    },
                ]
            })
            .collect();
        out.push_str(&md_table(&headers, &rows));
        let disturbed: Vec<&crate::pacing::HostTiming> = pts.iter().filter_map(|p| p.host.as_ref()).filter(|h| h.disturbed).collect();
        if !disturbed.is_empty() {
            let steal = disturbed.iter().map(|h| h.cpu_steal_pct).fold(0.0, f64::max);
            let worst = disturbed.iter().map(|h| h.wake_late_max_ns).max().unwrap_or(0);
            out.push_str(&format!(
                "\n\\* the host stopped the sender for longer than a stall (max(t_gran or t_ipi, 1 ms)) in more than 1% of its waits and sends or of the run, \
                 in every one of up to 3 runs (worst wake-up {} late, hypervisor steal up to {steal:.1}%): these rows' gaps and burst factors show the machine, \
                 {}; compare the model column, or re-run on a quieter machine.\n",
                fmt_duration_sig3(worst),
                if spec == Some(TimerSpec::Precise) {
                    "while achieved/ideal holds (the precise pacer makes up lost time with a burst)"
                } else {
                    "and so does achieved/ideal (this timer does not make up lost time)"
                }
            ));
        }
        if !pts.is_empty() {
            let r: Vec<f64> = pts.iter().map(|p| p.ratio).collect();
            let worst = r.iter().map(|x| (x - 1.0).abs()).fold(0.0, f64::max);
            match gran {
                None => out.push_str(&format!(
                    "\nachieved/ideal {:.4} .. {:.4} over {} .. {}: largest deviation {:.2}%\n\n",
                    r.iter().cloned().fold(f64::INFINITY, f64::min),
                    r.iter().cloned().fold(0.0, f64::max),
                    fmt_duration_ns(pts[0].ipi_ns),
                    fmt_duration_ns(pts[pts.len() - 1].ipi_ns),
                    worst * 100.0
                )),
                Some(g) => {
                    // the ccid3 model's threshold is its 1 ms truncation unit (= t_gran at HZ=1000)
                    let g = if is_ccid3 { 1_000_000 } else { g };
                    let below: Vec<f64> = pts.iter().filter(|p| p.ipi_ns < g).map(|p| p.ratio).collect();
                    let above: Vec<f64> = pts.iter().filter(|p| p.ipi_ns >= g).map(|p| p.ratio).collect();
                    let span = |v: &[f64]| {
                        if v.is_empty() {
                            "no points".to_string()
                        } else {
                            let mean = v.iter().sum::<f64>() / v.len() as f64;
                            format!("{:.2} .. {:.2} (mean {:.2})", v.iter().cloned().fold(f64::INFINITY, f64::min), v.iter().cloned().fold(0.0, f64::max), mean)
                        }
                    };
                    let (lo, hi) = if is_ccid3 { ("t_ipi < 1 ms", "t_ipi >= 1 ms") } else { ("t_ipi < t_gran", "t_ipi >= t_gran") };
                    let model = if is_ccid3 {
                        "a constant factor: extra packets leave early in every period without advancing t_nom"
                    } else {
                        "the model predicts t_ipi / (floor(t_ipi/t_gran) * t_gran)"
                    };
                    out.push_str(&format!(
                        "\n{lo}: achieved/ideal {} — the rate is set by the line and the CPU, not by t_ipi.\n{hi}: achieved/ideal {} — {model}.\n",
                        span(&below),
                        span(&above)
                    ));
                    if is_ccid3 {
                        out.push_str(&format!(
                            "seed 004 (Linux 2.6.20, HZ = 1000): out of control below t_gran, a constant factor of about {} above it. \
                             The factor depends on where the first send falls in a tick (docs/recipes.md), which is why ours varies around it.\n",
                            crate::seeds::SEED004_FACTOR
                        ));
                    }
                    out.push('\n');
                }
            }
        }
    }
    out
}

fn generic(r: &Recipe, outs: &[PointOutcome]) -> String {
    let mut headers: Vec<String> = r.grid.iter().map(|a| a.name.clone()).collect();
    if r.repeat > 1 {
        headers.push("rep".into());
    }
    let metric_cols: Vec<(&str, &str)> = match r.kind {
        RecipeKind::Lab => vec![
            ("upload_mbps", "up Mbit/s"),
            ("download_mbps", "down Mbit/s"),
            ("latency_p50_ms", "RTT p50 ms"),
            ("latency_p99_ms", "RTT p99 ms"),
            ("added_latency_ms", "added ms"),
            ("witness_p50_ms", "witness p50 ms"),
            ("latency_lost", "probes lost"),
            ("bottleneck_drops", "bottleneck drops"),
            ("local_drops", "local drops"),
            ("retransmits", "retransmits"),
            ("responsiveness_hz", "resp. Hz"),
            ("smoothness_hz", "smooth. Hz"),
        ],
        RecipeKind::Pacing => vec![
            ("ideal_mbps", "ideal Mbit/s"),
            ("achieved_mbps", "achieved Mbit/s"),
            ("ratio", "achieved/ideal"),
            ("burst_factor", "burst factor"),
            ("lost", "lost"),
        ],
    };
    if r.kind == RecipeKind::Lab {
        headers.push("phase".into());
    }
    headers.extend(metric_cols.iter().map(|(_, h)| h.to_string()));
    let mut rows = vec![];
    let mut sorted: Vec<&PointOutcome> = outs.iter().collect();
    sorted.sort_by_key(|o| (o.point.combo, o.point.rep));
    for o in sorted {
        let mut base: Vec<String> = o.point.params.iter().map(|(_, v)| v.clone()).collect();
        if r.repeat > 1 {
            base.push(o.point.rep.to_string());
        }
        for row in &o.rows {
            let mut cells = base.clone();
            if r.kind == RecipeKind::Lab {
                cells.push(row.phase.clone());
            }
            for (m, _) in &metric_cols {
                let count = m.ends_with("_drops") || m.ends_with("_lost") || *m == "retransmits" || *m == "lost";
                cells.push(opt(Row::get(row, r.kind, m), |v| if count { format!("{v:.0}") } else { sig3(v) }));
            }
            rows.push(cells);
        }
    }
    let h: Vec<&str> = headers.iter().map(|s| s.as_str()).collect();
    let mut out = md_table(&h, &rows);
    if r.repeat > 1 {
        out.push_str(&format!("\nOver the {} repetitions (mean, and min .. max):\n\n", r.repeat));
        out.push_str(&repeat_summary(r, outs, &metric_cols));
    }
    // the context of each point; points that share one are listed together
    let mut ctx: Vec<(String, Vec<usize>)> = vec![];
    for o in outs {
        if let Some(res) = &o.lab {
            let c = lab_context(res);
            match ctx.iter_mut().find(|(x, _)| *x == c) {
                Some((_, v)) => v.push(o.point.index),
                None => ctx.push((c, vec![o.point.index])),
            }
        }
    }
    if ctx.len() == 1 {
        out.push_str(&format!("\n{}\n", ctx[0].0));
    } else {
        out.push('\n');
        for (c, pts) in ctx {
            out.push_str(&format!("- points {}: {c}\n", pts.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")));
        }
    }
    out
}

/// Mean and range of each metric over the repetitions of a grid point.
fn repeat_summary(r: &Recipe, outs: &[PointOutcome], cols: &[(&str, &str)]) -> String {
    let mut headers: Vec<String> = r.grid.iter().map(|a| a.name.clone()).collect();
    headers.push("n".into());
    if r.kind == RecipeKind::Lab {
        headers.push("phase".into());
    }
    headers.extend(cols.iter().map(|(_, h)| h.to_string()));
    // (combo, phase) -> rows
    let mut keys: Vec<(usize, String)> = vec![];
    for o in outs {
        for row in &o.rows {
            let k = (o.point.combo, row.phase.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys.sort_by_key(|k| k.0);
    let mut rows = vec![];
    for (combo, phase) in keys {
        let members: Vec<(&PointOutcome, &Row)> = outs
            .iter()
            .filter(|o| o.point.combo == combo)
            .flat_map(|o| o.rows.iter().filter(|x| x.phase == phase).map(move |x| (o, x)))
            .collect();
        let Some((first, _)) = members.first() else { continue };
        let mut cells: Vec<String> = first.point.params.iter().map(|(_, v)| v.clone()).collect();
        cells.push(members.len().to_string());
        if r.kind == RecipeKind::Lab {
            cells.push(phase.clone());
        }
        for (m, _) in cols {
            let v: Vec<f64> = members.iter().filter_map(|(_, row)| row.get(r.kind, m)).collect();
            if v.is_empty() {
                cells.push("-".into());
            } else {
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
                let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                cells.push(format!("{} ({} .. {})", sig3(mean), sig3(lo), sig3(hi)));
            }
        }
        rows.push(cells);
    }
    let h: Vec<&str> = headers.iter().map(|s| s.as_str()).collect();
    md_table(&h, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_cells() {
        let t = md_table(&["a", "long header"], &[vec!["1".into(), "2".into()]]);
        assert_eq!(t, "| a | long header |\n| - | ----------- |\n| 1 | 2           |\n");
        let l = LatencyStats { sent: 50, received: 50, min_ms: 2.6, avg_ms: 3.3, max_ms: 23.0, mdev_ms: 2.9, ..Default::default() };
        assert_eq!(ping_cell(&l), "min 2.60ms avg 3.30ms max 23.0ms mdev 2.90ms n 50");
        assert_eq!(load_name(1, 0), "1 upload");
        assert_eq!(load_name(2, 1), "2 uploads + 1 download");
        assert_eq!(strip_lab_id("blab-ac4930-client/eth0"), "client/eth0");
        assert_eq!(strip_lab_id("eth0"), "eth0");
    }

    fn paced(ipi_us: u64, timer: TimerSpec, stalls: &[u64]) -> PointOutcome {
        use crate::pacing::{analyze, host_timing, model_ratio, simulate, PacingConfig};
        let c = PacingConfig { ipi_ns: ipi_us * 1000, timer, payload: 1424, duration_ns: 1_000_000_000, line_rate_bps: 100e6 };
        let d = simulate(&c, 5_000, 0);
        let mut r = analyze(&c, &d, &d);
        let mut late = vec![10_000u64; 200];
        late.extend_from_slice(stalls);
        r.host = Some(host_timing(&c, late, vec![5_000; d.len()], 12.5));
        r.model_ratio = Some(model_ratio(&c, 5_000, 10_000));
        PointOutcome {
            status: "ok".into(),
            ok: true,
            pacing: Some(r),
            ..PointOutcome::new(crate::points::Point { index: 1, combo: 0, rep: 1, params: vec![] }, vec![])
        }
    }

    #[test]
    fn pacing_table_marks_what_the_host_disturbed() {
        let tick = TimerSpec::Tick { hz: 250 };
        // 5 ms at tick:250: clean; 10 ms: a 30 ms stall (3% of the run)
        let t = pacing(&[paced(5000, tick, &[]), paced(10_000, tick, &[30_000_000])]);
        assert!(t.contains("| 5ms   |") && t.contains("| 1.2500         | 1.2500 |"), "{t}");
        let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("| 5ms") || l.starts_with("| 10ms")).collect();
        assert!(!rows[0].contains(" * ") && rows[1].contains("| 1 of 326 * "), "{rows:?}");
        assert!(rows[0].contains("| 0 of "), "{rows:?}");
        assert!(t.contains("worst wake-up 30.0ms late, hypervisor steal up to 12.5%"), "{t}");
        assert!(t.contains("and so does achieved/ideal (this timer does not make up lost time)"), "{t}");
        // the precise pacer keeps its rate through a stall: the note says so
        let t = pacing(&[paced(1000, TimerSpec::Precise, &[30_000_000])]);
        assert!(t.contains("while achieved/ideal holds"), "{t}");
        // nothing disturbed, no note
        let t = pacing(&[paced(1000, TimerSpec::Precise, &[])]);
        assert!(!t.contains("show the machine"), "{t}");
    }
}
