//! The IETF responsiveness (RPM) service `bloatlab server` offers beside its
//! own protocol, and what `bloatlab rpm` measures: typed here, parsed once at
//! the edge, exchanged as serde.
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// HTTPS port of the RPM service (networkQuality clients' usual port).
pub const DEFAULT_RPM_PORT: u16 = 4043;

/// The RPM endpoints of a server: HTTPS (HTTP/2 and HTTP/1.1) on `port` of
/// every address the server binds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmServe {
    /// 0 = an ephemeral port.
    pub port: u16,
    /// Host name (or address) the configuration's URLs name; None = the
    /// host the client asked for (its Host / :authority).
    pub public_name: Option<String>,
    pub tls: RpmTls,
}

/// The server's certificate.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RpmTls {
    /// A self-signed certificate made at start for these names (DNS names or
    /// IP addresses); clients need `--insecure` or the printed fingerprint.
    SelfSigned { names: Vec<String> },
    /// A certificate chain and its private key, PEM, read from the user's files.
    Pem { cert_chain: String, key: String },
}

impl std::fmt::Debug for RpmTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpmTls::SelfSigned { names } => write!(f, "SelfSigned({names:?})"),
            RpmTls::Pem { cert_chain, .. } => write!(f, "Pem(chain of {} bytes, key hidden)", cert_chain.len()),
        }
    }
}

impl RpmServe {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(n) = &self.public_name {
            if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)) {
                return Err(format!("--rpm-name {n:?}: a host name or IP address"));
            }
        }
        if let RpmTls::SelfSigned { names } = &self.tls {
            if names.is_empty() {
                return Err("a self-signed certificate needs at least one name".into());
            }
        }
        Ok(())
    }
}

/// What a bloatlab server tells an accepted test about its RPM endpoints,
/// so `bloatlab test --rpm` can run the method against the same server: the
/// port (on the address the test reached) and the certificate's SHA-256,
/// which the client pins (a self-signed certificate needs no `--insecure`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpmOffer {
    pub port: u16,
    /// Colon-separated upper-case hex, as the server prints it.
    pub certificate_sha256: String,
}

/// Which working conditions an RPM test creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RpmDirection {
    #[default]
    Download,
    Upload,
    /// Downloads and uploads at once.
    Bidirectional,
}

words!(RpmDirection, "an RPM stage", Download = "download", Upload = "upload", Bidirectional = "bidirectional");

/// What `bloatlab rpm` runs (draft-ietf-ippm-responsiveness-08's parameters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmConfig {
    /// The configuration URL (`https://host:port/.well-known/nq`).
    pub url: String,
    /// Stages, run one after another.
    pub directions: Vec<RpmDirection>,
    /// Longest a stage may take to reach stability before it is reported
    /// with low confidence.
    pub max_stage: Duration,
    /// Interval duration (ID).
    pub interval: Duration,
    /// Moving average distance (MAD), intervals.
    pub mad: u32,
    /// Standard deviation tolerance (SDT), a fraction.
    pub sdt: f64,
    /// Most load-generating connections per direction (MNP).
    pub max_connections: u32,
    /// Probe rounds per second (each a foreign and a self probe), at most
    /// the draft's MPS of 100.
    pub probes_per_second: u32,
    /// Skip certificate verification (self-signed servers).
    pub insecure: bool,
    /// Accept exactly the certificate with this SHA-256 (colon hex, any
    /// case), instead of a CA's word.
    #[serde(default)]
    pub pin_sha256: Option<String>,
    /// Also trust the CA certificates in this file (`--ca-file`), read at
    /// the edge into `ca_pem`.
    #[serde(skip)]
    pub ca_file: Option<std::path::PathBuf>,
    /// Extra trusted CA certificates, PEM.
    pub ca_pem: Option<String>,
    /// Connect to this address instead of resolving the URL's host.
    pub connect_to: Option<String>,
    /// Shared secret of an authenticated bloatlab server.
    pub secret: Option<crate::Secret>,
    /// Probe the idle line this long before the stages (foreign probes
    /// only), for an idle latency and each stage's added latency; zero: no
    /// idle probes (the draft has none).
    #[serde(default)]
    pub idle: Duration,
}

