//! End-to-end tests of the emulator in a client -- router -- server namespace
//! topology (root only; skipped otherwise). Numbers are checked against
//! analytic truth: RTT = 2 x delay, goodput = rate x payload/packet,
//! fifo:1000 at 10 Mbit/s = 1.2 s of queue, fq_codel ~ target.

mod emu_util;
use bloatlab_emulator::*;
use emu_util::*;
use std::path::Path;
use std::time::Duration;

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_bloatlab"))
}

macro_rules! need_root {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("SKIP: emulator end-to-end test (it needs root, /dev/net/tun, iproute2 and a CPU the hypervisor leaves alone): {why}");
            return;
        }
    };
}

/// The emulator configuration `bloatlab emulate` builds from these link options.
fn cfg(args: &[&str]) -> EmulatorConfig {
    let out = std::process::Command::new(exe()).arg("emulate").arg("--print-config").args(args).output().expect("run bloatlab emulate");
    assert!(out.status.success(), "bloatlab emulate {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("an emulator configuration")
}

fn start(t: &Topo, c: &EmulatorConfig) -> EmulatorHandle {
    start_in_netns(exe(), &t.router, c, &["r-cli"], &["r-srv"], &t.stats_path()).expect("start emulator")
}

/// delay 20 ms each way: idle RTT 40 ms +/- 1 ms, over IPv4 and IPv6.
/// Never early, in any run. The median is a timing figure: one CI run on
/// a shared 2-vCPU VM read 41.01 ms over IPv6 (30 probes), so a second run
/// is allowed after a miss and both are printed; two misses fail.
#[test]
fn delay_gives_exact_idle_rtt_v4_v6() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let mut misses = vec![];
        for attempt in 1..=2 {
            let steal = StealMeter::start();
            let t = Topo::new();
            let h = start(&t, &cfg(&["--delay", "20ms", "--seed", "1"]));
            let e4 = udp_echo(&t.server, "10.77.2.2:7000");
            let e6 = udp_echo(&t.server, "[fd77:2::2]:7000");
            let p4 = udp_probes(&t.client, "10.77.2.2:7000", 60, Duration::from_millis(10), 64);
            let p6 = udp_probes(&t.client, "[fd77:2::2]:7000", 30, Duration::from_millis(10), 64);
            e4.store(true, std::sync::atomic::Ordering::Relaxed);
            e6.store(true, std::sync::atomic::Ordering::Relaxed);
            let stats = h.stop().expect("stop");
            let r4 = rtts_ms(&p4, Duration::ZERO);
            let r6 = rtts_ms(&p6, Duration::ZERO);
            eprintln!(
                "run {attempt}: IPv4 RTT median {:.3} ms (n={}), IPv6 {:.3} ms (n={})",
                median_ms(&r4),
                r4.len(),
                median_ms(&r6),
                r6.len()
            );
            assert_eq!(r4.len(), 60, "IPv4 probes lost");
            assert_eq!(r6.len(), 30, "IPv6 probes lost");
            for r in [&r4, &r6] {
                // Never early: a delay cannot be shortened.
                assert!(r.iter().all(|&x| x >= 40.0), "a probe came back before the 40 ms delay: {r:?}");
            }
            let up = &stats.counters["up"];
            // 90 probes, plus any IPv6 neighbour discovery the client sends through
            assert!(up["link"]["delivered"].as_u64().unwrap() >= 90);
            assert_eq!(stats.queues.len(), 2);
            assert_eq!(stats.queues[0].role, "bottleneck-up");
            // TUN devices and rules are gone with the process
            let out = std::process::Command::new("ip").args(["-n", &t.router, "rule"]).output().unwrap();
            assert!(!String::from_utf8_lossy(&out.stdout).contains("7701"), "rules left behind");
            let out = std::process::Command::new("ip").args(["-n", &t.router, "link"]).output().unwrap();
            assert!(!String::from_utf8_lossy(&out.stdout).contains("emu-up"), "tun left behind");
            let medians = [median_ms(&r4), median_ms(&r6)];
            if medians.iter().any(|m| (m - 40.0).abs() > steal.tol_or(1.0, 3.0)) {
                misses.push(medians);
                continue;
            }
            let top = steal.tol_or(0.0, 20.0);
            for r in [&r4, &r6] {
                // Late only by the host's scheduling: 95% within 5 ms, none
                // beyond 20 ms (one probe in 60 once came 7 ms late on a
                // shared 2-vCPU VM).
                let mut sorted = r.clone();
                sorted.sort_by(f64::total_cmp);
                let p95 = sorted[(sorted.len() * 95).div_ceil(100) - 1];
                assert!(p95 < 45.0 + top, "p95 {p95} ms: {r:?}");
                assert!(sorted[sorted.len() - 1] < 60.0 + top, "{r:?}");
            }
            // timing quality is measured by bench/emulator.sh; here only a sanity bound
            let p50 = up["release_error"]["p50_us"].as_f64().unwrap();
            assert!(p50 < 200.0, "release error p50 {p50} us");
            return;
        }
        panic!("median RTT [IPv4, IPv6] {misses:?} ms in both runs, want 40 +/- 1");
    });
}

