//! A secret named in a step's header and body reaches the service, and is found nowhere after
//! the run: not in the store (every byte of the SQLite files: tasks, steps, inputs, configs,
//! outputs, events), not in what the store's reads answer, not in the logs, not in an error.

use crate::servers::http;
use crate::{ended, engine_config, submit};
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::json;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskState};
use shiftboss_engine::outbound::{AllowList, OutboundConfig, Secrets};
use shiftboss_engine::{Engine, HttpAgent, Outbound};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::Store;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// Log lines, captured.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_used_in_a_header_is_found_nowhere_after_the_run() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let secret = format!("sk-live-{:016x}", fastrand::u64(..));
    let received = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = received.clone();
    // The service echoes what it was sent, and refuses the second call quoting the token: both
    // come back to the engine, which must scrub them.
    let app = Router::new()
        .route(
            "/charge",
            post(move |headers: HeaderMap, body: String| {
                let seen = seen.clone();
                async move {
                    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                    let first = {
                        let mut seen = seen.lock().unwrap();
                        seen.push(auth.clone());
                        seen.len() == 1
                    };
                    if first {
                        // A transient fault the runtime logs before it tries again.
                        return (StatusCode::SERVICE_UNAVAILABLE, format!("busy, {auth}"));
                    }
                    (StatusCode::OK, json!({"you_sent": auth, "body": body}).to_string())
                }
            }),
        )
        .route(
            "/refund",
            post(|headers: HeaderMap| async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                (StatusCode::BAD_REQUEST, format!("token {auth} may not refund"))
            }),
        );
    let base = http(app).await;

    let dir = tempfile::tempdir().unwrap();
    let secrets_dir = tempfile::tempdir().unwrap();
    std::fs::write(secrets_dir.path().join("PAY_TOKEN"), format!("{secret}\n")).unwrap();
    let outbound = Outbound::new(&OutboundConfig {
        allow: AllowList::parse(["127.0.0.1"]).unwrap(),
        secrets: Secrets { env: false, dir: Some(secrets_dir.path().to_owned()) },
        ..OutboundConfig::default()
    })
    .unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
    let engine = Engine::builder(store.clone(), InstanceId::new("e1").unwrap())
        .agent("pay", HttpAgent::for_service(&base, outbound).unwrap())
        .config(engine_config())
        .build()
        .unwrap();
    let auth = json!({"authorization": "Bearer ${secret.PAY_TOKEN}"});
    let def = WorkflowDef::from_json(
        &json!({"name": "pay", "version": 1, "steps": [
            {"name": "charge", "agent": "pay", "timeout": "10s",
             "config": {"url": "/charge", "headers": auth, "body": {"note": "key ${secret.PAY_TOKEN} inside"}}},
            {"name": "refund", "agent": "pay", "timeout": "10s",
             "config": {"url": "/refund", "headers": auth}},
        ]})
        .to_string(),
    )
    .unwrap();
    engine.register_workflow(&def).await.unwrap();
    let running = engine.start();
    let task = engine.submit(submit("t-1", "pay", json!({"amount": 5}))).await.unwrap().task_id;
    let d = ended(store.as_ref(), task).await;
    running.shutdown().await;

    let bearer = format!("Bearer {secret}");
    assert_eq!(received.lock().unwrap().as_slice(), [bearer.clone(), bearer], "the service got the secret, twice");
    assert_eq!(d.task.state, TaskState::Failed, "the refund was refused: {:#?}", d.steps);
    let charge = d.steps.iter().find(|s| s.name == "charge").unwrap();
    assert_eq!(charge.output.as_ref().unwrap()["you_sent"], json!("Bearer [secret]"), "scrubbed from the output");
    let body: serde_json::Value =
        serde_json::from_str(charge.output.as_ref().unwrap()["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["note"], json!("key [secret] inside"), "the config's body carried it, and it came back scrubbed");
    let refund = d.steps.iter().find(|s| s.name == "refund").unwrap();
    let error = refund.last_error.clone().unwrap_or_default();
    assert!(error.contains("HTTP 400") && error.contains("[secret]"), "scrubbed from the error: {error}");

    // Nowhere: what the store's reads answer ...
    let answers = format!("{d:?} {:?}", store.list_tasks(Default::default()).await.unwrap());
    assert!(!answers.contains(&secret), "a store read holds the secret");
    // ... every byte the store wrote (the database, its WAL) ...
    drop(store);
    drop(engine);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{} holds the secret", path.display());
    }
    // ... and the logs, which did record the run.
    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logs.contains("transient fault") && logs.contains("busy, Bearer [secret]"), "the fault was logged: {logs}");
    assert!(!logs.contains(&secret), "the logs hold the secret");
}

#[tokio::test]
async fn a_secret_reference_from_a_task_is_sent_as_it_is() {
    // Whoever submits a task writes its input (and may choose a job's key), not the definition:
    // a reference there must not read a secret out.
    let app = Router::new().route(
        "/echo",
        post(|headers: HeaderMap, body: String| async move {
            let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            json!({"key": key, "body": body}).to_string()
        }),
    );
    let base = http(app).await;
    let secrets_dir = tempfile::tempdir().unwrap();
    std::fs::write(secrets_dir.path().join("PAY_TOKEN"), "the-value").unwrap();
    let outbound = Outbound::new(&OutboundConfig {
        allow: AllowList::parse(["127.0.0.1"]).unwrap(),
        secrets: Secrets { env: false, dir: Some(secrets_dir.path().to_owned()) },
        ..OutboundConfig::default()
    })
    .unwrap();
    let agent = HttpAgent::new(outbound);
    let mut call = crate::agent_call(json!({"url": format!("{base}/echo")}));
    call.input = json!({"steal": "${secret.PAY_TOKEN}"});
    call.idempotency_key = "${secret.PAY_TOKEN}".into();
    let out = shiftboss_engine::Agent::call(&agent, &call).await.unwrap();
    assert_eq!(out["key"], json!("${secret.PAY_TOKEN}"));
    assert!(out["body"].as_str().unwrap().contains("${secret.PAY_TOKEN}"), "{out}");
    assert!(!out.to_string().contains("the-value"), "{out}");
}
