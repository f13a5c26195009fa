//! Latency-only targets (`ping:HOST`, `tcp:HOST:PORT`, `udp:HOST[:PORT]`):
//! probed continuously at `--probe-every`, their probes kept as one run per
//! `--round`, as smokeping keeps its rounds. A run is a result of `bloatlab
//! test`'s schema with an idle phase that holds the round's pings (their
//! summary: median, spread, loss), or for a `udp:` target a bloatlab
//! server's UDP probes (RTT and one-way delays, as in a test's idle phase),
//! and nothing else.
//!
//! The probes measure the line at rest: those sent while a loaded test of
//! this monitor ran (it loads the same line) are left out of the round, and
//! the result says how many; a round that falls wholly within a loaded test
//! is not kept. A target that cannot be probed (a name that does not
//! resolve, ICMP not permitted) gives a failed run per round with the
//! reason, and is tried again at the next one.
use bloatlab_engine::ping::{Pinger, PingSample, TCP_PING_TIMEOUT};
use bloatlab_engine::probe::Exchange;
use bloatlab_engine::summarize::{build_result, Exchanges, MetaIn, RawPhase};
use bloatlab_engine::watch::UdpWatch;
use bloatlab_host::clock;
use bloatlab_model::{MonitorConfig, MonitorTarget, PingTarget, TestConfig};
use bloatlab_results::{HostInfo, MonitorRun, PingInfo, SocketInfo, TestResult};
use bloatlab_store::{Outcome, Run};
use std::net::SocketAddr;
use std::time::Duration;

/// A round is taken this long after it ends: late answers (a TCP connect
/// times out after [`TCP_PING_TIMEOUT`]) belong to it.
pub const SETTLE: Duration = Duration::from_secs(TCP_PING_TIMEOUT.as_secs() + 1);

/// How a target is probed.
enum Source {
    Ping(Pinger),
    /// A bloatlab server's UDP probes, in sessions of this configuration.
    Udp(UdpWatch, Box<TestConfig>),
}

/// What a round of one target holds.
enum Taken {
    /// Probes sent at rest (and how many were left out), and why some
    /// could not be (a session that could not be opened).
    Kept(Data, usize, Option<String>),
    /// Every probe went out during a loaded test: how many.
    AllLeftOut(usize),
    Failed(String),
}

enum Data {
    Pings { target: PingTarget, addr: std::net::IpAddr, method: &'static str, samples: Vec<PingSample> },
    Probes { cfg: Box<TestConfig>, addr: SocketAddr, server: Box<HostInfo>, exchanges: Vec<Exchange> },
}

struct Probed {
    target: MonitorTarget,
    name: String,
    source: Result<Source, String>,
    sequence: u64,
    /// The rounds not kept since the last one kept, told when a round is
    /// kept again (or after an hour of them, or at the stop).
    left_out: Option<LeftOut>,
}

/// A stretch of rounds not kept is told at least this often.
pub const TELL_LEFT_OUT: Duration = Duration::from_secs(3600);

pub struct Prober {
    cfg: MonitorConfig,
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
    /// Start probing every latency-only target of the monitor now.
    pub fn start(cfg: &MonitorConfig) -> Prober {
        let (every, round) = (cfg.probe_every, cfg.round);
        let now = clock::now_ns();
        let targets = cfg
            .targets
            .iter()
            .filter(|t| t.latency_only())
            .map(|t| Probed { target: t.clone(), name: t.name(), source: start_at(cfg, t, every, now), sequence: 0, left_out: None })
            .collect();
        Prober { cfg: cfg.clone(), targets, every, round, round_start: now, loaded: vec![] }
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
            let data = match p.source {
                Ok(Source::Ping(pg)) => {
                    let (target, addr, method) = (pg.target.clone(), pg.addr, pg.method);
                    let (samples, left_out) = split(pg.finish(Duration::from_secs(1)), start, &loaded, |s| s.0);
                    (!samples.is_empty()).then_some((Data::Pings { target, addr, method, samples }, left_out))
                }
                Ok(Source::Udp(w, cfg)) => {
                    let server = w.server();
                    let (exchanges, left_out) = split(w.finish().0, start, &loaded, |e| e.t1);
                    server.filter(|_| !exchanges.is_empty()).map(|(addr, server)| (Data::Probes { cfg, addr, server: Box::new(server), exchanges }, left_out))
                }
                Err(_) => None,
            };
            let Some((data, left_out)) = data else { continue };
            let mut r = round_result(&p.name, data, left_out, start, now, every, false, Some(why.to_string()));
            r.monitor = Some(monitor_run(monitor_id, &p.name, round, start, &mut p.sequence));
            h.runs.push(Run { monitor_id: monitor_id.to_string(), target: p.name.clone(), started_unix_ns: start, outcome: Outcome::Measured(Box::new(r)) });
        }
        h
    }

