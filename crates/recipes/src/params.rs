//! The parameters a recipe or `bloatlab sweep` can set, where each one goes
//! (the lab's [`LabConfig`], the test's [`TestOverrides`], or the in-process
//! pacing experiment), and how its values are checked and spelled.
//!
//! The lab's and the test's parameters are the model's option tables
//! ([`LAB_OPTIONS`], [`TEST_OPTIONS`]): the same names (with `_` for `-`),
//! help and parsers as `bloatlab lab` and `bloatlab test`, so a recipe, a
//! sweep and the command lines accept and refuse the same values. Only the
//! pacing experiment's parameters are defined here.
use bloatlab_model::options::{Arity, Shape};
use bloatlab_model::units::{fmt_duration_ns, parse_duration_ns};
use bloatlab_model::{Configurable, LabConfig, LabOverrides, OptionDef, QueueSpec, Rate, TestConfig, TestOverrides, LAB_OPTIONS, TEST_OPTIONS};
use std::time::Duration;

/// What kind of experiment a recipe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecipeKind {
    /// Each point is one `bloatlab lab ... -- <test args>` run.
    Lab,
    /// Each point is one paced UDP run on loopback (no root needed).
    Pacing,
}

impl RecipeKind {
    pub fn parse(s: &str) -> Result<RecipeKind, String> {
        match s {
            "lab" => Ok(RecipeKind::Lab),
            "pacing" => Ok(RecipeKind::Pacing),
            o => Err(format!("unknown kind \"{o}\" (expected \"lab\" or \"pacing\")")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            RecipeKind::Lab => "lab",
            RecipeKind::Pacing => "pacing",
        }
    }
}

/// Where a parameter ends up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A `bloatlab lab` option, as the model defines it.
    Lab(&'static OptionDef<LabConfig>),
    /// A `bloatlab test` option inside the lab (after `--`), as the model
    /// defines it.
    Test(&'static OptionDef<TestConfig>),
    /// Consumed by the pacing experiment itself.
    Pacing,
}

/// How a pacing parameter's value is spelled (the lab's and the test's
/// are checked by their options' own parsers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Rate,
    Duration,
    /// Unsigned integer in [min, max].
    Int(u64, u64),
    Timer,
    /// Checked by the lab's or the test's option: a list's commas and a
    /// repeated option's occurrences are written `+` (commas separate the
    /// values of a sweep).
    Option,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: RecipeKind,
    pub target: Target,
    pub value: ValueKind,
    pub help: &'static str,
}

macro_rules! p {
    ($name:literal, $kind:ident, $target:ident, $value:expr, $help:literal) => {
        ParamSpec { name: $name, kind: RecipeKind::$kind, target: Target::$target, value: $value, help: $help }
    };
}

/// The pacing experiment's parameters (the lab's and the test's come
/// from the model's tables, see [`params`]).
const PACING_PARAMS: &[ParamSpec] = &[
    p!("ipi", Pacing, Pacing, ValueKind::Duration, "inter-packet interval t_ipi, e.g. 50us .. 50ms"),
    p!("timer", Pacing, Pacing, ValueKind::Timer, "timer strategy: precise | sleep | tick:HZ (emulated scheduler tick of 1/HZ) | ccid3:HZ[:PHASE] (emulated 2.6.20 CCID-3 sender)"),
    p!("payload", Pacing, Pacing, ValueKind::Int(32, 65000), "UDP payload bytes per packet (seed 004: 1424)"),
    p!("duration", Pacing, Pacing, ValueKind::Duration, "length of each paced run"),
    p!("line_rate", Pacing, Pacing, ValueKind::Rate, "NIC speed of the emulated senders (tick, ccid3): no packet leaves before the previous one has serialized"),
];

/// Every parameter a recipe or sweep may set: every link option of
/// `bloatlab lab`, then every measurement option of `bloatlab test` (`cc`
/// is the lab's, which sets the test's too), then the pacing experiment's.
pub fn params() -> &'static [ParamSpec] {
    static ALL: std::sync::OnceLock<Vec<ParamSpec>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        // once per process: the table's names live as long as it does
        let name = |o: String| -> &'static str { Box::leak(o.into_boxed_str()) };
        let mut v: Vec<ParamSpec> = LAB_OPTIONS
            .iter()
            .map(|o| ParamSpec { name: name(o.param_name()), kind: RecipeKind::Lab, target: Target::Lab(o), value: ValueKind::Option, help: name(o.help()) })
            .collect();
        for o in TEST_OPTIONS {
            if v.iter().any(|p| p.name == o.param_name()) {
                continue;
            }
            v.push(ParamSpec { name: name(o.param_name()), kind: RecipeKind::Lab, target: Target::Test(o), value: ValueKind::Option, help: name(o.help()) });
        }
        v.extend(PACING_PARAMS.iter().copied());
        v
    })
}

