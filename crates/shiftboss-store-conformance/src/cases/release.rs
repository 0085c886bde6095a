//! release_instance_claims (P9): a restarted scheduler hands back what it held before it died,
//! at once, counted as a failure so that a step that kills its process ends in Error.

use crate::Fixture;
use crate::support::*;
use shiftboss_core::model::EventLevel;
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::{ExpiryReport, event_kind as ev};

pub async fn returns_only_that_instances_steps_at_once<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    for i in 0..3 {
        h.submit(&format!("k{i}"), "one", 0).await;
    }
    let a = h.claim("sched-a", &[WORKER], 2).await;
    let b = h.claim_one("sched-b").await;
    h.advance(ms(100)); // well within complete-by: release does not wait for it
    let b_before = h.step(b.task_id, b.id).await;

    let report = h.release("sched-a", RetryPolicies::default()).await;
    assert_eq!(report, ExpiryReport { retried: 2, gave_up: 0 });
    for c in &a {
        let s = h.step(c.task_id, c.id).await;
        assert_eq!(s.state, StepState::Pending);
        assert_eq!((s.locked_by.as_deref(), s.complete_by), (None, None));
        assert_eq!(s.failure_count, 1, "a release counts as a failure");
        // Due now, not after the policy's delay (60 s by default): its holder is known to be gone.
        assert_eq!(s.due_at, h.now());
        assert_eq!(step_events(&h.task(c.task_id).await.events, c.id, ev::STEP_RELEASED).count(), 1);
    }
    assert_eq!(h.step(b.task_id, b.id).await, b_before, "another instance's step is untouched");

    let before = h.snapshot().await;
    assert_eq!(h.release("sched-z", RetryPolicies::default()).await, ExpiryReport::default());
    assert_eq!(h.snapshot().await, before, "an instance that held nothing releases nothing");

    let mut again: Vec<_> = h.claim("sched-c", &[WORKER], 10).await.into_iter().map(|c| c.id).collect();
    let mut released: Vec<_> = a.iter().map(|c| c.id).collect();
    again.sort();
    released.sort();
    assert_eq!(again, released, "the released steps are claimable at once");
}

pub async fn gives_up_at_the_threshold<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    // One retry, then give up.
    let policies = RetryPolicies {
        default: RetryPolicy::default(),
        per_agent: [(WORKER.to_string(), RetryPolicy::Intervals { intervals: vec![secs(1)], max_failures: None })]
            .into(),
    };
    let task = h.submit("k", "one", 0).await;
    h.claim_one("sched-a").await;
    assert_eq!(h.release("sched-a", policies.clone()).await, ExpiryReport { retried: 1, gave_up: 0 });
    let c = h.claim_one("sched-a").await;
    assert_eq!(h.release("sched-a", policies).await, ExpiryReport { retried: 0, gave_up: 1 });

    let d = h.task(task).await;
    assert_eq!((d.steps[0].state, d.steps[0].failure_count), (StepState::Error, 2));
    assert_eq!(d.task.state, TaskState::Failed);
    assert_eq!(step_events(&d.events, c.id, ev::STEP_ERROR).filter(|e| e.level == EventLevel::Alert).count(), 1);
    assert_eq!(d.events.iter().filter(|e| e.kind == ev::TASK_FAILED && e.level == EventLevel::Alert).count(), 1);
}
