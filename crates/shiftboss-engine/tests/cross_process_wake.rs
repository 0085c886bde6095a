//! A job enqueued by another process (here: a `JobClient` over a second store handle on the same
//! SQLite file) starts at once on an idle scheduler whose poll is a minute away: the store's
//! subscription wakes it, not the poll.

use async_trait::async_trait;
use serde_json::{Value, json};
use shiftboss_core::InstanceId;
use shiftboss_engine::{
    Agent, AgentCall, AgentError, ClientConfig, Engine, EngineConfig, JobClient, JobOptions, Roles,
};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Far longer than the test may take: a job found by the poll would fail it.
const POLL: Duration = Duration::from_secs(60);
/// Generous for a loaded machine, and still a third of the poll.
const PATIENCE: Duration = Duration::from_secs(20);

struct Told(mpsc::UnboundedSender<Value>);

#[async_trait]
impl Agent for Told {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        let _ = self.0.send(call.input.clone());
        Ok(Value::Null)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_through_another_handle_wakes_an_idle_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wake.db");
    let open = || -> Arc<dyn Store> { Arc::new(SqliteStore::open(&path, &OpenOptions::default()).unwrap()) };
    let mut config = EngineConfig {
        roles: Roles { scheduler: true, supervisor: false, dispatcher: false },
        ..EngineConfig::default()
    };
    config.scheduler.poll_interval = POLL;
    let (tx, mut started) = mpsc::unbounded_channel();
    let engine = Engine::builder(open(), InstanceId::new("wake-test").unwrap())
        .config(config)
        .agent("mail", Told(tx))
        .build()
        .unwrap();
    let running = engine.start();
    let other = JobClient::new(open(), ClientConfig::default(), "other-process").unwrap();

    // A first job through the engine's own client, which rings its scheduler in-process: once it
    // has run and its reply is recorded, the scheduler has made its last claim and is idle.
    engine.jobs().enqueue("mail", json!({"n": 0}), JobOptions::default()).await.unwrap();
    tokio::time::timeout(PATIENCE, started.recv()).await.expect("the in-process job started").unwrap();
    while engine.metrics().completed < 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    for n in 1..=3 {
        other.enqueue("mail", json!({ "n": n }), JobOptions::default()).await.unwrap();
        let input = tokio::time::timeout(PATIENCE, started.recv())
            .await
            .unwrap_or_else(|_| panic!("job {n} from the other handle did not start within {PATIENCE:?}"))
            .unwrap();
        assert_eq!(input, json!({ "n": n }));
        while engine.metrics().completed < n + 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    running.shutdown().await;
}
