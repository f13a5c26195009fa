//! A browser test in progress on the server: the tests-quota unit it holds,
//! the load flows it opened (bytes, arrival gaps and TCP_INFO, sampled on
//! the server's clock) and the server's side of its probes.
//!
//! Bounded: one unit of the server's tests quota per session (--max-tests,
//! --max-tests-per-source), a session ends when its result is posted or,
//! at the latest, its plan's length + --idle-timeout after it began; flows,
//! probes and samples are capped at what the plan can produce.
use bloatlab_serve::Permit;
use bloatlab_host::clock;
use bloatlab_model::WebPlan;
use bloatlab_results::{Direction, Side, TcpInfoSample};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Load flows one session may open (each fetch stream of the page is one;
/// a ramp adds a few per phase).
pub const MAX_FLOWS: u32 = 64;

/// One load flow of a session (a download or upload stream of the page).
pub struct FlowRec {
    pub id: u32,
    pub direction: Direction,
    /// Bytes the server sent (download) or received (upload).
    pub bytes: AtomicU64,
    /// Requests serving this flow right now (an upload flow is a run of POSTs).
    pub active: AtomicU32,
    /// (server Unix ns, cumulative bytes), upload flows: the receiver's count.
    pub goodput: Mutex<Vec<(u64, u64)>>,
    /// TCP_INFO of the server's socket serving the flow.
    pub tcp_info: Mutex<Vec<TcpInfoSample>>,
    /// The connection serving the flow now.
    pub sock: Mutex<Option<socket2::Socket>>,
    /// The congestion control of the first connection that served it.
    pub cc: std::sync::OnceLock<String>,
    last_arrival_ns: AtomicU64,
    pub max_gap_ns: AtomicU64,
    pub max_gap_at_ns: AtomicU64,
}

impl FlowRec {
    fn new(id: u32, direction: Direction) -> FlowRec {
        FlowRec {
            id,
            direction,
            bytes: AtomicU64::new(0),
            active: AtomicU32::new(0),
            goodput: Mutex::new(vec![]),
            tcp_info: Mutex::new(vec![]),
            sock: Mutex::new(None),
            cc: std::sync::OnceLock::new(),
            last_arrival_ns: AtomicU64::new(0),
            max_gap_ns: AtomicU64::new(0),
            max_gap_at_ns: AtomicU64::new(0),
        }
    }

    /// The connection serving the flow from now on.
    pub fn attach(&self, sock: Option<socket2::Socket>) {
        if let Some(s) = sock {
            let _ = self.cc.set(bloatlab_engine::sys::get_cc(&s));
            *self.sock.lock().unwrap() = Some(s);
        }
    }

    /// Count `n` bytes sent or received now (and, for an upload, the gap since the last).
    pub fn count(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
        if self.direction == Direction::Up {
            let now = clock::now_ns();
            let last = self.last_arrival_ns.swap(now, Ordering::Relaxed);
            if last != 0 && now - last > self.max_gap_ns.load(Ordering::Relaxed) {
                self.max_gap_ns.store(now - last, Ordering::Relaxed);
                self.max_gap_at_ns.store(now, Ordering::Relaxed);
            }
        }
    }
}

/// The server's half of one probe: when it arrived and when the
/// answer left (server Unix ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeStamp {
    pub seq: u32,
    pub t2: u64,
    pub t3: u64,
}

pub struct Session {
    pub id: String,
    pub source: IpAddr,
    pub plan: WebPlan,
    pub began: Instant,
    /// Server Unix ns at the start.
    pub t0_ns: u64,
    /// The browser's User-Agent header.
    pub user_agent: String,
    /// The host the page reached the server as (its Host header).
    pub host: String,
    pub ended: AtomicBool,
    pub ws_open: AtomicBool,
    pub rtc_open: AtomicBool,
    /// The household test's call connection is open.
    pub rtc_call_open: AtomicBool,
    flows: Mutex<Vec<Arc<FlowRec>>>,
    /// The server's stamps of the HTTP request/response probes
    /// (`GET /api/probe`, TCP) and of the WebRTC (UDP) probes.
    rr_probes: Mutex<Vec<ProbeStamp>>,
    /// The HTTP probes' rate budget (one page, one budget).
    pub rr_budget: Mutex<ProbeBudget>,
    rtc_probes: Mutex<Vec<ProbeStamp>>,
    /// The household test's call frames, as the server saw them.
    call_frames: Mutex<Vec<ProbeStamp>>,
    /// The tests-quota unit, given back when the session ends.
    permit: Mutex<Option<Permit>>,
    /// Phases the page has ended (index + 1 of the last): it ends a loaded
    /// phase when latency stopped rising before the phase's cap, and that
    /// phase's upload streams are reset then.
    cuts: AtomicU64,
    cut: tokio::sync::Notify,
}

impl Session {
    /// The most probes the plan sends, with room for a late start.
    pub fn max_probes(&self) -> usize {
        (self.plan.max_total().as_secs_f64() / self.plan.probe_interval.as_secs_f64() * 1.5) as usize + 100
    }

