//! Submissions as an application makes them: N order workflows (the demo's three steps, no-op
//! agents), each submitted alone by one of `--clients` concurrent clients through the library
//! (`Engine::submit`, whose group commit writes concurrent submissions together; `--via store`
//! calls `Store::submit_task` instead, a transaction per submission), or with `--batch B`, B at a
//! time per call (`Engine::submit_many`, one transaction per batch).
//! Prints tasks submitted/s and the submit call's latency (p50, p99; per call, so per batch with
//! `--batch`). With `--drain`, the engine runs beside the clients, and the figure that counts is
//! end to end: from the first submission to the last workflow's completion.

use super::stats::{round3, summary};
use super::{noop, store_name};
use clap::Args;
use serde_json::{Value, json};
use shiftboss::demo::workflow::{order_input, order_workflow};
use shiftboss::target::{DbTarget, split_schema};
use shiftboss_postgres::{PgOptions, PostgresStore};
use shiftboss_store::{Store, SubmitTask};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[arg(long, default_value_t = 10_000)]
    orders: u32,
    /// Concurrent clients, each submitting one task at a time.
    #[arg(long, default_value_t = 64)]
    clients: u32,
    /// Tasks per call: 1 submits each alone (`submit_task`), more submit them in batches
    /// (`submit_tasks`).
    #[arg(long, default_value_t = 1)]
    batch: u32,
    /// What the clients call: the engine (the library, with its group commit) or the store.
    #[arg(long, value_enum, default_value_t = Via::Engine)]
    via: Via,
    /// The engine's group commit: batches written at once (0: each submission alone; default:
    /// the store's, 1 on SQLite, 4 on PostgreSQL with the default pool).
    #[arg(long)]
    submit_writers: Option<usize>,
    /// PostgreSQL: the store's most connections (its pool), which the clients share.
    #[arg(long, default_value_t = PgOptions::default().pool_size)]
    pool: usize,
    /// Run the engine while the clients submit, and time to the last completion.
    #[arg(long)]
    drain: bool,
    /// Steps in flight when draining.
    #[arg(long, default_value_t = 2048)]
    concurrency: u32,
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    Engine,
    Store,
}

/// The store, with the pool the clients share on PostgreSQL.
async fn open(db: &DbTarget, pool: usize) -> anyhow::Result<Arc<dyn Store>> {
    match db {
        DbTarget::Sqlite(_) => db.open(true).await,
        DbTarget::Postgres(url) => {
            let (url, schema) = split_schema(url)?;
            let opts = PgOptions { schema, pool_size: pool, ..PgOptions::default() };
            Ok(Arc::new(PostgresStore::connect(&url, &opts).await?))
        }
    }
}

pub async fn run(db: &DbTarget, a: SubmitArgs) -> anyhow::Result<Value> {
    let store = open(db, a.pool).await?;
    let mut config = noop::config(a.concurrency);
    config.submit.writers = a.submit_writers;
    let engine =
        noop::engine(store.clone(), "bench-submit", &["stock", "payment", "shipping"], noop::Noop::default(), config)
            .await?;
    let wf = Arc::new(order_workflow());
    engine.register_workflow(&wf).await?;
    let run = noop::run_id();
    let running = a.drain.then(|| engine.start());
    let clients = a.clients.max(1);
    let batch = a.batch.max(1) as usize;
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(clients as usize);
    for c in 0..clients {
        let (store, engine, wf, run, via) = (store.clone(), engine.clone(), wf.clone(), run.clone(), a.via);
        let mine: Vec<SubmitTask> = (1..=a.orders)
            .filter(|n| n % clients == c)
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
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(mine.len().div_ceil(batch));
            for calls in mine.chunks(batch) {
                let at = Instant::now();
                match (via, batch) {
                    (Via::Store, 1) => _ = store.submit_task(calls[0].clone()).await?,
                    (Via::Store, _) => _ = store.submit_tasks(calls.to_vec()).await?,
                    (Via::Engine, 1) => _ = engine.submit(calls[0].clone()).await?,
                    (Via::Engine, _) => _ = engine.submit_many(calls.to_vec()).await?,
                }
                latencies.push(at.elapsed().as_secs_f64() * 1000.0);
            }
            Ok::<_, shiftboss_engine::EngineError>(latencies)
        }));
    }
    let mut latencies = Vec::with_capacity(a.orders as usize);
    for h in handles {
        latencies.extend(h.await??);
    }
    let submit_s = t0.elapsed().as_secs_f64();
    let mut out = json!({
        "workload": "submit", "store": store_name(db), "workflows": a.orders, "clients": clients, "batch": batch,
        "via": format!("{:?}", a.via).to_lowercase(),
        "submit_transactions": engine.metrics().submit_batches,
        "submit_writers": a.submit_writers.unwrap_or_else(|| store.concurrent_writes()),
        "submit_s": round3(submit_s), "submissions_per_s": round3(f64::from(a.orders) / submit_s),
        "latency": summary(latencies),
    });
    if let Some(running) = running {
        let done_at = noop::drain(&engine, running, u64::from(a.orders) * 3, t0 + a.timeout, a.timeout).await?;
        let e2e = (done_at - t0).as_secs_f64();
        out["end_to_end_s"] = json!(round3(e2e));
        out["end_to_end_workflows_per_s"] = json!(round3(f64::from(a.orders) / e2e));
        let m = engine.metrics();
        out["steps_per_claim"] = json!(round3(m.claimed as f64 / m.claims.max(1) as f64));
        out["replies_per_batch"] = json!(round3(m.completed as f64 / m.reply_batches.max(1) as f64));
    }
    Ok(out)
}
