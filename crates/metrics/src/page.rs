//! The browser's own delay: a page times its probes on a thread that also
//! runs other work, and a busy thread handles an answer late, which would
//! read as bufferbloat. The page's probe thread runs a 5 ms tick and
//! reports each tick that ran more than 1 ms late; here those stalls mark
//! the probes whose answer the page may have held (handled within the
//! stall's length of its end), and say how late the page ran per phase.

pub use bloatlab_model::web::PAGE_DELAY_BOUND_MS;

/// Which probes, `(sent, answered)` in ms on the page's clock, the page
/// may have held beyond [`PAGE_DELAY_BOUND_MS`]: an answer handled within a
/// stall's length after it ended, the stall (`(due, late by)`, ms) longer
/// than the bound. Lost probes (`None`) are not marked.
pub fn delayed(probes: &[(f64, Option<f64>)], stalls: &[(f64, f64)]) -> Vec<bool> {
    let mut long: Vec<(f64, f64)> = stalls.iter().filter(|(d, l)| d.is_finite() && *l > PAGE_DELAY_BOUND_MS).map(|&(d, l)| (d + l, l)).collect();
    long.sort_by(|a, b| a.0.total_cmp(&b.0));
    probes
        .iter()
        .map(|&(t1, t4)| {
            let Some(t4) = t4 else { return false };
            // stalls that ended up to 1 ms after the answer was handled (the tick's own dispatch)
            let to = long.partition_point(|s| s.0 <= t4 + 1.0);
            long[..to].iter().rev().take_while(|s| s.0 >= t1).any(|&(end, late)| end >= t4 - late)
        })
        .collect()
}

/// The most any tick due in `[from, to)` ran late, ms (None: none late by more than 1 ms).
pub fn max_lag_ms(stalls: &[(f64, f64)], from: f64, to: f64) -> Option<f64> {
    stalls.iter().filter(|(d, _)| *d >= from && *d < to).map(|&(_, l)| l).fold(None, |a: Option<f64>, l| Some(a.map_or(l, |a| a.max(l))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_handled_right_after_a_long_stall_is_marked_and_others_are_not() {
        // a 30 ms stall from 100 to 130 ms
        let stalls = [(100.0, 30.0), (300.0, 2.0)];
        let probes = [
            (90.0, Some(131.0)),  // handled as the stall ended: marked
            (120.0, Some(135.0)), // sent during it, handled 5 ms after: within 30 ms of its end
            (140.0, Some(150.0)), // sent after it: not marked
            (50.0, Some(95.0)),   // answered before it
            (290.0, Some(302.5)), // a 2 ms stall: under the bound
            (95.0, None),         // lost: never marked
            (10.0, Some(200.0)),  // handled 70 ms after the stall ended: the stall did not hold it
        ];
        assert_eq!(delayed(&probes, &stalls), [true, true, false, false, false, false, false]);
        assert_eq!(max_lag_ms(&stalls, 0.0, 200.0), Some(30.0));
        assert_eq!(max_lag_ms(&stalls, 200.0, 250.0), None);
    }
}
