//! Claim and sweep cost against the finished records a store holds (the harness fills them with
//! bulk SQL first). Each round enqueues `--batch` retry jobs (handler `noop`), then times one claim
//! of them all, one batch of completions, and one sweep (the supervisor's `expire_leases`, with
//! nothing lapsed).
//!
//! Several stores, one per level of finished records (`--store N=DB`), are measured in the same
//! process round by round in turn, so that whatever else loads the machine meanwhile (a build, a
//! checkpoint, another tenant) falls on every level alike. Measured one level after the other, three
//! runs at one level spread by a third on this shared machine: more than the ±10% to be shown.

use super::{noop, stats, store_name};
use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};
use shiftboss::target::DbTarget;
use shiftboss_core::InstanceId;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{
    ClaimDueSteps, ElectLeader, EnqueueJob, EnqueueJobs, ExpireLeases, RecordReplies, Reply, ReplyResult, Store,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ClaimArgs {
    #[arg(long, default_value_t = 100)]
    batch: u32,
    /// Timed rounds per store.
    #[arg(long, default_value_t = 20)]
    rounds: u32,
    /// Rounds per store before the timed ones, not counted (statements prepared, caches warm).
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// A store and how many finished records the harness put in it: FINISHED=DB (repeatable).
    /// Without it, the global --db, with 0 finished records.
    #[arg(long = "store", value_name = "FINISHED=DB")]
    stores: Vec<String>,
}

/// One store under measurement, with its timings so far.
struct Level {
    finished: u64,
    db: DbTarget,
    store: Arc<dyn Store>,
    claim: Vec<f64>,
    complete: Vec<f64>,
    sweep: Vec<f64>,
}

pub async fn run(db: &DbTarget, a: ClaimArgs) -> anyhow::Result<Value> {
    let mut levels = Vec::new();
    for (finished, db) in targets(db, &a.stores)? {
        let store = db.open(true).await?;
        store.register_workflow(&noop::workflow()).await?;
        levels.push(Level { finished, db, store, claim: Vec::new(), complete: Vec::new(), sweep: Vec::new() });
    }
    let instance = InstanceId::new("bench-claim")?;
    let policies = Arc::new(RetryPolicies::default());
    for r in 0..a.warmup + a.rounds {
        let timed = r >= a.warmup;
        // Each round starts at another store, so that no level always follows the same one.
        let n = levels.len();
        for i in 0..n {
            let level = &mut levels[(i + r as usize) % n];
            round(level, a.batch, &instance, &policies, timed).await?;
        }
    }
    let store = levels.first().map(|l| store_name(&l.db)).unwrap_or("-");
    let out: Vec<Value> = levels
        .into_iter()
        .map(|l| {
            json!({
                "finished_records": l.finished, "claim": stats::summary(l.claim),
                "complete": stats::summary(l.complete), "sweep": stats::summary(l.sweep),
            })
        })
        .collect();
    Ok(json!({
        "workload": "claim", "store": store, "batch": a.batch, "rounds": a.rounds, "warmup": a.warmup,
        "levels": out,
    }))
}

/// The stores to measure: each `FINISHED=DB`, or the global store alone.
fn targets(db: &DbTarget, stores: &[String]) -> anyhow::Result<Vec<(u64, DbTarget)>> {
    if stores.is_empty() {
        return Ok(vec![(0, db.clone())]);
    }
    let mut out = Vec::new();
    for s in stores {
        let Some((finished, db)) = s.split_once('=') else {
            bail!("--store {s:?}: expected FINISHED=DB, such as 1000000=/tmp/scale-1m.db");
        };
        let finished =
            finished.trim().parse().with_context(|| format!("--store {s:?}: {finished:?} is not a count"))?;
        out.push((finished, DbTarget::parse(db)?));
    }
    if out.iter().any(|(_, d)| store_name(d) != store_name(&out[0].1)) {
        bail!("--store: every store of one run must be of one kind (SQLite or PostgreSQL)");
    }
    Ok(out)
}

/// Enqueues a batch, then claims it, completes it and sweeps, timing each when `timed`.
async fn round(
    l: &mut Level,
    batch: u32,
    instance: &InstanceId,
    policies: &Arc<RetryPolicies>,
    timed: bool,
) -> anyhow::Result<()> {
    // Through the store, as an application enqueues: the PostgreSQL store then refreshes the
    // planner's statistics as its tables grow, as it would in service.
    let jobs = (0..batch).map(|_| EnqueueJob::new("noop", json!({}))).collect();
    l.store.enqueue_jobs(EnqueueJobs { jobs, actor: "bench".into() }).await?;

    let t = Instant::now();
    let p = ClaimDueSteps {
        instance: instance.clone(),
        limit: batch,
        agents: vec!["noop".into()],
        buckets: None,
        domains: Vec::new(),
        limits: Vec::new(),
    };
    // The scheduler's claim (on PostgreSQL one statement when no agent is limited).
    let steps = l.store.claim_due_work(p).await?.steps;
    let claim = ms(t);
    if steps.len() != batch as usize {
        bail!("the claim took {} of the {batch} jobs just enqueued", steps.len());
    }

    let replies = steps
        .iter()
        .map(|s| Reply { step_id: s.id, lease_token: s.lease_token, result: ReplyResult::Completed(Value::Null) })
        .collect();
    let t = Instant::now();
    l.store.record_replies(RecordReplies { instance: instance.clone(), replies, policies: Default::default() }).await?;
    let complete = ms(t);

    let leader = ElectLeader { name: "supervisor".into(), holder: instance.clone(), ttl: Duration::from_secs(30) };
    let mut sweep = None;
    if let Some(term) = l.store.elect_leader(leader).await? {
        let t = Instant::now();
        l.store.sweep(ExpireLeases { leader: term, limit: 1000, policies: policies.clone() }).await?;
        sweep = Some(ms(t));
    }
    if timed {
        l.claim.push(claim);
        l.complete.push(complete);
        l.sweep.extend(sweep);
    }
    Ok(())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}
