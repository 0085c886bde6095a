//! TLS for outbound calls: rustls with the ring provider, the system's roots (through
//! rustls-platform-verifier, what reqwest's own rustls mode uses) plus an optional CA bundle, an
//! optional client certificate (mTLS), TLS 1.2 and 1.3, and ALPN offering HTTP/2 then HTTP/1.1.
//!
//! We build the rustls config ourselves, rather than through reqwest's switches, to choose the
//! provider (ring: reqwest's default, aws-lc, is a long C build on a 2-core machine) and to
//! read PEM files with errors that name the file.

use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The TLS settings of one set of outbound calls (global, or one agent's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// A PEM file of CA certificates trusted besides the system's roots.
    pub ca_bundle: Option<PathBuf>,
    /// A PEM certificate chain and its key, presented to servers that ask (mTLS).
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

/// A TLS setting that cannot be used, naming the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {what} {path}: {problem}")]
    File { what: &'static str, path: String, problem: String },
    #[error("client_cert and client_key go together: {0} is missing")]
    HalfIdentity(&'static str),
    #[error("the trusted roots: {0} (install the system's CA certificates, or give a ca_bundle)")]
    Roots(String),
    #[error("the TLS provider: {0}")]
    Provider(String),
    #[error("the client certificate {path}: {problem}")]
    Identity { path: String, problem: String },
}

fn file_error(what: &'static str, path: &Path, problem: impl std::fmt::Display) -> TlsError {
    TlsError::File { what, path: path.display().to_string(), problem: problem.to_string() }
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(what, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(what, path, e))?;
    if certs.is_empty() {
        return Err(file_error(what, path, "no PEM certificate in it"));
    }
    Ok(certs)
}

/// The rustls client config for `cfg`.
pub fn client_config(cfg: &TlsConfig) -> Result<rustls::ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let extra = match &cfg.ca_bundle {
        Some(path) => certificates("the CA bundle", path)?,
        None => Vec::new(),
    };
    let verifier: Arc<dyn ServerCertVerifier> = Arc::new(
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
            .map_err(|e| TlsError::Roots(e.to_string()))?,
    );
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Provider(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match (&cfg.client_cert, &cfg.client_key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => return Err(TlsError::HalfIdentity("client_key")),
        (None, Some(_)) => return Err(TlsError::HalfIdentity("client_cert")),
        (Some(cert), Some(key_path)) => {
            let chain = certificates("the client certificate", cert)?;
            let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| file_error("the client key", key_path, e))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Identity { path: cert.display().to_string(), problem: e.to_string() })?
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// If `err` (or what caused it) is a TLS failure, a sentence saying what failed.
pub fn describe(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(err);
    while let Some(e) = next {
        // io::Error's source() skips the error it wraps, where rustls puts its own (sometimes
        // in an io::Error inside another): look inside.
        let mut inner = e;
        while let Some(io) = inner.downcast_ref::<std::io::Error>()
            && let Some(wrapped) = io.get_ref()
        {
            inner = wrapped;
        }
        if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
            return Some(sentence(tls));
        }
        // HTTP/2 keeps only the text of an I/O error that ended a connection, so an alert the
        // server sent after the handshake (TLS 1.3 checks client certificates then) is known by
        // rustls's wording.
        let text = e.to_string();
        if let Some(at) = text.find("received fatal alert: ") {
            let alert = text[at + "received fatal alert: ".len()..].split([' ', ',', ')']).next().unwrap_or("");
            return Some(refused_by_server(alert));
        }
        next = e.source();
    }
    None
}

fn sentence(e: &rustls::Error) -> String {
    use rustls::{CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(C::UnknownIssuer) => {
            "TLS: the server's certificate is not signed by a trusted CA (add its CA with ca_bundle)".into()
        }
        E::InvalidCertificate(C::NotValidForName) | E::InvalidCertificate(C::NotValidForNameContext { .. }) => {
            "TLS: the server's certificate is not valid for this host name".into()
        }
        E::InvalidCertificate(C::Expired) | E::InvalidCertificate(C::ExpiredContext { .. }) => {
            "TLS: the server's certificate has expired".into()
        }
        E::InvalidCertificate(c) => format!("TLS: the server's certificate was refused: {c:?}"),
        E::AlertReceived(a) => refused_by_server(&format!("{a:?}")),
        other => format!("TLS: {other}"),
    }
}

fn refused_by_server(alert: &str) -> String {
    format!("TLS: the server refused the connection (alert {alert}: it may want a client certificate it trusts)")
}
