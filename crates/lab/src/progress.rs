//! The live progress display of lab runs (`bloatlab lab`, recipe and sweep
//! points): a bar on a terminal, a plain line every 5 s otherwise.
use std::time::Instant;

/// A live progress display for lab runs: a bar on a terminal, a plain line
/// every 5 s otherwise; nothing when quiet. `label` names the run.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        use std::io::IsTerminal;
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(1000);
            b.set_style(
                indicatif::ProgressStyle::with_template("  {prefix} [{bar:24}] {msg}").expect("a valid template").progress_chars("=> "),
            );
            b
        });
        Progress { bar, quiet }
    }

    /// The callback for one run labelled `label` (e.g. "run 1/2 fifo:1000").
    pub fn for_run(&self, label: &str) -> Option<crate::ProgressFn> {
        if self.quiet {
            return None;
        }
        let bar = self.bar.clone();
        let label = label.to_string();
        let last_line = std::sync::Mutex::new(Instant::now());
        Some(crate::ProgressFn(std::sync::Arc::new(move |p: &crate::LabProgress| {
            let l = &p.live;
            let rate = |bps: f64| if bps > 0.0 { bloatlab_model::fmt::rate(bps) } else { "-".into() };
            let msg = format!(
                "{} {}/{} {:.1}/{:.0} s  up {}  down {}  rtt {} ms{}",
                l.phase,
                l.phase_index + 1,
                l.phases,
                l.elapsed_s.min(l.phase_len_s),
                l.phase_len_s,
                rate(l.up_bps),
                rate(l.down_bps),
                bloatlab_model::fmt::ms(l.rtt_ms),
                p.backlog_packets.map(|b| format!("  backlog {b} pkts")).unwrap_or_default()
            );
            match &bar {
                Some(b) => {
                    let frac = (l.phase_index as f64 + (l.elapsed_s / l.phase_len_s.max(1e-9)).min(1.0)) / l.phases.max(1) as f64;
                    b.set_prefix(label.clone());
                    b.set_position((frac * 1000.0) as u64);
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

    /// Clear the bar (before printing results).
    pub fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
            b.reset();
        }
    }
}

