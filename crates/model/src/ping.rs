//! Probes to any host while a test's load runs: ICMP echo (`--ping HOST`)
//! and TCP connect time (`--tcp-ping HOST:PORT`), for the hosts that run no
//! bloatlab server (a gateway, a game server, the lab's witness).
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How often each ping target is probed unless `--ping-interval` says.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PingKind {
    /// ICMP (ICMPv6) echo request / reply.
    Icmp,
    /// A TCP handshake: SYN to SYN-ACK (or RST) as seen by connect().
    Tcp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingTarget {
    pub kind: PingKind,
    /// Host name or address as the user gave it.
    pub host: String,
    /// TCP port (0 for ICMP).
    pub port: u16,
}

impl PingTarget {
    /// `--ping HOST`: a name or an address (IPv6 with or without brackets).
    pub fn icmp(s: &str) -> Result<PingTarget, String> {
        let h = s.trim().trim_start_matches('[').trim_end_matches(']');
        if h.is_empty() || h.contains(char::is_whitespace) || h.contains('/') {
            return Err(format!("--ping {s:?}: a host name or IP address"));
        }
        Ok(PingTarget { kind: PingKind::Icmp, host: h.to_string(), port: 0 })
    }

    /// `--tcp-ping HOST:PORT` (`[v6]:PORT` for IPv6).
    pub fn tcp(s: &str) -> Result<PingTarget, String> {
        let form = "HOST:PORT (an IPv6 address in brackets: [2001:db8::1]:443)";
        match crate::config::split_host_port(s, 0) {
            Ok((_, 0)) => Err(format!("--tcp-ping {s:?}: {form}")),
            Ok((host, port)) => Ok(PingTarget { kind: PingKind::Tcp, host, port }),
            Err(e) => Err(format!("--tcp-ping {s:?}: {e}; {form}")),
        }
    }

    /// "icmp HOST" or "tcp HOST:PORT", as tables and the JSON name it.
    pub fn label(&self) -> String {
        match self.kind {
            PingKind::Icmp => format!("icmp {}", self.host),
            PingKind::Tcp if self.host.contains(':') => format!("tcp [{}]:{}", self.host, self.port),
            PingKind::Tcp => format!("tcp {}:{}", self.host, self.port),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_their_errors() {
        assert_eq!(PingTarget::icmp("192.0.2.1").unwrap().label(), "icmp 192.0.2.1");
        assert_eq!(PingTarget::icmp("[2001:db8::1]").unwrap().host, "2001:db8::1");
        assert!(PingTarget::icmp("").is_err());
        assert!(PingTarget::icmp("a b").is_err());
        let t = PingTarget::tcp("example.net:443").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.kind), ("example.net", 443, PingKind::Tcp));
        assert_eq!(PingTarget::tcp("[2001:db8::1]:22").unwrap().label(), "tcp [2001:db8::1]:22");
        assert!(PingTarget::tcp("example.net").unwrap_err().contains("HOST:PORT"));
        assert!(PingTarget::tcp("2001:db8::1:22").unwrap_err().contains("brackets"));
        assert!(PingTarget::tcp("h:0").unwrap_err().contains("is not a port (1-65535)"));
        assert!(PingTarget::tcp("h:http").is_err());
    }
}
