//! The next times the sleeping roles wait for (idle load): a short claim tells when the next step
//! it could claim falls due, a sweep tells the next complete-by and due time, a reconciler pass
//! the next wait's end or task deadline. A time reported too late makes work late; one reported
//! too early, or for work the caller cannot take, costs idle transactions.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{ClaimDueSteps, ClaimedWork, ExpireLeases, Reconcile, Store, TaskCommand};
use std::sync::Arc;

fn claim(instance: &str, agents: &[&str], domains: &[&str], limit: u32) -> ClaimDueSteps {
    ClaimDueSteps {
        instance: id(instance),
        limit,
        agents: agents.iter().map(|a| a.to_string()).collect(),
        buckets: None,
        domains: domains.iter().map(|d| d.to_string()).collect(),
        limits: vec![],
    }
}

async fn work<S: Store>(h: &Harness<S>, p: ClaimDueSteps) -> ClaimedWork {
    h.store.claim_due_work(p).await.expect("claim")
}

pub async fn a_short_claim_reports_when_its_next_step_falls_due<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let task = h.submit("r", "retrying", 0).await;
    let w = work(&h, claim("s1", &[WORKER], &[], 10)).await;
    assert_eq!((w.steps.len(), w.now, w.next_due), (1, h.now(), None), "nothing else is pending");
    assert_eq!((w.steps[0].task_id, w.steps[0].task_key.as_str()), (task, "r"), "the claim at once reads the key too");

    // Its lease lapses: the retry is due 100 ms after the sweep.
    h.advance(secs(1) + ms(1));
    h.expire(&leader, RetryPolicies::default()).await.expect("sweep");
    let due = h.now().plus(ms(100));
    let w = work(&h, claim("s1", &[WORKER], &[], 10)).await;
    assert_eq!((w.steps.len(), w.next_due), (0, Some(due)), "the delayed retry's due time");
    assert_eq!(work(&h, claim("s1", &["other"], &[], 10)).await.next_due, None, "not this claimer's agent");

    h.operate(task, TaskCommand::Pause).await;
    assert_eq!(work(&h, claim("s1", &[WORKER], &[], 10)).await.next_due, None, "held until the resume");
    h.operate(task, TaskCommand::Resume).await;
    assert_eq!(work(&h, claim("s1", &[WORKER], &[], 10)).await.steps.len(), 1, "due at the resume");

    // A full claim may leave more due now: no next time, the caller claims again.
    h.submit("a", "one", 0).await;
    h.submit("b", "one", 0).await;
    let w = work(&h, claim("s1", &[WORKER], &[], 1)).await;
    assert_eq!((w.steps.len(), w.next_due), (1, None));
}

pub async fn a_short_claim_reports_the_fallback_of_another_domains_step<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "gpu", "steps": [
        {"name": "render", "agent": WORKER, "domain": "gpu", "domain_fallback": "10s"}
    ]})))
    .await;
    h.submit("g", "gpu", 0).await;
    let fallback = h.now().plus(secs(10));
    let w = work(&h, claim("cpu", &[WORKER], &[], 10)).await;
    assert_eq!((w.steps.len(), w.next_due), (0, Some(fallback)), "claimable by anyone at its fallback");
    h.advance(secs(10));
    assert_eq!(work(&h, claim("cpu", &[WORKER], &[], 10)).await.steps.len(), 1);
}

pub async fn a_sweep_reports_the_next_complete_by_and_due_time<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let sweep = || ExpireLeases { leader: leader.clone(), limit: 100, policies: Arc::new(RetryPolicies::default()) };
    let s = h.store.sweep(sweep()).await.expect("sweep");
    assert_eq!((s.now, s.next_complete_by, s.next_due), (h.now(), None, None), "an empty store");

    let task = h.submit("k", "one", 0).await;
    let s = h.store.sweep(sweep()).await.expect("sweep");
    assert_eq!((s.next_complete_by, s.next_due), (None, Some(h.now())), "work waits to be claimed");

    let c = h.claim_one("s1").await;
    let s = h.store.sweep(sweep()).await.expect("sweep");
    assert_eq!((s.next_complete_by, s.next_due), (Some(c.complete_by), None), "its lease can lapse then");

    h.advance(secs(1) + ms(1));
    let s = h.store.sweep(sweep()).await.expect("sweep");
    assert_eq!(s.report.retried, 1);
    let retry = h.step(task, c.id).await;
    assert_eq!((s.next_complete_by, s.next_due), (None, Some(retry.due_at)), "the retry's due time");
}

pub async fn a_reconcile_pass_reports_the_next_wait_or_deadline<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "cool", "timeout": "10m", "steps": [
        {"name": "cool_off", "kind": "wait", "duration": "1m"},
        {"name": "go", "agent": WORKER}
    ]})))
    .await;
    let leader = h.supervisor().await;
    let pass = || Reconcile { leader: leader.clone(), stale_after: secs(3600), limit: 100 };
    assert_eq!(h.store.reconcile_pass(pass()).await.expect("pass").next_at, None, "nothing timed");

    let t0 = h.now();
    h.submit("c", "cool", 0).await;
    let r = h.store.reconcile_pass(pass()).await.expect("pass");
    assert_eq!((r.now, r.next_at), (t0, Some(t0.plus(secs(60)))), "the wait ends first");
    h.advance(secs(60));
    let r = h.store.reconcile_pass(pass()).await.expect("pass");
    assert_eq!(r.report.waits_ended, 1);
    assert_eq!(r.next_at, Some(t0.plus(secs(600))), "then the task's deadline");
}
