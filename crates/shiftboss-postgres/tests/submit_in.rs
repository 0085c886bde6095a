//! Submitting inside the application's own transaction (P12): the business record and the task
//! commit together or not at all, and the application's session is left as it was.

mod common;

use common::{TestSchema, admin, test_db};
use serde_json::json;
use shiftboss_core::InstanceId;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_postgres::{PostgresStore, submit_task_in};
use shiftboss_store::{ClaimDueSteps, Store, StoreError, SubmitTask};
use shiftboss_store_conformance::support::StoreTestExt;
use tokio_postgres::Client;

fn workflow() -> WorkflowDef {
    WorkflowDef::from_json(r#"{"name": "order", "steps": [{"name": "charge", "agent": "pay"}]}"#).unwrap()
}

fn submit(key: &str) -> SubmitTask {
    SubmitTask {
        domains: Default::default(),
        correlation_id: None,
        notify: None,
        key: key.into(),
        workflow: "order".into(),
        version: None,
        input: json!({"order": key}),
        priority: 0,
        actor: "app".into(),
    }
}

/// The store's schema, and the application's own schema (with its `orders` table) on the
/// application's search_path, as an application that keeps shiftboss apart would have it.
struct App {
    store: PostgresStore,
    client: Client,
    store_schema: TestSchema,
    _app_schema: TestSchema,
}

async fn app(url: &str) -> App {
    let store_schema = TestSchema::migrated(url).await;
    let store = PostgresStore::connect(url, &store_schema.options(false)).await.unwrap();
    store.register_workflow(&workflow()).await.unwrap();
    let app_schema = TestSchema::new(url).await;
    let client = admin(url).await;
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {0}; SET search_path TO {0};
             CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL);",
            app_schema.name
        ))
        .await
        .unwrap();
    App { store, client, store_schema, _app_schema: app_schema }
}

async fn orders(c: &Client, id: &str) -> i64 {
    c.query_one("SELECT count(*) FROM orders WHERE id = $1", &[&id]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_in_a_committed_transaction_writes_both() {
    let Some(url) = test_db() else { return };
    let mut a = app(&url).await;
    let path_before: String = a.client.query_one("SHOW search_path", &[]).await.unwrap().get(0);

    let tx = a.client.transaction().await.unwrap();
    tx.execute("INSERT INTO orders (id, total) VALUES ('order-1', 42)", &[]).await.unwrap();
    let s = submit_task_in(&tx, &a.store_schema.name, &submit("order-1")).await.unwrap();
    assert!(s.created);
    // The application's unqualified names resolve as before the call.
    tx.execute("UPDATE orders SET total = 43 WHERE id = 'order-1'", &[]).await.unwrap();
    tx.commit().await.unwrap();

    assert_eq!(a.client.query_one("SHOW search_path", &[]).await.unwrap().get::<_, String>(0), path_before);
    assert_eq!(orders(&a.client, "order-1").await, 1);
    let task = a.store.find_task_by_key("order-1").await.unwrap().expect("the task committed with the order");
    assert_eq!(task.id, s.task_id);
    let d = a.store.get_task(s.task_id).await.unwrap().unwrap();
    assert_eq!(d.events[0].kind, "task.received");
    let p = ClaimDueSteps {
        instance: InstanceId::new("sched-1").unwrap(),
        limit: 10,
        agents: vec!["pay".into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    let claimed = a.store.claim_due_steps(p).await.unwrap();
    assert_eq!(claimed.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![s.task_id], "claimable at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_in_a_rolled_back_transaction_writes_neither() {
    let Some(url) = test_db() else { return };
    let mut a = app(&url).await;
    let before = a.store.summarize().await.unwrap();

    let tx = a.client.transaction().await.unwrap();
    tx.execute("INSERT INTO orders (id, total) VALUES ('order-2', 42)", &[]).await.unwrap();
    submit_task_in(&tx, &a.store_schema.name, &submit("order-2")).await.unwrap();
    tx.rollback().await.unwrap();

    assert_eq!(orders(&a.client, "order-2").await, 0);
    assert_eq!(a.store.find_task_by_key("order-2").await.unwrap(), None);
    assert_eq!(a.store.summarize().await.unwrap(), before);
    // The key is free again: the application can retry the whole transaction.
    let tx = a.client.transaction().await.unwrap();
    assert!(submit_task_in(&tx, &a.store_schema.name, &submit("order-2")).await.unwrap().created);
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_key_leaves_the_transaction_usable_and_its_path_as_it_was() {
    let Some(url) = test_db() else { return };
    let mut a = app(&url).await;
    let first = a.store.submit_task(submit("order-4")).await.unwrap();
    let tx = a.client.transaction().await.unwrap();
    let path_before: String = tx.query_one("SHOW search_path", &[]).await.unwrap().get(0);
    let mut other = submit("order-4");
    other.input = json!({"something": "else"});
    let e = submit_task_in(&tx, &a.store_schema.name, &other).await.unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
    // The application can go on in the same transaction, with its own names.
    assert_eq!(tx.query_one("SHOW search_path", &[]).await.unwrap().get::<_, String>(0), path_before);
    tx.execute("INSERT INTO orders (id, total) VALUES ('order-4', 1)", &[]).await.unwrap();
    let again = submit_task_in(&tx, &a.store_schema.name, &submit("order-4")).await.unwrap();
    assert_eq!((again.task_id, again.created), (first.task_id, false));
    tx.commit().await.unwrap();
    assert_eq!(orders(&a.client, "order-4").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_in_refuses_bad_input_and_an_unknown_schema() {
    let Some(url) = test_db() else { return };
    let mut a = app(&url).await;
    let tx = a.client.transaction().await.unwrap();
    let mut bad = submit("order-3");
    bad.input = json!([1]);
    let e = submit_task_in(&tx, &a.store_schema.name, &bad).await.unwrap_err();
    assert!(matches!(e, StoreError::InvalidInput(_)), "{e:?}");
    let e = submit_task_in(&tx, "no_such_schema_here", &submit("order-3")).await.unwrap_err();
    assert!(matches!(e, StoreError::Incompatible(_)), "{e:?}");
    tx.rollback().await.unwrap();
}
