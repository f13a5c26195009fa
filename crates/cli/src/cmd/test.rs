//! `bloatlab test`: its command line becomes the model's [`TestConfig`]
//! here and nowhere else; then it measures (the engine), shows progress and
//! interval lines, runs the RPM stage and prints the summary. The options
//! after `bloatlab lab --` and `bloatlab sweep --` are parsed here too.
use crate::options::LoadArgs;
use anyhow::{anyhow, bail, Context, Result};
use bloatlab_engine::client::{self, Live};
use bloatlab_host::signals;
use bloatlab_model::fmt;
use bloatlab_model::units::parse_duration;
use bloatlab_model::{Family, Scenario, TestConfig, TestOverrides, DEFAULT_PORT};
use bloatlab_results::TestResult;
use clap::{Args, Parser};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct TestArgs {
    /// Server: host, host:port, [v6addr]:port.
    pub host: String,
    /// The server's TCP and UDP port (when HOST has none).
    #[arg(long, short, default_value_t = DEFAULT_PORT, value_parser = super::server_port)]
    pub port: u16,
    #[command(flatten)]
    pub load: LoadArgs,
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
    /// Print a line per direction every DURATION (iperf3 style) [default: 1s when
    /// stdout is not a terminal, none on a terminal; 0 = none].
    #[arg(long, short = 'i', value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// Write the text output (interval lines, summary table) to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub secret: super::ClientSecret,
}

impl TestArgs {
    /// The test this command line asks for, checked.
    pub fn config(&self) -> Result<TestConfig> {
        let mut cfg = TestConfig {
            server: self.host.clone(),
            port: self.port,
            family: if self.ipv4 {
                Family::V4
            } else if self.ipv6 {
                Family::V6
            } else {
                Family::Any
            },
            command: std::env::args().collect(),
            secret: self.secret.read()?,
            ..Default::default()
        };
        self.load.0.apply(&mut cfg).map_err(|e| anyhow!(e))?;
        cfg.validate().map_err(|e| anyhow!(e))?;
        Ok(cfg)
    }
}

#[derive(Parser, Debug)]
#[command(no_binary_name = true)]
struct PassThrough {
    #[command(flatten)]
    test: TestArgs,
}

/// Parse the `bloatlab test` options given after `--` to `bloatlab lab` or
/// `bloatlab sweep`: the load and probe options only (the lab sets the
/// server, port, address family and output itself).
pub fn parse_pass_through(args: &[String], who: &str) -> Result<TestOverrides> {
    if let Some(first) = args.first().filter(|a| !a.starts_with('-')) {
        bail!("after `--` come `bloatlab test` options (e.g. -- --scenarios 1u1d --duration 5s); the server address `{first}` is chosen by {who}");
    }
    let mut v = vec!["LAB-SERVER".to_string()];
    v.extend(args.iter().cloned());
    let p = PassThrough::try_parse_from(&v).map_err(|e| anyhow!("options after `--`: {}", e.to_string().trim_end()))?;
    let t = p.test;
    let owned = [
        (t.json.is_some(), "--json", "use the lab's own --json FILE"),
        (t.port != DEFAULT_PORT, "--port", "use the lab's own --port N"),
        (t.ipv4 || t.ipv6, "-4/-6", "use the lab's --ipv6"),
        (t.report, "--report", "write a report from the result JSON with `bloatlab report`"),
        (t.secret.secret_file.is_some(), "--secret-file", "the lab's own servers are open to its client only"),
    ];
    for (given, flag, instead) in owned {
        if given {
            bail!("`{flag}` after `--` is set by {who} itself; {instead}");
        }
    }
    Ok(t.load.0)
}

/// iperf3-style interval lines: per loaded direction, the bytes carried and
/// the rate over each interval of a scenario.
pub struct IntervalLog {
    every_s: f64,
    phase: String,
    /// (interval start s, up bytes, down bytes) at the last line.
    last: (f64, u64, u64),
    /// The next line is due at this elapsed time: lines keep to a grid of
    /// whole intervals (0-1, 1-2, ...), whichever update lands near each
    /// boundary closing it (updates follow the sampler, every 100 ms by
    /// default, give or take a few ms).
    next_s: f64,
    /// The newest update of the current phase, for its final partial interval.
    newest: Option<Live>,
}

impl IntervalLog {
    pub fn new(every: Duration) -> IntervalLog {
        IntervalLog { every_s: every.as_secs_f64(), phase: String::new(), last: (0.0, 0, 0), next_s: every.as_secs_f64(), newest: None }
    }

