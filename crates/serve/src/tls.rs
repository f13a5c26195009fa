//! TLS acceptance for the HTTPS listeners (the RPM endpoints and the
//! browser test on their port): the server's certificate (the user's PEM
//! files or a self-signed one made at start, ALPN h2 then http/1.1), and
//! the handshake's admission: a slot among [`MAX_TLS_HANDSHAKING`] shared
//! fairly among sources ([`FairSlots`]), a handshake that must finish
//! within [`HELLO_DEADLINE`], refusals and cuts logged with their reason.
use crate::log::Log;
use crate::quota::{FairSlots, Slot};
use crate::HELLO_DEADLINE;
use bloatlab_model::RpmTls;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_H1: &[u8] = b"http/1.1";

/// TLS handshakes in progress, all sources together (each bounded by
/// [`HELLO_DEADLINE`]), shared fairly: when all are taken, a source below
/// its share (256 / the sources handshaking) cuts the oldest handshake of
/// the source holding the most ([`FairSlots`]), so a few sources dripping
/// slow handshakes cannot lock every other client out.
pub const MAX_TLS_HANDSHAKING: u32 = 256;

/// The one crypto provider of bloatlab's TLS, server and client.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// SHA-256 of a certificate, hex bytes joined by colons (what
/// `openssl x509 -fingerprint -sha256` prints, in lower case).
pub fn fingerprint(cert: &CertificateDer) -> String {
    Sha256::digest(cert.as_ref()).iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The server's TLS configuration and its leaf certificate's fingerprint.
pub fn server_config(tls: &RpmTls) -> Result<(Arc<rustls::ServerConfig>, String), String> {
    let (chain, key) = match tls {
        RpmTls::SelfSigned { names } => {
            let ck = rcgen::generate_simple_self_signed(names.clone())
                .map_err(|e| format!("cannot make a self-signed certificate for {names:?}: {e}"))?;
            let key = PrivateKeyDer::try_from(ck.signing_key.serialize_der())
                .map_err(|e| format!("self-signed key: {e}"))?;
            (vec![ck.cert.der().clone()], key)
        }
        RpmTls::Pem { cert_chain, key } => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_chain.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("--rpm-cert: not a PEM certificate chain ({e})"))?;
            if chain.is_empty() {
                return Err("--rpm-cert: no CERTIFICATE block in the file".into());
            }
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                .map_err(|e| format!("--rpm-key: not a PEM private key ({e})"))?;
            (chain, key)
        }
    };
    let fp = fingerprint(&chain[0]);
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("the certificate and key do not go together: {e}"))?;
    cfg.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_H1.to_vec()];
    Ok((Arc::new(cfg), fp))
}

/// Where TLS connections are admitted and their handshakes run.
#[derive(Clone)]
pub struct TlsGate {
    acceptor: TlsAcceptor,
    slots: Arc<FairSlots>,
    log: Arc<Log>,
}

/// A handshake slot taken by [`TlsGate::admit`]; [`Handshake::run`] uses it.
pub struct Handshake {
    gate: TlsGate,
    slot: Slot,
    peer: SocketAddr,
    /// Told when another source took this slot (a cut before the handshake
    /// first ran is kept by the Notify).
    cut: Arc<Notify>,
}

/// Why a handshake gave no connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeEnd {
    /// The peer's doing (a scanner, a client that gave up): not a refusal.
    Failed(String),
    /// Not done within [`HELLO_DEADLINE`] (logged as a refusal).
    Deadline,
    /// Its slot went to a source below its share (logged as a refusal).
    Cut,
}

impl TlsGate {
    pub fn new(cfg: Arc<rustls::ServerConfig>, log: Arc<Log>) -> TlsGate {
        TlsGate { acceptor: TlsAcceptor::from(cfg), slots: FairSlots::new(MAX_TLS_HANDSHAKING), log }
    }

    /// A handshake slot for `peer` (after its connection quota), or why not.
    pub fn admit(&self, peer: SocketAddr) -> Result<Handshake, String> {
        let slot = match self.slots.take(peer.ip()) {
            Ok((slot, _)) => slot,
            Err(_) => {
                let held = self.slots.held_by(peer.ip());
                return Err(format!("{MAX_TLS_HANDSHAKING} connections are in their TLS handshake, {held} of them from your address (its share)"));
            }
        };
        let cut = Arc::new(Notify::new());
        let (c, log) = (cut.clone(), self.log.clone());
        self.slots.on_cut(
            &slot,
            Box::new(move || {
                c.notify_one();
                log.refused(peer, format!("TLS handshake cut after the {MAX_TLS_HANDSHAKING} handshake slots filled: another source needed its share"));
            }),
        );
        Ok(Handshake { gate: self.clone(), slot, peer, cut })
    }

    /// Handshakes in progress now.
    pub fn handshaking(&self) -> u32 {
        self.slots.total()
    }
}

impl Handshake {
    /// The handshake, within [`HELLO_DEADLINE`] and while its slot is not
    /// cut; the slot is given back when it ends.
    pub async fn run(self, tcp: TcpStream) -> Result<TlsStream<TcpStream>, HandshakeEnd> {
        let Handshake { gate, slot, peer, cut } = self;
        let r = tokio::select! {
            r = tokio::time::timeout(HELLO_DEADLINE, gate.acceptor.accept(tcp)) => match r {
                Ok(Ok(s)) => Ok(s),
                Ok(Err(e)) => Err(HandshakeEnd::Failed(e.to_string())),
                Err(_) => {
                    gate.log.refused(peer, format!("no complete TLS handshake within {} s", HELLO_DEADLINE.as_secs()));
                    Err(HandshakeEnd::Deadline)
                }
            },
            _ = cut.notified() => Err(HandshakeEnd::Cut),
        };
        drop(slot);
        r
    }
}

/// The protocol a TLS connection agreed on (ALPN): "h2" or "http/1.1".
pub fn alpn(s: &TlsStream<TcpStream>) -> &'static str {
    match s.get_ref().1.alpn_protocol() {
        Some(ALPN_H2) => "h2",
        _ => "http/1.1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_loads_and_bad_pem_says_which_file() {
        let (cfg, fp) = server_config(&RpmTls::SelfSigned { names: vec!["localhost".into(), "127.0.0.1".into()] }).unwrap();
        assert_eq!(cfg.alpn_protocols[0], b"h2");
        assert_eq!(fp.len(), 32 * 3 - 1);
        let e = server_config(&RpmTls::Pem { cert_chain: "hello".into(), key: "x".into() }).unwrap_err();
        assert!(e.starts_with("--rpm-cert: no CERTIFICATE"), "{e}");
        let ck = rcgen::generate_simple_self_signed(vec!["a.test".into()]).unwrap();
        let e = server_config(&RpmTls::Pem { cert_chain: ck.cert.pem(), key: "nope".into() }).unwrap_err();
        assert!(e.starts_with("--rpm-key"), "{e}");
        let other = rcgen::generate_simple_self_signed(vec!["b.test".into()]).unwrap();
        let e = server_config(&RpmTls::Pem { cert_chain: ck.cert.pem(), key: other.signing_key.serialize_pem() }).unwrap_err();
        assert!(e.contains("do not go together"), "{e}");
        server_config(&RpmTls::Pem { cert_chain: ck.cert.pem(), key: ck.signing_key.serialize_pem() }).unwrap();
    }
}
