//! The library's await and follow (issue 18), on SQLite and on PostgreSQL: `Engine::wait_for`
//! returns a task's record when it completes and when it fails, and gives up at its bound;
//! `Engine::follow` streams a running task's events once each, in id order, and ends after its
//! last.

mod common;

use async_trait::async_trait;
use common::{PgSchema, submission, test_db};
use futures_util::StreamExt;
use serde_json::{Value, json};
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskId, TaskState};
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{Engine, EngineConfig, EngineError};
use shiftboss_store::Store;
use std::sync::Arc;
use std::time::Duration;

/// Answers with its step's name, or refuses for good when the task's input says so.
struct Echo;

#[async_trait]
impl Agent for Echo {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        if call.input["fail"] == json!(true) {
            return Err(AgentError::Permanent("told to fail".into()));
        }
        // Long enough for a follower to start while the task runs.
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(json!({"done": call.step}))
    }
}

fn def(v: Value) -> WorkflowDef {
    WorkflowDef::from_json(&v.to_string()).unwrap()
}

async fn scenario(store: Arc<dyn Store>) {
    let mut config = EngineConfig::default();
    config.scheduler.poll_interval = Duration::from_millis(50);
    let engine = Engine::builder(store.clone(), InstanceId::new("follow-1").unwrap())
        .agent("echo", Echo)
        .default_retry(RetryPolicy::Intervals { intervals: vec![Duration::from_millis(10)], max_failures: Some(1) })
        .config(config)
        .build()
        .unwrap();
    let steps = json!([
        {"name": "a", "agent": "echo", "timeout": "5s"},
        {"name": "b", "agent": "echo", "timeout": "5s"},
        {"name": "c", "agent": "echo", "timeout": "5s"}]);
    engine.register_workflow(&def(json!({"name": "three", "steps": steps}))).await.unwrap();
    engine
        .register_workflow(&def(json!({"name": "waits", "steps": [{"name": "w", "kind": "wait", "signal": "go"}]})))
        .await
        .unwrap();
    let running = engine.start();
    let bound = Duration::from_secs(20);

    // Completion: the record with its output.
    let t = engine.submit(submission("ok", "three", json!({}))).await.unwrap().task_id;
    let done = engine.wait_for(t, bound).await.unwrap();
    assert_eq!(done.state, TaskState::Completed);
    assert!(done.output.is_some(), "with its output");

    // Follow a task from its submission while it runs: every event once, in id order, then the end.
    let t2 = engine.submit(submission("followed", "three", json!({}))).await.unwrap().task_id;
    let events =
        tokio::time::timeout(bound, engine.follow(t2, None).collect::<Vec<_>>()).await.expect("the stream ends");
    let events: Vec<_> = events.into_iter().map(Result::unwrap).collect();
    let log = store.get_task(t2).await.unwrap().unwrap().events;
    assert_eq!(events, log, "the stream is the task's log");
    assert_eq!(events.last().unwrap().kind, "task.completed");
    // From an event on: only what came after it.
    let from = events[2].id;
    let rest = tokio::time::timeout(bound, engine.follow(t2, Some(from)).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(
        rest.into_iter().map(|e| e.unwrap().id).collect::<Vec<_>>(),
        log[3..].iter().map(|e| e.id).collect::<Vec<_>>()
    );

    // Failure: the step refuses for good, the task fails, and the wait returns that.
    let bad = engine.submit(submission("bad", "three", json!({"fail": true}))).await.unwrap().task_id;
    let failed = engine.wait_for(bad, bound).await.unwrap();
    assert_eq!(failed.state, TaskState::Failed);

    // A task that waits for a signal: the wait gives up at its bound.
    let waits = engine.submit(submission("waits", "waits", json!({}))).await.unwrap().task_id;
    let r = engine.wait_for(waits, Duration::from_millis(200)).await;
    assert!(matches!(r, Err(EngineError::TimedOut(_))), "{r:?}");
    let r = engine.wait_for(TaskId(987_654_321), bound).await;
    assert!(matches!(r, Err(EngineError::NoTask(_))), "{r:?}");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_and_follow_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = shiftboss_sqlite::SqliteStore::open(dir.path().join("s.db"), &Default::default()).unwrap();
    scenario(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_and_follow_on_postgres() {
    let Some(url) = test_db() else { return };
    let (_schema, store) = PgSchema::create(&url).await;
    scenario(Arc::new(store)).await;
}
