//! Compensation (P7, P20): a task that fails for good, or is cancelled under a compensating
//! policy, undoes its completed steps newest first, each with its own retries.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::TaskState;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::event_kind as ev;
use shiftboss_store::*;

pub fn order() -> WorkflowDef {
    def(json!({"name": "order", "compensate_on_cancel": true, "steps": [
        {"name": "reserve", "agent": WORKER, "compensate": {"name": "release", "agent": WORKER}},
        {"name": "charge", "agent": WORKER,
         "compensate": {"name": "refund", "agent": WORKER, "input": {"payment": "${charge.output.id}"},
                        "retry": {"kind": "intervals", "intervals": ["1s"]}}},
        {"name": "ship", "agent": WORKER}
    ]}))
}

/// Runs reserve and charge, and returns the claim of ship.
async fn up_to_ship<S: Store>(h: &Harness<S>, key: &str) -> (shiftboss_core::TaskId, ClaimedStep) {
    let task = h.submit(key, "order", 0).await;
    for output in [json!({}), json!({"id": "P1"})] {
        let c = h.claim_one("s1").await;
        h.complete("s1", &c, output).await;
    }
    (task, h.claim_one("s1").await)
}

pub async fn a_failed_task_is_compensated_newest_first<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&order()).await;
    let (task, ship) = up_to_ship(&h, "o1").await;
    h.reply("s1", ship.id, ship.lease_token, ReplyResult::PermanentError("no courier".into())).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Compensating);
    let refund = h.claim_one("s1").await;
    assert_eq!((refund.name.as_str(), refund.input.clone()), ("refund", json!({"payment": "P1"})));
    assert!(h.claim_all("s2").await.is_empty(), "one compensation at a time");
    h.complete("s1", &refund, json!({})).await;
    let release = h.claim_one("s1").await;
    assert_eq!((release.name.as_str(), release.input.clone()), ("release", json!({"order": "o1"})));
    h.complete("s1", &release, json!({})).await;
    let d = h.task(task).await;
    assert_eq!(d.task.state, TaskState::Compensated);
    assert_eq!(count(&d.events, ev::TASK_COMPENSATING), 1);
    assert_eq!(count(&d.events, ev::TASK_COMPENSATED), 1);
    assert_eq!(h.step_named(task, "refund").await.compensates.as_deref(), Some("charge"));
}

pub async fn a_compensation_that_fails_for_good_fails_the_task_with_an_alert<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&order()).await;
    let leader = h.supervisor().await;
    let (task, ship) = up_to_ship(&h, "o2").await;
    h.reply("s1", ship.id, ship.lease_token, ReplyResult::PermanentError("no courier".into())).await;
    // The refund's own policy: one retry after 1 s, then give up.
    h.claim_one("s1").await;
    h.advance(secs(31));
    h.expire(&leader, Default::default()).await.unwrap();
    h.advance(secs(1));
    h.claim_one("s1").await;
    h.advance(secs(31));
    assert_eq!(h.expire(&leader, Default::default()).await.unwrap().gave_up, 1);
    let d = h.task(task).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let alert = d.events.iter().find(|e| e.kind == ev::TASK_COMPENSATION_FAILED).expect("an alert");
    assert_eq!(alert.level, shiftboss_core::model::EventLevel::Alert);
    assert!(!d.steps.iter().any(|s| s.name == "release"), "nothing older is undone past the failure");

    h.operate(task, TaskCommand::Retry).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Compensating, "a retry goes on compensating");
    let refund = h.claim_one("s1").await;
    assert_eq!(refund.name, "refund");
}

pub async fn cancelling_under_a_compensating_policy_undoes_completed_steps<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&order()).await;
    let (task, ship) = up_to_ship(&h, "o3").await;
    h.operate(task, TaskCommand::Cancel).await;
    assert!(matches!(h.complete("s1", &ship, json!({})).await, ReplyOutcome::Rejected { .. }), "ship was cancelled");
    let refund = h.claim_one("s1").await;
    assert_eq!(refund.name, "refund");
    h.complete("s1", &refund, json!({})).await;
    let release = h.claim_one("s1").await;
    h.complete("s1", &release, json!({})).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Compensated);
}

/// A task whose workflow does not undo on failure, undone later at an operator's word; a task
/// that runs, or one already compensated, is refused and left as it was.
pub async fn an_operator_compensates_a_failed_task_that_was_not_undone<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let mut plain = order();
    plain.name = "plain".into();
    plain.compensate_on_failure = false;
    h.register(&plain).await;
    let task = h.submit("o4", "plain", 0).await;
    for output in [json!({}), json!({"id": "P4"})] {
        let c = h.claim_one("s1").await;
        h.complete("s1", &c, output).await;
    }
    let ask = |command| OperateTask { task_id: task, actor: "ann".into(), reason: "fraud".into(), command };
    let before = h.task(task).await;
    let refused = h.store.operate_task(ask(TaskCommand::Compensate)).await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "a running task: {refused:?}");
    assert_eq!(h.task(task).await, before, "refused, left as it was");

    let ship = h.claim_one("s1").await;
    h.reply("s1", ship.id, ship.lease_token, ReplyResult::PermanentError("no courier".into())).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Failed, "not undone on its own");
    h.store.operate_task(ask(TaskCommand::Compensate)).await.expect("compensate");
    let d = h.task(task).await;
    assert_eq!(d.task.state, TaskState::Compensating);
    let by = d.events.iter().find(|e| e.kind == ev::TASK_COMPENSATING).expect("the event");
    assert_eq!((by.actor.as_str(), by.detail["reason"].clone()), ("ann", json!("fraud")));
    let refund = h.claim_one("s1").await;
    assert_eq!((refund.name.as_str(), refund.input.clone()), ("refund", json!({"payment": "P4"})));
    h.complete("s1", &refund, json!({})).await;
    let release = h.claim_one("s1").await;
    assert_eq!(release.name, "release");
    h.complete("s1", &release, json!({})).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Compensated);

    let again = h.store.operate_task(ask(TaskCommand::Compensate)).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "compensated already: {again:?}");
    // Nothing to undo: a terminated task whose done steps name no compensation.
    h.register(&def(
        json!({"name": "bare", "steps": [{"name": "a", "agent": WORKER}, {"name": "b", "agent": WORKER}]}),
    ))
    .await;
    let bare = h.submit("b1", "bare", 0).await;
    let c = h.claim_one("s1").await;
    h.complete("s1", &c, json!({})).await;
    h.operate(bare, TaskCommand::Terminate).await;
    let none = h.store.operate_task(OperateTask { task_id: bare, ..ask(TaskCommand::Compensate) }).await;
    assert!(matches!(none, Err(StoreError::Conflict(ref m)) if m.contains("none of its completed steps")), "{none:?}");
}
