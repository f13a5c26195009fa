//! The lab's configuration: everything that defines a `bloatlab lab`
//! testbed (its link, queues, TCP settings), as one serde type that the
//! command line, recipes and sweeps build and the lab runs.
use crate::queue::{analytic_queue_delay_ms, QueueSpec};
use crate::rate::{Rate, RateSpec};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Where the bottleneck sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// The router's egress: toward server+witness (up) and toward the client (down).
    Router,
    /// The sender's own interface: client eth0 (up), server eth0 (down).
    Local,
}

/// The rate limiter used by the kernel backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shaper {
    Htb,
    Tbf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The emulator when an emulator-only feature is asked for (AQM queue,
    /// trace, delay/jitter/loss), else the kernel.
    Auto,
    /// Kernel qdiscs (htb/tbf + pfifo/bfifo or any --qdisc).
    Kernel,
    /// bloatlab's user-space link emulator.
    Emulator,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnOff {
    On,
    Off,
}

words!(Placement, "a bottleneck placement", Router = "router", Local = "local");
words!(Shaper, "a shaper", Htb = "htb", Tbf = "tbf");
words!(Backend, "a lab backend", Auto = "auto", Kernel = "kernel", Emulator = "emulator");
words!(OnOff, "on or off", On = "on", Off = "off");

impl OnOff {
    pub fn from_bool(b: bool) -> OnOff {
        if b {
            OnOff::On
        } else {
            OnOff::Off
        }
    }
}

/// Everything that defines a lab. `Default` is the demo's link: 10 Mbit/s
/// both ways, fifo:1000 on the router, offloads off, cubic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabConfig {
    /// 6 hex digits; random when None.
    pub id: Option<String>,
    pub backend: Backend,
    pub placement: Placement,
    /// Client→server rate; None = no limit.
    pub rate_up: Option<Rate>,
    /// Server→client rate; None = no limit.
    pub rate_down: Option<Rate>,
    /// Bottleneck queue of both directions (unless overridden below); a
    /// [`QueueSpec::Kernel`] (`--qdisc`) applies to both.
    pub queue: QueueSpec,
    /// Upload (client→server) queue instead of `queue`.
    pub queue_up: Option<QueueSpec>,
    /// Download (server→client) queue instead of `queue`.
    pub queue_down: Option<QueueSpec>,
    /// Interface txqueuelen of the bottleneck devices (set with fifo:N = N).
    pub txqueuelen: Option<u32>,
    pub shaper: Shaper,
    pub offloads: OnOff,
    /// TCP congestion control: the namespaces' default and what the engine is asked for.
    pub cc: String,
    /// net.ipv4.tcp_wmem / tcp_rmem maximum in the host namespaces, bytes.
    pub tcp_mem_max: u64,
    /// ECN for TCP in the host namespaces (net.ipv4.tcp_ecn = 1); None = kernel default
    /// (2: accept ECN when the peer asks, do not ask).
    pub ecn: Option<OnOff>,
    /// One-way delay added in each direction (round trip + 2 x delay).
    pub delay: Option<Duration>,
    /// Per-direction delay variation (uniform +/- or normal; packet order
    /// kept).
    pub jitter: Option<crate::link::JitterSpec>,
    /// Per-direction random loss (Bernoulli or Gilbert-Elliott).
    pub loss: Option<crate::link::LossSpec>,
    pub trace_up: Option<PathBuf>,
    pub trace_down: Option<PathBuf>,
    /// Run tests over IPv6 (ULA addresses) instead of IPv4.
    pub ipv6: bool,
    pub port: u16,
    /// Queue sampling interval; None = the test's sample interval.
    #[serde(default)]
    pub queue_interval: Option<Duration>,
    /// The bloatlab binary to run inside the namespaces (default: this executable).
    pub exe: Option<PathBuf>,
    /// A home router between the client and the line (`bloatlab lab
    /// --tune`): the client's traffic passes the `home` namespace, whose
    /// `wan0` leads to the router that holds the bottleneck.
    #[serde(default)]
    pub home_router: bool,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            id: None,
            backend: Backend::Auto,
            placement: Placement::Router,
            rate_up: Some(Rate::mbit(10.0)),
            rate_down: Some(Rate::mbit(10.0)),
            queue: QueueSpec::Fifo { packets: 1000 },
            queue_up: None,
            queue_down: None,
            txqueuelen: None,
            shaper: Shaper::Htb,
            offloads: OnOff::Off,
            cc: "cubic".into(),
            tcp_mem_max: 16 * 1024 * 1024,
            ecn: None,
            delay: None,
            jitter: None,
            loss: None,
            trace_up: None,
            trace_down: None,
            ipv6: false,
            port: crate::config::DEFAULT_PORT,
            queue_interval: None,
            exe: None,
            home_router: false,
        }
    }
}

