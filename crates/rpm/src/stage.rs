//! `bloatlab test --rpm`: the IETF RPM stages as planned phases of a test
//! (the engine's [`RpmStages`]), run inside the test's session against the
//! endpoints its server offered, pinning the certificate it announced.
use crate::client::{self, StageProgress};
use bloatlab_engine::client::RpmStages;
use bloatlab_model::config::Live;
use bloatlab_model::{RpmConfig, RpmDirection, RpmOffer, TestConfig};
use bloatlab_results::RpmResult;
use std::net::SocketAddr;

/// The RPM stages of a test.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestStages;

/// The RPM client's configuration for a test's stages: the server the test
/// named (its name for TLS), connected at the address the test reached.
pub fn stage_config(cfg: &TestConfig, offer: &RpmOffer, addr: SocketAddr) -> Result<RpmConfig, String> {
    let (host, _) = bloatlab_model::config::split_host_port(&cfg.server, cfg.port)?;
    let url_host = if host.contains(':') { format!("[{host}]") } else { host };
    Ok(RpmConfig {
        url: format!("https://{url_host}:{}/.well-known/nq", offer.port),
        directions: cfg.rpm.clone(),
        pin_sha256: Some(offer.certificate_sha256.clone()),
        connect_to: Some(addr.ip().to_string()),
        secret: cfg.secret.clone(),
        ..Default::default()
    })
}

/// A stage's progress as the test's [`Live`] status: phase "rpm DIRECTION",
/// the goodput in the direction it loads.
fn live_of(p: &StageProgress, phase_index: usize, phases: usize) -> Live {
    let (up, down) = match p.direction {
        RpmDirection::Download => (0.0, p.goodput_bps),
        RpmDirection::Upload => (p.goodput_bps, 0.0),
        // the stage measures the sum of both directions
        RpmDirection::Bidirectional => (p.goodput_bps / 2.0, p.goodput_bps / 2.0),
    };
    Live {
        phase: format!("rpm {}", p.direction),
        phase_index,
        phases,
        elapsed_s: p.t_s,
        phase_len_s: p.max_s,
        up_bps: up,
        down_bps: down,
        rtt_ms: p.rpm.map(|r| 60_000.0 / r).unwrap_or(0.0),
        ..Default::default()
    }
}

impl RpmStages for TestStages {
    fn run(
        &self,
        cfg: &TestConfig,
        offer: &RpmOffer,
        addr: SocketAddr,
        first_phase: usize,
        phases: usize,
        live: &mut dyn FnMut(&Live),
    ) -> Result<RpmResult, String> {
        let rc = stage_config(cfg, offer, addr)?;
        // The client reports from its runtime; the test's display runs here.
        let (tx, rx) = std::sync::mpsc::channel::<Live>();
        let order: Vec<RpmDirection> = rc.directions.clone();
        std::thread::scope(|s| {
            let h = s.spawn(move || {
                let progress = move |p: &StageProgress| {
                    let i = order.iter().position(|d| *d == p.direction).unwrap_or(0);
                    let _ = tx.send(live_of(p, first_phase + i, phases));
                };
                client::run(&rc, cfg.command.clone(), &progress)
            });
            for l in rx {
                live(&l);
            }
            h.join().unwrap_or_else(|_| Err("the RPM client panicked".into()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_reads_as_the_tests_phase() {
        let p = StageProgress { direction: RpmDirection::Upload, t_s: 3.0, max_s: 20.0, goodput_bps: 9e6, moving_average_bps: 8e6, connections: 4, rpm: Some(600.0) };
        let l = live_of(&p, 5, 7);
        assert_eq!((l.phase.as_str(), l.phase_index, l.phases), ("rpm upload", 5, 7));
        assert_eq!((l.up_bps, l.down_bps, l.elapsed_s, l.phase_len_s), (9e6, 0.0, 3.0, 20.0));
        assert!((l.rtt_ms - 100.0).abs() < 1e-9, "600 RPM is a 100 ms round trip");
        let cfg = TestConfig { server: "example.test:5201".into(), rpm: vec![RpmDirection::Download], ..Default::default() };
        let offer = RpmOffer { port: 4443, certificate_sha256: "AA:BB".into() };
        let rc = stage_config(&cfg, &offer, "192.0.2.7:5201".parse().unwrap()).unwrap();
        assert_eq!(rc.url, "https://example.test:4443/.well-known/nq");
        assert_eq!(rc.connect_to.as_deref(), Some("192.0.2.7"));
        assert_eq!(rc.pin_sha256.as_deref(), Some("AA:BB"));
    }
}
