//! Fencing: a reply carries its claim's lease token, and a reply from a claim that lapsed is
//! recorded but never applied. This is what River lacks and shiftboss must not.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::StepState;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{ReplyOutcome, ReplyResult, event_kind as ev};

pub async fn late_reply_with_the_old_token_is_rejected<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let task = h.submit("k", "retrying", 0).await;
    let old = h.claim_one("sched-1").await;
    h.advance(secs(1) + ms(1));
    h.expire(&leader, RetryPolicies::default()).await.expect("expire");
    h.advance(ms(100));
    let new = h.claim_one("sched-2").await;
    assert_ne!(old.lease_token, new.lease_token);
    let held = h.step(task, new.id).await;

    // sched-1 was only slow: its reply arrives now, while sched-2 holds the step.
    let late = h.complete("sched-1", &old, json!({"from": "sched-1"})).await;
    assert!(matches!(late, ReplyOutcome::Rejected { .. }), "{late:?}");
    let err = ReplyResult::PermanentError("late error".into());
    let late_err = h.reply("sched-1", old.id, old.lease_token, err).await;
    assert!(matches!(late_err, ReplyOutcome::Rejected { .. }), "{late_err:?}");

    let d = h.task(task).await;
    assert_eq!(d.steps, vec![held.clone()], "the step's state and output are untouched");
    assert_eq!(held.state, StepState::Processing);
    let rejected: Vec<_> = step_events(&d.events, old.id, ev::REPLY_REJECTED).collect();
    assert_eq!(rejected.len(), 2, "each late reply is recorded");

    let applied = h.complete("sched-2", &new, json!({"from": "sched-2"})).await;
    assert!(matches!(applied, ReplyOutcome::Applied { .. }), "{applied:?}");
    let s = h.step(task, new.id).await;
    assert_eq!((s.state, s.output), (StepState::Processed, Some(json!({"from": "sched-2"}))));
}

pub async fn reply_after_expiry_before_reclaim_is_rejected<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let task = h.submit("k", "retrying", 0).await;
    let c = h.claim_one("sched-1").await;
    h.advance(secs(1) + ms(1));
    h.expire(&leader, RetryPolicies::default()).await.expect("expire");
    let pending = h.step(task, c.id).await;
    assert_eq!(pending.state, StepState::Pending);

    // The supervisor took the step back: the old holder's lease ended even though no one claimed it yet.
    let late = h.complete("sched-1", &c, json!({})).await;
    assert!(matches!(late, ReplyOutcome::Rejected { .. }), "{late:?}");
    assert_eq!(h.step(task, c.id).await, pending);
    assert_eq!(step_events(&h.task(task).await.events, c.id, ev::REPLY_REJECTED).count(), 1);
}
