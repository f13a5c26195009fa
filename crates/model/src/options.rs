//! Every measurement option of `bloatlab test`, defined once: its name,
//! help, value spelling and how it reads and writes the [`TestConfig`].
//!
//! Every front end derives from [`TEST_OPTIONS`]: the `bloatlab test`
//! command line, the options after `bloatlab lab --` and `bloatlab sweep --`
//! (the binary builds its clap arguments from this table, so completions and
//! man pages follow), the parameters of `bloatlab sweep --set` and of recipe
//! files, and the dry run that prints what a point will run. An option added
//! here appears in all of them; the tests in crates/cli walk this table
//! through every front end to the engine's configuration.
//!
//! A value is checked once, where it enters (a command line, a recipe
//! file), and kept in its canonical spelling in [`TestOverrides`], which
//! layers the user's options over a front end's defaults (the lab's differ
//! from `bloatlab test`'s).
use crate::config::{check_cc, TestConfig, UDP_PAYLOAD_DEFAULT};
use crate::dscp::Dscp;
use crate::ping::PingTarget;
use crate::rpm::RpmDirection;
use crate::scenario::{list_name, Ramp, Scenario};
use crate::units::{fmt_duration, fmt_rate_tc, parse_bytes, parse_duration};
use crate::Rate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How an option takes its value on a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// `--rx-copy`: on when given (`on`/`off` in a recipe or sweep).
    Switch,
    /// `--duration 5s`.
    Value,
    /// `--rpm` alone means `missing`; `--rpm=upload` gives a value.
    OptionalValue { missing: &'static str },
    /// `--ping A --ping B`: each occurrence adds one (joined with `+` in a
    /// recipe or sweep value).
    Repeated,
}

/// What a value looks like: for completions and plot axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Duration,
    Rate,
    Bytes,
    Int,
    /// A comma-separated list (joined with `+` in a sweep value, where commas
    /// separate the values swept).
    List,
    /// A host name or address.
    Host,
    /// Any other word.
    Word,
    OnOff,
}

/// One measurement option of `bloatlab test`.
#[derive(Clone, Copy)]
pub struct TestOption {
    /// The long flag without dashes (`probe-interval`); recipes and sweeps
    /// spell it with `_` (`probe_interval`).
    pub long: &'static str,
    pub short: Option<char>,
    pub value_name: &'static str,
    /// The help text, ending with the defaults (`[default: 5s; lab: 18s]`).
    pub help: &'static str,
    pub arity: Arity,
    pub shape: Shape,
    /// Fixed words the value is one of (for completions), if any.
    pub choices: &'static [&'static str],
    /// Another option this one needs (`udp-size` needs `udp`).
    pub requires: Option<&'static str>,
    /// Values other than `bloatlab test`'s defaults, in the canonical
    /// spelling: the tests carry each through every front end.
    pub examples: &'static [&'static str],
    /// Parse one value (of a [`Arity::Repeated`] option: one occurrence)
    /// and store it in the configuration.
    set: fn(&mut TestConfig, &str) -> Result<(), String>,
    /// The configuration's value in the canonical spelling, one string per
    /// occurrence; empty when the option is off or unset (`--rpm` not run,
    /// no `--ping`, no `--witness`, `--rx-copy` off).
    get: fn(&TestConfig) -> Vec<String>,
}

impl std::fmt::Debug for TestOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--{}", self.long)
    }
}

impl PartialEq for TestOption {
    fn eq(&self, o: &TestOption) -> bool {
        self.long == o.long
    }
}

impl Eq for TestOption {}

impl TestOption {
    /// The name in recipes and sweeps: `probe_interval`.
    pub fn param_name(&self) -> String {
        self.long.replace('-', "_")
    }

    /// Set this option's value in `t` (one occurrence of a repeated option).
    pub fn set(&self, t: &mut TestConfig, raw: &str) -> Result<(), String> {
        (self.set)(t, raw.trim()).map_err(|e| if e.starts_with("--") { e } else { format!("--{} {raw:?}: {e}", self.long) })
    }

    /// `t`'s value of this option, canonically spelled (empty = off / unset).
    pub fn get(&self, t: &TestConfig) -> Vec<String> {
        (self.get)(t)
    }

