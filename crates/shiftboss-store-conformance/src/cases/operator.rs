//! Operator controls (P16): pause, resume, terminate, retry, rerun and skip, each recorded with who
//! and why, each refused with a Conflict (and nothing changed) where it does not apply.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::event_kind as ev;
use shiftboss_store::*;

pub async fn pause_holds_new_work_and_resume_releases_it<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("t1", "three", 0).await;
    let reserve = h.claim_one("s1").await;
    h.operate(task, TaskCommand::Pause).await;
    h.complete("s1", &reserve, json!({})).await;
    assert!(h.claim_all("s1").await.is_empty(), "a paused task's next step is not claimed");
    assert_eq!(h.task(task).await.task.state, TaskState::Paused);
    let again = h.try_operate(task, TaskCommand::Pause).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    h.operate(task, TaskCommand::Resume).await;
    assert_eq!(Harness::<F::Store>::names(&h.claim_all("s1").await), ["charge"]);
    let d = h.task(task).await;
    let paused = d.events.iter().find(|e| e.kind == ev::TASK_PAUSED).expect("recorded");
    assert_eq!((paused.actor.as_str(), paused.detail["reason"].as_str()), ("ops", Some("test")));
}

pub async fn terminate_ends_at_once_and_fences_the_holder<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&super::compensation::order()).await;
    let task = h.submit("t1", "order", 0).await;
    let c = h.claim_one("s1").await;
    h.complete("s1", &c, json!({})).await;
    let charge = h.claim_one("s1").await;
    h.operate(task, TaskCommand::Terminate).await;
    assert!(matches!(h.complete("s1", &charge, json!({})).await, ReplyOutcome::Rejected { .. }));
    let d = h.task(task).await;
    assert_eq!(d.task.state, TaskState::Terminated);
    assert!(!d.steps.iter().any(|s| s.name == "release"), "terminate does not compensate");
    let before = h.snapshot().await;
    for cmd in [TaskCommand::Terminate, TaskCommand::Cancel, TaskCommand::Resume, TaskCommand::Retry] {
        let r = h.try_operate(task, cmd).await;
        assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    }
    assert_eq!(h.snapshot().await, before, "refused commands change nothing");
}

pub async fn retry_reruns_the_failed_step_and_the_task_completes<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("t1", "three", 0).await;
    let c = h.claim_one("s1").await;
    h.reply("s1", c.id, c.lease_token, ReplyResult::PermanentError("down".into())).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Failed);
    h.operate(task, TaskCommand::Retry).await;
    let again = h.claim_one("s1").await;
    assert_eq!((again.id, again.idempotency_key.as_str()), (c.id, c.idempotency_key.as_str()), "the same step");
    for c in [again] {
        h.complete("s1", &c, json!({})).await;
    }
    for _ in 0..2 {
        let c = h.claim_one("s1").await;
        h.complete("s1", &c, json!({})).await;
    }
    assert_eq!(h.task(task).await.task.state, TaskState::Completed);
}

pub async fn rerun_from_a_step_runs_it_and_what_followed_again<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("t1", "three", 0).await;
    for out in [1, 2, 3] {
        let c = h.claim_one("s1").await;
        h.complete("s1", &c, json!(out)).await;
    }
    assert_eq!(h.task(task).await.task.state, TaskState::Completed);
    let bad = h.try_operate(task, TaskCommand::Rerun { from: "nope".into() }).await;
    assert!(matches!(bad, Err(StoreError::Conflict(_))), "{bad:?}");
    h.operate(task, TaskCommand::Rerun { from: "charge".into() }).await;
    let d = h.task(task).await;
    assert_eq!((d.task.state, d.task.output.clone()), (TaskState::Running, None));
    assert_eq!(d.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["reserve", "charge"]);
    let c = h.claim_one("s1").await;
    assert_eq!(c.name, "charge");
    h.complete("s1", &c, json!(20)).await;
    let c = h.claim_one("s1").await;
    h.complete("s1", &c, json!(30)).await;
    let d = h.task(task).await;
    assert_eq!((d.task.state, d.task.output), (TaskState::Completed, Some(json!(30))));
}

/// Idempotency keys are made from the work (issue 26): the task's key, the step's instance name
/// and the task's generation, so a step written again after its row was lost (the same task key
/// submitted again to a promoted standby) sends the key it sent before; a rerun is new work.
pub async fn step_keys_are_made_from_the_work_and_a_rerun_makes_new_ones<F: Fixture>(f: F) {
    use shiftboss_core::idempotency::step_key;
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("order-7", "three", 0).await;
    let mut first = Vec::new();
    for name in ["reserve", "charge", "ship"] {
        let c = h.claim_one("s1").await;
        assert_eq!((c.name.as_str(), c.idempotency_key.clone()), (name, step_key("order-7", name, 0)));
        first.push(c.idempotency_key.clone());
        h.complete("s1", &c, json!({})).await;
    }
    h.operate(task, TaskCommand::Rerun { from: "charge".into() }).await;
    let again = h.claim_one("s1").await;
    assert_eq!(again.name, "charge");
    assert_eq!(again.idempotency_key, step_key("order-7", "charge", 1), "a rerun bumps the generation");
    assert!(!first.contains(&again.idempotency_key));
    h.complete("s1", &again, json!({})).await;
    let ship = h.claim_one("s1").await;
    assert_eq!(ship.idempotency_key, step_key("order-7", "ship", 1));
    // Another task's steps of the same names have keys of their own.
    h.complete("s1", &ship, json!({})).await;
    h.submit("order-8", "three", 0).await;
    let other = h.claim_one("s1").await;
    assert_eq!(other.idempotency_key, step_key("order-8", "reserve", 0));
}

