//! cancel_task (C1): an operator stops a task; its live steps are cancelled and their holders fenced off.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::{CancelTask, ReplyOutcome, Store, StoreError, event_kind as ev};

fn cancel(task: TaskId) -> CancelTask {
    CancelTask { task_id: task, actor: "ops".into(), reason: "customer called".into() }
}

pub async fn cancels_live_steps_and_fences_the_holder<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let held = h.submit("held", "one", 0).await;
    let waiting = h.submit("waiting", "one", 0).await;
    let c = h.claim_one("sched-1").await;
    assert_eq!(c.task_id, held);

    h.store.cancel_task(cancel(held)).await.expect("cancel a task with a processing step");
    let d = h.task(held).await;
    assert_eq!(d.task.state, TaskState::Cancelled);
    assert_eq!(d.steps[0].state, StepState::Cancelled);
    assert_eq!((d.steps[0].locked_by.as_deref(), d.steps[0].complete_by), (None, None));
    assert_eq!(step_events(&d.events, c.id, ev::STEP_CANCELLED).count(), 1);
    let cancelled: Vec<_> = d.events.iter().filter(|e| e.kind == ev::TASK_CANCELLED).collect();
    assert_eq!((cancelled.len(), cancelled[0].actor.as_str()), (1, "ops"));

    // The holder did not hear of it and replies: recorded, not applied.
    let late = h.complete("sched-1", &c, json!({"done": true})).await;
    assert!(matches!(late, ReplyOutcome::Rejected { .. }), "{late:?}");
    let s = h.step(held, c.id).await;
    assert_eq!((s.state, s.output), (StepState::Cancelled, None));
    assert_eq!(h.task(held).await.task.state, TaskState::Cancelled);
    assert_eq!(step_events(&h.task(held).await.events, c.id, ev::REPLY_REJECTED).count(), 1);

    h.store.cancel_task(cancel(waiting)).await.expect("cancel a task with a pending step");
    let d = h.task(waiting).await;
    assert_eq!((d.task.state, d.steps[0].state), (TaskState::Cancelled, StepState::Cancelled));
    assert!(h.claim("sched-1", &[WORKER], 10).await.is_empty(), "cancelled steps are never claimed");
    h.advance(secs(5));
    assert_eq!(h.expire(&leader, RetryPolicies::default()).await.expect("sweep").retried, 0, "nor expired");
}

pub async fn completed_or_unknown_tasks_cannot_be_cancelled<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let done = h.submit("done", "one", 0).await;
    let c = h.claim_one("sched-1").await;
    h.complete("sched-1", &c, json!({})).await;
    let gone = h.submit("gone", "one", 0).await;
    h.store.cancel_task(cancel(gone)).await.expect("cancel");
    let before = h.snapshot().await;

    for (what, task) in [("completed", done), ("already cancelled", gone)] {
        match h.store.cancel_task(cancel(task)).await {
            Err(StoreError::Conflict(_)) => {}
            other => panic!("{what} task: want Conflict, got {other:?}"),
        }
    }
    match h.store.cancel_task(cancel(TaskId(987_654))).await {
        Err(StoreError::NotFound { .. }) => {}
        other => panic!("unknown task: want NotFound, got {other:?}"),
    }
    assert_eq!(h.snapshot().await, before, "refused cancellations change nothing");
}
