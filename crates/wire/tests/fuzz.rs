//! Property-based fuzzing of every wire decoder on stable Rust (proptest):
//! arbitrary and mutated bytes never panic, valid messages round-trip, a
//! probe reply is never larger than its request nor carries its bytes, and
//! the replay window agrees with a plain model. The suite runs a few
//! thousand cases; `bench/fuzz.sh` runs 10^7 (BLOATLAB_FUZZ_CASES).
use bloatlab_model::Secret;
use bloatlab_results::{Direction, HostInfo, TcpInfoSample};
use bloatlab_wire::*;
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> Config {
    let n = std::env::var("BLOATLAB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    Config { cases: n, failure_persistence: None, ..Config::default() }
}

fn secret() -> Secret {
    Secret::from_file_contents(b"fuzzing secret, 24 bytes", "t").unwrap()
}

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Up), Just(Direction::Down)]
}

fn text() -> impl Strategy<Value = String> {
    // Any Unicode, quotes and escapes included.
    any::<String>().prop_map(|s| s.chars().take(40).collect())
}

fn client_msg() -> impl Strategy<Value = ClientMsg> {
    let flow = (any::<u32>(), direction(), any::<u8>(), proptest::option::of((any::<u64>(), any::<u32>())))
        .prop_map(|(id, direction, dscp, udp)| FlowSpec { id, direction, dscp, udp: udp.map(|(rate_bps, payload)| UdpParams { rate_bps, payload }), segment_bytes: 0 });
    prop_oneof![
        text().prop_map(|answer| ClientMsg::Auth { answer }),
        (text(), text(), any::<u64>(), any::<u32>(), any::<u32>(), proptest::collection::vec(text(), 0..4), any::<u32>(), any::<bool>()).prop_map(
            |(hostname, cc, planned_duration_ms, max_flows, sample_interval_ms, scenarios, socket_buffer, rx_copy)| ClientMsg::NewTest {
                client: HostInfo { hostname, ..Default::default() },
                cc,
                planned_duration_ms,
                max_flows,
                sample_interval_ms,
                scenarios,
                socket_buffer,
                rx_copy,
            }
        ),
        (any::<u64>(), any::<u32>(), direction()).prop_map(|(token, flow_id, direction)| ClientMsg::JoinFlow { token, flow_id, direction }),
        any::<u64>().prop_map(|token| ClientMsg::JoinRr { token }),
        (any::<u32>(), text(), proptest::collection::vec(flow, 0..6), any::<u64>())
            .prop_map(|(index, name, flows, duration_ms)| ClientMsg::StartScenario { index, name, flows, duration_ms }),
        Just(ClientMsg::Go),
        Just(ClientMsg::StopScenario),
        (text(), any::<bool>()).prop_map(|(summary, complete)| ClientMsg::EndTest { summary, complete }),
    ]
}

fn report() -> impl Strategy<Value = ServerFlowReport> {
    (any::<u32>(), direction(), proptest::collection::vec(any::<(u64, u64)>(), 0..40), any::<u64>(), any::<u64>(), proptest::collection::vec(any::<u64>(), 0..20))
        .prop_map(|(id, direction, goodput, bytes, max_gap_ns, ts)| ServerFlowReport {
            id,
            direction,
            goodput,
            bytes,
            max_gap_ns,
            max_gap_at_unix_ns: max_gap_ns / 2,
            tcp_info: ts.into_iter().map(|t_ns| TcpInfoSample { t_ns, ..Default::default() }).collect(),
            udp: None,
        })
}

/// Every decoder on one input: none may panic; a probe answer keeps the size
/// and carries no request byte past the header.
fn decode_everything(b: &[u8]) {
    let _ = decode_frame::<ClientMsg>(b, MAX_CLIENT_FRAME);
    let _ = decode_frame::<ServerMsg>(b, MAX_SERVER_FRAME);
    let _ = Handshake::decode(b);
    let _ = Probe::decode(b);
    let _ = UdpDatagram::decode(b);
    if b.len() >= RR_SIZE {
        let _ = decode_rr(b[..RR_SIZE].try_into().unwrap());
    }
    if b.len() >= 4 {
        let _ = frame_len(b[..4].try_into().unwrap(), MAX_CLIENT_FRAME);
    }
    let _ = parse_scenario(&String::from_utf8_lossy(b));
    let mut c = b.to_vec();
    if let Some(n) = answer_probe_in_place(&mut c, 1, 2, None, |_| true) {
        assert_eq!(n, b.len());
        assert!(c[PROBE_HEADER..].iter().all(|&x| x == 0));
    }
    let k = secret();
    let mut c = b.to_vec();
    if let Some(n) = answer_probe_in_place(&mut c, 1, 2, Some(&k), |_| true) {
        assert_eq!(n, b.len());
        assert!(probe_signed(b, &k), "an unsigned request was answered");
        assert!(probe_signed(&c, &k));
        assert!(c[PROBE_HEADER + PROBE_MAC_LEN..].iter().all(|&x| x == 0));
    }
}

