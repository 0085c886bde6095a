//! What workers and the API keep beside the state (issue 17): a heartbeat's progress report on
//! the step (handed to its next attempt), a worker's log lines as `step.log` events, and the API's documents (Conductor's
//! task definitions and workflow sources).

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::LeaseToken;
use shiftboss_store::*;
use std::time::Duration;

pub async fn a_heartbeats_progress_is_kept_and_handed_to_the_next_attempt<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&def(json!({"name": "long", "steps": [
        {"name": "copy", "agent": WORKER, "timeout": "10s", "response_timeout": "2s"}
    ]})))
    .await;
    let task = h.submit("p1", "long", 0).await;
    let c = h.claim_one("s1").await;
    assert_eq!(h.step(task, c.id).await.progress, None, "none before a report");
    let beat = |progress| ExtendLease { step_id: c.id, lease_token: c.lease_token, progress };
    h.store.extend_lease(beat(Some(json!({"copied": 3, "of": 10})))).await.expect("heartbeat");
    assert_eq!(h.step(task, c.id).await.progress, Some(json!({"copied": 3, "of": 10})));
    h.store.extend_lease(beat(None)).await.expect("heartbeat");
    assert_eq!(h.step(task, c.id).await.progress, Some(json!({"copied": 3, "of": 10})), "a bare heartbeat keeps it");

    let stale = ExtendLease { step_id: c.id, lease_token: LeaseToken(c.lease_token.0 + 1), progress: Some(json!(9)) };
    assert!(matches!(h.store.extend_lease(stale).await, Err(StoreError::Conflict(_))));
    let huge = json!("x".repeat(MAX_PROGRESS_BYTES + 1));
    assert!(matches!(h.store.extend_lease(beat(Some(huge))).await, Err(StoreError::InvalidInput(_))));
    assert_eq!(h.step(task, c.id).await.progress, Some(json!({"copied": 3, "of": 10})), "refusals changed nothing");

    assert_eq!(c.progress, None, "a first attempt has nothing to go on from");

    // The lease lapses; the next claim gets the last report, to go on from where it stopped.
    let leader = h.supervisor().await;
    h.advance(secs(3));
    assert_eq!(h.expire(&leader, Default::default()).await.expect("sweep").retried, 1);
    h.advance(secs(3600));
    let again = h.claim_one("s2").await;
    assert_eq!(again.id, c.id);
    assert_eq!(again.progress, Some(json!({"copied": 3, "of": 10})), "the next attempt gets the last report");
    assert_eq!(h.step(task, c.id).await.progress, Some(json!({"copied": 3, "of": 10})), "and the step keeps it");
    // Its own report replaces it.
    let beat =
        ExtendLease { step_id: c.id, lease_token: again.lease_token, progress: Some(json!({"copied": 7, "of": 10})) };
    h.store.extend_lease(beat).await.expect("heartbeat");
    assert_eq!(h.step(task, c.id).await.progress, Some(json!({"copied": 7, "of": 10})));
}

pub async fn log_lines_are_step_events_in_order<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("l1", "one", 0).await;
    let c = h.claim_one("s1").await;
    let logs = |lines: &[&str]| StepLogs {
        step_id: c.id,
        actor: "worker:w1".into(),
        lines: lines.iter().map(|l| l.to_string()).collect(),
    };
    h.store.append_step_logs(logs(&["fetched the order", "charging 12.50"])).await.expect("logs");
    h.complete("s1", &c, json!({})).await;
    h.store.append_step_logs(logs(&["done"])).await.expect("a finished step takes lines too");

    let read = h.store.step_logs(c.id).await.expect("read");
    let lines: Vec<_> = read.iter().map(|e| e.detail["log"].as_str().unwrap_or_default()).collect();
    assert_eq!(lines, ["fetched the order", "charging 12.50", "done"]);
    assert!(read.iter().all(|e| e.kind == event_kind::STEP_LOG && e.task_id == task && e.actor == "worker:w1"));
    let in_log = h.task(task).await.events.iter().filter(|e| e.kind == event_kind::STEP_LOG).count();
    assert_eq!(in_log, 3, "the lines are the task's events");

    let before = h.task(task).await;
    let unknown = StepLogs { step_id: shiftboss_core::StepId(c.id.0 + 1_000_000), ..logs(&["x"]) };
    assert!(matches!(h.store.append_step_logs(unknown).await, Err(StoreError::NotFound { .. })));
    for bad in [logs(&[]), logs(&[&"x".repeat(step_logs::MAX_LOG_LINE_BYTES + 1)])] {
        assert!(matches!(h.store.append_step_logs(bad).await, Err(StoreError::InvalidInput(_))));
    }
    assert_eq!(h.task(task).await, before, "refusals wrote nothing");
    assert!(h.store.step_logs(shiftboss_core::StepId(c.id.0 + 1_000_000)).await.expect("read").is_empty());

    // Archived with its task, and still read by the step's id.
    let leader = h.elect("archiver", "a1", secs(3600)).await.expect("elected");
    h.advance(secs(60));
    let report =
        h.store.archive(Archive { leader, after: Duration::ZERO, keep: None, limit: 100 }).await.expect("archive");
    assert_eq!(report.tasks, 1);
    assert_eq!(h.store.step_logs(c.id).await.expect("read").len(), 3, "an archived step's lines");
}

pub async fn documents_are_kept_by_kind_and_name<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let s = &h.store;
    let (task, source) = (DocumentKind::TaskDef, DocumentKind::WorkflowSource);
    assert!(s.list_documents(task).await.expect("list").is_empty());
    s.put_documents(
        task,
        vec![("payment".into(), json!({"retryCount": 3})), ("email".into(), json!({"retryCount": 1}))],
    )
    .await
    .expect("put");
    s.put_documents(source, vec![("orders:1".into(), json!({"name": "orders"}))]).await.expect("put");
    let names: Vec<String> = s.list_documents(task).await.expect("list").into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["email", "payment"], "by name, this kind only");
    s.put_documents(task, vec![("payment".into(), json!({"retryCount": 5}))]).await.expect("replace");
    assert_eq!(s.get_document(task, "payment").await.expect("get"), Some(json!({"retryCount": 5})));
    assert_eq!(s.get_document(source, "payment").await.expect("get"), None, "kinds are apart");
    assert_eq!(s.get_document(source, "orders:1").await.expect("get"), Some(json!({"name": "orders"})));

    assert!(s.delete_document(task, "payment").await.expect("delete"));
    assert!(!s.delete_document(task, "payment").await.expect("delete again"), "gone already");
    assert_eq!(s.get_document(task, "payment").await.expect("get"), None);

    let long = "x".repeat(documents::MAX_DOCUMENT_NAME_LEN + 1);
    for bad in ["", "a\nb", long.as_str()] {
        let put = s.put_documents(task, vec![("ok".into(), json!(1)), (bad.into(), json!(1))]).await;
        assert!(matches!(put, Err(StoreError::InvalidInput(_))), "{bad:?} refused");
    }
    let big = json!("x".repeat(documents::MAX_DOCUMENT_BYTES));
    assert!(matches!(s.put_documents(task, vec![("big".into(), big)]).await, Err(StoreError::InvalidInput(_))));
    let names: Vec<String> = s.list_documents(task).await.expect("list").into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["email"], "refused puts wrote nothing");
}
