//! Reads for operators, tools and the submitting application (P18).

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::{ListTasks, ReplyResult, Store, TaskFilter};

pub async fn get_task_and_find_by_key<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    assert_eq!(h.store.get_task(TaskId(987_654)).await.expect("get"), None);
    assert_eq!(h.store.find_task_by_key("order-1").await.expect("find"), None);
    let a = h.submit("order-1", "one", 0).await;
    let b = h.submit("order-2", "three", 0).await;
    let found = h.store.find_task_by_key("order-2").await.expect("find").expect("found");
    assert_eq!(found.id, b);
    let d = h.task(b).await;
    assert_eq!(d.task, found);
    assert!(d.steps.iter().all(|s| s.task_id == b) && d.events.iter().all(|e| e.task_id == b), "only its own rows");
    assert_ne!(h.task(a).await.task, found);
}

pub async fn list_tasks_filters_and_pages_newest_first<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let mut ids = Vec::new();
    // k1 and k3 get priority 1, so that they are claimed (and completed) first.
    for (key, workflow, priority) in [
        ("k0", "one", 0),
        ("k1", "one", 1),
        ("k2", "one", 0),
        ("k3", "one", 1),
        ("k4", "one", 0),
        ("t5", "three", 0),
        ("t6", "three", 0),
    ] {
        ids.push(h.submit(key, workflow, priority).await);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "task ids grow with submission: {ids:?}");
    for _ in 0..2 {
        let c = h.claim_one("sched-1").await;
        h.complete("sched-1", &c, json!({})).await;
    }
    let list = |state: Option<TaskState>, workflow: Option<&str>, before: Option<TaskId>, limit: u32| {
        let filter = TaskFilter { state, workflow: workflow.map(Into::into), ..TaskFilter::default() };
        let p = ListTasks { filter, before, limit, ..ListTasks::default() };
        async { h.store.list_tasks(p).await.expect("list").into_iter().map(|t| t.id).collect::<Vec<_>>() }
    };
    let newest_first = |idx: &[usize]| idx.iter().rev().map(|&i| ids[i]).collect::<Vec<_>>();

    assert_eq!(list(None, None, None, 100).await, newest_first(&[0, 1, 2, 3, 4, 5, 6]));
    assert_eq!(list(Some(TaskState::Completed), None, None, 100).await, newest_first(&[1, 3]));
    assert_eq!(list(Some(TaskState::Running), None, None, 100).await, newest_first(&[0, 2, 4, 5, 6]));
    assert_eq!(list(None, Some("three"), None, 100).await, newest_first(&[5, 6]));
    assert_eq!(list(Some(TaskState::Running), Some("one"), None, 100).await, newest_first(&[0, 2, 4]));
    assert_eq!(list(Some(TaskState::Failed), None, None, 100).await, vec![]);
    assert_eq!(list(None, None, None, 2).await, newest_first(&[5, 6]), "at most the limit");

    // Paging: each page starts below the last id of the one before.
    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = list(None, None, before, 3).await;
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 3);
        before = page.last().copied();
        pages.push(page);
        // A `before` that does not exclude the last row it names would page forever.
        assert!(pages.len() <= 3, "paging does not end: {pages:?}");
    }
    assert_eq!(pages.len(), 3);
    assert_eq!(pages.concat(), newest_first(&[0, 1, 2, 3, 4, 5, 6]));
    assert_eq!(list(Some(TaskState::Running), None, Some(ids[4]), 100).await, newest_first(&[0, 2]));
}

pub async fn summarize_counts<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let empty = h.store.summarize().await.expect("summarize");
    for s in TaskState::ALL {
        assert_eq!(empty.tasks_in(s), 0);
    }
    for s in StepState::ALL {
        assert_eq!(empty.steps_in(s), 0);
    }
    assert_eq!(
        (empty.expiries, empty.releases, empty.rejected_replies, empty.steps_retried, empty.recovered_after_expiry),
        (0, 0, 0, 0, 0)
    );
    assert!(empty.errors.is_empty());

    h.register_standard().await;
    let leader = h.supervisor().await;
    // t1: completed at the first try.
    h.submit("t1", "one", 0).await;
    let c = h.claim_one("sched-1").await;
    h.complete("sched-1", &c, json!({})).await;
    // t2: failed for good.
    h.submit("t2", "one", 0).await;
    let c = h.claim_one("sched-1").await;
    h.reply("sched-1", c.id, c.lease_token, ReplyResult::PermanentError("boom".into())).await;
    // t3: expired once, claimed again, completed; its first holder's late reply is rejected.
    h.submit("t3", "retrying", 0).await;
    let old = h.claim_one("sched-1").await;
    h.advance(secs(1) + ms(1));
    h.expire(&leader, RetryPolicies::default()).await.expect("expire");
    h.advance(ms(100));
    let new = h.claim_one("sched-2").await;
    h.complete("sched-1", &old, json!({})).await;
    h.complete("sched-2", &new, json!({})).await;
    // t4: claimed, then released by its restarted scheduler; t5: never claimed.
    h.submit("t4", "one", 0).await;
    h.claim_one("sched-3").await;
    h.release("sched-3", RetryPolicies::default()).await;
    h.submit("t5", "one", 0).await;

    let s = h.store.summarize().await.expect("summarize");
    let tasks: Vec<_> = TaskState::ALL.iter().map(|&t| s.tasks_in(t)).collect();
    assert_eq!(
        tasks,
        [2, 0, 0, 2, 1, 0, 0, 0],
        "running, paused, compensating, completed, failed, cancelled, compensated, terminated"
    );
    let mut counts = h.store.task_counts().await.expect("task_counts");
    counts.sort_by_key(|(t, _)| t.as_str());
    let mut want = s.tasks.clone();
    want.sort_by_key(|(t, _)| t.as_str());
    assert_eq!(counts, want, "task_counts agrees with summarize");
    let steps: Vec<_> = StepState::ALL.iter().map(|&t| s.steps_in(t)).collect();
    assert_eq!(steps, [2, 0, 2, 1, 0], "pending, processing, processed, error, cancelled");
    assert_eq!((s.expiries, s.releases, s.rejected_replies), (1, 1, 1));
    assert_eq!(s.steps_retried, 1, "only t3's step was claimed twice");
    assert_eq!(s.recovered_after_expiry, 1);
    assert_eq!(s.errors, vec![("boom".to_string(), 1)]);
}
