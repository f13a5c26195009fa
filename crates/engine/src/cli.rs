//! clap arguments and entry points for `bloatlab server` and `bloatlab test`.
use crate::client::{self, Family, Live, Scenario, TestConfig};
use crate::server::{Server, ServerConfig};
use anyhow::{anyhow, bail, Context};
use bloatlab_results::TestResult;
use clap::Args;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Durations: "5s", "500ms", "1.5s", "2m", "100us", or a bare number of
/// seconds (the one parser of crates/units).
pub use bloatlab_units::parse_duration;

/// Parse "1u0d,0u1d,4u4d".
pub fn parse_scenarios(s: &str) -> Result<Vec<Scenario>, String> {
    s.split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| {
            let (u, d) = bloatlab_wire::parse_scenario(x)?;
            Ok(Scenario { name: format!("{u}u{d}d"), uploads: u, downloads: d })
        })
        .collect::<Result<Vec<_>, String>>()
        .and_then(|v| if v.is_empty() { Err("no scenarios given".into()) } else { Ok(v) })
}

/// Sizes like "65536", "64k", "4M" (binary multiples, as tc; crates/units).
pub use bloatlab_units::parse_bytes;

pub const DEFAULT_SCENARIOS: &str = "0u1d,1u0d,1u1d,0u4d,4u0d,4u4d,16u16d";

#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Address to listen on (repeatable); default [::] dual-stack, 0.0.0.0 if IPv6 is off.
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Vec<String>,
    /// TCP and UDP port.
    #[arg(long, short, default_value_t = bloatlab_wire::DEFAULT_PORT)]
    pub port: u16,
    /// Longest test a client may run.
    #[arg(long, default_value = "300s", value_parser = parse_duration)]
    pub max_duration: Duration,
    /// Most flows in one scenario of one test.
    #[arg(long, default_value_t = 64)]
    pub max_flows: u32,
    /// Most tests running at once.
    #[arg(long, default_value_t = 8)]
    pub max_tests: u32,
    /// How long a client may stay silent before its test is dropped.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// No per-test log lines.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct TestArgs {
    /// Server: host, host:port, [v6addr]:port.
    pub host: String,
    #[arg(long, short, default_value_t = bloatlab_wire::DEFAULT_PORT)]
    pub port: u16,
    /// Scenarios NuMd (N uploads, M downloads, 0..32 each), comma separated.
    #[arg(long, short, default_value = DEFAULT_SCENARIOS)]
    pub scenarios: String,
    /// Length of each scenario.
    #[arg(long, short, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Idle baseline before the first scenario (0 = none; added latency then unavailable).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub idle: Duration,
    /// Pause between scenarios so queues drain.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub pause: Duration,
    /// UDP probe interval (isochronous); also paces the TCP request/response probe.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub probe_interval: Duration,
    /// UDP probe payload size, bytes (48..1472).
    #[arg(long, default_value_t = 64)]
    pub probe_size: usize,
    /// Goodput and TCP_INFO sampling interval (<= 100 ms recommended).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub sample_interval: Duration,
    /// Congestion control for the load flows on both ends (e.g. cubic, bbr, reno); default: each host's default.
    #[arg(long, default_value = "")]
    pub cc: String,
    /// SO_SNDBUF/SO_RCVBUF for load flows on both ends (e.g. 4M); default: kernel autotuning.
    #[arg(long, value_parser = parse_bytes)]
    pub socket_buffer: Option<u64>,
    /// A second bloatlab server that only receives UDP probes (the "witness" whose latency the load harms).
    #[arg(long)]
    pub witness: Option<String>,
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    pub ipv6: bool,
    /// Write the full result (every raw sample) as JSON to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// No progress display (the summary table is still printed; use --json - to get only JSON on stdout).
    #[arg(long, short)]
    pub quiet: bool,
    /// After the test, write an HTML report (next to --json, or bloatlab-<time>.html).
    #[arg(long)]
    pub report: bool,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

pub fn run_server(a: ServerArgs) -> anyhow::Result<i32> {
    let mut binds = vec![];
    for b in &a.bind {
        let addr: SocketAddr = if let Ok(ip) = b.parse::<std::net::IpAddr>() {
            SocketAddr::new(ip, a.port)
        } else {
            b.parse().map_err(|_| anyhow!("--bind {b}: not an IP address (examples: 127.0.0.1, ::1, [::1]:9770)"))?
        };
        binds.push(addr);
    }
    if binds.is_empty() {
        binds.push(SocketAddr::from(([0u16; 8], a.port)));
    }
    if a.max_flows == 0 || a.max_tests == 0 {
        bail!("--max-flows and --max-tests must be at least 1");
    }
    let cfg = ServerConfig {
        binds,
        max_duration: a.max_duration,
        max_flows: a.max_flows,
        max_tests: a.max_tests,
        idle_timeout: a.idle_timeout,
        quiet: a.quiet,
    };
    let srv = Server::start(cfg).map_err(|e| anyhow!(e))?;
    let list: Vec<String> = srv.addrs.iter().map(|a| a.to_string()).collect();
    println!("bloatlab server listening on {} (tcp+udp)", list.join(", "));
    std::io::stdout().flush().ok();
    install_signal_handlers();
    while !INTERRUPTED.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !a.quiet {
        eprintln!("bloatlab server: stopping after {} tests", srv.tests_served());
    }
    Ok(0)
}

