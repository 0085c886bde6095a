//! Running tasks without progress since a cutoff (P17's operator alert): oldest move first, and
//! never those that wait on purpose.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::Timestamp;
use shiftboss_store::*;

pub async fn running_tasks_without_progress_oldest_first_not_those_that_wait<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&def(json!({"name": "w", "steps": [{"name": "hold", "kind": "wait", "signal": "go"}]}))).await;
    let ids = |v: &[StalledTask]| v.iter().map(|s| s.task.id).collect::<Vec<_>>();

    // Claimed and never answered: its last move is its submission.
    let held = h.submit("held", "one", 0).await;
    let claimed = h.claim_one("s1").await;
    assert_eq!(claimed.task_id, held);
    let t0 = h.now();
    h.advance(secs(10));
    // Waits for a signal on purpose: never stalled, however long.
    let waiting = h.submit("waiting", "w", 0).await;
    assert_eq!(h.step_named(waiting, "hold").await.state, shiftboss_core::StepState::Processing);
    h.advance(secs(10));
    // Done: not running.
    h.submit("done", "one", 0).await;
    let c = h.claim_one("s1").await;
    h.complete("s1", &c, json!({})).await;
    // Never claimed.
    let queued = h.submit("queued", "one", 0).await;
    let t20 = h.now();
    h.advance(secs(10));

    let all = stalled(&h.store, h.now(), 100).await;
    assert_eq!(ids(&all), vec![held, queued], "oldest move first, without the waiting or ended task: {all:?}");
    assert!(all[0].since <= t0 && all[0].since <= all[1].since, "{all:?}");
    assert_eq!(all[1].since, t20, "a task's move is its last change: {all:?}");
    assert_eq!(all[0].task.key, "held");
    assert_eq!(
        ids(&stalled(&h.store, Timestamp(t20.0 - 1), 100).await),
        vec![held],
        "only what moved before the cutoff"
    );
    assert_eq!(ids(&stalled(&h.store, h.now(), 1).await), vec![held], "the limit takes the oldest");

    // A step of the held task ends: it moved, and is no longer stalled before that time.
    let reply = h.reply("s1", claimed.id, claimed.lease_token, ReplyResult::Completed(json!({}))).await;
    assert!(matches!(reply, ReplyOutcome::Applied { .. }), "{reply:?}");
    assert_eq!(ids(&stalled(&h.store, Timestamp(h.now().0 - 1), 100).await), vec![queued]);

    for limit in [0, MAX_STALLED + 1] {
        let bad = h.store.stalled_tasks(StalledTasks { cutoff: h.now(), limit }).await;
        assert!(matches!(bad, Err(StoreError::InvalidInput(_))), "limit {limit}: {bad:?}");
    }
}

async fn stalled<S: Store>(store: &S, cutoff: Timestamp, limit: u32) -> Vec<StalledTask> {
    store.stalled_tasks(StalledTasks { cutoff, limit }).await.expect("stalled tasks")
}