    /// Check one value and spell it canonically (`5` -> `5s`, `1U0D` -> `1u0d`).
    pub fn canonical(&self, raw: &str) -> Result<String, String> {
        // (a repeated option's default is no occurrence: the last is this one)
        let mut t = TestConfig::default();
        self.set(&mut t, raw)?;
        let v = (self.get)(&t);
        Ok(match v.len() {
            0 => "off".into(),
            _ => v.last().cloned().unwrap_or_default(),
        })
    }

    /// This option with `value` as command-line arguments.
    pub fn args(&self, value: &str) -> Vec<String> {
        match self.arity {
            Arity::Switch if value == "on" => vec![format!("--{}", self.long)],
            Arity::Switch => vec![],
            Arity::OptionalValue { missing } if value == missing => vec![format!("--{}", self.long)],
            Arity::OptionalValue { .. } => vec![format!("--{}={value}", self.long)],
            Arity::Value | Arity::Repeated => vec![format!("--{}", self.long), value.to_string()],
        }
    }
}

/// The option named `long` (`probe-interval`) or, as recipes spell it, `probe_interval`.
pub fn test_option(name: &str) -> Option<&'static TestOption> {
    let long = name.replace('_', "-");
    TEST_OPTIONS.iter().find(|o| o.long == long)
}

fn dur(s: &str) -> Result<std::time::Duration, String> {
    parse_duration(s)
}

fn one<T: ToString>(v: T) -> Vec<String> {
    vec![v.to_string()]
}

fn on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err("expected on or off".into()),
    }
}

fn parse_socket_buffer(s: &str) -> Result<u32, String> {
    let b = parse_bytes(s)?;
    if b > (i32::MAX / 2) as u64 {
        return Err(format!("`{s}` is too large (at most 1 GiB)"));
    }
    Ok(b as u32)
}

