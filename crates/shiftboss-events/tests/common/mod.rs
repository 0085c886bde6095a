//! What the event agent's tests share: the NATS server on this machine (or, outside CI, a note
//! that it is missing), an engine on a SQLite file running one-step workflows of the agent, and
//! hand-built agent calls.

#![allow(dead_code)] // each test file uses its part

use serde_json::{Value, json};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, StepId, TaskId, Timestamp};
use shiftboss_engine::agent::AgentCall;
use shiftboss_engine::progress::Progress;
use shiftboss_engine::{Engine, EngineConfig, Outbound, OutboundConfig};
use shiftboss_events::{EVENT_AGENT, EventAgent, EventsConfig};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask, TaskDetail};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

pub const NATS_URL: &str = "nats://127.0.0.1:4222";

/// Whether the NATS server answers on 127.0.0.1:4222. Under CI (`CI` set) its absence fails the
/// test: CI starts it, so a missing one is a broken CI, not a reason to pass.
pub async fn nats_is_up(test: &str) -> bool {
    let up = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect("127.0.0.1:4222"))
        .await
        .is_ok_and(|r| r.is_ok());
    if !up {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: no NATS server on 127.0.0.1:4222 (CI must start one: nats-server -js)"
        );
        eprintln!("{test}: skipped: no NATS server on 127.0.0.1:4222 (start one with `nats-server -js`)");
    }
    up
}

/// A name no other test run uses: subjects and streams are shared by everything on the server.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{prefix}_{}_{nanos}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

pub fn agent(nats_url: &str, outbound: OutboundConfig) -> EventAgent {
    let config = EventsConfig { nats_url: nats_url.into(), ..EventsConfig::default() };
    EventAgent::new(&config, Outbound::new(&outbound).unwrap()).unwrap()
}

/// An agent call as the scheduler makes one, due within `within`.
pub fn call(config: Value, input: Value, key: &str, within: Duration) -> AgentCall {
    let deadline = Instant::now() + within;
    AgentCall {
        task_id: TaskId(41),
        step_id: StepId(7),
        step: "publish".into(),
        input,
        config,
        idempotency_key: key.into(),
        attempt: 1,
        try_number: 1,
        complete_by: Timestamp(0),
        deadline,
        progress: Progress::fixed(deadline),
        previous_progress: None,
    }
}

/// An engine on a SQLite file with the event agent, running.
pub struct Harness {
    _dir: tempfile::TempDir,
    pub store: Arc<dyn Store>,
    pub engine: Engine,
    running: Option<shiftboss_engine::RunningEngine>,
}

impl Harness {
    pub async fn start(agent: EventAgent) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
        let mut config = EngineConfig::default();
        config.scheduler.poll_interval = Duration::from_millis(20);
        config.supervisor.interval = Duration::from_millis(50);
        let engine = Engine::builder(store.clone(), InstanceId::new("e1").unwrap())
            .agent(EVENT_AGENT, agent)
            .config(config)
            .build()
            .unwrap();
        let running = Some(engine.start());
        Harness { _dir: dir, store, engine, running }
    }

    /// Registers a workflow of one `event` step with this config and input template.
    /// Registers a definition as it is (an imported Conductor one, say).
    pub async fn register_def(&self, def: &WorkflowDef) -> Result<(), String> {
        self.engine.register_workflow(def).await.map(|_| ()).map_err(|e| e.to_string())
    }

    pub async fn register(&self, name: &str, config: Value, input: Value) -> Result<(), String> {
        let def: WorkflowDef = serde_json::from_value(json!({
            "name": name,
            "steps": [{"name": "publish", "agent": EVENT_AGENT, "config": config, "input": input}],
        }))
        .unwrap();
        self.engine.register_workflow(&def).await.map(|_| ()).map_err(|e| e.to_string())
    }

    /// Submits a task of `workflow` and waits for its end (within 20 s).
    pub async fn run(&self, workflow: &str, key: &str, input: Value) -> TaskDetail {
        let submit = SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: key.into(),
            workflow: workflow.into(),
            version: None,
            input,
            priority: 0,
            actor: "test".into(),
        };
        let id = self.engine.submit(submit).await.unwrap().task_id;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let d = self.store.get_task(id).await.unwrap().unwrap();
            if d.task.state.is_terminal() {
                return d;
            }
            assert!(std::time::Instant::now() < deadline, "task {id} not ended after 20 s: {:#?}", d.steps);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

/// The one step of a task.
pub fn the_step(d: &TaskDetail) -> &shiftboss_core::model::StepRecord {
    d.steps.iter().find(|s| s.name == "publish").unwrap_or_else(|| panic!("no publish step: {:#?}", d.steps))
}
