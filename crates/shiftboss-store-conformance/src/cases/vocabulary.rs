//! The wider vocabulary (issue 21), in a store: a start_workflow step's task, a failure workflow
//! started in the failing transaction, a delayed first attempt, an agent chosen at run time, and
//! optional and set steps, each written by the shared write path in the store's own SQL.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::event_kind as ev;
use shiftboss_store::*;

pub async fn a_start_workflow_step_starts_a_task_of_its_own_and_goes_on<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "emails", "steps": [{"name": "send", "agent": WORKER}]}))).await;
    h.register(&def(json!({"name": "order", "steps": [
        {"name": "notify", "kind": "start_workflow", "workflow": "${task.input.flow}", "input": {"order": "${task.key}"}},
        {"name": "after", "agent": WORKER, "input": {"started": "${notify.output.task_id}"}}
    ]})))
    .await;
    let mut s = submit_params("o1", "order", 0);
    s.input = json!({"flow": "emails"});
    let order = h.store.submit_task(s).await.expect("submit").task_id;
    let notify = h.step_named(order, "notify").await;
    assert_eq!(notify.state, StepState::Processed, "started is all the step waits for");
    let started = TaskId(notify.output.unwrap()["task_id"].as_i64().expect("the started task's id"));
    let sd = h.task(started).await;
    assert_eq!((sd.task.workflow.as_str(), sd.task.input.clone()), ("emails", json!({"order": "o1"})));
    assert_eq!(sd.task.parent_task_id, None, "a started task is no child");
    let received = sd.events.iter().find(|e| e.kind == ev::TASK_RECEIVED).expect("received");
    assert_eq!(received.detail["started_by"], json!(order.0));

    let c = h.claim_all("s1").await;
    let mut names: Vec<(TaskId, &str)> = c.iter().map(|c| (c.task_id, c.name.as_str())).collect();
    names.sort();
    assert_eq!(names, [(order, "after"), (started, "send")], "both run side by side");
    let after = c.iter().find(|c| c.name == "after").unwrap();
    assert_eq!(after.input, json!({"started": started.0}));
    let send = c.iter().find(|c| c.name == "send").unwrap();
    h.reply("s1", send.id, send.lease_token, ReplyResult::PermanentError("bounced".into())).await;
    assert_eq!(h.task(started).await.task.state, TaskState::Failed);
    assert_eq!(h.task(order).await.task.state, TaskState::Running, "its failure moves nothing of the order");
    h.complete("s1", after, json!({})).await;
    assert_eq!(h.task(order).await.task.state, TaskState::Completed);
}

pub async fn a_failure_workflow_starts_in_the_failing_transaction<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "cleanup", "steps": [{"name": "undo", "agent": WORKER}]}))).await;
    h.register(&def(json!({"name": "order", "on_failure": "cleanup", "steps": [{"name": "pay", "agent": WORKER}]})))
        .await;
    h.register(&def(json!({"name": "lonely", "on_failure": "nowhere", "steps": [{"name": "pay", "agent": WORKER}]})))
        .await;
    let mut s = submit_params("o1", "order", 0);
    s.input = json!({"amount": 5});
    let order = h.store.submit_task(s).await.expect("submit").task_id;
    let c = h.claim_one("s1").await;
    h.reply("s1", c.id, c.lease_token, ReplyResult::PermanentError("card declined".into())).await;

    let d = h.task(order).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let started = d.events.iter().find(|e| e.kind == ev::FAILURE_WORKFLOW_STARTED).expect("the start is recorded");
    let cleanup = TaskId(started.detail["task_id"].as_i64().unwrap());
    let cd = h.task(cleanup).await;
    assert_eq!((cd.task.workflow.as_str(), cd.task.key.as_str()), ("cleanup", "o1/on_failure/0"));
    assert_eq!(cd.task.input["task_id"], json!(order.0));
    assert_eq!(cd.task.input["workflowId"], json!(order.0.to_string()));
    assert_eq!(cd.task.input["reason"], json!("card declined"));
    assert_eq!(cd.task.input["failedWorkflow"]["input"], json!({"amount": 5}));
    let undo = h.claim_one("s1").await;
    assert_eq!((undo.task_id, undo.name.as_str()), (cleanup, "undo"), "its first step is due at once");

    // Retried and failed again: another failure workflow starts.
    h.operate(order, TaskCommand::Retry).await;
    let c = h.claim_all("s1").await;
    let pay = c.iter().find(|c| c.task_id == order).expect("the retried step is due");
    h.reply("s1", pay.id, pay.lease_token, ReplyResult::PermanentError("declined again".into())).await;
    let d = h.task(order).await;
    let starts: Vec<_> = d.events.iter().filter(|e| e.kind == ev::FAILURE_WORKFLOW_STARTED).collect();
    assert_eq!(starts.len(), 2, "{:#?}", d.events);
    let second = TaskId(starts[1].detail["task_id"].as_i64().unwrap());
    assert_ne!(second, cleanup);
    assert_eq!(h.task(second).await.task.input["reason"], json!("declined again"));

    // A failure workflow that is not registered is an alert; the failure stands.
    let lonely = h.submit("l1", "lonely", 0).await;
    let c = h.claim_all("s1").await;
    let c = c.iter().find(|c| c.task_id == lonely).expect("its step is due");
    h.reply("s1", c.id, c.lease_token, ReplyResult::PermanentError("no".into())).await;
    let d = h.task(lonely).await;
    assert_eq!(d.task.state, TaskState::Failed);
    let alert = d.events.iter().find(|e| e.kind == ev::FAILURE_WORKFLOW_NOT_STARTED).expect("an alert");
    assert_eq!(alert.level, EventLevel::Alert);
    assert!(alert.detail["problem"].as_str().unwrap().contains("not registered"), "{}", alert.detail);
}

