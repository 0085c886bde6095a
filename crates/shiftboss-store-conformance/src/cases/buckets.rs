//! Load-balance buckets and live schedulers (M3): tasks and their steps carry the bucket of their
//! key, claims can be limited to a set of buckets, and heartbeats tell schedulers who is alive.

use crate::Fixture;
use crate::support::*;
use shiftboss_core::buckets::{BUCKETS, Member, bucket_of};
use shiftboss_store::{ClaimDueSteps, Heartbeat, ReplyOutcome, Store};
use std::collections::HashSet;

pub async fn tasks_and_steps_carry_the_bucket_of_their_key<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let keys: Vec<String> = (0..40).map(|i| format!("order-{i}")).collect();
    for k in &keys {
        let id = h.submit(k, "three", 0).await;
        let d = h.task(id).await;
        assert_eq!(d.task.bucket, bucket_of(k), "{k}");
        assert!(d.task.bucket < BUCKETS);
        assert_eq!(d.steps[0].bucket, d.task.bucket);
    }
    // The next step of a task keeps the task's bucket.
    let c = h.claim_one("sched").await;
    assert!(matches!(h.complete("sched", &c, serde_json::json!({})).await, ReplyOutcome::Applied { .. }));
    let d = h.task(c.task_id).await;
    assert_eq!(d.steps.len(), 2);
    assert_eq!(d.steps[1].bucket, d.task.bucket);
    let used: HashSet<u16> = keys.iter().map(|k| bucket_of(k)).collect();
    assert!(used.len() > 20, "keys spread over buckets");
}

pub async fn claims_take_only_the_buckets_asked_for<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let mut buckets_of_tasks = Vec::new();
    for i in 0..30 {
        let k = format!("order-{i}");
        h.submit(&k, "one", 0).await;
        buckets_of_tasks.push(bucket_of(&k));
    }
    let mine: Vec<u16> = buckets_of_tasks.iter().copied().filter(|b| b % 2 == 0).collect();
    let want = mine.len();
    assert!(want > 0 && want < 30, "the keys fall on both sides");
    let claim = |buckets: Option<Vec<u16>>| ClaimDueSteps {
        instance: id("sched"),
        limit: 100,
        agents: vec![WORKER.into()],
        buckets,
        domains: vec![],
        limits: vec![],
    };
    // An empty set claims nothing.
    assert!(h.store.claim_due_steps(claim(Some(vec![]))).await.unwrap().is_empty());
    let even: Vec<u16> = (0..BUCKETS).filter(|b| b % 2 == 0).collect();
    let got = h.store.claim_due_steps(claim(Some(even))).await.unwrap();
    assert_eq!(got.len(), want);
    for c in &got {
        let d = h.task(c.task_id).await;
        assert_eq!(d.task.bucket % 2, 0, "claimed a step outside the buckets asked for");
    }
    // No filter: the rest.
    assert_eq!(h.store.claim_due_steps(claim(None)).await.unwrap().len(), 30 - want);
}

pub async fn heartbeats_list_the_live_schedulers<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let beat = |instance: &str, weight: u32, ttl_ms: u64| Heartbeat { instance: id(instance), weight, ttl: ms(ttl_ms) };
    let m = |i: &str, w: u32| Member { instance: i.into(), weight: w };

    assert_eq!(h.store.heartbeat(beat("b", 1, 1000)).await.unwrap(), vec![m("b", 1)]);
    assert_eq!(h.store.heartbeat(beat("a", 3, 5000)).await.unwrap(), vec![m("a", 3), m("b", 1)], "ordered by id");
    // A heartbeat updates the weight, and a weight of 0 counts as 1.
    assert_eq!(h.store.heartbeat(beat("b", 0, 1000)).await.unwrap(), vec![m("a", 3), m("b", 1)]);

    // b falls silent: once its ttl passes it is no longer live.
    h.advance(ms(1000));
    assert_eq!(h.store.heartbeat(beat("a", 3, 5000)).await.unwrap(), vec![m("a", 3)]);
    // It comes back.
    assert_eq!(h.store.heartbeat(beat("b", 2, 1000)).await.unwrap(), vec![m("a", 3), m("b", 2)]);
    // a signs off: gone at once.
    h.store.sign_off(&id("a")).await.unwrap();
    assert_eq!(h.store.heartbeat(beat("b", 2, 1000)).await.unwrap(), vec![m("b", 2)]);
    // Signing off twice, or for an unknown instance, is not an error.
    h.store.sign_off(&id("a")).await.unwrap();
    h.store.sign_off(&id("nobody")).await.unwrap();
}
