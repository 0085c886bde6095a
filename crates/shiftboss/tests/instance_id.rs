//! Two `shiftboss serve` processes on one host and one store never run under one instance id: the
//! second takes an id of its own when neither names one, keeps it across a restart, and is refused
//! when it names the id of a live process. Neither releases the steps the other holds.

mod common;

use common::{Serve, ServeProc, Service, bin, order_workflow};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask};
use std::path::Path;
use std::time::{Duration, Instant};

/// The ids of the steps `instance` holds now, read over a connection of the test's own.
fn held_by(db: &Path, instance: &str) -> Vec<i64> {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    let mut st = c.prepare("SELECT id FROM steps WHERE state = 'processing' AND locked_by = ?1 ORDER BY id").unwrap();
    st.query_map([instance], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
}

/// `step.released` events (a scheduler returning claims at its start) of these steps.
fn released(db: &Path, steps: &[i64]) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    steps
        .iter()
        .map(|s| {
            c.query_row("SELECT count(*) FROM events WHERE kind = 'step.released' AND step_id = ?1", [s], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
        })
        .sum()
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn started(mut p: ServeProc) -> (ServeProc, String) {
    p.wait_ready().await;
    let id = p.announced_instance().expect("the process announces its id");
    (p, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_serve_process_gets_its_own_id_and_neither_releases_the_others_claims() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let store = SqliteStore::open(&db, &OpenOptions::default()).unwrap();
    store.register_workflow(&order_workflow("60s")).await.unwrap();
    for i in 0..4 {
        let t = SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: format!("o-{i}"),
            workflow: "order".into(),
            version: None,
            input: serde_json::json!({}),
            priority: 0,
            actor: "test".into(),
        };
        store.submit_task(t).await.unwrap();
    }
    // Calls that outlast the test: every step claimed stays held by its claimer.
    let service = Service::start(Duration::from_secs(120)).await;
    let logs = tempfile::tempdir().unwrap();
    let serve = |label: &str| {
        Serve::new(db.to_str().unwrap(), label)
            .service(&service.url)
            .concurrency(2)
            .default_instance_id()
            .spawn(logs.path())
    };

    let (_a, a_id) = started(serve("a")).await;
    wait_until("a to hold two steps", || held_by(&db, &a_id).len() == 2).await;
    let a_steps = held_by(&db, &a_id);

    // b names no id either: before, both ran as the host name and b released a's steps at start.
    let (mut b, b_id) = started(serve("b")).await;
    assert_ne!(b_id, a_id, "two live processes on one store share an id");
    assert!(b.log().contains("is in use by another serve process"), "b says why it took another id:\n{}", b.log());
    wait_until("b to hold the other two steps", || held_by(&db, &b_id).len() == 2).await;
    assert_eq!(held_by(&db, &a_id), a_steps, "a keeps its steps while b starts");
    assert_eq!(released(&db, &a_steps), 0, "b released a's claims");

    // b crashes and comes back under the id it had, taking back its own steps and only those.
    let b_steps = held_by(&db, &b_id);
    b.kill9();
    let (_b, b_again) = started(serve("b-again")).await;
    assert_eq!(b_again, b_id, "a restarted process keeps its id");
    wait_until("b's steps to be released by b itself", || released(&db, &b_steps) == b_steps.len() as i64).await;
    assert_eq!(held_by(&db, &a_id), a_steps, "a keeps its steps while b restarts");
    assert_eq!(released(&db, &a_steps), 0, "the restarted b released a's claims");

    // An id given by flag is never changed: a second process under a live one is refused.
    let refused = bin()
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "off", "--instance-id", &a_id, "--agent", &format!("svc={}", service.url)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a second process under a live id ran:\n{stderr}");
    assert!(
        stderr.contains(&format!("instance id {a_id} is in use")) && stderr.contains("--instance-id"),
        "the refusal says what to set:\n{stderr}"
    );
    assert_eq!(held_by(&db, &a_id), a_steps, "the refused process released a's claims");
    assert_eq!(released(&db, &a_steps), 0);
}
