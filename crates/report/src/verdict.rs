//! A verdict a non-expert understands: a letter grade from the added latency
//! under load, and one sentence on what it means and what to try.
//!
//! Thresholds (ms of added round-trip latency, loaded p50 - idle p50) are the
//! bufferbloat grades published by the DSLReports speed test FAQ ("Bufferbloat
//! Grades", dslreports.com/faq/17930) and used by the Waveform bufferbloat
//! test: A+ < 5, A < 30, B < 60, C < 200, D < 400, F >= 400. bloatlab grades
//! the *worst* loaded scenario (DSLReports averages the download and upload
//! increases), so a path bloated in one direction cannot hide behind the other.
//!
//! A short queue can buy low latency by losing throughput and packets, so
//! the grade is also capped by what the load lost: by the goodput's share of
//! what the bottleneck can carry, where a lab knows its rate (below 90% at
//! most B, 75% C, 50% D, 25% F), and by the latency probes lost under load
//! (5% or more at most A, 10% B, 20% C, 40% D). The sentence says which
//! cap applied.
use crate::fmt::{human_bytes, human_ms, rate as fmt_rate, sig3, signed};
use bloatlab_results::{Direction, Phase, PhaseQueue, TestResult};
use std::fmt;

/// Goodput share of the link below which the grade is at most the given one.
pub const GOODPUT_CAPS: [(f64, Grade); 4] = [(0.25, Grade::F), (0.5, Grade::D), (0.75, Grade::C), (0.9, Grade::B)];
/// Probe loss (percent) from which the grade is at most the given one.
pub const LOSS_CAPS: [(f64, Grade); 4] = [(40.0, Grade::D), (20.0, Grade::C), (10.0, Grade::B), (5.0, Grade::A)];

/// Upper bounds (exclusive) of added latency in ms for A+, A, B, C, D; F above.
pub const GRADE_THRESHOLDS_MS: [(Grade, f64); 5] =
    [(Grade::APlus, 5.0), (Grade::A, 30.0), (Grade::B, 60.0), (Grade::C, 200.0), (Grade::D, 400.0)];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Grade {
    APlus,
    A,
    B,
    C,
    D,
    F,
    /// No idle baseline (or no loaded scenario): added latency unknown.
    Unknown,
}

impl Grade {
    pub fn from_added_ms(ms: f64) -> Grade {
        if !ms.is_finite() {
            return Grade::Unknown;
        }
        for (g, lim) in GRADE_THRESHOLDS_MS {
            if ms < lim {
                return g;
            }
        }
        Grade::F
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Grade::APlus => "A+",
            Grade::A => "A",
            Grade::B => "B",
            Grade::C => "C",
            Grade::D => "D",
            Grade::F => "F",
            Grade::Unknown => "?",
        }
    }
    /// A CSS colour for badges.
    pub fn color(self) -> &'static str {
        match self {
            Grade::APlus | Grade::A => "#1a7f37",
            Grade::B => "#7a9a01",
            Grade::C => "#bf8700",
            Grade::D => "#d1242f",
            Grade::F => "#82071e",
            Grade::Unknown => "#57606a",
        }
    }
}

impl fmt::Display for Grade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub grade: Grade,
    /// One or two sentences for a non-expert.
    pub sentence: String,
    /// The added latency graded, ms (worst loaded scenario).
    pub added_latency_ms: Option<f64>,
    /// Name of the scenario with the most added latency.
    pub worst_scenario: Option<String>,
}

impl Verdict {
    /// "Verdict: C (+142 ms under load) — ..." as printed under tables.
    pub fn line(&self) -> String {
        match self.added_latency_ms {
            Some(a) => format!(
                "Verdict: {} ({} ms added latency under load: median UDP-probe round trip, loaded vs idle) — {}",
                self.grade,
                signed(a),
                self.sentence
            ),
            None => format!("Verdict: {} — {}", self.grade, self.sentence),
        }
    }
}

fn worst_phase(r: &TestResult) -> Option<&Phase> {
    r.scenarios
        .iter()
        .filter(|p| p.summary.added_latency_ms.is_some())
        .max_by(|a, b| {
            a.summary.added_latency_ms.unwrap().partial_cmp(&b.summary.added_latency_ms.unwrap()).unwrap()
        })
}

fn direction_words(p: &Phase) -> &'static str {
    match (p.uploads > 0, p.downloads > 0) {
        (true, false) => "while uploading",
        (false, true) => "while downloading",
        (true, true) => "with traffic both ways",
        _ => "under load",
    }
}