/// Every measurement option of `bloatlab test`, in `--help` order.
pub static TEST_OPTIONS: &[TestOption] = &[
    TestOption {
        long: "scenarios",
        short: Some('s'),
        value_name: "NuMd,...|auto",
        help: "Scenarios NuMd (N uploads, M downloads, 0..32 each), comma separated; or auto (auto-up, \
               auto-down): per direction 1, 2, 4, ... flows until doubling them adds less than 5% goodput \
               [default: 0u1d,1u0d,1u1d,0u4d,4u0d,4u4d,16u16d; lab: 1u0d]",
        arity: Arity::Value,
        shape: Shape::List,
        choices: &[],
        requires: None,
        examples: &["auto", "1u1d,4u0d"],
        set: |t, s| {
            match Ramp::parse(s) {
                Some(r) => {
                    t.ramp = Some(r);
                    t.scenarios = vec![];
                }
                None => {
                    t.scenarios = Scenario::parse_list(s).map_err(|e| format!("{e}; or auto, auto-up, auto-down to ramp the flows"))?;
                    t.ramp = None;
                }
            }
            Ok(())
        },
        get: |t| match &t.ramp {
            Some(r) => one(r.name()),
            None => one(list_name(&t.scenarios)),
        },
    },
    TestOption {
        long: "duration",
        short: Some('d'),
        value_name: "DURATION",
        help: "Length of each scenario [default: 5s; lab: 18s]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        examples: &["7s"],
        set: |t, s| Ok(t.duration = dur(s)?),
        get: |t| one(fmt_duration(t.duration)),
    },
    TestOption {
        long: "idle",
        short: None,
        value_name: "DURATION",
        help: "Idle baseline before the first scenario (0 = none; added latency then unavailable) [default: 2s]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        examples: &["0s", "3.5s"],
        set: |t, s| Ok(t.idle = dur(s)?),
        get: |t| one(fmt_duration(t.idle)),
    },
    TestOption {
        long: "pause",
        short: None,
        value_name: "DURATION",
        help: "Pause between scenarios so queues drain [default: 1s; lab: 1.5 x the full queue's delay + 0.5 s]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        examples: &["4s"],
        set: |t, s| Ok(t.pause = dur(s)?),
        get: |t| one(fmt_duration(t.pause)),
    },
    TestOption {
        long: "probe-interval",
        short: None,
        value_name: "DURATION",
        help: "UDP probe interval (isochronous); also paces the TCP request/response probe [default: 10ms; lab: 50ms]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        examples: &["20ms"],
        set: |t, s| Ok(t.probe_interval = dur(s)?),
        get: |t| one(fmt_duration(t.probe_interval)),
    },
    TestOption {
        long: "probe-size",
        short: None,
        value_name: "BYTES",
        help: "UDP probe payload size, bytes (48..1472) [default: 64]",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        examples: &["200"],
        set: |t, s| Ok(t.probe_size = s.parse().map_err(|_| "not a whole number of bytes".to_string())?),
        get: |t| one(t.probe_size),
    },
    TestOption {
        long: "sample-interval",
        short: None,
        value_name: "DURATION",
        help: "Goodput and TCP_INFO sampling interval (10ms..1s) [default: 100ms]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        examples: &["50ms"],
        set: |t, s| Ok(t.sample_interval = dur(s)?),
        get: |t| one(fmt_duration(t.sample_interval)),
    },
    TestOption {
        long: "cc",
        short: None,
        value_name: "NAME",
        help: "Congestion control of the load flows on both ends (e.g. cubic, bbr, reno) [default: each host's; lab: --cc]",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        examples: &["reno"],
        set: |t, s| {
            check_cc(s)?;
            if s.is_empty() {
                return Err("an empty name".into());
            }
            t.cc = s.to_string();
            Ok(())
        },
        get: |t| if t.cc.is_empty() { vec![] } else { one(&t.cc) },
    },
    TestOption {
        long: "socket-buffer",
        short: None,
        value_name: "SIZE",
        help: "SO_SNDBUF/SO_RCVBUF of the load flows on both ends (e.g. 4M) [default: kernel autotuning]",
        arity: Arity::Value,
        shape: Shape::Bytes,
        choices: &[],
        requires: None,
        examples: &["4194304"],
        set: |t, s| Ok(t.socket_buffer = parse_socket_buffer(s)?),
        get: |t| if t.socket_buffer == 0 { vec![] } else { one(t.socket_buffer) },
    },
    TestOption {
        long: "rx-copy",
        short: None,
        value_name: "on|off",
        help: "TCP load receivers (both ends) copy the data into user space, as an application would \
               [default: the kernel discards it unread (MSG_TRUNC, iperf3's --skip-rx-copy), so a fast link \
               is not limited by the receiver's memory copy]",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &["on", "off"],
        requires: None,
        examples: &["on"],
        set: |t, s| Ok(t.rx_copy = on_off(s)?),
        get: |t| if t.rx_copy { one("on") } else { vec![] },
    },
    TestOption {
        long: "dscp",
        short: None,
        value_name: "CLASS[,CLASS...]",
        help: "DSCP classes of the load flows, taken in turn by each direction's flows (e.g. BE,BK,CS5,EF as \
               flent's RRUL; names or 0..63) [default: unmarked]",
        arity: Arity::Value,
        shape: Shape::List,
        choices: &[],
        requires: None,
        examples: &["BE,BK,CS5,EF"],
        set: |t, s| Ok(t.dscp = Dscp::parse_list(s)?),
        get: |t| if t.dscp.is_empty() { vec![] } else { one(t.dscp.iter().map(Dscp::to_string).collect::<Vec<_>>().join(",")) },
    },
    TestOption {
        long: "udp",
        short: None,
        value_name: "RATE",
        help: "UDP load instead of bulk TCP: every load flow sends datagrams at RATE (iperf3's -u -b); loss, \
               reordering and jitter are reported per flow",
        arity: Arity::Value,
        shape: Shape::Rate,
        choices: &[],
        requires: None,
        examples: &["5mbit"],
        set: |t, s| Ok(t.udp_rate_bps = Some(Rate::parse(s)?.bps)),
        get: |t| t.udp_rate_bps.map(fmt_rate_tc).into_iter().collect(),
    },
    TestOption {
        long: "udp-size",
        short: None,
        value_name: "BYTES",
        help: "UDP payload of each load datagram, bytes (64..1472; with --udp) [default: 1400]",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: Some("udp"),
        examples: &["1000"],
        set: |t, s| Ok(t.udp_size = s.parse().map_err(|_| "not a whole number of bytes".to_string())?),
        get: |t| if t.udp_size == UDP_PAYLOAD_DEFAULT { vec![] } else { one(t.udp_size) },
    },
    TestOption {
        long: "ping",
        short: None,
        value_name: "HOST",
        help: "Also ping HOST (ICMP echo; repeatable) while the test runs: a gateway, any host without a \
               bloatlab server (unprivileged ping sockets where net.ipv4.ping_group_range allows, else raw \
               sockets as root); in a lab also a role: router, server, witness, client",
        arity: Arity::Repeated,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        examples: &["192.0.2.1"],
        set: |t, s| Ok(t.pings.push(PingTarget::icmp(s)?)),
        get: |t| t.pings.iter().filter(|p| p.kind == crate::PingKind::Icmp).map(|p| p.host.clone()).collect(),
    },
    TestOption {
        long: "tcp-ping",
        short: None,
        value_name: "HOST:PORT",
        help: "Also time TCP connects to HOST:PORT (repeatable) while the test runs",
        arity: Arity::Repeated,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        examples: &["192.0.2.2:443"],
        set: |t, s| Ok(t.pings.push(PingTarget::tcp(s)?)),
        get: |t| t.pings.iter().filter(|p| p.kind == crate::PingKind::Tcp).map(|p| p.label()["tcp ".len()..].to_string()).collect(),
    },
    TestOption {
        long: "ping-interval",
        short: None,
        value_name: "DURATION",
        help: "Interval of each --ping / --tcp-ping target (10ms..10s) [default: 100ms]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        examples: &["250ms"],
        set: |t, s| Ok(t.ping_interval = dur(s)?),
        get: |t| one(fmt_duration(t.ping_interval)),
    },
    TestOption {
        long: "rpm",
        short: None,
        value_name: "download|upload|bidirectional,...",
        help: "After the scenarios, also run the IETF responsiveness method (as `bloatlab rpm`) against the \
               server's RPM endpoints, pinning the certificate the server announced: --rpm for \
               download,upload, or --rpm=STAGES (off: none)",
        arity: Arity::OptionalValue { missing: "download,upload" },
        shape: Shape::List,
        choices: &[],
        requires: None,
        examples: &["download,upload", "bidirectional"],
        set: |t, s| {
            t.rpm = match s {
                "off" | "none" => vec![],
                _ => s.split(',').map(|d| d.parse::<RpmDirection>()).collect::<Result<Vec<_>, _>>()?,
            };
            Ok(())
        },
        get: |t| if t.rpm.is_empty() { vec![] } else { one(t.rpm.iter().map(|d| d.name()).collect::<Vec<_>>().join(",")) },
    },
    TestOption {
        long: "witness",
        short: None,
        value_name: "HOST",
        help: "A second bloatlab server that only receives UDP probes (the \"witness\" whose latency the load \
               harms) [lab: its witness host; or server]",
        arity: Arity::Value,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        examples: &["192.0.2.3"],
        set: |t, s| {
            if s.is_empty() || s.contains(char::is_whitespace) {
                return Err("a host name or address".into());
            }
            t.witness = Some(s.to_string());
            Ok(())
        },
        get: |t| t.witness.iter().cloned().collect(),
    },
];

