//! Bulk operator actions over a filter (issue 16): a dry run counts and changes nothing; the action
//! acts on each matched task in a transaction of its own, and a task whose state forbids it is
//! reported, not fatal.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::*;

fn bulk(command: BulkCommand, filter: TaskFilter, dry_run: bool) -> BulkOperate {
    BulkOperate { filter, command, actor: "ops".into(), reason: "incident 42".into(), dry_run, limit: 1000 }
}

fn prefix(p: &str) -> TaskFilter {
    TaskFilter { key_prefix: Some(p.into()), ..TaskFilter::default() }
}

async fn state<S: Store>(h: &Harness<S>, id: TaskId) -> TaskState {
    h.task(id).await.task.state
}

pub async fn a_dry_run_counts_and_the_action_cancels_each_task_reporting_refusals<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let done = h.submit("batch-0", "one", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({})).await;
    let mut live = Vec::new();
    for i in 1..=4 {
        live.push(h.submit(&format!("batch-{i}"), "one", 0).await);
    }
    let held = h.claim_one("s").await; // batch-1's step, processing
    let bystander = h.submit("other-1", "one", 0).await;

    let before = h.snapshot().await;
    let dry = h.store.bulk_operate(bulk(BulkCommand::Cancel, prefix("batch-"), true)).await.expect("dry run");
    assert_eq!((dry.matched, dry.more, dry.acted, dry.failed), (5, false, 0, 0), "{dry:?}");
    assert!(dry.failures.is_empty());
    assert_eq!(h.snapshot().await, before, "a dry run changes nothing");

    let report = h.store.bulk_operate(bulk(BulkCommand::Cancel, prefix("batch-"), false)).await.expect("cancel");
    assert_eq!((report.matched, report.acted, report.failed), (5, 4, 1), "{report:?}");
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].task_id, done, "the completed task refused");
    assert!(matches!(report.failures[0].error, StoreError::Conflict(_)), "{:?}", report.failures[0].error);
    assert_eq!(state(&h, done).await, TaskState::Completed, "unchanged");
    for id in &live {
        let d = h.task(*id).await;
        assert_eq!(d.task.state, TaskState::Cancelled, "task {id}");
        let by_ops = d.events.iter().any(|e| e.actor == "ops" && e.detail.to_string().contains("incident 42"));
        assert!(by_ops, "the actor and reason are on each task's log: {:?}", d.events);
    }
    assert_eq!(state(&h, bystander).await, TaskState::Running, "outside the filter: untouched");
    // The cancelled holder is fenced as with a single cancel.
    let late = h.complete("s", &held, json!({})).await;
    assert!(matches!(late, ReplyOutcome::Rejected { .. }), "{late:?}");

    // Again: every task now refuses, and the report says so without failing the call.
    let again = h.store.bulk_operate(bulk(BulkCommand::Cancel, prefix("batch-"), false)).await.expect("again");
    assert_eq!((again.matched, again.acted, again.failed), (5, 0, 5));
    // A filter that matches nothing is an empty report.
    let none = h.store.bulk_operate(bulk(BulkCommand::Cancel, prefix("nothing-"), false)).await.expect("none");
    assert_eq!((none.matched, none.acted, none.failed), (0, 0, 0));
}