/// rate 10 Mbit/s: TCP goodput within 3% of rate x 1448/1500.
#[test]
fn rate_gives_expected_goodput() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let steal = StealMeter::start();
        let t = Topo::new();
        let h = start(&t, &cfg(&["--rate", "10mbit", "--delay", "5ms", "--queue", "fifo:100"]));
        let b = tcp_bulk(&t.client, &t.server, "10.77.2.2:7001", "cubic", Duration::from_secs(4), None);
        let stats = h.stop().unwrap();
        let g = b.goodput_bps(Duration::from_secs(1), Duration::from_secs(4));
        let want = 10e6 * 1448.0 / 1500.0;
        eprintln!("goodput {:.3} Mbit/s, expected {:.3}", g / 1e6, want / 1e6);
        assert!((g / want - 1.0).abs() < steal.tol_or(0.03, 0.15), "goodput {g} vs {want}");
        let up = &stats.counters["up"];
        assert!(up["queue"]["dequeued"].as_u64().unwrap() > 2000);
    });
}

/// fifo:1000 at 10 Mbit/s under one cubic upload: ~1.2 s of added latency.
#[test]
fn fifo_1000_bloats_to_1200ms() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let t = Topo::new();
        let h = start(&t, &cfg(&["--rate", "10mbit", "--delay", "5ms", "--queue", "fifo:1000"]));
        let echo = udp_echo(&t.server, "10.77.2.2:7000");
        let client = t.client.clone();
        let probes = std::thread::spawn(move || udp_probes(&client, "10.77.2.2:7000", 800, Duration::from_millis(20), 64));
        // Cubic leaves slow start early (HyStart sees the queue grow) and then
        // needs ~13 s to fill 1000 packets: this test runs 16 s, with 4 MB socket
        // buffers so that the window, not the buffers, limits the flow.
        let b = tcp_bulk(&t.client, &t.server, "10.77.2.2:7002", "cubic", Duration::from_secs(16), Some(4 << 20));
        let p = probes.join().unwrap();
        echo.store(true, std::sync::atomic::Ordering::Relaxed);
        let stats = h.stop().unwrap();
        let all = rtts_ms(&p, Duration::ZERO);
        let max = all.iter().cloned().fold(0.0, f64::max);
        // after the queue first overflowed: cubic backs off to 0.7 x W, so the queue stays between ~0.7 and 1.2 s
        let first_full = p.iter().find(|(_, r)| r.is_some_and(|d| d.as_millis() > 1100)).map(|x| x.0).unwrap_or(Duration::MAX);
        let loaded = rtts_ms(&p, first_full);
        let med = median_ms(&loaded);
        let srtt_max = b.srtt_ms.iter().map(|x| x.1).fold(0.0, f64::max);
        let up = &stats.counters["up"];
        eprintln!(
            "fifo:1000 loaded RTT median {med:.1} ms max {max:.1} ms (n={}); sender srtt max {srtt_max:.1} ms; queue max backlog {} pkts, drops {}, sojourn max {} us",
            loaded.len(),
            up["queue"]["max_backlog_packets"],
            up["queue"]["dropped"],
            up["sojourn"]["max_us"]
        );
        // analytic: 1000 x 1500 B x 8 / 10 Mbit/s = 1200 ms of queue, + 10 ms base.
        // (The probes take ~60 of the 1000 places with 92-byte packets, so a full
        // queue holds ~1.13-1.2 s; the same 10% band applies to the RTT.)
        assert_eq!(up["queue"]["max_backlog_packets"].as_u64().unwrap(), 1000);
        // no GSO super-packets reach the emulator: 1000 packets are at most 1000 MTUs
        assert!(up["queue"]["max_backlog_bytes"].as_u64().unwrap() <= 1000 * 1500);
        assert!(up["queue"]["dropped_overlimit"].as_u64().unwrap() > 0);
        let soj_max_ms = up["sojourn"]["max_us"].as_f64().unwrap() / 1e3;
        assert!(soj_max_ms > 1100.0 && soj_max_ms < 1205.0, "max sojourn {soj_max_ms} ms");
        assert!(max > 1100.0 && max < 1260.0, "max loaded RTT {max} ms");
        assert!(loaded.len() > 50, "queue filled too late: {first_full:?}");
        assert!(med > 700.0, "median loaded RTT after the first overflow {med} ms");
    });
}