/// The measurement options a user set, over a front end's defaults: each
/// option's values in their canonical spelling (checked when set).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TestOverrides(BTreeMap<String, Vec<String>>);

impl TestOverrides {
    /// Set option `name` (long or recipe spelling) to `raw`: checked, kept in
    /// its canonical spelling. A repeated option gains an occurrence; any
    /// other option's value is replaced.
    pub fn set(&mut self, name: &str, raw: &str) -> Result<(), String> {
        let o = test_option(name).ok_or_else(|| format!("`{name}` is not a `bloatlab test` option"))?;
        let v = o.canonical(raw)?;
        let e = self.0.entry(o.long.to_string()).or_default();
        if o.arity != Arity::Repeated {
            e.clear();
        }
        e.push(v);
        Ok(())
    }

    /// The values set for `o`, if any.
    pub fn get(&self, o: &TestOption) -> Option<&[String]> {
        self.0.get(o.long).map(|v| v.as_slice())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Set every given option in `t`, in [`TEST_OPTIONS`] order.
    pub fn apply(&self, t: &mut TestConfig) -> Result<(), String> {
        for o in TEST_OPTIONS {
            for v in self.get(o).unwrap_or_default() {
                o.set(t, v)?;
            }
        }
        Ok(())
    }

    /// Options set in `other` win over ours.
    pub fn merge(&mut self, other: &TestOverrides) {
        for (k, v) in &other.0 {
            self.0.insert(k.clone(), v.clone());
        }
    }

    /// The options and values set, in [`TEST_OPTIONS`] order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static TestOption, &[String])> {
        TEST_OPTIONS.iter().filter_map(move |o| self.get(o).map(|v| (o, v)))
    }

