//! Step policies (issue 4): domains, concurrency and rate limits per agent, the response timeout
//! that step heartbeats extend, and what a timeout does.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::event_kind as ev;
use shiftboss_store::*;

fn claim_params(instance: &str, domains: &[&str], limits: Vec<AgentLimit>) -> ClaimDueSteps {
    ClaimDueSteps {
        instance: id(instance),
        limit: 100,
        agents: vec![WORKER.into()],
        buckets: None,
        domains: domains.iter().map(|d| d.to_string()).collect(),
        limits,
    }
}

pub async fn a_domain_step_goes_only_to_its_domain_until_the_fallback<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "gpu", "steps": [
        {"name": "render", "agent": WORKER, "domain": "gpu", "domain_fallback": "10s"}
    ]})))
    .await;
    h.register_standard().await;
    h.submit("g1", "gpu", 0).await;
    h.submit("plain", "one", 0).await;
    let got = h.store.claim_due_steps(claim_params("cpu", &[], vec![])).await.unwrap();
    assert_eq!(got.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["work"], "no domain: only the plain step");
    h.submit("g2", "gpu", 0).await;
    let got = h.store.claim_due_steps(claim_params("gpu-1", &["gpu"], vec![])).await.unwrap();
    assert_eq!(got.len(), 2, "the gpu scheduler takes both render steps");
    let g3 = h.submit("g3", "gpu", 0).await;
    assert!(h.store.claim_due_steps(claim_params("cpu", &[], vec![])).await.unwrap().is_empty());
    // The step's row says where it is routed and until when, for an operator's "why".
    let render = h.step_named(g3, "render").await;
    assert_eq!(render.domain.as_deref(), Some("gpu"));
    assert_eq!(render.fallback_at, Some(h.now().plus(secs(10))));
    h.advance(secs(10));
    let got = h.store.claim_due_steps(claim_params("cpu", &[], vec![])).await.unwrap();
    assert_eq!(got.len(), 1, "after the fallback anyone may");
}

pub async fn concurrency_and_rate_limits_hold_across_claims<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    for i in 0..10 {
        h.submit(&format!("t{i}"), "one", 0).await;
    }
    let cap = || vec![AgentLimit { agent: WORKER.into(), max_concurrent: Some(3), per_second: None }];
    let a = h.store.claim_due_steps(claim_params("s1", &[], cap())).await.unwrap();
    let b = h.store.claim_due_steps(claim_params("s2", &[], cap())).await.unwrap();
    assert_eq!((a.len(), b.len()), (3, 0), "at most 3 running, whoever claims");
    h.complete("s1", &a[0], json!({})).await;
    assert_eq!(h.store.claim_due_steps(claim_params("s2", &[], cap())).await.unwrap().len(), 1);

    let rate = || vec![AgentLimit { agent: WORKER.into(), max_concurrent: None, per_second: Some(2) }];
    let c = h.store.claim_due_steps(claim_params("s3", &[], rate())).await.unwrap();
    let d = h.store.claim_due_steps(claim_params("s4", &[], rate())).await.unwrap();
    assert_eq!((c.len(), d.len()), (2, 0), "2 per second");
    h.advance(secs(1));
    assert_eq!(h.store.claim_due_steps(claim_params("s4", &[], rate())).await.unwrap().len(), 2, "a new second");
}

pub async fn heartbeats_extend_the_response_timeout_up_to_the_step_timeout<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "long", "steps": [
        {"name": "build", "agent": WORKER, "timeout": "10s", "response_timeout": "2s"}
    ]})))
    .await;
    h.submit("l1", "long", 0).await;
    let c = h.claim_one("s1").await;
    let start = h.now();
    assert_eq!(c.complete_by, start.plus(secs(2)), "the first response window");
    h.advance(secs(1));
    let p = ExtendLease { step_id: c.id, lease_token: c.lease_token, progress: None };
    assert_eq!(h.store.extend_lease(p.clone()).await.unwrap(), start.plus(secs(3)));
    h.advance(secs(8));
    assert_eq!(h.store.extend_lease(p.clone()).await.unwrap(), start.plus(secs(10)), "never past the timeout");
    let stale =
        ExtendLease { step_id: c.id, lease_token: shiftboss_core::LeaseToken(c.lease_token.0 + 1), progress: None };
    assert!(matches!(h.store.extend_lease(stale).await, Err(StoreError::Conflict(_))));
}

