//! Control steps (issue 4): the store writes what the decider decides, in the transaction of the
//! change that caused it; switch, fork, loop, sub-workflow, wait and terminate run end to end.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::event_kind as ev;
use shiftboss_store::*;

fn shipping() -> shiftboss_core::workflow::WorkflowDef {
    def(json!({"name": "shipping", "steps": [
        {"name": "check", "agent": WORKER, "input": {"country": "${task.input.country}"}},
        {"name": "route", "kind": "switch", "expression": "${check.output.zone}",
         "cases": {"eu": [{"name": "eu_post", "agent": WORKER}]},
         "default": [{"name": "courier", "agent": WORKER}]},
        {"name": "both", "kind": "fork", "branches": [
            [{"name": "label", "agent": WORKER}],
            [{"name": "poll", "kind": "do_while", "condition": "${poll.output.iteration < 2}", "max_iterations": 5,
              "body": [{"name": "track", "agent": WORKER}]}]
        ]},
        {"name": "notify", "agent": WORKER, "input": {"label": "${label.output.id}", "passes": "${poll.output.iteration}"}}
    ]}))
}

pub async fn switch_fork_and_loop_run_to_completion<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&shipping()).await;
    let mut input = submit_params("o1", "shipping", 0);
    input.input = json!({"country": "NL"});
    let task = h.store.submit_task(input).await.expect("submit").task_id;

    let c = h.claim_all("s1").await;
    assert_eq!(Harness::<F::Store>::names(&c), ["check"]);
    assert_eq!(c[0].input, json!({"country": "NL"}), "the input template was rendered");
    h.complete("s1", &c[0], json!({"zone": "eu"})).await;

    let c = h.claim_all("s1").await;
    assert_eq!(Harness::<F::Store>::names(&c), ["eu_post"], "the switch took the eu case");
    let route = h.step_named(task, "route").await;
    assert_eq!((route.kind, route.state), (StepKind::Switch, StepState::Processed));
    assert_eq!(route.output.unwrap()["case"], "eu");
    h.complete("s1", &c[0], json!(null)).await;

    let c = h.claim_all("s1").await;
    assert_eq!(Harness::<F::Store>::names(&c), ["label", "track#1"], "both branches start together");
    h.complete("s1", &c[1], json!({})).await;
    let c2 = h.claim_all("s1").await;
    assert_eq!(Harness::<F::Store>::names(&c2), ["track#2"], "the loop's second pass");
    h.complete("s1", &c2[0], json!({})).await;
    assert!(h.claim_all("s1").await.is_empty(), "the join waits for the label");
    assert_eq!(h.step_named(task, "both").await.state, StepState::Processing);
    h.complete("s1", &c[0], json!({"id": "L1"})).await;

    let c = h.claim_all("s1").await;
    assert_eq!(Harness::<F::Store>::names(&c), ["notify"]);
    assert_eq!(c[0].input, json!({"label": "L1", "passes": 2}));
    h.complete("s1", &c[0], json!({"sent": true})).await;
    let d = h.task(task).await;
    assert_eq!((d.task.state, d.task.output), (TaskState::Completed, Some(json!({"sent": true}))));
    assert!(!d.steps.iter().any(|s| s.name == "courier"), "the other case never ran");
    assert_eq!(count(&d.events, ev::STEP_DECIDED), 1);
}

pub async fn a_failed_branch_cancels_its_siblings_and_fences_their_holders<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let mut d = def(json!({"name": "pair", "steps": [
        {"name": "both", "kind": "fork", "branches": [[{"name": "a", "agent": WORKER}], [{"name": "b", "agent": WORKER}]]}
    ]}));
    d.compensate_on_failure = false;
    h.register(&d).await;
    let task = h.submit("p1", "pair", 0).await;
    let c = h.claim_all("s1").await;
    let (a, b) = (&c[0], &c[1]);
    h.reply("s1", a.id, a.lease_token, ReplyResult::PermanentError("refused".into())).await;
    let d = h.task(task).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let b_row = d.steps.iter().find(|s| s.name == "b").unwrap();
    assert_eq!((b_row.state, b_row.locked_by.as_deref()), (StepState::Cancelled, None), "the sibling is cancelled");
    assert!(matches!(h.complete("s1", b, json!({})).await, ReplyOutcome::Rejected { .. }), "its holder is fenced off");
    assert_eq!(h.step_named(task, "b").await.output, None, "the late reply changed nothing");
}

