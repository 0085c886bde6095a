//! The reads the HTTP API pages through (issue 16): tasks by key prefix and time ranges, with
//! history on request, and one task's events a page at a time.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::model::EventRecord;
use shiftboss_core::{TaskId, TaskState, Timestamp};
use shiftboss_store::*;

/// The ids of a listing.
async fn ids<S: Store>(h: &Harness<S>, p: ListTasks) -> Vec<TaskId> {
    h.store.list_tasks(p).await.expect("list").into_iter().map(|t| t.id).collect()
}

fn filter(f: TaskFilter) -> ListTasks {
    ListTasks { filter: f, limit: 100, ..ListTasks::default() }
}

pub async fn list_tasks_by_key_prefix_and_time_ranges<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    // One second apart: a at T0, b at T0+1s, ...
    let keys = ["order-1", "order-10", "order-2", "orders", "order", "ordeR-3", "invoice-1", "order-\u{e9}"];
    let mut made = Vec::new();
    for k in keys {
        made.push((k, h.submit(k, "one", 0).await, h.now()));
        h.advance(secs(1));
    }
    let id = |k: &str| made.iter().find(|(key, ..)| *key == k).unwrap().1;
    let newest_first = |ks: &[&str]| {
        let mut v: Vec<TaskId> = ks.iter().map(|k| id(k)).collect();
        v.sort_by(|a, b| b.cmp(a));
        v
    };
    let prefix = |p: &str| filter(TaskFilter { key_prefix: Some(p.into()), ..TaskFilter::default() });

    assert_eq!(ids(&h, prefix("order-")).await, newest_first(&["order-1", "order-10", "order-2", "order-\u{e9}"]));
    assert_eq!(ids(&h, prefix("order-1")).await, newest_first(&["order-1", "order-10"]));
    assert_eq!(ids(&h, prefix("order")).await.len(), 6, "order, orders and order-*, not ordeR-3");
    assert_eq!(ids(&h, prefix("ordeR")).await, newest_first(&["ordeR-3"]), "case sensitive");
    assert_eq!(ids(&h, prefix("order-\u{e9}")).await, newest_first(&["order-\u{e9}"]));
    assert_eq!(ids(&h, prefix("%")).await, vec![], "no wildcard");
    assert_eq!(ids(&h, prefix("order_1")).await, vec![], "no wildcard");
    assert_eq!(ids(&h, prefix("")).await.len(), keys.len(), "an empty prefix matches every key");
    let bad = h.store.list_tasks(prefix("a\0")).await;
    assert!(matches!(bad, Err(StoreError::InvalidInput(_))), "{bad:?}");

    // Submission time: from is in, to is out.
    let at = |k: &str| made.iter().find(|(key, ..)| *key == k).unwrap().2;
    let created = |from: Option<Timestamp>, to: Option<Timestamp>| {
        filter(TaskFilter { created_from: from, created_to: to, ..TaskFilter::default() })
    };
    assert_eq!(ids(&h, created(Some(at("order-2")), Some(at("order")))).await, newest_first(&["order-2", "orders"]));
    assert_eq!(ids(&h, created(Some(at("invoice-1")), None)).await, newest_first(&["invoice-1", "order-\u{e9}"]));
    assert_eq!(ids(&h, created(None, Some(at("order-10")))).await, newest_first(&["order-1"]));
    assert_eq!(ids(&h, created(Some(at("order")), Some(at("order")))).await, vec![], "an empty range");

    // Last change: complete order-1 and order-2 late; only they moved after the submissions.
    h.advance(secs(10));
    let moved_at = h.now();
    for _ in 0..2 {
        let c = h.claim_one("s").await;
        h.complete("s", &c, json!({})).await;
    }
    let updated = |from: Option<Timestamp>, to: Option<Timestamp>| {
        filter(TaskFilter { updated_from: from, updated_to: to, ..TaskFilter::default() })
    };
    let done = ids(&h, updated(Some(moved_at), None)).await;
    assert_eq!(done.len(), 2, "the two tasks completed at {moved_at}: {done:?}");
    let completed = filter(TaskFilter { state: Some(TaskState::Completed), ..TaskFilter::default() });
    assert_eq!(ids(&h, completed).await, done);
    assert_eq!(ids(&h, updated(None, Some(moved_at))).await.len(), keys.len() - 2);

    // Every filter at once, and paging under it.
    let all = TaskFilter {
        correlation_id: None,
        state: Some(TaskState::Running),
        workflow: Some("one".into()),
        key_prefix: Some("order".into()),
        created_from: Some(at("order-10")),
        created_to: Some(moved_at),
        updated_from: Some(T0),
        updated_to: Some(moved_at),
    };
    let want: Vec<TaskId> = ids(&h, filter(all.clone())).await;
    assert!(!want.is_empty() && want.len() < keys.len(), "{want:?}");
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let page = ids(&h, ListTasks { filter: all.clone(), before, limit: 2, include_archived: false }).await;
        if page.is_empty() {
            break;
        }
        before = page.last().copied();
        paged.extend(page);
        assert!(paged.len() <= want.len(), "paging does not end");
    }
    assert_eq!(paged, want);
}

