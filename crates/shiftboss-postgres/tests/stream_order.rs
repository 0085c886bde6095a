//! Event streams on PostgreSQL when transactions commit out of id order (issue 18): a reader that
//! goes on from the last id it saw must neither skip an event that commits later with a smaller
//! id, nor return one twice. Two raw connections hold transactions open in the order that would
//! make a naive reader (ids after the last one seen), or one that only takes events whose
//! transaction is older than every running one, skip an event.

mod common;

use common::{TestSchema, admin, test_db};
use shiftboss_core::TaskId;
use shiftboss_postgres::PostgresStore;
use shiftboss_store::*;
use shiftboss_store_conformance::support::{one_step, submit_params};
use std::time::Duration;
use tokio_postgres::Client;

async fn setup() -> Option<(TestSchema, PostgresStore, TaskId, Client, Client)> {
    let url = test_db()?;
    let schema = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&url, &schema.options(false)).await.expect("connect");
    store.register_workflow(&one_step()).await.expect("register");
    let task = store.submit_task(submit_params("t", "one", 0)).await.expect("submit").task_id;
    let mut writers = Vec::new();
    for _ in 0..2 {
        let c = admin(&url).await;
        c.batch_execute(&format!("SET search_path TO {}", schema.name)).await.expect("search_path");
        writers.push(c);
    }
    let second = writers.pop().unwrap();
    let first = writers.pop().unwrap();
    Some((schema, store, task, first, second))
}

/// Inserts an event in the connection's open transaction, as the store's writes do; its id.
async fn insert_event(c: &Client, task: TaskId, kind: &str) -> i64 {
    let row = c
        .query_one(
            "INSERT INTO events (task_id, at, kind, level, actor) VALUES ($1, 0, $2, 'info', 'test') RETURNING id",
            &[&task.0, &kind],
        )
        .await
        .expect("insert event");
    row.get(0)
}

/// Reads until caught up (every transaction that could hold an earlier id has ended).
async fn read_until_caught_up(store: &PostgresStore, cursor: &mut EventCursor, got: &mut Vec<i64>) {
    for _ in 0..20_000 {
        let read = store
            .read_events(ReadEvents { cursor: *cursor, filter: EventFilter::default(), limit: 100 })
            .await
            .expect("read");
        *cursor = read.cursor;
        let idle = read.events.is_empty();
        got.extend(read.events.iter().map(|e| e.event.id));
        if !read.again {
            return;
        }
        if idle {
            // Other tests' transactions in the cluster may still run: nothing announces their end.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    panic!("the reader never caught up");
}

/// A few reads while a transaction is held open: what they return, and whether the store said
/// that more is pending.
async fn read_while_held(store: &PostgresStore, cursor: &mut EventCursor, got: &mut Vec<i64>) -> bool {
    let mut pending = false;
    for _ in 0..5 {
        let read = store
            .read_events(ReadEvents { cursor: *cursor, filter: EventFilter::default(), limit: 100 })
            .await
            .expect("read");
        *cursor = read.cursor;
        got.extend(read.events.iter().map(|e| e.event.id));
        pending |= read.again;
    }
    pending
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_commit_of_a_smaller_id_is_not_skipped() {
    let Some((_schema, store, task, first, second)) = setup().await else { return };
    let mut cursor = EventCursor::after(0);
    let mut got = Vec::new();
    read_until_caught_up(&store, &mut cursor, &mut got).await;
    let before = got.len();
    assert!(before >= 2, "the submission's events: {got:?}");

    first.batch_execute("BEGIN").await.expect("begin");
    let a = insert_event(&first, task, "test.first").await;
    second.batch_execute("BEGIN").await.expect("begin");
    let b = insert_event(&second, task, "test.second").await;
    assert!(a < b);
    second.batch_execute("COMMIT").await.expect("commit b");

    // b is committed and visible; a, with a smaller id, is not yet. A reader must wait.
    let pending = read_while_held(&store, &mut cursor, &mut got).await;
    assert_eq!(&got[before..], &[] as &[i64], "nothing past the open transaction's id is given out");
    assert!(pending, "the reader is told to read again");

    first.batch_execute("COMMIT").await.expect("commit a");
    read_until_caught_up(&store, &mut cursor, &mut got).await;
    assert_eq!(&got[before..], &[a, b], "both, once each, in id order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_transaction_with_a_larger_id_waits_for_a_younger_one_with_a_smaller_id() {
    let Some((_schema, store, task, first, second)) = setup().await else { return };
    let mut cursor = EventCursor::after(0);
    let mut got = Vec::new();
    read_until_caught_up(&store, &mut cursor, &mut got).await;
    let before = got.len();

    // `first` takes its transaction id first (an older transaction), `second` draws an event id
    // before `first` does: the older transaction holds the larger id. A reader that takes the
    // events of transactions older than every running one would take q and skip p.
    first.batch_execute("BEGIN; SELECT pg_current_xact_id();").await.expect("begin");
    second.batch_execute("BEGIN").await.expect("begin");
    let p = insert_event(&second, task, "test.younger").await;
    let q = insert_event(&first, task, "test.older").await;
    assert!(p < q);
    first.batch_execute("COMMIT").await.expect("commit q");

    read_while_held(&store, &mut cursor, &mut got).await;
    assert_eq!(&got[before..], &[] as &[i64], "q waits for p's transaction");

    second.batch_execute("COMMIT").await.expect("commit p");
    read_until_caught_up(&store, &mut cursor, &mut got).await;
    assert_eq!(&got[before..], &[p, q]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_id_does_not_hold_the_reader() {
    let Some((_schema, store, task, first, _second)) = setup().await else { return };
    let mut cursor = EventCursor::after(0);
    let mut got = Vec::new();
    read_until_caught_up(&store, &mut cursor, &mut got).await;
    let before = got.len();
    first.batch_execute("BEGIN").await.expect("begin");
    let gone = insert_event(&first, task, "test.gone").await;
    first.batch_execute("ROLLBACK").await.expect("rollback");
    first.batch_execute("BEGIN").await.expect("begin");
    let kept = insert_event(&first, task, "test.kept").await;
    first.batch_execute("COMMIT").await.expect("commit");
    assert!(gone < kept);
    read_until_caught_up(&store, &mut cursor, &mut got).await;
    assert_eq!(&got[before..], &[kept]);
    assert!(cursor.after >= kept);
}