/// fq_codel under the same load keeps the bulk flow's RTT near target + base
/// and the sparse probe flow's RTT near the base RTT.
#[test]
fn fq_codel_keeps_latency_low() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let t = Topo::new();
        let h = start(&t, &cfg(&["--rate", "10mbit", "--delay", "10ms", "--queue", "fq_codel"]));
        let echo = udp_echo(&t.server, "10.77.2.2:7000");
        let client = t.client.clone();
        let probes = std::thread::spawn(move || udp_probes(&client, "10.77.2.2:7000", 200, Duration::from_millis(20), 64));
        let b = tcp_bulk(&t.client, &t.server, "10.77.2.2:7003", "cubic", Duration::from_secs(4), None);
        let p = probes.join().unwrap();
        echo.store(true, std::sync::atomic::Ordering::Relaxed);
        let stats = h.stop().unwrap();
        let loaded = rtts_ms(&p, Duration::from_millis(1500));
        let med = median_ms(&loaded);
        let srtt: Vec<f64> = b.srtt_ms.iter().filter(|(t, _)| *t > Duration::from_secs(2)).map(|x| x.1).collect();
        let srtt_med = median_ms(&srtt);
        let g = b.goodput_bps(Duration::from_secs(1), Duration::from_secs(4));
        let up = &stats.counters["up"];
        eprintln!(
            "fq_codel: probe RTT median {med:.2} ms, bulk srtt median {srtt_med:.2} ms, goodput {:.2} Mbit/s, aqm drops {}, sojourn p50 {} us p99 {} us",
            g / 1e6,
            up["queue"]["dropped_aqm"],
            up["sojourn"]["p50_us"],
            up["sojourn"]["p99_us"]
        );
        // sparse probes: base RTT 20 ms plus at most one packet time or so
        assert!(med < 25.0, "probe RTT {med} ms");
        // bulk flow: 20 ms base + CoDel's 5 ms target, with headroom for the control loop
        assert!(srtt_med < 20.0 + 5.0 + 15.0, "bulk srtt {srtt_med} ms");
        assert!(up["queue"]["dropped_aqm"].as_u64().unwrap() > 0);
        assert!(g > 0.9 * 10e6 * 1448.0 / 1500.0, "goodput {g}");
        let flows = up["queue_details"]["per_flow"].as_array().unwrap();
        assert!(flows.len() >= 2, "per-flow stats: {flows:?}");
    });
}