pub async fn list_tasks_includes_history_on_request<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let old = h.submit("old-1", "one", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({})).await;
    let older = h.submit("old-0", "one", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({})).await;
    h.advance(secs(60));
    let leader = h.elect("archiver", "a1", secs(3600)).await.expect("leader");
    let report = h.store.archive(Archive { leader, after: secs(30), keep: None, limit: 100 }).await.expect("archive");
    assert_eq!(report.tasks, 2);
    let live = h.submit("new-1", "one", 0).await;

    let all = ListTasks { include_archived: true, limit: 100, ..ListTasks::default() };
    let got = h.store.list_tasks(all.clone()).await.expect("list");
    let flags: Vec<_> = got.iter().map(|t| (t.id, t.archived)).collect();
    assert_eq!(flags, vec![(live, false), (older, true), (old, true)], "newest first across both tables");
    assert_eq!(ids(&h, ListTasks::default()).await, vec![live], "live only by default");
    let archived = h.store.get_archived_task(old).await.expect("get").expect("in history");
    assert!(archived.task.archived);
    assert_eq!(got[2], archived.task, "the same record either way");
    assert!(!h.task(live).await.task.archived);

    // Filters and paging apply to history alike.
    let page = ListTasks { limit: 2, ..all.clone() };
    assert_eq!(ids(&h, page.clone()).await, vec![live, older]);
    assert_eq!(ids(&h, ListTasks { before: Some(older), ..page }).await, vec![old]);
    let prefix = TaskFilter { key_prefix: Some("old-".into()), ..TaskFilter::default() };
    assert_eq!(ids(&h, ListTasks { filter: prefix, ..all.clone() }).await, vec![older, old]);
    let done = TaskFilter { state: Some(TaskState::Completed), ..TaskFilter::default() };
    assert_eq!(ids(&h, ListTasks { filter: done, ..all }).await, vec![older, old]);
}

