//! Whether a loaded phase's latency stopped rising ([`bloatlab_model::SETTLE_RULE`]):
//! computed live by every front end to end a phase, and on the finished
//! phase for its summary (`still_rising`, `settled_after_s`).
use bloatlab_model::SettleRule;

/// A phase's latency levels by window and what the rule says of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settling {
    /// Median round trip of each whole window, ms (None: too few answers).
    pub window_p50_ms: Vec<Option<f64>>,
    /// End of the first window at which latency had stopped rising, s from
    /// the phase's start.
    pub settled_after_s: Option<f64>,
    /// The rule held at the last whole window.
    pub settled: bool,
    /// The highest window median, ms, once settled: the level the queue
    /// rose to under this load.
    pub settled_level_ms: Option<f64>,
    /// The last windows set a new high: latency was still rising when the
    /// phase ended (with fewer windows than the rule holds, the last one
    /// against those before it).
    pub still_rising: bool,
}

/// Judge `samples`, (answer arrival ns from the phase's start, round trip
/// ns) of the answered probes, over the whole windows of `elapsed_ns`.
pub fn settle(samples: &[(u64, u64)], elapsed_ns: u64, rule: &SettleRule) -> Settling {
    let w = rule.window.as_nanos().max(1) as u64;
    let n = (elapsed_ns / w) as usize;
    let mut bins: Vec<Vec<f64>> = vec![vec![]; n];
    for &(at, rtt) in samples {
        if let Some(b) = bins.get_mut((at / w) as usize) {
            b.push(rtt as f64 / 1e6);
        }
    }
    let levels: Vec<Option<f64>> = bins.iter().map(|b| if b.len() >= rule.min_samples { crate::percentile(b, 50.0) } else { None }).collect();
    let hold = rule.hold.max(1) as usize;
    // window `last` and the `h - 1` before it: (all have a level, none of
    // those with a level is a new high over the windows before them)
    let judge = |last: usize, h: usize| -> Option<(bool, bool)> {
        if last + 1 <= h {
            return None;
        }
        let recent = &levels[last + 1 - h..=last];
        let prior = levels[..last + 1 - h].iter().flatten().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        if !prior.is_finite() {
            return None;
        }
        let high = recent.iter().flatten().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        Some((recent.iter().all(|l| l.is_some()), high <= prior * (1.0 + rule.tolerance) + rule.floor_ms))
    };
    let holds_at = |last: usize| judge(last, hold) == Some((true, true));
    let settled_after_s = (0..n).find(|&k| holds_at(k)).map(|k| ((k + 1) as u64 * w) as f64 / 1e9);
    let settled = n > 0 && holds_at(n - 1);
    // a new high among the last windows (fewer than the rule holds: the last against those before it)
    let still_rising = n >= 2 && matches!(judge(n - 1, if n > hold { hold } else { 1 }), Some((_, false)));
    let settled_level_ms = settled.then(|| levels.iter().flatten().fold(f64::NEG_INFINITY, |a, &b| a.max(b)));
    Settling { window_p50_ms: levels, settled_after_s, settled, settled_level_ms, still_rising }
}

/// The window the loaded part of a phase begins with
/// ([`bloatlab_model::LOADED_RULE`]): the first whose level (`levels`, the
/// window medians [`settle`] computed) rose above `idle_ms` (none: the
/// lowest level) at least `rule.share` of the median rise of it and the
/// windows after it. A median, so a few late windows far above the rest (a
/// browser's probe channel stalled behind a loss) neither move the start
/// nor make the figure; a phase still rising at its end is loaded over its
/// last few windows (a linear rise: the last third). 0 when no window has
/// a level.
pub fn loaded_from(levels: &[Option<f64>], idle_ms: Option<f64>, rule: &bloatlab_model::LoadedRule) -> usize {
    let lo = levels.iter().flatten().fold(f64::INFINITY, |a, &b| a.min(b));
    if !lo.is_finite() {
        return 0;
    }
    let base = idle_ms.unwrap_or(lo).min(lo);
    (0..levels.len())
        .find(|&k| {
            let Some(l) = levels[k] else { return false };
            let later: Vec<f64> = levels[k..].iter().flatten().copied().collect();
            crate::percentile(&later, 50.0).is_some_and(|m| l - base >= rule.share * (m - base))
        })
        .unwrap_or(0)
}

