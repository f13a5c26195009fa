//! A bloatlab server's UDP probes, kept running: the monitor's
//! `udp:HOST[:PORT]` latency-only target. The probes run in probe-only
//! sessions (no flows, as `--witness` opens) of about a minute each, within
//! the server's `--max-duration`; the next session is opened before the
//! last one ends and its probes continue on the same time grid, so the
//! watcher sees one stream. Exchanges are taken by send time once they have
//! settled; a session that cannot be opened (the server down, a name that
//! does not resolve, a refusal) is tried again every [`RETRY`], and why is
//! told with the exchanges of that time.
use crate::client::{open_session, Session};
use crate::conn;
use crate::probe::{Exchange, ProbeStream};
use bloatlab_host::clock;
use bloatlab_model::TestConfig;
use bloatlab_results::HostInfo;
use bloatlab_wire::ClientMsg;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// A session's probes span about this long (at least four probes:
/// [`span`])...
pub const SPAN: Duration = Duration::from_secs(60);

/// How long a session's probes span at this interval, at most (the
/// server's `--max-duration` may make it shorter; the first one is 5 s).
pub fn span(interval: Duration) -> Duration {
    SPAN.max(interval * 4)
}
/// ...the next session is opened this long before one ends...
const LEAD: Duration = Duration::from_secs(2);
/// ...and a session that could not be opened is tried again this often.
pub const RETRY: Duration = Duration::from_secs(5);
/// An ended session's late replies are awaited this long.
const DRAIN: Duration = Duration::from_secs(1);
/// The first session's span: the server's `--max-duration` is learned from it.
const FIRST_SPAN: Duration = Duration::from_secs(5);

pub struct UdpWatch {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Closed when the thread ends.
    ended: mpsc::Receiver<()>,
}

/// A stop waits this long for the thread (a connect in progress may take
/// its timeout; the thread then ends on its own).
const STOP_WAIT: Duration = Duration::from_secs(3);

#[derive(Default)]
struct State {
    /// The server's address and itself, as its first session described it.
    server: Option<(SocketAddr, HostInfo)>,
    /// The exchanges of the sessions that ended, in send order.
    done: Vec<Exchange>,
    /// The running sessions' exchanges, shared with their streams.
    live: Vec<Arc<Mutex<Vec<Exchange>>>>,
    /// Why a session could not be opened, and when (clock ns).
    failures: Vec<(u64, String)>,
    /// Why none runs now (the last failure, until a session opens).
    down: Option<String>,
    /// The exchanges sent before this were taken.
    taken_until: u64,
}

/// One probe-only session and its stream: probes sent until `end` (clock ns).
struct Running {
    sess: Session,
    stream: ProbeStream,
    records: Arc<Mutex<Vec<Exchange>>>,
    end: u64,
}