    /// As `bloatlab test` arguments.
    pub fn args(&self) -> Vec<String> {
        self.iter().flat_map(|(o, vs)| vs.iter().flat_map(move |v| o.args(v))).collect()
    }
}

/// `t` as the `bloatlab test` options that differ from `bloatlab test`'s
/// defaults: what a dry run shows a point will run.
pub fn differing_args(t: &TestConfig) -> Vec<String> {
    let d = TestConfig::default();
    let mut out = vec![];
    for o in TEST_OPTIONS {
        let (now, def) = (o.get(t), o.get(&d));
        if now == def {
            continue;
        }
        if now.is_empty() {
            // switched off against the defaults (only rx-copy could be)
            out.extend(o.args("off"));
        }
        for v in &now {
            out.extend(o.args(v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_example_is_canonical_and_not_the_default() {
        for o in TEST_OPTIONS {
            assert!(!o.examples.is_empty(), "{o:?} has no example");
            for e in o.examples {
                assert_eq!(o.canonical(e).as_deref(), Ok(*e), "{o:?}");
                let mut t = TestConfig::default();
                o.set(&mut t, e).unwrap();
                assert_ne!(t, TestConfig::default(), "{o:?} {e} changes nothing");
                assert_eq!(o.get(&t).last().map(String::as_str), Some(*e), "{o:?}");
            }
        }
        let names: std::collections::BTreeSet<_> = TEST_OPTIONS.iter().map(|o| o.long).collect();
        assert_eq!(names.len(), TEST_OPTIONS.len(), "an option is defined twice");
    }

    #[test]
    fn overrides_layer_over_defaults() {
        let mut o = TestOverrides::default();
        o.set("duration", "9").unwrap();
        o.set("cc", "reno").unwrap();
        o.set("ping", "a").unwrap();
        o.set("ping", "b").unwrap();
        o.set("rpm", "download,upload").unwrap();
        let mut t = TestConfig::default();
        o.apply(&mut t).unwrap();
        assert_eq!((t.duration, t.cc.as_str(), t.idle), (Duration::from_secs(9), "reno", Duration::from_secs(2)));
        assert_eq!(t.pings.len(), 2);
        assert_eq!(o.args(), ["--duration", "9s", "--cc", "reno", "--ping", "a", "--ping", "b", "--rpm"]);
        let mut a = TestOverrides::default();
        a.set("duration", "1").unwrap();
        a.set("idle", "0").unwrap();
        a.merge(&o);
        assert_eq!(a.get(test_option("duration").unwrap()), Some(&["9s".to_string()][..]));
        assert_eq!(a.get(test_option("idle").unwrap()), Some(&["0s".to_string()][..]));
        // a scenario list and a ramp replace each other
        o.set("scenarios", "auto").unwrap();
        o.apply(&mut t).unwrap();
        assert!(t.ramp.is_some() && t.scenarios.is_empty());
        assert!(differing_args(&t).windows(2).any(|w| w == ["--scenarios", "auto"]));
        assert_eq!(test_option("probe_interval").unwrap().long, "probe-interval");
    }

    #[test]
    fn bad_values_name_their_option() {
        let mut o = TestOverrides::default();
        for (k, v, why) in [
            ("duration", "fast", "--duration"),
            ("scenarios", "1up", "or auto"),
            ("rpm", "sideways", "RPM stage"),
            ("socket-buffer", "4G", "at most 1 GiB"),
            ("rx-copy", "maybe", "on or off"),
            ("tcp-ping", "h", "HOST:PORT"),
            ("colour", "red", "not a `bloatlab test` option"),
        ] {
            let e = o.set(k, v).unwrap_err();
            assert!(e.contains(why), "{k} {v}: {e}");
        }
        assert!(o.is_empty(), "a refused value is not kept");
    }
}
