//! `bloatlab server`'s options, defined once (doc, parsing, completion):
//! its limits and manners ([`SERVER_OPTIONS`]) on the [`ServerConfig`] they
//! set, checked by [`ServerConfig::validate`]; its addresses, files (secret,
//! certificates) and the RPM and browser services
//! ([`SERVER_SETUP_OPTIONS`]) on a [`ServerSetup`], checked across each
//! other by its `resolve`, whose files the command reads at the edge.
use crate::options::{count, on_off, one, Arity, Configurable, OptionDef, Shape};
use crate::units::{fmt_bytes, fmt_duration, parse_bytes, parse_duration};
use crate::{ServerConfig, WebResults, DEFAULT_PORT, DEFAULT_RPM_PORT, DEFAULT_WEB_PORT};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

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
        doc: "Longest test a client may run",
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
        doc: "Most flows in one scenario of one test",
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
        doc: "Most tests running at once",
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
        doc: "How long a client may stay silent before its test is dropped",
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
        doc: "Open TCP connections at once, all sources together (checked before a connection gets a thread)",
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
        doc: "Open TCP connections from one source (an IPv4 address or an IPv6 /64); at least --max-flows + 2",
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
        doc: "Tests at once from one source, witness sessions included",
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
        doc: "Tell clients this host's name, kernel and OS (by default only the bloatlab version and the congestion controls on offer)",
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
        doc: "Congestion controls clients may ask for, comma separated [default: any the kernel allows]",
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
        doc: "Largest socket buffer (--socket-buffer) a client may ask for; 0 = clients may not set buffers",
        arity: Arity::Value,
        shape: Shape::Bytes,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["0", "4m"],
        set: |c, s| {
            let b = parse_bytes(s)?;
            if b > (i32::MAX / 2) as u64 {
                return Err(format!("`{s}` is too large (at most 1 GiB)"));
            }
            c.max_socket_buffer = b as u32;
            Ok(())
        },
        get: |c| one(fmt_bytes(c.max_socket_buffer.into())),
    },
    OptionDef {
        long: "quiet",
        short: Some('q'),
        value_name: "",
        doc: "No log lines (by default one JSON line per test and per refusal on stderr)",
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

/// `bloatlab server`'s addresses, files and services, as given: the
/// command reads the files (secret, certificates) at the edge and makes a
/// [`ServerConfig`] of them ([`crate::options::Overrides::resolve`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSetup {
    /// `--bind`, as given (an address, or an address and port).
    pub bind: Vec<String>,
    pub port: u16,
    pub secret_file: Option<PathBuf>,
    pub rpm_port: u16,
    pub no_rpm: bool,
    pub rpm_cert: Option<PathBuf>,
    pub rpm_key: Option<PathBuf>,
    pub rpm_name: Option<String>,
    pub web_port: u16,
    pub no_web: bool,
    pub web_public: bool,
    pub web_results: Option<PathBuf>,
    pub web_results_max: u32,
    pub web_results_per_hour: u32,
    pub web_results_keep_addresses: bool,
}

impl Default for ServerSetup {
    fn default() -> ServerSetup {
        let kept = WebResults::new(PathBuf::new());
        ServerSetup {
            bind: vec![],
            port: DEFAULT_PORT,
            secret_file: None,
            rpm_port: DEFAULT_RPM_PORT,
            no_rpm: false,
            rpm_cert: None,
            rpm_key: None,
            rpm_name: None,
            web_port: DEFAULT_WEB_PORT,
            no_web: false,
            web_public: false,
            web_results: None,
            web_results_max: kept.max_count,
            web_results_per_hour: kept.per_source_per_hour,
            web_results_keep_addresses: false,
        }
    }
}

impl Configurable for ServerSetup {
    const COMMAND: &'static str = "`bloatlab server`";
    fn options() -> &'static [OptionDef<ServerSetup>] {
        SERVER_SETUP_OPTIONS
    }
}

/// A port to listen on: 0 picks a free one.
fn listen_port(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n <= 65535 => Ok(n as u16),
        _ => Err(format!("`{s}` is not a port (0-65535 to listen on; 0 picks a free one)")),
    }
}

fn at_least_one(s: &str) -> Result<u32, String> {
    match count(s)? {
        0 => Err(format!("`{s}`: at least 1")),
        n => Ok(n),
    }
}

fn path(s: &str) -> Result<Option<PathBuf>, String> {
    if s.is_empty() {
        return Err("a file name, not an empty string".into());
    }
    Ok(Some(PathBuf::from(s)))
}

fn path_get(p: &Option<PathBuf>) -> Vec<String> {
    p.as_ref().map(|p| one(p.display())).unwrap_or_default()
}

