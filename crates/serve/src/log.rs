//! The log of a listener: one JSON line on stderr per event
//! (docs/server.md), and refusals at most one line a second, each with how
//! many were refused since the last ([`crate::quota::RefusalLog`]).
use crate::quota::{RefusalLine, RefusalLog};
use bloatlab_host::clock;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `{"time":..,"event":..,<fields>}`: time and event first, for people
/// reading the log; the fields in name order.
pub fn log_line(now_ns: u64, event: &str, fields: &serde_json::Value) -> String {
    let head = format!("{{\"time\":{},\"event\":{}", json!(bloatlab_model::units::rfc3339(now_ns)), json!(event));
    match fields.as_object() {
        Some(m) if !m.is_empty() => format!("{head},{}", &fields.to_string()[1..]),
        _ => format!("{head}}}"),
    }
}

/// A listener's log: its events, and its refusals under the rate limit,
/// written as `refused_event` lines (`busy`, `rpm_refused`, `web_refused`,
/// `metrics_refused`).
pub struct Log {
    quiet: bool,
    refused_event: &'static str,
    refusals: Mutex<RefusalLog>,
}

impl Log {
    pub fn new(quiet: bool, refused_event: &'static str) -> Arc<Log> {
        Arc::new(Log { quiet, refused_event, refusals: Mutex::new(RefusalLog::default()) })
    }

    /// One line for `event` (nothing when quiet).
    pub fn event(&self, event: &str, fields: serde_json::Value) {
        if !self.quiet {
            eprintln!("{}", log_line(clock::now_ns(), event, &fields));
        }
    }

    /// Count a refusal of `peer` for `reason`; written now if a second has
    /// passed since the last refusal line, else by a later [`Log::flush`].
    pub fn refused(&self, peer: SocketAddr, reason: String) {
        let line = self.refusals.lock().unwrap().note(peer, reason, Instant::now());
        self.say(line);
    }

    /// Write the refusals a flood left untold once their second is up (call
    /// it periodically: [`flush_refusals`] does on the runtime).
    pub fn flush(&self) {
        let line = self.refusals.lock().unwrap().due(Instant::now());
        self.say(line);
    }

    fn say(&self, line: Option<RefusalLine>) {
        if let Some(l) = line {
            self.event(self.refused_event, json!({"client": l.peer.to_string(), "refused": l.refused, "reason": l.reason}));
        }
    }
}

/// [`Log::flush`] every 250 ms, for as long as the process lives.
pub async fn flush_refusals(log: Arc<Log>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        log.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_starts_with_time_and_event_and_keeps_the_fields() {
        let l = log_line(0, "busy", &json!({"client": "192.0.2.1:5", "refused": 3}));
        assert_eq!(l, r#"{"time":"1970-01-01T00:00:00.000Z","event":"busy","client":"192.0.2.1:5","refused":3}"#);
        assert_eq!(log_line(0, "x", &json!({})), r#"{"time":"1970-01-01T00:00:00.000Z","event":"x"}"#);
    }
}