pub async fn resubmit_and_retry_run_steps_in_error_again<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let mut failed = Vec::new();
    for i in 0..2 {
        let id = h.submit(&format!("f-{i}"), "one", 0).await;
        let c = h.claim_one("s").await;
        h.reply("s", c.id, c.lease_token, ReplyResult::PermanentError("card declined".into())).await;
        assert_eq!(state(&h, id).await, TaskState::Failed);
        failed.push(id);
    }
    let running = h.submit("f-2", "one", 0).await;
    let all = TaskFilter { workflow: Some("one".into()), ..TaskFilter::default() };

    let dry = h.store.bulk_operate(bulk(BulkCommand::Resubmit, all.clone(), true)).await.expect("dry run");
    assert_eq!((dry.matched, dry.acted), (3, 0));
    let report = h.store.bulk_operate(bulk(BulkCommand::Resubmit, all.clone(), false)).await.expect("resubmit");
    assert_eq!((report.matched, report.acted, report.failed), (3, 2, 1), "{report:?}");
    assert_eq!(report.failures[0].task_id, running, "no step in error: refused");
    assert!(matches!(report.failures[0].error, StoreError::Conflict(_)));
    for id in &failed {
        let d = h.task(*id).await;
        assert_eq!(d.task.state, TaskState::Running);
        assert_eq!((d.steps[0].state, d.steps[0].failure_count), (StepState::Pending, 0));
        assert_eq!(count(&d.events, event_kind::STEP_RESUBMITTED), 1);
    }

    // Both fail again; a bulk retry over the failed ones only.
    for _ in 0..2 {
        let c = h.claim_one("s").await;
        h.reply("s", c.id, c.lease_token, ReplyResult::PermanentError("again".into())).await;
    }
    let failed_only = TaskFilter { state: Some(TaskState::Failed), ..all };
    let report = h.store.bulk_operate(bulk(BulkCommand::Retry, failed_only.clone(), false)).await.expect("retry");
    assert_eq!((report.matched, report.acted, report.failed), (2, 2, 0), "{report:?}");
    for id in &failed {
        assert_eq!(state(&h, *id).await, TaskState::Running);
    }
    // The retried steps run and their tasks complete.
    for _ in 0..2 {
        let c = h.claim_one("s").await;
        h.complete("s", &c, json!({})).await;
    }
    for id in &failed {
        assert_eq!(state(&h, *id).await, TaskState::Completed);
    }
}

pub async fn the_limit_caps_the_tasks_and_failures_are_listed_up_to_a_bound<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let mut ids = Vec::new();
    for i in 0..(MAX_BULK_FAILURES + 5) {
        ids.push(h.submit(&format!("n-{i:03}"), "one", 0).await);
    }
    // A retry of running tasks: every one refuses.
    let report = h.store.bulk_operate(bulk(BulkCommand::Retry, prefix("n-"), false)).await.expect("retry");
    assert_eq!(report.failed, ids.len() as u64);
    assert_eq!(report.acted, 0);
    assert_eq!(report.failures.len(), MAX_BULK_FAILURES, "listed up to the bound, counted in full");
    let listed: Vec<TaskId> = report.failures.iter().map(|f| f.task_id).collect();
    assert_eq!(listed, ids[..MAX_BULK_FAILURES], "the first by id");

    // The oldest `limit` tasks only, and word that more matched.
    let two = BulkOperate { limit: 2, ..bulk(BulkCommand::Cancel, prefix("n-"), false) };
    let report = h.store.bulk_operate(two).await.expect("cancel two");
    assert_eq!((report.matched, report.more, report.acted), (2, true, 2));
    assert_eq!(state(&h, ids[0]).await, TaskState::Cancelled);
    assert_eq!(state(&h, ids[1]).await, TaskState::Cancelled);
    assert_eq!(state(&h, ids[2]).await, TaskState::Running);
    let exact = BulkOperate { limit: 3, ..bulk(BulkCommand::Cancel, prefix("n-00"), true) };
    let report = h.store.bulk_operate(exact).await.expect("dry run");
    assert_eq!((report.matched, report.more), (3, true), "n-000..n-009 match: {report:?}");
    let fits = BulkOperate { limit: 10, ..bulk(BulkCommand::Cancel, prefix("n-00"), true) };
    assert!(!h.store.bulk_operate(fits).await.expect("dry run").more, "exactly the limit: no more");

    let before = h.snapshot().await;
    for bad in [
        BulkOperate { limit: 0, ..bulk(BulkCommand::Cancel, prefix("n-"), false) },
        BulkOperate { limit: MAX_BULK_TASKS + 1, ..bulk(BulkCommand::Cancel, prefix("n-"), false) },
        BulkOperate { actor: String::new(), ..bulk(BulkCommand::Cancel, prefix("n-"), false) },
        BulkOperate { reason: "nul\0".into(), ..bulk(BulkCommand::Cancel, prefix("n-"), false) },
        bulk(BulkCommand::Cancel, prefix("n-\n"), false),
    ] {
        let r = h.store.bulk_operate(bad.clone()).await;
        assert!(matches!(r, Err(StoreError::InvalidInput(_))), "{bad:?}: {r:?}");
    }
    assert_eq!(h.snapshot().await, before, "refused calls change nothing");
}
