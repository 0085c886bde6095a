//! register_workflow and get_workflow: a version is immutable once registered.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::{RegisterOutcome, Store, StoreError};

pub async fn same_definition_twice_is_unchanged<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let d = one_step();
    assert_eq!(h.store.register_workflow(&d).await.expect("first"), RegisterOutcome::Created);
    assert_eq!(h.store.register_workflow(&d).await.expect("second"), RegisterOutcome::Unchanged);
    // The same content written another way (a timeout in milliseconds, keys reordered) is the same definition.
    let respelled = def(json!({"steps": [
        {"timeout": 1000, "config": {"url": "http://svc/work"}, "agent": WORKER, "name": "work"}
    ], "version": 1, "name": "one"}));
    assert_eq!(h.store.register_workflow(&respelled).await.expect("respelled"), RegisterOutcome::Unchanged);
    assert_eq!(h.store.get_workflow("one", None).await.expect("get"), Some(d));
}

pub async fn same_version_with_other_content_conflicts<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let d = one_step();
    h.register(&d).await;
    let mut changed = d.clone();
    changed.steps[0].timeout = Some(secs(2));
    match h.store.register_workflow(&changed).await {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("want Conflict, got {other:?}"),
    }
    assert_eq!(h.store.get_workflow("one", Some(1)).await.expect("get"), Some(d), "the first content stays");
    // The way out the error suggests: a new version.
    changed.version = 2;
    assert_eq!(h.store.register_workflow(&changed).await.expect("v2"), RegisterOutcome::Created);
}

pub async fn invalid_definition_is_invalid_input<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    // Built without validation, as a caller that skipped WorkflowDef::from_json would.
    let bad: Vec<(&str, WorkflowDef)> = vec![
        ("no steps", serde_json::from_value(json!({"name": "bad", "steps": []})).unwrap()),
        (
            "bad name",
            serde_json::from_value(json!({"name": "has space", "steps": [{"name": "a", "agent": "x"}]})).unwrap(),
        ),
        (
            "duplicate step",
            serde_json::from_value(json!({"name": "bad", "steps": [
                {"name": "a", "agent": "x"}, {"name": "a", "agent": "x"}]}))
            .unwrap(),
        ),
        (
            "zero timeout",
            serde_json::from_value(json!({"name": "bad", "steps": [{"name": "a", "agent": "x", "timeout": 0}]}))
                .unwrap(),
        ),
        (
            "version 0",
            serde_json::from_value(json!({"name": "bad", "version": 0, "steps": [{"name": "a", "agent": "x"}]}))
                .unwrap(),
        ),
    ];
    for (what, d) in bad {
        match h.store.register_workflow(&d).await {
            Err(StoreError::InvalidInput(_)) => {}
            other => panic!("{what}: want InvalidInput, got {other:?}"),
        }
        assert_eq!(h.store.get_workflow(&d.name, None).await.expect("get"), None, "{what}: nothing registered");
    }
}

pub async fn get_workflow_returns_the_latest_or_the_named_version<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let version = |v: u32| {
        let mut d = one_step();
        d.version = v;
        d.steps[0].timeout = Some(secs(u64::from(v)));
        d
    };
    // Registered out of order: "latest" means the highest version, not the last registered.
    for v in [1, 3, 2] {
        h.register(&version(v)).await;
    }
    assert_eq!(h.store.get_workflow("one", None).await.expect("latest"), Some(version(3)));
    assert_eq!(h.store.get_workflow("one", Some(2)).await.expect("v2"), Some(version(2)));
    assert_eq!(h.store.get_workflow("one", Some(9)).await.expect("v9"), None);
    assert_eq!(h.store.get_workflow("nope", None).await.expect("unknown"), None);

    // A submission without a version runs the latest.
    let id = h.submit("k", "one", 0).await;
    assert_eq!(h.task(id).await.task.workflow_version, 3);
}
