//! `bloatlab server`: its command line becomes the model's [`ServerConfig`]
//! (files read here, at the edge); then it serves until a signal.
use super::read_secret;
use anyhow::{anyhow, Result};
use bloatlab_engine::server::Server;
use bloatlab_host::signals;
use crate::options::OptionArgs;
use bloatlab_model::{ServerConfig, ServerSetup};
use clap::Args;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The addresses, files and services (model::SERVER_SETUP_OPTIONS, defined once).
    #[command(flatten)]
    pub setup: OptionArgs<ServerSetup>,
    /// The limits and manners (model::SERVER_OPTIONS, defined once).
    #[command(flatten)]
    pub limits: OptionArgs<ServerConfig>,
}

/// The RPM service, its certificate files read here at the edge.
fn rpm_serve(s: &ServerSetup, binds: &[SocketAddr]) -> Result<Option<bloatlab_model::RpmServe>> {
    use bloatlab_model::{RpmServe, RpmTls};
    if s.no_rpm {
        return Ok(None);
    }
    let read = |p: &std::path::Path, flag: &str| std::fs::read_to_string(p).map_err(|e| anyhow!("{flag} {}: {e}", p.display()));
    let tls = match (&s.rpm_cert, &s.rpm_key) {
        (Some(c), Some(k)) => RpmTls::Pem { cert_chain: read(c, "--rpm-cert")?, key: read(k, "--rpm-key")? },
        _ => {
            // Names a client may use: the given one, localhost, the bound
            // addresses and this host's name.
            let mut names: Vec<String> = s.rpm_name.iter().cloned().collect();
            names.push("localhost".into());
            for b in binds {
                if !b.ip().is_unspecified() {
                    names.push(b.ip().to_string());
                } else {
                    names.push("127.0.0.1".into());
                    names.push("::1".into());
                }
            }
            let h = bloatlab_host::hostname();
            if !h.is_empty() {
                names.push(h);
            }
            names.dedup();
            RpmTls::SelfSigned { names }
        }
    };
    Ok(Some(RpmServe { port: s.rpm_port, public_name: s.rpm_name.clone(), tls }))
}

impl ServerArgs {
    pub fn config(&self) -> Result<ServerConfig> {
        let s = self.setup.0.resolve().map_err(|e| anyhow!(e))?;
        let mut binds = vec![];
        for b in &s.bind {
            // checked by the option's parser: an address, or an address and port
            let addr = match b.parse::<std::net::IpAddr>() {
                Ok(ip) => SocketAddr::new(ip, s.port),
                Err(_) => b.parse().map_err(|_| anyhow!("--bind {b}: not an IP address"))?,
            };
            binds.push(addr);
        }
        if binds.is_empty() {
            binds.push(SocketAddr::from(([0u16; 8], s.port)));
        }
        let rpm = rpm_serve(&s, &binds)?;
        let web = if s.no_web || (s.secret_file.is_some() && !s.web_public) {
            None
        } else {
            let results = s.web_results.as_ref().map(|d| {
                let mut r = bloatlab_model::WebResults::new(d.clone());
                r.max_count = s.web_results_max;
                r.per_source_per_hour = s.web_results_per_hour;
                r.keep_addresses = s.web_results_keep_addresses;
                r
            });
            Some(bloatlab_model::WebServe { port: s.web_port, results })
        };
        let mut cfg = ServerConfig::default();
        self.limits.0.apply(&mut cfg).map_err(|e| anyhow!(e))?;
        cfg.binds = binds;
        cfg.secret = s.secret_file.as_deref().map(read_secret).transpose()?;
        cfg.rpm = rpm;
        cfg.web = web;
        cfg.validate().map_err(|e| anyhow!(e))?;
        Ok(cfg)
    }
}

pub fn run_server(a: ServerArgs) -> Result<i32> {
    serve(a.config()?)
}

/// Serve `cfg` (also a lab's server job) until SIGINT/SIGTERM.
pub fn serve(cfg: ServerConfig) -> Result<i32> {
    // first: a SIGTERM while it starts is heard, and it stops once started
    signals::install();
    let quiet = cfg.quiet;
    let rpm_cfg = cfg.rpm.clone();
    let srv = Server::start(cfg.clone()).map_err(|e| anyhow!(e))?;
    let list: Vec<String> = srv.addrs.iter().map(|a| a.to_string()).collect();
    let web = match &cfg.web {
        Some(w) => Some(bloatlab_web::Web::new(&cfg, w, srv.connection_quota(), srv.tests_quota()).map_err(|e| anyhow!(e))?),
        None => None,
    };
    let rpm = match &rpm_cfg {
        Some(r) => Some(bloatlab_rpm::RpmServer::start(&cfg, r, srv.connection_quota(), web.as_ref().map(|w| w.fallback())).map_err(|e| {
            anyhow!("{e} (--rpm-port chooses another port, --no-rpm serves without the RPM endpoints)")
        })?),
        None => None,
    };
    if let Some(r) = &rpm {
        srv.offer_rpm(r.addrs.clone(), r.fingerprint.clone());
        if let (Some(w), Some(a)) = (&web, r.addrs.first()) {
            w.offer_rpm(bloatlab_model::RpmOffer { port: a.port(), certificate_sha256: r.fingerprint.clone() });
        }
    }
    let web_srv = match (&web, &cfg.web) {
        (Some(w), Some(serve)) => Some(bloatlab_web::WebServer::start(w.clone(), serve.port).map_err(|e| {
            anyhow!("{e} (--web-port chooses another port, --no-web serves without the browser test)")
        })?),
        _ => None,
    };
    // Startup lines go to stdout, which a supervisor may close after reading
    // what it wanted: a server does not die of a closed stdout (println!
    // would panic on the broken pipe).
    let say = |line: String| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    say(format!("bloatlab server listening on {} (tcp+udp)", list.join(", ")));
    if let Some(r) = &rpm {
        let urls: Vec<String> = r.addrs.iter().map(|a| {
            let host = if a.ip().is_unspecified() { "HOST".to_string() } else { a.ip().to_string() };
            r.config_url(&host, a.port())
        }).collect();
        let cert = if r.self_signed { "self-signed certificate" } else { "certificate" };
        say(format!("bloatlab server RPM endpoints (HTTPS, HTTP/2 and HTTP/1.1) at {}; {cert} SHA-256 {}", urls.join(", "), r.fingerprint));
    }
    match &web_srv {
        Some(w) => {
            let url = |scheme: &str, a: &SocketAddr| {
                let host = if a.ip().is_unspecified() { "HOST".to_string() } else if a.is_ipv6() { format!("[{}]", a.ip()) } else { a.ip().to_string() };
                format!("{scheme}://{host}:{}/", a.port())
            };
            let mut urls: Vec<String> = w.addrs.iter().map(|a| url("http", a)).collect();
            if let Some(r) = &rpm {
                urls.extend(r.addrs.iter().map(|a| url("https", a)));
            }
            say(format!("bloatlab server browser test at {}", urls.join(", ")));
        }
        None if cfg.secret.is_some() && !quiet => {
            eprintln!("bloatlab server: no browser test: a page cannot keep the --secret-file secret (--web-public serves it anyway)")
        }
        None => {}
    }
    std::io::stdout().flush().ok();
    while signals::pending() == 0 {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !quiet {
        eprintln!("bloatlab server: stopping after {} tests", srv.tests_served());
    }
    Ok(0)
}

