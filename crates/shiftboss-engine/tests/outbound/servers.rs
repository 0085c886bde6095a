//! Real servers on loopback for the outbound tests: plain HTTP, and HTTPS with a CA made here
//! (optionally asking for a client certificate signed by it).

use axum::Router;
use axum::serve::Listener;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A CA, a server certificate for localhost and 127.0.0.1, and a client certificate, as PEM files.
pub struct Pki {
    pub _dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A client certificate signed by another CA, which the server does not trust.
    pub stranger_cert: PathBuf,
    pub stranger_key: PathBuf,
}

fn ca(name: &str) -> (rcgen::Certificate, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let cert = p.self_signed(&key).unwrap();
    (cert, Issuer::new(p, key))
}

fn leaf(issuer: &Issuer<'static, KeyPair>, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, names[0]);
    p.extended_key_usages = vec![purpose];
    let cert = p.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

pub fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (ca_cert, issuer) = ca("shiftboss test CA");
    let (server_cert, server_key) = leaf(&issuer, &["localhost", "127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let (client_cert, client_key) = leaf(&issuer, &["client.test"], ExtendedKeyUsagePurpose::ClientAuth);
    let (_, other) = ca("another CA");
    let (stranger_cert, stranger_key) = leaf(&other, &["stranger.test"], ExtendedKeyUsagePurpose::ClientAuth);
    Pki {
        ca: write("ca.pem", &ca_cert.pem()),
        server_cert: write("server.pem", &server_cert),
        server_key: write("server.key", &server_key),
        client_cert: write("client.pem", &client_cert),
        client_key: write("client.key", &client_key),
        stranger_cert: write("stranger.pem", &stranger_cert),
        stranger_key: write("stranger.key", &stranger_key),
        _dir: dir,
    }
}

/// Serves `app` over plain HTTP on 127.0.0.1; its base URL.
pub async fn http(app: Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// Serves `app` over HTTPS (HTTP/2 or HTTP/1.1 by ALPN) on 127.0.0.1 with the PKI's server
/// certificate; with `client_auth`, only clients with a certificate from the PKI's CA get in.
pub async fn https(app: Router, pki: &Pki, client_auth: bool) -> String {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder =
        rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().unwrap();
    let builder = if client_auth {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_file(&pki.ca).unwrap()).unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let chain = CertificateDer::pem_file_iter(&pki.server_cert).unwrap().map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_file(&pki.server_key).unwrap();
    let mut config = builder.with_single_cert(chain, key).unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", tcp.local_addr().unwrap());
    let listener = TlsListener { tcp, acceptor: TlsAcceptor::from(Arc::new(config)) };
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// A TCP listener that completes a TLS handshake before handing the connection to axum; a
/// connection whose handshake fails (the tests' refused clients) is dropped.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else { continue };
            let handshake = tokio::time::timeout(Duration::from_secs(5), self.acceptor.accept(stream));
            if let Ok(Ok(tls)) = handshake.await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
