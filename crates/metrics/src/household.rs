//! The household test's verdicts: a game, a video call, a stream and a bulk
//! update ran at once (`TestResult::household`), each judged by one stated
//! rule on what it recorded, computed once here and shown by the browser
//! page and `bloatlab report` as they are.
//!
//! * **Game** (the household phase's UDP probes, 50 a second): the p99 round
//!   trip and the share lost. Good up to 50 ms and 1% lost, fair up to 100 ms
//!   and 5%. The delays are the gaming rule of [`crate::uses`] taken at the
//!   99th percentile: a game feels the worst moments, one update in a hundred
//!   is two a second at 50 Hz; a game hides the odd lost update, not a
//!   steady stream of them.
//! * **Video call** (frames up and back on an unreliable channel): the share
//!   of frames lost either way and the p90 frame round trip. Good up to 1%
//!   lost and 300 ms, fair up to 5% and 800 ms: Cisco's interactive-video
//!   targets (loss 1% or less, one-way 150 ms) and ITU-T G.114's one-way
//!   limits (150 ms for most calls, 400 ms at most) at about half the round
//!   trip.
//! * **Stream** (segments fetched in turn): the slowest segment's fetch
//!   against the play time it holds. Good when every segment arrived within
//!   half its play time (the player's buffer grows), fair within its play
//!   time (the buffer holds), poor when one took longer (the buffer drains:
//!   a stall follows, as soon as what was buffered before runs out).
//! * **Bulk update** (one stream each way, as fast as it goes): its goodput's
//!   share of the direction's capacity measured by the same test. Good from
//!   25% each way (it finishes within four times its time alone), fair from
//!   10%, poor below (starved). bloatlab's own rule: a line that keeps the
//!   others good by starving the update is not a good line either.
use crate::verdict::{UseVerdict, Verdict};
use bloatlab_results::{LatencyStats, Phase, TestResult};

/// (good up to, fair up to) of each rule.
pub const GAME_P99_MS: (f64, f64) = (50.0, 100.0);
pub const GAME_LOSS_PCT: (f64, f64) = (1.0, 5.0);
pub const CALL_P90_MS: (f64, f64) = (300.0, 800.0);
pub const CALL_LOSS_PCT: (f64, f64) = (1.0, 5.0);
/// The slowest segment's fetch over its play time: (good up to, fair up to).
pub const STREAM_FETCH_SHARE: (f64, f64) = (0.5, 1.0);
/// The update's goodput over the direction's capacity: (good from, fair from).
pub const BULK_SHARE: (f64, f64) = (0.25, 0.10);

fn up_to(v: f64, (good, fair): (f64, f64)) -> Verdict {
    if v <= good {
        Verdict::Good
    } else if v <= fair {
        Verdict::Fair
    } else {
        Verdict::Poor
    }
}

fn ms(v: f64) -> String {
    format!("{} ms", bloatlab_model::fmt::ms(v))
}

fn pct(v: f64) -> String {
    format!("{}%", bloatlab_model::fmt::sig3(v))
}

/// Round trip and loss of a list judged together: the worse of the two.
fn delay_and_loss(l: &LatencyStats, at: f64, delay: (f64, f64), loss: (f64, f64)) -> Verdict {
    if l.sent == 0 {
        return Verdict::Unknown;
    }
    if l.received == 0 {
        return Verdict::Poor;
    }
    up_to(at, delay).max(up_to(l.loss_pct, loss))
}

/// The household test's verdicts on `r`: game, video call, stream, bulk
/// update, in that order; empty when `r` holds no household test.
pub fn household(r: &TestResult) -> Vec<UseVerdict> {
    let Some(h) = &r.household else { return vec![] };
    let phase = r.scenarios.iter().find(|p| p.name == h.phase);
    let game = phase.map(|p| p.summary.latency).unwrap_or_default();
    let call = crate::latency_stats_ns(&h.call.frames.iter().map(|f| f.rtt_ns).collect::<Vec<_>>());
    let call_back_lost = h.call.frames.iter().filter(|f| f.rtt_ns.is_none() && f.server_rx_unix_ns.is_some()).count();
    let call_bps = h.call.frames_per_second as f64 * h.call.frame_bytes as f64 * 8.0;
    vec![
        UseVerdict {
            name: "game".into(),
            verdict: delay_and_loss(&game, game.p99_ms, GAME_P99_MS, GAME_LOSS_PCT),
            measured: if game.sent == 0 {
                "no game updates were sent".into()
            } else {
                format!("p99 round trip {}, {} of {} updates lost ({})", ms(game.p99_ms), game.lost, game.sent, pct(game.loss_pct))
            },
            rule: format!(
                "a small UDP update every {} ms, answered: good up to 50 ms p99 and 1% lost, fair up to 100 ms and 5% (game-industry guidance at the 99th percentile: a game feels its worst moments)",
                bloatlab_model::fmt::trim_num(h.game_interval_ms)
            ),
        },
        UseVerdict {
            name: "video call".into(),
            verdict: delay_and_loss(&call, call.p90_ms, CALL_P90_MS, CALL_LOSS_PCT),
            measured: if call.sent == 0 {
                "no frames were sent".into()
            } else {
                format!(
                    "p90 frame round trip {}, {} of {} frames lost ({}{})",
                    ms(call.p90_ms),
                    call.lost,
                    call.sent,
                    pct(call.loss_pct),
                    if h.call.lost_way_known { format!("; {call_back_lost} of them on the way back") } else { String::new() }
                )
            },
            rule: format!(
                "{} frames a second of {} bytes each way ({}), never retransmitted: good up to 1% lost and 300 ms p90 round trip, fair up to 5% and 800 ms (Cisco's interactive-video targets, ITU-T G.114)",
                h.call.frames_per_second,
                h.call.frame_bytes,
                bloatlab_model::fmt::rate(call_bps)
            ),
        },
        stream(h, phase),
        bulk(r, phase),
    ]
}

