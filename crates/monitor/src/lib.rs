//! bloatlab-monitor: the schedule of `bloatlab monitor`. Each target (a
//! bloatlab server) gets the short loaded test of
//! [`MonitorConfig::test_config`] every `--every`, started up to
//! `--jitter` late at random, one test at a time (two tests on one line
//! would load each other); every run, measured or failed, goes to the
//! [`Store`] as a result of `bloatlab test`'s schema with its `monitor`
//! field.
//!
//! Reliability:
//! * a target that fails (down, refusing, busy) is recorded with the reason
//!   and retried sooner, with backoff (30 s, doubling, at most `--every`);
//!   the others go on as scheduled;
//! * a store that refuses a write (locked, read-only, full) is reported and
//!   the run kept in memory and written with the next ones: nothing is lost
//!   while the process lives (at most [`MAX_PENDING`] runs are held; beyond
//!   that the oldest result's samples are dropped, its row kept);
//! * a stop (SIGTERM, SIGINT) ends the running test at once, keeps what it
//!   measured (marked incomplete), writes what is pending and returns;
//! * on start the schedule resumes from the store: a target tested within
//!   the last `--every` waits for the rest of it.
#![forbid(unsafe_code)]
pub mod alert;
pub mod http;
pub mod latency;
pub mod metrics;
pub mod rpm;
pub mod schedule;

use bloatlab_engine::client;
use bloatlab_model::{Budget, MonitorConfig, MonitorTarget};
use bloatlab_results::{MonitorRun, TestResult};
use bloatlab_store::{Outcome, Query, Run, RunRow, Store, StoreError};
use rand::Rng;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use bloatlab_host::clock::now_ns;
use schedule::{BudgetUse, Schedule};
use std::time::Duration;

