//! The grade of a result: a letter from the added latency under load,
//! capped by what the load lost. Computed once, from the result, and
//! recorded in its headline (`headline.grade`), so every front end (the
//! terminal verdict, the HTML report, the browser page, the monitor) shows
//! the same letter; `report::verdict` words it.
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
//! what the bottleneck can carry, where a lab knows its rate (below 85% at
//! most B, 75% C, 50% D, 25% F: a shaper set a little below the line, as
//! SQM is at 85-95% of it and `bloatlab tune` at the knee it finds, gives
//! that little on purpose and keeps its letter; with load both ways a direction's link also
//! carries the other direction's ACKs, [`ACK_SHARE`] of its goodput, which
//! the load did not lose), and by the latency probes lost under load
//! (5% or more at most A, 10% B, 20% C, 40% D).
use bloatlab_results::{Phase, TestResult};
use std::fmt;

/// Goodput share of the link below which the grade is at most the given one.
/// (B from 85%: a tuned 20/5 Mbit/s lab line read 88% of its upload in a
/// both-ways phase with the shaper at 94% of the line and +4.6 ms added.)
pub const GOODPUT_CAPS: [(f64, Grade); 4] = [(0.25, Grade::F), (0.5, Grade::D), (0.75, Grade::C), (0.85, Grade::B)];
/// Probe loss (percent) from which the grade is at most the given one.
pub const LOSS_CAPS: [(f64, Grade); 4] = [(40.0, Grade::D), (20.0, Grade::C), (10.0, Grade::B), (5.0, Grade::A)];

/// Upper bounds (exclusive) of added latency in ms for A+, A, B, C, D; F above.
pub const GRADE_THRESHOLDS_MS: [(Grade, f64); 5] =
    [(Grade::APlus, 5.0), (Grade::A, 30.0), (Grade::B, 60.0), (Grade::C, 200.0), (Grade::D, 400.0)];

/// The grade's scale in words, from its one table: "A+ under 5 ms, A under
/// 30, B under 60, C under 200, D under 400, F above".
pub fn scale_words() -> String {
    let mut v: Vec<String> = GRADE_THRESHOLDS_MS
        .iter()
        .enumerate()
        .map(|(i, (g, ms))| format!("{} under {}{}", g.as_str(), bloatlab_model::fmt::trim_num(*ms), if i == 0 { " ms" } else { "" }))
        .collect();
    v.push("F above".into());
    v.join(", ")
}

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
    /// The letters, best first (their index is the grade's number in the
    /// monitor's metrics: 0 A+ .. 5 F).
    pub const LETTERS: [Grade; 6] = [Grade::APlus, Grade::A, Grade::B, Grade::C, Grade::D, Grade::F];

    /// The grade a result records (`headline.grade`), from its letter.
    pub fn parse(s: &str) -> Option<Grade> {
        Grade::LETTERS.into_iter().find(|g| g.as_str() == s)
    }

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
}

impl fmt::Display for Grade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What lowered the grade below the latency's, or would have.
#[derive(Debug, Clone, PartialEq)]
pub enum Cap {
    /// A direction's goodput reached only `share` of the lab link's rate.
    Goodput { share: f64, scenario: String, direction: &'static str, link_bps: f64, at_most: Grade },
    /// `loss_pct` of the latency probes were lost in a loaded scenario.
    Loss { loss_pct: f64, scenario: String, at_most: Grade },
}

impl Cap {
    pub fn at_most(&self) -> Grade {
        match self {
            Cap::Goodput { at_most, .. } | Cap::Loss { at_most, .. } => *at_most,
        }
    }
}

/// A result's grade and what it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Graded {
    pub grade: Grade,
    /// The grade of the added latency alone.
    pub latency_grade: Grade,
    /// The added latency graded, ms (the worst loaded scenario's).
    pub added_latency_ms: Option<f64>,
    /// The scenario with the most added latency.
    pub worst_scenario: Option<String>,
    /// The caps that applied (each may or may not have lowered the grade).
    pub caps: Vec<Cap>,
    /// Why the result is not graded although latency was measured: a
    /// browser that could not load the line and probe at once.
    pub ungraded: Option<String>,
}

/// A browser test whose page held more than this share of a loaded phase's
/// probes (`summary.page_delayed_probes`, `crate::page`) measured the
/// browser, not the line: it is not graded.
pub const PAGE_OVERLOADED_SHARE: f64 = 0.10;

