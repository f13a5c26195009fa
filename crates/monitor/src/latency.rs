//! Latency-only targets (`ping:HOST`, `tcp:HOST:PORT`): probed
//! continuously at `--probe-every`, their probes kept as one run per
//! `--round`, as smokeping keeps its rounds. A run is a result of `bloatlab
//! test`'s schema with an idle phase that holds the round's pings (their
//! summary: median, spread, loss) and nothing else.
//!
//! The probes measure the line at rest: those sent while a loaded test of
//! this monitor ran (it loads the same line) are left out of the round, and
//! the result says how many; a round that falls wholly within a loaded test
//! is not kept. A target that cannot be probed (a name that does not
//! resolve, ICMP not permitted) gives a failed run per round with the
//! reason, and is tried again at the next one.
use bloatlab_engine::ping::{Pinger, PingSample, TCP_PING_TIMEOUT};
use bloatlab_engine::summarize::{build_result, Exchanges, MetaIn, RawPhase};
use bloatlab_host::clock;
use bloatlab_model::{MonitorTarget, PingTarget, TestConfig};
use bloatlab_results::{HostInfo, MonitorRun, PingInfo, SocketInfo, TestResult};
use bloatlab_store::{Outcome, Run};
use std::net::SocketAddr;
use std::time::Duration;

/// A round is taken this long after it ends: late answers (a TCP connect
/// times out after [`TCP_PING_TIMEOUT`]) belong to it.
pub const SETTLE: Duration = Duration::from_secs(TCP_PING_TIMEOUT.as_secs() + 1);

struct Probed {
    target: PingTarget,
    name: String,
    pinger: Result<Pinger, String>,
    sequence: u64,
    /// The rounds not kept since the last one kept, told when a round is
    /// kept again (or after an hour of them, or at the stop).
    left_out: Option<LeftOut>,
}

/// A stretch of rounds not kept is told at least this often.
pub const TELL_LEFT_OUT: Duration = Duration::from_secs(3600);

pub struct Prober {
    targets: Vec<Probed>,
    every: Duration,
    round: Duration,
    /// The current round began here (clock ns).
    round_start: u64,
    /// The loaded tests run meanwhile (clock ns): probes sent within are left out.
    loaded: Vec<(u64, u64)>,
}

/// Rounds in a row not kept: every probe of them went out while a loaded
/// test ran.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftOut {
    pub target: String,
    /// The first round's start (Unix ns).
    pub started_unix_ns: u64,
    /// The last round's end (Unix ns).
    pub ended_unix_ns: u64,
    /// How many rounds...
    pub rounds: usize,
    /// ...and how many probes they sent.
    pub probes: usize,
}

/// The rounds taken: a run per target and round, and the rounds not kept.
#[derive(Debug, Default)]
pub struct Harvest {
    pub runs: Vec<Run>,
    pub left_out: Vec<LeftOut>,
}

impl Prober {
    /// Start probing every latency-only target of `targets` now.
    pub fn start(targets: &[MonitorTarget], every: Duration, round: Duration) -> Prober {
        let now = clock::now_ns();
        let targets = targets
            .iter()
            .filter_map(|t| match t {
                MonitorTarget::Ping(p) => Some(Probed { target: p.clone(), name: t.name(), pinger: Pinger::start(p, every, now), sequence: 0, left_out: None }),
                _ => None,
            })
            .collect();
        Prober { targets, every, round, round_start: now, loaded: vec![] }
    }

    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// A loaded test ran from `start` to `end` (clock ns).
    pub fn loaded(&mut self, start: u64, end: u64) {
        self.loaded.push((start, end));
    }

    /// When the current round can be taken (clock ns; None without targets).
    pub fn next_due(&self) -> Option<u64> {
        (!self.is_empty()).then(|| self.round_start + self.round.as_nanos() as u64 + SETTLE.as_nanos() as u64)
    }

    /// Every round that ended at least [`SETTLE`] ago: one run per target.
    pub fn harvest(&mut self, now: u64, monitor_id: &str) -> Harvest {
        let mut h = Harvest::default();
        while self.next_due().is_some_and(|d| d <= now) {
            let end = self.round_start + self.round.as_nanos() as u64;
            self.take(self.round_start, end, monitor_id, &mut h);
            self.round_start = end;
        }
        h
    }

