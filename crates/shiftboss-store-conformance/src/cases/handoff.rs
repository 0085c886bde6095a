//! submit_tasks_and_claim: submissions and, in their transaction after them, claims (the handoff
//! of new steps to remote workers' waiting polls). Each claim is the claim of `claim_due_steps`,
//! run in order after the submissions; all or nothing.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::{AgentLimit, ReplyOutcome, Store, StoreError, event_kind as ev};

pub async fn claims_after_the_submissions_take_their_steps_as_a_claim_does<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "limited", "steps": [{"name": "l", "agent": "slow"}]}))).await;
    // Due before the batch, at a lower priority.
    let older = h.submit("older", "one", 0).await;
    // One step of the limited agent already runs, which is its limit.
    h.submit("slow-1", "limited", 0).await;
    h.advance(ms(1));
    let running = h.claim("s", &["slow"], 1).await;
    assert_eq!(running.len(), 1);
    h.advance(ms(1));

    let mut limited = claim_params("worker:c", &["slow"], 5);
    limited.limits = vec![AgentLimit { agent: "slow".into(), max_concurrent: Some(1), per_second: None }];
    let claims = vec![
        claim_params("worker:a", &[WORKER], 1),
        claim_params("worker:b", &["elsewhere"], 5),
        limited,
        claim_params("worker:d", &[WORKER], 5),
    ];
    let batch = vec![submit_params("new", "one", 3), submit_params("slow-2", "limited", 0)];
    let got = h.store.submit_tasks_and_claim(batch, claims).await.expect("submit and claim");
    assert_eq!(got.submitted.len(), 2);
    assert!(got.submitted.iter().all(|s| s.created));
    let new = got.submitted[0].task_id;
    assert_eq!(got.claimed.len(), 4, "one list per claim, in their order");

    // The first claim takes the new task's step: the highest priority due.
    let [a] = &got.claimed[0][..] else { panic!("worker:a took {:?}", got.claimed[0]) };
    assert_eq!((a.task_id, a.attempt, a.task_key.as_str(), a.claimed_at), (new, 1, "new", h.now()));
    assert!(got.claimed[1].is_empty(), "no step of that agent type");
    assert!(got.claimed[2].is_empty(), "the limit leaves no room");
    // The claims run in order: the last takes what the first left.
    let d: Vec<_> = got.claimed[3].iter().map(|c| c.task_id).collect();
    assert_eq!(d, [older]);

    let detail = h.task(new).await;
    let step = &detail.steps[0];
    assert_eq!(
        (step.state, step.locked_by.as_deref(), step.lease_token, step.complete_by),
        (StepState::Processing, Some("worker:a"), a.lease_token, Some(a.complete_by))
    );
    // The claim's event follows the submission's in the log.
    let kinds: Vec<&str> = detail.events.iter().map(|e| e.kind.as_str()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("{k} in {kinds:?}"));
    assert!(
        at(ev::TASK_RECEIVED) < at(ev::STEP_SCHEDULED) && at(ev::STEP_SCHEDULED) < at(ev::STEP_CLAIMED),
        "{kinds:?}"
    );
    assert_eq!(count(&detail.events, ev::STEP_CLAIMED), 1);
    let slow_2 = h.store.find_task_by_key("slow-2").await.unwrap().expect("slow-2");
    assert_eq!(h.task(slow_2.id).await.steps[0].state, StepState::Pending, "left for when the limit has room");

    // The lease is a lease like any other: its holder completes the step.
    assert!(matches!(h.complete("worker:a", a, json!({"ok": true})).await, ReplyOutcome::Applied { .. }));
    assert_eq!(h.task(new).await.task.state, TaskState::Completed);
}

pub async fn a_refused_batch_claims_nothing<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.submit("existing", "one", 0).await;
    let before = h.snapshot().await;
    let mut other_input = submit_params("existing", "one", 0);
    other_input.input = json!({"something": "else"});
    let batch = vec![submit_params("new", "one", 0), other_input];
    match h.store.submit_tasks_and_claim(batch, vec![claim_params("worker:a", &[WORKER], 5)]).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("existing"), "{m}"),
        other => panic!("want Conflict, got {other:?}"),
    }
    assert_eq!(h.snapshot().await, before, "nothing written, nothing claimed");
    // Still due for any claimer.
    assert_eq!(h.claim("s", &[WORKER], 5).await.len(), 1);
}
