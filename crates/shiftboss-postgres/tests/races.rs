//! Real concurrency on PostgreSQL, beyond the conformance suite's cases: several handles (pools, as
//! separate processes would have) race on one election, one task key, one definition, and on the
//! same expired steps from both sides (the holder's replies and the supervisor's sweep).

mod common;

use common::{TestSchema, test_db};
use serde_json::json;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_postgres::PostgresStore;
use shiftboss_store::*;
use shiftboss_store_conformance::support::StoreTestExt;
use shiftboss_store_conformance::support::*;
use std::sync::Arc;
use std::time::Duration;

const HANDLES: usize = 6;

async fn handles(s: &TestSchema, clock: &Arc<ManualClock>) -> Vec<PostgresStore> {
    let mut out = Vec::new();
    for _ in 0..HANDLES {
        let store = PostgresStore::connect_with_clock(&s.url, &s.options(false), Clock::Manual(clock.clone())).await;
        out.push(store.expect("connect"));
    }
    out
}

/// Runs `f` on every handle at once and returns the results in handle order.
async fn all_at_once<T: Send + 'static, F>(stores: &[PostgresStore], f: impl Fn(PostgresStore) -> F) -> Vec<T>
where
    F: Future<Output = T> + Send + 'static,
{
    let tasks: Vec<_> = stores.iter().map(|s| tokio::spawn(f(s.clone()))).collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("task"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_elections_give_one_term_to_one_holder() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let stores = handles(&s, &clock).await;
    for round in 0..10 {
        let name = format!("lease-{round}");
        let terms = all_at_once(&stores, |st| {
            let name = name.clone();
            async move {
                let holder = id(&format!("sup-{}", fastrand::u32(..)));
                st.elect_leader(ElectLeader { name, holder, ttl: Duration::from_secs(10) }).await.expect("elect")
            }
        })
        .await;
        let won: Vec<_> = terms.into_iter().flatten().collect();
        assert_eq!(won.len(), 1, "round {round}: one winner, got {won:?}");
        assert_eq!(won[0].term, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submits_of_one_key_create_one_task() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let stores = handles(&s, &clock).await;
    for round in 0..10 {
        let registered = all_at_once(&stores, |st| async move { st.register_workflow(&three_steps()).await }).await;
        let created = registered.iter().filter(|r| matches!(r, Ok(RegisterOutcome::Created))).count();
        assert_eq!(created, usize::from(round == 0), "round {round}: {registered:?}");
        assert!(registered.iter().all(Result::is_ok), "{registered:?}");

        let key = format!("order-{round}");
        let submitted = all_at_once(&stores, |st| {
            let key = key.clone();
            async move { st.submit_task(submit_params(&key, "three", 0)).await.expect("submit") }
        })
        .await;
        assert_eq!(submitted.iter().filter(|s| s.created).count(), 1, "round {round}: {submitted:?}");
        assert!(submitted.iter().all(|s| s.task_id == submitted[0].task_id), "one task: {submitted:?}");
        let d = stores[0].get_task(submitted[0].task_id).await.unwrap().unwrap();
        assert_eq!(d.steps.len(), 1, "one first step");
    }
}

/// The holder's late replies and the supervisor's sweep race on the same expired steps: each step
/// goes exactly one way, and neither call fails. The replies come in descending task order and the
/// sweep goes in ascending order, so taking task locks in call order would deadlock here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_replies_racing_the_sweep_each_win_a_step_once_without_deadlock() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let stores = handles(&s, &clock).await;
    let (replier, sweeper) = (stores[0].clone(), stores[1].clone());
    replier.register_workflow(&one_step()).await.unwrap();
    let leader = ElectLeader { name: "supervisor".into(), holder: id("sup"), ttl: Duration::from_secs(86_400) };
    let leader = sweeper.elect_leader(leader).await.unwrap().expect("elected");
    const STEPS: usize = 40;
    let (mut applied_total, mut retried_total) = (0, 0);
    for round in 0..5 {
        for i in 0..STEPS {
            replier.submit_task(submit_params(&format!("r{round}-{i}"), "one", 0)).await.unwrap();
        }
        let p = ClaimDueSteps {
            instance: id("sched-1"),
            limit: STEPS as u32,
            agents: vec![WORKER.into()],
            buckets: None,
            domains: vec![],
            limits: vec![],
        };
        let mut claimed = replier.claim_due_steps(p).await.unwrap();
        assert_eq!(claimed.len(), STEPS);
        claimed.sort_by_key(|c| std::cmp::Reverse(c.task_id));
        clock.advance(Duration::from_secs(2));

        let replies = claimed
            .iter()
            .map(|c| Reply { step_id: c.id, lease_token: c.lease_token, result: ReplyResult::Completed(json!({})) })
            .collect();
        let replying = tokio::spawn({
            let replier = replier.clone();
            async move {
                replier
                    .record_replies(RecordReplies { instance: id("sched-1"), replies, policies: Default::default() })
                    .await
            }
        });
        let sweep = ExpireLeases { leader: leader.clone(), limit: 1000, policies: Arc::new(RetryPolicies::default()) };
        let sweeping = tokio::spawn({
            let sweeper = sweeper.clone();
            async move { sweeper.expire_leases(sweep).await }
        });
        let outcomes = replying.await.unwrap().unwrap_or_else(|e| panic!("round {round}: replies failed: {e}"));
        let report = sweeping.await.unwrap().unwrap_or_else(|e| panic!("round {round}: sweep failed: {e}"));

        let applied = outcomes.iter().filter(|o| matches!(o, ReplyOutcome::Applied { .. })).count();
        assert_eq!(applied + report.retried as usize, STEPS, "round {round}: each step went one way exactly once");
        applied_total += applied;
        retried_total += report.retried as usize;
        let summary = sweeper.summarize().await.unwrap();
        assert_eq!(summary.rejected_replies as usize, (round + 1) * STEPS - applied_total, "the other replies refused");
        assert_eq!(summary.expiries as usize, retried_total, "each expiry recorded once");
        // Nothing left for the next round's claim and sweep: cancel what the sweep took back (the
        // completed tasks refuse, which is fine).
        for c in &claimed {
            let _ = sweeper
                .cancel_task(CancelTask { task_id: c.task_id, actor: "test".into(), reason: "done".into() })
                .await;
        }
    }
}