/// An unshaped direction passes 64 KB GSO packets whole (veth TSO is on by
/// default), and TCP data arrives intact (checksums completed by the kernel).
#[test]
fn unshaped_direction_passes_gso_packets() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let t = Topo::new();
        let h = start(&t, &cfg(&["--delay", "1ms"]));
        let b = tcp_bulk(&t.client, &t.server, "10.77.2.2:7004", "cubic", Duration::from_millis(1500), None);
        let stats = h.stop().unwrap();
        let up = &stats.counters["up"];
        let g = b.goodput_bps(Duration::from_millis(500), Duration::from_millis(1500));
        eprintln!("unshaped: goodput {:.2} Gbit/s, largest packet {} B, offload {}", g / 1e9, up["max_packet_bytes"], up["offload"]);
        assert_eq!(up["offload"], true);
        assert!(up["max_packet_bytes"].as_u64().unwrap() > 1500);
        assert!(g > 100e6, "goodput {g}");
        assert_eq!(up["write_errors"].as_u64().unwrap(), 0);
    });
}

/// A mahimahi trace of one 1500-byte opportunity per ms is 12 Mbit/s:
/// TCP goodput matches it (x 1448/1500) within 3%. It is exact to 0.01%
/// unless cubic's probing overflows the queue inside the 1-4 s window: the
/// receiver then holds what follows the lost packet until its repair, one
/// full queue later, and the window reads that much low. Through 200
/// packets (~250 ms) that read 4.5% low (CI, and 2 of 7 runs here); through
/// the 50 packets used here (~60 ms) 1.1-1.4% low (2 of 6). A second run is
/// allowed and both are printed; two misses fail.
#[test]
fn trace_rate_gives_expected_goodput() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let want = 12e6 * 1448.0 / 1500.0;
        let mut misses = vec![];
        for attempt in 1..=2 {
            let steal = StealMeter::start();
            let t = Topo::new();
            let trace = t.dir.path().join("12mbit.trace");
            // two opportunities at 1 ms, none at 2 ms, one at 3 ms: 3 per 3 ms = 12 Mbit/s on average
            std::fs::write(&trace, "1\n1\n3\n").unwrap();
            let ts = trace.to_str().unwrap().to_string();
            let h = start(&t, &cfg(&["--trace-up", &ts, "--trace-down", &ts, "--delay", "5ms", "--queue", "fifo:50"]));
            let b = tcp_bulk(&t.client, &t.server, "10.77.2.2:7005", "cubic", Duration::from_secs(4), None);
            let stats = h.stop().unwrap();
            assert_eq!(stats.counters["up"]["offload"], false);
            let g = b.goodput_bps(Duration::from_secs(1), Duration::from_secs(4));
            eprintln!("trace (run {attempt}): goodput {:.3} Mbit/s, expected {:.3}", g / 1e6, want / 1e6);
            if (g / want - 1.0).abs() < steal.tol_or(0.03, 0.15) {
                return;
            }
            misses.push(g);
        }
        panic!("goodput {misses:?} vs {want} in both runs");
    });
}