pub fn spec(kind: RecipeKind, name: &str) -> Option<&'static ParamSpec> {
    params().iter().find(|p| p.kind == kind && p.name == name)
}

pub fn names(kind: RecipeKind) -> Vec<&'static str> {
    params().iter().filter(|p| p.kind == kind).map(|p| p.name).collect()
}

/// Error for an unknown parameter name, with a suggestion.
pub fn unknown_param(kind: RecipeKind, name: &str) -> String {
    let known = names(kind);
    let close = known
        .iter()
        .find(|k| edit_distance(k, name) <= 2 || k.replace('_', "-") == name)
        .map(|k| format!(" (did you mean \"{k}\"?)"))
        .unwrap_or_default();
    format!(
        "unknown parameter \"{name}\"{close}; {} recipes know: {}",
        kind.name(),
        known.join(", ")
    )
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let c = if a[i - 1] == b[j - 1] { 0 } else { 1 };
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + c);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A parsed parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    Rate(Rate),
    Duration(Duration),
    Int(u64),
    /// A lab or test option's values, canonically spelled (several for a
    /// repeated option).
    Option(Vec<String>),
    Timer(TimerSpec),
}

/// A checked parameter value: its canonical spelling (`text`, in tables,
/// file names and the recipe written back), its number in base units where
/// it has one (bit/s, ns, packets, bytes; for plot axes), and the parsed value.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub text: String,
    pub num: Option<f64>,
    pub typed: Typed,
}

/// Parsed `timer` value of the pacing experiment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimerSpec {
    /// Absolute deadlines, sleep to shortly before each, then spin.
    Precise,
    /// Naive: sleep t_ipi after each send (relative sleeps, errors add up).
    Sleep,
    /// Emulated coarse scheduler tick of 1/hz seconds (see docs/recipes.md).
    Tick { hz: u32 },
    /// Emulated Linux 2.6.20 CCID-3 sender on a 1/hz tick; `phase` is where
    /// the first nominal send time falls inside a tick (0 .. 1).
    Ccid3 { hz: u32, phase: f64 },
}

/// Default phase of the ccid3 model (see docs/recipes.md).
pub const CCID3_DEFAULT_PHASE: f64 = 0.6;

fn parse_hz(s: &str, h: &str) -> Result<u32, String> {
    let hz: u32 = h
        .trim_end_matches("hz")
        .parse()
        .map_err(|_| format!("\"{s}\": needs a whole HZ value, e.g. tick:1000 or ccid3:250"))?;
    if !(10..=10_000).contains(&hz) {
        return Err(format!("\"{s}\": HZ must be between 10 and 10000"));
    }
    Ok(hz)
}

