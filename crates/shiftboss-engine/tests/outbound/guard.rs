//! The SSRF guard against real calls: every refused class, a name that resolves to loopback, a
//! redirect from an allowed host to the metadata address, the allow-list; redirects and bounds.

use crate::servers::http;
use crate::{agent_call, client};
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use reqwest::{Method, Url};
use shiftboss_engine::HttpAgent;
use shiftboss_engine::agent::{Agent, AgentError};
use shiftboss_engine::outbound::{CallError, Limits, Outbound, OutboundConfig, Request, Rule};

fn get_req(url: &str) -> Request {
    Request::new(Method::GET, Url::parse(url).unwrap())
}

async fn echo_headers(headers: HeaderMap) -> String {
    let map: serde_json::Map<String, serde_json::Value> =
        headers.iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").into())).collect();
    serde_json::Value::Object(map).to_string()
}

fn app() -> Router {
    Router::new()
        .route("/ok", get(|| async { "{\"ok\":true}" }))
        .route("/echo", any(echo_headers))
        .route(
            "/to-metadata",
            get(|| async { redirect(StatusCode::FOUND, "http://169.254.169.254/latest/meta-data/") }),
        )
        .route("/loop", get(|| async { redirect(StatusCode::FOUND, "/loop") }))
        .route("/big", get(|| async { vec![b'x'; 5 * 1024 * 1024] }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route(
            "/stream",
            get(|| async {
                let chunks = (0..64).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 1024]));
                axum::body::Body::from_stream(futures_util::stream::iter(chunks))
            }),
        )
}

fn redirect(status: StatusCode, to: &str) -> axum::response::Response {
    (status, [(header::LOCATION, to.to_owned())]).into_response()
}