pub async fn a_silent_agent_is_expired_at_its_response_timeout<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "long", "steps": [
        {"name": "build", "agent": WORKER, "timeout": "10s", "response_timeout": "2s"}
    ]})))
    .await;
    let leader = h.supervisor().await;
    h.submit("l1", "long", 0).await;
    h.claim_one("s1").await;
    h.advance(secs(2));
    assert_eq!(h.expire(&leader, Default::default()).await.unwrap().retried, 1);
}

pub async fn on_timeout_fail_task_and_alert_only<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "strict", "compensate_on_failure": false, "steps": [
        {"name": "pay", "agent": WORKER, "timeout": "1s", "on_timeout": "fail_task"}
    ]})))
    .await;
    h.register(&def(json!({"name": "lenient", "steps": [
        {"name": "pay", "agent": WORKER, "timeout": "1s", "on_timeout": "alert_only"}
    ]})))
    .await;
    let leader = h.supervisor().await;
    let strict = h.submit("s", "strict", 0).await;
    h.claim_one("s1").await;
    h.advance(secs(1));
    assert_eq!(h.expire(&leader, Default::default()).await.unwrap().gave_up, 1, "no retry: the task fails");
    assert_eq!(h.task(strict).await.task.state, TaskState::Failed);

    let lenient = h.submit("l", "lenient", 0).await;
    let c = h.claim_one("s1").await;
    h.advance(secs(1));
    h.expire(&leader, Default::default()).await.unwrap();
    let s = h.step_named(lenient, "pay").await;
    assert_eq!((s.state, s.locked_by.as_deref()), (StepState::Processing, Some("s1")), "it stays with its holder");
    let d = h.task(lenient).await;
    assert_eq!(count(&d.events, ev::STEP_OVERDUE), 1);
    h.advance(secs(60));
    h.expire(&leader, Default::default()).await.unwrap();
    assert_eq!(count(&h.task(lenient).await.events, ev::STEP_OVERDUE), 1, "alerted once");
    assert!(matches!(h.complete("s1", &c, json!({})).await, ReplyOutcome::Applied { .. }), "its late reply counts");
}

pub async fn an_unclaimed_attempt_times_out_by_its_policy<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let step = |on_timeout: &str| {
        json!({"name": "pay", "agent": WORKER, "claim_timeout": "5s", "on_timeout": on_timeout,
               "retry": {"kind": "intervals", "intervals": ["1s", "1s"]}})
    };
    h.register(&def(json!({"name": "polled", "steps": [step("retry")]}))).await;
    h.register(&def(json!({"name": "strict", "compensate_on_failure": false, "steps": [step("fail_task")]}))).await;
    h.register(&def(json!({"name": "lenient", "steps": [step("alert_only")]}))).await;
    let leader = h.supervisor().await;
    let polled = h.submit("p", "polled", 0).await;
    let strict = h.submit("s", "strict", 0).await;
    let lenient = h.submit("l", "lenient", 0).await;
    let paused = h.submit("held", "polled", 0).await;
    h.operate(paused, TaskCommand::Pause).await;

    h.advance(ms(4_999));
    assert_eq!(h.expire(&leader, Default::default()).await.unwrap(), ExpiryReport::default(), "not yet");
    h.advance(ms(1));
    let r = h.expire(&leader, Default::default()).await.unwrap();
    assert_eq!((r.retried, r.gave_up), (1, 1), "retry: counted and tried again; fail_task: gives up");

    let s = h.step_named(polled, "pay").await;
    assert_eq!((s.state, s.failure_count), (StepState::Pending, 1));
    assert!(s.last_error.as_deref().unwrap_or("").contains("claim timeout"), "{:?}", s.last_error);
    assert_eq!(count(&h.task(polled).await.events, ev::STEP_UNCLAIMED), 1);
    assert_eq!(h.task(strict).await.task.state, TaskState::Failed);
    let l = h.step_named(lenient, "pay").await;
    assert_eq!((l.state, l.failure_count), (StepState::Pending, 0), "alert_only: it waits on for a worker");
    assert_eq!(count(&h.task(lenient).await.events, ev::STEP_OVERDUE), 1);
    let held = h.step_named(paused, "pay").await;
    assert_eq!((held.state, held.failure_count), (StepState::Pending, 0), "a paused task's steps wait for the resume");

    // The retry is due after the policy's delay, with a claim timeout of its own; the alert was once.
    h.advance(secs(30));
    let r = h.expire(&leader, Default::default()).await.unwrap();
    assert_eq!((r.retried, r.gave_up), (1, 0), "the retry timed out too: {r:?}");
    assert_eq!(count(&h.task(lenient).await.events, ev::STEP_OVERDUE), 1, "alerted once");
    h.advance(secs(1));
    let claimed = h.claim_all("w1").await;
    assert_eq!(claimed.len(), 2, "the polled task's step and the lenient one are claimable");
    for c in &claimed {
        h.complete("w1", c, json!({})).await;
    }
    assert_eq!(h.task(polled).await.task.state, TaskState::Completed);
    assert_eq!(h.task(lenient).await.task.state, TaskState::Completed);
}