impl TimerSpec {
    pub fn parse(s: &str) -> Result<TimerSpec, String> {
        let t = s.trim().to_ascii_lowercase();
        let parts: Vec<&str> = t.split(':').collect();
        match parts.as_slice() {
            ["precise"] => Ok(TimerSpec::Precise),
            ["sleep"] => Ok(TimerSpec::Sleep),
            ["tick"] => Ok(TimerSpec::Tick { hz: 1000 }),
            ["tick", h] => Ok(TimerSpec::Tick { hz: parse_hz(s, h)? }),
            ["ccid3"] => Ok(TimerSpec::Ccid3 { hz: 1000, phase: CCID3_DEFAULT_PHASE }),
            ["ccid3", h] => Ok(TimerSpec::Ccid3 { hz: parse_hz(s, h)?, phase: CCID3_DEFAULT_PHASE }),
            ["ccid3", h, p] => {
                let phase: f64 = p.parse().map_err(|_| format!("\"{s}\": the phase must be a number in [0, 1)"))?;
                if !(0.0..1.0).contains(&phase) {
                    return Err(format!("\"{s}\": the phase must be in [0, 1)"));
                }
                Ok(TimerSpec::Ccid3 { hz: parse_hz(s, h)?, phase })
            }
            _ => Err(format!("\"{s}\" is not a timer strategy (precise, sleep, tick:HZ, ccid3:HZ[:PHASE])")),
        }
    }
    pub fn name(&self) -> String {
        match self {
            TimerSpec::Precise => "precise".into(),
            TimerSpec::Sleep => "sleep".into(),
            TimerSpec::Tick { hz } => format!("tick:{hz}"),
            TimerSpec::Ccid3 { hz, phase } => {
                if *phase == CCID3_DEFAULT_PHASE {
                    format!("ccid3:{hz}")
                } else {
                    format!("ccid3:{hz}:{phase}")
                }
            }
        }
    }
    /// Tick length of an emulated timer, ns.
    pub fn gran_ns(&self) -> Option<u64> {
        match self {
            TimerSpec::Tick { hz } | TimerSpec::Ccid3 { hz, .. } => Some(1_000_000_000 / *hz as u64),
            _ => None,
        }
    }
    /// Emulated timers send through the emulated line; real pacers do not.
    pub fn emulated(&self) -> bool {
        self.gran_ns().is_some()
    }
}

/// Check and parse a value for parameter `p` with the model's parsers.
pub fn check_value(p: &ParamSpec, raw: &str) -> Result<Value, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(format!("{}: empty value", p.name));
    }
    let v = |text: String, num: Option<f64>, typed: Typed| Value { text, num, typed };
    let r = match (p.value, p.target) {
        (ValueKind::Option, Target::Lab(o)) => option_value(o, raw),
        (ValueKind::Option, Target::Test(o)) => option_value(o, raw),
        (ValueKind::Option, Target::Pacing) => Err("not a lab or test option".into()),
        (ValueKind::Rate, _) => Rate::parse(raw).map(|r| v(bloatlab_model::units::fmt_rate_tc(r.bps), Some(r.bps as f64), Typed::Rate(r))),
        (ValueKind::Duration, _) => parse_duration_ns(raw).and_then(|ns| {
            if ns == 0 {
                Err("must be greater than zero".into())
            } else if ns > 1_000_000_000_000_000 {
                Err(format!("\"{raw}\" is out of range (at most 11 days)"))
            } else {
                Ok(v(fmt_duration_ns(ns), Some(ns as f64), Typed::Duration(Duration::from_nanos(ns))))
            }
        }),
        (ValueKind::Int(lo, hi), _) => raw
            .parse::<u64>()
            .map_err(|_| format!("\"{raw}\" is not a whole number"))
            .and_then(|n| {
                if n < lo || n > hi {
                    Err(format!("{n} is out of range ({lo} .. {hi})"))
                } else {
                    Ok(v(n.to_string(), Some(n as f64), Typed::Int(n)))
                }
            }),
        (ValueKind::Timer, _) => TimerSpec::parse(raw).map(|t| v(t.name(), None, Typed::Timer(t))),
    };
    r.map_err(|e| format!("{}: {e}", p.name))
}

