//! Two schedulers on one database (P10, P14): never the same step while the other holds it.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{StepId, StepState, TaskState};
use shiftboss_store::*;
use std::collections::HashMap;

const TASKS: usize = 100;
/// Each task has two steps, and the second exists only once the first is processed, so claims and
/// the replies that create new steps interleave.
const STEPS: usize = TASKS * 2;
/// A worker that finds nothing this many times in a row while tasks still run has stalled.
const MAX_IDLE_ROUNDS: u32 = 200_000;

pub async fn two_handles_never_claim_the_same_step<F: Fixture>(f: F) {
    let clock = ManualClock::new(T0);
    let a = f.open(Clock::Manual(clock.clone())).await;
    let b = f.open(Clock::Manual(clock.clone())).await;
    let two = def(json!({"name": "two", "steps": [
        {"name": "first", "agent": WORKER}, {"name": "second", "agent": WORKER}
    ]}));
    a.register_workflow(&two).await.expect("register");
    // Half submitted through each handle: each sees the other's writes.
    for i in 0..TASKS {
        let store: &dyn Store = if i % 2 == 0 { &a } else { &b };
        store.submit_task(submit_params(&format!("order-{i}"), "two", 0)).await.expect("submit");
    }

    // The clock never moves, so no lease lapses: a step claimed twice can only be a broken claim.
    let ta = tokio::spawn(work(a, "sched-a"));
    let tb = tokio::spawn(work(b, "sched-b"));
    let (a, got_a) = ta.await.expect("worker a");
    let (_b, got_b) = tb.await.expect("worker b");

    let mut claims: HashMap<StepId, u32> = HashMap::new();
    for id in got_a.iter().chain(&got_b) {
        *claims.entry(*id).or_default() += 1;
    }
    let twice: Vec<_> = claims.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "steps claimed more than once: {twice:?}");
    assert_eq!(claims.len(), STEPS, "every step was claimed (a: {}, b: {})", got_a.len(), got_b.len());

    let s = a.summarize().await.expect("summarize");
    assert_eq!(s.tasks_in(TaskState::Completed), TASKS as u64);
    assert_eq!(s.steps_in(StepState::Processed), STEPS as u64);
    assert_eq!((s.steps_retried, s.rejected_replies), (0, 0));
}

/// A scheduler: claims a few steps, replies to each, until no task runs. Returns the steps it claimed.
async fn work<S: Store>(store: S, instance: &'static str) -> (S, Vec<StepId>) {
    let mut mine = Vec::new();
    let mut idle = 0;
    loop {
        let claimed = store
            .claim_due_steps(ClaimDueSteps { instance: id(instance), limit: 3, agents: vec![WORKER.into()] })
            .await
            .expect("claim");
        if claimed.is_empty() {
            if store.summarize().await.expect("summarize").tasks_in(TaskState::Running) == 0 {
                return (store, mine);
            }
            idle += 1;
            assert!(idle < MAX_IDLE_ROUNDS, "{instance} found nothing to claim {idle} times while tasks ran");
            tokio::task::yield_now().await;
            continue;
        }
        idle = 0;
        let replies = claimed
            .iter()
            .map(|c| Reply {
                step_id: c.id,
                lease_token: c.lease_token,
                result: ReplyResult::Completed(json!({"by": instance})),
            })
            .collect();
        let outcomes = store.record_replies(RecordReplies { instance: id(instance), replies }).await.expect("reply");
        for (c, o) in claimed.iter().zip(&outcomes) {
            assert!(matches!(o, ReplyOutcome::Applied { .. }), "{instance}'s reply for step {} was {o:?}", c.id);
        }
        mine.extend(claimed.iter().map(|c| c.id));
    }
}