/// Bernoulli loss of 10% each way loses ~19% of UDP echo round trips;
/// jitter of +/-5 ms keeps the RTT within 40 +/- 10 ms and packet order.
#[test]
fn loss_and_jitter() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let steal = StealMeter::start();
        let t = Topo::new();
        let h = start(&t, &cfg(&["--loss", "10%", "--delay", "20ms", "--jitter", "5ms", "--seed", "7"]));
        let echo = udp_echo(&t.server, "10.77.2.2:7000");
        let p = udp_probes(&t.client, "10.77.2.2:7000", 400, Duration::from_millis(5), 64);
        echo.store(true, std::sync::atomic::Ordering::Relaxed);
        let stats = h.stop().unwrap();
        let r = rtts_ms(&p, Duration::ZERO);
        let lost = 1.0 - r.len() as f64 / p.len() as f64;
        let expect = 1.0 - 0.9f64 * 0.9;
        let sd = (expect * (1.0 - expect) / p.len() as f64).sqrt();
        eprintln!("loss: {:.1}% of round trips lost (expected {:.1}% +/- {:.1}), RTT {:.1}..{:.1} ms", lost * 100.0, expect * 100.0, 4.0 * sd * 100.0, r.iter().cloned().fold(f64::MAX, f64::min), r.iter().cloned().fold(0.0, f64::max));
        assert!((lost - expect).abs() < 4.0 * sd, "lost {lost}");
        // Never early: jitter cannot release a packet before delay - jitter.
        assert!(r.iter().all(|&x| x >= 29.9), "{r:?}");
        // Never later than delay + jitter (2 x (20 + 5) ms), up to the echo's own
        // scheduling: a round trip also waits for two wake-ups of the echo and
        // probe threads, which a busy 2-core machine delays by a ms now and then;
        // so 99% within 51 ms and none beyond 55 ms on a quiet machine; a VM
        // that loses its CPU delays the echo too, so then 90% must stay within.
        let within = r.iter().filter(|&&x| x <= 51.0).count() as f64 / r.len() as f64;
        assert!(within >= 1.0 - steal.tol_or(0.01, 0.1), "{:.1}% of RTTs above 51 ms: {r:?}", (1.0 - within) * 100.0);
        if steal.tol_or(0.0, 1.0) == 0.0 {
            assert!(r.iter().all(|&x| x <= 55.0), "a round trip beyond delay + jitter + 5 ms: {r:?}");
        }
        let up = &stats.counters["up"];
        assert!(up["link"]["lost"].as_u64().unwrap() > 10);
        assert!(up["link"]["jitter_held_for_order"].as_u64().unwrap() > 0);
    });
}

fn router_state(t: &Topo) -> (String, String) {
    let r = std::process::Command::new("ip").args(["-n", &t.router, "rule"]).output().unwrap();
    let l = std::process::Command::new("ip").args(["-n", &t.router, "link"]).output().unwrap();
    (String::from_utf8_lossy(&r.stdout).into_owned(), String::from_utf8_lossy(&l.stdout).into_owned())
}

/// SIGKILL leaves no TUN device (they close with the process); a new emulator
/// in the same namespace replaces the stale rules instead of stacking them,
/// and a clean stop removes its rules.
#[test]
fn teardown_after_sigkill_and_restart() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let t = Topo::new();
        let h = start(&t, &cfg(&["--delay", "1ms"]));
        let (rules, links) = router_state(&t);
        assert!(rules.contains("lookup 7701") && rules.contains("lookup 7702"), "{rules}");
        assert!(links.contains("emu-up") && links.contains("emu-down"), "{links}");
        let pid = h.pid().unwrap();
        bloatlab_host::process::signal(pid as u32, bloatlab_host::process::Signal::Kill);
        std::thread::sleep(Duration::from_millis(300));
        let (rules, links) = router_state(&t);
        assert!(!links.contains("emu-up:"), "TUN device outlived the process: {links}");
        assert!(rules.contains("lookup 7701"), "rules stay after SIGKILL: {rules}");
        assert!(h.stop().is_err(), "no statistics after SIGKILL");
        // a new emulator works and does not stack rules
        let h = start(&t, &cfg(&["--delay", "10ms"]));
        let (rules, _) = router_state(&t);
        assert_eq!(rules.matches("lookup 7701").count(), 1, "{rules}");
        let echo = udp_echo(&t.server, "10.77.2.2:7000");
        let p = udp_probes(&t.client, "10.77.2.2:7000", 10, Duration::from_millis(10), 64);
        echo.store(true, std::sync::atomic::Ordering::Relaxed);
        // The restarted link forwards with its delay (delay accuracy itself is
        // delay_gives_exact_idle_rtt_v4_v6's job).
        let m = median_ms(&rtts_ms(&p, Duration::ZERO));
        assert!((m - 20.0).abs() < 3.0, "RTT {m}");
        h.stop().unwrap();
        let (rules, links) = router_state(&t);
        assert!(!rules.contains("7701") && !rules.contains("7702"), "{rules}");
        assert!(!links.contains("emu-up:") && !links.contains("emu-down:"), "{links}");
    });
}

