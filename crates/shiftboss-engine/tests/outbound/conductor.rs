//! Conductor's HTTP task end to end: imported, run by the engine's HTTP agent against a real
//! server, its output in Conductor's shape and read by the workflow's output as in Conductor; and
//! the same guard as every outbound call.

use crate::servers::http;
use crate::{ended, engine_config, submit};
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};
use shiftboss_conductor::from_conductor;
use shiftboss_core::{InstanceId, TaskState};
use shiftboss_engine::{Engine, HttpAgent};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::Store;
use std::sync::Arc;

fn workflow(name: &str, uri: &str) -> String {
    json!({
        "name": name, "version": 1, "schemaVersion": 2,
        "tasks": [{
            "name": "notify_customer", "taskReferenceName": "notify", "type": "HTTP",
            "inputParameters": {"http_request": {
                "uri": uri, "method": "POST",
                "headers": {"X-Team": "orders"},
                "accept": "application/json", "contentType": "application/json",
                "connectionTimeOut": 2000, "readTimeOut": 3000,
                "body": {"orderId": "${workflow.input.orderId}"}
            }}
        }],
        "outputParameters": {
            "status": "${notify.output.response.statusCode}",
            "accepted": "${notify.output.response.body.accepted}",
            "orderId": "${notify.output.response.body.orderId}"
        }
    })
    .to_string()
}

/// An engine with the agent `http` that imported HTTP tasks name, with the deployment's guard
/// (loopback opened for the tests' servers).
fn http_engine(store: &Arc<dyn Store>) -> Engine {
    Engine::builder(store.clone(), InstanceId::new("e1").unwrap())
        .agent("http", HttpAgent::new(crate::client(&["127.0.0.1"])))
        .config(engine_config())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductors_http_task_runs_through_the_http_agent_with_conductors_output() {
    let app = Router::new().route(
        "/notify",
        post(|headers: HeaderMap, body: String| async move {
            let sent: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let team = headers.get("x-team").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            let accept = headers.get("accept").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            (
                [("x-request-id", "r-1"), ("content-type", "application/json")],
                json!({"accepted": team == "orders" && accept == "application/json", "orderId": sent["orderId"]})
                    .to_string(),
            )
        }),
    );
    let base = http(app).await;
    let ok = from_conductor(&workflow("notify_flow", &format!("{base}/notify"))).unwrap();
    let guarded = from_conductor(&workflow("metadata_flow", "http://169.254.169.254/latest/meta-data/")).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
    let engine = http_engine(&store);
    engine.register_workflow(&ok.workflow).await.unwrap();
    engine.register_workflow(&guarded.workflow).await.unwrap();
    let running = engine.start();

    let task = engine.submit(submit("o-1", "notify_flow", json!({"orderId": "A1"}))).await.unwrap().task_id;
    let d = ended(store.as_ref(), task).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    assert_eq!(d.task.output, Some(json!({"status": 200, "accepted": true, "orderId": "A1"})));
    let out = d.steps[0].output.clone().unwrap();
    assert_eq!(out["response"]["headers"]["x-request-id"], json!(["r-1"]), "{out}");
    assert_eq!(out["response"]["reasonPhrase"], json!("OK"));

    let task = engine.submit(submit("o-2", "metadata_flow", json!({"orderId": "B2"}))).await.unwrap().task_id;
    let d = ended(store.as_ref(), task).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let error = d.steps[0].last_error.clone().unwrap_or_default();
    assert!(error.contains("link-local") && error.contains("169.254.169.254"), "{error}");
    running.shutdown().await;
}

/// An HTTP task whose uri, method and a header are made from the workflow's input at run time.
fn templated(name: &str, base: &str) -> String {
    json!({
        "name": name, "version": 1, "schemaVersion": 2,
        "tasks": [{
            "name": "fetch_order", "taskReferenceName": "fetch", "type": "HTTP",
            "inputParameters": {"http_request": {
                "uri": format!("{base}/orders/${{workflow.input.orderId}}?lang=${{workflow.input.lang}}"),
                "method": "${workflow.input.verb}",
                "headers": {"X-Tenant": "${workflow.input.tenant}", "X-Team": "orders"}
            }}
        }],
        "outputParameters": {"seen": "${fetch.output.response.body}"}
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_tasks_uri_method_and_headers_may_come_from_the_workflows_input() {
    let app = Router::new().route(
        "/orders/{id}",
        axum::routing::any(
            |method: axum::http::Method,
             axum::extract::Path(id): axum::extract::Path<String>,
             uri: axum::http::Uri,
             headers: HeaderMap| async move {
                let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                axum::Json(json!({
                    "method": method.as_str(), "id": id, "query": uri.query(),
                    "tenant": h("x-tenant"), "team": h("x-team"),
                }))
            },
        ),
    );
    let base = http(app).await;
    let imported = from_conductor(&templated("fetch_flow", &base)).unwrap();
    let step = &imported.workflow.steps[0];
    assert_eq!(step.config["input"], json!("request"), "{:?}", step.config);
    assert!(step.config.get("url").is_none(), "the url is made at run time: {:?}", step.config);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
    let engine = http_engine(&store);
    engine.register_workflow(&imported.workflow).await.unwrap();
    let running = engine.start();

    let input = json!({"orderId": "A-7", "lang": "it", "verb": "put", "tenant": "acme"});
    let task = engine.submit(submit("f-1", "fetch_flow", input)).await.unwrap().task_id;
    let d = ended(store.as_ref(), task).await;
    assert_eq!(d.task.state, TaskState::Completed, "{:#?}", d.steps);
    let seen = &d.task.output.as_ref().unwrap()["seen"];
    assert_eq!(
        seen,
        &json!({"method": "PUT", "id": "A-7", "query": "lang=it", "tenant": "acme", "team": "orders"}),
        "{seen}"
    );

    // A whole url made from the input is checked as it is made: the guard refuses the metadata
    // address, and a scheme other than http(s) is refused.
    let other = json!({
        "name": "probe_flow", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "probe", "taskReferenceName": "probe", "type": "HTTP",
            "inputParameters": {"http_request": {"uri": "${workflow.input.target}"}}}]
    })
    .to_string();
    engine.register_workflow(&from_conductor(&other).unwrap().workflow).await.unwrap();
    let input = json!({"target": "http://169.254.169.254/latest/meta-data/"});
    let task = engine.submit(submit("p-1", "probe_flow", input)).await.unwrap().task_id;
    let d = ended(store.as_ref(), task).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let error = d.steps[0].last_error.clone().unwrap_or_default();
    assert!(error.contains("169.254.169.254"), "{error}");
    let input = json!({"target": "ftp://127.0.0.1/x"});
    let task = engine.submit(submit("p-2", "probe_flow", input)).await.unwrap().task_id;
    let d = ended(store.as_ref(), task).await;
    assert_eq!(d.task.state, TaskState::Failed);
    assert!(d.steps[0].last_error.clone().unwrap_or_default().contains("only http"), "{:?}", d.steps[0].last_error);
    running.shutdown().await;
}
