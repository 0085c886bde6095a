//! 3-step workflows per second: the demo's order workflow (reserve stock, charge, ship; with its
//! compensations defined but never needed) with in-process no-op agents, so the figure is the
//! engine's and the store's alone. N orders are enqueued in bulk, then drained.
//! (`shiftboss demo --no-faults` runs the same workflow through real HTTP services; the harness
//! measures that too.)

use super::{enqueue, noop, stats::round3, store_name};
use clap::Args;
use serde_json::{Value, json};
use shiftboss::demo::workflow::{order_input, order_workflow};
use shiftboss::target::DbTarget;
use shiftboss_store::SubmitTask;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct FlowArgs {
    #[arg(long, default_value_t = 10_000)]
    orders: u32,
    /// Steps in flight; claims and reply batches take up to half of them.
    #[arg(long, default_value_t = 2048)]
    concurrency: u32,
    /// The engine's default scheduler settings (what `serve` runs with no tuning) instead of
    /// --concurrency's fixed slots.
    #[arg(long)]
    defaults: bool,
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

pub async fn run(db: &DbTarget, a: FlowArgs) -> anyhow::Result<Value> {
    let store = db.open(true).await?;
    let engine = noop::engine(
        store.clone(),
        "bench-flow",
        &["stock", "payment", "shipping"],
        noop::Noop::default(),
        noop::config_or_defaults(a.concurrency, a.defaults),
    )
    .await?;
    let wf = order_workflow();
    engine.register_workflow(&wf).await?;
    let run = noop::run_id();
    let orders: Vec<SubmitTask> = (1..=a.orders)
        .map(|n| {
            let (key, input) = order_input(n);
            SubmitTask {
                domains: Default::default(),
                correlation_id: None,
                notify: None,
                key: format!("{run}-{key}"),
                workflow: wf.name.clone(),
                version: Some(wf.version),
                input,
                priority: 0,
                actor: "bench".into(),
            }
        })
        .collect();
    let enqueue_t = Instant::now();
    enqueue::batches(engine.store(), orders).await?;
    let enqueue_s = enqueue_t.elapsed().as_secs_f64();
    let steps = u64::from(a.orders) * 3;
    let t0 = Instant::now();
    let done_at = noop::drain(&engine, engine.start(), steps, t0 + a.timeout, a.timeout).await?;
    let secs = (done_at - t0).as_secs_f64();
    let m = engine.metrics();
    Ok(json!({
        "steps_per_claim": round3(m.claimed as f64 / m.claims.max(1) as f64),
        "replies_per_batch": round3(m.completed as f64 / m.reply_batches.max(1) as f64),
        "workload": "flow", "store": store_name(db), "workflows": a.orders, "steps": steps,
        "concurrency": if a.defaults { json!("defaults") } else { json!(a.concurrency) },
        "drain_s": round3(secs), "workflows_per_s": round3(f64::from(a.orders) / secs),
        "steps_per_s": round3(steps as f64 / secs),
        // The bulk submission before the drain (many tasks per transaction, a few connections):
        // not counted in the drain's figures.
        "enqueue_s": round3(enqueue_s), "enqueued_per_s": round3(f64::from(a.orders) / enqueue_s),
    }))
}