impl Default for RpmConfig {
    fn default() -> Self {
        RpmConfig {
            url: String::new(),
            directions: vec![RpmDirection::Download, RpmDirection::Upload],
            max_stage: Duration::from_secs(20),
            interval: Duration::from_secs(1),
            mad: 4,
            sdt: 0.05,
            max_connections: 16,
            probes_per_second: 20,
            insecure: false,
            pin_sha256: None,
            ca_file: None,
            ca_pem: None,
            connect_to: None,
            secret: None,
            idle: Duration::ZERO,
        }
    }
}

impl RpmConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.url.starts_with("https://") || self.url.starts_with("http://")) {
            return Err(format!("{:?}: an RPM server URL starts with https:// (e.g. https://host:4043/.well-known/nq)", self.url));
        }
        if self.directions.is_empty() {
            return Err("--direction: at least one of download, upload, bidirectional".into());
        }
        if self.interval < Duration::from_millis(100) || self.interval > Duration::from_secs(10) {
            return Err("--interval: between 100ms and 10s (the draft's ID is 1s)".into());
        }
        if self.mad < 1 || self.mad > 20 {
            return Err("--mad: 1..20 intervals (the draft's MAD is 4)".into());
        }
        if !(self.sdt > 0.0 && self.sdt < 1.0) {
            return Err("--sdt: a fraction above 0 and below 1 (the draft's SDT is 0.05)".into());
        }
        if self.max_connections < 1 || self.max_connections > 64 {
            return Err("--max-connections: 1..64 (the draft's MNP is 16)".into());
        }
        if self.probes_per_second < 1 || self.probes_per_second > 100 {
            return Err("--probe-rate: 1..100 rounds per second (the draft's MPS is 100)".into());
        }
        if let Some(p) = &self.pin_sha256 {
            if self.insecure {
                return Err("--pin-sha256 and --insecure exclude each other: a pinned certificate is checked, --insecure checks none".into());
            }
            normalize_sha256(p).ok_or_else(|| format!("--pin-sha256 {p:?}: 32 bytes in hex (colons optional), as the server prints it"))?;
        }
        if self.idle > Duration::from_secs(60) {
            return Err(format!("idle probing of {:?}: at most 60 s", self.idle));
        }
        let min_stage = self.interval * (self.mad * 2);
        if self.max_stage < min_stage {
            return Err(format!(
                "--max-stage {:?} is too short: stability needs at least 2 x MAD intervals ({min_stage:?})",
                self.max_stage
            ));
        }
        Ok(())
    }
}

/// A SHA-256 fingerprint as 64 lower-case hex digits, from the colon-separated
/// form the server prints or plain hex (any case); None if it is not one.
pub fn normalize_sha256(s: &str) -> Option<String> {
    let hex: String = s.trim().chars().filter(|c| *c != ':').collect::<String>().to_ascii_lowercase();
    (hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit())).then_some(hex)
}

#[cfg(test)]
mod fingerprint_tests {
    use super::*;

    #[test]
    fn fingerprints_compare_in_either_spelling() {
        let colon = "65:F0:9C:E4:15:10:94:75:15:45:16:41:82:E7:E7:45:F1:7A:74:66:F5:4C:2B:BF:C3:EB:10:B2:F9:56:1A:A7";
        let plain = "65f09ce4151094751545164182e7e745f17a7466f54c2bbfc3eb10b2f9561aa7";
        assert_eq!(normalize_sha256(colon).as_deref(), Some(plain));
        assert_eq!(normalize_sha256(plain).as_deref(), Some(plain));
        assert_eq!(normalize_sha256(&plain[2..]), None, "31 bytes");
        assert_eq!(normalize_sha256(&plain.replace('a', "g")), None, "not hex");
        let mut c = RpmConfig { url: "https://h/".into(), pin_sha256: Some("12:34".into()), ..RpmConfig::default() };
        assert!(c.validate().unwrap_err().contains("--pin-sha256"));
        c.pin_sha256 = Some(colon.into());
        c.validate().unwrap();
    }
}

