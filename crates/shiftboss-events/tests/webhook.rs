//! Webhook sinks against a real HTTP server on loopback: the POST carries the message and the
//! idempotency key, goes through the SSRF guard, resolves secrets in headers and keeps them out
//! of what the engine stores.

mod common;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use common::{Harness, agent, call, the_step};
use serde_json::{Value, json};
use shiftboss_core::TaskState;
use shiftboss_engine::agent::Agent;
use shiftboss_engine::outbound::Secrets;
use shiftboss_engine::{AgentError, OutboundConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the receiver was sent.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    idempotency_key: String,
    authorization: String,
    body: Value,
}

/// A receiver on 127.0.0.1: `/hook` takes the message (echoing the authorization header, which
/// the engine must scrub), `/refuse` answers 422 quoting it, `/busy` answers 503.
async fn receiver() -> (String, Arc<Mutex<Vec<Received>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let record = |path: &'static str, status: StatusCode, log: Arc<Mutex<Vec<Received>>>| {
        post(move |headers: HeaderMap, body: String| async move {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            let authorization = header("authorization");
            log.lock().unwrap().push(Received {
                path: path.to_owned(),
                idempotency_key: header("idempotency-key"),
                authorization: authorization.clone(),
                body: serde_json::from_str(&body).unwrap_or(Value::Null),
            });
            (status, format!("{{\"seen\": \"{authorization}\"}}"))
        })
    };
    let app = Router::new()
        .route("/hook", record("/hook", StatusCode::OK, log.clone()))
        .route("/refuse", record("/refuse", StatusCode::UNPROCESSABLE_ENTITY, log.clone()))
        .route("/busy", record("/busy", StatusCode::SERVICE_UNAVAILABLE, log.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, log)
}

/// Loopback opened, and secrets from a directory of this test's own.
fn outbound_with_secret(dir: &std::path::Path, name: &str, value: &str) -> OutboundConfig {
    std::fs::write(dir.join(name), value).unwrap();
    OutboundConfig { secrets: Secrets { env: false, dir: Some(dir.to_owned()) }, ..OutboundConfig::allowing_loopback() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_gets_the_message_the_key_and_the_secret_which_is_stored_nowhere() {
    let (base, log) = receiver().await;
    let secrets = tempfile::tempdir().unwrap();
    let token = format!("tok-{:016x}", std::process::id() as u64 * 7919 + 13);
    let h = Harness::start(agent(common::NATS_URL, outbound_with_secret(secrets.path(), "HOOK_TOKEN", &token))).await;
    let headers = json!({"authorization": "Bearer ${secret.HOOK_TOKEN}"});
    let sink = format!("webhook:{base}/hook");
    h.register("notify", json!({"sink": sink, "headers": headers}), json!({"order": "${task.input.order}"}))
        .await
        .unwrap();
    h.register("notify_refused", json!({"sink": format!("webhook:{base}/refuse"), "headers": headers}), json!({}))
        .await
        .unwrap();

    let d = h.run("notify", "order-9", json!({"order": "B-9"})).await;
    let step = the_step(&d);
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    let got = log.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].path, "/hook");
    assert_eq!(got[0].body, json!({"order": "B-9"}));
    assert_eq!(got[0].idempotency_key, step.idempotency_key);
    assert_eq!(got[0].authorization, format!("Bearer {token}"), "the secret reaches the receiver resolved");
    assert_eq!(
        step.output,
        Some(json!({
            "event_produced": sink,
            "sink": sink,
            "workflowInstanceId": d.task.id.to_string(),
            "payload": {"order": "B-9"},
        }))
    );
    assert!(!format!("{d:?}").contains(&token), "the secret is in the stored task: {d:#?}");

    // A refusal that quotes the secret: the step's error keeps the refusal, not the secret.
    let d = h.run("notify_refused", "order-10", json!({})).await;
    h.stop().await;
    let step = the_step(&d);
    assert_eq!(d.task.state, TaskState::Failed, "{:#?}", d.steps);
    let error = step.last_error.clone().unwrap_or_default();
    assert!(error.contains("422") && error.contains("[secret]"), "{error}");
    assert!(!format!("{d:?}").contains(&token), "the secret is in the stored task: {d:#?}");
    assert_eq!(log.lock().unwrap().len(), 2, "the refusal was not retried");
}

#[tokio::test]
async fn loopback_is_refused_unless_the_allow_list_opens_it() {
    let (base, log) = receiver().await;
    // The default allow-list: loopback shut.
    let a = agent(common::NATS_URL, OutboundConfig::default());
    let c = call(json!({"sink": format!("webhook:{base}/hook")}), json!({"x": 1}), "k-1", Duration::from_secs(5));
    match a.call(&c).await {
        Err(AgentError::Permanent(m)) => assert!(m.contains("loopback") && m.contains("SSRF guard"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(log.lock().unwrap().is_empty(), "the guard let a request through");

    // Opened, the same call goes.
    let a = agent(common::NATS_URL, OutboundConfig::allowing_loopback());
    let out = a.call(&c).await.unwrap();
    assert_eq!(out["payload"], json!({"x": 1}));
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn answers_are_sorted_as_the_http_agent_sorts_them() {
    let (base, _log) = receiver().await;
    let a = agent(common::NATS_URL, OutboundConfig::allowing_loopback());
    let to =
        |path: &str| call(json!({"sink": format!("webhook:{base}{path}")}), json!({}), "k", Duration::from_secs(5));
    match a.call(&to("/busy")).await {
        Err(AgentError::Transient(m)) => assert!(m.contains("503"), "{m}"),
        other => panic!("503: {other:?}"),
    }
    match a.call(&to("/refuse")).await {
        Err(AgentError::Permanent(m)) => assert!(m.contains("422"), "{m}"),
        other => panic!("422: {other:?}"),
    }
    // A missing secret: the definition's fault, not the receiver's.
    let c = call(
        json!({"sink": format!("webhook:{base}/hook"), "headers": {"authorization": "${secret.NOT_SET_ANYWHERE}"}}),
        json!({}),
        "k",
        Duration::from_secs(5),
    );
    match a.call(&c).await {
        Err(AgentError::Permanent(m)) => assert!(m.contains("NOT_SET_ANYWHERE") && m.contains("not set"), "{m}"),
        other => panic!("missing secret: {other:?}"),
    }
}