/// `--bind`: an IP address (the server's --port) or an address and port.
fn bind_addr(s: &str) -> Result<String, String> {
    if s.parse::<IpAddr>().is_ok() || s.parse::<SocketAddr>().is_ok() {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not an IP address (examples: 127.0.0.1, ::1, [::1]:9770)"))
    }
}

/// `bloatlab server`'s addresses, files and services, in `--help` order.
pub static SERVER_SETUP_OPTIONS: &[OptionDef<ServerSetup>] = &[
    OptionDef {
        long: "bind",
        short: None,
        value_name: "ADDR",
        doc: "Address to listen on (repeatable; ADDR or ADDR:PORT) [default: [::] dual-stack, 0.0.0.0 if IPv6 is off]",
        arity: Arity::Repeated,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["127.0.0.1"],
        set: |c, s| Ok(c.bind.push(bind_addr(s)?)),
        get: |c| c.bind.clone(),
    },
    OptionDef {
        long: "port",
        short: Some('p'),
        value_name: "PORT",
        doc: "TCP and UDP port of the bloatlab protocol",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["9000"],
        set: |c, s| Ok(c.port = listen_port(s)?),
        get: |c| one(c.port),
    },
    OptionDef {
        long: "secret-file",
        short: None,
        value_name: "FILE",
        doc: "Require the shared secret in FILE (at least 16 bytes; surrounding whitespace ignored): clients answer an HMAC-SHA256 challenge on every connection and sign every probe [default: an open server]",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["/etc/bloatlab/secret"],
        set: |c, s| Ok(c.secret_file = path(s)?),
        get: |c| path_get(&c.secret_file),
    },
    OptionDef {
        long: "rpm-port",
        short: None,
        value_name: "PORT",
        doc: "HTTPS port of the IETF responsiveness (RPM) endpoints for networkQuality-style clients and `bloatlab rpm` (0 = pick one)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["4443"],
        set: |c, s| Ok(c.rpm_port = listen_port(s)?),
        get: |c| one(c.rpm_port),
    },
    OptionDef {
        long: "no-rpm",
        short: None,
        value_name: "",
        doc: "Serve only the bloatlab protocol, no RPM endpoints",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.no_rpm = on_off(s)?),
        get: |c| if c.no_rpm { one("on") } else { vec![] },
    },
    OptionDef {
        long: "rpm-cert",
        short: None,
        value_name: "FILE",
        doc: "Certificate chain (PEM) of the RPM endpoints [default: a self-signed certificate made at start; its SHA-256 is printed]",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: Some("rpm-key"),
        one_run_each: false,
        examples: &["cert.pem"],
        set: |c, s| Ok(c.rpm_cert = path(s)?),
        get: |c| path_get(&c.rpm_cert),
    },
    OptionDef {
        long: "rpm-key",
        short: None,
        value_name: "FILE",
        doc: "Private key (PEM) of --rpm-cert",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: Some("rpm-cert"),
        one_run_each: false,
        examples: &["key.pem"],
        set: |c, s| Ok(c.rpm_key = path(s)?),
        get: |c| path_get(&c.rpm_key),
    },
    OptionDef {
        long: "rpm-name",
        short: None,
        value_name: "HOST",
        doc: "Host name the RPM configuration's URLs use [default: the name the client asked for]",
        arity: Arity::Value,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["rpm.example.net"],
        set: |c, s| {
            let h = crate::config::split_host_port(s, DEFAULT_RPM_PORT)?.0;
            if h != s.trim_start_matches('[').trim_end_matches(']') {
                return Err(format!("`{s}`: a host name, without a port"));
            }
            c.rpm_name = Some(h);
            Ok(())
        },
        get: |c| c.rpm_name.iter().cloned().collect(),
    },
    OptionDef {
        long: "web-port",
        short: None,
        value_name: "PORT",
        doc: "Plain-HTTP port of the browser test (also served on the HTTPS port of the RPM endpoints); 0 = pick one",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["8080"],
        set: |c, s| Ok(c.web_port = listen_port(s)?),
        get: |c| one(c.web_port),
    },
    OptionDef {
        long: "no-web",
        short: None,
        value_name: "",
        doc: "Serve no browser test",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.no_web = on_off(s)?),
        get: |c| if c.no_web { one("on") } else { vec![] },
    },
    OptionDef {
        long: "web-public",
        short: None,
        value_name: "",
        doc: "Serve the browser test even with --secret-file. A page cannot keep a secret: anyone who reaches the web port can run tests (within the server's limits). Without this, a server with a secret serves no page",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.web_public = on_off(s)?),
        get: |c| if c.web_public { one("on") } else { vec![] },
    },
    OptionDef {
        long: "web-results",
        short: None,
        value_name: "DIR",
        doc: "Keep browser results in DIR, each with a permalink (/r/ID); bounded by --web-results-max, 1 GiB in all and --web-results-per-hour per source [default: none kept]",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["/var/lib/bloatlab/web"],
        set: |c, s| Ok(c.web_results = path(s)?),
        get: |c| path_get(&c.web_results),
    },
    OptionDef {
        long: "web-results-max",
        short: None,
        value_name: "N",
        doc: "Most browser results kept (the oldest go first)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: Some("web-results"),
        one_run_each: false,
        examples: &["500"],
        set: |c, s| Ok(c.web_results_max = at_least_one(s)?),
        get: |c| one(c.web_results_max),
    },
    OptionDef {
        long: "web-results-per-hour",
        short: None,
        value_name: "N",
        doc: "Browser results one source (an IPv4 address or IPv6 /64) may keep per hour",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: Some("web-results"),
        one_run_each: false,
        examples: &["5"],
        set: |c, s| Ok(c.web_results_per_hour = at_least_one(s)?),
        get: |c| one(c.web_results_per_hour),
    },
    OptionDef {
        long: "web-results-keep-addresses",
        short: None,
        value_name: "",
        doc: "Record each kept result's client address (in DIR/ID.source; off by default)",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: Some("web-results"),
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.web_results_keep_addresses = on_off(s)?),
        get: |c| if c.web_results_keep_addresses { one("on") } else { vec![] },
    },
];

