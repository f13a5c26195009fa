//! Goodput never exceeds what the bottleneck carried. 16 BBR flows each way
//! through 10 Mbit/s and a 100-packet FIFO: the sum of the flows' goodput
//! over the steady window must stay at or under the TCP payload the
//! bottleneck qdisc sent in the same window (its byte counter, which counts
//! IP packets, less 52 bytes of IPv4 and TCP headers per packet;
//! retransmissions count there, not in goodput), and near it (the link is
//! full). The lab's htb shapes 1514-byte frames, so the payload ceiling is
//! about 10 Mbit/s x 1448 / 1514 = 9.56 Mbit/s (htb's own accuracy aside).
mod lab_util;
use bloatlab_metrics::{DEFAULT_TRIM_END, DEFAULT_TRIM_START};
use bloatlab_metrics::queue::carried_payload_bps;
use lab_util::*;

/// The two counters are read by different processes at different instants
/// and meet by interpolation at the window's edges: this much apart is
/// timing alone.
const EDGE_TOLERANCE: f64 = 0.005;

/// Goodput counts what the receivers got in sequence; the qdisc counts what
/// it sent. At either edge of the window the two differ by the data that
/// crossed the bottleneck but waits at a receiver behind a lost packet. All
/// flows together cannot hold more than one loaded round trip of data (it
/// is repaired within about one RTT), so the bound is the phase's p99 RTT
/// over the window's length. Measured here over 16 phases: goodput -0.9% to
/// +0.5% of the carried payload; once on a slower CI machine +1.15% with a
/// 1.7% bound. More than the bound is goodput the link never carried (the
/// issue saw +7.7%).
fn held_bound(p99_rtt_ms: f64, window_s: f64) -> f64 {
    p99_rtt_ms / 1e3 / window_s
}

#[test]
fn goodput_stays_at_or_under_the_payload_the_bottleneck_carried() {
    if skip("goodput_stays_at_or_under_the_payload_the_bottleneck_carried") {
        return;
    }
    guarded(|| {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("g.json");
        let r = run_lab(&json, &["--rate", "10mbit", "--queue", "fifo:100", "--cc", "bbr"], &["--scenarios", "16u0d,0u16d", "--duration", "10s", "--idle", "1s"]);
        let queues = &r.lab.as_ref().unwrap().queues;
        for p in &r.scenarios {
            let (role, goodput) = if p.uploads > 0 { ("bottleneck-up", p.summary.upload_bps) } else { ("bottleneck-down", p.summary.download_bps) };
            let q = queues.iter().find(|q| q.role == role).unwrap_or_else(|| panic!("no {role} series"));
            let carried = carried_payload_bps(q, p.start_ns, p.end_ns, 52).unwrap_or_else(|| panic!("{}: no queue samples around the window", p.name));
            eprintln!(
                "{}: goodput {:.4} Mbit/s, the bottleneck carried {:.4} Mbit/s of payload ({:+.2}%)",
                p.name,
                goodput / 1e6,
                carried / 1e6,
                (goodput / carried - 1.0) * 100.0
            );
            let window_s = (p.end_ns - p.start_ns) as f64 / 1e9 * (1.0 - DEFAULT_TRIM_START - DEFAULT_TRIM_END);
            let held = held_bound(p.summary.latency.p99_ms, window_s);
            eprintln!("{}: bound +{:.2}% (timing {:.1}%, one p99 RTT of {:.0} ms held over {window_s:.1} s)", p.name, (EDGE_TOLERANCE + held) * 100.0, EDGE_TOLERANCE * 100.0, p.summary.latency.p99_ms);
            assert!(held > 0.0 && held < 0.05, "{}: the loaded RTT {} ms is not a 100-packet queue at 10 Mbit/s", p.name, p.summary.latency.p99_ms);
            assert!(goodput <= carried * (1.0 + EDGE_TOLERANCE + held), "{}: goodput {goodput:.0} above the carried {carried:.0}", p.name);
            assert!(goodput >= 0.9 * carried, "{}: goodput {goodput:.0} far below the carried {carried:.0}: the flows did not fill the link", p.name);
            assert!(carried <= 10e6 * 1448.0 / 1514.0 * 1.01, "{}: the counters say more payload than 10 Mbit/s can carry: {carried:.0}", p.name);
        }
    });
}