/// Whether the queue has drained by `now_ns`: the median of the round
/// trips answered in the rule's last window is within its tolerance of
/// `idle_p50_ms` (`samples`: answer arrival ns, round trip ns, in any order
/// and time base shared with `now_ns`). No answers in the window: not yet.
pub fn drained(samples: &[(u64, u64)], now_ns: u64, idle_p50_ms: f64, rule: &bloatlab_model::DrainRule) -> bool {
    let from = now_ns.saturating_sub(rule.window.as_nanos() as u64);
    let recent: Vec<f64> = samples.iter().filter(|(at, _)| *at >= from && *at <= now_ns).map(|(_, r)| *r as f64 / 1e6).collect();
    if recent.len() < rule.min_samples {
        return false;
    }
    crate::percentile(&recent, 50.0).is_some_and(|m| m <= idle_p50_ms * (1.0 + rule.tolerance) + rule.floor_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_model::SETTLE_RULE;

    /// 100 probes a second for `secs`, round trip `rtt(t_s)` ms.
    fn series(secs: f64, rtt: impl Fn(f64) -> f64) -> Vec<(u64, u64)> {
        (0..(secs * 100.0) as u64).map(|k| {
            let t = k as f64 / 100.0;
            ((t * 1e9) as u64, (rtt(t) * 1e6) as u64)
        }).collect()
    }

    #[test]
    fn a_queue_has_drained_once_the_last_half_second_is_back_at_the_idle_level() {
        use bloatlab_model::DRAIN_RULE;
        // idle 20 ms; a queue of 1 s draining linearly over 1.2 s after t = 0
        let s = series(3.0, |t| 20.0 + (1000.0 * (1.0 - t / 1.2)).max(0.0));
        assert!(!drained(&s, 1_000_000_000, 20.0, &DRAIN_RULE));
        assert!(drained(&s, 1_800_000_000, 20.0, &DRAIN_RULE));
        // nothing answered lately (every probe lost): not drained
        assert!(!drained(&s, 9_000_000_000, 20.0, &DRAIN_RULE));
        // within 10% + 2 ms
        let s = series(1.0, |_| 23.9);
        assert!(drained(&s, 1_000_000_000, 20.0, &DRAIN_RULE));
        assert!(!drained(&series(1.0, |_| 24.1), 1_000_000_000, 20.0, &DRAIN_RULE));
    }

    #[test]
    fn the_loaded_part_begins_once_the_ramp_has_risen_most_of_the_way() {
        use bloatlab_model::LOADED_RULE;
        // idle 20 ms; the queue fills 100 ms a second for 9 s, then saws 800-1000 ms above idle
        let s = series(14.0, |t| 20.0 + if t < 9.0 { 100.0 * t } else if t < 11.5 { 900.0 + 40.0 * (t - 9.0) } else { 800.0 + 60.0 * (t - 11.5) });
        let r = settle(&s, 14_000_000_000, &SETTLE_RULE);
        // window 7 (7-8 s, 750 above idle) is 80% of the median of it and
        // the windows after it (905); window 6 (650 of 882) is not
        assert_eq!(loaded_from(&r.window_p50_ms, Some(20.0), &LOADED_RULE), 7);
        // without an idle median, from the lowest level (window 0, 70 ms)
        assert_eq!(loaded_from(&r.window_p50_ms, None, &LOADED_RULE), 7);
        // two late windows far above the rest (a stalled probe channel) move nothing
        let mut spiky = r.window_p50_ms.clone();
        spiky[12] = Some(2200.0);
        spiky[13] = Some(2600.0);
        assert_eq!(loaded_from(&spiky, Some(20.0), &LOADED_RULE), 7);
        // still rising at the end: the last windows
        let rising = settle(&series(15.0, |t| 20.0 + 50.0 * t), 15_000_000_000, &SETTLE_RULE);
        assert_eq!(loaded_from(&rising.window_p50_ms, Some(20.0), &LOADED_RULE), 10);
        // a flat phase (an AQM) is loaded from its start
        let flat = settle(&series(6.0, |t| 25.0 + (t * 7.0).sin()), 6_000_000_000, &SETTLE_RULE);
        assert_eq!(loaded_from(&flat.window_p50_ms, Some(20.0), &LOADED_RULE), 0);
        assert_eq!(loaded_from(&[None, None], Some(1.0), &LOADED_RULE), 0);
    }

    #[test]
    fn a_queue_still_filling_is_still_rising() {
        // 150 ms rising 50 ms a second, as the page saw a 1000-packet FIFO fill
        let s = series(5.0, |t| 150.0 + 50.0 * t);
        let r = settle(&s, 5_000_000_000, &SETTLE_RULE);
        assert_eq!(r.window_p50_ms.len(), 5);
        assert!(!r.settled && r.still_rising && r.settled_after_s.is_none(), "{r:?}");
    }

    #[test]
    fn a_plateau_settles_three_windows_after_its_top() {
        // fills for 2 s, then holds 400 ms
        let s = series(8.0, |t| if t < 2.0 { 100.0 + 150.0 * t } else { 400.0 });
        let r = settle(&s, 8_000_000_000, &SETTLE_RULE);
        assert!(r.settled && !r.still_rising, "{r:?}");
        // windows 0,1 rise; 2 is the new top; 3,4,5 hold: settled at the end of window 5
        assert_eq!(r.settled_after_s, Some(6.0));
        assert_eq!(r.settled_level_ms, Some(400.0));
        // live, the same rule after 5 s: not yet
        assert!(!settle(&s, 5_000_000_000, &SETTLE_RULE).settled);
    }

    #[test]
    fn a_sawtooth_below_its_first_peak_has_stopped_rising() {
        // a queue that fills, drops (cwnd halves) and fills again to the same height
        let s = series(9.0, |t| 300.0 + 300.0 * ((t % 3.0) / 3.0));
        let r = settle(&s, 9_000_000_000, &SETTLE_RULE);
        assert!(r.settled && !r.still_rising, "{r:?}");
    }

    #[test]
    fn a_flat_short_path_settles_despite_noise_and_a_short_phase_is_judged_on_what_it_has() {
        // 1 ms +- 0.4 ms: within the floor
        let s = series(5.0, |t| 1.0 + 0.4 * (t * 37.0).sin());
        let r = settle(&s, 5_000_000_000, &SETTLE_RULE);
        assert!(r.settled && !r.still_rising && r.settled_after_s == Some(4.0), "{r:?}");
        // a 2 s phase that rose: still rising (last window against the first)
        let s = series(2.0, |t| 10.0 + 100.0 * t);
        let r = settle(&s, 2_000_000_000, &SETTLE_RULE);
        assert!(r.still_rising && !r.settled, "{r:?}");
        // nothing whole yet
        assert_eq!(settle(&s, 900_000_000, &SETTLE_RULE), Settling::default());
    }

    #[test]
    fn a_window_without_answers_has_no_level_and_the_rule_waits() {
        // every probe lost in window 3: not settled there
        let s: Vec<(u64, u64)> = series(6.0, |_| 50.0).into_iter().filter(|(at, _)| !(3_000_000_000..4_000_000_000).contains(at)).collect();
        let r = settle(&s, 6_000_000_000, &SETTLE_RULE);
        assert_eq!(r.window_p50_ms[3], None);
        assert_eq!(r.settled_after_s, None, "the rule needs a level in each of the windows it holds");
        assert!(!r.settled && !r.still_rising, "{r:?}");
    }
}
