//! Embedding shiftboss: a store, an engine with agents, a workflow, a task. Run it with
//! `cargo run -p shiftboss-engine --example embed`; it prints the finished task.

use shiftboss_core::{InstanceId, workflow::WorkflowDef};
use shiftboss_engine::outbound::AllowList;
use shiftboss_engine::{Agent, AgentCall, AgentError, Engine, HttpAgent, Outbound, OutboundConfig};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::SubmitTask;
use std::sync::Arc;

/// An agent wraps one remote service or resource; this one books an order in a ledger.
struct Ledger;

#[async_trait::async_trait]
impl Agent for Ledger {
    async fn call(&self, call: &AgentCall) -> Result<serde_json::Value, AgentError> {
        // call.idempotency_key is the same on every attempt at this step: pass it on to the service.
        Ok(serde_json::json!({"booked": call.input["order_id"], "key": call.idempotency_key}))
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path().join("orders.db"), &OpenOptions::default())?);
    let engine = Engine::builder(store.clone(), InstanceId::new("orders-1")?) // stable across restarts
        // Outbound calls go through the SSRF guard; payments.internal resolves to a private
        // address, so the deployment opens it by name.
        .agent(
            "payment",
            HttpAgent::for_service(
                "http://payments.internal:8080",
                Outbound::new(&OutboundConfig {
                    allow: AllowList::parse(["payments.internal"])?,
                    ..OutboundConfig::default()
                })?,
            )?,
        )
        .agent("ledger", Ledger)
        .build()?;
    engine
        .register_workflow(&WorkflowDef::from_json(
            r#"{"name": "order", "version": 1,
                "steps": [{"name": "book", "agent": "ledger", "timeout": "5s",
                           "retry": {"kind": "intervals", "intervals": ["1m", "5m", "10m", "30m", "1h"]}}]}"#,
        )?)
        .await?;
    let running = engine.start(); // the scheduler and the supervisor, in this process
    let submitted = engine
        .submit(SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: "order-42".into(),
            workflow: "order".into(),
            version: None,
            input: serde_json::json!({"order_id": "order-42", "amount_cents": 1999}),
            priority: 0,
            actor: "shop".into(),
        })
        .await?;
    // Awaits the task's end (woken by the engine's writes and the store's channel), at most 30 s.
    let task = engine.wait_for(submitted.task_id, std::time::Duration::from_secs(30)).await?;
    running.shutdown().await;
    println!("task {} ({}): {} with output {}", task.id, task.key, task.state, task.output.unwrap_or_default());
    Ok(())
}
