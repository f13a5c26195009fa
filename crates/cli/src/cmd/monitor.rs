//! `bloatlab monitor` (scheduled tests kept in a history) and `bloatlab
//! history` (what it kept). The monitor's options are the model's
//! [`MONITOR_OPTIONS`](bloatlab_model::MONITOR_OPTIONS): the flags here and
//! the keys of `--config FILE` are both read from that one table.
use crate::options::{MonitorDbArgs, OptionArgs};
use anyhow::{anyhow, bail, Context, Result};
use bloatlab_host::signals;
use bloatlab_model::options::{option, Arity, Overrides};
use bloatlab_model::{MonitorConfig, MonitorTarget};
use bloatlab_report::export::history::HistoryFormat;
use bloatlab_report::history::{compare_table, run_line, By};
use bloatlab_store::{Query, RunRow};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Args, Debug)]
pub struct MonitorArgs {
    /// Targets (the same as --target): HOST[:PORT] (a bloatlab server), https://HOST[:PORT]/.well-known/nq (an RPM server), ping:HOST, tcp:HOST:PORT or udp:HOST[:PORT] (latency only).
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    #[command(flatten)]
    pub opts: OptionArgs<MonitorConfig>,
    /// Read the options from a TOML file: the flags' names as keys (`every = "10m"`,
    /// `target = ["a.example:9770", "b.example"]`); flags given here win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print nothing but errors (each run is still kept).
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub secret: super::ClientSecret,
}

/// The line of `text` that sets `key` (1-based), for messages.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let alt = key.replace('_', "-");
    let alt2 = key.replace('-', "_");
    text.lines().position(|l| {
        let t = l.trim_start();
        [key, &alt, &alt2].iter().any(|k| t.strip_prefix(*k).is_some_and(|r| r.trim_start().starts_with('=')))
    })
    .map(|i| i + 1)
}

/// The options a config file sets, checked by the options' own parsers;
/// an error names the file and the line at fault.
pub fn read_config(path: &Path) -> Result<Overrides<MonitorConfig>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--config {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| anyhow!("--config {}: {e}", path.display()))?;
    let mut o = Overrides::<MonitorConfig>::default();
    for (key, value) in &table {
        let at = |e: String| {
            let line = line_of(&text, key).map(|l| format!(" line {l}")).unwrap_or_default();
            anyhow!("--config {}{line}: {e}", path.display())
        };
        let Some(def) = option::<MonitorConfig>(key) else {
            let names: Vec<&str> = bloatlab_model::MONITOR_OPTIONS.iter().map(|o| o.long).collect();
            return Err(at(format!("`{key}` is not an option of `bloatlab monitor` ({})", names.join(", "))));
        };
        let scalar = |v: &toml::Value| -> Result<String, String> {
            match v {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(i) => Ok(i.to_string()),
                toml::Value::Float(f) => Ok(f.to_string()),
                toml::Value::Boolean(b) => Ok(if *b { "on" } else { "off" }.into()),
                other => Err(format!("`{key}`: {} is not a value for --{}", other.type_str(), def.long)),
            }
        };
        match value {
            toml::Value::Array(vs) if def.arity == Arity::Repeated => {
                for v in vs {
                    o.add(key, &scalar(v).map_err(at)?).map_err(at)?;
                }
            }
            toml::Value::Array(_) => return Err(at(format!("`{key}` takes one value (only target takes a list)"))),
            v => o.set(key, &scalar(v).map_err(at)?).map_err(at)?,
        }
    }
    Ok(o)
}