/// A lab or test option's value in a recipe or sweep: `+` joins a list's
/// items (`1u0d+0u1d`) or a repeated option's occurrences (`router+server`),
/// since commas separate the values of a sweep. Its number (for plot axes)
/// in base units: bit/s, ns, bytes, packets (a fifo's) or bytes (a bfifo's).
fn option_value<T: Configurable>(o: &OptionDef<T>, raw: &str) -> Result<Value, String> {
    let items: Vec<String> = match o.arity {
        Arity::Repeated => raw.split('+').map(|x| o.canonical(x)).collect::<Result<_, _>>()?,
        _ => vec![o.canonical(&raw.replace('+', ","))?],
    };
    let text = items.join("+");
    let first = items.first().map(String::as_str).unwrap_or_default();
    let num = match o.shape {
        Shape::Duration => parse_duration_ns(first).ok().map(|ns| ns as f64),
        Shape::Rate => Rate::parse(first).ok().map(|r| r.bps as f64),
        Shape::Int | Shape::Bytes => first.parse::<f64>().ok(),
        Shape::Queue => QueueSpec::parse(first).ok().and_then(|q| match q {
            QueueSpec::Bfifo { bytes } => Some(bytes as f64),
            q => q.fifo_packets().map(f64::from),
        }),
        _ => None,
    };
    Ok(Value { text, num, typed: Typed::Option(items) })
}

/// Where a lab point's parameters go.
#[derive(Debug, Clone, Default)]
pub struct LabPoint {
    pub lab: LabConfig,
    pub test: TestOverrides,
}

/// Build a lab point from the lab's defaults and the point's parameter values.
pub fn lab_point(vals: &[(String, Value)]) -> Result<LabPoint, String> {
    let (mut lab, mut test) = (LabOverrides::default(), TestOverrides::default());
    for (k, v) in vals {
        let Typed::Option(items) = &v.typed else {
            return Err(format!("{k}: value {:?} does not fit a lab point", v.text));
        };
        match spec(RecipeKind::Lab, k).map(|p| p.target) {
            Some(Target::Lab(_)) => items.iter().try_for_each(|x| lab.add(k, x))?,
            Some(Target::Test(_)) => items.iter().try_for_each(|x| test.add(k, x))?,
            _ => return Err(unknown_param(RecipeKind::Lab, k)),
        }
    }
    // the command line's cross-option checks too
    let (cfg, _) = lab.resolve(LabConfig::default())?;
    Ok(LabPoint { lab: cfg, test })
}

/// The test options a sweep got after `--`, as parameter values (they are
/// written into the sweep's recipe as settings).
pub fn overrides_as_values(o: &TestOverrides) -> Result<Vec<(String, Value)>, String> {
    let mut out = vec![];
    for (opt, vals) in o.iter() {
        let name = opt.param_name();
        let p = spec(RecipeKind::Lab, &name).ok_or_else(|| format!("--{} has no recipe parameter", opt.long))?;
        out.push((name, check_value(p, &vals.join("+"))?));
    }
    Ok(out)
}

