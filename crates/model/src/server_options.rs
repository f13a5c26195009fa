//! `bloatlab server`'s limits and manners, defined once ([`SERVER_OPTIONS`]:
//! doc, parsing, completion) on the [`ServerConfig`] they set; its
//! addresses, files (secret, certificates) and the RPM and browser services
//! are the command's own, read at the edge. Ranges and the limits' relations
//! are checked by [`ServerConfig::validate`].
use crate::options::{count, on_off, one, Arity, Configurable, OptionDef, Shape};
use crate::units::{fmt_duration, parse_bytes, parse_duration};
use crate::ServerConfig;

impl Configurable for ServerConfig {
    const COMMAND: &'static str = "`bloatlab server`";
    fn options() -> &'static [OptionDef<ServerConfig>] {
        SERVER_OPTIONS
    }
}

/// Every limit of `bloatlab server`, in `--help` order.
pub static SERVER_OPTIONS: &[OptionDef<ServerConfig>] = &[
    OptionDef {
        long: "max-duration",
        short: None,
        value_name: "DURATION",
        help: "Longest test a client may run [default: 5m]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["10m"],
        set: |c, s| Ok(c.max_duration = parse_duration(s)?),
        get: |c| one(fmt_duration(c.max_duration)),
    },
    OptionDef {
        long: "max-flows",
        short: None,
        value_name: "N",
        help: "Most flows in one scenario of one test [default: 64]",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["32"],
        set: |c, s| Ok(c.max_flows = count(s)?),
        get: |c| one(c.max_flows),
    },
    OptionDef {
        long: "max-tests",
        short: None,
        value_name: "N",
        help: "Most tests running at once [default: 8]",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["2"],
        set: |c, s| Ok(c.max_tests = count(s)?),
        get: |c| one(c.max_tests),
    },
    OptionDef {
        long: "idle-timeout",
        short: None,
        value_name: "DURATION",
        help: "How long a client may stay silent before its test is dropped [default: 15s]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["30s"],
        set: |c, s| Ok(c.idle_timeout = parse_duration(s)?),
        get: |c| one(fmt_duration(c.idle_timeout)),
    },
    OptionDef {
        long: "max-conns",
        short: None,
        value_name: "N",
        help: "Open TCP connections at once, all sources together (checked before a connection gets a thread) [default: 1024]",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["256"],
        set: |c, s| Ok(c.max_conns = count(s)?),
        get: |c| one(c.max_conns),
    },
    OptionDef {
        long: "max-conns-per-source",
        short: None,
        value_name: "N",
        help: "Open TCP connections from one source (an IPv4 address or an IPv6 /64); at least --max-flows + 2 [default: 160]",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["80"],
        set: |c, s| Ok(c.max_conns_per_source = count(s)?),
        get: |c| one(c.max_conns_per_source),
    },
    OptionDef {
        long: "max-tests-per-source",
        short: None,
        value_name: "N",
        help: "Tests at once from one source, witness sessions included [default: 4]",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["2"],
        set: |c, s| Ok(c.max_tests_per_source = count(s)?),
        get: |c| one(c.max_tests_per_source),
    },
    OptionDef {
        long: "disclose-host",
        short: None,
        value_name: "",
        help: "Tell clients this host's name, kernel and OS (by default only the bloatlab version and the congestion controls on offer)",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.disclose_host = on_off(s)?),
        get: |c| if c.disclose_host { one("on") } else { vec![] },
    },
    OptionDef {
        long: "allow-cc",
        short: None,
        value_name: "NAME[,NAME...]",
        help: "Congestion controls clients may ask for, comma separated [default: any the kernel allows]",
        arity: Arity::Value,
        shape: Shape::List,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["cubic,bbr"],
        set: |c, s| {
            let v: Vec<String> = s.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect();
            if let Some(bad) = v.iter().find(|x| x.len() > 15 || !x.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')) {
                return Err(format!("`{bad}` is not a congestion control's name"));
            }
            c.allowed_cc = v;
            Ok(())
        },
        get: |c| if c.allowed_cc.is_empty() { vec![] } else { one(c.allowed_cc.join(",")) },
    },
    OptionDef {
        long: "max-socket-buffer",
        short: None,
        value_name: "SIZE",
        help: "Largest socket buffer (--socket-buffer) a client may ask for; 0 = clients may not set buffers [default: 64M]",
        arity: Arity::Value,
        shape: Shape::Bytes,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["0", "4194304"],
        set: |c, s| {
            let b = parse_bytes(s)?;
            if b > (i32::MAX / 2) as u64 {
                return Err(format!("`{s}` is too large (at most 1 GiB)"));
            }
            c.max_socket_buffer = b as u32;
            Ok(())
        },
        get: |c| one(c.max_socket_buffer),
    },
    OptionDef {
        long: "quiet",
        short: Some('q'),
        value_name: "",
        help: "No log lines (by default one JSON line per test and per refusal on stderr)",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.quiet = on_off(s)?),
        get: |c| if c.quiet { one("on") } else { vec![] },
    },
];