fn stream(h: &bloatlab_results::Household, phase: Option<&Phase>) -> UseVerdict {
    let s = &h.stream;
    let play_ms = s.segment_ms;
    // each segment's fetch time, ms; one still arriving when the phase ended
    // counts (as at least the time it had taken) once it is late, not before
    let end_ns = phase.map(|p| p.end_ns).unwrap_or(0);
    let mut unfinished = 0;
    let taken: Vec<f64> = s
        .segments
        .iter()
        .filter_map(|g| match g.done_ns {
            Some(d) => Some(d as f64 / 1e6),
            None => {
                unfinished += 1;
                let waited = end_ns.saturating_sub(g.t_ns) as f64 / 1e6;
                (waited > play_ms * STREAM_FETCH_SHARE.1).then_some(waited)
            }
        })
        .collect();
    let worst = taken.iter().copied().fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
    let verdict = match worst {
        None => Verdict::Unknown,
        Some(w) => up_to(w / play_ms, STREAM_FETCH_SHARE),
    };
    let rate = s.segment_bytes as f64 * 8.0 / (play_ms / 1e3);
    UseVerdict {
        name: "stream".into(),
        verdict,
        measured: match worst {
            None => "no segment arrived".into(),
            Some(w) => format!(
                "slowest segment {} for {} s of play ({} fetched{})",
                bloatlab_model::fmt::human_ms(w),
                bloatlab_model::fmt::trim_num(play_ms / 1e3),
                s.segments.len(),
                if unfinished > 0 { format!(", {unfinished} not complete when the test ended") } else { String::new() }
            ),
        },
        rule: format!(
            "a {} segment for each {} s of play ({}), fetched in turn: good when each arrives within half its play time, fair within its play time, poor when one takes longer (the player's buffer drains)",
            bloatlab_model::fmt::human_bytes(s.segment_bytes as f64),
            bloatlab_model::fmt::trim_num(play_ms / 1e3),
            bloatlab_model::fmt::rate(rate)
        ),
    }
}

