//! `shiftboss serve`'s outbound calls as an operator runs them: the SSRF guard on by default,
//! `--allow-outbound` opening a service on this host, and a secret from the environment that
//! reaches the service and stays out of the store and serve's log.

mod common;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use common::bin;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{TaskId, TaskState};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask, TaskDetail};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

async fn ended(store: &SqliteStore, task: TaskId) -> TaskDetail {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let d = store.get_task(task).await.unwrap().unwrap();
        if d.task.state.is_terminal() {
            return d;
        }
        assert!(Instant::now() < give_up, "task {task} still {} after 30 s: {:#?}", d.task.state, d.steps);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn submit(store: &SqliteStore, key: &str) -> TaskId {
    let t = SubmitTask {
        domains: Default::default(),
        correlation_id: None,
        notify: None,
        key: key.into(),
        workflow: "hook".into(),
        version: None,
        input: serde_json::json!({}),
        priority: 0,
        actor: "test".into(),
    };
    store.submit_task(t).await.unwrap().task_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_guards_outbound_calls_by_default_and_resolves_secrets_from_its_environment() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let app = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap| {
            let log = log.clone();
            async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                log.lock().unwrap().push(auth);
                "{\"ok\":true}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let store = SqliteStore::open(&db, &OpenOptions::default()).unwrap();
    let wf = serde_json::json!({"name": "hook", "steps": [{"name": "call", "agent": "http", "timeout": "5s",
        "config": {"url": url, "headers": {"authorization": "Bearer ${secret.HOOK_TOKEN}"}}}]});
    store.register_workflow(&WorkflowDef::from_json(&wf.to_string()).unwrap()).await.unwrap();
    let secret = format!("hk-{:016x}", fastrand::u64(..));
    let serve = |allow: &[&str], log: &str| {
        let mut c = bin();
        c.arg("--db").arg(&db).args(["serve", "--listen", "off", "--instance-id", log, "--poll-interval", "50ms"]);
        c.args(allow).env("SHIFTBOSS_SECRET_HOOK_TOKEN", &secret).env("RUST_LOG", "debug");
        c.stdout(Stdio::null()).stderr(std::fs::File::create(dir.path().join(format!("{log}.log"))).unwrap());
        c.spawn().unwrap()
    };

    // Without an allow-list the service on loopback is refused, a permanent error naming the rule.
    let mut guarded = serve(&[], "guarded");
    let refused = ended(&store, submit(&store, "t-1").await).await;
    guarded.kill().unwrap();
    guarded.wait().unwrap();
    assert_eq!(refused.task.state, TaskState::Failed);
    let error = refused.steps[0].last_error.clone().unwrap_or_default();
    assert!(error.contains("loopback") && error.contains("SSRF"), "{error}");
    assert!(seen.lock().unwrap().is_empty(), "nothing reached the service");

    // Opened for 127.0.0.1, the call goes through with the secret from the environment.
    let mut open = serve(&["--allow-outbound", "127.0.0.1"], "open");
    let done = ended(&store, submit(&store, "t-2").await).await;
    open.kill().unwrap();
    open.wait().unwrap();
    assert_eq!(done.task.state, TaskState::Completed, "{:#?}", done.steps);
    assert_eq!(seen.lock().unwrap().as_slice(), [format!("Bearer {secret}")]);

    drop(store);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{} holds the secret", path.display());
    }
}
