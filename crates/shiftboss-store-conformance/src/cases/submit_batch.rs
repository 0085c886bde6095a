//! submit_tasks: many submissions in one transaction, each as submit_task writes it and each
//! idempotent by its key; results in input order; all or nothing.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::{Archive, MAX_SUBMIT_BATCH, Store, StoreError, Submitted, event_kind as ev};
use std::time::Duration;

pub async fn a_batch_writes_each_task_as_a_submission_does_in_order<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    // A key whose task is archived stays taken.
    let archived = h.submit("archived", "one", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({})).await;
    let leader = h.elect("archiver", "a1", secs(3600)).await.unwrap();
    let report = h.store.archive(Archive { leader, after: Duration::ZERO, keep: None, limit: 1000 }).await.unwrap();
    assert_eq!(report.tasks, 1);
    assert!(h.store.get_archived_task(archived).await.unwrap().is_some());
    let live = h.submit("live", "one", 0).await;

    let batch = vec![
        submit_params("b-1", "one", 2),
        submit_params("live", "one", 0),
        submit_params("b-2", "three", 0),
        submit_params("b-1", "one", 2),
        submit_params("archived", "one", 0),
    ];
    let got = h.store.submit_tasks(batch).await.expect("batch");
    assert_eq!(got.len(), 5, "one result per task");
    let (b1, b2) = (got[0].task_id, got[2].task_id);
    assert!(got[0].created && got[2].created && b1 != b2);
    assert!(b1 < b2, "tasks are created in the batch's order");
    assert_eq!(got[1], Submitted { task_id: live, created: false });
    assert_eq!(got[3], Submitted { task_id: b1, created: false }, "a key given twice is one task");
    assert_eq!(got[4], Submitted { task_id: archived, created: false });

    for (id, key, workflow, priority) in [(b1, "b-1", "one", 2), (b2, "b-2", "three", 0)] {
        let d = h.task(id).await;
        assert_eq!((d.task.key.as_str(), d.task.workflow.as_str()), (key, workflow));
        assert_eq!((d.task.state, d.task.priority, d.task.created_at), (TaskState::Running, priority, T0));
        assert_eq!(d.task.input, json!({"order": key}));
        assert_eq!(d.steps.len(), 1, "{key}: its first step only");
        assert_eq!((d.steps[0].state, d.steps[0].due_at, d.steps[0].priority), (StepState::Pending, T0, priority));
        assert_eq!(count(&d.events, ev::TASK_RECEIVED), 1, "{key}");
        assert_eq!(step_events(&d.events, d.steps[0].id, ev::STEP_SCHEDULED).count(), 1, "{key}");
    }
    // Their steps are claimable like any submission's (with `live`'s, pending since before).
    let claimed: Vec<_> = h.claim("s", &[WORKER], 10).await.into_iter().map(|c| c.task_id).collect();
    assert_eq!(claimed.len(), 3);
    assert!(claimed.contains(&b1) && claimed.contains(&b2) && claimed.contains(&live), "{claimed:?} {b1} {b2} {live}");
    // The same batch again changes nothing and gives the same tasks back.
    let before = h.snapshot().await;
    let again = h
        .store
        .submit_tasks(vec![submit_params("b-1", "one", 2), submit_params("b-2", "three", 0)])
        .await
        .expect("again");
    assert_eq!(again, vec![Submitted { task_id: b1, created: false }, Submitted { task_id: b2, created: false }]);
    assert_eq!(h.snapshot().await, before);
    assert_eq!(h.store.submit_tasks(Vec::new()).await.expect("empty batch"), Vec::new());
}

