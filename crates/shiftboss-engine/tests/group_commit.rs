//! Group commit: concurrent single submissions are written in one transaction, and each keeps the
//! outcome it would have had alone (created, the same task again, or its own conflict); remote
//! workers' concurrent replies likewise (applied, a repeat, or refused as stale).
//!
//! The test's runtime has one thread, so every submission polled by `join_all` is queued before
//! the group commit's writer first runs: the batch is known, not left to timing.

use futures_util::future::join_all;
use serde_json::json;
use shiftboss_core::InstanceId;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_engine::{Engine, EngineConfig, EngineError, SubmitConfig};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{AgentLimit, ClaimDueSteps, Reply, ReplyOutcome, ReplyResult, Store, StoreError, SubmitTask};
use std::sync::Arc;

fn task(key: &str, input: serde_json::Value) -> SubmitTask {
    SubmitTask {
        correlation_id: None,
        domains: Default::default(),
        notify: None,
        key: key.into(),
        workflow: "order".into(),
        version: None,
        input,
        priority: 0,
        actor: "test".into(),
    }
}

async fn engine(dir: &tempfile::TempDir, writers: usize) -> (Engine, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
    let def = WorkflowDef::from_json(r#"{"name":"order","steps":[{"name":"reserve","agent":"svc"}]}"#).unwrap();
    store.register_workflow(&def).await.unwrap();
    let config =
        EngineConfig { submit: SubmitConfig { writers: Some(writers), max_batch: 512 }, ..EngineConfig::default() };
    (Engine::builder(store.clone(), InstanceId::new("group-1").unwrap()).config(config).build().unwrap(), store)
}

#[tokio::test]
async fn concurrent_submissions_share_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = engine(&dir, 1).await;
    let done = join_all((0..64).map(|i| engine.submit(task(&format!("order-{i}"), json!({"n": i}))))).await;
    let ids: std::collections::BTreeSet<_> =
        done.into_iter().map(|s| s.unwrap()).map(|s| (s.task_id, s.created)).collect();
    assert_eq!(ids.len(), 64, "64 tasks, each created once");
    assert!(ids.iter().all(|(_, created)| *created));
    let m = engine.metrics();
    assert_eq!((m.submit_batches, m.submitted), (1, 64), "one transaction wrote the 64");
    for i in [0, 63] {
        let t = store.find_task_by_key(&format!("order-{i}")).await.unwrap().expect("written");
        assert_eq!(t.input, json!({"n": i}));
    }
}

#[tokio::test]
async fn each_submission_keeps_its_own_outcome_in_a_refused_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _store) = engine(&dir, 1).await;
    let first = engine.submit(task("taken", json!({"a": 1}))).await.unwrap();
    assert!(first.created);
    let batch = vec![
        task("fresh-1", json!({})),
        task("taken", json!({"a": 2})), // another input under a used key: refused alone
        task("dup", json!({"d": 1})),
        task("taken", json!({"a": 1})), // the same submission again: the same task back
        task("dup", json!({"d": 1})),
        task("fresh-2", json!({})),
    ];
    let out = join_all(batch.into_iter().map(|t| engine.submit(t))).await;
    let m = engine.metrics();
    assert_eq!((m.submit_batches, m.submitted), (2, 7), "the six went to the store as one batch");
    assert!(out[0].as_ref().unwrap().created);
    assert!(matches!(&out[1], Err(EngineError::Store(StoreError::Conflict(m))) if m.contains("taken")), "{:?}", out[1]);
    let (d1, d2) = (out[2].as_ref().unwrap(), out[4].as_ref().unwrap());
    assert_eq!(d1.task_id, d2.task_id, "one key, one task");
    assert!(d1.created ^ d2.created, "created once: {d1:?} {d2:?}");
    let again = out[3].as_ref().unwrap();
    assert_eq!((again.task_id, again.created), (first.task_id, false));
    assert!(out[5].as_ref().unwrap().created);
}

#[tokio::test]
async fn an_invalid_task_is_refused_before_it_joins_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _store) = engine(&dir, 1).await;
    let out =
        join_all([task("", json!({})), task("ok", json!({})), task("bad-input", json!([1]))].map(|t| engine.submit(t)))
            .await;
    assert!(matches!(out[0], Err(EngineError::Store(StoreError::InvalidInput(_)))), "{:?}", out[0]);
    assert!(out[1].as_ref().unwrap().created);
    assert!(matches!(out[2], Err(EngineError::Store(StoreError::InvalidInput(_)))), "{:?}", out[2]);
    assert_eq!(engine.metrics().submitted, 1, "only the valid task reached the queue");
}

#[tokio::test]
async fn grouping_off_writes_each_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _store) = engine(&dir, 0).await;
    let out = join_all((0..8).map(|i| engine.submit(task(&format!("k{i}"), json!({}))))).await;
    assert!(out.iter().all(|s| s.as_ref().unwrap().created));
    assert_eq!(engine.metrics().submit_batches, 0);
}