/// The queue that held the most delay (at its measured drain rate) during
/// the graded phase, as the lab recorded it in that phase's summary.
fn worst_queue(graded: Option<&Phase>) -> Option<&PhaseQueue> {
    graded?
        .summary
        .queues
        .iter()
        .filter(|q| q.max_backlog_bytes > 0)
        .max_by(|a, b| {
            let ka = a.max_delay_ms.unwrap_or(0.0);
            let kb = b.max_delay_ms.unwrap_or(0.0);
            ka.total_cmp(&kb).then(a.max_backlog_bytes.cmp(&b.max_backlog_bytes))
        })
}

/// The lowest goodput share of the bottleneck over loaded scenarios, where a
/// lab recorded its rates: (share, scenario name, direction words, link bps).
fn worst_goodput_share(r: &TestResult) -> Option<(f64, String, &'static str, f64)> {
    let cfg = &r.lab.as_ref()?.config;
    let mut worst: Option<(f64, String, &'static str, f64)> = None;
    for p in &r.scenarios {
        for (n, bps, rate, words) in [
            (p.uploads, p.summary.upload_bps, cfg.rate_up_bps, "upload"),
            (p.downloads, p.summary.download_bps, cfg.rate_down_bps, "download"),
        ] {
            let (Some(rate), true) = (rate, n > 0) else { continue };
            if let Some(s) = bloatlab_metrics::goodput_share(bps, rate) {
                if worst.as_ref().is_none_or(|w| s < w.0) {
                    worst = Some((s, p.name.clone(), words, rate));
                }
            }
        }
    }
    worst
}

fn has(list: &[String], name: &str) -> bool {
    list.iter().any(|q| q == name)
}

/// Compute the verdict of one result.
pub fn verdict(r: &TestResult) -> Verdict {
    let worst = worst_phase(r);
    let added = r
        .headline
        .max_added_latency_ms
        .or_else(|| worst.and_then(|p| p.summary.added_latency_ms));
    let latency_grade = added.map(Grade::from_added_ms).unwrap_or(Grade::Unknown);
    let mut grade = latency_grade;
    let mut caps: Vec<String> = vec![];
    if grade != Grade::Unknown {
        if let Some((share, name, dir, rate)) = worst_goodput_share(r) {
            if let Some((_, g)) = GOODPUT_CAPS.iter().find(|(lim, _)| share < *lim) {
                if *g > grade {
                    grade = *g;
                }
                caps.push(format!(
                    "the {dir} in {name} reached only {:.0}% of what the {} link carries",
                    share * 100.0,
                    fmt_rate(rate)
                ));
            }
        }
        let loss = r.scenarios.iter().filter(|p| p.summary.latency.sent > 0).map(|p| (p.summary.latency.loss_pct, p.name.clone())).max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((loss, name)) = loss {
            if let Some((_, g)) = LOSS_CAPS.iter().find(|(lim, _)| loss >= *lim) {
                if *g > grade {
                    grade = *g;
                }
                caps.push(format!("{}% of the latency probes were lost in {name}", sig3(loss)));
            }
        }
    }
    let mut s = String::new();
    if !r.complete {
        s.push_str("Incomplete run");
        if let Some(why) = &r.incomplete_reason {
            s.push_str(&format!(" ({why})"));
        }
        s.push_str(": numbers cover only what ran. ");
    }
    let Some(added) = added else {
        if r.scenarios.is_empty() {
            s.push_str("No load scenario ran, so there is nothing to grade.");
        } else {
            let loaded = r.headline.loaded_latency_ms.map(|v| format!(" (loaded median RTT {})", human_ms(v))).unwrap_or_default();
            s.push_str(&format!(
                "No idle baseline was measured, so the latency added by load cannot be graded{loaded}; run the test with an idle phase (--idle 2s)."
            ));
        }
        return Verdict { grade, sentence: s, added_latency_ms: None, worst_scenario: None };
    };
    let wp = worst.filter(|p| p.summary.added_latency_ms.is_some());
    let scen = wp.map(|p| format!(" {} ({})", direction_words(p), p.name)).unwrap_or_default();
    let queue = worst_queue(wp);
    match latency_grade {
        Grade::APlus | Grade::A => {
            // a rise below the probes' microsecond resolution is no rise
            if added > 0.0 && crate::fmt::ms(added) != "0" {
                s.push_str(&format!(
                    "Latency rose by only {}{scen}: this path keeps queues short; calls, games and browsing stay smooth while it is busy.",
                    human_ms(added)
                ));
            } else {
                s.push_str(&format!(
                    "Latency did not rise under load (the loaded median was {}{scen}): this path keeps queues short; calls, games and browsing stay smooth while it is busy.",
                    if signed(added) == "0" { "the idle one, to the microsecond".to_string() } else { format!("{} ms from the idle one", signed(added)) }
                ));
            }
        }
        _ => {
            let impact = match grade {
                Grade::B => "noticeable in games and video calls while the link is busy",
                Grade::C => "video calls stutter and web pages feel slow while the link is busy",
                Grade::D => "real-time use (calls, games) is poor while the link is busy",
                _ => "the link is close to unusable for interactive use while it is busy",
            };
            s.push_str(&format!("Latency rose by {}{scen}: {impact}. ", human_ms(added)));
            s.push_str(&advice(r, wp, queue, added));
        }
    }
    if grade != latency_grade {
        s.push_str(&format!(
            " Graded {grade}, not {latency_grade}, because {}: short queues that keep latency low by losing throughput and packets are no cure.",
            caps.join(" and ")
        ));
    } else if !caps.is_empty() {
        s.push_str(&format!(" Note: {}.", caps.join(" and ")));
    }
    Verdict {
        grade,
        sentence: s.trim().to_string(),
        added_latency_ms: Some(added),
        worst_scenario: wp.map(|p| p.name.clone()),
    }
}

/// What to try, using the lab's queue observations when present.
fn advice(r: &TestResult, wp: Option<&Phase>, q: Option<&PhaseQueue>, added: f64) -> String {
    if let (Some(lab), Some(q)) = (&r.lab, q) {
        let held = match q.max_delay_ms {
            Some(d) => format!("{} of data ({} packets, {})", human_ms(d), q.max_backlog_packets, human_bytes(q.max_backlog_bytes as f64)),
            None => format!("{} packets ({})", q.max_backlog_packets, human_bytes(q.max_backlog_bytes as f64)),
        };
        let where_ = if q.location.is_empty() { String::new() } else { format!(" ({} on {})", q.qdisc, q.location) };
        let aqm_ok = has(&lab.qdiscs_available, "fq_codel") || has(&lab.qdiscs_available, "cake");
        let aqm = if aqm_ok || lab.backend == "emulator" {
            "an AQM such as fq_codel or cake".to_string()
        } else {
            "an AQM such as fq_codel (this kernel lacks it; the emulator backend has it)".to_string()
        };
        let shorter = match q.drain_bps {
            Some(bps) if bps > 0.0 => {
                // A queue that drains in about 20 ms at the measured rate, MTU-sized packets.
                let pkts = ((0.020 * bps) / (1514.0 * 8.0)).ceil().max(2.0) as u64;
                format!("a shorter queue (about {pkts} packets = 20 ms at {})", fmt_rate(bps))
            }
            _ => "a shorter queue".to_string(),
        };
        let which = if q.role.starts_with("sender") {
            "The sender's own interface queue"
        } else if q.role.ends_with("-up") {
            "The upload bottleneck queue"
        } else if q.role.ends_with("-down") {
            "The download bottleneck queue"
        } else {
            "The bottleneck queue"
        };
        return format!("{which}{where_} held up to {held}; {aqm} or {shorter} would cut it.");
    }
    // the direction the worst phase loaded alone, if it loaded one
    let dir = match wp.map(|p| (p.uploads > 0, p.downloads > 0)) {
        Some((true, false)) => Some(Direction::Up),
        Some((false, true)) => Some(Direction::Down),
        _ => None,
    };
    let (cap, dir_words, place) = match dir {
        Some(Direction::Up) => (r.headline.upload_capacity_bps, "upload ", "on the upload path (usually the modem or router uplink)"),
        Some(Direction::Down) => (r.headline.download_capacity_bps, "download ", "on the download path (usually the ISP's shaper or the modem)"),
        None => (0.0, "", "on the path"),
    };
    let shaper = if cap > 0.0 {
        format!(" with its shaper set to about 90% of the measured {dir_words}rate ({})", fmt_rate(cap * 0.9))
    } else {
        String::new()
    };
    format!(
        "A queue {place} holds about {} of data when full; enable smart queue management (fq_codel or cake, e.g. OpenWrt SQM) on the router{shaper}.",
        human_ms(added)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn thresholds() {
        assert_eq!(Grade::from_added_ms(0.0), Grade::APlus);
        assert_eq!(Grade::from_added_ms(4.99), Grade::APlus);
        assert_eq!(Grade::from_added_ms(5.0), Grade::A);
        assert_eq!(Grade::from_added_ms(59.9), Grade::B);
        assert_eq!(Grade::from_added_ms(60.0), Grade::C);
        assert_eq!(Grade::from_added_ms(399.0), Grade::D);
        assert_eq!(Grade::from_added_ms(400.0), Grade::F);
        assert_eq!(Grade::from_added_ms(-3.0), Grade::APlus);
        assert_eq!(Grade::from_added_ms(f64::NAN), Grade::Unknown);
    }
}
