//! The loop `bloatlab tune` runs: measure the line (the quick profile),
//! search each bloated direction for the highest shaper rate that holds
//! the target, verify the rates found with the quick profile again, then
//! keep the shaper or put the interface back. The tests run through a
//! [`Meter`] (a process on the router, or in a LAN host's namespace, or
//! the lab's client); the shaper is a [`LineShaper`]. Whatever ends the
//! run (an error, a signal), the interface is put back unless `--keep`.
use crate::local::{LocalBefore, LocalSetting, LocalStep, QueueSearch};
use crate::plan::Plan;
use crate::search::{Budget, Outcome, Search, Step};
use crate::shaper::LineShaper;
use anyhow::{anyhow, bail, Result};
use bloatlab_model::{Rate, TuneConfig, TuneTest};
use bloatlab_results::{Phase, TestResult};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Runs a test through the line and returns its result.
pub trait Meter {
    /// `what`: "before", "after", "download step 3"... for progress and logs.
    fn run(&mut self, what: &str, test: &TuneTest) -> Result<TestResult>;
}

pub use bloatlab_results::Direction;

/// "download" or "upload", as the search's lines say it.
pub fn word(d: Direction) -> &'static str {
    match d {
        Direction::Down => "download",
        Direction::Up => "upload",
    }
}

/// One step of a search, as the JSON and the report show it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub direction: Direction,
    #[serde(flatten)]
    pub step: Step,
    /// The step's wall time, s, and the bytes it moved.
    pub seconds: f64,
    pub bytes: f64,
}

/// One direction's search and how it ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirectionSearch {
    pub direction: Direction,
    /// The unshaped line, from the test before.
    pub line: Step,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The `kind` of a tune document.
pub const TUNE_KIND: &str = "bloatlab-tune";

/// What `bloatlab tune --json` writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneDoc {
    /// [`TUNE_KIND`].
    pub kind: String,
    /// The bloatlab that tuned.
    pub version: String,
    pub wan: String,
    pub server: String,
    pub target_added_ms: f64,
    /// The shaper and why it was chosen.
    pub shaper: String,
    pub shaper_why: String,
    pub dry_run: bool,
    pub before: Option<TestResult>,
    /// The quick profile again with the rates found in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<TestResult>,
    pub searches: Vec<DirectionSearch>,
    pub steps: Vec<StepRecord>,
    /// The chosen settings per direction (rate, qdisc and its parameters);
    /// absent when nothing is to be shaped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Plan>,
    /// Search time, s, and bytes, over both directions.
    pub search_seconds: f64,
    pub search_bytes: f64,
    /// Whether the shaper was left in place (`--keep`).
    pub kept: bool,
    /// What ended the tune early, if anything did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// `--local`: this host's own queue, tuned instead of a shaper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalDoc>,
}

/// What `--local` did to this host's queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalDoc {
    /// The queue as it was (kind, limit, txqueuelen, BQL).
    pub before: LocalBefore,
    /// Each setting tried, with what its loaded upload measured.
    pub steps: Vec<LocalStep>,
    /// The setting found (absent when none held, or none was needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<LocalSetting>,
    /// BQL's limit set with it, bytes (where the driver has BQL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bql_bytes: Option<u64>,
    /// How it ended, one sentence.
    pub outcome: String,
}

/// The phase of `r` that loads only `dir` (the quick profile's 0u4d, 4u0d;
/// a step's one phase).
pub fn one_way_phase(r: &TestResult, dir: Direction) -> Option<&Phase> {
    r.scenarios.iter().find(|p| match dir {
        Direction::Down => p.downloads > 0 && p.uploads == 0,
        Direction::Up => p.uploads > 0 && p.downloads == 0,
    })
}

/// (goodput, added latency, still rising) of `dir`'s phase.
pub fn measured(r: &TestResult, dir: Direction) -> Result<(f64, f64, bool)> {
    let p = one_way_phase(r, dir).ok_or_else(|| anyhow!("the test has no {} phase", word(dir)))?;
    let g = match dir {
        Direction::Down => p.summary.download_bps,
        Direction::Up => p.summary.upload_bps,
    };
    let a = p.summary.added_latency_ms.ok_or_else(|| anyhow!("the {} phase has no added latency (no idle baseline or no probe answered)", word(dir)))?;
    if g <= 0.0 {
        bail!("the {} phase moved no data", word(dir));
    }
    Ok((g, a, p.summary.still_rising))
}

