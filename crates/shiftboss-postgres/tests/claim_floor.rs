//! A claim of due steps that starts past the dead entries at the front of the due index (the
//! store's `claim_floor`) still takes every due step: a step due before the floor (written by a
//! transaction whose clock read is older than the margin) is taken at once by a claim that finds
//! nothing past the floor, and within about a second by one that finds something; and the steps
//! past the floor still go by priority, as do those of a burst too large to order from the floor.

mod common;

use common::{TestSchema, test_db};
use shiftboss_core::Timestamp;
use shiftboss_postgres::PostgresStore;
use shiftboss_store::*;
use shiftboss_store_conformance::support::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the writer of late steps stands: an hour behind the claimer's clock, as a transaction
/// that read its clock long before it committed.
const LATE: Timestamp = Timestamp(1_800_000_000_000);
const AHEAD: Timestamp = Timestamp(LATE.0 + 3_600_000);

async fn store(s: &TestSchema, at: Timestamp) -> (PostgresStore, Arc<ManualClock>) {
    let clock = ManualClock::new(at);
    let options = s.options(false);
    let store = PostgresStore::connect_with_clock(&s.url, &options, Clock::Manual(clock.clone())).await;
    (store.expect("connect"), clock)
}

/// The claimer's claim: its agent, at most `limit` steps; the keys of the tasks it took.
async fn claim(store: &PostgresStore, limit: u32) -> Vec<String> {
    let p = ClaimDueSteps {
        instance: id("claimer"),
        limit,
        agents: vec![WORKER.into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    let mut keys: Vec<String> =
        store.claim_due_work(p).await.expect("claim").steps.into_iter().map(|s| s.task_key).collect();
    keys.sort();
    keys
}

async fn submit(store: &PostgresStore, key: &str, priority: i32) {
    store.submit_task(submit_params(key, "one", priority)).await.expect("submit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_from_the_floor_passes_over_nothing_for_long() {
    let Some(url) = test_db() else { return };
    let schema = TestSchema::migrated(&url).await;
    let (claimer, clock) = store(&schema, AHEAD).await;
    let (late_writer, _) = store(&schema, LATE).await;
    claimer.register_workflow(&one_step()).await.unwrap();

    // A short claim: the next one starts from a floor a second before the claimer's time.
    submit(&claimer, "first", 0).await;
    assert_eq!(claim(&claimer, 10).await, ["first"]);

    // A step due an hour before that floor: the claim from the floor finds nothing, and the claim
    // looks from the front at once.
    submit(&late_writer, "late", 0).await;
    assert_eq!(claim(&claimer, 10).await, ["late"], "a step due before the floor was passed over");

    // A claim from the floor that finds something passes over a step due before it, and the next,
    // finding nothing past the floor, takes it from the front.
    submit(&late_writer, "late-2", 0).await;
    submit(&claimer, "fresh", 0).await;
    assert_eq!(claim(&claimer, 10).await, ["fresh"]);
    assert_eq!(claim(&claimer, 10).await, ["late-2"]);
    let front_read = Instant::now();

    // While every claim finds something past the floor, one starts from the front within about a
    // second all the same.
    submit(&late_writer, "late-3", 0).await;
    let started = Instant::now();
    for n in 0.. {
        submit(&claimer, &format!("fresh-{n}"), 0).await;
        let taken = claim(&claimer, 10).await;
        assert!(!taken.is_empty());
        if taken.contains(&"late-3".to_owned()) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the step due before the floor was never taken");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Not before: the claims from the floor passed it over until then.
    assert!(front_read.elapsed() >= Duration::from_millis(800), "taken before the front came round");

    // Past the floor, the highest priority goes first.
    submit(&claimer, "low", 0).await;
    submit(&claimer, "high", 7).await;
    assert_eq!(claim(&claimer, 1).await, ["high"]);
    assert_eq!(claim(&claimer, 1).await, ["low"]);

    // More due past the floor than a claim from it orders (a burst since the last claim, which
    // came up short): the claim reads from the front instead, by priority still.
    assert!(claim(&claimer, 10).await.is_empty());
    for batch in 0..9 {
        let tasks = (0..500).map(|i| submit_params(&format!("burst-{batch}-{i}"), "one", 0)).collect();
        claimer.submit_tasks(tasks).await.expect("submit a batch");
    }
    // Due after the burst: a read of the first 4,097 by due time would not see it.
    clock.advance(Duration::from_millis(1));
    submit(&claimer, "urgent", 9).await;
    assert_eq!(claim(&claimer, 1).await, ["urgent"]);
    assert_eq!(claim(&claimer, 10_000).await.len(), 4_500);
}
