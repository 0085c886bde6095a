//! HTTPS: trusted through a CA bundle, refused without it; HTTP/2 when the server offers it;
//! client certificates (mTLS).

use crate::servers::{https, pki};
use axum::Router;
use axum::extract::Request as ServerRequest;
use axum::routing::get;
use reqwest::{Method, Url};
use shiftboss_engine::HttpAgent;
use shiftboss_engine::agent::{Agent, AgentError};
use shiftboss_engine::outbound::{AllowList, CallError, Outbound, OutboundConfig, Request, TlsConfig};

fn app() -> Router {
    Router::new().route("/version", get(|req: ServerRequest| async move { format!("{:?}", req.version()) }))
}

fn outbound(tls: TlsConfig) -> Outbound {
    let allow = AllowList::parse(["127.0.0.1"]).unwrap();
    Outbound::new(&OutboundConfig { allow, tls, ..OutboundConfig::default() }).unwrap()
}

fn get_version(base: &str) -> Request {
    Request::new(Method::GET, Url::parse(&format!("{base}/version")).unwrap())
}

#[tokio::test]
async fn https_is_trusted_with_the_ca_configured_over_http2_and_refused_without_it() {
    let pki = pki();
    let base = https(app(), &pki, false).await;

    let trusting = outbound(TlsConfig { ca_bundle: Some(pki.ca.clone()), ..TlsConfig::default() });
    let resp = trusting.call(get_version(&base)).await.expect("the CA bundle makes the server trusted");
    assert_eq!(resp.status, 200);
    assert_eq!(String::from_utf8_lossy(&resp.body), "HTTP/2.0", "the server offered h2 and it was taken");

    let e = outbound(TlsConfig::default()).call(get_version(&base)).await.unwrap_err();
    assert!(matches!(&e, CallError::Tls(m) if m.contains("not signed by a trusted CA")), "{e}");
    assert!(!e.is_transient(), "a certificate error will not pass by retrying");

    // Through the agent: a permanent error that says what failed.
    let agent = HttpAgent::new(outbound(TlsConfig::default()));
    let call = crate::agent_call(serde_json::json!({"method": "GET", "url": format!("{base}/version")}));
    match agent.call(&call).await {
        Err(AgentError::Permanent(m)) => assert!(m.contains("TLS") && m.contains("trusted CA"), "{m}"),
        other => panic!("expected a permanent TLS error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_bad_ca_bundle_is_named_when_the_client_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("bundle.pem");
    std::fs::write(&bogus, "not a certificate").unwrap();
    let cfg = OutboundConfig {
        tls: TlsConfig { ca_bundle: Some(bogus), ..TlsConfig::default() },
        ..OutboundConfig::default()
    };
    let e = Outbound::new(&cfg).unwrap_err().to_string();
    assert!(e.contains("bundle.pem") && e.contains("no PEM certificate"), "{e}");
    let half = TlsConfig { client_cert: Some(dir.path().join("c.pem")), ..TlsConfig::default() };
    let e = Outbound::new(&OutboundConfig { tls: half, ..OutboundConfig::default() }).unwrap_err().to_string();
    assert!(e.contains("client_key"), "{e}");
}

#[tokio::test]
async fn mtls_lets_in_the_client_with_a_certificate_from_the_servers_ca_only() {
    let pki = pki();
    let base = https(app(), &pki, true).await;
    let with =
        |cert, key| TlsConfig { ca_bundle: Some(pki.ca.clone()), client_cert: Some(cert), client_key: Some(key) };

    let resp = outbound(with(pki.client_cert.clone(), pki.client_key.clone())).call(get_version(&base)).await;
    assert_eq!(resp.expect("the client certificate is accepted").status, 200);

    for (who, tls) in [
        ("no certificate", TlsConfig { ca_bundle: Some(pki.ca.clone()), ..TlsConfig::default() }),
        ("a certificate from another CA", with(pki.stranger_cert.clone(), pki.stranger_key.clone())),
    ] {
        let e = outbound(tls).call(get_version(&base)).await.unwrap_err();
        assert!(matches!(&e, CallError::Tls(m) if m.contains("TLS")), "{who}: {e:?}");
        assert!(!e.is_transient(), "{who}: {e}");
    }
}