    /// Lines due at this live update (none during the idle baseline); a new
    /// phase first closes the previous one's partial interval.
    pub fn lines(&mut self, l: &Live) -> Vec<String> {
        let mut out = vec![];
        if l.phase != self.phase {
            out = self.flush();
            self.phase = l.phase.clone();
            self.last = (0.0, 0, 0);
            self.next_s = self.every_s;
        }
        let Ok(sc) = Scenario::parse(&l.phase) else { return out };
        self.newest = Some(l.clone());
        // An update up to 2% of an interval (at most 20 ms) early closes it.
        let reached = l.elapsed_s + (self.every_s * 0.02).min(0.02);
        if reached >= self.next_s {
            out.extend(self.emit(&sc, l));
            while self.next_s <= reached {
                self.next_s += self.every_s;
            }
        }
        out
    }

    /// The current phase's last, partial interval (at the end of a phase or the test).
    pub fn flush(&mut self) -> Vec<String> {
        match (self.newest.take(), Scenario::parse(&self.phase)) {
            (Some(l), Ok(sc)) if l.elapsed_s > self.last.0 + 0.05 => self.emit(&sc, &l),
            _ => vec![],
        }
    }

    fn emit(&mut self, sc: &Scenario, l: &Live) -> Vec<String> {
        let (t0, up0, down0) = self.last;
        let t1 = l.elapsed_s;
        let dt = (t1 - t0).max(1e-9);
        let mut out = vec![];
        for (n, dir, bytes) in [(sc.uploads, "up", l.up_bytes.saturating_sub(up0)), (sc.downloads, "down", l.down_bytes.saturating_sub(down0))] {
            if n > 0 {
                out.push(format!(
                    "[{:>6} {:<4}] {:>13} s  {:>9}  {:>12}  rtt {} ms",
                    sc.name(),
                    dir,
                    format!("{t0:.2}-{t1:.2}"),
                    fmt::human_bytes(bytes as f64),
                    fmt::rate(bytes as f64 * 8.0 / dt),
                    fmt::ms(l.rtt_ms)
                ));
            }
        }
        self.last = (t1, l.up_bytes, l.down_bytes);
        out
    }
}

/// Where `bloatlab test` writes its text: stdout, stderr (when stdout
/// carries JSON) or a log file.
pub struct TextOut(Box<dyn Write>);

impl TextOut {
    pub fn open(logfile: Option<&Path>, json_on_stdout: bool) -> Result<TextOut> {
        Ok(TextOut(match logfile {
            Some(p) => Box::new(std::fs::File::create(p).with_context(|| format!("cannot write --logfile {}", p.display()))?),
            None if json_on_stdout => Box::new(std::io::stderr()),
            None => Box::new(std::io::stdout()),
        }))
    }
    pub fn line(&mut self, s: &str) {
        let _ = writeln!(self.0, "{s}").and_then(|_| self.0.flush());
    }
    pub fn text(&mut self, s: &str) {
        let _ = self.0.write_all(s.as_bytes()).and_then(|_| self.0.flush());
    }
}

/// How the binary renders what the engine measured (the report crate supplies it).
pub type Render = dyn Fn(&TestResult) -> String;

/// Where and how `run_test` writes its text.
#[derive(Debug, Clone, Default)]
pub struct TextOptions {
    pub quiet: bool,
    /// Interval lines every this long (None = none).
    pub interval: Option<Duration>,
    pub logfile: Option<std::path::PathBuf>,
    /// Keep the live status in this file (JSON, replaced a few times a second): a lab's progress display reads it.
    pub progress: Option<std::path::PathBuf>,
}

impl TestArgs {
    /// The text options: interval lines by default when stdout is not a terminal.
    pub fn text_options(&self) -> TextOptions {
        let interval = match self.interval {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None if !std::io::stdout().is_terminal() || self.logfile.is_some() => Some(Duration::from_secs(1)),
            None => None,
        };
        TextOptions { quiet: self.quiet, interval, logfile: self.logfile.clone(), progress: None }
    }
}

/// `bloatlab test`: measure, print the summary table, optionally write the HTML report.
pub fn run(a: TestArgs) -> Result<i32> {
    let cfg = a.config()?;
    let (code, result) = run_test(&cfg, a.json.as_deref(), &a.text_options(), &bloatlab_report::summary_table)?;
    if let (true, Some(r)) = (a.report, result) {
        let files = bloatlab_report::files::write_test_report(&r, a.json.as_deref().map(std::path::Path::new))?;
        eprintln!("bloatlab: report written to {} ({} plots)", files.html.display(), files.images.len());
    }
    Ok(code)
}