impl UdpWatch {
    /// Keep probes going to the server of `cfg` every `interval` from
    /// `first_due` (clock ns): its sessions open in the background, and why
    /// one cannot is told with the exchanges of that time.
    pub fn start(cfg: &TestConfig, interval: Duration, first_due: u64) -> Result<UdpWatch, String> {
        let state = Arc::new(Mutex::new(State { taken_until: first_due, ..Default::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp, cfg) = (state.clone(), stop.clone(), cfg.clone());
        let (tx, ended) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("udp-watch".into())
            .spawn(move || {
                let _tx = tx;
                keep_going(&cfg, interval, first_due, &st, &sp)
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        Ok(UdpWatch { state, stop, thread: Some(thread), ended })
    }

    /// The server's address and itself, once a session was opened.
    pub fn server(&self) -> Option<(SocketAddr, HostInfo)> {
        self.state.lock().unwrap().server.clone()
    }

    /// The exchanges sent before `before` (clock ns) not taken yet, in send
    /// order, and why a session could not be opened meanwhile (if it could not).
    pub fn take_settled(&self, before: u64) -> (Vec<Exchange>, Option<String>) {
        let mut st = self.state.lock().unwrap();
        let from = st.taken_until;
        let mut out: Vec<Exchange> = vec![];
        let done = std::mem::take(&mut st.done);
        let (old, keep): (Vec<Exchange>, Vec<Exchange>) = done.into_iter().partition(|e| e.t1 < before);
        st.done = keep;
        out.extend(old.into_iter().filter(|e| e.t1 >= from));
        for l in &st.live {
            out.extend(l.lock().unwrap().iter().filter(|e| e.t1 >= from && e.t1 < before).copied());
        }
        out.sort_by_key(|e| e.t1);
        let why = st.failures.iter().rfind(|f| f.0 < before).map(|f| f.1.clone()).or_else(|| st.live.is_empty().then(|| st.down.clone()).flatten());
        st.failures.retain(|f| f.0 >= before);
        st.taken_until = before.max(from);
        (out, why)
    }

    /// Stop: the running session ends (its late replies awaited up to a
    /// second); the exchanges not taken yet, in send order, and why a
    /// session could not be opened since (if it could not).
    pub fn finish(mut self) -> (Vec<Exchange>, Option<String>) {
        self.halt();
        // (with a session still opening when the wait ran out: what it sent)
        self.take_settled(u64::MAX)
    }
}

impl UdpWatch {
    /// Stop the thread: joined when it ends within [`STOP_WAIT`], else left
    /// to end on its own.
    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.thread.take() {
            if let Err(mpsc::RecvTimeoutError::Disconnected) = self.ended.recv_timeout(STOP_WAIT) {
                let _ = h.join();
            }
        }
    }
}

impl Drop for UdpWatch {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A probe-only session whose probes run on the grid from `grid` for about
/// `span`, and no longer than the server allows (`max`, once known): its
/// announced length covers them, the next session's lead and a second.
fn open(addr: SocketAddr, cfg: &TestConfig, interval: Duration, grid: u64, span: Duration, max: Option<Duration>) -> Result<Running, String> {
    let iv = (interval.as_nanos() as u64).max(1);
    let margin = Duration::from_secs(1).as_nanos() as u64;
    let ahead = grid.saturating_sub(clock::now_ns());
    let mut n = (span.as_nanos() as u64).div_ceil(iv).max(1);
    if let Some(m) = max {
        n = n.min((m.as_nanos() as u64).saturating_sub(ahead + margin) / iv).max(1);
    }
    let end = grid + n * iv;
    let planned = Duration::from_nanos(ahead + n * iv + margin);
    let sess = open_session(addr, cfg, 0, planned.as_millis() as u64)?;
    let stream = ProbeStream::start(addr, sess.token, 0, grid, interval, 1, cfg.probe_size, cfg.secret.clone(), sess.auth, 0)
        .map_err(|e| format!("cannot start UDP probes to {addr}: {e}"))?;
    let records = stream.records();
    Ok(Running { sess, stream, records, end })
}

/// End a session: stop its probes, await their late replies, tell the
/// server, and move its exchanges to the ended ones (in one step for a
/// reader: none is seen twice or missed).
fn end(mut r: Running, state: &Mutex<State>) {
    r.stream.stop(DRAIN);
    let _ = conn::send(&mut r.sess.ctl, &ClientMsg::EndTest { summary: "probe-only session of `bloatlab monitor` (a udp: target)".into(), complete: true });
    let mut st = state.lock().unwrap();
    let ex = std::mem::take(&mut *r.records.lock().unwrap());
    st.live.retain(|l| !Arc::ptr_eq(l, &r.records));
    let from = st.taken_until;
    st.done.extend(ex.into_iter().filter(|e| e.t1 >= from));
}

/// Sleep until `t` (clock ns) or a stop; true when stopped.
fn wait_until(t: u64, stop: &AtomicBool) -> bool {
    crate::probe::sleep_until(t, stop);
    stop.load(Ordering::Relaxed)
}

/// The sessions one after another until a stop.
fn keep_going(cfg: &TestConfig, interval: Duration, grid0: u64, state: &Mutex<State>, stop: &AtomicBool) {
    let iv = (interval.as_nanos() as u64).max(1);
    // a session's span: about a minute, at least four probes (the first
    // one shorter: it learns the server's limit)
    let span = span(interval);
    let mut max: Option<Duration> = None;
    let mut addr = None;
    let mut cur: Option<Running> = None;
    let mut retry_at = 0;
    loop {
        let open_at = cur.as_ref().map(|c| c.end.saturating_sub(LEAD.as_nanos() as u64)).unwrap_or(retry_at);
        if wait_until(open_at, stop) {
            break;
        }
        // the next session continues the grid where this one ends (or at
        // the next point of the grid after a gap)
        let grid = match &cur {
            Some(c) => c.end,
            None => {
                let t = clock::now_ns() + 10_000_000;
                grid0 + t.saturating_sub(grid0).div_ceil(iv) * iv
            }
        };
        let a = match addr {
            Some(a) => Ok(a),
            None => conn::resolve(&cfg.server, cfg.port, cfg.family),
        };
        let next = match a.and_then(|a| open(a, cfg, interval, grid, if max.is_some() { span } else { FIRST_SPAN }, max).map(|n| (a, n))) {
            Ok((a, n)) => {
                addr = Some(a);
                max = Some(n.sess.max_duration);
                let mut st = state.lock().unwrap();
                st.down = None;
                st.server.get_or_insert_with(|| (a, n.sess.server.clone()));
                st.live.push(n.records.clone());
                Some(n)
            }
            Err(e) => {
                let mut st = state.lock().unwrap();
                st.failures.push((clock::now_ns(), e.clone()));
                st.down = Some(e);
                drop(st);
                retry_at = clock::now_ns() + RETRY.as_nanos() as u64;
                None
            }
        };
        if let Some(c) = cur.take() {
            // its last probe went out half an interval before its end
            let stopped = wait_until(c.end.saturating_sub(iv / 2), stop);
            end(c, state);
            if stopped {
                cur = next;
                break;
            }
        }
        cur = next;
    }
    if let Some(c) = cur {
        end(c, state);
    }
}