    /// The page ended phase `phase`: reset its upload streams.
    pub fn cut_uploads(&self, phase: u64) {
        self.cuts.fetch_max(phase.saturating_add(1), Ordering::SeqCst);
        self.cut.notify_waiters();
    }

    /// Whether the page has ended phase `phase`.
    pub fn phase_cut(&self, phase: u64) -> bool {
        self.cuts.load(Ordering::SeqCst) > phase
    }

    /// Wait until the page ends a phase.
    pub async fn next_cut(&self) {
        self.cut.notified().await
    }

    /// The most call frames the plan sends (none without a household test).
    pub fn max_call_frames(&self) -> usize {
        match self.plan.household {
            Some(h) => (self.plan.max_total().as_secs_f64() * h.call_fps as f64 * 1.5) as usize + 100,
            None => 0,
        }
    }

    fn max_samples(&self) -> usize {
        (self.plan.max_total().as_secs_f64() / self.plan.sample_interval.as_secs_f64() * 1.5) as usize + 20
    }

    /// How long it may live: the plan, a margin for the page's own work, and
    /// the server's idle timeout.
    pub fn lifetime(&self, idle_timeout: Duration) -> Duration {
        self.plan.max_total() + idle_timeout + Duration::from_secs(10)
    }

    /// The flow `id`, opened on first use. Refused: another direction under
    /// the same id, more than [`MAX_FLOWS`], or an ended session.
    pub fn flow(&self, id: u32, direction: Direction) -> Result<Arc<FlowRec>, String> {
        if self.ended.load(Ordering::Relaxed) {
            return Err("this test has ended".into());
        }
        let mut fl = self.flows.lock().unwrap();
        if let Some(f) = fl.iter().find(|f| f.id == id) {
            return if f.direction == direction { Ok(f.clone()) } else { Err(format!("flow {id} is {}", if f.direction == Direction::Up { "an upload" } else { "a download" })) };
        }
        if fl.len() as u32 >= MAX_FLOWS {
            return Err(format!("a test opens at most {MAX_FLOWS} load flows"));
        }
        let f = Arc::new(FlowRec::new(id, direction));
        fl.push(f.clone());
        Ok(f)
    }

    pub fn flows(&self) -> Vec<Arc<FlowRec>> {
        self.flows.lock().unwrap().clone()
    }

    fn record(&self, list: &Mutex<Vec<ProbeStamp>>, p: ProbeStamp) -> bool {
        let mut pr = list.lock().unwrap();
        if pr.len() >= self.max_probes() {
            return false;
        }
        pr.push(p);
        true
    }

    /// Record an HTTP probe's server stamps; false once the plan's count is reached.
    pub fn rr_probe(&self, p: ProbeStamp) -> bool {
        self.record(&self.rr_probes, p)
    }

    /// Record a WebRTC probe's server stamps; false once the plan's count is reached.
    pub fn rtc_probe(&self, p: ProbeStamp) -> bool {
        self.record(&self.rtc_probes, p)
    }

    /// Record a call frame's server stamps; false once the plan's count is reached.
    pub fn call_frame(&self, p: ProbeStamp) -> bool {
        let mut v = self.call_frames.lock().unwrap();
        if v.len() >= self.max_call_frames() {
            return false;
        }
        v.push(p);
        true
    }

    pub fn call_stamps(&self) -> Vec<ProbeStamp> {
        self.call_frames.lock().unwrap().clone()
    }

    pub fn rr_stamps(&self) -> Vec<ProbeStamp> {
        self.rr_probes.lock().unwrap().clone()
    }

    pub fn rtc_stamps(&self) -> Vec<ProbeStamp> {
        self.rtc_probes.lock().unwrap().clone()
    }

    /// One sampling pass: each flow being served gets its byte count (an
    /// upload) and its socket's TCP_INFO.
    pub fn sample(&self) {
        let max = self.max_samples();
        let flows = self.flows();
        // An upload counts what arrived, not what the server has read so
        // far (as `bloatlab test`'s receiver does): a reader that lags (a
        // busy host, a browser beside it) would move bytes between sampling
        // windows, and a window that ends caught up would read faster than
        // the link. So the bytes read plus those waiting in the socket,
        // where the connection serves this flow alone (HTTP/1.1); an HTTP/2
        // connection's queue holds every stream's bytes, and there the
        // count read stands.
        let peers: Vec<Option<std::net::SocketAddr>> = flows
            .iter()
            .map(|f| f.sock.lock().unwrap().as_ref().and_then(|s| s.peer_addr().ok()).and_then(|a| a.as_socket()))
            .collect();
        for (i, f) in flows.iter().enumerate() {
            if f.active.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let alone = peers[i].is_some() && peers.iter().filter(|p| **p == peers[i]).count() == 1;
            if f.direction == Direction::Up {
                let sock = f.sock.lock().unwrap();
                let waiting = || if alone { sock.as_ref().and_then(bloatlab_host::sock::unread).unwrap_or(0) } else { 0 };
                let s = clock::stamped(clock::now_ns, || f.bytes.load(Ordering::Relaxed) + waiting());
                drop(sock);
                let mut g = f.goodput.lock().unwrap();
                // (bytes counted waiting in a connection the page then
                // aborted were never read: the count does not step back)
                let s = (s.0, s.1.max(g.last().map_or(0, |l| l.1)));
                if g.len() < max {
                    g.push(s);
                }
            }
            let now = clock::now_ns();
            let info = f.sock.lock().unwrap().as_ref().and_then(|s| bloatlab_engine::sys::tcp_info(s, now, Side::Server));
            if let Some(i) = info {
                let mut t = f.tcp_info.lock().unwrap();
                if t.len() < max {
                    t.push(i);
                }
            }
        }
    }

