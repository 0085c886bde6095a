//! The supervisor with the store's clock under the test's control: no sleeps.

use serde_json::json;
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, StepState, Timestamp};
use shiftboss_engine::SupervisorConfig;
use shiftboss_engine::metrics::Metrics;
use shiftboss_engine::supervisor::Supervisor;
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{ClaimDueSteps, Clock, ManualClock, Store, SubmitTask};
use std::sync::Arc;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp(1_700_000_000_000));
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open_with_clock(dir.path().join("s.db"), &OpenOptions::default(), Clock::Manual(clock.clone()))
            .unwrap(),
    );
    let wf = WorkflowDef::from_json(r#"{"name":"w","steps":[{"name":"a","agent":"x","timeout":1000}]}"#).unwrap();
    store.register_workflow(&wf).await.unwrap();
    Fixture { _dir: dir, store, clock }
}

fn supervisor(f: &Fixture, name: &str, policy: RetryPolicy) -> Supervisor {
    let config =
        SupervisorConfig { interval: ms(100), batch: 2, leader_ttl: Duration::from_secs(10), ..Default::default() };
    let policies = Arc::new(RetryPolicies { default: policy, ..RetryPolicies::default() });
    Supervisor::new(f.store.clone(), InstanceId::new(name).unwrap(), config, policies, Arc::new(Metrics::default()))
}

/// Submits `n` tasks keyed `{prefix}{i}` and claims their steps, as a scheduler "sched" would.
async fn submit_and_claim_keyed(f: &Fixture, prefix: &str, n: usize) {
    for i in 0..n {
        let t = SubmitTask {
            correlation_id: None,
            domains: Default::default(),
            notify: None,
            key: format!("{prefix}{i}"),
            workflow: "w".into(),
            version: None,
            input: json!({}),
            priority: 0,
            actor: "test".into(),
        };
        f.store.submit_task(t).await.unwrap();
    }
    let p = ClaimDueSteps {
        instance: InstanceId::new("sched").unwrap(),
        limit: 100,
        agents: vec!["x".into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    assert_eq!(f.store.claim_due_work(p).await.unwrap().steps.len(), n);
}

async fn submit_and_claim(f: &Fixture, n: usize) {
    submit_and_claim_keyed(f, "t", n).await;
}

#[tokio::test]
async fn the_interval_list_is_followed_to_the_letter_then_the_step_goes_to_error() {
    let f = fixture().await;
    let policy = RetryPolicy::Intervals { intervals: vec![ms(100), ms(1000), ms(5000)], max_failures: None };
    let mut sup = supervisor(&f, "sup-a", policy);
    submit_and_claim(&f, 1).await;
    let task = f.store.find_task_by_key("t0").await.unwrap().unwrap().id;
    for (n, wait) in [(1u32, 100i64), (2, 1000), (3, 5000)] {
        // Not yet: complete-by has not passed.
        assert_eq!(sup.run_once().await.unwrap().retried, 0);
        f.clock.advance(ms(1000));
        let r = sup.run_once().await.unwrap();
        assert_eq!((r.retried, r.gave_up), (1, 0), "expiry {n}");
        let step = f.store.get_task(task).await.unwrap().unwrap().steps.remove(0);
        assert_eq!(step.state, StepState::Pending);
        assert_eq!(step.failure_count, n);
        assert_eq!(step.due_at.0 - f.clock.now().0, wait, "delay after failure {n}");
        // Not claimable before it is due, claimable right at it.
        let p = || ClaimDueSteps {
            instance: InstanceId::new("sched").unwrap(),
            limit: 10,
            agents: vec!["x".into()],
            buckets: None,
            domains: vec![],
            limits: vec![],
        };
        f.clock.advance(ms(wait as u64 - 1));
        assert!(f.store.claim_due_work(p()).await.unwrap().steps.is_empty());
        f.clock.advance(ms(1));
        assert_eq!(f.store.claim_due_work(p()).await.unwrap().steps.len(), 1);
    }
    f.clock.advance(ms(1000));
    let r = sup.run_once().await.unwrap();
    assert_eq!((r.retried, r.gave_up), (0, 1));
    let d = f.store.get_task(task).await.unwrap().unwrap();
    assert_eq!(d.steps[0].state, StepState::Error);
    assert_eq!(d.task.state, shiftboss_core::TaskState::Failed);
}

#[tokio::test]
async fn sweeps_go_in_batches_until_every_expired_step_is_handled() {
    let f = fixture().await;
    let mut sup = supervisor(&f, "sup-a", RetryPolicy::default());
    submit_and_claim(&f, 5).await; // batch is 2: three transactions
    f.clock.advance(ms(1001));
    let r = sup.run_once().await.unwrap();
    assert_eq!(r.retried, 5);
    assert_eq!(sup.run_once().await.unwrap().retried, 0, "each expiry counted once");
}

#[tokio::test]
async fn one_supervisor_acts_at_a_time_and_a_lapsed_leader_is_refused() {
    let f = fixture().await;
    let mut a = supervisor(&f, "sup-a", RetryPolicy::default());
    let mut b = supervisor(&f, "sup-b", RetryPolicy::default());
    submit_and_claim(&f, 1).await;
    a.run_once().await.unwrap();
    assert!(a.is_leader());
    b.run_once().await.unwrap();
    assert!(!b.is_leader(), "the lease is live: b must not lead");

    // a stops renewing (paused, partitioned); by the store's clock its lease lapses and b takes over.
    f.clock.advance(Duration::from_secs(11));
    let r = b.run_once().await.unwrap();
    assert!(b.is_leader());
    assert_eq!(r.retried, 1, "the new leader swept the expired step");

    // a still trusts its lease by its own clock, but the store refuses its stale term; a drops it,
    // finds b's lease live, and does nothing.
    f.clock.advance(ms(1001));
    submit_and_claim_keyed(&f, "late", 1).await;
    f.clock.advance(ms(1001));
    let r = a.run_once().await.unwrap();
    assert_eq!(r.retried, 0, "a stale leader swept nothing");
    assert!(!a.is_leader(), "a dropped its stale term");
    assert_eq!(b.run_once().await.unwrap().retried, 1, "the step a could not touch is b's to sweep");
    let step = f.store.get_task(shiftboss_core::TaskId(1)).await.unwrap().unwrap().steps.remove(0);
    assert_eq!(step.failure_count, 1, "only the leader's sweep counted");

    // The leader resigns (shutdown): the other takes over at once, with a new term.
    b_resigns_and_a_takes_over(&f, a, b).await;
}

async fn b_resigns_and_a_takes_over(f: &Fixture, mut a: Supervisor, b: Supervisor) {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(b.run(rx));
    tx.send(true).unwrap();
    run.await.unwrap();
    a.run_once().await.unwrap();
    assert!(a.is_leader(), "the lease was free after b resigned");
    let _ = f;
}
