//! record_replies (P15, P16): a completed step moves its task on; a permanent error stops it.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::{LeaseToken, StepId, StepState, TaskState};
use shiftboss_store::{ReplyOutcome, ReplyResult, event_kind as ev};

pub async fn completed_replies_run_a_workflow_to_completion<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("order-1", "three", 0).await;
    for (i, name) in ["reserve", "charge", "ship"].into_iter().enumerate() {
        let c = h.claim_one("sched-1").await;
        assert_eq!(c.name, name, "steps run in the workflow's order");
        let last = i == 2;
        let want = if last {
            ReplyOutcome::Applied { task_state: TaskState::Completed, scheduled: 0 }
        } else {
            ReplyOutcome::Applied { task_state: TaskState::Running, scheduled: 1 }
        };
        assert_eq!(h.complete("sched-1", &c, json!({"n": i})).await, want, "reply to {name}");
        let s = h.step(task, c.id).await;
        assert_eq!(s.state, StepState::Processed);
        assert_eq!(s.output, Some(json!({"n": i})));
        assert_eq!((s.locked_by, s.complete_by), (None, None), "a processed step holds no lease");
    }
    assert!(h.claim("sched-1", &[WORKER], 10).await.is_empty());

    let d = h.task(task).await;
    assert_eq!(d.task.state, TaskState::Completed);
    assert_eq!(d.task.output, Some(json!({"n": 2})), "the task's output is the last step's");
    assert_eq!(d.steps.len(), 3);
    for kind in [ev::STEP_SCHEDULED, ev::STEP_CLAIMED, ev::STEP_PROCESSED] {
        assert_eq!(count(&d.events, kind), 3, "{kind}");
    }
    assert_eq!(d.events.first().map(|e| e.kind.as_str()), Some(ev::TASK_RECEIVED));
    assert_eq!(d.events.last().map(|e| e.kind.as_str()), Some(ev::TASK_COMPLETED));
    assert_eq!(count(&d.events, ev::TASK_COMPLETED), 1);
}

pub async fn permanent_error_fails_the_step_and_the_task_with_alerts<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("order-1", "three", 0).await;
    let reserve = h.claim_one("sched-1").await;
    h.complete("sched-1", &reserve, json!({})).await;
    let charge = h.claim_one("sched-1").await;
    let out =
        h.reply("sched-1", charge.id, charge.lease_token, ReplyResult::PermanentError("card declined".into())).await;
    assert_eq!(out, ReplyOutcome::Applied { task_state: TaskState::Failed, scheduled: 0 });

    let d = h.task(task).await;
    let s = d.steps.iter().find(|s| s.id == charge.id).unwrap();
    assert_eq!(s.state, StepState::Error, "P16: to Error at once, no retry");
    assert!(s.last_error.as_deref().unwrap_or_default().contains("card declined"), "{:?}", s.last_error);
    assert_eq!((s.output.as_ref(), s.locked_by.as_deref()), (None, None));
    assert_eq!(d.steps.len(), 2, "nothing after the failed step was scheduled");
    assert_eq!(d.task.state, TaskState::Failed);

    let alerts: Vec<_> = d.events.iter().filter(|e| e.level == EventLevel::Alert).map(|e| e.kind.as_str()).collect();
    assert_eq!(alerts, [ev::STEP_ERROR, ev::TASK_FAILED], "an operator is alerted");
    assert_eq!(step_events(&d.events, charge.id, ev::STEP_ERROR).count(), 1);
    assert!(h.claim("sched-1", &[WORKER], 10).await.is_empty(), "a failed step is not retried");
}

pub async fn a_second_reply_on_the_same_lease_is_rejected<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("k", "one", 0).await;
    let c = h.claim_one("sched-1").await;
    assert!(matches!(h.complete("sched-1", &c, json!({"v": 1})).await, ReplyOutcome::Applied { .. }));
    let done = h.task(task).await;

    // A duplicate delivery of the reply, or a contradicting one: neither may change a settled step.
    assert!(matches!(h.complete("sched-1", &c, json!({"v": 2})).await, ReplyOutcome::Rejected { .. }));
    let err = ReplyResult::PermanentError("late".into());
    assert!(matches!(h.reply("sched-1", c.id, c.lease_token, err).await, ReplyOutcome::Rejected { .. }));

    let d = h.task(task).await;
    assert_eq!(d.task, done.task);
    assert_eq!(d.steps, done.steps);
    assert_eq!(step_events(&d.events, c.id, ev::REPLY_REJECTED).count(), 2, "each rejection is recorded");
}

pub async fn reply_to_an_unknown_step_is_rejected<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.submit("k", "one", 0).await;
    h.claim_one("sched-1").await;
    let before = h.snapshot().await;
    let out = h.reply("sched-1", StepId(987_654), LeaseToken(1), ReplyResult::Completed(json!({}))).await;
    assert!(matches!(out, ReplyOutcome::Rejected { .. }), "{out:?}");
    assert_eq!(h.snapshot().await, before);
}