    /// The round in progress, cut short by a stop (`why`): the answers
    /// still on their way are waited for (a TCP connect's timeout at most).
    /// Rounds not kept since the last one are told too.
    pub fn finish(mut self, monitor_id: &str, why: &str) -> Harvest {
        let now = clock::now_ns();
        let (start, every, round) = (self.round_start, self.every, self.round);
        let loaded = std::mem::take(&mut self.loaded);
        let mut h = Harvest::default();
        for mut p in self.targets.drain(..) {
            h.left_out.extend(p.left_out.take());
            let Ok(pg) = p.pinger else { continue };
            let (addr, method) = (pg.addr, pg.method);
            let (kept, left_out) = split(pg.finish(Duration::from_secs(1)), start, &loaded);
            if kept.is_empty() {
                continue;
            }
            let mut r = round_result(&p.target, &p.name, addr, method, kept, left_out, start, now, every, false, Some(why.to_string()));
            r.monitor = Some(monitor_run(monitor_id, &p.name, round, start, &mut p.sequence));
            h.runs.push(Run { monitor_id: monitor_id.to_string(), target: p.name.clone(), started_unix_ns: start, outcome: Outcome::Measured(Box::new(r)) });
        }
        h
    }

    fn take(&mut self, start: u64, end: u64, monitor_id: &str, h: &mut Harvest) {
        let (every, round) = (self.every, self.round);
        for p in &mut self.targets {
            let outcome = match &p.pinger {
                Ok(pg) => {
                    let (kept, left_out) = split(pg.take_settled(end), start, &self.loaded);
                    if kept.is_empty() && left_out > 0 {
                        // the whole round fell within a loaded test: nothing
                        // measured at rest, no run
                        let l = p.left_out.get_or_insert(LeftOut { target: p.name.clone(), started_unix_ns: start, ended_unix_ns: start, rounds: 0, probes: 0 });
                        l.ended_unix_ns = end;
                        l.rounds += 1;
                        l.probes += left_out;
                        if l.ended_unix_ns - l.started_unix_ns >= TELL_LEFT_OUT.as_nanos() as u64 {
                            h.left_out.extend(p.left_out.take());
                        }
                        continue;
                    }
                    let mut r = round_result(&p.target, &p.name, pg.addr, pg.method, kept, left_out, start, end, every, true, None);
                    r.monitor = Some(monitor_run(monitor_id, &p.name, round, start, &mut p.sequence));
                    Outcome::Measured(Box::new(r))
                }
                Err(e) => {
                    p.sequence += 1;
                    Outcome::Failed(e.clone())
                }
            };
            h.left_out.extend(p.left_out.take());
            h.runs.push(Run { monitor_id: monitor_id.to_string(), target: p.name.clone(), started_unix_ns: start, outcome });
            if p.pinger.is_err() {
                // tried again for the next round
                p.pinger = start_at(&p.target, every, end);
            }
        }
        // a loaded test still running at the round's end counts for the next
        self.loaded.retain(|l| l.1 > end);
    }
}

fn monitor_run(monitor_id: &str, name: &str, round: Duration, start: u64, sequence: &mut u64) -> MonitorRun {
    *sequence += 1;
    MonitorRun { monitor_id: monitor_id.to_string(), target: name.to_string(), every_s: round.as_secs_f64(), jitter_s: 0.0, due_unix_ns: start, sequence: *sequence - 1 }
}

fn start_at(t: &PingTarget, every: Duration, at: u64) -> Result<Pinger, String> {
    Pinger::start(t, every, at.max(clock::now_ns()))
}

/// The probes of [start, ...) sent outside the loaded tests, and how many were sent within.
fn split(all: Vec<PingSample>, start: u64, loaded: &[(u64, u64)]) -> (Vec<PingSample>, usize) {
    let (out, kept): (Vec<PingSample>, Vec<PingSample>) =
        all.into_iter().filter(|s| s.0 >= start).partition(|s| loaded.iter().any(|&(a, b)| s.0 >= a && s.0 < b));
    (kept, out.len())
}