proptest! {
    #![proptest_config(cases(4000))]

    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..1600)) {
        decode_everything(&b);
    }

    #[test]
    fn control_frames_round_trip_and_survive_mutation(m in client_msg(), cut in any::<usize>(), pos in any::<usize>(), byte in any::<u8>()) {
        let f = encode_frame(&m);
        let (d, used) = decode_frame::<ClientMsg>(&f, usize::MAX).unwrap().unwrap();
        prop_assert_eq!(&d, &m);
        prop_assert_eq!(used, f.len());
        // Any proper prefix is "need more bytes" (or too long for the bound).
        let cut = cut % f.len();
        let whole = matches!(decode_frame::<ClientMsg>(&f[..cut], usize::MAX), Ok(Some(_)));
        prop_assert!(!whole);
        let mut g = f.clone();
        let pos = pos % g.len();
        g[pos] = byte;
        decode_everything(&g);
    }

    #[test]
    fn probes_round_trip_and_replies_are_never_larger(
        token in any::<u64>(), seq in any::<u32>(), stream in any::<u32>(), t1 in any::<u64>(),
        size in PROBE_HEADER..=PROBE_MAX, junk in any::<u8>(), signed in any::<bool>(),
    ) {
        let p = Probe { kind: ProbeKind::Request, token, seq, stream, client_send_ns: t1, server_recv_ns: 0, server_send_ns: 0 };
        let mut b = vec![junk; size];
        p.encode_into(&mut b).unwrap();
        let k = secret();
        let signed = signed && size >= PROBE_HEADER + PROBE_MAC_LEN;
        if signed {
            sign_probe(&mut b, &k).unwrap();
        }
        let mut back = Probe::decode(&b).unwrap();
        back.server_recv_ns = 0;
        prop_assert_eq!(back, p);
        let key = signed.then_some(&k);
        let mut r = b.clone();
        let n = answer_probe_in_place(&mut r, 5, 6, key, |q| q.token == token).unwrap();
        prop_assert_eq!(n, size);
        let rep = Probe::decode(&r).unwrap();
        prop_assert_eq!((rep.kind, rep.token, rep.seq, rep.stream, rep.client_send_ns, rep.server_recv_ns, rep.server_send_ns), (ProbeKind::Reply, token, seq, stream, t1, 5, 6));
        let tail = if signed { PROBE_HEADER + PROBE_MAC_LEN } else { PROBE_HEADER };
        prop_assert!(r[tail..].iter().all(|&x| x == 0));
    }

    #[test]
    fn reports_chunk_and_merge_back(flows in proptest::collection::vec(report(), 0..8), max in 1usize..50) {
        // Distinct ids, as a server sends them.
        let mut flows = flows;
        flows.sort_by_key(|f| f.id);
        flows.dedup_by_key(|f| f.id);
        let frames = chunk_report(flows.clone(), max);
        let last_is_report = matches!(frames.last(), Some(ServerMsg::ScenarioReport { .. }));
        prop_assert!(last_is_report);
        let mut acc = vec![];
        for f in frames {
            let (ServerMsg::ScenarioReportChunk { flows: part } | ServerMsg::ScenarioReport { flows: part }) = f else { unreachable!() };
            prop_assert!(part.iter().map(|p| p.goodput.len() + p.tcp_info.len()).sum::<usize>() <= max);
            for p in part {
                merge_report_part(&mut acc, p);
            }
        }
        prop_assert_eq!(acc, flows);
    }

    #[test]
    fn replay_window_matches_a_model(seqs in proptest::collection::vec(prop_oneof![0u32..200, any::<u32>()], 1..200)) {
        let mut w = ReplayWindow::default();
        let mut seen = std::collections::HashSet::new();
        let mut highest: Option<u32> = None;
        for s in seqs {
            let fresh = !seen.contains(&s) && highest.is_none_or(|h| s > h || h - s < 64);
            prop_assert_eq!(w.accept(s), fresh, "seq {}", s);
            if fresh {
                seen.insert(s);
                highest = Some(highest.map_or(s, |h| h.max(s)));
            }
        }
    }
}