#[tokio::test]
async fn concurrent_replies_share_transactions_and_keep_their_own_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = engine(&dir, 1).await;
    for i in 0..6 {
        engine.submit(task(&format!("r{i}"), json!({}))).await.unwrap();
    }
    let claim = |who: &str| ClaimDueSteps {
        instance: InstanceId::new(who).unwrap(),
        limit: 3,
        agents: vec!["svc".into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    let a = store.claim_due_work(claim("worker:a")).await.unwrap().steps;
    let b = store.claim_due_work(claim("worker:b")).await.unwrap().steps;
    assert_eq!((a.len(), b.len()), (3, 3));
    let reply = |s: &shiftboss_store::ClaimedStep, token| Reply {
        step_id: s.id,
        lease_token: token,
        result: ReplyResult::Completed(json!({"by": s.id.0})),
    };
    let mut replies: Vec<(InstanceId, Reply)> = Vec::new();
    for (who, steps) in [("worker:a", &a), ("worker:b", &b)] {
        for s in steps.iter() {
            replies.push((InstanceId::new(who).unwrap(), reply(s, s.lease_token)));
        }
    }
    // A reply under a token that never was this claim's: refused, the others go through.
    let stale = reply(&a[0], shiftboss_core::LeaseToken(a[0].lease_token.0 + 1000));
    replies.insert(1, (InstanceId::new("worker:a").unwrap(), stale));
    let out = join_all(replies.into_iter().map(|(who, r)| engine.record_reply(who, r))).await;
    let m = engine.metrics();
    assert_eq!((m.remote_reply_batches, m.remote_replies), (1, 7), "one batch took the seven");
    assert!(matches!(out[1], Ok(ReplyOutcome::Rejected { .. })), "{:?}", out[1]);
    let applied = out.iter().filter(|o| matches!(o, Ok(ReplyOutcome::Applied { .. }))).count();
    assert_eq!(applied, 6, "{out:?}");
    // The same reply again: a repeat, nothing changed.
    let again = engine.record_reply(InstanceId::new("worker:b").unwrap(), reply(&b[0], b[0].lease_token)).await;
    assert!(matches!(again, Ok(ReplyOutcome::AlreadyApplied { .. })), "{again:?}");
    for s in a.iter().chain(&b) {
        let t = store.get_task(s.task_id).await.unwrap().unwrap();
        assert_eq!(t.task.state, shiftboss_core::TaskState::Completed, "{t:?}");
    }
}

const TEN_S: std::time::Duration = std::time::Duration::from_secs(10);

/// The handoff: a waiting poll's claim offered to the engine runs in the next submissions'
/// transaction and hands over what it took.
#[tokio::test]
async fn a_waiting_claim_rides_with_the_next_submissions() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = engine(&dir, 1).await;
    let claim = |who: &str, limit| ClaimDueSteps {
        instance: InstanceId::new(who).unwrap(),
        limit,
        agents: vec!["svc".into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    let mut first = engine.offer_claim(&claim("worker:a", 1)).expect("submissions are grouped");
    let mut second = engine.offer_claim(&claim("worker:b", 5)).expect("submissions are grouped");
    assert_eq!(engine.metrics().polls_waiting, 2);

    // One writer takes the oldest offer of a set of agent types; the other waits for the next.
    let s1 = engine.submit(task("h-1", json!({}))).await.unwrap();
    let got = tokio::time::timeout(TEN_S, first.handed()).await.expect("the first offer was answered");
    assert_eq!(got.iter().map(|s| (s.task_id, s.attempt)).collect::<Vec<_>>(), [(s1.task_id, 1)]);
    assert_eq!((engine.metrics().handed_off, engine.metrics().polls_waiting), (1, 1));
    let step = store.get_task(s1.task_id).await.unwrap().unwrap().steps.remove(0);
    assert_eq!((step.locked_by.as_deref(), step.lease_token), (Some("worker:a"), got[0].lease_token));

    let s2 = join_all([engine.submit(task("h-2", json!({}))), engine.submit(task("h-3", json!({})))]).await;
    let got = tokio::time::timeout(TEN_S, second.handed()).await.expect("the second offer was answered");
    let mut got: Vec<_> = got.into_iter().map(|s| s.task_id).collect();
    got.sort();
    assert_eq!(got, [s2[0].as_ref().unwrap().task_id, s2[1].as_ref().unwrap().task_id]);
    assert_eq!((engine.metrics().handed_off, engine.metrics().polls_waiting), (3, 0));

    // A limited agent type's claim is not offered: it locks the limits' rows.
    let mut limited = claim("worker:c", 1);
    limited.limits = vec![AgentLimit { agent: "svc".into(), max_concurrent: Some(2), per_second: None }];
    assert!(engine.offer_claim(&limited).is_none());
    // Nor with submissions written each alone.
    let dir = tempfile::tempdir().unwrap();
    let (alone, _store) = crate::engine(&dir, 0).await;
    assert!(alone.offer_claim(&claim("worker:d", 1)).is_none());
}
