//! A step's slot is free once its agent has answered, not once its reply's batch commits: while a
//! reply cannot be recorded (its task's row is locked by another session), a scheduler with one
//! slot runs the next steps; and it holds no more claimed but unrecorded steps than its slot and
//! the places of replies waiting to be recorded (`SchedulerConfig::reply_places`), so the step
//! after those waits until the first reply is recorded.

mod common;

use async_trait::async_trait;
use common::*;
use serde_json::{Value, json};
use shiftboss_core::InstanceId;
use shiftboss_core::TaskState;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{Engine, EngineConfig, Roles};
use shiftboss_store::{Store, SubmitTask};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Answers at once; records which tasks it was called for, in order.
struct Records {
    calls: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Agent for Records {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        self.calls.lock().unwrap().push(call.input["k"].as_str().unwrap_or_default().to_owned());
        Ok(json!({}))
    }
}

fn task(key: &str) -> SubmitTask {
    submission(key, "w", json!({ "k": key }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_frees_when_its_agent_answers_and_unrecorded_replies_stay_bounded() {
    let Some(url) = test_db() else { return };
    let (schema, store) = PgSchema::create(&url).await;
    let store: Arc<dyn Store> = Arc::new(store);
    let mut config = EngineConfig::default();
    config.scheduler.concurrency = 1;
    config.scheduler.min_concurrency = 1;
    config.scheduler.reply_batch = 1;
    config.scheduler.reply_writers = 1;
    config.roles = Roles { scheduler: true, supervisor: false, dispatcher: false };
    let places = config.scheduler.reply_places();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let engine = Engine::builder(store.clone(), InstanceId::new("slots").unwrap())
        .agent("rec", Records { calls: calls.clone() })
        .config(config)
        .build()
        .unwrap();
    let def = r#"{"name":"w","steps":[{"name":"a","agent":"rec","timeout":"60s"}]}"#;
    engine.register_workflow(&WorkflowDef::from_json(def).unwrap()).await.unwrap();
    let a = engine.submit(task("a")).await.unwrap().task_id;

    // Another session holds task a's row: its reply's write waits for it.
    let (locker, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    locker
        .batch_execute(&format!("BEGIN; SELECT 1 FROM \"{}\".tasks WHERE task_key = 'a' FOR UPDATE", schema.name))
        .await
        .unwrap();
    let running = engine.start();
    let called = |n: usize| {
        let calls = calls.clone();
        move || {
            let calls = calls.clone();
            async move { calls.lock().unwrap().len() >= n }
        }
    };
    wait_for("a's agent call", Duration::from_secs(20), called(1)).await;
    // With the slot held until a's reply commits, b would wait for the lock. Each answered step's
    // reply takes a place (a's is held by the writer that waits for the lock) and frees the slot.
    let keys: Vec<String> = (1..=places).map(|i| format!("t{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        engine.submit(task(key)).await.unwrap();
        wait_for(&format!("{key}'s agent call while a's reply waits"), Duration::from_secs(20), called(i + 2)).await;
    }
    assert_eq!(
        store.get_task(a).await.unwrap().unwrap().task.state,
        TaskState::Running,
        "a's reply is not recorded yet"
    );

    // The last answered step waits for a place, holding the one slot: the next is not claimed.
    // (Nothing signals a claim that does not happen: the scheduler gets half a second to make it.)
    engine.submit(task("last")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        engine.metrics().claimed,
        1 + places as u64,
        "a step was claimed beyond the slot and the places of unrecorded replies"
    );
    let mut expected = vec!["a".to_owned()];
    expected.extend(keys.iter().cloned());
    assert_eq!(*calls.lock().unwrap(), expected);

    locker.batch_execute("COMMIT").await.unwrap();
    wait_all_completed(store.as_ref(), places + 2, Duration::from_secs(20)).await;
    expected.push("last".to_owned());
    assert_eq!(*calls.lock().unwrap(), expected);
    running.shutdown().await;
}