pub async fn a_delayed_step_is_due_after_its_delay_and_a_chosen_agent_claims_it<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "later", "steps": [
        {"name": "first", "agent": "${task.input.who}", "delay": "10s"}
    ]})))
    .await;
    let mut s = submit_params("d1", "later", 0);
    s.input = json!({"who": WORKER});
    let task = h.store.submit_task(s).await.expect("submit").task_id;
    assert_eq!(h.step_named(task, "first").await.agent, WORKER, "the row names the agent chosen");
    assert!(h.claim_all("s1").await.is_empty(), "not before its delay");
    h.advance(secs(10));
    let c = h.claim_all("s1").await;
    assert_eq!((c.len(), c[0].name.as_str()), (1, "first"));
}

pub async fn an_optional_step_fails_and_the_task_goes_on_with_its_variables<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "opt", "variables": {"tries": 0}, "steps": [
        {"name": "mark", "kind": "set", "variables": {"tries": "${task.variables.tries + 1}"}},
        {"name": "try", "agent": WORKER, "optional": true},
        {"name": "then", "agent": WORKER, "input": {"tries": "${task.variables.tries}", "tried": "${try.state}"}}
    ]})))
    .await;
    let task = h.submit("p1", "opt", 0).await;
    let c = h.claim_one("s1").await;
    h.reply("s1", c.id, c.lease_token, ReplyResult::PermanentError("down".into())).await;
    let c = h.claim_one("s1").await;
    assert_eq!((c.name.as_str(), c.input.clone()), ("then", json!({"tries": 1, "tried": "error"})));
    h.complete("s1", &c, json!({"done": true})).await;
    let d = h.task(task).await;
    assert_eq!((d.task.state, d.task.output), (TaskState::Completed, Some(json!({"done": true}))));
    assert_eq!(h.step_named(task, "try").await.state, StepState::Error);
}

pub async fn a_fork_each_runs_a_pass_per_item_and_joins_them<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "fan", "steps": [
        {"name": "fanout", "kind": "fork_each", "items": "${task.input.parts}", "key": "${fanout.item.id}",
         "body": [{"name": "make", "agent": WORKER, "input": {"part": "${fanout.item.id}"}}]},
        {"name": "after", "agent": WORKER, "input": "${fanout.output}"}
    ]})))
    .await;
    let mut s = submit_params("f1", "fan", 0);
    s.input = json!({"parts": [{"id": "a"}, {"id": "b"}]});
    let task = h.store.submit_task(s).await.expect("submit").task_id;
    let c = h.claim_all("s1").await;
    assert_eq!(Harness::<F::Store>::names(&c), ["make#1", "make#2"]);
    assert_eq!(c[1].input, json!({"part": "b"}));
    h.complete("s1", &c[1], json!({"n": 2})).await;
    h.complete("s1", &c[0], json!({"n": 1})).await;
    let c = h.claim_all("s1").await;
    assert_eq!((c[0].name.as_str(), c[0].input.clone()), ("after", json!({"a": {"n": 1}, "b": {"n": 2}})));
    let fanout = h.step_named(task, "fanout").await;
    assert_eq!((fanout.state, fanout.input), (StepState::Processed, json!([{"id": "a"}, {"id": "b"}])));
}