pub async fn a_sub_workflow_runs_a_child_whose_output_flows_back<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "child", "steps": [{"name": "pay", "agent": WORKER}],
                            "output": {"receipt": "${pay.output.id}"}})))
        .await;
    h.register(&def(json!({"name": "parent", "steps": [
        {"name": "sub", "kind": "sub_workflow", "workflow": "child", "input": {"amount": 5}},
        {"name": "after", "agent": WORKER, "input": "${sub.output.receipt}"}
    ]})))
    .await;
    let parent = h.submit("pa", "parent", 0).await;
    let sub = h.step_named(parent, "sub").await;
    assert_eq!((sub.kind, sub.state), (StepKind::SubWorkflow, StepState::Processing));
    let child = shiftboss_core::TaskId(sub.output.unwrap()["task_id"].as_i64().expect("the child's id"));
    let cd = h.task(child).await;
    assert_eq!((cd.task.parent_task_id, cd.task.input.clone()), (Some(parent), json!({"amount": 5})));

    let c = h.claim_all("s1").await;
    assert_eq!((c.len(), c[0].task_id), (1, child), "only the child's step is due");
    h.complete("s1", &c[0], json!({"id": "R7"})).await;
    assert_eq!(h.task(child).await.task.state, TaskState::Completed);
    assert_eq!(h.step_named(parent, "sub").await.state, StepState::Processed);
    let c = h.claim_all("s1").await;
    assert_eq!((c[0].name.as_str(), c[0].input.clone()), ("after", json!("R7")), "the child's output flowed back");
}

pub async fn a_failed_child_fails_its_parent_and_a_cancelled_parent_cancels_its_child<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "child", "steps": [{"name": "pay", "agent": WORKER}]}))).await;
    h.register(&def(
        json!({"name": "parent", "steps": [{"name": "sub", "kind": "sub_workflow", "workflow": "child"}]}),
    ))
    .await;
    let p1 = h.submit("p1", "parent", 0).await;
    let c = h.claim_all("s1").await;
    h.reply("s1", c[0].id, c[0].lease_token, ReplyResult::PermanentError("declined".into())).await;
    assert_eq!(h.task(p1).await.task.state, TaskState::Failed, "the child's failure fails the parent");
    assert_eq!(h.step_named(p1, "sub").await.state, StepState::Error);

    let p2 = h.submit("p2", "parent", 0).await;
    let child = c[0].task_id;
    assert_ne!(child, p2);
    let c = h.claim_all("s1").await;
    let child2 = c[0].task_id;
    h.operate(p2, TaskCommand::Cancel).await;
    assert_eq!(h.task(child2).await.task.state, TaskState::Cancelled, "the child went with its parent");
    assert!(matches!(h.complete("s1", &c[0], json!({})).await, ReplyOutcome::Rejected { .. }));
    assert_eq!(h.task(p2).await.task.state, TaskState::Cancelled);
}

pub async fn a_wait_ends_by_signal_or_by_time<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "approval", "steps": [
        {"name": "cool_off", "kind": "wait", "duration": "1m"},
        {"name": "approve", "kind": "wait", "signal": "approved"},
        {"name": "go", "agent": WORKER, "input": "${approve.output.by}"}
    ]})))
    .await;
    let task = h.submit("a1", "approval", 0).await;
    let leader = h.supervisor().await;
    assert_eq!(h.reconcile(&leader, secs(3600)).await.unwrap().waits_ended, 0, "not yet");
    let early = h.try_operate(task, TaskCommand::Signal { name: "approved".into(), payload: json!({}) }).await;
    assert!(matches!(early, Err(StoreError::Conflict(_))), "no wait for that signal yet: {early:?}");
    h.advance(secs(60));
    assert_eq!(h.reconcile(&leader, secs(3600)).await.unwrap().waits_ended, 1);
    assert_eq!(h.step_named(task, "cool_off").await.state, StepState::Processed);
    assert!(h.claim_all("s1").await.is_empty(), "waiting for the signal");
    h.operate(task, TaskCommand::Signal { name: "approved".into(), payload: json!({"by": "ann"}) }).await;
    let c = h.claim_all("s1").await;
    assert_eq!((c[0].name.as_str(), c[0].input.clone()), ("go", json!("ann")));
}

pub async fn terminate_ends_the_task_with_its_output<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "gate", "steps": [
        {"name": "check", "agent": WORKER},
        {"name": "dup", "kind": "switch", "expression": "${check.output.duplicate}",
         "cases": {"true": [{"name": "stop", "kind": "terminate", "status": "completed",
                             "output": {"skipped": "${task.input.order}"}}]}},
        {"name": "work", "agent": WORKER}
    ]})))
    .await;
    let task = h.submit("g1", "gate", 0).await;
    let c = h.claim_all("s1").await;
    h.complete("s1", &c[0], json!({"duplicate": true})).await;
    let d = h.task(task).await;
    assert_eq!((d.task.state, d.task.output), (TaskState::Completed, Some(json!({"skipped": "g1"}))));
    assert!(!d.steps.iter().any(|s| s.name == "work"));
}

pub async fn a_reply_to_a_control_step_is_rejected<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "w", "steps": [{"name": "hold", "kind": "wait", "signal": "go"}]}))).await;
    let task = h.submit("w1", "w", 0).await;
    let hold = h.step_named(task, "hold").await;
    let out = h.reply("s1", hold.id, hold.lease_token, ReplyResult::Completed(json!({}))).await;
    assert!(matches!(out, ReplyOutcome::Rejected { .. }), "{out:?}");
    assert_eq!(h.step_named(task, "hold").await.state, StepState::Processing);
}