/// The loaded phase whose probes the page held most, when over the share.
fn page_overloaded(r: &TestResult) -> Option<String> {
    let (share, p) = r
        .scenarios
        .iter()
        .filter(|p| p.summary.page_delayed_probes > 0)
        .map(|p| (p.summary.page_delayed_probes as f64 / (p.summary.page_delayed_probes + p.summary.latency.sent) as f64, p))
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    (share > PAGE_OVERLOADED_SHARE).then(|| {
        format!(
            "the browser could not load the line and probe at once: it held {:.0}% of the probes in {} ({} of {}) more than {} ms itself (its probe timer ran up to {} ms late), so the figures would measure the browser, not the line; close other tabs or run bloatlab test from a computer",
            share * 100.0,
            p.name,
            p.summary.page_delayed_probes,
            p.summary.page_delayed_probes + p.summary.latency.sent,
            crate::page::PAGE_DELAY_BOUND_MS,
            p.summary.page_lag_max_ms.map(bloatlab_model::fmt::ms).unwrap_or_else(|| "-".into())
        )
    })
}

/// A browser test whose UDP probes read a worse letter than its HTTP
/// probes in the worst loaded phase: the HTTP probes are timed by the
/// browser's network stack (Resource Timing), the UDP ones by a page
/// thread after the browser handed each answer over, so the difference is
/// the browser's own delay, and it decided the letter. (Through the lab's
/// FQ-CoDel at 50 Mbit/s with 10 ms each way, on this project's 2-core CI
/// machine, Chromium's UDP probes read +2.3 to +9.5 ms in the both-ways
/// phase, its HTTP probes +1.0 to +1.3 ms, the CLI +0.2: docs/web.md.)
/// The HTTP probes only read lower through their network stack's stamps:
/// through a FIFO they see the same queue, and a lost one reads higher.
fn page_own_delay(r: &TestResult) -> Option<String> {
    if r.client != bloatlab_results::ClientKind::Browser {
        return None;
    }
    let p = worst_phase(r)?;
    let (udp, http, own) = (p.summary.added_latency_ms?, p.summary.rr_added_latency_ms?, p.summary.udp_over_rr_ms?);
    (Grade::from_added_ms(http) < Grade::from_added_ms(udp)).then(|| {
        format!(
            "the browser could not load the line and probe at once: in {} its UDP probes read +{} ms where its HTTP probes, timed by its network stack, read +{} ms, so the browser itself added about {} ms, enough to change the grade ({} against {}); close other tabs or run bloatlab test from a computer",
            p.name,
            bloatlab_model::fmt::ms(udp),
            bloatlab_model::fmt::ms(http),
            bloatlab_model::fmt::ms(own),
            Grade::from_added_ms(udp),
            Grade::from_added_ms(http),
        )
    })
}

/// The loaded scenario with the most added latency.
pub fn worst_phase(r: &TestResult) -> Option<&Phase> {
    r.scenarios.iter().filter(|p| p.summary.added_latency_ms.is_some()).max_by(|a, b| {
        a.summary.added_latency_ms.unwrap().total_cmp(&b.summary.added_latency_ms.unwrap())
    })
}

/// Wire bits of ACKs per bit of the goodput they acknowledge: one 66-byte
/// ACK frame (Ethernet 14, IPv4 20, TCP 32 with timestamps) per two
/// 1448-byte segments (Linux's delayed ACK).
pub const ACK_SHARE: f64 = 66.0 / (2.0 * 1448.0);

