//! Recovery on PostgreSQL without polling (issue 6): a scheduler that sleeps (its idle poll is
//! 30 s) is woken by the NOTIFY of another process's sweep that returns a lapsed step to Pending,
//! and that supervisor sweeps when the step's complete-by passes, not on a tick: the step is
//! claimed again within the supervisor interval after its complete-by, never before it.

mod common;

use async_trait::async_trait;
use common::*;
use serde_json::{Value, json};
use shiftboss_core::InstanceId;
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{Engine, EngineConfig, Roles};
use shiftboss_postgres::{PgOptions, PostgresStore};
use shiftboss_store::Store;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Hangs on its first call (the runtime drops it at complete-by, reporting nothing, as a dead
/// agent would), answers at once after; records when each call started.
struct HangsOnce {
    starts: Arc<Mutex<Vec<Instant>>>,
}

#[async_trait]
impl Agent for HangsOnce {
    async fn call(&self, _call: &AgentCall) -> Result<Value, AgentError> {
        let first = {
            let mut starts = self.starts.lock().unwrap();
            starts.push(Instant::now());
            starts.len() == 1
        };
        if first {
            std::future::pending::<()>().await;
        }
        Ok(json!({}))
    }
}

const SWEEP_INTERVAL: Duration = Duration::from_millis(200);

async fn store(url: &str, schema: &str) -> Arc<dyn Store> {
    let opts = PgOptions { schema: schema.into(), pool_size: 2, ..PgOptions::default() };
    Arc::new(PostgresStore::connect(url, &opts).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeps_requeue_wakes_a_sleeping_scheduler_of_another_process() {
    let Some(url) = test_db() else { return };
    let (schema, _) = PgSchema::create(&url).await;
    let mut config = EngineConfig::default();
    config.scheduler.idle_poll = Duration::from_secs(30);
    config.supervisor.interval = SWEEP_INTERVAL;
    config.supervisor.idle_interval = Duration::from_secs(30);
    config.supervisor.leader_ttl = Duration::from_secs(30);
    let starts = Arc::new(Mutex::new(Vec::new()));
    let scheduler = Engine::builder(store(&url, &schema.name).await, InstanceId::new("sched").unwrap())
        .agent("dies", HangsOnce { starts: starts.clone() })
        .config(EngineConfig {
            roles: Roles { scheduler: true, supervisor: false, dispatcher: false },
            ..config.clone()
        })
        .build()
        .unwrap();
    let def = r#"{"name":"w","steps":[{"name":"a","agent":"dies","timeout":"1s"}]}"#;
    scheduler.register_workflow(&WorkflowDef::from_json(def).unwrap()).await.unwrap();
    let supervisor = Engine::builder(store(&url, &schema.name).await, InstanceId::new("sup").unwrap())
        .default_retry(RetryPolicy::Intervals { intervals: vec![Duration::ZERO], max_failures: None })
        .config(EngineConfig { roles: Roles { scheduler: false, supervisor: true, dispatcher: false }, ..config })
        .build()
        .unwrap();
    let (a, b) = (scheduler.start(), supervisor.start());
    // Both listen before the work exists (a notification sent before a LISTEN is not delivered).
    tokio::time::sleep(Duration::from_millis(500)).await;

    let task = submission("t", "w", json!({}));
    // Through a third handle: neither engine is told in-process.
    let id = store(&url, &schema.name).await.submit_task(task).await.unwrap().task_id;
    let give_up = Instant::now() + Duration::from_secs(20);
    while starts.lock().unwrap().len() < 2 {
        assert!(Instant::now() < give_up, "the lapsed step never started again: {:?}", starts.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let store = store(&url, &schema.name).await;
    let give_up = Instant::now() + Duration::from_secs(20);
    while !store.get_task(id).await.unwrap().unwrap().task.state.is_terminal() {
        assert!(Instant::now() < give_up, "the task never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Timed by the store's own clock: the first claim's complete-by, and when the second claim
    // took the step back. (The agents' start times would differ by however long the first claim
    // took to reach its agent, which under load is longer than the second.)
    let events = store.get_task(id).await.unwrap().unwrap().events;
    let claims: Vec<_> = events.iter().filter(|e| e.kind == shiftboss_store::event_kind::STEP_CLAIMED).collect();
    assert_eq!(claims.len(), 2, "claimed once, then again after its lease lapsed: {claims:?}");
    let complete_by = claims[0].detail["complete_by"].as_i64().expect("a claim's event has its complete-by");
    let again = claims[1].at.0;
    assert!(again >= complete_by, "claimed again {} ms before its complete-by", complete_by - again);
    let late = Duration::from_millis((again - complete_by) as u64);
    assert!(
        late <= SWEEP_INTERVAL + Duration::from_millis(300),
        "claimed again {late:?} after its complete-by (the sweep interval is {SWEEP_INTERVAL:?})"
    );
    eprintln!("recovery: claimed again {late:?} after complete-by");
    a.shutdown().await;
    b.shutdown().await;
}
