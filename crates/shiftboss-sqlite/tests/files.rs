//! What only a file-backed store has to get right: refusing files that are not ours (or are newer)
//! without touching them, keeping data across reopen, and submitting inside the application's own
//! transaction (P12).

use rusqlite::Connection;
use serde_json::json;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_sqlite::{OpenOptions, SCHEMA_VERSION, SqliteStore};
use shiftboss_store::{ClaimDueSteps, Store, StoreError, SubmitTask};
use shiftboss_store_conformance::support::StoreTestExt;
use std::path::{Path, PathBuf};

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state.db")
}

/// The files SQLite puts beside a database it opened for writing.
fn assert_no_sidecars(path: &Path) {
    for suffix in ["-wal", "-shm", "-journal"] {
        let side = PathBuf::from(format!("{}{suffix}", path.display()));
        assert!(!side.exists(), "{} was created", side.display());
    }
}

fn open_err(path: &Path, opts: &OpenOptions) -> StoreError {
    match SqliteStore::open(path, opts) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e,
    }
}

fn workflow() -> WorkflowDef {
    WorkflowDef::from_json(r#"{"name": "order", "steps": [{"name": "charge", "agent": "pay"}]}"#).unwrap()
}

fn submit(key: &str) -> SubmitTask {
    SubmitTask {
        correlation_id: None,
        domains: Default::default(),
        notify: None,
        key: key.into(),
        workflow: "order".into(),
        version: None,
        input: json!({"order": key}),
        priority: 0,
        actor: "app".into(),
    }
}

#[test]
fn a_corrupt_file_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let mut rng = fastrand::Rng::with_seed(7);
    let bytes: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(64 * 1024).collect();
    std::fs::write(&path, &bytes).unwrap();

    let e = open_err(&path, &OpenOptions::default());
    assert!(matches!(e, StoreError::Incompatible(_)), "{e:?}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "not one byte changed");
    assert_no_sidecars(&path);
}

#[test]
fn a_foreign_sqlite_database_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crm.db");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada');",
        )
        .unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();

    let e = open_err(&path, &OpenOptions::default());
    assert!(matches!(&e, StoreError::Incompatible(m) if m.contains("not a shiftboss")), "{e:?}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "not one byte changed");
    assert_no_sidecars(&path);
}

#[test]
fn a_file_from_a_newer_shiftboss_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    drop(SqliteStore::open(&path, &OpenOptions::default()).unwrap());
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1)).unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();

    let e = open_err(&path, &OpenOptions::default());
    assert!(matches!(&e, StoreError::Incompatible(m) if m.contains("newer")), "{e:?}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "not migrated, not written");
    let c = Connection::open(&path).unwrap();
    let v: i32 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, SCHEMA_VERSION + 1);
}

#[test]
fn without_create_a_missing_file_is_not_found_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let e = open_err(&path, &OpenOptions { create: false, ..OpenOptions::default() });
    assert!(matches!(e, StoreError::NotFound { .. }), "{e:?}");
    assert!(!path.exists());
    assert_no_sidecars(&path);
}

