//! Per DSCP class (`--dscp`): the goodput of the class's flows and the
//! latency of its marked probes, flent's RRUL view of a priority queue.
use crate::stats::{added_latency_ms, latency_stats_ns, percentile};
use bloatlab_results::{ClassSummary, Direction, Phase};

/// One summary per class, in the order of the phase's class probe series
/// (then any class only a flow carried). `flow_bps` is the phase's steady
/// goodput per flow (same order as `p.flows`); `idle_p50_ms` gives a
/// class's idle median for its added latency, read from the phase's loaded
/// part (`p.summary.loaded_from_s`, set first); `name` names a DSCP value.
pub fn class_summaries(p: &Phase, flow_bps: &[f64], idle_p50_ms: &dyn Fn(u8) -> Option<f64>, name: &dyn Fn(u8) -> String) -> Vec<ClassSummary> {
    let mut order: Vec<u8> = p.class_probes.iter().map(|c| c.dscp).collect();
    for f in &p.flows {
        if !order.contains(&f.dscp) && !p.class_probes.is_empty() {
            order.push(f.dscp);
        }
    }
    order
        .into_iter()
        .map(|d| {
            let mut s = ClassSummary { dscp: d, class: name(d), ..Default::default() };
            for (i, f) in p.flows.iter().enumerate().filter(|(_, f)| f.dscp == d) {
                let bps = flow_bps.get(i).copied().unwrap_or(0.0);
                match f.direction {
                    Direction::Up => {
                        s.upload_flows += 1;
                        s.upload_bps += bps;
                    }
                    Direction::Down => {
                        s.download_flows += 1;
                        s.download_bps += bps;
                    }
                }
                if let (Some(a), Some(b)) = (f.tcp_info.first(), f.tcp_info.last()) {
                    s.retransmits += b.total_retrans.saturating_sub(a.total_retrans) as u64;
                }
            }
            if let Some(c) = p.class_probes.iter().find(|c| c.dscp == d) {
                let rtts: Vec<Option<u64>> = c.probes.iter().map(|x| x.rtt_ns).collect();
                s.latency = latency_stats_ns(&rtts);
                if p.name != "idle" && s.latency.received > 0 {
                    // the phase's loaded part (its summary's `loaded_from_s`, model::LOADED_RULE)
                    let from = p.start_ns + p.summary.loaded_from_s.map_or(0, |s| (s * 1e9) as u64);
                    let loaded: Vec<f64> = c.probes.iter().filter_map(|x| x.rtt_ns.filter(|r| x.t_ns + r >= from)).map(|r| r as f64 / 1e6).collect();
                    s.added_latency_ms = added_latency_ms(percentile(&loaded, 50.0).or(Some(s.latency.p50_ms)), idle_p50_ms(d));
                }
                let ms = |v: Vec<f64>| percentile(&v, 50.0);
                s.owd_up_p50_ms = ms(c.probes.iter().filter_map(|x| x.owd_up_ns).map(|v| v as f64 / 1e6).collect());
                s.owd_down_p50_ms = ms(c.probes.iter().filter_map(|x| x.owd_down_ns).map(|v| v as f64 / 1e6).collect());
            }
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::{ClassProbes, Flow, Probe, TcpInfoSample};

    fn probe(rtt_ms: Option<u64>) -> Probe {
        Probe { seq: 0, t_ns: 0, rtt_ns: rtt_ms.map(|m| m * 1_000_000), server_rx_unix_ns: None, owd_up_ns: rtt_ms.map(|m| m as i64 * 400_000), owd_down_ns: rtt_ms.map(|m| m as i64 * 600_000) }
    }

    /// Two classes, hand-computed: EF's probes fast, BE's slow and one lost;
    /// each class sums its own flows' goodput and retransmits.
    #[test]
    fn each_class_gets_its_flows_and_probes() {
        let flow = |id: u32, direction: Direction, dscp: u8, retrans: u32| Flow {
            id,
            direction,
            dscp,
            tcp_info: vec![TcpInfoSample { total_retrans: 10, ..Default::default() }, TcpInfoSample { total_retrans: 10 + retrans, ..Default::default() }],
            goodput: vec![],
            bytes: 0,
            max_gap_ns: 0,
            max_gap_at_ns: 0,
            udp: None,
        };
        let p = Phase {
            name: "2u2d".into(),
            flows: vec![flow(0, Direction::Up, 0, 3), flow(1, Direction::Up, 46, 0), flow(2, Direction::Down, 0, 5), flow(3, Direction::Down, 46, 1)],
            class_probes: vec![
                ClassProbes { dscp: 0, probes: vec![probe(Some(100)), probe(Some(120)), probe(None), probe(Some(110))] },
                ClassProbes { dscp: 46, probes: vec![probe(Some(5)), probe(Some(7)), probe(Some(6))] },
            ],
            ..Default::default()
        };
        let idle = |d: u8| Some(if d == 46 { 1.0 } else { 2.0 });
        let name = |d: u8| if d == 46 { "EF".to_string() } else { "BE".to_string() };
        let v = class_summaries(&p, &[1e6, 2e6, 3e6, 4e6], &idle, &name);
        assert_eq!(v.len(), 2);
        let (be, ef) = (&v[0], &v[1]);
        assert_eq!((be.class.as_str(), be.upload_flows, be.download_flows, be.upload_bps, be.download_bps, be.retransmits), ("BE", 1, 1, 1e6, 3e6, 8));
        assert_eq!((ef.class.as_str(), ef.upload_bps, ef.download_bps, ef.retransmits), ("EF", 2e6, 4e6, 1));
        assert_eq!((be.latency.sent, be.latency.lost, be.latency.p50_ms), (4, 1, 110.0));
        assert_eq!(be.added_latency_ms, Some(108.0));
        assert_eq!((ef.latency.p50_ms, ef.added_latency_ms), (6.0, Some(5.0)));
        assert_eq!((ef.owd_up_p50_ms, ef.owd_down_p50_ms), (Some(2.4), Some(3.6)));
        // no class probes: no class table
        let plain = Phase { class_probes: vec![], ..p };
        assert!(class_summaries(&plain, &[1e6; 4], &idle, &name).is_empty());
    }
}