pub async fn skip_counts_a_step_as_done_and_fences_its_holder<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("t1", "three", 0).await;
    let reserve = h.claim_one("s1").await;
    h.operate(task, TaskCommand::Skip { step: "reserve".into(), output: json!({"skipped": true}) }).await;
    assert!(matches!(h.complete("s1", &reserve, json!({})).await, ReplyOutcome::Rejected { .. }));
    let s = h.step_named(task, "reserve").await;
    assert_eq!((s.state, s.output), (StepState::Processed, Some(json!({"skipped": true}))));
    assert_eq!(h.claim_one("s1").await.name, "charge");
    let d = h.task(task).await;
    assert_eq!(count(&d.events, ev::STEP_SKIPPED), 1);
    let done = h.try_operate(task, TaskCommand::Skip { step: "reserve".into(), output: json!(null) }).await;
    assert!(matches!(done, Err(StoreError::Conflict(_))), "a processed step cannot be skipped: {done:?}");
}

pub async fn bad_commands_are_invalid_input_or_not_found<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("t1", "one", 0).await;
    let missing = h.try_operate(shiftboss_core::TaskId(task.0 + 1000), TaskCommand::Pause).await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })), "{missing:?}");
    let before = h.snapshot().await;
    let p = OperateTask { task_id: task, actor: "".into(), reason: "x".into(), command: TaskCommand::Pause };
    assert!(matches!(h.store.operate_task(p).await, Err(StoreError::InvalidInput(_))));
    let p = OperateTask {
        task_id: task,
        actor: "ops".into(),
        reason: "x".into(),
        command: TaskCommand::Signal { name: "a\0b".into(), payload: json!({}) },
    };
    assert!(matches!(h.store.operate_task(p).await, Err(StoreError::InvalidInput(_))));
    assert_eq!(h.snapshot().await, before);
}

/// Cancel and resubmit check their actor and reason as every operator command does: an empty
/// actor, a NUL, or text over the limit is invalid input and changes nothing, in every store.
pub async fn cancel_and_resubmit_validate_actor_and_reason<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("t1", "one", 0).await;
    let c = h.claim_one("s1").await;
    h.reply("s1", c.id, c.lease_token, ReplyResult::PermanentError("down".into())).await;
    let before = h.snapshot().await;
    let long = "x".repeat(MAX_OPERATOR_TEXT + 1);
    for (actor, reason) in [("", "why"), ("ops\0", "why"), ("ops", "a\0b"), (long.as_str(), "why"), ("ops", &long)] {
        let cancel = CancelTask { task_id: task, actor: actor.into(), reason: reason.into() };
        let out = h.store.cancel_task(cancel).await;
        assert!(matches!(out, Err(StoreError::InvalidInput(_))), "cancel by {actor:?} for {reason:?}: {out:?}");
        let resubmit = ResubmitStep { step_id: c.id, actor: actor.into(), reason: reason.into() };
        let out = h.store.resubmit_step(resubmit).await;
        assert!(matches!(out, Err(StoreError::InvalidInput(_))), "resubmit by {actor:?} for {reason:?}: {out:?}");
    }
    assert_eq!(h.snapshot().await, before);
}

/// A paused task holds every step, also those that become due while it is paused: a failed attempt's
/// delayed retry and a lapsed lease's retry wait for the resume, as its pending steps do.
pub async fn pause_holds_retries_that_fall_due_while_paused<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&retrying()).await;
    let failed = h.submit("failed", "retrying", 0).await;
    let lapsed = h.submit("lapsed", "retrying", 0).await;
    let claimed = h.claim_all("s1").await;
    assert_eq!(claimed.len(), 2);
    h.operate(failed, TaskCommand::Pause).await;
    h.operate(lapsed, TaskCommand::Pause).await;
    let c = claimed.iter().find(|c| c.task_id == failed).expect("claimed");
    let out = h.reply("s1", c.id, c.lease_token, ReplyResult::Failed("busy".into())).await;
    assert!(matches!(out, ReplyOutcome::Applied { .. }), "{out:?}");
    h.advance(secs(2));
    let leader = h.supervisor().await;
    assert_eq!(h.expire(&leader, Default::default()).await.unwrap().retried, 1, "the other lease lapsed");
    h.advance(secs(60));
    assert!(h.claim_all("s2").await.is_empty(), "nothing of a paused task is claimed, however late");
    for task in [failed, lapsed] {
        let step = h.step_named(task, "flaky").await;
        assert_eq!((step.state, step.failure_count), (StepState::Pending, 1), "task {task}");
    }
    h.operate(failed, TaskCommand::Resume).await;
    h.operate(lapsed, TaskCommand::Resume).await;
    let again = h.claim_all("s2").await;
    assert_eq!(again.len(), 2, "both run once resumed");
}

/// An error text keeps no NUL in any store (PostgreSQL's text cannot hold one): it is replaced,
/// and the rest is kept.
pub async fn error_text_is_stored_without_nul<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("t1", "one", 0).await;
    let c = h.claim_one("s1").await;
    h.reply("s1", c.id, c.lease_token, ReplyResult::PermanentError("bad\0byte".into())).await;
    assert_eq!(h.step(task, c.id).await.last_error.as_deref(), Some("bad\u{FFFD}byte"));
}
