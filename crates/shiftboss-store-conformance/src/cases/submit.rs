//! submit_task: the task, its first step and its `task.received` event in one transaction (P12,
//! P13); idempotent by key; bad input refused with nothing written.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::{MAX_INPUT_BYTES, MAX_TASK_KEY_LEN, Store, StoreError, Submitted, event_kind as ev};

pub async fn writes_task_first_step_and_received_event<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let id = h.submit("order-1", "one", 3).await;

    let d = h.task(id).await;
    assert_eq!(d.task.key, "order-1");
    assert_eq!((d.task.workflow.as_str(), d.task.workflow_version), ("one", 1));
    assert_eq!(d.task.state, TaskState::Running);
    assert_eq!(d.task.priority, 3);
    assert_eq!(d.task.input, json!({"order": "order-1"}));
    assert_eq!(d.task.output, None);
    assert_eq!(d.task.created_at, T0);

    // P13: a new step starts as LockedBy null, CompleteBy null, Pending, FailureCount 0; due at once.
    assert_eq!(d.steps.len(), 1, "only the first step is written");
    let s = &d.steps[0];
    assert_eq!((s.name.as_str(), s.agent.as_str()), ("work", WORKER));
    assert_eq!(s.state, StepState::Pending);
    assert_eq!((s.locked_by.as_deref(), s.complete_by), (None, None));
    assert_eq!((s.failure_count, s.attempts), (0, 0));
    assert_eq!(s.due_at, T0);
    assert_eq!(s.priority, 3, "a step inherits its task's priority");
    assert_eq!(s.input, d.task.input);
    assert_eq!(s.output, None);
    assert!(!s.idempotency_key.is_empty());
    assert_eq!(s.timeout, secs(1));

    assert_eq!(d.events.first().map(|e| e.kind.as_str()), Some(ev::TASK_RECEIVED), "the first event");
    let received = &d.events[0];
    assert_eq!((received.task_id, received.step_id, received.at), (id, None, T0));
    assert_eq!(received.level, EventLevel::Info);
    assert_eq!(received.actor, "app");
    assert_eq!(count(&d.events, ev::TASK_RECEIVED), 1);
    assert_eq!(step_events(&d.events, s.id, ev::STEP_SCHEDULED).count(), 1);

    let found = h.store.find_task_by_key("order-1").await.expect("find").expect("found by key");
    assert_eq!(found, d.task);
}

pub async fn same_key_twice_returns_the_same_task_and_adds_nothing<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let id = h.submit("order-1", "one", 0).await;
    let before = h.snapshot().await;
    let summary = h.store.summarize().await.expect("summarize");
    // Time moves, so that any rewrite of a row would show in its updated_at.
    h.advance(secs(5));

    let again = h.store.submit_task(submit_params("order-1", "one", 0)).await.expect("resubmit");
    assert_eq!(again, Submitted { task_id: id, created: false });
    // A key reused with other content is a caller's mistake: refused, not silently merged.
    let mut other_input = submit_params("order-1", "one", 0);
    other_input.input = json!({"something": "else"});
    let other_workflow = submit_params("order-1", "three", 0);
    for p in [other_input, other_workflow] {
        match h.store.submit_task(p).await {
            Err(StoreError::Conflict(m)) => assert!(m.contains("order-1"), "{m}"),
            other => panic!("want Conflict, got {other:?}"),
        }
    }

    assert_eq!(h.snapshot().await, before, "no task, step or event was added or changed");
    assert_eq!(h.store.summarize().await.expect("summarize"), summary);
}

pub async fn bad_input_changes_nothing<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.submit("existing", "one", 0).await;
    let before = h.snapshot().await;
    let summary = h.store.summarize().await.expect("summarize");

    let mut cases = Vec::new();
    cases.push(("unknown workflow", submit_params("k1", "no-such-workflow", 0)));
    let mut p = submit_params("k2", "one", 0);
    p.version = Some(9);
    cases.push(("unknown version", p));
    for (what, input) in [("array input", json!([1, 2])), ("string input", json!("x")), ("null input", json!(null))] {
        let mut p = submit_params("k3", "one", 0);
        p.input = input;
        cases.push((what, p));
    }
    cases.push(("empty key", submit_params("", "one", 0)));
    cases.push(("oversized key", submit_params(&"k".repeat(MAX_TASK_KEY_LEN + 1), "one", 0)));
    cases.push(("control character in key", submit_params("a\nb", "one", 0)));
    let mut p = submit_params("k4", "one", 0);
    p.input = json!({"blob": "x".repeat(MAX_INPUT_BYTES)});
    cases.push(("oversized input", p));

    for (what, p) in cases {
        let key = p.key.clone();
        match h.store.submit_task(p).await {
            Err(StoreError::InvalidInput(_)) => {}
            other => panic!("{what}: want InvalidInput, got {other:?}"),
        }
        if !key.is_empty() {
            assert_eq!(h.store.find_task_by_key(&key).await.expect("find"), None, "{what}");
        }
        assert_eq!(h.snapshot().await, before, "{what}: nothing was written");
        assert_eq!(h.store.summarize().await.expect("summarize"), summary, "{what}");
    }

    // The limit itself is allowed.
    h.submit(&"k".repeat(MAX_TASK_KEY_LEN), "one", 0).await;
}
