//! The live progress display of lab runs (`bloatlab lab`, recipe and sweep
//! points): a bar on a terminal, a plain line every 5 s otherwise.
use std::time::Instant;

/// A live progress display for lab runs: a bar on a terminal, a plain line
/// every 5 s otherwise; nothing when quiet. `label` names the run.
pub struct Progress {
    /// On a terminal (each run then gets a bar of its own).
    terminal: bool,
    /// The bar of the run in progress.
    current: std::sync::Mutex<Option<indicatif::ProgressBar>>,
    quiet: bool,
}

/// What a run's bar has seen: each finished phase's length as it ran, s,
/// and the phase in progress.
#[derive(Default)]
struct Ran {
    lengths: Vec<f64>,
    index: usize,
    elapsed: f64,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        use std::io::IsTerminal;
        Progress { terminal: !quiet && std::io::stderr().is_terminal(), current: std::sync::Mutex::new(None), quiet }
    }

    /// The callback for one run labelled `label` (e.g. "run 1/2 fifo:1000").
    pub fn for_run(&self, label: &str) -> Option<crate::ProgressFn> {
        if self.quiet {
            return None;
        }
        // a bar of its own, so a callback after the run's end (or after
        // `clear`) draws nothing: its bar is finished
        let bar = self.terminal.then(|| {
            let b = indicatif::ProgressBar::new(1000);
            b.set_style(indicatif::ProgressStyle::with_template("  {prefix} [{bar:24}] {msg}").expect("a valid template").progress_chars("=> "));
            b.set_prefix(label.to_string());
            *self.current.lock().expect("progress lock") = Some(b.clone());
            b
        });
        let label = label.to_string();
        let last_line = std::sync::Mutex::new(Instant::now());
        let ran = std::sync::Mutex::new(Ran::default());
        Some(crate::ProgressFn(std::sync::Arc::new(move |p: &crate::LabProgress| {
            let l = &p.live;
            let rate = |bps: f64| if bps > 0.0 { bloatlab_model::fmt::rate(bps) } else { "-".into() };
            let last = l.phase_index + 1 >= l.phases;
            let msg = format!(
                "{} {}/{} {:.1}/{:.0} s  up {}  down {}  rtt {} ms{}{}",
                l.phase,
                l.phase_index + 1,
                l.phases,
                l.elapsed_s.min(l.phase_len_s),
                l.phase_len_s,
                rate(l.up_bps),
                rate(l.down_bps),
                bloatlab_model::fmt::ms(l.rtt_ms),
                p.backlog_packets.map(|b| format!("  backlog {b} pkts")).unwrap_or_default(),
                if last && l.elapsed_s >= l.phase_len_s - 0.5 { "  finishing: gathering the result" } else { "" }
            );
            match &bar {
                Some(b) => {
                    if b.is_finished() {
                        return;
                    }
                    b.set_position((Self::fraction(&mut ran.lock().expect("progress lock"), l, &p.planned_s) * 1000.0) as u64);
                    b.set_message(msg);
                }
                None => {
                    let mut t = last_line.lock().expect("progress lock");
                    if t.elapsed() >= std::time::Duration::from_secs(5) {
                        *t = Instant::now();
                        eprintln!("  {label}: {msg}");
                    }
                }
            }
        })))
    }

    /// The share of the run done, by time: the phases that ran as long as
    /// they ran, this one so far, the rest as planned.
    fn fraction(ran: &mut Ran, l: &bloatlab_model::config::Live, planned: &[f64]) -> f64 {
        let plan = |i: usize| planned.get(i).copied().unwrap_or(l.phase_len_s);
        while ran.lengths.len() < l.phase_index {
            // a phase ended: as long as it was seen running, at least as planned
            let i = ran.lengths.len();
            let seen = if i == ran.index { ran.elapsed } else { 0.0 };
            ran.lengths.push(seen.max(plan(i)));
        }
        (ran.index, ran.elapsed) = (l.phase_index, l.elapsed_s.max(0.0));
        let done: f64 = ran.lengths[..l.phase_index].iter().sum();
        let rest: f64 = (l.phase_index + 1..l.phases).map(plan).sum();
        let now = l.elapsed_s.max(0.0);
        let total = done + now.max(plan(l.phase_index)) + rest;
        if total <= 0.0 {
            return 0.0;
        }
        ((done + now) / total).min(1.0)
    }

    /// Clear the bar (before printing results): finished, so it stays away.
    pub fn clear(&self) {
        if let Some(b) = self.current.lock().expect("progress lock").take() {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_by_time_not_by_phase() {
        let live = |i: usize, elapsed: f64, len: f64| bloatlab_model::config::Live { phase: "x".into(), phase_index: i, phases: 2, elapsed_s: elapsed, phase_len_s: len, ..Default::default() };
        let planned = [2.0, 18.0];
        let mut ran = Ran::default();
        // the end of a 2 s idle phase of a 20 s run: a tenth, not half
        assert!((Progress::fraction(&mut ran, &live(0, 2.0, 2.0), &planned) - 0.1).abs() < 1e-9);
        assert!((Progress::fraction(&mut ran, &live(1, 9.0, 18.0), &planned) - 0.55).abs() < 1e-9);
        // a loaded phase running on past its least length (until settled)
        let f = Progress::fraction(&mut ran, &live(1, 24.0, 30.0), &planned);
        assert!((f - 1.0).abs() < 1e-9, "{f}");
    }
}