fn bytes_of(r: &TestResult) -> f64 {
    r.idle.iter().chain(r.scenarios.iter()).map(|p| (p.summary.upload_bps + p.summary.download_bps) / 8.0 * (p.end_ns.saturating_sub(p.start_ns)) as f64 / 1e9).sum()
}

fn check_signal() -> Result<()> {
    let s = bloatlab_host::signals::pending();
    if s != 0 {
        bail!("interrupted by {}", bloatlab_host::signals::name(s));
    }
    Ok(())
}

/// Progress, one line at a time.
pub type Say<'a> = &'a mut dyn FnMut(&str);

/// Run the tune. On any error (a failed test, a signal) the shaper is put
/// back before the error returns; so it is at the end unless `cfg.keep`.
pub fn tune(cfg: &TuneConfig, meter: &mut dyn Meter, shaper: &mut LineShaper, say: Say) -> Result<TuneDoc> {
    let mut doc = TuneDoc::new(cfg, leaf_name(shaper), shaper.why.clone());
    let r = run(cfg, meter, shaper, say, &mut doc);
    let end = if r.is_ok() && cfg.keep && !cfg.dry_run {
        shaper.keep().map(|p| doc.kept = p.is_some())
    } else {
        shaper.restore()
    };
    ended(cfg, "", r, end).map(|_| doc)
}

/// How a tune ended: its run's result `r` and the keep-or-restore `end`
/// after it, in one result whose error says what `what` (" queue" for
/// `--local`'s, "" for the interface) is left as.
fn ended(cfg: &TuneConfig, what: &str, r: Result<()>, end: std::result::Result<(), String>) -> Result<()> {
    let w = &cfg.wan;
    let subject = if what.is_empty() { w.clone() } else { format!("{w}'s{what}") };
    match (r, end) {
        (Ok(()), Ok(())) => Ok(()),
        (Ok(()), Err(e)) => Err(anyhow!("putting {subject} back: {e}; run `bloatlab tune --undo {w}`")),
        (Err(e), Ok(())) => Err(e.context(format!("{subject} is as it was"))),
        (Err(e), Err(u)) => Err(e.context(format!("and putting {subject} back failed: {u}; run `bloatlab tune --undo {w}`"))),
    }
}

fn leaf_name(s: &LineShaper) -> String {
    match s.leaf {
        crate::plan::Leaf::Cake { overhead, mpu } => format!("cake (overhead {overhead}, mpu {mpu})"),
        crate::plan::Leaf::FqCodel => "htb + fq_codel".into(),
        crate::plan::Leaf::Emulator => "bloatlab's user-space shaper (rate + FQ-CoDel each way, between LAN and WAN by policy routing)".into(),
    }
}

