//! `shiftboss demo`: the seeds' e-commerce example, run for real.
//!
//! It starts fake stock, payment and shipping services on loopback, submits N orders of the
//! workflow reserve stock -> charge payment -> ship, runs them with the scheduler, the agents and
//! the supervisor, and prints a summary. Killed at any point and started again, it picks up where
//! it was: the orders are submitted under stable keys, so a rerun finds the same tasks.

mod children;
mod summary;
pub mod workflow;

use crate::fake_services::{self as services, FaultRates, Ledger, ledger};
use crate::patient::{Patient, Waiter};
use crate::target::DbTarget;
use anyhow::{Context, bail};
use clap::Args;
use shiftboss_core::InstanceId;
use shiftboss_engine::{Engine, EngineConfig, EngineError, HttpAgent, Outbound, OutboundConfig};
use shiftboss_store::{Store, SubmitTask};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Orders submitted in one transaction.
const SUBMIT_BATCH: usize = 200;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How many orders to run.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    orders: u32,
    /// Delete the database and the services' ledger first, to start over (SQLite; on PostgreSQL,
    /// a new schema starts over by itself).
    #[arg(long)]
    fresh: bool,
    /// Services that never fail (to measure the engine alone).
    #[arg(long)]
    no_faults: bool,
    /// Share of requests a service answers 503 (a fault that passes).
    #[arg(long, default_value_t = 0.10, value_parser = rate)]
    transient_rate: f64,
    /// Share of requests a service applies but answers only after the step's deadline.
    #[arg(long, default_value_t = 0.02, value_parser = rate)]
    hang_rate: f64,
    /// Share of requests a service refuses for good (out of stock, card declined, address unknown).
    #[arg(long, default_value_t = 0.01, value_parser = rate)]
    reject_rate: f64,
    /// The most steps run at once [default: the engine's, which adapts to the backlog and the
    /// services' pace up to 2048].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: Option<u32>,
    /// How often the supervisor looks for lapsed leases.
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    supervisor_interval: Duration,
    /// This process's instance id; keep it across restarts so it takes back what it held.
    #[arg(long, default_value = "demo")]
    instance_id: String,
    /// Scheduler processes: this one, plus N-1 `shiftboss serve` child processes sharing the
    /// store (worth it with PostgreSQL; SQLite serialises writers anyway).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    schedulers: u32,
}

fn rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{v} is not between 0 and 1"));
    }
    Ok(v)
}

impl DemoArgs {
    fn faults(&self) -> anyhow::Result<FaultRates> {
        if self.no_faults {
            return Ok(FaultRates::none());
        }
        if self.transient_rate + self.hang_rate + self.reject_rate > 1.0 {
            bail!("--transient-rate, --hang-rate and --reject-rate add up to more than 1");
        }
        Ok(FaultRates {
            transient: self.transient_rate,
            hang: self.hang_rate,
            reject: self.reject_rate,
            // Well past the steps' 1 s complete-by.
            hang_for: Duration::from_secs(3),
        })
    }
}

pub async fn run(db: &DbTarget, args: DemoArgs) -> anyhow::Result<bool> {
    let faults = args.faults()?;
    let instance = InstanceId::new(args.instance_id.clone())?;
    let ledger_file = ledger::path_for(db)?;
    if args.fresh {
        let mut files = vec![ledger_file.clone()];
        match db {
            DbTarget::Sqlite(path) => files.push(path.clone()),
            DbTarget::Postgres(_) => bail!("--fresh works on SQLite files only; drop the PostgreSQL schema yourself"),
        }
        for p in files {
            for suffix in ["", "-wal", "-shm"] {
                let f = PathBuf::from(format!("{}{suffix}", p.display()));
                if f.exists() {
                    std::fs::remove_file(&f).with_context(|| format!("removing {}", f.display()))?;
                }
            }
        }
    }
    // The engine gets the store itself (its roles retry on their own); the demo's own calls ride
    // out an outage (a failover) for up to --store-wait, and resume.
    let raw = db.open(true).await?;
    let wait = crate::target::bounds().wait;
    let store = Patient::wrap(raw.clone(), wait);
    let ledger = Arc::new(Ledger::open(&ledger_file)?);
    // A store with no task starts over (a new file, a new schema): effects recorded for orders it
    // no longer has are not this store's, and its orders will reuse their keys.
    if store.task_counts().await?.iter().all(|(_, n)| *n == 0) {
        ledger.start_over()?;
    }

    let stock = services::start("stock", "out of stock", 0, faults, ledger.clone()).await?;
    let payment = services::start("payment", "card declined", 0, faults, ledger.clone()).await?;
    let shipping = services::start("shipping", "address not deliverable", 0, faults, ledger.clone()).await?;

    let mut config = EngineConfig::default();
    if let Some(n) = args.concurrency {
        config.scheduler.concurrency = n;
    }
    config.scheduler.poll_interval = Duration::from_millis(100);
    config.supervisor.interval = args.supervisor_interval;
    config.supervisor.leader_ttl = (args.supervisor_interval * 8).max(Duration::from_secs(2));
    // The demo's services listen on loopback, which the SSRF guard refuses unless allowed.
    let outbound = Outbound::new(&OutboundConfig::allowing_loopback())?;
    let engine = Engine::builder(raw, instance)
        .agent("stock", HttpAgent::for_service(&stock.base_url, outbound.clone()).map_err(anyhow::Error::msg)?)
        .agent("payment", HttpAgent::for_service(&payment.base_url, outbound.clone()).map_err(anyhow::Error::msg)?)
        .agent("shipping", HttpAgent::for_service(&shipping.base_url, outbound).map_err(anyhow::Error::msg)?)
        .config(config)
        .build()?;
    let waiter = Waiter::new(wait);
    waiter
        .retry("registering the order workflow", || async {
            match engine.register_workflow(&workflow::order_workflow()).await {
                Err(EngineError::Store(e)) => Err(e),
                other => Ok(other),
            }
        })
        .await??;
    eprintln!(
        "shiftboss demo: {} orders on {} (services: stock {}, payment {}, shipping {})",
        args.orders, db, stock.base_url, payment.base_url, shipping.base_url
    );

    let processed_before = store.summarize().await?.steps_in(shiftboss_core::StepState::Processed);
    let started = Instant::now();
    let running = engine.start();
    let children = children::start(db, &args, &[("stock", &stock), ("payment", &payment), ("shipping", &shipping)])?;
    let bar = indicatif::ProgressBar::new(u64::from(args.orders));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} orders done {msg}")
            .expect("a valid template"),
    );
    let interrupted = tokio::select! {
        r = submit_and_wait(&engine, &waiter, store.as_ref(), args.orders, &bar) => { r?; false }
        _ = tokio::signal::ctrl_c() => true,
    };
    bar.finish_and_clear();
    children.stop();
    running.shutdown().await;
    let elapsed = started.elapsed();

    let figures = summary::ledger_figures(&ledger)?;
    let summary = store.summarize().await?;
    let report = summary::Report {
        processed_this_run: summary.steps_in(shiftboss_core::StepState::Processed).saturating_sub(processed_before),
        schedulers: args.schedulers,
        summary,
        metrics: engine.metrics(),
        elapsed,
        applied_twice: figures.applied_twice,
        duplicates_dropped: figures.duplicates_dropped,
        refunded: figures.refunded,
        released: figures.released,
    };
    report.print();
    if interrupted {
        eprintln!("interrupted: run `shiftboss demo` again to finish the remaining orders");
        return Ok(false);
    }
    Ok(report.all_terminal() && report.applied_twice_total() == 0)
}

