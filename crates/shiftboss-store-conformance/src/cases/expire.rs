//! expire_leases, the supervisor's sweep (P6, P7, P17): fenced by the leader's term; an expired
//! step is retried after its policy's delay, or goes to Error at the threshold.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::{ExpireLeases, ExpiryReport, LeaderTerm, StoreError, event_kind as ev};
use std::sync::Arc;
use std::time::Duration;

fn intervals(list: &[Duration]) -> RetryPolicy {
    RetryPolicy::Intervals { intervals: list.to_vec(), max_failures: None }
}

fn retried(n: u32) -> ExpiryReport {
    ExpiryReport { retried: n, gave_up: 0 }
}

pub async fn requires_a_live_leader_term<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.submit("k", "one", 0).await;
    h.claim_one("sched-1").await;
    // The step's lease has lapsed: a sweep that was wrongly allowed would change it.
    h.advance(secs(2));
    let before = h.snapshot().await;
    let refused = |what: &'static str, r: Result<ExpiryReport, StoreError>| match r {
        Err(StoreError::NotLeader(_)) => {}
        other => panic!("{what}: want NotLeader, got {other:?}"),
    };

    let made_up =
        LeaderTerm { name: "supervisor".into(), holder: id("sup-a"), term: 1, expires_at: h.now().plus(secs(60)) };
    refused("no election held", h.expire(&made_up, RetryPolicies::default()).await);

    let term = h.elect("supervisor", "sup-a", secs(10)).await.expect("elected");
    let variants = [
        ("another holder", LeaderTerm { holder: id("sup-b"), ..term.clone() }),
        ("another term", LeaderTerm { term: term.term + 1, ..term.clone() }),
        ("another lease", LeaderTerm { name: "archiver".into(), ..term.clone() }),
    ];
    for (what, t) in variants {
        refused(what, h.expire(&t, RetryPolicies::default()).await);
    }
    h.advance(secs(10) + ms(1));
    refused("a lapsed term", h.expire(&term, RetryPolicies::default()).await);
    assert_eq!(h.snapshot().await, before, "a refused sweep changes nothing");

    let next = h.elect("supervisor", "sup-a", secs(10)).await.expect("re-elected");
    assert_eq!(h.expire(&next, RetryPolicies::default()).await.expect("live term"), retried(1));
}

pub async fn follows_the_interval_list_then_gives_up<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    // The step's own policy (100 ms, 1 s, 10 s) must win over the deployment's.
    let policies = RetryPolicies {
        default: intervals(&[secs(7200)]),
        per_agent: [(WORKER.to_string(), intervals(&[secs(3600)]))].into(),
    };
    let task = h.submit("k", "retrying", 0).await;

    for (n, wait) in [(1, ms(100)), (2, secs(1)), (3, secs(10))] {
        let c = h.claim_one("sched-1").await;
        h.advance(secs(1) + ms(1));
        assert_eq!(h.expire(&leader, policies.clone()).await.expect("expire"), retried(1), "expiry {n}");
        let s = h.step(task, c.id).await;
        assert_eq!(s.state, StepState::Pending, "expiry {n}");
        assert_eq!(s.failure_count, n, "expiry {n}");
        assert_eq!(s.due_at, h.now().plus(wait), "expiry {n}: due after the policy's interval {wait:?}");
        assert_eq!((s.locked_by, s.complete_by), (None, None), "expiry {n}: the lease is cleared");
        assert_eq!(h.task(task).await.task.state, TaskState::Running);
        h.advance(wait);
    }

    let c = h.claim_one("sched-1").await;
    assert_eq!(c.attempt, 4);
    h.advance(secs(1) + ms(1));
    assert_eq!(h.expire(&leader, policies).await.expect("expire"), ExpiryReport { retried: 0, gave_up: 1 });
    let d = h.task(task).await;
    assert_eq!((d.steps[0].state, d.steps[0].failure_count), (StepState::Error, 4));
    assert_eq!(d.task.state, TaskState::Failed);
    assert_eq!(step_events(&d.events, c.id, ev::STEP_EXPIRED).count(), 4);
    let alerts: Vec<_> = d.events.iter().filter(|e| e.level == EventLevel::Alert).map(|e| e.kind.as_str()).collect();
    assert_eq!(alerts, [ev::STEP_ERROR, ev::TASK_FAILED], "P17: an operator is alerted at the threshold");
    assert!(h.claim("sched-1", &[WORKER], 10).await.is_empty());
}