fn run(cfg: &TuneConfig, meter: &mut dyn Meter, shaper: &mut LineShaper, say: Say, doc: &mut TuneDoc) -> Result<()> {
    let verify = cfg.verify_test().map_err(|e| anyhow!(e))?;
    say(&format!("measuring the line as it is ({})", verify.describe()));
    let before = meter.run("before", &verify)?;
    doc.before = Some(before.clone());
    check_signal()?;
    let t0 = Instant::now();
    let mut found: [Option<Rate>; 2] = [None, None];
    let dirs = [Direction::Down, Direction::Up];
    let mut spent = (0.0f64, 0.0f64);
    for (i, dir) in dirs.into_iter().enumerate() {
        let (g, a, _) = measured(&before, dir)?;
        let left = dirs.len() - i;
        let budget = Budget {
            steps: 30,
            seconds: (cfg.budget.as_secs_f64() - spent.0) / left as f64,
            bytes: cfg.budget_bytes.map(|b| (b as f64 - spent.1) / left as f64).unwrap_or(f64::INFINITY),
        };
        let target = doc.target_added_ms;
        let mut search = Search::new(g, a, target, budget);
        say(&format!(
            "{}: {} goodput, {} ms under load{}",
            word(dir),
            bloatlab_model::fmt::rate(g),
            bloatlab_model::fmt::signed(a),
            if search.next().is_none() { format!(": within the {} ms target, left alone", bloatlab_model::fmt::ms(target)) } else { String::new() }
        ));
        if cfg.dry_run {
            if search.next().is_some() {
                let r = search.line_rate_bps();
                say(&format!(
                    "{}: would search between {} and {} (dry run: nothing changed)",
                    word(dir),
                    bloatlab_model::fmt::rate(r * crate::search::LOW_SHARE),
                    bloatlab_model::fmt::rate(r)
                ));
            }
            doc.searches.push(DirectionSearch { direction: dir, line: search.line(), outcome: search.outcome().unwrap_or(Outcome::NotBloated { added_ms: a }) });
            continue;
        }
        let step_test = cfg.step_test(dir == Direction::Up).map_err(|e| anyhow!(e))?;
        let mut n = 0;
        while let Some(rate) = search.next() {
            check_signal()?;
            n += 1;
            let r = Rate { bps: rate.round() as u64 };
            let (up, down) = match dir {
                Direction::Down => (found[1], Some(r)),
                Direction::Up => (Some(r), found[0]),
            };
            shaper.set(up, down).map_err(|e| anyhow!("shaping {}: {e}", cfg.wan))?;
            let st = Instant::now();
            let res = meter.run(&format!("{} step {n}", word(dir)), &step_test)?;
            let secs = st.elapsed().as_secs_f64();
            let bytes = bytes_of(&res);
            let (g, a, rising) = measured(&res, dir)?;
            search.record(rate, g, a, rising, (secs, bytes));
            spent = (spent.0 + secs, spent.1 + bytes);
            let s = *search.steps().last().expect("recorded");
            doc.steps.push(StepRecord { direction: dir, step: s, seconds: secs, bytes });
            say(&format!(
                "{} step {n}: shaper {} -> goodput {}, {} ms{}: {}",
                word(dir),
                bloatlab_model::fmt::rate(rate),
                bloatlab_model::fmt::rate(g),
                bloatlab_model::fmt::signed(a),
                if rising { " and still rising" } else { "" },
                if s.held { "holds" } else { "too high" }
            ));
        }
        let outcome = search.outcome().expect("a search that ran has an outcome");
        match &outcome {
            Outcome::Found { rate_bps, goodput_bps, share_of_line, exact, .. } => {
                found[i] = Some(Rate { bps: rate_bps.round() as u64 });
                say(&format!(
                    "{}: shaper at {} keeps {} ({:.0}% of the line){}",
                    word(dir),
                    bloatlab_model::fmt::rate(*rate_bps),
                    bloatlab_model::fmt::rate(*goodput_bps),
                    share_of_line * 100.0,
                    if *exact { "" } else { "; the budget ended the search before its resolution" }
                ));
            }
            Outcome::NotControllable { rate_bps, added_ms } => say(&format!(
                "{}: even at {} latency rose by {} ms: the queue is not one a shaper on {} can take (another bottleneck, or this host itself); left alone",
                word(dir),
                bloatlab_model::fmt::rate(*rate_bps),
                bloatlab_model::fmt::ms(*added_ms),
                cfg.wan
            )),
            Outcome::NotBloated { .. } => {}
        }
        doc.searches.push(DirectionSearch { direction: dir, line: search.line(), outcome });
    }
    doc.search_seconds = t0.elapsed().as_secs_f64();
    doc.search_bytes = spent.1;
    if cfg.dry_run {
        return Ok(());
    }
    let [down, up] = found;
    if up.is_none() && down.is_none() {
        shaper.set(None, None).map_err(|e| anyhow!(e))?;
        say("nothing to shape: the interface is as it was");
        return Ok(());
    }
    shaper.set(up, down).map_err(|e| anyhow!("shaping {}: {e}", cfg.wan))?;
    doc.settings = shaper.current().cloned();
    check_signal()?;
    say(&format!("verifying the rates found ({})", verify.describe()));
    doc.after = Some(meter.run("after", &verify)?);
    Ok(())
}