/// The monitor this command line (and its config file) asks for, checked.
pub fn config(a: &MonitorArgs) -> Result<MonitorConfig> {
    let mut o = match &a.config {
        Some(p) => read_config(p)?,
        None => Overrides::default(),
    };
    let mut cli = a.opts.0.clone();
    for t in &a.targets {
        cli.add("target", t).map_err(|e| anyhow!(e))?;
    }
    // targets on the command line replace the file's; other flags win one by one
    o.merge(&cli);
    let mut cfg = MonitorConfig::default();
    o.apply(&mut cfg).map_err(|e| anyhow!(e))?;
    cfg.secret = a.secret.read()?;
    if let Some(p) = &cfg.ca_file {
        cfg.ca_pem = Some(std::fs::read_to_string(p).map_err(|e| anyhow!("--ca-file {}: {e}", p.display()))?);
    }
    cfg.check().map_err(|e| anyhow!(e))?;
    Ok(cfg)
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

pub fn run_monitor(a: MonitorArgs) -> Result<i32> {
    let cfg = config(&a)?;
    signals::install();
    let mut store = bloatlab_store::open(&cfg.db).map_err(|e| anyhow!("--db: {e}"))?;
    let quiet = a.quiet;
    let mut out = std::io::stdout();
    // a closed stdout (a pipe read and closed) must not end the monitor
    let mut say = |s: String| {
        if !quiet {
            let _ = writeln!(out, "{s}");
            let _ = out.flush();
        }
    };
    let fd = bloatlab_model::units::fmt_duration;
    let probed = cfg.targets.iter().filter(|t| t.latency_only()).count();
    let tested = cfg.targets.len() - probed;
    let mut what = vec![];
    if tested > 0 {
        what.push(format!("a loaded test each every {} (+ up to {} jitter)", fd(cfg.every), fd(cfg.jitter.of(cfg.every))));
    }
    if probed > 0 {
        what.push(format!("{probed} latency-only, a probe each every {}, kept per {} round", fd(cfg.probe_every), fd(cfg.round)));
    }
    say(format!("bloatlab monitor {}: {} target(s), {}; results in {}", bloatlab_monitor::monitor_id(&cfg), cfg.targets.len(), what.join("; "), cfg.db));
    let res = bloatlab_monitor::run(&cfg, &mut *store, signals::flag(), &mut |ev| {
        use bloatlab_monitor::Event;
        match ev {
            Event::Scheduled { target, first_in } => say(format!("{target}: first run in {}", bloatlab_model::fmt::hms(first_in.as_secs_f64()))),
            Event::Started { .. } => {}
            Event::Probing { target, every, first_round_in } => say(format!(
                "{target}: probed every {}, first round kept in {}",
                bloatlab_model::units::fmt_duration(every),
                bloatlab_model::fmt::hms(first_round_in.as_secs_f64())
            )),
            Event::RoundLeftOut { left_out: l } => {
                let t = |ns| bloatlab_model::units::UtcTime::from_unix_ns(ns).rfc3339_secs();
                say(format!(
                    "{} {} {} round(s) to {} not kept: {} probe(s) went out while a loaded test of this monitor ran, fewer than 2 outside one (they measure the load, not the line at rest)",
                    t(l.started_unix_ns),
                    l.target,
                    l.rounds,
                    t(l.ended_unix_ns),
                    l.probes
                ))
            }
            Event::Kept { run, id, retry_in } => {
                let mut line = run_line(&RunRow::of(run));
                if let Some(r) = retry_in {
                    line.push_str(&format!("; retry in {}", bloatlab_model::units::fmt_duration(r)));
                }
                say(format!("{line} [run {id}]"));
            }
            Event::StoreFailed { error, pending } => {
                eprintln!("bloatlab monitor: the database refused a write: {error}; {pending} run(s) held, written with the next ones")
            }
            Event::Flushed { count } => say(format!("{count} held run(s) written")),
            Event::Pruned { count } => say(format!("{count} run(s) older than --retention deleted")),
            Event::Metrics { url } => say(format!("Prometheus metrics at {url}")),
            Event::Cost { target, bytes, per_month } => say(format!(
                "{target}: a run moved {}; at --every {} that is about {} a month",
                bloatlab_model::fmt::human_bytes(bytes as f64),
                bloatlab_model::units::fmt_duration(cfg.every),
                bloatlab_model::fmt::human_bytes(per_month)
            )),
            Event::Budget { used, budget } => say(format!(
                "data budget {}: {} used this {}",
                budget.name(),
                bloatlab_model::fmt::human_bytes(used as f64),
                budget.period_name()
            )),
            Event::Skipped { target, used, estimate, budget } => say(format!(
                "{target}: run skipped: {} used this {} and a run moves about {} (--budget {})",
                bloatlab_model::fmt::human_bytes(used as f64),
                budget.period_name(),
                bloatlab_model::fmt::human_bytes(estimate as f64),
                budget.name()
            )),
            Event::Alert { alert, queued } => match queued {
                Some(Err(e)) => {
                    say(format!("ALERT {}", alert.text));
                    eprintln!("bloatlab monitor: webhook: {e}");
                }
                _ => say(format!("ALERT {}", alert.text)),
            },
            Event::Delivered { alert, error } => match error {
                None => say(format!("webhook: the {} alert for {} delivered", alert.event.name(), alert.target)),
                Some(e) => eprintln!("bloatlab monitor: webhook: the {} alert for {} was not delivered: {e}", alert.event.name(), alert.target),
            },
        }
    });
    let sig = signals::pending();
    match res {
        Ok(n) => {
            if sig != 0 {
                say(format!("stopped by {}: {n} run(s) kept", signals::name(sig)));
            }
            Ok(0)
        }
        Err(e) => bail!(e),
    }
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub db: MonitorDbArgs,
    /// Only this target, as the monitor names it (host:port, the RPM URL, ping:HOST, tcp:HOST:PORT, udp:HOST:PORT).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub target: Option<String>,
    /// Runs since: a duration back from now (12h, 7d) or a UTC date or time (2026-11-20, 2026-11-20T08:00Z).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Runs before: a duration back from now or a UTC date or time.
    #[arg(long, value_name = "WHEN")]
    pub until: Option<String>,
    /// A row per run, or per target and hour or day (medians, worst added latency and grade).
    #[arg(long, default_value = "run", value_parser = crate::choice::<By>(By::WORDS))]
    pub by: By,
    /// CSV instead of a table (numbers in ms and bits/s).
    #[arg(long)]
    pub csv: bool,
    /// Each target's runs before WHEN and from WHEN on, side by side (a change
    /// made then: SQM on, new firmware): a UTC date or time, or a duration back from now.
    #[arg(long, value_name = "WHEN", conflicts_with_all = ["csv", "by"])]
    pub compare: Option<String>,
    /// Also write a single-file HTML page: latency over time (smokeping-style
    /// bands with --by hour|day), added latency over the grade's zones, goodput.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["csv", "compare"])]
    pub html: Option<PathBuf>,
}

/// `WHEN`: a duration back from `now` or a UTC date/time, as Unix ns.
fn when(flag: &str, s: &str, now: u64) -> Result<u64> {
    if let Ok(d) = bloatlab_model::units::parse_duration(s) {
        return Ok(now.saturating_sub(d.as_nanos() as u64));
    }
    bloatlab_model::units::parse_utc_time(s).map_err(|e| anyhow!("--{flag}: {e}; or a duration back from now (12h, 7d)"))
}

pub fn run_history(a: HistoryArgs) -> Result<i32> {
    let now = now_ns();
    let target = a.target.as_deref().map(MonitorTarget::parse).transpose().map_err(|e| anyhow!("--target: {e}"))?.map(|t| t.name());
    let q = Query {
        target,
        since_unix_ns: a.since.as_deref().map(|s| when("since", s, now)).transpose()?,
        until_unix_ns: a.until.as_deref().map(|s| when("until", s, now)).transpose()?,
    };
    let mut c = MonitorConfig::default();
    a.db.0.apply(&mut c).map_err(|e| anyhow!(e))?;
    let mut store = bloatlab_store::open_read(&c.db).map_err(|e| anyhow!("--db: {e}"))?;
    let rows = store.rows(&q).map_err(|e| anyhow!("--db: {e}"))?;
    if rows.is_empty() {
        if let Some(t) = &q.target {
            // a target named otherwise (its port left off, another spelling):
            // the targets the database does know
            let all = store.rows(&Query { target: None, ..q.clone() }).map_err(|e| anyhow!("--db: {e}"))?;
            let mut known: Vec<&str> = all.iter().map(|r| r.target.as_str()).collect();
            known.sort_unstable();
            known.dedup();
            if !known.is_empty() {
                bail!("--target {t}: no runs of it in this range; the database has runs of {}", known.join(", "));
            }
        }
    }
    let what = format!(
        "{} run(s) from {}{}; {}",
        rows.len(),
        c.db,
        q.target.as_deref().map(|t| format!(", target {t}")).unwrap_or_default(),
        match a.by {
            By::Run => "a point per run".to_string(),
            b => format!("per {}", b.name()),
        }
    );
    let text = match &a.compare {
        Some(w) => compare_table(&rows, when("compare", w, now)?),
        None => (if a.csv { HistoryFormat::Csv } else { HistoryFormat::Text }).exporter().render(&rows, a.by, &what)?,
    };
    let mut out = std::io::stdout();
    let _ = out.write_all(text.as_bytes());
    if let Some(path) = &a.html {
        let html = HistoryFormat::Html.exporter().render(&rows, a.by, &what)?;
        std::fs::write(path, html).with_context(|| format!("--html {}", path.display()))?;
        let _ = writeln!(out, "wrote {}", path.display());
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    //! Every monitor option, through both front ends (the command line and
    //! the config file), reaches the same configuration.
    use super::*;
    use crate::{Cli, Cmd};
    use bloatlab_model::MONITOR_OPTIONS;
    use clap::Parser;

    fn from_flags(args: &[String]) -> MonitorConfig {
        let mut v = vec!["bloatlab".to_string(), "monitor".into(), "h".into()];
        v.extend_from_slice(args);
        let Cmd::Monitor(a) = Cli::try_parse_from(&v).unwrap_or_else(|e| panic!("{v:?}: {e}")).cmd else { unreachable!() };
        config(&a).unwrap()
    }

    fn from_file(key: &str, value: &str) -> MonitorConfig {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.toml");
        // a repeated option as a list, the others as a string; the file's own target too
        let v = if key == "target" { format!("[{value:?}]") } else { format!("{value:?}") };
        let extra = if key == "target" { "" } else { "target = [\"h\"]\n" };
        std::fs::write(&p, format!("{extra}{} = {v}\n", key.replace('-', "_"))).unwrap();
        let Cmd::Monitor(a) = Cli::try_parse_from(["bloatlab", "monitor", "--config", p.to_str().unwrap()]).unwrap().cmd else { unreachable!() };
        config(&a).unwrap()
    }

    #[test]
    fn every_option_is_the_same_from_flags_and_from_the_config_file() {
        // a file an option reads at the edge (--ca-file) exists for the walk
        let dir = tempfile::tempdir().unwrap();
        for o in MONITOR_OPTIONS {
            for &e in o.examples {
                let real;
                let e = if o.long == "ca-file" {
                    real = dir.path().join(e).display().to_string();
                    std::fs::write(&real, "").unwrap();
                    real.as_str()
                } else {
                    e
                };
                let flags = from_flags(&o.args(e));
                let file = from_file(o.long, e);
                assert!(o.get(&flags).contains(&e.to_string()), "--{} {e}: {:?}", o.long, o.get(&flags));
                assert!(o.get(&file).contains(&e.to_string()), "{} = {e} in a file: {:?}", o.long, o.get(&file));
            }
        }
    }
}
