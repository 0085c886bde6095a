//! resubmit_step (P16): an operator sends a step in Error back to run again.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::{StepId, StepState, TaskState};
use shiftboss_store::{ReplyOutcome, ReplyResult, ResubmitStep, Store, StoreError, event_kind as ev};

fn resubmit(step: StepId) -> ResubmitStep {
    ResubmitStep { step_id: step, actor: "ops".into(), reason: "fixed the card processor".into() }
}

pub async fn only_a_step_in_error_can_be_resubmitted<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    // Claims go oldest first: the first task's step is claimed and completed, the second's claimed.
    h.submit("processed", "one", 0).await;
    h.submit("processing", "one", 0).await;
    let pending_task = h.submit("pending", "one", 0).await;
    let processed = h.claim_one("sched-1").await;
    h.complete("sched-1", &processed, json!({})).await;
    let processing = h.claim_one("sched-1").await;
    let pending = h.task(pending_task).await.steps.remove(0);
    assert_eq!(pending.state, StepState::Pending);
    let before = h.snapshot().await;

    match h.store.resubmit_step(resubmit(StepId(987_654))).await {
        Err(StoreError::NotFound { .. }) => {}
        other => panic!("unknown step: want NotFound, got {other:?}"),
    }
    for (what, step) in [("pending", pending.id), ("processing", processing.id), ("processed", processed.id)] {
        match h.store.resubmit_step(resubmit(step)).await {
            Err(StoreError::Conflict(_)) => {}
            other => panic!("{what} step: want Conflict, got {other:?}"),
        }
    }
    assert_eq!(h.snapshot().await, before, "refused resubmissions change nothing");
}

pub async fn resubmitted_step_runs_and_the_task_completes<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("order-1", "three", 0).await;
    let reserve = h.claim_one("sched-1").await;
    h.complete("sched-1", &reserve, json!({})).await;
    let charge = h.claim_one("sched-1").await;
    h.reply("sched-1", charge.id, charge.lease_token, ReplyResult::PermanentError("card declined".into())).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Failed);

    h.advance(secs(30));
    h.store.resubmit_step(resubmit(charge.id)).await.expect("resubmit");
    let d = h.task(task).await;
    let s = d.steps.iter().find(|s| s.id == charge.id).unwrap();
    assert_eq!((s.state, s.failure_count, s.due_at), (StepState::Pending, 0, h.now()));
    assert_eq!((s.locked_by.as_deref(), s.complete_by), (None, None));
    assert_eq!(d.task.state, TaskState::Running);
    assert_eq!(step_events(&d.events, charge.id, ev::STEP_RESUBMITTED).count(), 1);
    let resumed: Vec<_> = d.events.iter().filter(|e| e.kind == ev::TASK_RESUMED).collect();
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].actor, "ops");

    let again = h.claim_one("sched-2").await;
    assert_eq!((again.id, again.attempt), (charge.id, 2));
    assert_eq!(again.idempotency_key, charge.idempotency_key);
    h.complete("sched-2", &again, json!({})).await;
    let ship = h.claim_one("sched-2").await;
    let done = h.complete("sched-2", &ship, json!({"shipped": true})).await;
    assert_eq!(done, ReplyOutcome::Applied { task_state: TaskState::Completed, scheduled: 0 });

    // A step that went to Error by expiring has its failure count reset, so its policy starts over.
    let policies = RetryPolicies {
        default: RetryPolicy::Intervals { intervals: vec![secs(1)], max_failures: Some(1) },
        ..Default::default()
    };
    let leader = h.supervisor().await;
    let other = h.submit("order-2", "one", 0).await;
    let c = h.claim_one("sched-1").await;
    h.advance(secs(2));
    h.expire(&leader, policies).await.expect("expire");
    assert_eq!(h.step(other, c.id).await.failure_count, 1);
    h.store.resubmit_step(resubmit(c.id)).await.expect("resubmit");
    assert_eq!(h.step(other, c.id).await.failure_count, 0);
}