/// Render a TOML value as the raw text `check_value` expects.
pub fn toml_scalar_text(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "on".into() } else { "off".into() }),
        toml::Value::Array(a) => {
            // an array of scenario names is one value
            let mut parts = vec![];
            for x in a {
                match x {
                    toml::Value::String(s) => parts.push(s.clone()),
                    _ => return Err("expected a string, number or boolean".into()),
                }
            }
            Ok(parts.join("+"))
        }
        _ => Err("expected a string, number or boolean".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_values() {
        let p = spec(RecipeKind::Lab, "queue").unwrap();
        assert_eq!(check_value(p, "100").unwrap().text, "fifo:100");
        assert_eq!(check_value(p, "fifo:10").unwrap().num, Some(10.0));
        assert_eq!(check_value(p, "bfifo:150000").unwrap().text, "bfifo:150000");
        assert_eq!(check_value(p, "fq_codel").unwrap().text, "fq_codel");
        assert_eq!(check_value(p, "pfifo:5").unwrap().text, "fifo:5");
        assert_eq!(check_value(p, "bfifo:64k").unwrap().text, "bfifo:65536");
        assert!(check_value(p, "cake").is_err());
        assert_eq!(check_value(p, "codel:target=10ms,interval=100ms").unwrap().text, "codel:target=10ms");
        let b = spec(RecipeKind::Lab, "backend").unwrap();
        assert!(check_value(b, "emu").is_err());
        for bad in ["fifo:0", "fifo:ten", "fifo", "fi fo"] {
            assert!(check_value(p, bad).is_err(), "{bad}");
        }
        let q = spec(RecipeKind::Lab, "qdisc").unwrap();
        assert_eq!(check_value(q, "cake bandwidth 10mbit").unwrap().typed, Typed::Option(vec!["cake bandwidth 10mbit".into()]));
    }

    #[test]
    fn other_values() {
        let s = spec(RecipeKind::Lab, "scenarios").unwrap();
        assert_eq!(check_value(s, "1u0d+0U1D").unwrap().text, "1u0d,0u1d");
        assert!(check_value(s, "0u0d").is_err());
        assert!(check_value(s, "1up").is_err());
        assert!(check_value(s, "40u0d").unwrap_err().contains("at most 32"));
        let b = spec(RecipeKind::Lab, "bottleneck").unwrap();
        assert!(check_value(b, "sender").is_err());
        let t = spec(RecipeKind::Pacing, "timer").unwrap();
        assert_eq!(check_value(t, "tick:250").unwrap().text, "tick:250");
        assert_eq!(check_value(t, "tick").unwrap().text, "tick:1000");
        assert!(check_value(t, "tick:0").is_err());
        assert_eq!(check_value(t, "ccid3").unwrap().text, "ccid3:1000");
        assert_eq!(check_value(t, "ccid3:250:0.3").unwrap().text, "ccid3:250:0.3");
        assert!(check_value(t, "ccid3:250:1.5").is_err());
        assert!(unknown_param(RecipeKind::Lab, "qeue").contains("did you mean \"queue\""));
    }

    #[test]
    fn points_become_typed_configurations() {
        let val = |k: &str, raw: &str| (k.to_string(), check_value(spec(RecipeKind::Lab, k).unwrap(), raw).unwrap());
        let pt = lab_point(&[
            val("rate", "100mbit"),
            val("rate_down", "20mbit"),
            val("queue", "fifo:100"),
            val("cc", "bbr"),
            val("scenarios", "1u0d+0u1d"),
            val("duration", "10s"),
            val("tcp_mem_max", "32m"),
        ])
        .unwrap();
        assert_eq!(pt.lab.rate_up, Some(Rate::mbit(100.0)));
        assert_eq!(pt.lab.rate_down, Some(Rate::mbit(20.0)));
        assert_eq!(pt.lab.queue, QueueSpec::Fifo { packets: 100 });
        assert_eq!((pt.lab.cc.as_str(), pt.lab.tcp_mem_max), ("bbr", 32 << 20));
        assert_eq!(pt.test.args(), ["--scenarios", "1u0d,0u1d", "--duration", "10s"]);
        let mut o = TestOverrides::default();
        o.set("scenarios", "1u0d").unwrap();
        o.set("idle", "0").unwrap();
        o.set("ping", "router").unwrap();
        o.set("ping", "server").unwrap();
        let vals = overrides_as_values(&o).unwrap();
        assert_eq!(vals.iter().map(|(k, v)| format!("{k}={}", v.text)).collect::<Vec<_>>(), vec!["scenarios=1u0d", "idle=0s", "ping=router+server"]);
        assert_eq!(lab_point(&vals).unwrap().test, o);
    }
}
