//! The HTTP agent's cost per call: calls through `HttpAgent` (guard, secrets, bounds, TLS) to a
//! fast axum server on loopback, over plain HTTP and over HTTPS (HTTP/2 by ALPN, a CA made here),
//! beside the same calls with a bare reqwest client. Run it with
//! `cargo run --release -p shiftboss-engine --example outbound_calls -- [CALLS] [CONCURRENCY]`.
//! With `sink` it only serves: it prints the plain and HTTPS base URLs and the CA file, for a
//! `shiftboss serve --agent` to call, and runs until its standard input closes.

use axum::Router;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use shiftboss_engine::outbound::{AllowList, OutboundConfig, TlsConfig};
use shiftboss_engine::progress::Progress;
use shiftboss_engine::{Agent, AgentCall, HttpAgent, Outbound};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

fn app() -> Router {
    // The body is read: an HTTP/2 server that answers before reading it resets the stream, and h2
    // ends a connection after 1,024 such resets (its guard against rapid-reset floods).
    Router::new().fallback(|_: axum::body::Bytes| async { "{}" })
}

async fn plain() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app()).await.unwrap() });
    base
}

/// An HTTPS server with a certificate from a CA made here; its base URL and the CA's PEM file.
async fn tls(dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap().signed_by(&key, &issuer).unwrap();
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap(),
        )
        .unwrap();
    // OUTBOUND_H1=1: the server offers HTTP/1.1 only.
    config.alpn_protocols = if std::env::var_os("OUTBOUND_H1").is_some() {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", tcp.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(TlsListener { tcp, acceptor }, app()).await.unwrap() });
    (base, ca_path)
}

/// Completes the TLS handshake before axum sees the connection (the agent keeps its connections,
/// so handshakes are few).
struct TlsListener {
    tcp: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((s, addr)) = self.tcp.accept().await else { continue };
            if let Ok(tls) = self.acceptor.accept(s).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

fn call(url: &str) -> AgentCall {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    AgentCall {
        task_id: shiftboss_core::TaskId(1),
        step_id: shiftboss_core::StepId(1),
        step: "noop".into(),
        input: serde_json::json!({"k": "bench"}),
        config: serde_json::json!({"url": url}),
        idempotency_key: "k".into(),
        attempt: 1,
        try_number: 1,
        complete_by: shiftboss_core::Timestamp(0),
        deadline,
        progress: Progress::fixed(deadline),
        previous_progress: None,
    }
}

/// Calls per second over `calls` calls, `concurrency` at a time.
async fn run<F, Fut>(calls: usize, concurrency: usize, one: F) -> f64
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let one = Arc::new(one);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (one, next) = (one.clone(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < calls {
                    one().await;
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    calls as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::var_os("OUTBOUND_TRACE").is_some() {
        tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).with_writer(std::io::stderr).init();
    }
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (calls, concurrency) = (args.first().copied().unwrap_or(20_000), args.get(1).copied().unwrap_or(64));
    let dir = tempfile::tempdir().unwrap();
    let http_base = plain().await;
    let (https_base, ca) = tls(dir.path()).await;
    if std::env::args().nth(1).as_deref() == Some("sink") {
        println!("http {http_base}\nhttps {https_base}\nca {}", ca.display());
        let mut line = String::new();
        let _ =
            tokio::task::spawn_blocking(move || while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {})
                .await;
        return;
    }
    let allow = AllowList::parse(["127.0.0.1"]).unwrap();
    for (name, base, tls) in [
        ("http", http_base.clone(), TlsConfig::default()),
        ("https", https_base.clone(), TlsConfig { ca_bundle: Some(ca.clone()), ..TlsConfig::default() }),
    ] {
        let out = Outbound::new(&OutboundConfig { allow: allow.clone(), tls, ..OutboundConfig::default() }).unwrap();
        let agent = Arc::new(HttpAgent::new(out));
        let url = format!("{base}/noop");
        // Warm the pool, then measure.
        let c = call(&url);
        agent.call(&c).await.expect("the sink answers");
        let a = agent.clone();
        let rate = run(calls, concurrency, move || {
            let (a, c) = (a.clone(), call(&url));
            async move {
                a.call(&c).await.unwrap();
            }
        })
        .await;
        println!("HttpAgent {name:5}: {calls} calls, {concurrency} at a time: {rate:.0} calls/s");
    }
    // The same TLS setup (the workspace's reqwest has no crypto provider of its own), no guard.
    let tls = shiftboss_engine::outbound::tls::client_config(&TlsConfig::default()).unwrap();
    let bare = reqwest::Client::builder().tls_backend_preconfigured(tls).no_proxy().build().unwrap();
    let url = format!("{http_base}/noop");
    let rate = run(calls, concurrency, move || {
        let (b, u) = (bare.clone(), url.clone());
        async move {
            b.post(u).json(&serde_json::json!({"k": "bench"})).send().await.unwrap().bytes().await.unwrap();
        }
    })
    .await;
    println!("bare reqwest http: {calls} calls, {concurrency} at a time: {rate:.0} calls/s");
}
