//! Alerts for users without Prometheus: a webhook (a JSON POST) when a
//! target crosses a threshold `--alert-runs` runs in a row, and again when
//! it is back under it as many runs in a row, so an alert does not flap
//! with every run near the threshold.
//!
//! Two conditions per target:
//! * **bloated**: a measured run's added latency at or above `--alert-added`
//!   (the grade's number; a failed run says nothing about it and leaves
//!   the count as it is); `recovered` when as many runs in a row are
//!   under it;
//! * **failing**: a failed run (down, refusing, busy); `back` when as many
//!   runs in a row measured.
//!
//! The payload carries a `text` line as well as the fields, so chat
//! webhooks that show `text` (Slack, Mattermost, Rocket.Chat) need nothing
//! in between. Delivery runs on a thread of its own: up to 3 tries, 10 s
//! each, 2 s and 4 s apart; at most 64 alerts wait (more are dropped, and
//! said so).
use bloatlab_store::RunRow;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::time::Duration;

pub const QUEUE: usize = 64;
const TRIES: u32 = 3;
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Bloated,
    Recovered,
    Failing,
    Back,
}

impl Kind {
    /// As posted: "bloated", "recovered", "failing", "back".
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bloated => "bloated",
            Kind::Recovered => "recovered",
            Kind::Failing => "failing",
            Kind::Back => "back",
        }
    }
}

/// One alert, as posted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    pub event: Kind,
    pub monitor_id: String,
    pub target: String,
    /// The runs in a row that decided it (oldest first): their start (RFC
    /// 3339), added latency (ms) or failure.
    pub runs: Vec<AlertRun>,
    pub threshold_ms: f64,
    pub runs_in_a_row: u32,
    /// One line for people (and chat webhooks).
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertRun {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grade: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

#[derive(Default)]
struct State {
    /// The last runs (at most `runs`), oldest first.
    recent: Vec<RunRow>,
    /// The last measured runs (at most `runs`), oldest first.
    measured: Vec<RunRow>,
    bloated: bool,
    failing: bool,
}

fn keep(v: &mut Vec<RunRow>, r: &RunRow, n: usize) {
    v.push(r.clone());
    if v.len() > n {
        v.remove(0);
    }
}

/// The conditions of every target, run by run.
pub struct Alerting {
    pub threshold_ms: f64,
    pub runs: u32,
    monitor_id: String,
    states: HashMap<String, State>,
}

fn over(r: &RunRow, t: f64) -> Option<bool> {
    if r.failure.is_some() {
        return None;
    }
    // at the threshold is over it: the grade's A boundary is a B's first value
    r.added_ms.map(|a| a >= t)
}

impl Alerting {
    pub fn new(monitor_id: &str, threshold_ms: f64, runs: u32) -> Alerting {
        Alerting { threshold_ms, runs: runs.max(1), monitor_id: monitor_id.into(), states: HashMap::new() }
    }

    /// Take run `r` of its target (in order); the alert it raises, if any.
    pub fn observe(&mut self, r: &RunRow) -> Option<Alert> {
        let n = self.runs as usize;
        let t = self.threshold_ms;
        let s = self.states.entry(r.target.clone()).or_default();
        keep(&mut s.recent, r, n);
        let measured = over(r, t);
        if measured.is_some() {
            keep(&mut s.measured, r, n);
        }
        let all = |v: &[RunRow], f: &dyn Fn(&RunRow) -> bool| v.len() == n && v.iter().all(f);
        let kind = if !s.failing && all(&s.recent, &|x| x.failure.is_some()) {
            s.failing = true;
            Kind::Failing
        } else if s.failing && all(&s.recent, &|x| x.failure.is_none()) {
            s.failing = false;
            Kind::Back
        } else if measured.is_some() && !s.bloated && all(&s.measured, &|x| over(x, t) == Some(true)) {
            s.bloated = true;
            Kind::Bloated
        } else if measured.is_some() && s.bloated && all(&s.measured, &|x| over(x, t) == Some(false)) {
            s.bloated = false;
            Kind::Recovered
        } else {
            return None;
        };
        let which = if matches!(kind, Kind::Bloated | Kind::Recovered) { &s.measured } else { &s.recent };
        let runs: Vec<AlertRun> = which
            .iter()
            .map(|x| AlertRun {
                time: bloatlab_model::units::UtcTime::from_unix_ns(x.started_unix_ns).rfc3339_secs(),
                added_ms: x.added_ms.filter(|_| x.failure.is_none()),
                grade: x.grade.clone().filter(|_| x.failure.is_none()),
                failure: x.failure.clone(),
            })
            .collect();
        let ms = |v: f64| format!("{} ms", bloatlab_model::fmt::ms(v));
        let added: Vec<String> = runs.iter().filter_map(|x| x.added_ms).map(ms).collect();
        let text = match kind {
            Kind::Bloated => format!(
                "bloatlab: {} added more than {} of latency under load in {} runs in a row ({}); grade {}",
                r.target,
                ms(t),
                n,
                added.join(", "),
                r.grade.as_deref().unwrap_or("?")
            ),
            Kind::Recovered => format!("bloatlab: {} is back under {} of added latency for {} runs in a row ({})", r.target, ms(t), n, added.join(", ")),
            Kind::Failing => format!("bloatlab: {} failed {} runs in a row: {}", r.target, n, r.failure.as_deref().unwrap_or("?")),
            Kind::Back => format!("bloatlab: {} measured again, {} runs in a row", r.target, n),
        };
        Some(Alert { event: kind, monitor_id: self.monitor_id.clone(), target: r.target.clone(), runs, threshold_ms: t, runs_in_a_row: self.runs, text })
    }
}

/// What became of a posted alert.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub alert: Alert,
    /// None: delivered; Some: why not, after every try.
    pub error: Option<String>,
}

