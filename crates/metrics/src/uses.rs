//! What a result means for everyday uses: online games, video calls,
//! streaming and browsing, each judged by one stated rule on the result's
//! own numbers (the worst loaded phase's latency percentiles and the
//! goodput), computed once here and shown by the browser page and the
//! reports as they are.
//!
//! The rules and where their thresholds come from:
//! * **Gaming**: the worst loaded phase's p90 round trip to the server:
//!   good up to 50 ms, fair up to 100 ms. Common game-industry guidance
//!   (fast-paced competitive play wants 50 ms or less; most games stay
//!   playable below 100 ms); what hurts a game is the latency a queue adds
//!   when someone else loads the line, which is what the loaded phases measure.
//! * **Video calls**: the worst loaded p90 round trip: good up to 300 ms,
//!   fair up to 800 ms: ITU-T G.114's one-way mouth-to-ear limits (150 ms
//!   for most applications, 400 ms at most) at about half the round trip;
//!   and at least 3 Mbit/s each way (a 720p call with room to spare; Zoom
//!   asks 1.5-3 Mbit/s for group HD).
//! * **Streaming**: buffered, so latency matters little; the download
//!   goodput: good from 15 Mbit/s (Netflix's figure for 4K), fair from
//!   5 Mbit/s (its HD figure).
//! * **Browsing**: a page load takes tens of round trips, each waiting
//!   behind the queue: the worst loaded p50 round trip: good up to 100 ms,
//!   fair up to 400 ms (the grade's F boundary).
use bloatlab_results::TestResult;
pub use crate::verdict::{UseVerdict, Verdict};

/// Thresholds of the rules (ms or bits/s): (good up to, fair up to).
pub const GAMING_P90_MS: (f64, f64) = (50.0, 100.0);
pub const CALL_P90_MS: (f64, f64) = (300.0, 800.0);
pub const CALL_MIN_BPS: f64 = 3e6;
pub const STREAM_BPS: (f64, f64) = (15e6, 5e6);
pub const BROWSE_P50_MS: (f64, f64) = (100.0, 400.0);

fn by_ms(v: Option<f64>, (good, fair): (f64, f64)) -> Verdict {
    match v {
        Some(v) if v <= good => Verdict::Good,
        Some(v) if v <= fair => Verdict::Fair,
        Some(_) => Verdict::Poor,
        None => Verdict::Unknown,
    }
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{} ms", bloatlab_model::fmt::ms(v))).unwrap_or_else(|| "not measured".into())
}

/// The worst loaded phase's value of `f` (the highest).
fn worst(r: &TestResult, f: impl Fn(&bloatlab_results::Phase) -> f64) -> Option<f64> {
    r.scenarios.iter().filter(|p| p.summary.latency.received > 0).map(f).fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))))
}

/// Every use, judged on `r`.
pub fn uses(r: &TestResult) -> Vec<UseVerdict> {
    let p90 = worst(r, |p| p.summary.latency.p90_ms);
    let p50 = worst(r, |p| p.summary.latency.p50_ms);
    let (up, down) = (r.headline.upload_capacity_bps, r.headline.download_capacity_bps);
    let rate = |b: f64| bloatlab_model::fmt::rate(b);
    // the latency's verdict, at best fair below 3 Mbit/s a way, poor below half that
    let slowest = up.min(down);
    let call = match by_ms(p90, CALL_P90_MS) {
        Verdict::Unknown => Verdict::Unknown,
        v if slowest > 0.0 && slowest < CALL_MIN_BPS / 2.0 => v.max(Verdict::Poor),
        v if slowest > 0.0 && slowest < CALL_MIN_BPS => v.max(Verdict::Fair),
        v => v,
    };
    let stream = if down > 0.0 {
        if down >= STREAM_BPS.0 {
            Verdict::Good
        } else if down >= STREAM_BPS.1 {
            Verdict::Fair
        } else {
            Verdict::Poor
        }
    } else {
        Verdict::Unknown
    };
    let judged = vec![
        UseVerdict {
            name: "gaming".into(),
            verdict: by_ms(p90, GAMING_P90_MS),
            measured: format!("p90 round trip under load {}", ms(p90)),
            rule: "good up to 50 ms, fair up to 100 ms (game-industry guidance: competitive play wants 50 ms or less, most games stay playable below 100 ms)".into(),
        },
        UseVerdict {
            name: "video calls".into(),
            verdict: call,
            measured: format!("p90 round trip under load {}; {} down, {} up", ms(p90), rate(down), rate(up)),
            rule: "good up to 300 ms, fair up to 800 ms round trip (ITU-T G.114: one-way delay up to 150 ms suits most calls, 400 ms at most), and 3 Mbit/s each way".into(),
        },
        UseVerdict {
            name: "streaming".into(),
            verdict: stream,
            measured: format!("download {}", rate(down)),
            rule: "buffered, so latency matters little: good from 15 Mbit/s (Netflix's figure for 4K), fair from 5 Mbit/s (its HD figure)".into(),
        },
        UseVerdict {
            name: "browsing".into(),
            verdict: by_ms(p50, BROWSE_P50_MS),
            measured: format!("median round trip under load {}", ms(p50)),
            rule: "a page takes tens of round trips: good up to 100 ms, fair up to 400 ms (the grade's F boundary)".into(),
        },
    ];
    measured_in_household(r, judged)
}