    fn take(&mut self, start: u64, end: u64, monitor_id: &str, h: &mut Harvest) {
        let (every, round) = (self.every, self.round);
        for p in &mut self.targets {
            let outcome = match p.settled(start, end, &self.loaded) {
                Taken::AllLeftOut(n) => {
                    // the whole round fell within a loaded test: nothing
                    // measured at rest, no run
                    let l = p.left_out.get_or_insert(LeftOut { target: p.name.clone(), started_unix_ns: start, ended_unix_ns: start, rounds: 0, probes: 0 });
                    l.ended_unix_ns = end;
                    l.rounds += 1;
                    l.probes += n;
                    if l.ended_unix_ns - l.started_unix_ns >= TELL_LEFT_OUT.as_nanos() as u64 {
                        h.left_out.extend(p.left_out.take());
                    }
                    continue;
                }
                Taken::Kept(data, left_out, why) => {
                    let mut r = round_result(&p.name, data, left_out, start, end, every, why.is_none(), why);
                    r.monitor = Some(monitor_run(monitor_id, &p.name, round, start, &mut p.sequence));
                    Outcome::Measured(Box::new(r))
                }
                Taken::Failed(e) => {
                    p.sequence += 1;
                    Outcome::Failed(e)
                }
            };
            h.left_out.extend(p.left_out.take());
            h.runs.push(Run { monitor_id: monitor_id.to_string(), target: p.name.clone(), started_unix_ns: start, outcome });
            if p.source.is_err() {
                // tried again for the next round
                p.source = start_at(&self.cfg, &p.target, every, end);
            }
        }
        // a loaded test still running at the round's end counts for the next
        self.loaded.retain(|l| l.1 > end);
    }
}

/// A round is kept with at least this many probes sent outside loaded
/// tests (docs/monitor.md); with fewer, the loaded tests took it.
pub const MIN_ROUND_PROBES: usize = 2;

impl Probed {
    /// The round [start, end) of this target, its probes sent during the
    /// `loaded` tests left out.
    fn settled(&self, start: u64, end: u64, loaded: &[(u64, u64)]) -> Taken {
        match &self.source {
            Err(e) => Taken::Failed(e.clone()),
            Ok(Source::Ping(pg)) => {
                let (samples, left_out) = split(pg.take_settled(end), start, loaded, |s| s.0);
                if samples.len() < MIN_ROUND_PROBES && left_out > 0 {
                    return Taken::AllLeftOut(left_out);
                }
                Taken::Kept(Data::Pings { target: pg.target.clone(), addr: pg.addr, method: pg.method, samples }, left_out, None)
            }
            Ok(Source::Udp(w, cfg)) => {
                let (all, why) = w.take_settled(end);
                let (exchanges, left_out) = split(all, start, loaded, |e| e.t1);
                if exchanges.len() < MIN_ROUND_PROBES && left_out > 0 {
                    return Taken::AllLeftOut(left_out);
                }
                match (w.server(), exchanges.is_empty()) {
                    (Some((addr, server)), false) => Taken::Kept(Data::Probes { cfg: cfg.clone(), addr, server: Box::new(server), exchanges }, left_out, why),
                    _ => Taken::Failed(why.unwrap_or_else(|| "no probe went out in the round".into())),
                }
            }
        }
    }
}