/// Runs held while the store refuses writes.
pub const MAX_PENDING: usize = 1000;
pub use schedule::{retry_after, FIRST_RETRY};
/// How often old results are pruned (`--retention`).
pub const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// What the monitor tells its front end.
#[derive(Debug)]
pub enum Event<'a> {
    /// The schedule of a target, at start: when its first run is due.
    Scheduled { target: &'a str, first_in: Duration },
    /// A run began.
    Started { target: &'a str },
    /// A latency-only target is probed from now on; its first round is kept then.
    Probing { target: &'a str, every: Duration, first_round_in: Duration },
    /// A latency-only round was not kept: all its probes went out while a
    /// loaded test of this monitor ran.
    RoundLeftOut { left_out: &'a latency::LeftOut },
    /// A run ended and was written (`row` is what history shows of it).
    Kept { run: &'a Run, id: i64, retry_in: Option<Duration> },
    /// The store refused; the runs are held (how many now).
    StoreFailed { error: &'a StoreError, pending: usize },
    /// Held runs were written at last.
    Flushed { count: usize },
    /// Results older than the retention were deleted.
    Pruned { count: usize },
    /// Prometheus metrics are served here.
    Metrics { url: String },
    /// A target crossed its threshold (or came back); `queued` says whether
    /// it went to the webhook (None: no --webhook).
    Alert { alert: &'a alert::Alert, queued: Option<Result<(), String>> },
    /// The webhook took an alert, or refused it after every try.
    Delivered { alert: &'a alert::Alert, error: Option<&'a str> },
    /// A target's first measured run here: what it moved, and what that
    /// comes to in a month at this schedule.
    Cost { target: &'a str, bytes: u64, per_month: f64 },
    /// The data used in the budget's period, after a run (or at start).
    Budget { used: u64, budget: &'a Budget },
    /// A run was not started: it would have passed the budget.
    Skipped { target: &'a str, used: u64, estimate: u64, budget: &'a Budget },
}

/// A loaded target's test: run it (a stop abandons it) and return its outcome.
pub type LoadedTest = Box<dyn Fn(&AtomicBool) -> rpm::Ran>;

/// The test of a loaded target (None: a latency-only target, probed in
/// rounds by [`latency::Prober`] instead): the one place a target kind
/// becomes what runs.
pub fn loaded_test(cfg: &MonitorConfig, target: &MonitorTarget) -> Option<LoadedTest> {
    match target {
        MonitorTarget::Server { host, port } => {
            let t = cfg.test_config(host, *port);
            Some(Box::new(move |stop: &AtomicBool| {
                let o = client::run(&t, stop, &mut |_| {}, None);
                rpm::Ran { result: o.result, error: o.error }
            }))
        }
        MonitorTarget::Rpm { url, pin_sha256 } => {
            let (c, name) = (cfg.rpm_config(url, pin_sha256.as_deref()), target.name());
            Some(Box::new(move |stop: &AtomicBool| rpm::run(&c, &name, stop)))
        }
        MonitorTarget::Ping(_) | MonitorTarget::Probes { .. } => None,
    }
}

/// The monitor's id: `--id`, or the host name.
pub fn monitor_id(cfg: &MonitorConfig) -> String {
    if !cfg.id.is_empty() {
        return cfg.id.clone();
    }
    let h = bloatlab_host::hostname();
    if h.is_empty() {
        "bloatlab-monitor".into()
    } else {
        h
    }
}

/// Run the schedule until `stop` is set. Returns how many runs were kept;
/// Err when runs could not be written by the time it stopped (they are
/// lost with the process: the error says how many).
pub fn run(cfg: &MonitorConfig, store: &mut dyn Store, stop: &AtomicBool, on: &mut dyn FnMut(Event)) -> Result<u64, String> {
    cfg.check()?;
    let id = monitor_id(cfg);
    let every_ns = cfg.every.as_nanos() as u64;
    let mut rng = rand::rng();
    let mut sched = Schedule::new(cfg.every, cfg.jitter.of(cfg.every), Box::new(move |max| rng.random_range(0..=max)));
    let mut tests: Vec<LoadedTest> = vec![];
    let now = now_ns();
    let exp = std::sync::Arc::new(metrics::Exposition::new());
    if let Some(addr) = cfg.metrics {
        let at = http::serve(addr, exp.clone())?;
        let host = if at.is_ipv6() { format!("[{}]", at.ip()) } else { at.ip().to_string() };
        on(Event::Metrics { url: format!("http://{host}:{}/metrics", at.port()) });
    }
    // resume: a target's next run is due `every` after its last one
    let mut history = vec![];
    for t in &cfg.targets {
        let name = t.name();
        // a latency-only target has no schedule to resume: probed from now on
        let Some(test) = loaded_test(cfg, t) else { continue };
        exp.prime(&name);
        // the last day's runs: the newest shows in the metrics until the first run here
        let recent = store
            .rows(&Query { target: Some(name.clone()), since_unix_ns: Some(now.saturating_sub(every_ns.max(86_400_000_000_000))), ..Default::default() })
            .map_err(|e| format!("{e}"))?;
        if let Some(r) = recent.last() {
            exp.show_row(r);
        }
        let keep = recent.len().saturating_sub(2 * cfg.alert_runs as usize);
        history.extend(recent[keep..].iter().cloned());
        let last_bytes = recent.iter().rev().find(|r| r.failure.is_none() && r.bytes > 0).map(|r| r.bytes);
        let first_in = sched.add(t.clone(), recent.last().map(|r| r.started_unix_ns), last_bytes, now);
        tests.push(test);
        on(Event::Scheduled { target: &name, first_in });
    }
    let mut alerting = alert::Alerting::new(&id, cfg.alert_added.as_secs_f64() * 1e3, cfg.alert_runs);
    for r in &history {
        // the state a restart resumes from: no alert for what was told before
        let _ = alerting.observe(r);
    }
    let webhook = cfg.webhook.clone().map(alert::Webhook::start);
    let mut outstanding = 0usize;
    // the budget's use: the database's for the period so far, then each run's
    let mut usage = match &cfg.budget {
        Some(b) => {
            let start = b.window_start(now);
            let used = store.bytes_since(start).map_err(|e| format!("{e}"))?;
            exp.show_budget(b, used);
            on(Event::Budget { used, budget: b });
            Some(BudgetUse { start_ns: start, used })
        }
        None => None,
    };
    let mut pending: VecDeque<Run> = VecDeque::new();
    let mut kept = 0u64;
    let mut pruned_at: Option<std::time::Instant> = None;
    let mut prober = latency::Prober::start(cfg);
    if let Some(due) = prober.next_due() {
        for t in cfg.targets.iter().filter(|t| t.latency_only()) {
            on(Event::Probing { target: &t.name(), every: cfg.probe_every, first_round_in: Duration::from_nanos(due.saturating_sub(now_ns())) });
        }
    }
    // a batch of runs (oldest first): each recorded and held, written, and
    // only then the alerts they raised told, so the console reads in time
    // order with each alert after the run that triggered it
    // (`retry`: the loaded run's target and start, and when it runs next)
    type Retry = Option<((String, u64), Duration)>;
    let keep = |mut batch: Vec<Run>, retry: Retry, store: &mut dyn Store, pending: &mut VecDeque<Run>, alerting: &mut alert::Alerting, outstanding: &mut usize, on: &mut dyn FnMut(Event)| -> u64 {
        batch.sort_by_key(|r| r.started_unix_ns);
        let fresh = batch.len();
        let mut raised = vec![];
        for run in batch {
            exp.record(&run);
            if let Some(a) = alerting.observe(&RunRow::of(&run)) {
                let queued = webhook.as_ref().map(|w| w.send(a.clone()));
                if matches!(queued, Some(Ok(()))) {
                    *outstanding += 1;
                }
                raised.push((a, queued));
            }
            pending.push_back(run);
        }
        let n = write(store, pending, on, retry, fresh);
        for (a, queued) in raised {
            on(Event::Alert { alert: &a, queued });
        }
        n
    };
    while !stop.load(Ordering::Relaxed) {
        if let Some(w) = &webhook {
            for d in w.results.try_iter() {
                outstanding = outstanding.saturating_sub(1);
                on(Event::Delivered { alert: &d.alert, error: d.error.as_deref() });
            }
        }
        if !cfg.retention.is_zero() && pruned_at.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            pruned_at = Some(std::time::Instant::now());
            match store.prune(now_ns().saturating_sub(cfg.retention.as_nanos() as u64)) {
                Ok(0) => {}
                Ok(n) => on(Event::Pruned { count: n }),
                Err(e) => on(Event::StoreFailed { error: &e, pending: pending.len() }),
            }
        }
        // latency-only rounds that are due
        let latency::Harvest { runs: rounds, left_out } = prober.harvest(now_ns(), &id);
        for l in &left_out {
            on(Event::RoundLeftOut { left_out: l });
        }
        if !rounds.is_empty() {
            kept += keep(rounds, None, store, &mut pending, &mut alerting, &mut outstanding, on);
            exp.set_pending(pending.len());
        }
        // the next loaded run, or the next round, whichever comes first;
        // waiting wakes to see a stop
        let next = sched.next();
        let wake = next.map(|(_, start)| start).into_iter().chain(prober.next_due()).min().unwrap_or(u64::MAX);
        loop {
            let n = now_ns();
            if stop.load(Ordering::Relaxed) || n >= wake {
                break;
            }
            std::thread::sleep(Duration::from_nanos(wake - n).min(Duration::from_millis(100)));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Some((i, _)) = next.filter(|&(_, start)| now_ns() >= start) else { continue };
        if let (Some(b), Some(u)) = (&cfg.budget, usage.as_mut()) {
            let estimate = sched.slot(i).last_bytes.unwrap_or(0);
            if !u.allows(b, now_ns(), estimate) {
                let name = sched.slot(i).name.clone();
                on(Event::Skipped { target: &name, used: u.used, estimate, budget: b });
                exp.skipped(&name);
                sched.skip(i);
                continue;
            }
        }
        let name = sched.slot(i).name.clone();
        on(Event::Started { target: &name });
        let started = now_ns();
        let (due_ns, sequence) = sched.begin(i);
        let out = tests[i](stop);
        prober.loaded(started, now_ns());
        let monitor = MonitorRun {
            monitor_id: id.clone(),
            target: name.clone(),
            every_s: cfg.every.as_secs_f64(),
            jitter_s: cfg.jitter.of(cfg.every).as_secs_f64(),
            due_unix_ns: due_ns,
            sequence,
        };
        let outcome = match out.result {
            Some(mut r) => {
                r.monitor = Some(monitor);
                Outcome::Measured(Box::new(r))
            }
            None => Outcome::Failed(out.error.unwrap_or_else(|| "the test ended without a result".into())),
        };
        let failed = matches!(outcome, Outcome::Failed(_));
        let run = Run { monitor_id: id.clone(), target: name.clone(), started_unix_ns: started, outcome };
        let bytes = RunRow::of(&run).bytes;
        if bytes > 0 && sched.slot(i).last_bytes.is_none() {
            let per_month = bytes as f64 * (30.0 * 86_400.0 / cfg.every.as_secs_f64());
            on(Event::Cost { target: &name, bytes, per_month });
        }
        // the next run: on schedule, or sooner after a failure
        let retry = sched.end(i, now_ns(), failed, bytes).map(|d| ((run.target.clone(), run.started_unix_ns), d));
        // with the rounds that ended meanwhile, in the order they began
        let latency::Harvest { runs: mut batch, left_out } = prober.harvest(now_ns(), &id);
        for l in &left_out {
            on(Event::RoundLeftOut { left_out: l });
        }
        batch.push(run);
        kept += keep(batch, retry, store, &mut pending, &mut alerting, &mut outstanding, on);
        exp.set_pending(pending.len());
        if let (Some(b), Some(u)) = (&cfg.budget, usage.as_mut()) {
            u.used += bytes;
            exp.show_budget(b, u.used);
            on(Event::Budget { used: u.used, budget: b });
        }
    }
    // a stop: the latency round in progress is kept (cut short), what is
    // held gets one more try, alerts on their way their tries
    let latency::Harvest { runs: mut last, mut left_out } = prober.harvest(now_ns(), &id);
    let at_stop = prober.finish(&id, "the monitor was stopped during the round");
    last.extend(at_stop.runs);
    left_out.extend(at_stop.left_out);
    kept += keep(last, None, store, &mut pending, &mut alerting, &mut outstanding, on);
    // (told after the rounds kept before them)
    for l in &left_out {
        on(Event::RoundLeftOut { left_out: l });
    }
    if let Some(w) = &webhook {
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while outstanding > 0 {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match w.results.recv_timeout(left) {
                Ok(d) => {
                    outstanding -= 1;
                    on(Event::Delivered { alert: &d.alert, error: d.error.as_deref() });
                }
                Err(_) => break,
            }
        }
    }
    if pending.is_empty() {
        Ok(kept)
    } else {
        Err(format!("{} run(s) could not be written to the database and are lost", pending.len()))
    }
}

/// Write the held runs, oldest first; stop at the first refusal. Returns how many went.
fn write(store: &mut dyn Store, pending: &mut VecDeque<Run>, on: &mut dyn FnMut(Event), retry: Option<((String, u64), Duration)>, fresh: usize) -> u64 {
    // runs held from before (not those just measured)
    let held = pending.len().saturating_sub(fresh);
    let mut n = 0u64;
    while let Some(run) = pending.front() {
        match store.put(run) {
            Ok(id) => {
                let run = pending.pop_front().unwrap();
                n += 1;
                // the loaded run just measured: its next run is known
                let r = retry.as_ref().filter(|(k, _)| k.0 == run.target && k.1 == run.started_unix_ns).map(|(_, d)| *d);
                on(Event::Kept { run: &run, id, retry_in: r });
            }
            Err(e) => {
                shed(pending);
                on(Event::StoreFailed { error: &e, pending: pending.len() });
                return n;
            }
        }
    }
    if held > 0 && pending.is_empty() {
        on(Event::Flushed { count: held });
    }
    n
}

/// Bound what is held: past [`MAX_PENDING`] runs the oldest results lose
/// their samples (their headline rows stay).
fn shed(pending: &mut VecDeque<Run>) {
    let over = pending.len().saturating_sub(MAX_PENDING);
    for run in pending.iter_mut().take(over) {
        if let Outcome::Measured(r) = &mut run.outcome {
            strip(r);
        }
    }
}

fn strip(r: &mut TestResult) {
    for p in r.idle.iter_mut().chain(r.scenarios.iter_mut()) {
        p.probes.clear();
        p.rr.clear();
        p.flows.iter_mut().for_each(|f| {
            f.goodput.clear();
            f.tcp_info.clear();
        });
    }
}