/// A household test measured the game, the call and the stream as they
/// ran beside each other ([`crate::household`]): those verdicts are the
/// uses' (one verdict per application, wherever it is shown), their
/// rules and figures said as the household measured them.
fn measured_in_household(r: &TestResult, mut judged: Vec<UseVerdict>) -> Vec<UseVerdict> {
    let hh = crate::household::household(r);
    for (usage, app) in [("gaming", "game"), ("video calls", "video call"), ("streaming", "stream")] {
        let (Some(u), Some(h)) = (judged.iter_mut().find(|u| u.name == usage), hh.iter().find(|h| h.name == app)) else { continue };
        if h.verdict == Verdict::Unknown {
            continue;
        }
        u.verdict = h.verdict;
        u.measured = format!("the household test's {app}: {}", h.measured);
        u.rule = h.rule.clone();
    }
    judged
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::{Phase, Summary};

    fn result(p50: f64, p90: f64, down: f64, up: f64) -> TestResult {
        let mut s = Summary::default();
        s.latency.received = 100;
        s.latency.p50_ms = p50;
        s.latency.p90_ms = p90;
        let mut r: TestResult = serde_json::from_value(serde_json::json!({
            "schema": "bloatlab-result", "schema_version": 2, "complete": true,
            "metadata": serde_json::to_value(bloatlab_results::Metadata::default()).unwrap(),
            "scenarios": [], "headline": serde_json::to_value(bloatlab_results::Headline::default()).unwrap()
        }))
        .unwrap();
        r.scenarios.push(Phase { name: "0u4d".into(), summary: s, ..Default::default() });
        r.headline.download_capacity_bps = down;
        r.headline.upload_capacity_bps = up;
        r
    }

    #[test]
    fn each_use_follows_its_stated_thresholds() {
        let v = |r: &TestResult| uses(r).into_iter().map(|u| u.verdict).collect::<Vec<_>>();
        use Verdict::*;
        assert_eq!(v(&result(20.0, 40.0, 50e6, 10e6)), [Good, Good, Good, Good]);
        assert_eq!(v(&result(90.0, 99.0, 10e6, 10e6)), [Fair, Good, Fair, Good]);
        assert_eq!(v(&result(1200.0, 1250.0, 9e6, 9e6)), [Poor, Poor, Fair, Poor]);
        // a call needs 3 Mbit/s each way: 2 Mbit/s up makes it fair at best, 1 poor
        assert_eq!(v(&result(20.0, 40.0, 50e6, 2e6))[1], Fair);
        assert_eq!(v(&result(20.0, 40.0, 50e6, 1e6))[1], Poor);
        assert_eq!(v(&result(20.0, 40.0, 1e6, 1e6))[2], Poor);
    }

    #[test]
    fn a_verdict_word_is_its_serialized_name() {
        for v in [Verdict::Good, Verdict::Fair, Verdict::Poor, Verdict::Unknown] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
    }
}
