//! claim_due_steps (P14, P19, M4): which steps, in which order, and what a claim writes.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::{StepState, TaskId};
use shiftboss_store::{ClaimDueSteps, event_kind as ev};

pub async fn claims_highest_priority_first_then_oldest_due<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "urgent", "steps": [{"name": "page", "agent": WORKER, "priority": 10}]}))).await;
    // Submitted 1 ms apart, so that each step is due a little later than the one before.
    let mut ids = Vec::new();
    for (key, workflow, priority) in [
        ("low-old", "one", 0),
        ("high-a", "one", 5),
        ("low-new", "one", 0),
        ("high-b", "one", 5),
        ("urgent", "urgent", 0),
    ] {
        ids.push((h.submit(key, workflow, priority).await, key));
        h.advance(ms(1));
    }
    let key_of = |t: TaskId| ids.iter().find(|(id, _)| *id == t).map(|(_, k)| *k).unwrap();
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(key_of(h.claim_one("sched-1").await.task_id));
    }
    // A step's priority adds to its task's: "urgent" (0 + 10) goes before the tasks of priority 5.
    assert_eq!(order, ["urgent", "high-a", "high-b", "low-old", "low-new"]);

    // Oldest due, not oldest created: "first" is released 10 ms later, so it is now due after "second".
    let first = h.submit("first", "one", 0).await;
    h.advance(ms(1));
    let second = h.submit("second", "one", 0).await;
    assert_eq!(h.claim_one("sched-2").await.task_id, first);
    h.advance(ms(10));
    h.release("sched-2", RetryPolicies::default()).await;
    assert_eq!(h.claim_one("sched-3").await.task_id, second);
    assert_eq!(h.claim_one("sched-3").await.task_id, first);
}

pub async fn does_not_claim_before_due_at<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    h.submit("k", "retrying", 0).await;
    let c = h.claim_one("sched-1").await;
    h.advance(secs(1) + ms(1));
    h.expire(&leader, RetryPolicies::default()).await.expect("expire");
    // The step's policy puts it back 100 ms after the expiry.
    h.advance(ms(99));
    assert!(h.claim("sched-1", &[WORKER], 10).await.is_empty(), "not due yet");
    h.advance(ms(1));
    let again = h.claim_one("sched-1").await;
    assert_eq!((again.id, again.attempt), (c.id, 2), "due exactly at due_at");
}

pub async fn respects_limit_and_agents<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "mail", "steps": [{"name": "send", "agent": "mailer"}]}))).await;
    for i in 0..3 {
        h.submit(&format!("w{i}"), "one", 0).await;
    }
    for i in 0..2 {
        h.submit(&format!("m{i}"), "mail", 0).await;
    }
    let before = h.snapshot().await;
    let nothing = |agents: Vec<String>, limit| ClaimDueSteps {
        instance: id("sched-1"),
        limit,
        agents,
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    assert!(h.store.claim_due_steps(nothing(vec![], 10)).await.expect("no agents").is_empty());
    assert!(h.store.claim_due_steps(nothing(vec![WORKER.into()], 0)).await.expect("limit 0").is_empty());
    assert!(h.claim("sched-1", &["no-such-agent"], 10).await.is_empty());
    assert_eq!(h.snapshot().await, before, "claims that take nothing write nothing");

    let mail = h.claim("sched-m", &["mailer"], 10).await;
    assert_eq!(mail.len(), 2);
    assert!(mail.iter().all(|c| c.agent == "mailer"), "only the agents asked for");
    assert_eq!(h.claim("sched-w", &[WORKER], 2).await.len(), 2, "at most the limit");
    let rest = h.claim("sched-w", &[WORKER, "mailer"], 2).await;
    assert_eq!(rest.len(), 1, "the one worker step left; the mail steps are held");
    assert!(h.claim("sched-w", &[WORKER, "mailer"], 10).await.is_empty());
}

pub async fn sets_the_lease_and_carries_what_the_agent_needs<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("order-1", "one", 0).await;
    h.advance(ms(250));
    let now = h.now();
    let c = h.claim_one("sched-1").await;

    assert_eq!(c.task_id, task);
    assert_eq!((c.name.as_str(), c.agent.as_str()), ("work", WORKER));
    assert_eq!(c.claimed_at, now);
    assert_eq!(c.complete_by, now.plus(secs(1)), "complete-by is now plus the step's timeout");
    assert_eq!(c.attempt, 1);
    assert_eq!(c.input, json!({"order": "order-1"}));
    assert_eq!(c.config, json!({"url": "http://svc/work"}));
    assert_eq!(c.task_key, "order-1", "the claim reads its task's key (a remote worker's poll hands it out)");

    let s = h.step(task, c.id).await;
    assert_eq!(s.state, StepState::Processing);
    assert_eq!(s.locked_by.as_deref(), Some("sched-1"));
    assert_eq!(s.complete_by, Some(c.complete_by));
    assert_eq!(s.lease_token, c.lease_token);
    assert_eq!(s.attempts, 1);
    assert_eq!(s.idempotency_key, c.idempotency_key);
    let events = h.task(task).await.events;
    let claimed: Vec<_> = step_events(&events, c.id, ev::STEP_CLAIMED).collect();
    assert_eq!(claimed.len(), 1);
    // The audit (chaos) reads each claim's lease and deadline from this detail.
    let detail = json!({"lease_token": c.lease_token.0, "complete_by": c.complete_by.0, "attempt": 1});
    assert_eq!(claimed[0].detail, detail);

    assert!(h.claim("sched-2", &[WORKER], 10).await.is_empty(), "a held step is not claimed again");
}

pub async fn reclaim_grows_the_token_and_keeps_the_idempotency_key<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let task = h.submit("k", "retrying", 0).await;
    let first = h.claim_one("sched-1").await;

    h.advance(secs(1) + ms(1));
    h.expire(&leader, RetryPolicies::default()).await.expect("expire");
    h.advance(ms(100));
    let second = h.claim_one("sched-2").await;

    h.release("sched-2", RetryPolicies::default()).await;
    let third = h.claim_one("sched-3").await;

    for c in [&second, &third] {
        assert_eq!(c.id, first.id);
        // P4: the remote service sees one stable id on every attempt, so it can drop duplicates.
        assert_eq!(c.idempotency_key, first.idempotency_key);
    }
    assert!(first.lease_token < second.lease_token && second.lease_token < third.lease_token);
    assert_eq!((first.attempt, second.attempt, third.attempt), (1, 2, 3));
    let s = h.step(task, first.id).await;
    assert_eq!((s.locked_by.as_deref(), s.lease_token, s.attempts), (Some("sched-3"), third.lease_token, 3));
}