/// With ECN negotiated (net.ipv4.tcp_ecn=1 in the client and server
/// namespaces), CoDel marks CE instead of dropping; the rewritten IPv4
/// header checksum is valid (the flow keeps its full rate).
#[test]
fn codel_marks_ecn_capable_traffic() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let t = Topo::new();
        for ns in [&t.client, &t.server] {
            let out = std::process::Command::new("ip").args(["netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_ecn=1"]).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        let h = start(&t, &cfg(&["--rate", "10mbit", "--delay", "5ms", "--queue", "codel"]));
        let b = tcp_bulk(&t.client, &t.server, "10.77.2.2:7006", "cubic", Duration::from_secs(4), None);
        let stats = h.stop().unwrap();
        let q = &stats.counters["up"]["queue"];
        let g = b.goodput_bps(Duration::from_secs(1), Duration::from_secs(4));
        eprintln!("ecn: marked {}, aqm drops {}, goodput {:.2} Mbit/s", q["ecn_marked"], q["dropped_aqm"], g / 1e6);
        assert!(q["ecn_marked"].as_u64().unwrap() > 0);
        assert_eq!(q["dropped_aqm"].as_u64().unwrap(), 0);
        assert!(g > 0.9 * 10e6 * 1448.0 / 1500.0, "goodput {g}");
    });
}

/// PIE under one cubic upload holds the queueing delay near its 15 ms
/// target with early drops, without reaching its 1000-packet limit.
#[test]
fn pie_holds_delay_near_target() {
    need_root!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    guarded(move || {
        let t = Topo::new();
        let h = start(&t, &cfg(&["--rate", "10mbit", "--delay", "5ms", "--queue", "pie", "--seed", "3"]));
        let b = tcp_bulk(&t.client, &t.server, "10.77.2.2:7007", "cubic", Duration::from_secs(6), Some(4 << 20));
        let stats = h.stop().unwrap();
        let up = &stats.counters["up"];
        // mean sojourn over the last 3 s from the series
        let series = up["series"].as_array().unwrap();
        let tail: Vec<f64> = series[series.len().saturating_sub(30)..].iter().map(|s| s["sojourn_mean_us"].as_f64().unwrap() / 1e3).collect();
        let mean = tail.iter().sum::<f64>() / tail.len() as f64;
        let g = b.goodput_bps(Duration::from_secs(2), Duration::from_secs(6));
        eprintln!("pie: mean sojourn (last 3 s) {mean:.1} ms, aqm drops {}, overlimit {}, drop_prob {}, goodput {:.2} Mbit/s", up["queue"]["dropped_aqm"], up["queue"]["dropped_overlimit"], up["queue_details"]["drop_prob"], g / 1e6);
        assert!(up["queue"]["dropped_aqm"].as_u64().unwrap() > 0);
        assert_eq!(up["queue"]["dropped_overlimit"].as_u64().unwrap(), 0);
        assert!(mean > 2.0 && mean < 40.0, "mean sojourn {mean} ms");
        assert!(g > 0.85 * 10e6 * 1448.0 / 1500.0, "goodput {g}");
    });
}