fn bulk(r: &TestResult, phase: Option<&Phase>) -> UseVerdict {
    let (cap_down, cap_up) = (r.headline.download_capacity_bps, r.headline.upload_capacity_bps);
    let (down, up) = phase.map(|p| (p.summary.download_bps, p.summary.upload_bps)).unwrap_or((0.0, 0.0));
    let share = |g: f64, c: f64| if c > 0.0 { Some(g / c) } else { None };
    let shares = [share(down, cap_down), share(up, cap_up)];
    let verdict = if phase.is_none() || shares.iter().any(|s| s.is_none()) {
        Verdict::Unknown
    } else {
        shares
            .iter()
            .flatten()
            .map(|&s| if s >= BULK_SHARE.0 { Verdict::Good } else if s >= BULK_SHARE.1 { Verdict::Fair } else { Verdict::Poor })
            .fold(Verdict::Good, Verdict::max)
    };
    let rate = bloatlab_model::fmt::rate;
    let of = |s: Option<f64>| s.map(|s| pct(s * 100.0)).unwrap_or_else(|| "-".into());
    UseVerdict {
        name: "bulk update".into(),
        verdict,
        measured: format!(
            "{} down ({} of the {} measured), {} up ({} of {})",
            rate(down),
            of(shares[0]),
            rate(cap_down),
            rate(up),
            of(shares[1]),
            rate(cap_up)
        ),
        rule: "one stream each way, as fast as it goes: good from 25% of the line each way, fair from 10%, poor below (starved)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::{CallRecord, Household, Probe, Segment, StreamRecord, Summary};

    fn result(game_p99: f64, game_loss: f64, frames: &[Option<u64>], segments_ms: &[Option<u64>], bulk: (f64, f64)) -> TestResult {
        let mut s = Summary::default();
        s.latency.sent = 500;
        s.latency.received = (500.0 * (1.0 - game_loss / 100.0)) as u32;
        s.latency.lost = s.latency.sent - s.latency.received;
        s.latency.loss_pct = game_loss;
        s.latency.p99_ms = game_p99;
        s.download_bps = bulk.0;
        s.upload_bps = bulk.1;
        let mut r: TestResult = serde_json::from_value(serde_json::json!({
            "schema": "bloatlab-result", "schema_version": 2, "complete": true,
            "metadata": serde_json::to_value(bloatlab_results::Metadata::default()).unwrap(),
            "scenarios": [], "headline": serde_json::to_value(bloatlab_results::Headline::default()).unwrap()
        }))
        .unwrap();
        r.scenarios.push(Phase { name: "household".into(), uploads: 1, downloads: 1, summary: s, ..Default::default() });
        r.headline.download_capacity_bps = 10e6;
        r.headline.upload_capacity_bps = 10e6;
        r.household = Some(Household {
            phase: "household".into(),
            game_interval_ms: 20.0,
            call: CallRecord {
                frames_per_second: 30,
                frame_bytes: 6250,
                frames: frames
                    .iter()
                    .enumerate()
                    .map(|(i, &rtt)| Probe { seq: i as u32, t_ns: 0, rtt_ns: rtt, server_rx_unix_ns: Some(1), owd_up_ns: None, owd_down_ns: None })
                    .collect(),
                lost_way_known: true,
            },
            stream: StreamRecord {
                segment_ms: 4000.0,
                segment_bytes: 1_500_000,
                segments: segments_ms.iter().map(|d| Segment { t_ns: 0, first_byte_ns: Some(1), done_ns: d.map(|d| d * 1_000_000), bytes: 1 }).collect(),
            },
        });
        r
    }

    fn v(r: &TestResult) -> Vec<Verdict> {
        household(r).into_iter().map(|u| u.verdict).collect()
    }

    #[test]
    fn what_it_means_says_what_the_household_measured_one_verdict_per_application() {
        // the line's phases read a fair call (p90 500 ms), the household's call was poor
        let late = vec![Some(1_000_000_000u64); 100];
        let mut r = result(1100.0, 0.0, &late, &[Some(1500), Some(4500)], (8e6, 8e6));
        r.scenarios[0].summary.latency.received = 400;
        r.scenarios[0].summary.latency.p90_ms = 500.0;
        r.scenarios[0].summary.latency.p50_ms = 80.0;
        let uses = crate::uses::uses(&r);
        let hh = household(&r);
        for (usage, app) in [("gaming", "game"), ("video calls", "video call"), ("streaming", "stream")] {
            let (u, h) = (uses.iter().find(|u| u.name == usage).unwrap(), hh.iter().find(|h| h.name == app).unwrap());
            assert_eq!(u.verdict, h.verdict, "{usage} vs {app}");
            assert!(u.measured.starts_with(&format!("the household test's {app}: ")), "{}", u.measured);
        }
        // browsing has no household profile: judged by its own rule
        assert_eq!(uses.iter().find(|u| u.name == "browsing").unwrap().verdict, Verdict::Good);
    }

    #[test]
    fn each_profile_follows_its_stated_thresholds() {
        use Verdict::*;
        let ok_frames = vec![Some(20_000_000u64); 100];
        let good = result(10.0, 0.0, &ok_frames, &[Some(1500), Some(1200), Some(1900)], (5e6, 5e6));
        assert_eq!(v(&good), [Good, Good, Good, Good]);
        // a bloated line: a second's p99, frames back late, a segment over its play time
        let late = vec![Some(1_000_000_000u64); 100];
        let bloated = result(1100.0, 0.0, &late, &[Some(1500), Some(4500)], (8e6, 8e6));
        assert_eq!(v(&bloated), [Poor, Poor, Poor, Good]);
        // loss alone: 3% of the game's updates lost is fair; 10% of the frames poor
        let mut lossy = ok_frames.clone();
        for f in lossy.iter_mut().take(10) {
            *f = None;
        }
        let r = result(10.0, 3.0, &lossy, &[Some(3000)], (2e6, 0.5e6));
        assert_eq!(v(&r), [Fair, Poor, Fair, Poor]);
        let m = household(&r);
        assert!(m[1].measured.contains("10 of 100 frames lost (10.0%; 10 of them on the way back)"), "{}", m[1].measured);
        // a segment still arriving is judged only once it is late: 3 s into
        // its 4 s of play it is not; 5 s in, it is
        let mut r = result(10.0, 0.0, &ok_frames, &[Some(1000), None], (5e6, 5e6));
        r.scenarios[0].end_ns = 3_000_000_000;
        assert_eq!(v(&r)[2], Good);
        r.scenarios[0].end_ns = 5_000_000_000;
        assert_eq!(v(&r)[2], Poor);
        assert!(household(&r)[2].measured.contains("slowest segment 5.00 s"), "{}", household(&r)[2].measured);
        // no household test, no verdicts
        let mut plain = good.clone();
        plain.household = None;
        assert!(household(&plain).is_empty());
    }
}
