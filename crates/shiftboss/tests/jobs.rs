//! `shiftboss jobs` as an operator runs it: a job whose handler (a real HTTP service on loopback)
//! refuses it is given up, archived, found in history, counted by a dry run and resubmitted; the
//! config file's sides and bad input.

mod common;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use common::bin;
use shiftboss_core::jobs::JobState;
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{JobRecord, JobRef, Store};
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A mail service that answers 422 while `refusing` is set, 200 after.
async fn mail_service(refusing: Arc<AtomicBool>) -> String {
    let app = Router::new().route(
        "/",
        post(move || {
            let refusing = refusing.clone();
            async move {
                if refusing.load(Ordering::SeqCst) {
                    (StatusCode::UNPROCESSABLE_ENTITY, "mailbox full")
                } else {
                    (StatusCode::OK, "{\"sent\":true}")
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn cli(db: &Path, config: &Path, args: &[&str]) -> Output {
    bin().arg("--db").arg(db).arg("--config").arg(config).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

async fn wait_for(store: &SqliteStore, key: &str, what: &str, ok: impl Fn(&JobRecord) -> bool) -> JobRecord {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(j) = store.find_job(JobRef::Key(key.into())).await.unwrap()
            && ok(&j)
        {
            return j;
        }
        assert!(Instant::now() < give_up, "job {key} never got {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_job_is_archived_found_in_history_and_resubmitted() {
    let dir = tempfile::tempdir().unwrap();
    let (db, config) = (dir.path().join("state.db"), dir.path().join("shiftboss.toml"));
    let refusing = Arc::new(AtomicBool::new(true));
    let url = mail_service(refusing.clone()).await;
    let toml = format!(
        "[archive]\ninterval = \"100ms\"\nafter = \"0s\"\n\n[client]\nbalance = \"round-robin\"\n\n\
         [outbound]\nallow = [\"127.0.0.1\"]\n\n[handlers.mail]\nbase_url = \"{url}\"\ntimeout = \"5s\"\n"
    );
    std::fs::write(&config, toml).unwrap();
    assert!(cli(&db, &config, &["migrate"]).status.success());
    let out = cli(
        &db,
        &config,
        &["jobs", "enqueue", "mail", "--params", r#"{"to":"ann@example.com"}"#, "--key", "welcome-1"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("job 1 (welcome-1) enqueued: mail, bucket 0"),
        "round robin starts at 0: {}",
        text(&out)
    );
    let bad = cli(&db, &config, &["jobs", "enqueue", "mail", "--params", "[1]"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("must be a JSON object"), "{}", text(&bad));

    let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
    let mut serve = bin()
        .arg("--db")
        .arg(&db)
        .arg("--config")
        .arg(&config)
        .args([
            "serve",
            "--listen",
            "off",
            "--instance-id",
            "s1",
            "--poll-interval",
            "50ms",
            "--supervisor-interval",
            "100ms",
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let store = SqliteStore::open(&db, &OpenOptions { create: false, ..OpenOptions::default() }).unwrap();
    let gone =
        wait_for(&store, "welcome-1", "archived as given up", |j| j.archived && j.state == JobState::GivenUp).await;
    assert!(gone.last_error.unwrap().contains("mailbox full"));
    let shown = text(&cli(&db, &config, &["tasks", "show", "welcome-1"]));
    assert!(shown.contains("(archived") && shown.contains("workflow job:mail v1: failed"), "{shown}");
    assert!(shown.contains("task.archived"), "{shown}");

    let hist = cli(&db, &config, &["jobs", "history", "--handler", "mail", "--reason", "mailbox", "--since", "1h"]);
    let h = text(&hist);
    assert!(hist.status.success() && h.contains("welcome-1") && h.contains("given_up"), "{h}");
    let none = cli(&db, &config, &["jobs", "history", "--handler", "sms"]);
    assert!(text(&none).contains("(no jobs)"), "{}", text(&none));
    let dry = cli(&db, &config, &["jobs", "resubmit", "--handler", "mail", "--dry-run"]);
    assert!(text(&dry).contains("1 given-up jobs match; none resubmitted"), "{}", text(&dry));
    assert!(
        store.find_job(JobRef::Key("welcome-1".into())).await.unwrap().unwrap().archived,
        "a dry run moves nothing"
    );

    refusing.store(false, Ordering::SeqCst);
    let real = cli(
        &db,
        &config,
        &["jobs", "resubmit", "--handler", "mail", "--reason", "mailbox", "--comment", "quota raised"],
    );
    assert!(text(&real).contains("1 given-up jobs match; 1 resubmitted"), "{}", text(&real));
    let done = wait_for(&store, "welcome-1", "succeeded", |j| j.state == JobState::Succeeded).await;
    assert_eq!(done.output, Some(serde_json::json!({"sent": true})));
    let show = cli(&db, &config, &["jobs", "show", "welcome-1"]);
    assert!(text(&show).contains("handler mail: succeeded"), "{}", text(&show));
    serve.kill().unwrap();
    serve.wait().unwrap();
}

#[test]
fn a_deployment_that_only_enqueues_switches_the_server_off() {
    let dir = tempfile::tempdir().unwrap();
    let (db, config) = (dir.path().join("state.db"), dir.path().join("client.toml"));
    std::fs::write(&config, "[server]\nenabled = false\n").unwrap();
    assert!(cli(&db, &config, &["migrate"]).status.success());
    let out = cli(&db, &config, &["serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("server side is switched off"), "{}", text(&out));
    assert!(cli(&db, &config, &["jobs", "enqueue", "mail"]).status.success(), "the client side works");
    let on =
        bin().arg("--db").arg(&db).args(["jobs", "list"]).env("SHIFTBOSS_CLIENT_BALANCE", "sideways").output().unwrap();
    assert!(on.status.success(), "list needs no balance: {}", text(&on));
    let bad = bin()
        .arg("--db")
        .arg(&db)
        .args(["jobs", "enqueue", "mail"])
        .env("SHIFTBOSS_CLIENT_BALANCE", "sideways")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("sideways"), "{}", text(&bad));
}