/// The webhook's sender: alerts go to a thread that posts them.
pub struct Webhook {
    tx: SyncSender<Alert>,
    pub results: Receiver<Delivery>,
}

fn post(url: &str, a: &Alert) -> Result<(), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(TIMEOUT)).http_status_as_error(false).build().into();
    let body = serde_json::to_string(a).map_err(|e| e.to_string())?;
    let resp = agent.post(url).header("content-type", "application/json").header("user-agent", concat!("bloatlab/", env!("CARGO_PKG_VERSION"))).send(body.as_str()).map_err(|e| e.to_string())?;
    let st = resp.status();
    if st.is_success() {
        Ok(())
    } else {
        Err(format!("HTTP {}", st.as_u16()))
    }
}

impl Webhook {
    /// Post to `url` (http:// or https://) from a thread of its own.
    pub fn start(url: String) -> Webhook {
        let (tx, rx) = sync_channel::<Alert>(QUEUE);
        let (rtx, results) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("webhook".into())
            .spawn(move || {
                for a in rx {
                    let mut error = None;
                    for k in 0..TRIES {
                        if k > 0 {
                            std::thread::sleep(Duration::from_secs(2 << (k - 1)));
                        }
                        match post(&url, &a) {
                            Ok(()) => {
                                error = None;
                                break;
                            }
                            Err(e) => error = Some(format!("{e} ({} tries)", k + 1)),
                        }
                    }
                    if rtx.send(Delivery { alert: a, error }).is_err() {
                        return;
                    }
                }
            })
            .expect("a thread for the webhook");
        Webhook { tx, results }
    }

    /// Queue `a`; an error when the queue is full (the alert is dropped).
    pub fn send(&self, a: Alert) -> Result<(), String> {
        match self.tx.try_send(a) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(a)) => Err(format!("{QUEUE} alerts wait already; dropped: {}", a.text)),
            Err(TrySendError::Disconnected(a)) => Err(format!("the webhook thread stopped; dropped: {}", a.text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: u64, added: Option<f64>) -> RunRow {
        RunRow {
            target: "a:1".into(),
            started_unix_ns: t * 60_000_000_000,
            failure: added.is_none().then(|| "connection refused".into()),
            added_ms: added,
            grade: added.map(|a| if a > 30.0 { "B".into() } else { "A".into() }),
            complete: true,
            ..Default::default()
        }
    }

    fn kinds(a: &mut Alerting, runs: &[Option<f64>]) -> Vec<Option<Kind>> {
        runs.iter().enumerate().map(|(i, &x)| a.observe(&run(i as u64, x)).map(|a| a.event)).collect()
    }

    #[test]
    fn alerts_need_n_runs_in_a_row_each_way_and_do_not_flap() {
        let mut a = Alerting::new("m", 30.0, 3);
        use Kind::*;
        // high, high, low, high, high, high: bloated at the 6th; then two low
        // and one high (no recovery), then three low (recovered)
        let k = kinds(&mut a, &[Some(40.0), Some(50.0), Some(10.0), Some(40.0), Some(41.0), Some(42.0), Some(5.0), Some(6.0), Some(35.0), Some(1.0), Some(2.0), Some(3.0)]);
        assert_eq!(k, [None, None, None, None, None, Some(Bloated), None, None, None, None, None, Some(Recovered)]);
        // failures: failing after three, back after three measured
        let mut a = Alerting::new("m", 30.0, 3);
        let k = kinds(&mut a, &[None, None, Some(1.0), None, None, None, Some(1.0), None, Some(2.0), Some(2.0), Some(2.0)]);
        assert_eq!(k, [None, None, None, None, None, Some(Failing), None, None, None, None, Some(Back)]);
        // a failed run between high ones leaves the latency count as it is
        let mut a = Alerting::new("m", 30.0, 3);
        let k = kinds(&mut a, &[Some(40.0), None, Some(50.0), Some(60.0)]);
        assert_eq!(k, [None, None, None, Some(Bloated)]);
    }

    #[test]
    fn the_payload_says_what_happened_in_a_line() {
        let mut a = Alerting::new("home", 30.0, 2);
        a.observe(&run(0, Some(45.0)));
        let al = a.observe(&run(1, Some(61.5))).unwrap();
        assert_eq!(al.text, "bloatlab: a:1 added more than 30.0 ms of latency under load in 2 runs in a row (45.0 ms, 61.5 ms); grade B");
        let v = serde_json::to_value(&al).unwrap();
        assert_eq!(v["event"], "bloated");
        for k in [Kind::Bloated, Kind::Recovered, Kind::Failing, Kind::Back] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
        assert_eq!(v["runs"][1]["added_ms"], 61.5);
        assert_eq!(v["runs"][0]["time"], "1970-01-01T00:00:00Z");
        assert!(v["runs"][0].get("failure").is_none());
    }
}