impl crate::options::Overrides<ServerSetup> {
    /// The setup these options give, checked across each other (the same
    /// checks whoever gives them).
    pub fn resolve(&self) -> Result<ServerSetup, String> {
        let mut s = ServerSetup::default();
        self.apply(&mut s)?;
        let given = |names: &[&str]| names.iter().filter(|n| self.has(n)).map(|n| format!("--{n}")).collect::<Vec<_>>();
        if s.no_rpm {
            let with = given(&["rpm-port", "rpm-cert", "rpm-key", "rpm-name"]);
            if !with.is_empty() {
                return Err(format!("--no-rpm serves no RPM endpoints; {} has nothing to set (drop it)", with.join(", ")));
            }
        }
        if s.no_web {
            let with = given(&["web-port", "web-results", "web-public"]);
            if !with.is_empty() {
                return Err(format!("--no-web serves no browser test; {} has nothing to set (drop it)", with.join(", ")));
            }
        }
        for (a, b) in [("rpm-cert", "rpm-key"), ("rpm-key", "rpm-cert")] {
            if self.has(a) && !self.has(b) {
                return Err(format!("--{a} needs --{b}"));
            }
        }
        for n in ["web-results-max", "web-results-per-hour", "web-results-keep-addresses"] {
            if self.has(n) && !self.has("web-results") {
                return Err(format!("--{n} needs --web-results DIR"));
            }
        }
        if s.web_results.is_some() && s.secret_file.is_some() && !s.web_public {
            return Err("--web-results: the browser test is off (--secret-file without --web-public)".into());
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Overrides;

    fn of(pairs: &[(&str, &str)]) -> Result<ServerSetup, String> {
        let mut o = Overrides::<ServerSetup>::default();
        for (k, v) in pairs {
            o.add(k, v)?;
        }
        o.resolve()
    }

    #[test]
    fn the_setup_is_checked_across_its_options() {
        let d = of(&[]).unwrap();
        assert_eq!(d, ServerSetup::default());
        assert_eq!((d.port, d.rpm_port, d.web_port), (DEFAULT_PORT, DEFAULT_RPM_PORT, DEFAULT_WEB_PORT));
        let s = of(&[("bind", "127.0.0.1"), ("bind", "[::1]:9000"), ("port", "0"), ("web-results", "/tmp/w"), ("web-results-max", "5")]).unwrap();
        assert_eq!(s.bind, ["127.0.0.1", "[::1]:9000"]);
        assert_eq!((s.port, s.web_results_max), (0, 5));
        for (pairs, why) in [
            (&[("no-rpm", "on"), ("rpm-port", "1")][..], "--no-rpm serves no RPM endpoints; --rpm-port has nothing to set"),
            (&[("no-web", "on"), ("web-public", "on")][..], "--no-web serves no browser test; --web-public"),
            (&[("rpm-cert", "c.pem")][..], "--rpm-cert needs --rpm-key"),
            (&[("web-results-max", "5")][..], "--web-results-max needs --web-results DIR"),
            (&[("web-results", "/tmp/w"), ("secret-file", "s")][..], "--secret-file without --web-public"),
            (&[("bind", "localhost")][..], "`localhost` is not an IP address"),
            (&[("port", "70000")][..], "`70000` is not a port (0-65535 to listen on"),
            (&[("web-results-max", "0")][..], "at least 1"),
            (&[("rpm-name", "a.example:443")][..], "without a port"),
        ] {
            let e = of(pairs).unwrap_err();
            assert!(e.contains(why), "{pairs:?}: {e}");
        }
    }
}
