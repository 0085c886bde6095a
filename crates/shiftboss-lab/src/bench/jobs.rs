//! Throughput: N no-op retry jobs (the engine's `enqueue`, batches of 1,000, not timed), then
//! drained by one engine in this process. The figure is jobs per second of the drain, from the
//! engine's start to the commit of the last completion (the engine counts a completion once its
//! reply's transaction commits).

use super::{BenchError, noop, stats::round3, store_name};
use clap::Args;
use serde_json::{Value, json};
use shiftboss::target::DbTarget;
use shiftboss_core::TaskState;
use shiftboss_engine::JobOptions;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// How many jobs.
    #[arg(long, default_value_t = 100_000)]
    jobs: u64,
    /// Steps in flight; claims and reply batches take up to half of them.
    #[arg(long, default_value_t = 2048)]
    concurrency: u32,
    /// The most steps a claim (and a reply batch) takes, instead of half the slots.
    #[arg(long, conflicts_with = "defaults")]
    batch: Option<u32>,
    /// The engine's default scheduler settings (what `serve` runs with no tuning) instead of
    /// --concurrency's fixed slots.
    #[arg(long)]
    defaults: bool,
    /// Give up after this long.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Only enqueue, for another process (`shiftboss serve`) to drain.
    #[arg(long)]
    enqueue_only: bool,
    /// Enqueue nothing: drain what the store holds, beside other processes doing the same, and
    /// end once it has no live task (the scale-out measurement, `bench/scale_out.py`). Its
    /// figures are this process's own.
    #[arg(long, conflicts_with = "enqueue_only")]
    drain_only: bool,
    /// This process's instance id (each of several draining processes needs its own).
    #[arg(long, default_value = "bench-jobs")]
    instance: String,
}

pub async fn run(db: &DbTarget, a: JobsArgs) -> anyhow::Result<Value> {
    let store = db.open(true).await?;
    let config = match a.batch {
        Some(batch) => noop::config_batched(a.concurrency, batch),
        None => noop::config_or_defaults(a.concurrency, a.defaults),
    };
    let engine = noop::engine(store.clone(), &a.instance, &["noop"], noop::Noop::default(), config.clone()).await?;
    if a.drain_only {
        return drain_only(&engine, store.as_ref(), a.timeout).await;
    }
    let run = noop::run_id();
    let t = Instant::now();
    let client = engine.jobs();
    // As the bench workflow's step: a 1 s complete-by and quick retries, so that a call lost on
    // the way (the HTTP sink of the load workload) costs a second, not M6's first minute.
    let options = || {
        JobOptions { timeout: Some(Duration::from_secs(1)), ..JobOptions::default() }
            .intervals([Duration::from_millis(1); 3])
    };
    let mut n = 0;
    while n < a.jobs {
        let batch =
            (n..a.jobs.min(n + 1000)).map(|i| client.job("noop", json!({"k": format!("bench-{run}-{i}")}), options()));
        client.enqueue_all(batch.collect()).await?;
        n = a.jobs.min(n + 1000);
    }
    let enqueue_s = t.elapsed().as_secs_f64();
    if a.enqueue_only {
        return Ok(
            json!({"workload": "enqueue", "store": store_name(db), "jobs": a.jobs, "enqueue_s": round3(enqueue_s)}),
        );
    }
    eprintln!("bench jobs: {} enqueued in {enqueue_s:.1} s; draining", a.jobs);

    let t0 = Instant::now();
    let running = engine.start();
    let give_up = t0 + a.timeout;
    loop {
        let done = engine.metrics().completed;
        if done >= a.jobs {
            break;
        }
        if Instant::now() > give_up {
            running.shutdown().await;
            return Err(BenchError::Timeout { what: "drain", after: a.timeout, done, total: a.jobs }.into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let drain_s = t0.elapsed().as_secs_f64();
    running.shutdown().await;
    let m = engine.metrics();
    let counts = store.task_counts().await?;
    let completed = counts.iter().filter(|(s, _)| *s == TaskState::Completed).map(|(_, n)| n).sum::<u64>();
    Ok(json!({
        "workload": "jobs", "store": store_name(db), "jobs": a.jobs, "concurrency": if a.defaults { json!("defaults") } else { json!(a.concurrency) },
        "claim_batch": config.scheduler.claim_batch,
        "enqueue_s": round3(enqueue_s), "drain_s": round3(drain_s), "jobs_per_s": round3(a.jobs as f64 / drain_s),
        "completed_tasks_in_store": completed,
        "steps_per_claim": round3(m.claimed as f64 / m.claims.max(1) as f64),
        "replies_per_batch": round3(m.completed as f64 / m.reply_batches.max(1) as f64),
    }))
}

/// Runs the engine until the store holds no live task (read every 100 ms: every process of a
/// scale-out run reads it, so not more often), then stops it.
async fn drain_only(
    engine: &shiftboss_engine::Engine,
    store: &dyn shiftboss_store::Store,
    timeout: Duration,
) -> anyhow::Result<Value> {
    let t0 = Instant::now();
    let running = engine.start();
    loop {
        let counts = store.task_counts().await?;
        if counts.iter().all(|(s, n)| s.is_terminal() || *n == 0) {
            break;
        }
        if t0.elapsed() > timeout {
            running.shutdown().await;
            anyhow::bail!("the store still had live tasks after {timeout:?}: {counts:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drain_s = t0.elapsed().as_secs_f64();
    running.shutdown().await;
    let done = engine.metrics().completed;
    Ok(json!({"workload": "jobs_drain_only", "completed_here": done, "drain_s": round3(drain_s)}))
}