    /// End the session: give back its tests-quota unit; streams stop at their next chunk.
    pub fn end(&self) {
        self.ended.store(true, Ordering::Relaxed);
        self.permit.lock().unwrap().take();
    }
}

/// The sessions in progress.
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
}

impl Sessions {
    pub fn begin(&self, permit: Permit, source: IpAddr, plan: WebPlan, user_agent: String, host: String) -> Arc<Session> {
        use rand::Rng;
        let mut rng = rand::rng();
        let id: String = (0..16).map(|_| format!("{:02x}", rng.random::<u8>())).collect();
        let rr_budget = ProbeBudget::new(&plan);
        let s = Arc::new(Session {
            id: id.clone(),
            source,
            plan,
            began: Instant::now(),
            t0_ns: clock::now_ns(),
            user_agent,
            host,
            ended: AtomicBool::new(false),
            ws_open: AtomicBool::new(false),
            rtc_open: AtomicBool::new(false),
            rtc_call_open: AtomicBool::new(false),
            flows: Mutex::new(vec![]),
            rr_probes: Mutex::new(vec![]),
            rr_budget: Mutex::new(rr_budget),
            rtc_probes: Mutex::new(vec![]),
            call_frames: Mutex::new(vec![]),
            permit: Mutex::new(Some(permit)),
            cuts: AtomicU64::new(0),
            cut: tokio::sync::Notify::new(),
        });
        self.map.lock().unwrap().insert(id, s.clone());
        s
    }

    /// The session `id`, if it runs and belongs to `source` (a page's
    /// requests all come from one address).
    pub fn get(&self, id: &str, source: IpAddr) -> Result<Arc<Session>, String> {
        let m = self.map.lock().unwrap();
        match m.get(id) {
            Some(s) if bloatlab_serve::source_of(s.source) == bloatlab_serve::source_of(source) => Ok(s.clone()),
            Some(_) => Err("this test belongs to another address".into()),
            None => Err("no such test running (it ended, expired or never began)".into()),
        }
    }

    /// Remove and end a session.
    pub fn finish(&self, id: &str) -> Option<Arc<Session>> {
        let s = self.map.lock().unwrap().remove(id)?;
        s.end();
        Some(s)
    }

    /// End the sessions older than their lifetime; returns them.
    pub fn expire(&self, idle_timeout: Duration) -> Vec<Arc<Session>> {
        let mut m = self.map.lock().unwrap();
        let old: Vec<String> = m.iter().filter(|(_, s)| s.began.elapsed() > s.lifetime(idle_timeout)).map(|(k, _)| k.clone()).collect();
        old.iter().filter_map(|k| m.remove(k)).inspect(|s| s.end()).collect()
    }

    pub fn all(&self) -> Vec<Arc<Session>> {
        self.map.lock().unwrap().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How many probes a probe channel may send: a token bucket refilled at
/// twice the plan's probe rate, holding 10 s of probes, so the burst a TCP
/// connection releases after a stall (every probe sent while a segment was
/// being retransmitted, at once) passes, and a flood does not.
pub struct ProbeBudget {
    tokens: f64,
    last: Instant,
    rate: f64,
    cap: f64,
}

impl ProbeBudget {
    pub fn new(plan: &WebPlan) -> ProbeBudget {
        ProbeBudget::per_second(1.0 / plan.probe_interval.as_secs_f64())
    }

    /// For a channel that sends `per_s` messages a second.
    pub fn per_second(per_s: f64) -> ProbeBudget {
        ProbeBudget { tokens: 10.0 * per_s, last: Instant::now(), rate: 2.0 * per_s, cap: 10.0 * per_s }
    }

    /// Spend one probe; false when the budget is out.
    pub fn take(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate).min(self.cap);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The sustained rate allowed, probes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn a_burst_after_a_stall_passes_and_a_flood_does_not() {
        let plan = WebPlan::of(bloatlab_model::Profile::Quick);
        let mut b = ProbeBudget::new(&plan);
        // 3 s of probes at once (a connection stalled 3 s, then released)
        assert!((0..150).all(|_| b.take()));
        // a flood: far beyond 10 s of probes
        assert!(!(0..1000).all(|_| b.take()));
    }
}