pub async fn the_total_timeout_bounds_every_attempt_and_retry<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "bounded", "compensate_on_failure": false, "steps": [
        {"name": "pay", "agent": WORKER, "timeout": "10s", "total_timeout": "15s",
         "retry": {"kind": "intervals", "intervals": ["1s", "1s", "1s"]}}
    ]})))
    .await;
    let leader = h.supervisor().await;
    let start = h.now();
    let task = h.submit("b", "bounded", 0).await;
    let c = h.claim_one("s1").await;
    assert_eq!(c.complete_by, start.plus(secs(10)), "the first attempt's own window");
    h.advance(secs(10));
    assert_eq!(h.expire(&leader, Default::default()).await.unwrap().retried, 1, "due at 11 s: within 15 s");
    h.advance(secs(1));
    let c = h.claim_one("s1").await;
    assert_eq!(c.complete_by, start.plus(secs(15)), "cut at the deadline, not 21 s");
    let p = ExtendLease { step_id: c.id, lease_token: c.lease_token, progress: None };
    assert_eq!(h.store.extend_lease(p).await.unwrap(), start.plus(secs(15)), "a heartbeat does not pass it");
    h.advance(secs(4));
    assert_eq!(h.expire(&leader, Default::default()).await.unwrap().gave_up, 1, "no retry at or after 15 s");
    let d = h.task(task).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let alert = d.events.iter().rev().find(|e| e.kind == ev::STEP_ERROR).expect("the step's alert");
    assert_eq!(alert.detail["reason"], "its total timeout passed", "{:?}", alert.detail);

    // An operator's retry gives the step its budget again.
    h.operate(task, TaskCommand::Retry).await;
    let again = h.now();
    let c = h.claim_one("s1").await;
    assert_eq!(c.complete_by, again.plus(secs(10)));
    h.complete("s1", &c, json!({})).await;
    assert_eq!(h.task(task).await.task.state, TaskState::Completed);
}

pub async fn a_tasks_domains_place_its_steps_and_its_childrens<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "parent", "steps": [
        {"name": "child", "kind": "sub_workflow", "workflow": "one"}
    ]})))
    .await;
    let with = |key: &str, workflow: &str, domains: &[(&str, &str)]| {
        let mut p = submit_params(key, workflow, 0);
        p.domains = domains.iter().map(|(a, d)| (a.to_string(), d.to_string())).collect();
        p
    };
    let bad = with("bad", "one", &[(WORKER, "no spaces allowed")]);
    assert!(matches!(h.store.submit_task(bad).await, Err(StoreError::InvalidInput(_))), "a bad domain name");
    h.store.submit_task(with("eu", "one", &[(WORKER, "eu")])).await.unwrap();
    h.store.submit_task(with("star", "one", &[("*", "eu")])).await.unwrap();
    h.store.submit_task(with("free", "one", &[("*", "eu"), (WORKER, NO_DOMAIN)])).await.unwrap();
    let parent = h.store.submit_task(with("nested", "parent", &[(WORKER, "eu")])).await.unwrap().task_id;

    let anyone = h.store.claim_due_steps(claim_params("plain", &[], vec![])).await.unwrap();
    assert_eq!(anyone.len(), 1, "only the NO_DOMAIN task's step goes to a scheduler of no domain");
    let eu = h.store.claim_due_steps(claim_params("eu-1", &["eu"], vec![])).await.unwrap();
    assert_eq!(eu.len(), 3, "its own, \"*\", and the sub-workflow's child, which takes its parent's domains");
    let mut keys = Vec::new();
    for c in &eu {
        keys.push(h.task(c.task_id).await.task.key);
    }
    keys.sort();
    assert_eq!(keys, ["eu", "nested/child/0", "star"], "the child's key is made from its parent's");
    let d = h.task(parent).await;
    assert_eq!(d.task.state, TaskState::Running);
}
