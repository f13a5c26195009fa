//! `bloatlab rpm`'s measurement options, defined once ([`RPM_OPTIONS`]:
//! doc, parsing, completion) on the [`RpmConfig`] they set (as
//! `server_options` for the server's limits).
use crate::rpm::{RpmConfig, RpmDirection};
use crate::options::{count, one, Arity, Configurable, OptionDef, Shape};
use crate::units::{fmt_duration, parse_duration};

impl Configurable for RpmConfig {
    const COMMAND: &'static str = "`bloatlab rpm`";
    fn options() -> &'static [OptionDef<RpmConfig>] {
        RPM_OPTIONS
    }
}

/// Every measurement option of `bloatlab rpm`, in `--help` order (its
/// URL, files and outputs are the command's own); ranges are checked by
/// [`RpmConfig::validate`], once the whole configuration is known.
pub static RPM_OPTIONS: &[OptionDef<RpmConfig>] = &[
    OptionDef {
        long: "directions",
        short: None,
        value_name: "download|upload|bidirectional,...",
        doc: "Stages, run one after another",
        arity: Arity::Value,
        shape: Shape::List,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["upload", "download,bidirectional"],
        set: |c, s| {
            c.directions = s.split(',').map(|d| d.trim().parse::<RpmDirection>()).collect::<Result<Vec<_>, _>>()?;
            Ok(())
        },
        get: |c| one(c.directions.iter().map(|d| d.name()).collect::<Vec<_>>().join(",")),
    },
    OptionDef {
        long: "max-stage",
        short: None,
        value_name: "DURATION",
        doc: "Longest a stage may take to become stable (then it reports low confidence)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["10s"],
        set: |c, s| Ok(c.max_stage = parse_duration(s)?),
        get: |c| one(fmt_duration(c.max_stage)),
    },
    OptionDef {
        long: "interval",
        short: None,
        value_name: "DURATION",
        doc: "Interval duration (the draft's ID)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["500ms"],
        set: |c, s| Ok(c.interval = parse_duration(s)?),
        get: |c| one(fmt_duration(c.interval)),
    },
    OptionDef {
        long: "mad",
        short: None,
        value_name: "N",
        doc: "Moving average distance, intervals (the draft's MAD)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["2"],
        set: |c, s| Ok(c.mad = count(s)?),
        get: |c| one(c.mad),
    },
    OptionDef {
        long: "sdt",
        short: None,
        value_name: "FRACTION",
        doc: "Standard deviation tolerance, a fraction (the draft's SDT)",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["0.1"],
        set: |c, s| {
            c.sdt = s.trim().parse().map_err(|_| format!("`{s}` is not a fraction (0.05 = 5%)"))?;
            Ok(())
        },
        get: |c| one(crate::fmt::trim_num(c.sdt)),
    },
    OptionDef {
        long: "max-connections",
        short: None,
        value_name: "N",
        doc: "Most load-generating connections per direction (the draft's MNP)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["8"],
        set: |c, s| Ok(c.max_connections = count(s)?),
        get: |c| one(c.max_connections),
    },
    OptionDef {
        long: "probe-rate",
        short: None,
        value_name: "N",
        doc: "Probe rounds per second, each a foreign and a self probe (at most the draft's MPS, 100)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["50"],
        set: |c, s| Ok(c.probes_per_second = count(s)?),
        get: |c| one(c.probes_per_second),
    },
    OptionDef {
        long: "insecure",
        short: Some('k'),
        value_name: "",
        doc: "Accept any certificate (self-signed servers); the result says so",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| {
            c.insecure = crate::options::on_off(s)?;
            Ok(())
        },
        get: |c| if c.insecure { one("on") } else { vec![] },
    },
    OptionDef {
        long: "pin-sha256",
        short: None,
        value_name: "HEX",
        doc: "Accept exactly the certificate with this SHA-256 (what `bloatlab server` prints), whoever signed it",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["65:f0:9c:e4:15:10:94:75:15:45:16:41:82:e7:e7:45:f1:7a:74:66:f5:4c:2b:bf:c3:eb:10:b2:f9:56:1a:a7"],
        set: |c, s| {
            super::normalize_sha256(s).ok_or_else(|| format!("{s:?}: 32 bytes in hex (colons optional), as the server prints it"))?;
            c.pin_sha256 = Some(s.trim().to_ascii_lowercase());
            Ok(())
        },
        get: |c| c.pin_sha256.iter().cloned().collect(),
    },
    OptionDef {
        long: "connect-to",
        short: None,
        value_name: "HOST",
        doc: "Connect to this host or address instead of resolving the URL's host",
        arity: Arity::Value,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["192.0.2.7"],
        set: |c, s| {
            if s.trim().is_empty() || s.contains(char::is_whitespace) || s.contains('/') {
                return Err(format!("`{s}` is not a host name or address"));
            }
            c.connect_to = Some(s.trim().to_string());
            Ok(())
        },
        get: |c| c.connect_to.iter().cloned().collect(),
    },
    OptionDef {
        long: "ca-file",
        short: None,
        value_name: "FILE",
        doc: "Also trust the CA certificate(s) in FILE (PEM) [default: the system's CAs]",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["ca.pem"],
        set: |c, s| Ok(c.ca_file = Some(crate::monitor::ca_file(s)?)),
        get: |c| c.ca_file.iter().map(|p| p.display().to_string()).collect(),
    },
];
