//! The no-op job of every throughput workload: a one-step workflow whose agent does nothing, and
//! engine settings sized for a drain (large batches, many slots).

use serde_json::{Value, json};
use shiftboss_core::InstanceId;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_engine::{Agent, AgentCall, AgentError, Engine, EngineConfig, RunningEngine};
use shiftboss_store::{Store, SubmitTask};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const WORKFLOW: &str = "bench-noop";

/// One agent step, "noop" (its config is for `serve --agent noop=URL`, which runs it over HTTP;
/// the in-process agent ignores it); a short complete-by so a lost step comes back quickly, and the retry
/// policy's shortest delay so a recovered step is due at once.
pub fn workflow() -> WorkflowDef {
    WorkflowDef::from_json(
        r#"{"name": "bench-noop", "version": 1,
            "retry": {"kind": "intervals", "intervals": ["1ms", "1ms", "1ms"]},
            "steps": [{"name": "noop", "agent": "noop", "config": {"url": "/noop"}, "timeout": "1s"}]}"#,
    )
    .expect("the bench workflow is valid")
}

/// The job `n` of a run: keys are unique per run so that a reused database never dedupes them.
pub fn job(run: &str, n: u64) -> SubmitTask {
    let key = format!("bench-{run}-{n}");
    SubmitTask {
        domains: Default::default(),
        correlation_id: None,
        notify: None,
        key: key.clone(),
        workflow: WORKFLOW.into(),
        version: Some(1),
        input: json!({ "k": key }),
        priority: 0,
        actor: "bench".into(),
    }
}

/// A run id, so keys of two runs never meet.
pub fn run_id() -> String {
    format!("{:08x}", fastrand::u32(..))
}

/// Does nothing. When it has a recorder, notes when each job's call started, by key.
#[derive(Clone, Default)]
pub struct Noop {
    pub starts: Option<Starts>,
}

pub type Starts = Arc<Mutex<HashMap<String, Instant>>>;

#[async_trait::async_trait]
impl Agent for Noop {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        if let Some(starts) = &self.starts {
            let now = Instant::now();
            if let Some(k) = call.input["k"].as_str() {
                starts.lock().unwrap_or_else(|p| p.into_inner()).entry(k.to_owned()).or_insert(now);
            }
        }
        Ok(Value::Null)
    }
}

/// The scheduler sized for throughput: `slots` steps in flight, claimed and recorded in batches
/// of up to half of them, so that one batch is claimed while the one before is recorded (with
/// batches as large as the slots, each claim waited for the last batch's replies: on both stores
/// 2,048 slots in batches of 1,024 drained 15-35% faster than 512 in batches of 512). Durability
/// is the store's own (SQLite FULL, PostgreSQL synchronous_commit on).
pub fn config(slots: u32) -> EngineConfig {
    config_batched(slots, slots / 2)
}

/// [`config`] with claims and reply batches of up to `batch` steps.
pub fn config_batched(slots: u32, batch: u32) -> EngineConfig {
    let mut c = EngineConfig::default();
    let batch = batch.clamp(1, slots.max(1));
    c.scheduler.concurrency = slots;
    c.scheduler.min_concurrency = slots;
    c.scheduler.claim_batch = batch;
    c.scheduler.reply_batch = batch as usize;
    // Submissions in this process and finished steps wake the scheduler; the poll is a fallback.
    c.scheduler.poll_interval = Duration::from_millis(100);
    c
}

/// `--defaults`: the engine's own settings, as `serve` runs with no tuning (the slots adapt from
/// 64 up to 2,048); otherwise [`config`] with `slots`.
pub fn config_or_defaults(slots: u32, defaults: bool) -> EngineConfig {
    if defaults { EngineConfig::default() } else { config(slots) }
}

/// An engine with agents named `names`, all no-ops sharing one recorder.
pub async fn engine(
    store: Arc<dyn Store>,
    instance: &str,
    names: &[&str],
    agent: Noop,
    config: EngineConfig,
) -> anyhow::Result<Engine> {
    let mut b = Engine::builder(store, InstanceId::new(instance)?).config(config);
    for n in names {
        b = b.agent(*n, agent.clone());
    }
    Ok(b.build()?)
}

/// Waits until the engine has completed `steps` steps, then shuts it down; returns when the last
/// step completed (before the shutdown, which the figures must not count), or a timeout error
/// (after shutting down) when `give_up` passes first.
pub async fn drain(
    engine: &Engine,
    running: RunningEngine,
    steps: u64,
    give_up: Instant,
    timeout: Duration,
) -> anyhow::Result<Instant> {
    loop {
        let done = engine.metrics().completed;
        if done >= steps {
            let at = Instant::now();
            running.shutdown().await;
            return Ok(at);
        }
        if Instant::now() > give_up {
            running.shutdown().await;
            let e = super::BenchError::Timeout { what: "order workflows", after: timeout, done, total: steps };
            return Err(e.into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
