//! A verdict a non-expert understands: the result's grade
//! (`bloatlab_metrics::grade`, the one rule: DSLReports' thresholds on the
//! worst scenario's added latency, capped by lost goodput and probes) and
//! one sentence on what it means and what to try.
use crate::fmt::{human_bytes, human_ms, rate as fmt_rate, sig3, signed};
pub use bloatlab_metrics::grade::{scale_words, Grade, GRADE_THRESHOLDS_MS};
use bloatlab_metrics::grade::{worst_phase, Cap};
use bloatlab_results::{Direction, Phase, PhaseQueue, TestResult};

/// A CSS colour for a grade's badge.
pub fn grade_color(g: Grade) -> &'static str {
    match g {
        Grade::APlus | Grade::A => "#1a7f37",
        Grade::B => "#7a9a01",
        Grade::C => "#bf8700",
        Grade::D => "#d1242f",
        Grade::F => "#82071e",
        Grade::Unknown => "#57606a",
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

fn has(list: &[String], name: &str) -> bool {
    list.iter().any(|q| q == name)
}

/// Compute the verdict of one result.
pub fn verdict(r: &TestResult) -> Verdict {
    let g = bloatlab_metrics::grade::grade(r);
    let (grade, latency_grade, added) = (g.grade, g.latency_grade, g.added_latency_ms);
    let worst = worst_phase(r);
    let caps: Vec<String> = g
        .caps
        .iter()
        .map(|c| match c {
            Cap::Goodput { share, scenario, direction, link_bps, .. } => {
                format!("the {direction} in {scenario} reached only {:.0}% of what the {} link carries", share * 100.0, fmt_rate(*link_bps))
            }
            Cap::Loss { loss_pct, scenario, .. } => format!("{}% of the latency probes were lost in {scenario}", sig3(*loss_pct)),
        })
        .collect();
    let mut s = String::new();
    if !r.complete {
        s.push_str("Incomplete run");
        if let Some(why) = &r.incomplete_reason {
            s.push_str(&format!(" ({why})"));
        }
        s.push_str(": numbers cover only what ran. ");
    }
    if let Some(why) = &g.ungraded {
        s.push_str(&format!("Not graded: {why}."));
        return Verdict { grade, sentence: s, added_latency_ms: None, worst_scenario: None };
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
                    "Latency rose by only {}{scen}: this path keeps queues short; calls, games and browsing stay responsive while it is busy.",
                    human_ms(added)
                ));
            } else {
                s.push_str(&format!(
                    "Latency did not rise under load (the loaded median was {}{scen}): this path keeps queues short; calls, games and browsing stay responsive while it is busy.",
                    if signed(added) == "0" { "the idle one, to the microsecond".to_string() } else { format!("{} ms from the idle one", signed(added)) }
                ));
            }
            // the load's own flows: a bulk flow that stalled for a second
            // or more is not smooth, whatever the latency of the rest
            if let Some(hz) = r.headline.flow_smoothness_hz.filter(|&h| h < 1.0) {
                s.push_str(&format!(
                    " The bulk flows themselves were not smooth: one waited {} for data (flow smoothness {} Hz).",
                    human_ms(1000.0 / hz),
                    crate::fmt::trim_num(hz)
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
            if wp.is_some_and(|p| p.summary.still_rising) {
                s.push_str(&format!("Latency rose by at least {}{scen} and was still rising when the phase ended: {impact}. ", human_ms(added)));
            } else {
                s.push_str(&format!("Latency rose by {}{scen}: {impact}. ", human_ms(added)));
            }
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
        return format!("{which}{where_} held up to {held}; {aqm} or {shorter} would cut it, or a shaper in front of it (`bloatlab lab --tune` finds its rate).");
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
    let near = if cap > 0.0 { format!(", a little under the measured {dir_words}rate ({}),", fmt_rate(cap)) } else { ",".to_string() };
    // "when full" only where the queue was seen full: latency stopped
    // rising while the load lost packets (retransmits or lost probes)
    let held = match wp.map(|p| &p.summary) {
        Some(x) if x.still_rising => format!("held at least {} of data and was still filling when the phase ended", human_ms(added)),
        Some(x) if x.retransmits > 0 || x.latency.lost > 0 => {
            // the level latency settled at, over the idle round trip
            let full = x.settled_p50_ms.zip(r.headline.idle_latency_ms).map(|(l, i)| l - i).filter(|&f| f > added).unwrap_or(added);
            format!("holds about {} of data when full", human_ms(full))
        }
        _ => format!("held about {} of data under this load (it was not seen full: nothing was lost)", human_ms(added)),
    };
    format!("A queue {place} {held}; smart queue management (fq_codel or cake, e.g. OpenWrt SQM) on the router would cut it: `bloatlab tune` there finds its shaper's rate{near} and shows the line before and after.")
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
        assert_eq!(scale_words(), "A+ under 5 ms, A under 30, B under 60, C under 200, D under 400, F above");
    }
}