/// `bloatlab tune --local`: this host's own queue (`lb`, as it was) is the
/// bottleneck's. Measure; if the upload is bloated, try fq_codel (where
/// `fq_codel` says the kernel has it), else search the FIFO's length;
/// verify; put the queue back unless `cfg.keep`, on every exit. The state
/// is saved in `state_file` first, for `--undo` after a SIGKILL.
pub fn tune_local(cfg: &TuneConfig, meter: &mut dyn Meter, lb: &LocalBefore, fq_codel: bool, state_file: &std::path::Path, say: Say) -> Result<TuneDoc> {
    let mut doc = TuneDoc::new(
        cfg,
        format!("{}'s own queue ({}{}, txqueuelen {})", lb.iface, lb.kind, lb.limit.map(|l| format!(" limit {l}")).unwrap_or_default(), lb.txqueuelen),
        "--local: the bottleneck is this host's own interface".into(),
    );
    doc.local = Some(LocalDoc { before: lb.clone(), steps: vec![], setting: None, bql_bytes: None, outcome: String::new() });
    if !cfg.dry_run {
        crate::state::Saved::local(lb).save_new(state_file).map_err(|e| anyhow!(e))?;
    }
    let r = run_local(cfg, meter, lb, fq_codel, say, &mut doc);
    if cfg.dry_run {
        return r.map(|_| doc);
    }
    let end = if r.is_ok() && cfg.keep && doc.local.as_ref().is_some_and(|l| l.setting.is_some()) {
        doc.kept = true;
        Ok(())
    } else {
        // put back whatever a step (or a signal during one) left; on a
        // queue that was never changed this sets it as it already is
        let e = lb.restore();
        e.and_then(|_| std::fs::remove_file(state_file).or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(format!("{}: {e}", state_file.display())) }))
    };
    ended(cfg, " queue", r, end).map(|_| doc)
}