/// The lowest goodput share of the bottleneck over loaded scenarios, where a
/// lab recorded its rates; a direction's link less the other direction's
/// ACKs.
fn goodput_cap(r: &TestResult) -> Option<Cap> {
    let cfg = &r.lab.as_ref()?.config;
    let mut worst: Option<(f64, String, &'static str, f64)> = None;
    for p in &r.scenarios {
        for (n, bps, rate, words, other) in [
            (p.uploads, p.summary.upload_bps, cfg.rate_up_bps, "upload", p.summary.download_bps),
            (p.downloads, p.summary.download_bps, cfg.rate_down_bps, "download", p.summary.upload_bps),
        ] {
            let (Some(rate), true) = (rate, n > 0) else { continue };
            let acks = other * ACK_SHARE;
            if let Some(s) = crate::goodput_share(bps, (rate - acks).max(rate * 0.5)) {
                if worst.as_ref().is_none_or(|w| s < w.0) {
                    worst = Some((s, p.name.clone(), words, rate));
                }
            }
        }
    }
    let (share, scenario, direction, link_bps) = worst?;
    let (_, at_most) = GOODPUT_CAPS.iter().find(|(lim, _)| share < *lim)?;
    Some(Cap::Goodput { share, scenario, direction, link_bps, at_most: *at_most })
}

fn loss_cap(r: &TestResult) -> Option<Cap> {
    let (loss_pct, scenario) = r
        .scenarios
        .iter()
        .filter(|p| p.summary.latency.sent > 0)
        .map(|p| (p.summary.latency.loss_pct, p.name.clone()))
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    let (_, at_most) = LOSS_CAPS.iter().find(|(lim, _)| loss_pct >= *lim)?;
    Some(Cap::Loss { loss_pct, scenario, at_most: *at_most })
}

/// Grade a result.
pub fn grade(r: &TestResult) -> Graded {
    let worst = worst_phase(r);
    let added = r.headline.max_added_latency_ms.or_else(|| worst.and_then(|p| p.summary.added_latency_ms));
    let ungraded = page_overloaded(r).or_else(|| page_own_delay(r));
    let latency_grade = if ungraded.is_some() { Grade::Unknown } else { added.map(Grade::from_added_ms).unwrap_or(Grade::Unknown) };
    let mut grade = latency_grade;
    let mut caps = vec![];
    if grade != Grade::Unknown {
        caps.extend(goodput_cap(r));
        caps.extend(loss_cap(r));
        for c in &caps {
            grade = grade.max(c.at_most());
        }
    }
    Graded { grade, latency_grade, added_latency_ms: added, worst_scenario: worst.map(|p| p.name.clone()), caps, ungraded }
}

/// Record the grade in the result's headline (after everything it rests on
/// is in the result: the engine's phases, a lab's link rates).
pub fn record(r: &mut TestResult) {
    r.headline.grade = match grade(r).grade {
        Grade::Unknown => None,
        g => Some(g.as_str().to_string()),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_dslreports() {
        let g = |ms: f64| Grade::from_added_ms(ms).as_str();
        assert_eq!([g(0.0), g(4.99), g(5.0), g(29.9), g(30.0), g(59.0), g(60.0), g(199.0), g(200.0), g(399.0), g(400.0)], ["A+", "A+", "A", "A", "B", "B", "C", "C", "D", "D", "F"]);
        assert_eq!(Grade::from_added_ms(f64::NAN), Grade::Unknown);
        // caps order: a worse grade is larger
        assert!(Grade::F > Grade::D && Grade::A > Grade::APlus);
    }

    /// A complete result with no phases, to add them to.
    fn empty_result() -> TestResult {
        serde_json::from_value(serde_json::json!({
            "schema": "bloatlab-result", "schema_version": 2, "complete": true,
            "metadata": serde_json::to_value(bloatlab_results::Metadata::default()).unwrap(),
            "scenarios": [], "headline": serde_json::to_value(bloatlab_results::Headline::default()).unwrap()
        }))
        .unwrap()
    }

    #[test]
    fn a_browser_that_held_its_own_probes_is_not_graded() {
        let mut r = empty_result();
        let mut p = Phase { name: "3u3d".into(), uploads: 3, downloads: 3, ..Default::default() };
        p.summary.latency.sent = 225;
        p.summary.latency.received = 225;
        p.summary.added_latency_ms = Some(2.0);
        p.summary.page_delayed_probes = 25;
        p.summary.page_lag_max_ms = Some(180.0);
        r.scenarios.push(p);
        r.headline.max_added_latency_ms = Some(2.0);
        // 25 of 250 held: 10%, not over it: graded
        let g = grade(&r);
        assert_eq!((g.grade, g.ungraded.is_none()), (Grade::APlus, true));
        // 26 of 251: over 10%: the browser, not the line
        r.scenarios[0].summary.page_delayed_probes = 26;
        let g = grade(&r);
        assert_eq!(g.grade, Grade::Unknown);
        let why = g.ungraded.unwrap();
        assert!(why.starts_with("the browser could not load the line and probe at once: it held 10% of the probes in 3u3d (26 of 251)"), "{why}");
        assert!(why.contains("up to 180 ms late"), "{why}");
        record(&mut r);
        assert_eq!(r.headline.grade, None);
    }

    #[test]
    fn a_browser_whose_own_delay_decided_the_letter_is_not_graded() {
        let mut r = empty_result();
        let mut p = Phase { name: "3u3d".into(), uploads: 3, downloads: 3, ..Default::default() };
        p.summary.latency.sent = 250;
        p.summary.latency.received = 250;
        // the CI machine's Chromium on the lab's FQ-CoDel: UDP +6.1, HTTP +1.3
        p.summary.added_latency_ms = Some(6.1);
        p.summary.rr_added_latency_ms = Some(1.3);
        p.summary.udp_over_rr_ms = Some(4.8);
        r.scenarios.push(p);
        r.headline.max_added_latency_ms = Some(6.1);
        // the CLI's result: its UDP probes are its own, graded as read
        assert_eq!(grade(&r).grade, Grade::A);
        r.client = bloatlab_results::ClientKind::Browser;
        let g = grade(&r);
        assert_eq!(g.grade, Grade::Unknown);
        let why = g.ungraded.unwrap();
        assert!(why.starts_with("the browser could not load the line and probe at once: in 3u3d its UDP probes read +6.10 ms where its HTTP probes, timed by its network stack, read +1.30 ms, so the browser itself added about 4.80 ms, enough to change the grade (A against A+)"), "{why}");
        // the same letter both ways, or HTTP reading higher (a FIFO's loss
        // recovery): graded from the UDP probes
        r.scenarios[0].summary.rr_added_latency_ms = Some(5.5);
        r.scenarios[0].summary.udp_over_rr_ms = Some(0.6);
        assert_eq!(grade(&r).grade, Grade::A);
        r.scenarios[0].summary.rr_added_latency_ms = Some(45.0);
        r.scenarios[0].summary.udp_over_rr_ms = Some(-38.9);
        assert_eq!(grade(&r).grade, Grade::A);
        // too few HTTP answers to say (a deep queue's loaded round trips)
        r.scenarios[0].summary.rr_added_latency_ms = None;
        r.scenarios[0].summary.udp_over_rr_ms = None;
        assert_eq!(grade(&r).grade, Grade::A);
    }

    #[test]
    fn the_other_directions_acks_are_not_goodput_the_load_lost() {
        let mut r: TestResult = serde_json::from_value(serde_json::json!({
            "schema": "bloatlab-result", "schema_version": 2, "complete": true,
            "metadata": serde_json::to_value(bloatlab_results::Metadata::default()).unwrap(),
            "scenarios": [], "headline": serde_json::to_value(bloatlab_results::Headline::default()).unwrap(),
            "lab": serde_json::to_value(bloatlab_results::LabInfo::default()).unwrap()
        }))
        .unwrap();
        let lab = r.lab.as_mut().unwrap();
        (lab.config.rate_up_bps, lab.config.rate_down_bps) = (Some(5e6), Some(20e6));
        // a 20/5 Mbit/s line shaped at 92% both ways, loaded both ways: the
        // upload carries 0.40 Mbit/s of the download's ACKs
        let mut p = Phase { name: "3u3d".into(), uploads: 3, downloads: 3, ..Default::default() };
        p.summary.download_bps = 20e6 * 0.92 * 1448.0 / 1514.0;
        p.summary.upload_bps = (5e6 * 0.92 - p.summary.download_bps * ACK_SHARE) * 1448.0 / 1514.0;
        p.summary.added_latency_ms = Some(8.0);
        r.scenarios.push(p);
        r.headline.max_added_latency_ms = Some(8.0);
        assert_eq!(grade(&r).grade, Grade::A);
        // the same upload goodput without the download's ACKs lost 16%
        r.scenarios[0].downloads = 0;
        r.scenarios[0].summary.download_bps = 0.0;
        let g = grade(&r);
        assert_eq!(g.grade, Grade::B, "{:?}", g.caps);
    }

    #[test]
    fn a_grade_reads_back_from_its_letter() {
        for g in Grade::LETTERS {
            assert_eq!(Grade::parse(g.as_str()), Some(g));
        }
        assert_eq!(Grade::parse("?"), None);
        assert!(Grade::LETTERS.windows(2).all(|w| w[0] < w[1]), "best first");
    }
}