/// Whether a lab id is 6 lowercase hex digits.
/// The queues `bloatlab lab` compares when no option chooses one: a deep
/// FIFO and a short one.
pub const DEMO_QUEUES: [QueueSpec; 2] = [QueueSpec::Fifo { packets: 1000 }, QueueSpec::Fifo { packets: 10 }];

pub fn valid_lab_id(id: &str) -> bool {
    id.len() == 6 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl LabConfig {
    /// The test a lab runs unless the user says otherwise: one upload, 18 s (a
    /// cubic flow needs ~13-15 s to fill a 1000-packet FIFO at 10 Mbit/s: HyStart
    /// leaves slow start early), 2 s idle baseline, probes every 50 ms (in a
    /// packet-limited FIFO every probe takes a slot; at 10 ms to server and
    /// witness, probes would be ~20% of a 10 Mbit/s FIFO's packets), the lab's
    /// congestion control, and a pause between scenarios long enough for a full
    /// bottleneck to drain (a 1000-packet FIFO at 10 Mbit/s holds 1.2 s, more
    /// than the engine's default 1 s).
    pub fn test_defaults(&self) -> crate::TestConfig {
        let pause_ms = (self.longest_queue_delay_ms() * 1.5 + 500.0).clamp(1000.0, 60_000.0).ceil();
        crate::TestConfig {
            scenarios: vec![crate::Scenario::new(1, 0)],
            duration: Duration::from_secs(18),
            idle: Duration::from_secs(2),
            probe_interval: Duration::from_millis(50),
            pause: Duration::from_millis(pause_ms as u64),
            cc: self.cc.clone(),
            port: self.port,
            witness: Some("witness".into()),
            ..Default::default()
        }
    }

    /// The queue of one direction (upload = client→server).
    pub fn queue_of(&self, up: bool) -> &QueueSpec {
        let o = if up { &self.queue_up } else { &self.queue_down };
        o.as_ref().unwrap_or(&self.queue)
    }

    /// Both directions' queues, upload first.
    pub fn queues(&self) -> [&QueueSpec; 2] {
        [self.queue_of(true), self.queue_of(false)]
    }

    /// The kernel qdisc given with `--qdisc`, if any.
    pub fn kernel_qdisc(&self) -> Option<&QueueSpec> {
        matches!(self.queue, QueueSpec::Kernel { .. }).then_some(&self.queue)
    }

    /// Label of the bottleneck queue as tables show it: `fifo:100`, or
    /// `up-fifo:100+down-fifo:10` when the directions differ (also used in
    /// file names, so no spaces or slashes unless a --qdisc has them).
    pub fn queue_label(&self) -> String {
        if self.queue_of(true) == self.queue_of(false) {
            self.queue_of(true).label()
        } else {
            format!("up-{}+down-{}", self.queue_of(true).label(), self.queue_of(false).label())
        }
    }

    /// The backend this configuration runs on, assuming a kernel without
    /// AQMs or netem (see [`LabConfig::choose_backend`]).
    pub fn effective_backend(&self) -> Backend {
        self.choose_backend(&|_| false).0
    }

    /// The backend, and why, on a kernel that has the qdiscs `has` says it
    /// has: `Auto` runs in the kernel whatever the kernel offers (an AQM's
    /// qdisc, netem for delay/jitter/loss) and in the emulator what it does
    /// not (and rate traces, which only the emulator replays).
    pub fn choose_backend(&self, has: &dyn Fn(&str) -> bool) -> (Backend, String) {
        match self.backend {
            Backend::Auto => {
                let mut missing: Vec<String> = vec![];
                for q in self.queues() {
                    let kind = q.kernel_args().first().cloned().unwrap_or_default();
                    if q.needs_emulator() && !has(&kind) && !missing.contains(&kind) {
                        missing.push(kind);
                    }
                }
                if (self.delay.is_some() || self.jitter.is_some() || self.loss.is_some()) && !has("netem") && self.kernel_qdisc().is_none() {
                    missing.push("netem".into());
                }
                if self.trace_up.is_some() || self.trace_down.is_some() {
                    return (Backend::Emulator, "emulator: rate traces are replayed by the emulator".into());
                }
                if missing.is_empty() {
                    (Backend::Kernel, "kernel: this kernel has every qdisc the lab needs".into())
                } else {
                    (Backend::Emulator, format!("emulator: this kernel has no {}", missing.join(", ")))
                }
            }
            Backend::Kernel => (Backend::Kernel, "kernel: --backend kernel".into()),
            Backend::Emulator => (Backend::Emulator, "emulator: --backend emulator".into()),
        }
    }

    fn trace(&self, up: bool) -> &Option<PathBuf> {
        if up {
            &self.trace_up
        } else {
            &self.trace_down
        }
    }

    /// One direction's rate: fixed, unlimited or a loaded trace.
    pub fn rate_spec(&self, up: bool) -> Result<RateSpec, String> {
        match (self.trace(up), if up { self.rate_up } else { self.rate_down }) {
            (Some(p), _) => RateSpec::trace(p),
            (None, Some(r)) => Ok(RateSpec::Fixed { bps: r.bps }),
            (None, None) => Ok(RateSpec::Unlimited),
        }
    }

    /// The rate of one direction as tables show it: "10mbit", "none", or
    /// "trace NAME (12mbit mean)"; and its (mean) bits per second.
    pub fn rate_desc(&self, up: bool) -> (String, Option<f64>) {
        if let Some(p) = self.trace(up) {
            let mean = RateSpec::trace(p).ok().and_then(|r| r.mean_bps());
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let m = mean.map(|b| Rate { bps: b.round() as u64 }.to_string()).unwrap_or_else(|| "?".into());
            return (format!("trace {name} ({m} mean)"), mean);
        }
        let r = if up { self.rate_up } else { self.rate_down };
        (r.map(|r| r.to_string()).unwrap_or_else(|| "none".into()), r.map(|r| r.bps as f64))
    }

    /// Analytic delay of one direction's full bottleneck queue, ms
    /// ([`analytic_queue_delay_ms`]; a trace's mean rate).
    pub fn analytic_queue_delay_ms(&self, up: bool) -> Option<f64> {
        analytic_queue_delay_ms(self.queue_of(up), self.rate_desc(up).1?)
    }

    /// The larger of the two directions' analytic delays, ms (0 when neither has one).
    pub fn longest_queue_delay_ms(&self) -> f64 {
        [self.analytic_queue_delay_ms(true), self.analytic_queue_delay_ms(false)].into_iter().flatten().fold(0.0, f64::max)
    }

    /// True when `other` is the same lab but for its queues (the lab can then
    /// swap the bottleneck without building anew).
    pub fn same_but_queues(&self, other: &LabConfig) -> bool {
        let strip = |c: &LabConfig| LabConfig { queue: QueueSpec::Fifo { packets: 1 }, queue_up: None, queue_down: None, queue_interval: None, ..c.clone() };
        strip(self) == strip(other)
            && self.kernel_qdisc().is_none()
            && other.kernel_qdisc().is_none()
            && self.effective_backend() == other.effective_backend()
    }

    /// Check the combination before touching the system. Messages name the
    /// command-line options.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_on(&|_| false)
    }

    /// [`LabConfig::validate`] on a kernel that has the qdiscs `has` says it has.
    pub fn validate_on(&self, has: &dyn Fn(&str) -> bool) -> Result<(), String> {
        if let Some(id) = &self.id {
            if !valid_lab_id(id) {
                return Err(format!("lab id `{id}` must be 6 lowercase hex digits, e.g. 1a2b3c"));
            }
        }
        if self.rate_up.is_none() && self.rate_down.is_none() && self.kernel_qdisc().is_none() && self.trace_up.is_none() && self.trace_down.is_none() {
            return Err("with --rate none in both directions there is no bottleneck; give a rate or a --qdisc that shapes (e.g. \"cake bandwidth 10mbit\")".into());
        }
        if self.kernel_qdisc().is_some() && (self.queue_up.is_some() || self.queue_down.is_some()) {
            return Err("--qdisc replaces the bottleneck queue; do not combine it with --queue, --queue-up or --queue-down".into());
        }
        for (up, flag) in [(true, "--queue-up"), (false, "--queue-down")] {
            if matches!(self.queue_of(up), QueueSpec::Kernel { .. }) && self.kernel_qdisc().is_none() {
                return Err(format!("{flag} takes a queue (fifo:N, bfifo:BYTES, codel, ...); a kernel qdisc goes in --qdisc"));
            }
        }
        match self.choose_backend(has).0 {
            Backend::Kernel => {
                let mut why = Vec::new();
                for (q, flag) in [(self.queue_of(true), "--queue-up"), (self.queue_of(false), "--queue-down")] {
                    if q.needs_emulator() && !has(&q.kernel_args()[0]) {
                        let flag = if self.queue_of(true) == self.queue_of(false) { "--queue" } else { flag };
                        let w = format!("{flag} {}", q.label());
                        if !why.contains(&w) {
                            why.push(w);
                        }
                    }
                }
                if self.trace_up.is_some() || self.trace_down.is_some() {
                    why.push("--trace-up/--trace-down".into());
                }
                if !why.is_empty() {
                    return Err(format!(
                        "{} needs bloatlab's user-space link emulator (--backend emulator or auto); the kernel backend offers \
                         --queue fifo:N|bfifo:BYTES and --qdisc KIND (when this kernel has it)",
                        why.join(", ")
                    ));
                }
            }
            _ => {
                if self.placement == Placement::Local {
                    return Err("--bottleneck local needs the kernel backend (the emulator runs on the router); drop --bottleneck local or use --backend kernel with --queue fifo:N|bfifo:BYTES".into());
                }
                if self.kernel_qdisc().is_some() {
                    return Err("--qdisc installs a kernel qdisc and needs --backend kernel; the emulator's disciplines are chosen with --queue (fifo:N, bfifo:BYTES, drophead:N, codel, fq_codel, pie)".into());
                }
                if self.txqueuelen.is_some() {
                    return Err("--txqueuelen sets a kernel interface queue and needs --backend kernel; with the emulator use --queue fifo:N".into());
                }
                for up in [true, false] {
                    self.rate_spec(up).map_err(|e| format!("--trace-{}: {e}", if up { "up" } else { "down" }))?;
                }
            }
        }
        if self.cc.is_empty() {
            return Err("--cc needs a congestion control name (e.g. cubic)".into());
        }
        crate::config::check_cc(&self.cc).map_err(|e| format!("--cc: {e}"))?;
        if self.tcp_mem_max < 65536 {
            return Err("--tcp-mem-max must be at least 64k".into());
        }
        if self.jitter.is_some() && self.delay.is_none() {
            return Err("--jitter needs --delay (jitter is a variation around the delay)".into());
        }
        if let Some(d) = self.delay {
            if d > Duration::from_secs(60) {
                return Err("--delay over 60 s is not supported".into());
            }
        }
        if self.txqueuelen == Some(0) {
            return Err("--txqueuelen must be at least 1 packet".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_defaults_drain_the_queue_between_scenarios() {
        let c = crate::LabConfig::default();
        let t = c.test_defaults();
        // 1000 packets at 10 Mbit/s hold 1211.2 ms: the pause is 1.5 x that + 0.5 s
        assert_eq!(t.pause, Duration::from_millis(2317));
        assert_eq!((t.cc.as_str(), t.scenarios.len(), t.probe_interval), ("cubic", 1, Duration::from_millis(50)));
        let small = crate::LabConfig { queue: crate::QueueSpec::Fifo { packets: 10 }, ..Default::default() };
        assert_eq!(small.test_defaults().pause, Duration::from_secs(1));
        t.validate().unwrap();
    }

    #[test]
    fn backend_choice_labels_and_analytic() {
        let mut c = LabConfig::default();
        c.validate().unwrap();
        assert_eq!(c.effective_backend(), Backend::Kernel);
        assert!((c.analytic_queue_delay_ms(true).unwrap() - 1211.2).abs() < 1e-9);
        assert_eq!(c.queue_label(), "fifo:1000");
        c.delay = Some(Duration::from_millis(10));
        assert_eq!(c.effective_backend(), Backend::Emulator);
        c.backend = Backend::Kernel;
        assert_eq!(c.effective_backend(), Backend::Kernel);
        c.backend = Backend::Auto;
        c.delay = None;
        c.queue = QueueSpec::Bfifo { bytes: 65536 };
        c.rate_up = Some(Rate::mbit(1.0));
        assert!((c.analytic_queue_delay_ms(true).unwrap() - 524.288).abs() < 1e-9);
        c.queue_down = Some(QueueSpec::Fifo { packets: 10 });
        assert_eq!(c.queue_label(), "up-bfifo:65536+down-fifo:10");
        c.queue = QueueSpec::parse("codel").unwrap();
        assert_eq!(c.effective_backend(), Backend::Emulator);
        assert_eq!(c.analytic_queue_delay_ms(true), None);
        c.placement = Placement::Local;
        assert!(c.validate().unwrap_err().contains("kernel backend"));
    }

    #[test]
    fn kernel_qdiscs_and_reuse() {
        let mut c = LabConfig { queue: QueueSpec::kernel("cake bandwidth 10mbit").unwrap(), ..Default::default() };
        assert_eq!(c.queue_label(), "cake bandwidth 10mbit");
        assert_eq!(c.analytic_queue_delay_ms(true), None);
        c.validate().unwrap();
        c.delay = Some(Duration::from_millis(5));
        assert_eq!(c.effective_backend(), Backend::Kernel, "netem delay with a --qdisc stays in the kernel");
        c.backend = Backend::Emulator;
        assert!(c.validate().unwrap_err().contains("--qdisc"));
        let a = LabConfig::default();
        let b = LabConfig { queue: QueueSpec::Fifo { packets: 10 }, ..Default::default() };
        assert!(a.same_but_queues(&b));
        assert!(!a.same_but_queues(&LabConfig { cc: "reno".into(), ..Default::default() }));
        assert!(!a.same_but_queues(&LabConfig { queue: QueueSpec::parse("codel").unwrap(), ..Default::default() }));
    }

    #[test]
    fn refusals() {
        let bad = |c: LabConfig| c.validate().unwrap_err();
        assert!(bad(LabConfig { rate_up: None, rate_down: None, ..Default::default() }).contains("no bottleneck"));
        assert!(bad(LabConfig { jitter: Some(crate::link::JitterSpec::parse("5ms", false).unwrap()), ..Default::default() }).contains("--delay"));
        assert!(bad(LabConfig { id: Some("xyz".into()), ..Default::default() }).contains("hex"));
        assert!(bad(LabConfig { cc: "a b".into(), ..Default::default() }).contains("--cc"));
        assert!(bad(LabConfig { queue: QueueSpec::parse("fq_codel").unwrap(), backend: Backend::Kernel, ..Default::default() })
            .contains("--queue fq_codel"));
        assert!(bad(LabConfig { queue_down: Some(QueueSpec::parse("pie").unwrap()), backend: Backend::Kernel, ..Default::default() })
            .contains("--queue-down pie"));
        assert!(bad(LabConfig { trace_up: Some("/nonexistent".into()), ..Default::default() }).contains("cannot read trace"));
        assert_eq!("Router".parse::<Placement>().unwrap(), Placement::Router);
        assert!("sender".parse::<Placement>().unwrap_err().contains("router, local"));
        assert!(valid_lab_id("1a2b3c") && !valid_lab_id("1A2B3C") && !valid_lab_id("1a2b3"));
    }
}