/// A file that another process is making a store is never taken for another program's: opened
/// while that migration commits, it is seen before (empty) or after (a store). Each round races a
/// creator against a reader that opens the file as soon as it exists. The race is a matter of
/// microseconds, so a round proves little and many rounds are run.
#[test]
fn a_file_being_made_a_store_is_never_refused_as_foreign() {
    let reader = OpenOptions { create: false, ..OpenOptions::default() };
    for round in 0..100 {
        let dir = tempfile::tempdir().unwrap();
        let path = db_in(&dir);
        let creator = {
            let path = path.clone();
            std::thread::spawn(move || SqliteStore::open(&path, &OpenOptions::default()).map(drop))
        };
        while !creator.is_finished() {
            if path.exists()
                && let Err(StoreError::Incompatible(e)) = SqliteStore::open(&path, &reader)
            {
                panic!("round {round}: a store being made was refused: {e}");
            }
        }
        creator.join().unwrap().unwrap_or_else(|e| panic!("round {round}: the creator: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_a_store_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let (task, summary) = {
        let store = SqliteStore::open(&path, &OpenOptions::default()).unwrap();
        store.register_workflow(&workflow()).await.unwrap();
        let task = store.submit_task(submit("order-1")).await.unwrap().task_id;
        let p = ClaimDueSteps {
            instance: shiftboss_core::InstanceId::new("sched-1").unwrap(),
            limit: 1,
            agents: vec!["pay".into()],
            buckets: None,
            domains: vec![],
            limits: vec![],
        };
        assert_eq!(store.claim_due_steps(p).await.unwrap().len(), 1);
        (store.get_task(task).await.unwrap().unwrap(), store.summarize().await.unwrap())
    };

    let store = SqliteStore::open(&path, &OpenOptions { create: false, ..OpenOptions::default() }).unwrap();
    assert_eq!(store.get_task(task.task.id).await.unwrap(), Some(task));
    let page: u32 = Connection::open(&path).unwrap().query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    assert_eq!(page, shiftboss_sqlite::open::PAGE_SIZE, "a new file is made with the store's page size");
    assert_eq!(store.summarize().await.unwrap(), summary);
    assert_eq!(store.get_workflow("order", None).await.unwrap(), Some(workflow()));
}

/// The application's own table, in the store's file, written in the same transaction as the task.
const ORDERS: &str = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)";

fn orders(c: &Connection, id: &str) -> i64 {
    c.query_row("SELECT count(*) FROM orders WHERE id = ?1", [id], |r| r.get(0)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_in_a_committed_transaction_writes_both() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let store = SqliteStore::open(&path, &OpenOptions::default()).unwrap();
    store.register_workflow(&workflow()).await.unwrap();
    let mut app = Connection::open(&path).unwrap();
    app.execute_batch(ORDERS).unwrap();

    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (id, total) VALUES ('order-1', 42)", []).unwrap();
    let s = shiftboss_sqlite::submit_task_in(&tx, &submit("order-1")).unwrap();
    assert!(s.created);
    tx.commit().unwrap();

    assert_eq!(orders(&app, "order-1"), 1);
    let task = store.find_task_by_key("order-1").await.unwrap().expect("the task committed with the order");
    assert_eq!(task.id, s.task_id);
    // A scheduler on the store's own handle finds its step at the next poll.
    let p = ClaimDueSteps {
        instance: shiftboss_core::InstanceId::new("sched-1").unwrap(),
        limit: 10,
        agents: vec!["pay".into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    let claimed = store.claim_due_steps(p).await.unwrap();
    assert_eq!(claimed.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![s.task_id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_in_a_rolled_back_transaction_writes_neither() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let store = SqliteStore::open(&path, &OpenOptions::default()).unwrap();
    store.register_workflow(&workflow()).await.unwrap();
    let mut app = Connection::open(&path).unwrap();
    app.execute_batch(ORDERS).unwrap();
    let before = store.summarize().await.unwrap();

    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (id, total) VALUES ('order-2', 42)", []).unwrap();
    shiftboss_sqlite::submit_task_in(&tx, &submit("order-2")).unwrap();
    tx.rollback().unwrap();

    assert_eq!(orders(&app, "order-2"), 0);
    assert_eq!(store.find_task_by_key("order-2").await.unwrap(), None);
    assert_eq!(store.summarize().await.unwrap(), before);
    // The key is free again: the application can retry the whole transaction.
    let tx = app.transaction().unwrap();
    assert!(shiftboss_sqlite::submit_task_in(&tx, &submit("order-2")).unwrap().created);
    tx.commit().unwrap();
}

#[tokio::test]
async fn a_store_written_by_the_first_schema_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    // A file exactly as the first schema version left it, with one task in it.
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(include_str!("../src/migrations/0001_initial.sql")).unwrap();
    c.execute_batch(&format!(
        "PRAGMA user_version = 1; PRAGMA application_id = {};
         INSERT INTO workflows VALUES ('w', 1, '{{\"name\":\"w\",\"steps\":[{{\"name\":\"a\",\"agent\":\"x\"}}]}}', 0);
         INSERT INTO tasks (task_key, workflow, workflow_version, state, input, created_at, updated_at)
              VALUES ('old', 'w', 1, 'running', '{{}}', 0, 0);
         INSERT INTO steps (task_id, name, agent, state, due_at, input, idempotency_key, timeout_ms, created_at, updated_at)
              VALUES (1, 'a', 'x', 'pending', 0, '{{}}', 'k-old', 30000, 0, 0);",
        shiftboss_sqlite::open::APPLICATION_ID
    ))
    .unwrap();
    drop(c);
    let store = shiftboss_sqlite::SqliteStore::open(&path, &shiftboss_sqlite::OpenOptions::default()).unwrap();
    let old = shiftboss_store::Store::find_task_by_key(&store, "old").await.unwrap().expect("the old task is kept");
    assert_eq!(old.bucket, 0, "tasks from before buckets land in bucket 0");
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i32 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, shiftboss_sqlite::SCHEMA_VERSION);
    assert_eq!(shiftboss_sqlite::SCHEMA_VERSION, 22);
    // Migration 22: the store writes the outbox itself; the trigger and its mute are gone.
    let outbox_parts: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'events_outbox_task' OR name = 'outbox_muted'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(outbox_parts, 0);
    // Migration 21: steps in Error have an index of their own (the queue statistics read it).
    let error_index: i64 = c
        .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'steps_error'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(error_index, 1);
    // Migration 15: history's events are indexed by id, for event streams that resume from an id.
    let by_id: i64 = c
        .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'events_history_id'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(by_id, 1);
    // Migration 11: API tokens, empty on an upgraded file.
    let tokens: i64 = c.query_row("SELECT count(*) FROM api_tokens", [], |r| r.get(0)).unwrap();
    assert_eq!(tokens, 0);
    // Migration 13: the remote worker registry, empty too.
    let workers: i64 = c.query_row("SELECT count(*) FROM agent_workers", [], |r| r.get(0)).unwrap();
    assert_eq!(workers, 0);
    // Migration 14: status channels.
    let outbox: i64 = c.query_row("SELECT count(*) FROM subscriptions, deliveries", [], |r| r.get(0)).unwrap();
    assert_eq!(outbox, 0, "the tables are there and empty");
    // Migration 16: the old task is at generation 0, in history's column order too.
    let generation: i64 = c.query_row("SELECT generation FROM tasks WHERE task_key = 'old'", [], |r| r.get(0)).unwrap();
    assert_eq!(generation, 0);
    let hot: Vec<String> = columns(&c, "tasks");
    assert_eq!(hot, columns(&c, "tasks_history"), "history keeps the hot table's columns, in order");
    // Migration 18: the steps' claim timeout and deadline, in history too, and their sweep's index.
    let steps: Vec<String> = columns(&c, "steps");
    assert_eq!(steps, columns(&c, "steps_history"), "history keeps the steps' columns, in order");
    let last = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(steps.ends_with(&last(&["claim_timeout_ms", "deadline_at", "progress"])), "{steps:?}");
    // Migration 19: a heartbeat's progress on the step (above), and the API's documents, empty.
    let documents: i64 = c.query_row("SELECT count(*) FROM documents", [], |r| r.get(0)).unwrap();
    assert_eq!(documents, 0);
    let claim_by: i64 = c
        .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'steps_claim_by'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(claim_by, 1);
    // Migration 5: events are indexed by kind only for the rare kinds the summary counts.
    let indexes: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(indexes.contains(&"events_lapses".to_owned()), "{indexes:?}");
    assert!(!indexes.contains(&"events_by_kind".to_owned()), "{indexes:?}");
    // Migrations 7 and 9: no condition of a hot table's schema (CHECKs, partial indexes) is a list
    // of constants (SQLite builds a temporary b-tree for each run of a statement testing one, and
    // tests an index's condition on every write of a row), and the state CHECKs still refuse.
    let schema: Vec<(String, String)> = c
        .prepare(
            "SELECT name, sql FROM sqlite_master
              WHERE tbl_name IN ('tasks', 'steps', 'events') AND sql IS NOT NULL ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let names: Vec<&str> = schema.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["tasks", "steps", "events", "events_lapses", "tasks_finished", "tasks_deadline", "tasks_stale"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    for (name, sql) in &schema {
        // A list of two is tested in place; three or more need the b-tree.
        let long_list =
            sql.split(" IN (").skip(1).any(|rest| rest.split(')').next().unwrap_or("").matches(',').count() >= 2);
        assert!(!long_list, "{name} still tests a list: {sql}");
    }
    let bad_task = c.execute("UPDATE tasks SET state = 'done' WHERE task_key = 'old'", []);
    assert!(bad_task.unwrap_err().to_string().contains("CHECK"), "a task state outside the list is refused");
    let bad_step = c.execute("UPDATE steps SET state = 'done' WHERE idempotency_key = 'k-old'", []);
    assert!(bad_step.unwrap_err().to_string().contains("CHECK"), "a step state outside the list is refused");
    c.execute("UPDATE tasks SET state = 'terminated' WHERE task_key = 'old'", []).unwrap();
    c.execute("UPDATE tasks SET state = 'running' WHERE task_key = 'old'", []).unwrap();
    // The tasks table was rebuilt (migration 3): ids, steps and references survive it.
    let detail = shiftboss_store::Store::get_task(&store, old.id).await.unwrap().expect("the old task");
    assert_eq!(detail.steps.len(), 1);
    assert_eq!(detail.steps[0].kind, shiftboss_core::workflow::StepKind::Agent);
    let broken: i64 = c.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0)).unwrap();
    assert_eq!(broken, 0);
    let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    // A file made with other pages keeps them: only a new file takes the store's page size.
    let page: u32 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    assert_eq!(page, 4096);
    let submitted = shiftboss_store::Store::submit_task(
        &store,
        shiftboss_store::SubmitTask {
            correlation_id: None,
            domains: Default::default(),
            notify: None,
            key: "new".into(),
            workflow: "w".into(),
            version: None,
            input: serde_json::json!({}),
            priority: 0,
            actor: "t".into(),
        },
    )
    .await
    .unwrap();
    assert!(submitted.task_id.0 > old.id.0, "ids keep growing across the rebuild");
}

fn columns(c: &rusqlite::Connection, table: &str) -> Vec<String> {
    let mut st = c.prepare(&format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid")).unwrap();
    st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}
