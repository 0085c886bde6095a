//! Claim and sweep cost against the finished records the store holds (the harness fills them with
//! bulk SQL first). Each round enqueues `--batch` jobs, then times one claim of them all, one
//! batch of completions, and one sweep (the supervisor's `expire_leases`, with nothing lapsed).

use super::{enqueue, noop, stats, store_name};
use crate::target::DbTarget;
use clap::Args;
use serde_json::{Value, json};
use shiftboss_core::InstanceId;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{ClaimDueSteps, ElectLeader, ExpireLeases, RecordReplies, Reply, ReplyResult};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ClaimArgs {
    #[arg(long, default_value_t = 100)]
    batch: u32,
    #[arg(long, default_value_t = 20)]
    rounds: u32,
    /// Told to the orchestrator's table: how many finished records the harness put in the store.
    #[arg(long, default_value_t = 0)]
    finished: u64,
}

pub async fn run(db: &DbTarget, a: ClaimArgs) -> anyhow::Result<Value> {
    let store = db.open(true).await?;
    store.register_workflow(&noop::workflow()).await?;
    let instance = InstanceId::new("bench-claim")?;
    let policies = Arc::new(RetryPolicies::default());
    let run = noop::run_id();
    let (mut claim, mut complete, mut sweep) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..a.rounds {
        let base = u64::from(r) * u64::from(a.batch);
        enqueue::bulk(db, (base..base + u64::from(a.batch)).map(|n| noop::job(&run, n)).collect()).await?;

        let t = Instant::now();
        let p = ClaimDueSteps {
            instance: instance.clone(),
            limit: a.batch,
            agents: vec!["noop".into()],
            buckets: None,
            domains: Vec::new(),
            limits: Vec::new(),
        };
        // The scheduler's claim (on PostgreSQL one statement when no agent is limited).
        let steps = store.claim_due_work(p).await?.steps;
        claim.push(ms(t));

        let replies = steps
            .iter()
            .map(|s| Reply { step_id: s.id, lease_token: s.lease_token, result: ReplyResult::Completed(Value::Null) })
            .collect();
        let t = Instant::now();
        store
            .record_replies(RecordReplies { instance: instance.clone(), replies, policies: Default::default() })
            .await?;
        complete.push(ms(t));

        let leader = ElectLeader { name: "supervisor".into(), holder: instance.clone(), ttl: Duration::from_secs(30) };
        if let Some(term) = store.elect_leader(leader).await? {
            let t = Instant::now();
            store.expire_leases(ExpireLeases { leader: term, limit: 1000, policies: policies.clone() }).await?;
            sweep.push(ms(t));
        }
    }
    Ok(json!({
        "workload": "claim", "store": store_name(db), "finished_records": a.finished, "batch": a.batch,
        "rounds": a.rounds, "claim": stats::summary(claim), "complete": stats::summary(complete),
        "sweep": stats::summary(sweep),
    }))
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}