fn run_local(cfg: &TuneConfig, meter: &mut dyn Meter, lb: &LocalBefore, fq_codel: bool, say: Say, doc: &mut TuneDoc) -> Result<()> {
    let verify = cfg.verify_test().map_err(|e| anyhow!(e))?;
    say(&format!("measuring the line as it is ({}); {}'s queue: {}", verify.describe(), lb.iface, doc.shaper));
    let before = meter.run("before", &verify)?;
    doc.before = Some(before.clone());
    check_signal()?;
    let target = doc.target_added_ms;
    let holds = |g: f64, a: f64, rising: bool| crate::search::holds(target, a, g / crate::search::WIRE_EFFICIENCY, rising);
    if let Ok((g, a, rising)) = measured(&before, Direction::Down) {
        if !holds(g, a, rising) {
            say(&format!("download: {} ms under load, but its queue is the sender's, at the far end: --local tunes this host's upload only", bloatlab_model::fmt::signed(a)));
        }
    }
    let (g, a, rising) = measured(&before, Direction::Up)?;
    let local = doc.local.as_mut().expect("set");
    if holds(g, a, rising) {
        local.outcome = format!("upload: {} ms under load, within the {} ms target: {}'s queue left alone", bloatlab_model::fmt::signed(a), bloatlab_model::fmt::ms(target), lb.iface);
        say(&local.outcome);
        return Ok(());
    }
    let bql = crate::local::bql_bytes(g / crate::search::WIRE_EFFICIENCY);
    say(&format!("upload: {} goodput, {} ms under load{}", bloatlab_model::fmt::rate(g), bloatlab_model::fmt::signed(a), if rising { " and still rising" } else { "" }));
    if cfg.dry_run {
        local.outcome = format!(
            "would try {} on {} (dry run: nothing changed)",
            if fq_codel { "fq_codel".to_string() } else { format!("FIFOs of {}..{} packets", crate::local::MIN_PACKETS, lb.packets()) },
            lb.iface
        );
        say(&local.outcome);
        return Ok(());
    }
    let step_test = cfg.step_test(true).map_err(|e| anyhow!(e))?;
    let t0 = Instant::now();
    let spent = std::cell::Cell::new((0.0f64, 0.0f64));
    let try_one = |s: LocalSetting, meter: &mut dyn Meter, say: &mut dyn FnMut(&str), n: usize| -> Result<(f64, f64, bool, f64)> {
        check_signal()?;
        lb.apply(&s, bql).map_err(|e| anyhow!("setting {}'s queue: {e}", lb.iface))?;
        let st = Instant::now();
        let res = meter.run(&format!("upload step {n}"), &step_test)?;
        let (s0, s1) = spent.get();
        spent.set((s0 + st.elapsed().as_secs_f64(), s1 + bytes_of(&res)));
        let m = measured(&res, Direction::Up)?;
        let lost = one_way_phase(&res, Direction::Up).map(|p| p.summary.latency.loss_pct).unwrap_or(0.0);
        say(&format!(
            "upload step {n}: {} -> goodput {}, {} ms{}, {:.1}% of the probes lost: {}",
            s.name(),
            bloatlab_model::fmt::rate(m.0),
            bloatlab_model::fmt::signed(m.1),
            if m.2 { " and still rising" } else { "" },
            lost,
            if holds(m.0, m.1, m.2) { "latency holds" } else { "too long" }
        ));
        Ok((m.0, m.1, m.2, lost))
    };
    let mut steps: Vec<LocalStep> = vec![];
    let mut setting = None;
    let mut lossy: Option<LocalStep> = None;
    if fq_codel {
        let (g1, a1, r1, l1) = try_one(LocalSetting::FqCodel, meter, say, 1)?;
        let held = holds(g1, a1, r1) && l1 < crate::local::MAX_LOST_PCT;
        steps.push(LocalStep { setting: LocalSetting::FqCodel, goodput_bps: g1, added_ms: a1, lost_pct: l1, still_rising: r1, held });
        if held {
            setting = Some((LocalSetting::FqCodel, g1, a1));
        }
    }
    if setting.is_none() {
        let mut search = QueueSearch::new(target, lb.packets(), 20);
        while let Some(n) = search.next() {
            let budget_left = cfg.budget.as_secs_f64() - t0.elapsed().as_secs_f64();
            let (secs, bytes) = spent.get();
            let last = steps.last().map(|_| secs / steps.len().max(1) as f64).unwrap_or(0.0);
            if budget_left < last || cfg.budget_bytes.is_some_and(|b| bytes >= b as f64) {
                say("the budget ended the search");
                break;
            }
            let (g1, a1, r1, l1) = try_one(LocalSetting::Pfifo { packets: n }, meter, say, steps.len() + 1)?;
            steps.push(search.record(n, g1, a1, r1, l1));
        }
        match search.found() {
            Some(f) if f.lost_pct < crate::local::MAX_LOST_PCT => setting = Some((f.setting, f.goodput_bps, f.added_ms)),
            Some(f) => lossy = Some(f),
            None => {}
        }
    }
    doc.search_seconds = t0.elapsed().as_secs_f64();
    doc.search_bytes = spent.get().1;
    let local = doc.local.as_mut().expect("set");
    local.steps = steps;
    let Some((s, g1, a1)) = setting else {
        local.outcome = match lossy {
            Some(f) => format!(
                "{} on {} held the latency ({} ms) but lost {:.0}% of the probes: a FIFO that short drops what shares it (a call, a game), so none is kept; flow queueing does both (fq_codel: `modprobe sch_fq_codel`); left as it was",
                f.setting.name(),
                lb.iface,
                bloatlab_model::fmt::signed(f.added_ms),
                f.lost_pct
            ),
            None => format!(
                "even a {}-packet FIFO on {} left {} ms under load: the queue that fills is not this host's (another bottleneck: tune without --local, on the router); left as it was",
                crate::local::MIN_PACKETS,
                lb.iface,
                bloatlab_model::fmt::ms(local.steps.iter().map(|x| x.added_ms).fold(f64::INFINITY, f64::min))
            ),
        };
        say(&local.outcome);
        return Ok(());
    };
    local.setting = Some(s);
    local.bql_bytes = (!lb.bql.is_empty()).then_some(bql);
    local.outcome = format!("upload: {} on {} keeps {} ({:.0}% of the goodput before), {} ms under load", s.name(), lb.iface, bloatlab_model::fmt::rate(g1), g1 / g * 100.0, bloatlab_model::fmt::signed(a1));
    say(&local.outcome);
    lb.apply(&s, bql).map_err(|e| anyhow!("setting {}'s queue: {e}", lb.iface))?;
    check_signal()?;
    say(&format!("verifying ({})", verify.describe()));
    doc.after = Some(meter.run("after", &verify)?);
    Ok(())
}

impl TuneDoc {
    /// A tune document for `cfg`, before anything is measured.
    fn new(cfg: &TuneConfig, shaper: String, shaper_why: String) -> TuneDoc {
        TuneDoc {
            kind: TUNE_KIND.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            wan: cfg.wan.clone(),
            server: cfg.server_name(),
            target_added_ms: cfg.target_added.as_secs_f64() * 1e3,
            shaper,
            shaper_why,
            dry_run: cfg.dry_run,
            before: None,
            after: None,
            searches: vec![],
            steps: vec![],
            settings: None,
            search_seconds: 0.0,
            search_bytes: 0.0,
            kept: false,
            stopped: None,
            local: None,
        }
    }

    /// Read a tune document; None when the file holds something else.
    pub fn read_file(path: &std::path::Path) -> Option<std::result::Result<TuneDoc, String>> {
        let text = std::fs::read_to_string(path).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        (v.get("kind").and_then(|k| k.as_str()) == Some(TUNE_KIND))
            .then(|| serde_json::from_value(v).map_err(|e| format!("{} is not a tune document bloatlab reads: {e}", path.display())))
    }
}