/// Run one test: measure (with a progress bar on a terminal unless quiet;
/// interval lines when asked), print the summary, write the JSON. Returns
/// the exit code and the result.
pub fn run_test(cfg: &TestConfig, json: Option<&str>, text: &TextOptions, table: &Render) -> Result<(i32, Option<TestResult>)> {
    let quiet = text.quiet;
    if let Some(d) = text.interval {
        if d < Duration::from_millis(100) {
            bail!("--interval must be at least 100ms (or 0 for none)");
        }
    }
    let mut textout = TextOut::open(text.logfile.as_deref(), json == Some("-"))?;
    let mut intervals = text.interval.map(IntervalLog::new);
    let mut last_status = std::time::Instant::now() - Duration::from_secs(1);
    // Check the output file is writable before spending a minute measuring,
    // without leaving an empty file behind if the test then fails.
    if let Some(p) = json.filter(|p| *p != "-") {
        let existed = Path::new(p).exists();
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .with_context(|| format!("cannot write --json {p}"))?;
        if !existed {
            let _ = std::fs::remove_file(p);
        }
    }
    signals::install();
    let show = !quiet && std::io::stderr().is_terminal();
    let bar = show.then(|| {
        let b = indicatif::ProgressBar::new(1000);
        b.set_style(
            indicatif::ProgressStyle::with_template("{prefix:>8} [{bar:30}] {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        b
    });
    let mut live = |l: &Live| {
        if let Some(p) = &text.progress {
            if last_status.elapsed() >= Duration::from_millis(200) {
                last_status = std::time::Instant::now();
                // replace atomically: the reader never sees half a document
                let tmp = p.with_extension("tmp");
                if serde_json::to_vec(l).is_ok_and(|b| std::fs::write(&tmp, b).is_ok()) {
                    let _ = std::fs::rename(&tmp, p);
                }
            }
        }
        if let Some(iv) = intervals.as_mut() {
            for line in iv.lines(l) {
                match &bar {
                    Some(b) => b.suspend(|| textout.line(&line)),
                    None => textout.line(&line),
                }
            }
        }
        if let Some(b) = &bar {
            b.set_prefix(l.phase.clone());
            let frac = (l.phase_index as f64 + (l.elapsed_s / l.phase_len_s.max(1e-9)).min(1.0)) / l.phases.max(1) as f64;
            b.set_position((frac * 1000.0) as u64);
            b.set_message(format!(
                "{}/{}  up {:>12}  down {:>12}  rtt {:>6} ms",
                l.phase_index + 1,
                l.phases,
                fmt::rate(l.up_bps),
                fmt::rate(l.down_bps),
                fmt::ms(l.rtt_ms)
            ));
        }
    };
    let out = client::run(cfg, signals::flag(), &mut live, Some(&bloatlab_rpm::TestStages));
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(iv) = intervals.as_mut() {
        for line in iv.flush() {
            textout.line(&line);
        }
    }
    let client::Outcome { result, error, interrupted } = out;
    let Some(result) = result else {
        bail!("{}", error.unwrap_or_else(|| "test failed".into()));
    };
    let doc = serde_json::to_string_pretty(&result)?;
    if json == Some("-") {
        println!("{doc}");
    } else if let Some(p) = json {
        std::fs::write(p, &doc).with_context(|| format!("cannot write {p}"))?;
    }
    textout.text(&table(&result));
    let code = if interrupted {
        eprintln!("bloatlab: interrupted: wrote what was measured so far (marked incomplete)");
        130
    } else if let Some(e) = error {
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
    use bloatlab_model::test_option;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        t: TestArgs,
    }

    fn cfg(v: &[&str]) -> Result<TestConfig> {
        let mut a = vec!["test"];
        a.extend_from_slice(v);
        T::try_parse_from(a).map_err(|e| anyhow!("{e}"))?.t.config()
    }

    #[test]
    fn test_command_lines() {
        let c = cfg(&["h"]).unwrap();
        assert_eq!(c, TestConfig { server: "h".into(), command: c.command.clone(), ..Default::default() });
        let c = cfg(&["h", "-s", "1u0d, 4u4d", "-d", "1.5s", "--cc", "bbr", "--socket-buffer", "4M", "-6"]).unwrap();
        // one rule for durations: a bare number other than 0 needs its unit
        let e = cfg(&["h", "-d", "5"]).unwrap_err().to_string();
        assert!(e.contains("duration `5` needs a unit (`5s`? `5ms`?)"), "{e}");
        assert_eq!(c.scenarios, vec![Scenario::new(1, 0), Scenario::new(4, 4)]);
        assert_eq!((c.duration, c.cc.as_str(), c.socket_buffer, c.family), (Duration::from_millis(1500), "bbr", 4 << 20, Family::V6));
        // A ramp instead of a list: no fixed scenarios, 32 flows announced.
        let c = cfg(&["h", "-s", "auto-down"]).unwrap();
        assert_eq!(c.ramp, Some(bloatlab_model::Ramp { up: false, down: true, growth: 0.05, max_flows: 32 }));
        assert!(c.scenarios.is_empty());
        assert_eq!((c.max_flows(), c.max_scenarios()), (32, 6));
        assert!(cfg(&["h", "-s", "auto"]).unwrap().ramp.is_some_and(|r| r.up && r.down));
        // --port 0 is refused as HOST:0 is, before anything connects
        assert!(cfg(&["h", "--port", "0"]).unwrap_err().to_string().contains("`0` is not a port (1-65535)"));
        for (bad, why) in [
            (&["h", "-s", "1u0d,40u0d"][..], "at most 32"),
            (&["h", "-s", "sideways"], "or auto, auto-up, auto-down"),
            (&["h", "-s", ""], "no scenarios"),
            (&["h", "-d", "fast"], "not a duration"),
            (&["h", "-d", "10ms"], "at least 200ms"),
            (&["h", "--probe-size", "20"], "--probe-size"),
            (&["h", "--socket-buffer", "lots"], "byte size"),
        ] {
            let e = format!("{:#}", cfg(bad).unwrap_err());
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn interval_lines_per_direction_with_the_final_partial_one() {
        let mut iv = IntervalLog::new(Duration::from_secs(1));
        let live = |phase: &str, t: f64, up: u64, down: u64| Live {
            phase: phase.into(),
            elapsed_s: t,
            up_bytes: up,
            down_bytes: down,
            rtt_ms: 12.5,
            ..Default::default()
        };
        assert!(iv.lines(&live("idle", 0.5, 0, 0)).is_empty());
        assert!(iv.lines(&live("1u1d", 0.5, 500_000, 0)).is_empty());
        // 1.25 MB up and 2.5 MB down in the first second: 10 and 20 Mbit/s
        let l = iv.lines(&live("1u1d", 1.0, 1_250_000, 2_500_000));
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(l[0].contains("1u1d up") && l[0].contains("0.00-1.00 s") && l[0].contains("10.0 Mbit/s") && l[0].contains("rtt 12.5 ms"), "{}", l[0]);
        assert!(l[1].contains("1u1d down") && l[1].contains("20.0 Mbit/s"), "{}", l[1]);
        assert!(iv.lines(&live("1u1d", 1.5, 1_875_000, 2_500_000)).is_empty());
        // Lines keep to the grid: an update a few ms before 2 s closes 1-2.
        let l = iv.lines(&live("1u1d", 1.996, 2_495_000, 2_500_000));
        assert!(l[0].contains("1.00-2.00 s") && l[0].contains("10.0 Mbit/s"), "{l:?}");
        assert!(iv.lines(&live("1u1d", 2.1, 2_620_000, 2_500_000)).is_empty(), "2-3 is not due yet");
        let l = iv.lines(&live("1u1d", 2.5, 3_125_000, 2_500_000));
        assert!(l.is_empty(), "{l:?}");
        // the next phase closes the previous one's last half second
        let l = iv.lines(&live("0u1d", 0.05, 0, 0));
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(l[0].contains("2.00-2.50 s") && l[0].contains("10.0 Mbit/s"), "{}", l[0]);
        let l = iv.flush();
        assert!(l.is_empty(), "a 50 ms remainder is not an interval: {l:?}");
    }

    #[test]
    fn pass_through_options() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let o = parse_pass_through(&s(&["--scenarios", "1u1d", "--duration=5s", "--cc", "bbr"]), "bloatlab lab").unwrap();
        let get = |k: &str| o.get(test_option(k).unwrap()).map(|v| v.join(" "));
        assert_eq!(get("scenarios").as_deref(), Some("1u1d"));
        assert_eq!((get("duration").as_deref(), get("cc").as_deref(), get("idle")), (Some("5s"), Some("bbr"), None));
        for (bad, why) in [
            (&["--json", "x"][..], "--json"),
            (&["--port", "1"], "--port"),
            (&["-6"], "--ipv6"),
            (&["10.0.0.1"], "chosen by bloatlab lab"),
            (&["--scenarios", "0u0d"], "at least one flow"),
            (&["--colour"], "unexpected argument"),
        ] {
            let e = parse_pass_through(&s(bad), "bloatlab lab").unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}