pub async fn a_conflicting_key_rejects_the_whole_batch<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.submit("existing", "one", 0).await;
    let before = h.snapshot().await;
    let summary = h.store.summarize().await.expect("summarize");

    let mut other_input = submit_params("existing", "one", 0);
    other_input.input = json!({"something": "else"});
    let mut twice_other = submit_params("twice", "one", 0);
    twice_other.input = json!({"something": "else"});
    let cases = [
        ("a key that names a task with another input", "existing", other_input),
        ("a key given twice with other inputs", "twice", twice_other),
    ];
    for (what, key, bad) in cases {
        let batch = vec![
            submit_params("new-1", "one", 0),
            submit_params("twice", "one", 0),
            bad,
            submit_params("new-2", "one", 0),
        ];
        match h.store.submit_tasks(batch).await {
            Err(StoreError::Conflict(m)) => assert!(m.contains(key), "{what}: {m}"),
            other => panic!("{what}: want Conflict, got {other:?}"),
        }
        for k in ["new-1", "new-2", "twice"] {
            assert_eq!(h.store.find_task_by_key(k).await.expect("find"), None, "{what}: {k} was not kept");
        }
        assert_eq!(h.snapshot().await, before, "{what}: nothing was written");
        assert_eq!(h.store.summarize().await.expect("summarize"), summary, "{what}");
    }
}

pub async fn an_invalid_task_is_named_by_its_index_and_nothing_is_written<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let before = h.snapshot().await;

    let mut array_input = submit_params("k-bad", "one", 0);
    array_input.input = json!([1]);
    let mut unknown_version = submit_params("k-bad", "one", 0);
    unknown_version.version = Some(9);
    let cases = [
        ("task 1", array_input),
        ("task 1", submit_params("", "one", 0)),
        ("task 1", submit_params("k-bad", "no-such-workflow", 0)),
        ("task 1", unknown_version),
    ];
    for (index, bad) in cases {
        let batch = vec![submit_params("k-0", "one", 0), bad, submit_params("k-2", "one", 0)];
        match h.store.submit_tasks(batch).await {
            Err(StoreError::InvalidInput(m)) => assert!(m.contains(index), "{m}"),
            other => panic!("want InvalidInput naming {index}, got {other:?}"),
        }
        assert_eq!(h.store.find_task_by_key("k-0").await.expect("find"), None);
        assert_eq!(h.snapshot().await, before, "nothing was written");
    }
    let too_many = (0..=MAX_SUBMIT_BATCH).map(|i| submit_params(&format!("k-{i}"), "one", 0)).collect();
    match h.store.submit_tasks(too_many).await {
        Err(StoreError::InvalidInput(m)) => assert!(m.contains(&MAX_SUBMIT_BATCH.to_string()), "{m}"),
        other => panic!("want InvalidInput for an oversized batch, got {other:?}"),
    }
    assert_eq!(h.snapshot().await, before);
}

/// Tasks whose first decide writes more than one row (a fork and its branches, a sub-workflow and
/// its child task) run as they do when submitted one by one.
pub async fn a_batch_of_control_steps_runs_to_the_end<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "pair", "steps": [
        {"name": "both", "kind": "fork", "branches": [
            [{"name": "a", "agent": WORKER}], [{"name": "b", "agent": WORKER}], [{"name": "c", "agent": WORKER}]
        ]},
        {"name": "after", "agent": WORKER}
    ]})))
    .await;
    h.register(&def(json!({"name": "parent", "steps": [
        {"name": "child", "kind": "sub_workflow", "workflow": "one"},
        {"name": "last", "agent": WORKER}
    ]})))
    .await;
    let batch: Vec<_> = (0..4)
        .map(|i| submit_params(&format!("pair-{i}"), "pair", 0))
        .chain((0..3).map(|i| submit_params(&format!("parent-{i}"), "parent", 0)))
        .collect();
    let got = h.store.submit_tasks(batch).await.expect("batch");
    assert!(got.iter().all(|s| s.created));
    for s in &got[..4] {
        let d = h.task(s.task_id).await;
        let names: Vec<&str> = d.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["both", "a", "b", "c"], "rows in creation order");
        let ids: Vec<_> = d.steps.iter().map(|s| s.id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids follow creation: {ids:?}");
        assert_eq!(step_events(&d.events, d.steps[1].id, ev::STEP_SCHEDULED).count(), 1);
    }
    // Every agent step of every task runs: the fork's branches, the children's steps, then what
    // follows each.
    for _ in 0..4 {
        for c in h.claim_all("s").await {
            h.complete("s", &c, json!({"ok": true})).await;
        }
    }
    for s in &got {
        let d = h.task(s.task_id).await;
        assert_eq!(d.task.state, TaskState::Completed, "{}: {:#?}", d.task.key, d.steps);
    }
    assert!(h.claim_all("s").await.is_empty());
}