/// How the binary renders what the engine measured (the report crate supplies it).
pub type Render = dyn Fn(&TestResult) -> String;

/// Run `bloatlab test`. `table` renders the summary; returns the exit code and the
/// path of the JSON written, if any.
pub fn run_test(a: TestArgs, table: &Render) -> anyhow::Result<(i32, Option<TestResult>)> {
    let scenarios = parse_scenarios(&a.scenarios).map_err(|e| anyhow!("--scenarios: {e}"))?;
    if a.duration < Duration::from_millis(200) {
        bail!("--duration must be at least 200ms");
    }
    if a.probe_interval < Duration::from_micros(100) || a.probe_interval > Duration::from_secs(10) {
        bail!("--probe-interval must be between 100us and 10s");
    }
    if a.sample_interval < Duration::from_millis(10) || a.sample_interval > Duration::from_secs(1) {
        bail!("--sample-interval must be between 10ms and 1s");
    }
    let socket_buffer = a.socket_buffer.unwrap_or(0);
    if socket_buffer > i32::MAX as u64 / 2 {
        bail!("--socket-buffer is too large");
    }
    let cfg = TestConfig {
        server: a.host.clone(),
        port: a.port,
        family: if a.ipv4 { Family::V4 } else if a.ipv6 { Family::V6 } else { Family::Any },
        scenarios,
        duration: a.duration,
        idle: a.idle,
        pause: a.pause,
        probe_interval: a.probe_interval,
        probe_size: a.probe_size,
        sample_interval: a.sample_interval,
        cc: a.cc.clone(),
        socket_buffer: socket_buffer as u32,
        witness: a.witness.clone(),
        command: std::env::args().collect(),
        ..Default::default()
    };
    // Check the output file is writable before spending a minute measuring.
    if let Some(p) = a.json.as_deref().filter(|p| *p != "-") {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .with_context(|| format!("cannot write --json {p}"))?;
    }
    install_signal_handlers();
    let show = !a.quiet && std::io::stderr().is_terminal();
    let bar = show.then(|| {
        let b = indicatif::ProgressBar::new(1000);
        b.set_style(
            indicatif::ProgressStyle::with_template("{prefix:>8} [{bar:30}] {msg}")
                .unwrap()
                .progress_chars("=> "),
        );
        b
    });
    let mut live = |l: &Live| {
        if let Some(b) = &bar {
            b.set_prefix(l.phase.clone());
            let frac = (l.phase_index as f64 + (l.elapsed_s / l.phase_len_s.max(1e-9)).min(1.0)) / l.phases.max(1) as f64;
            b.set_position((frac * 1000.0) as u64);
            b.set_message(format!(
                "{}/{}  up {:8.2} Mbit/s  down {:8.2} Mbit/s  rtt {:8.2} ms",
                l.phase_index + 1,
                l.phases,
                l.up_bps / 1e6,
                l.down_bps / 1e6,
                l.rtt_ms
            ));
        }
    };
    let out = client::run(&cfg, &INTERRUPTED, &mut live);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let Some(result) = out.result else {
        bail!("{}", out.error.unwrap_or_else(|| "test failed".into()));
    };
    let json = serde_json::to_string_pretty(&result)?;
    let to_stdout = a.json.as_deref() == Some("-");
    if to_stdout {
        println!("{json}");
        eprint!("{}", table(&result));
    } else {
        print!("{}", table(&result));
        if let Some(p) = &a.json {
            std::fs::write(p, &json).with_context(|| format!("cannot write {p}"))?;
        }
    }
    let code = if out.interrupted {
        eprintln!("bloatlab: interrupted: wrote what was measured so far (marked incomplete)");
        130
    } else if let Some(e) = out.error {
        eprintln!("bloatlab: error: {e}");
        1
    } else {
        0
    };
    Ok((code, Some(result)))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("-1s").is_err());
    }
    #[test]
    fn scenarios_and_sizes() {
        let v = parse_scenarios("1u0d, 4u4d").unwrap();
        assert_eq!((v[1].uploads, v[1].downloads, v[1].name.as_str()), (4, 4, "4u4d"));
        assert!(parse_scenarios("").is_err());
        assert!(parse_scenarios("1u0d,40u0d").is_err());
        assert_eq!(parse_bytes("64k").unwrap(), 65536);
        assert_eq!(parse_bytes("4M").unwrap(), 4 << 20);
        assert!(parse_bytes("lots").is_err());
    }
}