pub async fn counts_each_expiry_once<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let task = h.submit("k", "one", 0).await;
    let c = h.claim_one("sched-1").await;
    h.advance(secs(1) + ms(1));
    assert_eq!(h.expire(&leader, RetryPolicies::default()).await.expect("first sweep"), retried(1));
    let after_first = h.snapshot().await;
    assert_eq!(h.expire(&leader, RetryPolicies::default()).await.expect("second sweep"), ExpiryReport::default());
    assert_eq!(h.snapshot().await, after_first, "a second sweep at the same instant does nothing");
    assert_eq!(h.step(task, c.id).await.failure_count, 1);
}

pub async fn leaves_unexpired_steps_alone_and_respects_limit<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let mut tasks = Vec::new();
    for i in 0..4 {
        tasks.push(h.submit(&format!("k{i}"), "one", 0).await);
    }
    let early = h.claim_one("sched-1").await; // complete-by T0 + 1 s
    h.advance(ms(500));
    let later = h.claim("sched-1", &[WORKER], 3).await; // complete-by T0 + 1.5 s
    assert_eq!(later.len(), 3);
    let snapshot_of_later = |d: &[shiftboss_store::TaskDetail]| -> Vec<_> {
        d.iter().flat_map(|t| t.steps.iter()).filter(|s| later.iter().any(|c| c.id == s.id)).cloned().collect()
    };

    h.advance(ms(499)); // T0 + 999 ms: nothing has lapsed
    let before = h.snapshot().await;
    assert_eq!(h.expire(&leader, RetryPolicies::default()).await.expect("sweep"), ExpiryReport::default());
    assert_eq!(h.snapshot().await, before);

    h.advance(ms(2)); // T0 + 1001 ms: only the early claim has lapsed
    assert_eq!(h.expire(&leader, RetryPolicies::default()).await.expect("sweep"), retried(1));
    let after = h.snapshot().await;
    assert_eq!(snapshot_of_later(&after), snapshot_of_later(&before), "steps still within complete-by are untouched");
    assert_eq!(h.step(early.task_id, early.id).await.state, StepState::Pending);

    h.advance(secs(1)); // all three later claims have lapsed; two per sweep
    let sweep = |limit| ExpireLeases { leader: leader.clone(), limit, policies: Arc::new(RetryPolicies::default()) };
    assert_eq!(h.store.expire_leases(sweep(2)).await.expect("sweep"), retried(2));
    assert_eq!(h.store.expire_leases(sweep(2)).await.expect("sweep"), retried(1));
    assert_eq!(h.store.expire_leases(sweep(2)).await.expect("sweep"), ExpiryReport::default());
}

pub async fn uses_the_deployment_policy_per_agent<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "mail", "steps": [{"name": "send", "agent": "mailer", "timeout": "1s"}]}))).await;
    let leader = h.supervisor().await;
    let policies = RetryPolicies {
        default: intervals(&[secs(5)]),
        per_agent: [(WORKER.to_string(), intervals(&[ms(250)]))].into(),
    };
    let work = h.submit("w", "one", 0).await;
    let mail = h.submit("m", "mail", 0).await;
    let w = h.claim_one("sched-1").await;
    let m = h.claim("sched-1", &["mailer"], 1).await.remove(0);
    h.advance(secs(1) + ms(1));
    assert_eq!(h.expire(&leader, policies).await.expect("sweep"), retried(2));
    assert_eq!(h.step(work, w.id).await.due_at, h.now().plus(ms(250)), "the agent's policy");
    assert_eq!(h.step(mail, m.id).await.due_at, h.now().plus(secs(5)), "the deployment's default");
}