#[tokio::test]
async fn every_refused_address_class_is_refused_by_default_naming_its_rule() {
    let base = http(app()).await;
    let port = Url::parse(&base).unwrap().port().unwrap();
    let guarded = client(&[]);
    // Literal addresses are refused before any connection, so nothing is sent to them.
    for (url, rule) in [
        (format!("{base}/ok"), Rule::Loopback),
        (format!("http://[::1]:{port}/ok"), Rule::Loopback),
        (format!("http://[::ffff:127.0.0.1]:{port}/ok"), Rule::Loopback),
        ("http://10.0.0.1/".into(), Rule::Private),
        ("http://172.16.0.1/".into(), Rule::Private),
        ("http://192.168.1.1/".into(), Rule::Private),
        ("http://169.254.169.254/latest/meta-data/".into(), Rule::LinkLocal),
        ("http://[fe80::1]/".into(), Rule::LinkLocal),
        ("http://[fd00::1]/".into(), Rule::UniqueLocal),
        ("http://224.0.0.1/".into(), Rule::Multicast),
        ("http://[ff02::1]/".into(), Rule::Multicast),
        ("http://0.0.0.0/".into(), Rule::Unspecified),
        ("http://[::]/".into(), Rule::Unspecified),
        // The URL parser reads a number as an IPv4 address: 2130706433 is 127.0.0.1.
        (format!("http://2130706433:{port}/ok"), Rule::Loopback),
    ] {
        match guarded.call(get_req(&url)).await {
            Err(CallError::Refused(r)) => {
                assert_eq!(r.rule, rule, "{url}");
                let text = CallError::Refused(r).to_string();
                assert!(text.contains(rule.name()) && text.contains("SSRF"), "{url}: {text}");
            }
            other => panic!("{url}: expected a refusal, got {other:?}"),
        }
    }
    // Through the agent, a refusal is permanent.
    let agent = HttpAgent::new(guarded);
    match agent.call(&agent_call(serde_json::json!({"method": "GET", "url": "http://169.254.169.254/"}))).await {
        Err(AgentError::Permanent(m)) => assert!(m.contains("link-local"), "{m}"),
        other => panic!("expected a permanent refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_unless_the_allow_list_opens_it() {
    let base = http(app()).await;
    let port = Url::parse(&base).unwrap().port().unwrap();
    let url = format!("http://localhost:{port}/ok");
    match client(&[]).call(get_req(&url)).await {
        Err(CallError::Refused(r)) => {
            assert_eq!((r.host.as_str(), r.rule), ("localhost", Rule::Loopback));
            assert!(r.addr.is_loopback());
        }
        other => panic!("expected localhost to be refused, got {other:?}"),
    }
    let resp = client(&["localhost"]).call(get_req(&url)).await.expect("the allow-list opens the name");
    assert_eq!(resp.status, 200);
    let resp = client(&["127.0.0.0/8"]).call(get_req(&format!("{base}/ok"))).await.expect("and a range its address");
    assert_eq!(resp.body, b"{\"ok\":true}");
}

#[tokio::test]
async fn a_redirect_from_an_allowed_host_to_the_metadata_address_is_refused() {
    let base = http(app()).await;
    let allowed = client(&["127.0.0.1"]);
    let mut req = get_req(&format!("{base}/to-metadata"));
    match allowed.call(req.clone()).await {
        Err(e @ CallError::RedirectNotFollowed { .. }) => {
            assert!(!e.is_transient());
            assert!(e.to_string().contains("169.254.169.254"), "{e}");
        }
        other => panic!("redirects are not followed unless allowed: {other:?}"),
    }
    req.follow_redirects = true;
    match allowed.call(req).await {
        Err(CallError::Refused(r)) => {
            assert_eq!((r.addr.to_string().as_str(), r.rule), ("169.254.169.254", Rule::LinkLocal))
        }
        other => panic!("the hop to the metadata address must be refused: {other:?}"),
    }
    let mut looping = get_req(&format!("{base}/loop"));
    looping.follow_redirects = true;
    assert_eq!(allowed.call(looping).await.unwrap_err(), CallError::TooManyRedirects { limit: 5 });
}

#[tokio::test]
async fn a_redirect_to_another_origin_does_not_carry_the_credentials() {
    let base = http(app()).await;
    let port = Url::parse(&base).unwrap().port().unwrap();
    let app2 = Router::new().route(
        "/hop",
        any(move || async move { redirect(StatusCode::TEMPORARY_REDIRECT, &format!("http://localhost:{port}/echo")) }),
    );
    let first = http(app2).await;
    let out = client(&["127.0.0.1", "localhost"]);
    let mut req = Request::new(Method::POST, Url::parse(&format!("{first}/hop")).unwrap());
    req.headers = vec![("Authorization".into(), "Bearer abc".into()), ("X-Plain".into(), "kept".into())];
    req.follow_redirects = true;
    let resp = out.call(req).await.unwrap();
    assert_eq!(resp.url.host_str(), Some("localhost"));
    let seen: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(seen.get("x-plain").and_then(|v| v.as_str()), Some("kept"));
    assert!(seen.get("authorization").is_none(), "credentials stay with the origin they were for: {seen}");
}

#[tokio::test]
async fn an_oversized_response_is_a_permanent_error_that_says_so() {
    let base = http(app()).await;
    let out = client(&["127.0.0.1"]);
    let e = out.call(get_req(&format!("{base}/big"))).await.unwrap_err();
    assert_eq!(e, CallError::TooLarge { limit: 4 * 1024 * 1024 }, "the default limit, from Content-Length");
    assert!(!e.is_transient() && e.to_string().contains("larger than the limit"), "{e}");

    // A streamed body with no length is cut at the limit as it is read.
    let small = Outbound::new(&OutboundConfig {
        allow: shiftboss_engine::outbound::AllowList::parse(["127.0.0.1"]).unwrap(),
        limits: Limits { max_response_bytes: 16 * 1024, ..Limits::default() },
        ..OutboundConfig::default()
    })
    .unwrap();
    assert_eq!(
        small.call(get_req(&format!("{base}/stream"))).await.unwrap_err(),
        CallError::TooLarge { limit: 16 * 1024 }
    );
    let agent = HttpAgent::new(small);
    match agent.call(&agent_call(serde_json::json!({"method": "GET", "url": format!("{base}/stream")}))).await {
        Err(AgentError::Permanent(m)) => assert!(m.contains("16384"), "{m}"),
        other => panic!("expected a permanent error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_call_ends_at_its_timeout_or_the_steps_deadline_whichever_is_first() {
    let base = http(app()).await;
    let out = client(&["127.0.0.1"]);
    let started = std::time::Instant::now();
    let mut req = get_req(&format!("{base}/slow"));
    req.timeout = Some(std::time::Duration::from_millis(200));
    let e = out.call(req).await.unwrap_err();
    assert!(matches!(e, CallError::Timeout(_)) && e.is_transient(), "{e:?}");
    let mut req = get_req(&format!("{base}/slow"));
    req.deadline = Some(tokio::time::Instant::now() + std::time::Duration::from_millis(200));
    assert!(matches!(out.call(req).await.unwrap_err(), CallError::Timeout(_)));
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
}