/// The result of one round of one target.
#[allow(clippy::too_many_arguments)]
fn round_result(
    t: &PingTarget,
    name: &str,
    addr: std::net::IpAddr,
    method: &str,
    samples: Vec<PingSample>,
    left_out: usize,
    start: u64,
    end: u64,
    every: Duration,
    complete: bool,
    reason: Option<String>,
) -> TestResult {
    let cfg = TestConfig {
        server: t.host.clone(),
        port: t.port,
        scenarios: vec![],
        idle: Duration::from_nanos(end.saturating_sub(start)),
        command: vec!["monitor".into(), name.to_string()],
        ..TestConfig::default()
    };
    let info = PingInfo { target: t.label(), address: addr.to_string(), method: method.to_string(), interval_ms: every.as_secs_f64() * 1e3 };
    let mut how = format!(
        "pings: {} ({method}) every {} through a round of {}; no bloatlab server: no UDP probes, no one-way delays",
        t.label(),
        bloatlab_model::units::fmt_duration(every),
        bloatlab_model::units::fmt_duration(Duration::from_nanos(end.saturating_sub(start)))
    );
    if left_out > 0 {
        how.push_str(&format!("; {left_out} ping(s) sent while a loaded test of this monitor ran were left out (they measure the load, not the line at rest)"));
    }
    let mi = MetaIn {
        cfg: &cfg,
        addr: SocketAddr::new(addr, t.port),
        start_unix_ns: start,
        server: HostInfo::default(),
        cc: String::new(),
        socket: SocketInfo::default(),
        witness: None,
        probe_timestamps: how,
        pings: vec![(info, samples)],
        server_rpm: None,
    };
    let ex = Exchanges { server: &[], witness: &[], classes: &[], rr: &[] };
    build_result(&mi, &[RawPhase::idle(start, end)], &ex, complete, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_kept_whole_and_leave_out_the_loaded_tests() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let t = MonitorTarget::parse(&format!("tcp:{}", l.local_addr().unwrap())).unwrap();
        let round = Duration::from_millis(400);
        let mut p = Prober::start(std::slice::from_ref(&t), Duration::from_millis(20), round);
        let t0 = p.round_start;
        let r = round.as_nanos() as u64;
        // a loaded test over the whole second round and the start of the third
        p.loaded(t0 + r - 1_000_000, t0 + 2 * r + r / 2);
        let h = p.harvest(clock::now_ns(), "m");
        assert!(h.runs.is_empty() && h.left_out.is_empty(), "nothing before a round has settled");
        std::thread::sleep(Duration::from_nanos(3 * r) + SETTLE);
        let Harvest { runs, left_out } = p.harvest(clock::now_ns(), "m");
        // round 1 whole, round 2 not kept (and said so), round 3 half
        assert_eq!(runs.len(), 2, "{runs:#?}");
        assert_eq!(left_out.len(), 1, "{left_out:?}");
        let l = &left_out[0];
        assert_eq!((l.target.as_str(), l.started_unix_ns, l.ended_unix_ns, l.rounds), (t.name().as_str(), t0 + r, t0 + 2 * r, 1));
        assert!((18..=21).contains(&l.probes), "{left_out:?}");
        let doc = |i: usize| match &runs[i].outcome {
            Outcome::Measured(r) => r.clone(),
            o => panic!("{o:?}"),
        };
        let (a, b) = (doc(0), doc(1));
        assert_eq!((runs[0].started_unix_ns, runs[1].started_unix_ns), (t0, t0 + 2 * r));
        let n = |d: &TestResult| d.idle.as_ref().unwrap().pings[0].samples.len();
        assert!((18..=21).contains(&n(&a)), "{} pings in a 400 ms round at 20 ms", n(&a));
        assert!((8..=12).contains(&n(&b)), "{} pings in the unloaded half", n(&b));
        assert!(b.metadata.probe_timestamps.contains("left out") && !a.metadata.probe_timestamps.contains("left out"));
        let s = &a.idle.as_ref().unwrap().summary.pings[0];
        assert_eq!((s.latency.lost, s.latency.sent as usize), (0, n(&a)));
        assert_eq!(a.monitor.as_ref().map(|m| (m.sequence, m.every_s)), Some((0, 0.4)));
        assert_eq!(b.monitor.as_ref().map(|m| m.sequence), Some(1));
        assert_eq!(bloatlab_store::RunRow::of(&runs[0]).idle_ms, Some(s.latency.p50_ms));
        // a stop keeps the round in progress, cut short
        let last = p.finish("m", "stopped").runs;
        assert_eq!(last.len(), 1);
        assert!(matches!(&last[0].outcome, Outcome::Measured(r) if !r.complete && r.incomplete_reason.as_deref() == Some("stopped")));
    }
}
