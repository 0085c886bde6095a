//! `shiftboss serve` as real OS processes sharing one state store, and the configuration that
//! drives it.

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{StepState, TaskState};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shiftboss"));
    c.env_remove("SHIFTBOSS_DB").env_remove("SHIFTBOSS_CONFIG").stdin(Stdio::null());
    c
}

/// A service that answers after a few milliseconds and counts requests per idempotency key.
async fn start_service() -> (String, Arc<Mutex<HashMap<String, u32>>>) {
    let seen: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let app = Router::new()
        .route(
            "/{action}",
            post(|State(seen): State<Arc<Mutex<HashMap<String, u32>>>>, h: HeaderMap| async move {
                let key = h.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                *seen.lock().unwrap().entry(key).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(3)).await;
                "{\"ok\":true}"
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn serve(db: &Path, instance: &str, service: &str) -> Child {
    bin()
        .arg("--db")
        .arg(db)
        .args(["serve", "--instance-id", instance, "--agent", &format!("svc={service}")])
        .args(["--poll-interval", "50ms", "--supervisor-interval", "100ms", "--leader-ttl", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn terminate(child: &mut Child) -> std::process::ExitStatus {
    // SIGTERM: a graceful stop.
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    child.wait().unwrap()
}

async fn completed(store: &SqliteStore) -> u64 {
    let c = store.task_counts().await.unwrap();
    c.iter().find(|(s, _)| *s == TaskState::Completed).map_or(0, |(_, n)| *n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_share_the_work_and_survive_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let store = SqliteStore::open(&db, &OpenOptions::default()).unwrap();
    let wf = WorkflowDef::from_json(
        r#"{"name":"order","steps":[
            {"name":"a","agent":"svc","config":{"url":"/a"},"timeout":"2s"},
            {"name":"b","agent":"svc","config":{"url":"/b"},"timeout":"2s"},
            {"name":"c","agent":"svc","config":{"url":"/c"},"timeout":"2s"}],
            "retry":{"kind":"intervals","intervals":["10ms","10ms","10ms","10ms","10ms"]}}"#,
    )
    .unwrap();
    store.register_workflow(&wf).await.unwrap();
    let n = 400;
    for i in 0..n {
        let t = SubmitTask {
            key: format!("o-{i}"),
            workflow: "order".into(),
            version: None,
            input: serde_json::json!({"order_id": i}),
            priority: 0,
            actor: "test".into(),
        };
        store.submit_task(t).await.unwrap();
    }
    let (url, seen) = start_service().await;
    let mut p1 = serve(&db, "p1", &url);
    let mut p2 = serve(&db, "p2", &url);

    // Kill p1 without warning once work is flowing, then start it again under the same id.
    let give_up = Instant::now() + Duration::from_secs(60);
    while completed(&store).await < 60 {
        assert!(Instant::now() < give_up, "no progress");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    p1.kill().unwrap();
    p1.wait().unwrap();
    assert!(completed(&store).await < n, "killed with work left, or the test proves nothing");
    let mut p1 = serve(&db, "p1", &url);
    while completed(&store).await < n {
        assert!(Instant::now() < give_up, "not every task finished: {:?}", store.task_counts().await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(terminate(&mut p1).success());
    assert!(terminate(&mut p2).success());

    let s = store.summarize().await.unwrap();
    assert_eq!(s.steps_in(StepState::Processed), 3 * n);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len() as u64, 3 * n, "one idempotency key per step");
    // Repeats only for steps p1 held when it was killed: at most its concurrency, since a step
    // keeps its slot until its reply is recorded.
    let repeats: u32 = seen.values().map(|c| c - 1).sum();
    assert!(repeats <= 64, "{repeats} repeated requests");
    assert_eq!(u64::from(repeats), s.releases, "every repeat is a step released after the kill");
    // Both processes claimed work: the claims in the event log name both instances.
    let mut by = std::collections::HashSet::new();
    for id in 1..=n as i64 {
        for e in store.get_task(shiftboss_core::TaskId(id)).await.unwrap().unwrap().events {
            if e.kind == "step.claimed" {
                by.insert(e.actor);
            }
        }
    }
    assert!(by.contains("p1") && by.contains("p2"), "claims by {by:?}");
}

#[test]
fn migrate_creates_the_store_and_config_precedence_is_flag_env_file() {
    let dir = tempfile::tempdir().unwrap();
    let from_file = dir.path().join("from-file.db");
    let from_env = dir.path().join("from-env.db");
    let from_flag = dir.path().join("from-flag.db");
    let config = dir.path().join("shiftboss.toml");
    std::fs::write(&config, format!("db = \"sqlite:{}\"\n", from_file.display())).unwrap();

    let o = bin().arg("--config").arg(&config).arg("migrate").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("schema at version"));
    assert!(from_file.exists(), "the file's db was used");

    let o = bin().env("SHIFTBOSS_DB", &from_env).arg("--config").arg(&config).arg("migrate").output().unwrap();
    assert!(o.status.success());
    assert!(from_env.exists(), "the environment overrides the file");

    let o = bin()
        .env("SHIFTBOSS_DB", &from_env)
        .args(["--config"])
        .arg(&config)
        .arg("--db")
        .arg(&from_flag)
        .arg("migrate")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(from_flag.exists(), "the flag overrides both");
}

#[test]
fn a_bad_config_or_db_url_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[scheduler]\nconcurency = 4\n").unwrap();
    let o = bin().arg("--config").arg(&config).arg("migrate").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("concurency"));

    let o = bin().args(["--config", "/nonexistent/shiftboss.toml", "migrate"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("reading the config file"));

    let o = bin().args(["--db", "mysql://h/x", "migrate"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown scheme"));

    let db = dir.path().join("s.db");
    let o = bin().arg("--db").arg(&db).args(["serve", "--agent", "bad name=http://x"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = bin().arg("--db").arg(&db).args(["serve", "--poll-mode", "sometimes"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = bin().arg("--db").arg(&db).args(["serve", "--buckets", "3-999"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("out of range"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = bin().arg("--db").arg(&db).args(["serve", "--agent", "svc=ftp://x"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("only http://"), "{}", String::from_utf8_lossy(&o.stderr));
}
