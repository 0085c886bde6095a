//! The archiver (leader-only): finished tasks move to history with their children, steps and
//! events once they are old enough; live work and recent finishes stay; history past its
//! retention time is deleted.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::TaskState;
use shiftboss_store::*;
use std::time::Duration;

fn archive(leader: &LeaderTerm, after: Duration, keep: Option<Duration>) -> Archive {
    Archive { leader: leader.clone(), after, keep, limit: 1000 }
}

pub async fn requires_a_live_leader_term<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let leader = h.elect("archiver", "a1", secs(10)).await.unwrap();
    h.advance(secs(11));
    let got = h.store.archive(archive(&leader, Duration::ZERO, None)).await;
    assert!(matches!(got, Err(StoreError::NotLeader(_))), "{got:?}");
}

pub async fn the_archiver_leaves_live_work_and_recent_finishes_alone<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let claimed = h.submit("claimed", "one", 0).await;
    let held = h.claim_one("s").await; // processing, held by "s"
    let done = h.submit("done", "one", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({})).await;
    // A step no claim below takes: it stays pending.
    h.register(&def(json!({"name": "other", "steps": [{"name": "a", "agent": "other"}]}))).await;
    let running = h.submit("running", "other", 0).await;
    let paused = h.submit("paused", "one", 0).await;
    h.operate(paused, TaskCommand::Pause).await;
    h.advance(secs(30));
    let recent = h.submit("recent", "one", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({})).await;

    let live_before: Vec<TaskDetail> =
        vec![h.task(running).await, h.task(claimed).await, h.task(paused).await, h.task(recent).await];
    let leader = h.elect("archiver", "a1", secs(3600)).await.unwrap();
    // Only `done` finished 30 s ago; `recent` finished just now.
    let report = h.store.archive(archive(&leader, secs(20), None)).await.unwrap();
    assert_eq!(report.tasks, 1);
    assert_eq!(report.steps, 1);
    assert!(report.events >= 4, "received, scheduled, claimed, processed, completed, archived: {report:?}");
    assert!(h.store.get_task(done).await.unwrap().is_none());
    let old = h.store.get_archived_task(done).await.unwrap().expect("in history");
    assert_eq!((old.task.state, old.steps.len()), (TaskState::Completed, 1));
    assert_eq!(old.events.last().map(|e| e.kind.as_str()), Some(event_kind::TASK_ARCHIVED));
    assert_eq!(old.events.len() as u64, report.events);
    assert_eq!(h.store.find_archived_task_by_key("done").await.unwrap().map(|t| t.id), Some(done));
    assert!(h.store.get_archived_task(running).await.unwrap().is_none(), "live tasks are not in history");
    for before in live_before {
        assert_eq!(h.task(before.task.id).await, before, "task {} was left as it was", before.task.key);
    }
    // The held step's reply still lands: the archiver took nothing from under its lease.
    let out = h.complete("s", &held, json!({})).await;
    assert!(matches!(out, ReplyOutcome::Applied { task_state: TaskState::Completed, .. }), "{out:?}");
    assert_eq!(h.store.archive(archive(&leader, secs(20), None)).await.unwrap().tasks, 0, "nothing else is old enough");
    h.advance(secs(21));
    assert_eq!(h.store.archive(archive(&leader, secs(20), None)).await.unwrap().tasks, 2, "recent and claimed");
    assert!(h.task(running).await.task.state == TaskState::Running);
}

pub async fn a_parent_moves_with_its_children_and_history_is_purged_after_keep<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "parent", "steps": [
        {"name": "child", "kind": "sub_workflow", "workflow": "one"}
    ]})))
    .await;
    let parent = h.submit("p", "parent", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({"ok": 1})).await;
    assert_eq!(h.task(parent).await.task.state, TaskState::Completed);
    let child = c.task_id;
    assert_ne!(child, parent);
    let leader = h.elect("archiver", "a1", secs(3600)).await.unwrap();
    let report = h.store.archive(archive(&leader, Duration::ZERO, Some(secs(60)))).await.unwrap();
    assert_eq!((report.tasks, report.purged), (2, 0), "the parent and its child: {report:?}");
    assert!(h.store.get_task(child).await.unwrap().is_none());
    assert!(h.store.find_task_by_key("p").await.unwrap().is_none());
    // The key stays taken while the history keeps it...
    let s = h.store.submit_task(submit_params("p", "parent", 0)).await.unwrap();
    assert_eq!((s.task_id, s.created), (parent, false));
    h.advance(secs(61));
    let report = h.store.archive(archive(&leader, Duration::ZERO, Some(secs(60)))).await.unwrap();
    assert_eq!(report.purged, 2, "{report:?}");
    // ...and is free again once the history is gone.
    let s = h.store.submit_task(submit_params("p", "parent", 0)).await.unwrap();
    assert!(s.created && s.task_id != parent);
}

pub async fn an_operator_archives_one_finished_task_at_once<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let done = h.submit("done", "one", 0).await;
    let c = h.claim_one("s").await;
    h.complete("s", &c, json!({})).await;
    let live = h.submit("live", "one", 0).await;
    let ask = |task_id| ArchiveTask { task_id, actor: "ann".into() };

    let before = h.task(live).await;
    assert!(matches!(h.store.archive_task(ask(live)).await, Err(StoreError::Conflict(_))), "a running task stays");
    assert_eq!(h.task(live).await, before, "and is left as it was");
    let unknown = shiftboss_core::TaskId(live.0 + 1_000_000);
    assert!(matches!(h.store.archive_task(ask(unknown)).await, Err(StoreError::NotFound { .. })));
    let bad = ArchiveTask { task_id: done, actor: String::new() };
    assert!(matches!(h.store.archive_task(bad).await, Err(StoreError::InvalidInput(_))));

    // No leader term needed, and no wait: it finished a moment ago.
    let report = h.store.archive_task(ask(done)).await.expect("archived");
    assert_eq!((report.tasks, report.steps), (1, 1));
    assert!(h.store.get_task(done).await.unwrap().is_none());
    let old = h.store.get_archived_task(done).await.unwrap().expect("in history");
    let last = old.events.last().expect("events");
    assert_eq!((last.kind.as_str(), last.actor.as_str()), (event_kind::TASK_ARCHIVED, "ann"));
    assert!(matches!(h.store.archive_task(ask(done)).await, Err(StoreError::NotFound { .. })), "gone already");
}
