//! LISTEN/NOTIFY: work made due by one process wakes the subscribers of another at once; the
//! listening connection survives being killed; dropping the subscription closes it.

mod common;

use common::{TestSchema, admin, test_db};
use serde_json::json;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_postgres::PostgresStore;
use shiftboss_store::{Clock, ExpireLeases, ManualClock, Store, SubmitTask, TaskCommand};
use shiftboss_store_conformance::support::StoreTestExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::timeout;

fn task(key: &str) -> SubmitTask {
    SubmitTask {
        domains: Default::default(),
        correlation_id: None,
        notify: None,
        key: key.into(),
        workflow: "w".into(),
        version: None,
        input: json!({}),
        priority: 0,
        actor: "test".into(),
    }
}

/// How many server processes are LISTENing on this schema's channel.
async fn listeners(url: &str, schema: &str) -> i64 {
    let c = admin(url).await;
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND query LIKE '%' || $1 || '%'";
    c.query_one(sql, &[&format!("shiftboss_due_{schema}")]).await.unwrap().get(0)
}

async fn wait_listeners(url: &str, schema: &str, want: i64) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    while listeners(url, schema).await != want {
        assert!(tokio::time::Instant::now() < give_up, "listeners on {schema} never became {want}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two handles on one schema (two processes, as far as the database knows), the workflow `w`
/// registered through the second.
async fn two_handles(url: &str, s: &TestSchema) -> (PostgresStore, PostgresStore) {
    let a = PostgresStore::connect(url, &s.options(false)).await.unwrap();
    let b = PostgresStore::connect(url, &s.options(false)).await.unwrap();
    let wf = WorkflowDef::from_json(r#"{"name":"w","steps":[{"name":"a","agent":"x"}]}"#).unwrap();
    b.register_workflow(&wf).await.unwrap();
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_processes_submission_wakes_a_subscriber_and_survives_a_killed_listener() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let (a, b) = two_handles(&url, &s).await;

    let bell = Arc::new(Notify::new());
    let rings = Arc::new(AtomicU32::new(0));
    let (bell2, rings2) = (bell.clone(), rings.clone());
    let sub = a.subscribe_due_work(Arc::new(move || {
        rings2.fetch_add(1, Ordering::SeqCst);
        bell2.notify_one();
    }));
    wait_listeners(&url, &s.name, 1).await;
    // The ring on connecting may already be stored in the Notify: take it.
    let _ = timeout(Duration::from_millis(200), bell.notified()).await;

    // A submission through another handle (another process, as far as the database knows).
    let before = rings.load(Ordering::SeqCst);
    b.submit_task(task("t1")).await.unwrap();
    timeout(Duration::from_secs(5), bell.notified()).await.expect("the submission woke the subscriber");
    assert!(rings.load(Ordering::SeqCst) > before);

    // The listening connection is killed: it reconnects, and the next submission still rings.
    let c = admin(&url).await;
    let killed: i64 = c
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE query LIKE 'LISTEN %' AND query LIKE '%' || $1 || '%'",
            &[&format!("shiftboss_due_{}", s.name)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    wait_listeners(&url, &s.name, 1).await;
    let _ = timeout(Duration::from_millis(200), bell.notified()).await;
    b.submit_task(task("t2")).await.unwrap();
    timeout(Duration::from_secs(5), bell.notified()).await.expect("a submission after the reconnect rang");

    // Dropping the subscription closes its connection.
    drop(sub);
    wait_listeners(&url, &s.name, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_does_not_ring_but_a_resubmit_does() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let a = PostgresStore::connect(&url, &s.options(false)).await.unwrap();
    let wf = WorkflowDef::from_json(r#"{"name":"w","steps":[{"name":"a","agent":"x"}]}"#).unwrap();
    a.register_workflow(&wf).await.unwrap();
    let bell = Arc::new(Notify::new());
    let bell2 = bell.clone();
    let _sub = a.subscribe_due_work(Arc::new(move || bell2.notify_one()));
    wait_listeners(&url, &s.name, 1).await;
    let _ = timeout(Duration::from_millis(200), bell.notified()).await;

    // A claim makes nothing due: no ring. (Bounded wait: the absence of a ring is the point.)
    a.submit_task(task("t1")).await.unwrap();
    timeout(Duration::from_secs(5), bell.notified()).await.expect("submission rang");
    let p = shiftboss_store::ClaimDueSteps {
        instance: shiftboss_core::InstanceId::new("s").unwrap(),
        limit: 1,
        agents: vec!["x".into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    let c = a.claim_due_steps(p).await.unwrap().remove(0);
    assert!(timeout(Duration::from_millis(300), bell.notified()).await.is_err(), "a claim rang the bell");

    // A permanent error, then an operator's resubmit: the resubmit makes the step due again.
    let reply = shiftboss_store::Reply {
        step_id: c.id,
        lease_token: c.lease_token,
        result: shiftboss_store::ReplyResult::PermanentError("no".into()),
    };
    a.record_replies(shiftboss_store::RecordReplies {
        instance: shiftboss_core::InstanceId::new("s").unwrap(),
        replies: vec![reply],
        policies: Default::default(),
    })
    .await
    .unwrap();
    let r = shiftboss_store::ResubmitStep { step_id: c.id, actor: "ops".into(), reason: "fixed".into() };
    a.resubmit_step(r).await.unwrap();
    timeout(Duration::from_secs(5), bell.notified()).await.expect("the resubmit rang");
}

/// A task that starts with a wait schedules no agent step: no ring. A signal that ends the wait
/// schedules one: a ring. A pause rings for nothing; the resume of a task with held work rings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_steps_do_not_ring_but_what_they_make_due_does() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let a = PostgresStore::connect(&url, &s.options(false)).await.unwrap();
    let wf = WorkflowDef::from_json(
        r#"{"name":"w","steps":[{"name":"hold","kind":"wait","signal":"go"},{"name":"a","agent":"x"}]}"#,
    )
    .unwrap();
    a.register_workflow(&wf).await.unwrap();
    let bell = Arc::new(Notify::new());
    let bell2 = bell.clone();
    let _sub = a.subscribe_due_work(Arc::new(move || bell2.notify_one()));
    wait_listeners(&url, &s.name, 1).await;
    let _ = timeout(Duration::from_millis(200), bell.notified()).await;
    let quiet = Duration::from_millis(300);

    let t = a.submit_task(task("t1")).await.unwrap().task_id;
    assert!(timeout(quiet, bell.notified()).await.is_err(), "a wait step rang the bell");
    let op = |command| shiftboss_store::OperateTask { task_id: t, actor: "ops".into(), reason: "test".into(), command };
    a.operate_task(op(TaskCommand::Pause)).await.unwrap();
    assert!(timeout(quiet, bell.notified()).await.is_err(), "a pause rang the bell");
    a.operate_task(op(TaskCommand::Signal { name: "go".into(), payload: json!({}) })).await.unwrap();
    assert!(timeout(quiet, bell.notified()).await.is_err(), "a paused task's signal scheduled nothing");
    a.operate_task(op(TaskCommand::Resume)).await.unwrap();
    timeout(Duration::from_secs(5), bell.notified()).await.expect("the resume scheduled the agent step and rang");
}

/// A step that goes back to Pending rings, due now or later: a sweep's re-queue (so a sleeping
/// scheduler claims it without waiting for its poll) and a failed attempt's delayed retry (so a
/// sleeping scheduler learns the new, earlier due time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeps_requeue_and_a_delayed_retry_ring() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(shiftboss_core::Timestamp(1_700_000_000_000));
    let a = PostgresStore::connect_with_clock(&url, &s.options(false), Clock::Manual(clock.clone())).await.unwrap();
    let wf = WorkflowDef::from_json(
        r#"{"name":"w","steps":[{"name":"a","agent":"x","timeout":"1s",
            "retry":{"kind":"intervals","intervals":["0s","1m"]}}]}"#,
    )
    .unwrap();
    a.register_workflow(&wf).await.unwrap();
    let bell = Arc::new(Notify::new());
    let bell2 = bell.clone();
    let _sub = a.subscribe_due_work(Arc::new(move || bell2.notify_one()));
    wait_listeners(&url, &s.name, 1).await;
    let _ = timeout(Duration::from_millis(200), bell.notified()).await;
    let quiet = Duration::from_millis(300);
    let instance = shiftboss_core::InstanceId::new("s").unwrap();
    let claim = || shiftboss_store::ClaimDueSteps {
        instance: instance.clone(),
        limit: 1,
        agents: vec!["x".into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };

    a.submit_task(task("t1")).await.unwrap();
    timeout(Duration::from_secs(5), bell.notified()).await.expect("submission rang");
    a.claim_due_steps(claim()).await.unwrap().remove(0);
    let leader = a
        .elect_leader(shiftboss_store::ElectLeader {
            name: "supervisor".into(),
            holder: instance.clone(),
            ttl: Duration::from_secs(3600),
        })
        .await
        .unwrap()
        .unwrap();
    let sweep = || ExpireLeases { leader: leader.clone(), limit: 10, policies: Default::default() };
    assert_eq!(a.expire_leases(sweep()).await.unwrap().retried, 0);
    assert!(timeout(quiet, bell.notified()).await.is_err(), "a sweep that returned nothing rang the bell");

    clock.advance(Duration::from_millis(1001));
    assert_eq!(a.expire_leases(sweep()).await.unwrap().retried, 1);
    timeout(Duration::from_secs(5), bell.notified()).await.expect("the sweep's re-queue rang");

    // Claimed again, its agent fails: the next try is a minute away, and it rings all the same.
    let c = a.claim_due_steps(claim()).await.unwrap().remove(0);
    let reply = shiftboss_store::Reply {
        step_id: c.id,
        lease_token: c.lease_token,
        result: shiftboss_store::ReplyResult::Failed("busy".into()),
    };
    let p = shiftboss_store::RecordReplies {
        instance: instance.clone(),
        replies: vec![reply],
        policies: Default::default(),
    };
    a.record_replies(p).await.unwrap();
    timeout(Duration::from_secs(5), bell.notified()).await.expect("the delayed retry rang");
    let w = a.claim_due_work(claim()).await.unwrap();
    assert_eq!((w.steps.len(), w.next_due), (0, Some(clock.now().plus(Duration::from_secs(60)))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stores_subscriptions_to_one_channel_share_one_connection() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let (a, b) = two_handles(&url, &s).await;
    let (first, second) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (f, g) = (first.clone(), second.clone());
    let sub1 = a.subscribe_due_work(Arc::new(move || f.notify_one()));
    let sub2 = a.subscribe_due_work(Arc::new(move || g.notify_one()));
    assert!(sub1.is_live() && sub2.is_live());
    wait_listeners(&url, &s.name, 1).await;
    // Each was rung on subscribing: take those rings.
    let _ = timeout(Duration::from_millis(200), first.notified()).await;
    let _ = timeout(Duration::from_millis(200), second.notified()).await;

    b.submit_task(task("t1")).await.unwrap();
    timeout(Duration::from_secs(5), first.notified()).await.expect("the first subscriber was rung");
    timeout(Duration::from_secs(5), second.notified()).await.expect("the second subscriber was rung");
    // Another handle's write rings only through a listening connection: every one there is
    // listens by now.
    assert_eq!(listeners(&url, &s.name).await, 1, "two subscriptions, two connections");

    // One gone, the other still hears; both gone, the connection closes.
    drop(sub1);
    b.submit_task(task("t2")).await.unwrap();
    timeout(Duration::from_secs(5), second.notified()).await.expect("the one left was rung");
    assert_eq!(listeners(&url, &s.name).await, 1);
    drop(sub2);
    wait_listeners(&url, &s.name, 0).await;
}

/// The outbox's channel rings for a transaction that wrote deliveries, whichever process wrote it,
/// and for nothing else: a write of this store that only queued work rings the due-work
/// subscribers, not the dispatcher (which claimed twice for nothing on every submission).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_channel_rings_for_deliveries_only() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let (a, _b) = two_handles(&url, &s).await;
    let (due, outbox) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (d, o) = (due.clone(), outbox.clone());
    let _due = a.subscribe_due_work(Arc::new(move || d.notify_one()));
    let outbox_sub = a.subscribe_deliveries(Arc::new(move || o.notify_one()));
    assert!(!outbox_sub.rings_own_writes(), "the outbox's subscribers are rung by its trigger, not by every write");
    wait_listeners(&url, &s.name, 1).await;
    let c = admin(&url).await;
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    let outbox_listening = "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"' || $1 || '\"'";
    let channel = format!("shiftboss_outbox_{}", s.name);
    while c.query_one(outbox_listening, &[&channel]).await.unwrap().get::<_, i64>(0) != 1 {
        assert!(tokio::time::Instant::now() < give_up, "nothing listens on {channel}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Each was rung on subscribing: take those rings.
    let _ = timeout(Duration::from_millis(200), due.notified()).await;
    let _ = timeout(Duration::from_millis(200), outbox.notified()).await;

    // No subscription: a submission queues work and writes no delivery.
    a.submit_task(task("t1")).await.unwrap();
    timeout(Duration::from_secs(5), due.notified()).await.expect("the submission rang the due-work subscriber");
    assert!(
        timeout(Duration::from_millis(300), outbox.notified()).await.is_err(),
        "a write with no delivery rang the outbox's subscriber"
    );

    // A standing subscription: the next submission writes its `task.received` delivery.
    let target = shiftboss_store::WebhookTarget {
        url: "http://127.0.0.1:9/hook".into(),
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        kinds: vec![],
    };
    a.create_subscription(shiftboss_store::NewSubscription { target, workflow: None, description: None })
        .await
        .unwrap();
    a.submit_task(task("t2")).await.unwrap();
    timeout(Duration::from_secs(5), outbox.notified()).await.expect("a delivery written rang the outbox's subscriber");
}