pub async fn task_events_come_a_page_at_a_time_live_or_archived<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("t", "three", 0).await;
    let other = h.submit("u", "one", 0).await;
    for _ in 0..4 {
        let c = h.claim_one("s").await;
        h.complete("s", &c, json!({})).await;
    }
    let all = h.task(task).await.events;
    assert!(all.len() >= 8, "enough events to page: {}", all.len());
    let page_through = async |limit: u32| {
        let mut got: Vec<EventRecord> = Vec::new();
        loop {
            let p = TaskEvents { task_id: task, after: got.last().map(|e| e.id), limit };
            let page = h.store.task_events(p).await.expect("events");
            assert!(page.len() <= limit as usize);
            if page.is_empty() {
                break got;
            }
            got.extend(page);
            // The archiver adds one event of its own.
            assert!(got.len() <= all.len() + 1, "paging does not end");
        }
    };
    assert_eq!(page_through(3).await, all, "pages of 3 make up the whole log, in order");
    assert_eq!(page_through(1000).await, all);
    assert!(all.iter().all(|e| e.task_id == task), "only its own events");
    let first = h.store.task_events(TaskEvents { task_id: task, after: None, limit: 2 }).await.expect("events");
    assert_eq!(first, all[..2]);
    let unknown = TaskEvents { task_id: TaskId(987_654), after: None, limit: 10 };
    assert!(h.store.task_events(unknown).await.expect("events").is_empty());
    let too_many = TaskEvents { task_id: task, after: None, limit: MAX_EVENT_PAGE + 1 };
    assert!(matches!(h.store.task_events(too_many).await, Err(StoreError::InvalidInput(_))));
    // The head: the task and its steps as `get_task` gives them, and only the first events.
    let whole = h.task(task).await;
    let head = h.store.get_task_head(task, false, 3).await.expect("head").expect("live");
    assert_eq!((&head.task, &head.steps, &head.events[..]), (&whole.task, &whole.steps, &all[..3]));
    assert!(h.store.get_task_head(task, false, 0).await.expect("head").expect("live").events.is_empty());
    assert!(h.store.get_task_head(task, true, 3).await.expect("head").is_none(), "not in history yet");
    assert!(h.store.get_task_head(TaskId(987_654), false, 3).await.expect("head").is_none());

    // Archived: read from history, the archiver's own event last.
    h.advance(secs(60));
    let leader = h.elect("archiver", "a1", secs(3600)).await.expect("leader");
    h.store.archive(Archive { leader, after: secs(30), keep: None, limit: 100 }).await.expect("archive");
    assert!(h.store.get_task(task).await.expect("get").is_none(), "moved to history");
    let archived = page_through(4).await;
    assert_eq!(archived[..all.len()], all[..], "the same events, then the archiver's");
    assert_eq!(archived.last().map(|e| e.kind.as_str()), Some(event_kind::TASK_ARCHIVED));
    assert!(h.store.get_task_head(task, false, 3).await.expect("head").is_none(), "not live any more");
    let head = h.store.get_task_head(task, true, 2).await.expect("head").expect("archived");
    assert!(head.task.archived);
    assert_eq!((head.steps.len(), &head.events[..]), (whole.steps.len(), &all[..2]));
    let u = TaskEvents { task_id: other, after: None, limit: 100 };
    assert!(h.store.task_events(u).await.expect("events").iter().all(|e| e.task_id == other));
}

pub async fn list_tasks_by_correlation_id_and_children_inherit_it<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "parent", "steps": [
        {"name": "child", "kind": "sub_workflow", "workflow": "one"}
    ]})))
    .await;
    let with = |key: &str, workflow: &str, correlation: Option<&str>| SubmitTask {
        correlation_id: correlation.map(str::to_owned),
        ..submit_params(key, workflow, 0)
    };
    let bad = with("bad", "one", Some(""));
    assert!(matches!(h.store.submit_task(bad).await, Err(StoreError::InvalidInput(_))), "an empty correlation id");
    let a = h.store.submit_task(with("a", "one", Some("order-7"))).await.unwrap().task_id;
    h.store.submit_task(with("b", "one", Some("order-8"))).await.unwrap();
    h.store.submit_task(with("c", "one", None)).await.unwrap();
    let p = h.store.submit_task(with("p", "parent", Some("order-7"))).await.unwrap().task_id;
    let by = |c: &str| ListTasks {
        filter: TaskFilter { correlation_id: Some(c.into()), ..TaskFilter::default() },
        include_archived: false,
        before: None,
        limit: 10,
    };
    let found = h.store.list_tasks(by("order-7")).await.unwrap();
    let keys: Vec<&str> = found.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["p/child/0", "p", "a"], "newest first, the sub-workflow's child with its parent's id");
    assert!(found.iter().all(|t| t.correlation_id.as_deref() == Some("order-7")));
    assert_eq!(h.task(a).await.task.correlation_id.as_deref(), Some("order-7"), "read back with the task");
    assert_eq!(h.task(p).await.task.correlation_id.as_deref(), Some("order-7"));
    assert!(h.store.list_tasks(by("order-9")).await.unwrap().is_empty());
    let one =
        TaskFilter { workflow: Some("one".into()), correlation_id: Some("order-7".into()), ..TaskFilter::default() };
    let found =
        h.store.list_tasks(ListTasks { filter: one, include_archived: false, before: None, limit: 10 }).await.unwrap();
    assert_eq!(found.len(), 2, "with the workflow's name: the child and a");
}
