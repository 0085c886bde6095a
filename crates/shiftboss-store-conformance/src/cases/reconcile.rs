//! The reconciler (C6) and one decide per task at a time (C7).

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::event_kind as ev;
use shiftboss_store::*;
use std::collections::HashSet;

pub async fn requires_a_live_leader_term<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let leader = h.supervisor().await;
    h.store.resign_leader(&leader).await.unwrap();
    let r = h.reconcile(&leader, secs(60)).await;
    assert!(matches!(r, Err(StoreError::NotLeader(_))), "{r:?}");
}

pub async fn a_task_past_its_timeout_fails_and_compensates<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "slow", "timeout": "1m", "steps": [
        {"name": "reserve", "agent": WORKER, "compensate": {"name": "release", "agent": WORKER}},
        {"name": "wait", "kind": "wait", "signal": "never"}
    ]})))
    .await;
    h.register(&def(json!({"name": "plain", "timeout": "1m", "steps": [{"name": "w", "agent": WORKER}]}))).await;
    let leader = h.supervisor().await;
    let slow = h.submit("s1", "slow", 0).await;
    let plain = h.submit("p1", "plain", 0).await;
    let claims = h.claim_all("x").await;
    let reserve = claims.iter().find(|c| c.name == "reserve").unwrap();
    h.complete("x", reserve, json!({})).await;
    h.advance(secs(59));
    assert_eq!(h.reconcile(&leader, secs(3600)).await.unwrap().timed_out, 0);
    h.advance(secs(1));
    assert_eq!(h.reconcile(&leader, secs(3600)).await.unwrap().timed_out, 2);
    let d = h.task(slow).await;
    assert_eq!(d.task.state, TaskState::Compensating);
    assert_eq!(count(&d.events, ev::TASK_TIMED_OUT), 1);
    assert_eq!(h.step_named(slow, "wait").await.state, StepState::Cancelled);
    assert_eq!(h.claim_one("x").await.name, "release");
    let p = h.task(plain).await;
    assert_eq!((p.task.state, p.steps[0].state), (TaskState::Failed, StepState::Cancelled));
    assert_eq!(h.reconcile(&leader, secs(3600)).await.unwrap().timed_out, 0, "once");
}

pub async fn leaves_live_and_finished_tasks_alone<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let live = h.submit("live", "three", 0).await;
    let done = h.submit("done", "one", 0).await;
    for c in h.claim_all("x").await.iter().filter(|c| c.task_id == done) {
        h.complete("x", c, json!({})).await;
    }
    h.advance(secs(3000));
    let before = h.snapshot().await;
    assert_eq!(h.reconcile(&leader, secs(60)).await.unwrap(), ReconcileReport::default());
    assert_eq!(h.snapshot().await, before, "nothing to repair, nothing changed");
    assert_eq!(h.task(live).await.task.state, TaskState::Running);
}

/// Many replies to one task's fork branches, racing on several handles with the reconciler: each
/// step is created once, the join runs once, and the task ends complete (C7).
pub async fn racing_replies_and_reconciler_never_schedule_a_step_twice<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let branches: Vec<_> = (0..8).map(|i| json!([{"name": format!("b{i}"), "agent": WORKER}])).collect();
    h.register(&def(json!({"name": "wide", "steps": [
        {"name": "fan", "kind": "fork", "branches": branches},
        {"name": "after", "agent": WORKER}
    ]})))
    .await;
    let leader = h.supervisor().await;
    let task = h.submit("w1", "wide", 0).await;
    let claims = h.claim_all("x").await;
    assert_eq!(claims.len(), 8);
    let mut handles = Vec::new();
    for c in claims {
        let store = f.open(Clock::Manual(h.clock.clone())).await;
        handles.push(tokio::spawn(async move {
            let p = RecordReplies {
                instance: id("x"),
                replies: vec![Reply {
                    step_id: c.id,
                    lease_token: c.lease_token,
                    result: ReplyResult::Completed(json!(1)),
                }],
                policies: Default::default(),
            };
            store.record_replies(p).await
        }));
    }
    let store = f.open(Clock::Manual(h.clock.clone())).await;
    let rec = tokio::spawn(async move {
        for _ in 0..5 {
            store.reconcile(Reconcile { leader: leader.clone(), stale_after: secs(0), limit: 100 }).await.unwrap();
        }
    });
    for j in handles {
        let out = j.await.unwrap().expect("replies are recorded");
        assert!(matches!(out[0], ReplyOutcome::Applied { .. }), "{out:?}");
    }
    rec.await.unwrap();
    let d = h.task(task).await;
    let names: Vec<&str> = d.steps.iter().map(|s| s.name.as_str()).collect();
    let unique: HashSet<&str> = names.iter().copied().collect();
    assert_eq!(names.len(), unique.len(), "no step twice: {names:?}");
    assert_eq!(names.iter().filter(|n| **n == "after").count(), 1);
    assert_eq!(h.step_named(task, "fan").await.state, StepState::Processed);
    assert_eq!(count(&d.events, ev::STEP_SCHEDULED), 9, "8 branches and the step after the join");
}

/// A task that is compensating when its deadline passes goes on undoing its steps: the timeout
/// stops forward work, never the undoing of it.
pub async fn a_compensating_task_is_not_timed_out<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "undo", "timeout": "1m", "steps": [
        {"name": "book", "agent": WORKER, "compensate": {"name": "unbook", "agent": WORKER}},
        {"name": "pay", "agent": WORKER}
    ]})))
    .await;
    let leader = h.supervisor().await;
    let task = h.submit("u1", "undo", 0).await;
    let c = h.claim_one("x").await;
    h.complete("x", &c, json!({})).await;
    let pay = h.claim_one("x").await;
    h.reply("x", pay.id, pay.lease_token, ReplyResult::PermanentError("declined".into())).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Compensating);
    h.advance(secs(61));
    assert_eq!(h.reconcile(&leader, secs(3600)).await.unwrap().timed_out, 0);
    let unbook = h.claim_one("x").await;
    assert_eq!(unbook.name, "unbook");
    h.complete("x", &unbook, json!({})).await;
    let d = h.task(task).await;
    assert_eq!((d.task.state, count(&d.events, ev::TASK_TIMED_OUT)), (TaskState::Compensated, 0));
}