fn monitor_run(monitor_id: &str, name: &str, round: Duration, start: u64, sequence: &mut u64) -> MonitorRun {
    *sequence += 1;
    MonitorRun { monitor_id: monitor_id.to_string(), target: name.to_string(), every_s: round.as_secs_f64(), jitter_s: 0.0, due_unix_ns: start, sequence: *sequence - 1 }
}

/// Start probing a latency-only target, its first probe at `at` (clock ns).
fn start_at(cfg: &MonitorConfig, t: &MonitorTarget, every: Duration, at: u64) -> Result<Source, String> {
    let at = at.max(clock::now_ns());
    match t {
        MonitorTarget::Ping(p) => Pinger::start(p, every, at).map(Source::Ping),
        MonitorTarget::Probes { host, port } => {
            let c = cfg.probe_config(host, *port);
            UdpWatch::start(&c, every, at).map(|w| Source::Udp(w, Box::new(c)))
        }
        t => unreachable!("{t:?} is not latency-only"),
    }
}

/// The probes of [start, ...) (`at`: a probe's send time) sent outside the
/// loaded tests, and how many were sent within.
fn split<T>(all: Vec<T>, start: u64, loaded: &[(u64, u64)], at: impl Fn(&T) -> u64) -> (Vec<T>, usize) {
    let (out, kept): (Vec<T>, Vec<T>) = all.into_iter().filter(|s| at(s) >= start).partition(|s| loaded.iter().any(|&(a, b)| at(s) >= a && at(s) < b));
    (kept, out.len())
}

/// The result of one round of one target.
#[allow(clippy::too_many_arguments)]
fn round_result(name: &str, data: Data, left_out: usize, start: u64, end: u64, every: Duration, complete: bool, reason: Option<String>) -> TestResult {
    let span = Duration::from_nanos(end.saturating_sub(start));
    let fd = bloatlab_model::units::fmt_duration;
    let (cfg, addr, server, mut how, pings, exchanges) = match data {
        Data::Pings { target: t, addr, method, samples } => {
            let cfg = TestConfig {
                server: t.host.clone(),
                port: t.port,
                scenarios: vec![],
                idle: span,
                command: vec!["monitor".into(), name.to_string()],
                ..TestConfig::default()
            };
            let info = PingInfo { target: t.label(), address: addr.to_string(), method: method.to_string(), interval_ms: every.as_secs_f64() * 1e3 };
            let how = format!(
                "pings: {} ({method}) every {} through a round of {}; no bloatlab server: no UDP probes, no one-way delays",
                t.label(),
                fd(every),
                fd(span)
            );
            (cfg, SocketAddr::new(addr, t.port), HostInfo::default(), how, vec![(info, samples)], vec![])
        }
        Data::Probes { cfg, addr, server, exchanges } => {
            let how = format!(
                concat!(
                    "UDP probes to the bloatlab server {} every {} through a round of {}, in probe-only sessions of at most {} ",
                    "each (the next opened before the last ends, on the same time grid); send: clock read just before send(); ",
                    "receive: kernel SO_TIMESTAMPNS stamps where the kernel provides them; the server's hold time (t3 - t2) is ",
                    "subtracted from every RTT"
                ),
                addr,
                fd(every),
                fd(span),
                fd(bloatlab_engine::watch::span(every))
            );
            (TestConfig { idle: span, ..*cfg }, addr, *server, how, vec![], exchanges)
        }
    };
    if left_out > 0 {
        how.push_str(&format!("; {left_out} probe(s) sent while a loaded test of this monitor ran were left out (they measure the load, not the line at rest)"));
    }
    let mi = MetaIn {
        cfg: &cfg,
        addr,
        start_unix_ns: start,
        server,
        cc: String::new(),
        socket: SocketInfo::default(),
        witness: None,
        probe_timestamps: how,
        pings,
        server_rpm: None,
    };
    let ex = Exchanges { server: &exchanges, witness: &[], classes: &[], rr: &[] };
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
        let cfg = MonitorConfig { targets: vec![t.clone()], probe_every: Duration::from_millis(20), round, ..Default::default() };
        let mut p = Prober::start(&cfg);
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
