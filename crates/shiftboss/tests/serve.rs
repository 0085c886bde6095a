//! `shiftboss serve` as real OS processes sharing one state store, and the configuration that
//! drives it.

mod common;

use common::{Serve, Service, bin};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{StepState, TaskState};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask};
use std::time::{Duration, Instant};

/// How many steps `instance` holds now, read over a connection of the test's own.
fn held_by(db: &std::path::Path, instance: &str) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    c.query_row("SELECT count(*) FROM steps WHERE state = 'processing' AND locked_by = ?1", [instance], |r| r.get(0))
        .unwrap()
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
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: format!("o-{i}"),
            workflow: "order".into(),
            version: None,
            input: serde_json::json!({"order_id": i}),
            priority: 0,
            actor: "test".into(),
        };
        store.submit_task(t).await.unwrap();
    }
    let service = Service::start(Duration::from_millis(3)).await;
    let logs = tempfile::tempdir().unwrap();
    // A fixed 64 steps at once: the repeats after the kill are bounded by them and the places of
    // answered steps' replies (below).
    let serve =
        |id: &str| Serve::new(db.to_str().unwrap(), id).service(&service.url).concurrency(64).spawn(logs.path());
    // Both hold work before it flows: while the service takes 1 s a call (under the steps' 2 s
    // complete-by), the first process to start fills its slots and leaves the rest due for the
    // other, however late that one starts (in CI one did everything alone before the other
    // claimed: every claim by p1).
    service.set_delay(Duration::from_secs(1));
    let mut p2 = serve("p2");
    let mut p1 = serve("p1");
    let give_up = Instant::now() + Duration::from_secs(60);
    while held_by(&db, "p1") == 0 || held_by(&db, "p2") == 0 {
        assert!(Instant::now() < give_up, "both processes never held work at once");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    service.set_delay(Duration::from_millis(3));

    // Kill p1 without warning once work is flowing and p1 holds some of it (on a loaded machine p2
    // alone could finish the first tasks while p1 was still starting), then start it again under
    // the same id.
    let give_up = Instant::now() + Duration::from_secs(60);
    while completed(&store).await < 60 || held_by(&db, "p1") == 0 {
        assert!(Instant::now() < give_up, "no progress, or p1 never claimed");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    p1.kill9();
    assert!(completed(&store).await < n, "killed with work left, or the test proves nothing");
    let mut p1 = serve("p1");
    while completed(&store).await < n {
        assert!(Instant::now() < give_up, "not every task finished: {:?}", store.task_counts().await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(p1.terminate().success());
    assert!(p2.terminate().success());

    let s = store.summarize().await.unwrap();
    assert_eq!(s.steps_in(StepState::Processed), 3 * n);
    let seen = service.keys();
    assert_eq!(seen.len() as u64, 3 * n, "one idempotency key per step");
    // Repeats only for steps p1 held when it was killed: those running (at most its 64 slots) and
    // those answered whose replies waited to be recorded (at most its places for them).
    let scheduler = shiftboss_engine::SchedulerConfig { concurrency: 64, ..Default::default() };
    let held = 64 + scheduler.reply_places() as u32;
    let repeats: u32 = seen.values().map(|k| k.requests - 1).sum();
    assert!(repeats <= held, "{repeats} repeated requests, more than the {held} steps p1 could hold");
    // Every repeat is a step released after the kill; not every released step is a repeat: p1 may
    // have claimed a step and died before its request went out (seen on a loaded machine).
    assert!(s.releases > 0, "p1 held steps when it was killed");
    assert!(u64::from(repeats) <= s.releases, "{repeats} repeats, {} steps released after the kill", s.releases);
    assert_eq!(s.expiries, 0, "no lease lapsed: the restarted p1 took its steps back");
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
