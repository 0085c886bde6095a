//! Pickup latency on an idle system: one job every `--every`, for `--for`; the time from the
//! return of the enqueue (its transaction committed) to the start of the job's handler.
//!
//! `--via store` enqueues through a second store handle, as another process would: the scheduler
//! learns of the job through the store (PostgreSQL's NOTIFY, SQLite's WAL watcher). `--via
//! engine` enqueues through the engine that runs the job (the embedded path), which wakes its own
//! scheduler. `--work jobs` (the default) enqueues retry jobs with a `JobClient`; `--work tasks`
//! submits the one-step bench workflow instead (the same claim path, a heavier submit).

use super::{BenchError, enqueue, noop, stats, store_name};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use shiftboss::target::DbTarget;
use shiftboss_engine::{ClientConfig, JobClient, JobOptions};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Via {
    Store,
    Engine,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Work {
    /// Retry jobs, through a `JobClient`.
    Jobs,
    /// One-step workflow tasks.
    Tasks,
}

#[derive(Debug, Args)]
pub struct PickupArgs {
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    every: Duration,
    #[arg(long = "for", default_value = "30s", value_parser = humantime::parse_duration)]
    duration: Duration,
    #[arg(long, value_enum, default_value_t = Via::Store)]
    via: Via,
    #[arg(long, value_enum, default_value_t = Work::Jobs)]
    work: Work,
    /// The scheduler's fallback poll (the engine's default is 500ms).
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    poll_interval: Duration,
}

pub async fn run(db: &DbTarget, a: PickupArgs) -> anyhow::Result<Value> {
    let store = db.open(true).await?;
    let starts = noop::Starts::default();
    // The engine's own settings (issue 22: the pickup a user meets with no tuning).
    let mut config = shiftboss_engine::EngineConfig::default();
    config.scheduler.poll_interval = a.poll_interval;
    let agent = noop::Noop { starts: Some(starts.clone()) };
    let engine = noop::engine(store.clone(), "bench-pickup", &["noop"], agent, config).await?;
    engine.register_workflow(&noop::workflow()).await?;
    // A second handle: its submissions reach the engine only through the store.
    let submitter = match a.via {
        Via::Store => db.open(false).await?,
        Via::Engine => store.clone(),
    };
    let client = match a.via {
        Via::Store => JobClient::new(submitter.clone(), ClientConfig::default(), "bench")?,
        // The engine's own client also rings its scheduler.
        Via::Engine => engine.jobs().clone(),
    };
    // As the throughput workload's jobs: a 1 s complete-by and quick retries.
    let options = || {
        JobOptions { timeout: Some(Duration::from_secs(1)), ..JobOptions::default() }
            .intervals([Duration::from_millis(1); 3])
    };
    let running = engine.start();
    // Let the engine settle into idle (restart release, leader election, first poll).
    tokio::time::sleep(Duration::from_secs(1)).await;

    let run = noop::run_id();
    let mut submitted = Vec::new();
    let mut tick = tokio::time::interval(a.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let end = Instant::now() + a.duration;
    let mut n = 0u64;
    while Instant::now() < end {
        tick.tick().await;
        let job = noop::job(&run, n);
        let key = job.key.clone();
        match (a.work, a.via) {
            (Work::Jobs, _) => {
                client.enqueue("noop", job.input, options()).await?;
            }
            (Work::Tasks, Via::Store) => enqueue::one(submitter.as_ref(), job).await?,
            (Work::Tasks, Via::Engine) => {
                engine.submit(job).await?;
            }
        }
        submitted.push((key, Instant::now()));
        n += 1;
    }
    let give_up = Instant::now() + Duration::from_secs(10);
    while starts.lock().unwrap_or_else(|p| p.into_inner()).len() < submitted.len() && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running.shutdown().await;
    let starts = starts.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // A handler can start before the submitter sees its commit acknowledged (the notice travels
    // faster than the reply): such samples count as 0, and how many there were is reported.
    let mut early = 0u64;
    let lat: Vec<f64> = submitted
        .iter()
        .filter_map(|(k, t0)| {
            starts.get(k).map(|t1| {
                if t1 < t0 {
                    early += 1;
                }
                t1.saturating_duration_since(*t0).as_secs_f64() * 1000.0
            })
        })
        .collect();
    let started = lat.len();
    let s = stats::summary(lat).ok_or(BenchError::NoSamples("pickup"))?;
    Ok(json!({
        "workload": "pickup", "store": store_name(db), "via": format!("{:?}", a.via).to_lowercase(),
        "work": format!("{:?}", a.work).to_lowercase(),
        "every_ms": a.every.as_millis() as u64, "submitted": submitted.len(), "started": started,
        "started_before_commit_ack": early, "latency": s,
    }))
}
