//! TLS of the RPM client: its trust (the system's roots, extra CA files,
//! or none with `--insecure`), ALPN h2 then http/1.1. The server's side is
//! the serving stack's (`bloatlab_serve::tls`).
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;

pub use bloatlab_serve::tls::{fingerprint, provider, ALPN_H1, ALPN_H2};

/// The client's TLS configuration: ALPN h2 (load and self probes need
/// HTTP/2), then http/1.1.
/// With `pin` (a SHA-256 fingerprint), exactly that certificate is accepted,
/// whoever signed it; with `insecure`, any.
pub fn client_config(insecure: bool, ca_pem: Option<&str>, pin: Option<&str>) -> Result<Arc<rustls::ClientConfig>, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let mut cfg = if let Some(pin) = pin {
        let want = bloatlab_model::normalize_sha256(pin).ok_or_else(|| format!("--pin-sha256 {pin:?}: not a SHA-256 fingerprint"))?;
        builder.dangerous().with_custom_certificate_verifier(Arc::new(Pinned { want, provider: provider() })).with_no_client_auth()
    } else if insecure {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider()))).with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(pem) = ca_pem {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("--ca-file: not PEM certificates ({e})"))?;
            if certs.is_empty() {
                return Err("--ca-file: no CERTIFICATE block in the file".into());
            }
            for c in certs {
                roots.add(c).map_err(|e| format!("--ca-file: {e}"))?;
            }
        }
        if roots.is_empty() {
            return Err("no trusted certificates: the system has no CA store; give --ca-file or --insecure".into());
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    cfg.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_H1.to_vec()];
    Ok(Arc::new(cfg))
}

/// `--pin-sha256`: the certificate whose SHA-256 is `want` (64 lower-case
/// hex digits) and no other; names and dates are not checked (a pinned
/// self-signed certificate has only its key to vouch for it), the
/// handshake's signatures are.
#[derive(Debug)]
struct Pinned {
    want: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = fingerprint(end_entity).replace(':', "");
        if got == self.want {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!("the server's certificate has SHA-256 {}, not the pinned one", fingerprint(end_entity))))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        AnyCertificate(self.provider.clone()).verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        AnyCertificate(self.provider.clone()).verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// `--insecure`: any certificate is accepted (the handshake's signatures
/// are still checked, so the peer holds the key of the certificate it sent).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