async fn submit_and_wait(
    engine: &Engine,
    waiter: &Waiter,
    store: &dyn Store,
    orders: u32,
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<()> {
    bar.enable_steady_tick(Duration::from_millis(120));
    bar.set_message("(submitting)");
    // Progress is shown while orders are still being submitted: the engine already runs them.
    let submitted = AtomicBool::new(false);
    let submitting = async {
        submit_orders(engine, waiter, orders).await?;
        submitted.store(true, Ordering::Relaxed);
        bar.set_message("");
        anyhow::Ok(())
    };
    let (_, mut total) = tokio::try_join!(submitting, watch(store, bar, &submitted))?;
    // Every order the store has is done, but it has fewer than were acknowledged: the store failed
    // over to a standby that had not received the last commits (asynchronous replication). The
    // lost orders are submitted again under their keys (the others find their tasks), and their
    // steps call the services with the idempotency keys they used before.
    // (Orders archived to history count as there: their keys find them, and nothing is created.)
    while total < u64::from(orders) {
        let created = submit_orders(engine, waiter, orders).await?;
        if created == 0 {
            break;
        }
        eprintln!(
            "shiftboss demo: {created} acknowledged orders were missing from the store (a failover to a standby \
             that lacked the last commits?): submitted again under their keys"
        );
        total = watch(store, bar, &AtomicBool::new(true)).await?;
    }
    Ok(())
}

/// Submits orders 1 to `orders`, in batches of [`SUBMIT_BATCH`] (one transaction each, as an
/// application with a backlog would: one at a time, each waiting for its commit, they came in
/// slower than the engine ran them on PostgreSQL); an order submitted before finds its own task by
/// its key. Returns how many tasks it created.
async fn submit_orders(engine: &Engine, waiter: &Waiter, orders: u32) -> anyhow::Result<u32> {
    let version = workflow::order_workflow().version;
    let mut created = 0;
    let numbers: Vec<u32> = (1..=orders).collect();
    for chunk in numbers.chunks(SUBMIT_BATCH) {
        let tasks: Vec<SubmitTask> = chunk
            .iter()
            .map(|n| {
                let (key, input) = workflow::order_input(*n);
                SubmitTask {
                    correlation_id: None,
                    domains: Default::default(),
                    notify: None,
                    key,
                    workflow: "order".into(),
                    version: Some(version),
                    input,
                    priority: 0,
                    actor: "demo".into(),
                }
            })
            .collect();
        // Submitted again after a lost answer, each order finds its own task by its key.
        let submitted = waiter
            .retry("submitting the orders", || async {
                match engine.submit_many(tasks.clone()).await {
                    Err(EngineError::Store(e)) => Err(e),
                    other => Ok(other),
                }
            })
            .await??;
        created += submitted.iter().map(|s| u32::from(s.created)).sum::<u32>();
    }
    Ok(created)
}

/// Shows progress until `submitted` is set and every task is terminal; returns how many tasks the
/// store has then.
async fn watch(store: &dyn Store, bar: &indicatif::ProgressBar, submitted: &AtomicBool) -> anyhow::Result<u64> {
    loop {
        // Read before the counts: a count taken after the last submission sees every order.
        let done_submitting = submitted.load(Ordering::Relaxed);
        let counts = store.task_counts().await?;
        // Compensating orders are not done yet: their refunds are still running.
        let live: u64 = counts.iter().filter(|(t, _)| !t.is_terminal()).map(|(_, n)| n).sum();
        let total: u64 = counts.iter().map(|(_, n)| n).sum();
        bar.set_position(total - live);
        if done_submitting && live == 0 {
            return Ok(total);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
