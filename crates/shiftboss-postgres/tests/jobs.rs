//! Retry jobs and the archiver on PostgreSQL, beyond the conformance suite's cases: unique keys
//! stay unique while the archiver moves their jobs, the archiver never moves a task another
//! transaction holds, history is restored once however many resubmits race, a full batch is one
//! call, and `enqueue_jobs_in` leaves the caller's transaction as it was when it refuses.

mod common;

use common::{TestSchema, admin, test_db};
use serde_json::json;
use shiftboss_core::TaskState;
use shiftboss_postgres::{PostgresStore, enqueue_jobs_in};
use shiftboss_store::*;
use shiftboss_store_conformance::support::StoreTestExt;
use shiftboss_store_conformance::support::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAIL: &str = "mail";
const HANDLES: usize = 5;

async fn handles(s: &TestSchema, clock: &Arc<ManualClock>, n: usize) -> Vec<PostgresStore> {
    let mut out = Vec::new();
    for _ in 0..n {
        let store = PostgresStore::connect_with_clock(&s.url, &s.options(false), Clock::Manual(clock.clone())).await;
        out.push(store.expect("connect"));
    }
    out
}

fn job(key: &str, n: u32) -> EnqueueJob {
    EnqueueJob { key: Some(key.into()), ..EnqueueJob::new(MAIL, json!({"n": n})) }
}

fn jobs(list: Vec<EnqueueJob>) -> EnqueueJobs {
    EnqueueJobs { jobs: list, actor: "app".into() }
}

/// Claims every due `mail` step and replies `result` to each.
async fn run_all(store: &PostgresStore, result: ReplyResult) -> usize {
    let p = ClaimDueSteps {
        instance: id("server"),
        limit: 10_000,
        agents: vec![MAIL.into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    let claimed = store.claim_due_steps(p).await.expect("claim");
    let replies: Vec<Reply> =
        claimed.iter().map(|c| Reply { step_id: c.id, lease_token: c.lease_token, result: result.clone() }).collect();
    let n = replies.len();
    store
        .record_replies(RecordReplies { instance: id("server"), replies, policies: Default::default() })
        .await
        .unwrap();
    n
}

async fn archiver(store: &PostgresStore) -> LeaderTerm {
    let p = ElectLeader { name: "archiver".into(), holder: id("archiver-1"), ttl: Duration::from_secs(3600) };
    store.elect_leader(p).await.unwrap().expect("archiver term")
}

fn archive_all(leader: &LeaderTerm) -> Archive {
    Archive { leader: leader.clone(), after: Duration::ZERO, keep: None, limit: 1000 }
}

/// How many rows hold `key`, live and archived together.
async fn holders(s: &TestSchema, key: &str) -> i64 {
    let sql = format!(
        "SELECT (SELECT count(*) FROM {0}.tasks WHERE task_key = $1) + \
                (SELECT count(*) FROM {0}.tasks_history WHERE task_key = $1)",
        s.name
    );
    admin(&s.url).await.query_one(&sql, &[&key]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_enqueued_while_the_archiver_moves_its_job_is_held_once() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let stores = handles(&s, &clock, HANDLES).await;
    let leader = archiver(&stores[0]).await;
    for round in 0..12 {
        let key = format!("welcome-{round}");
        let first = stores[0].enqueue_jobs(jobs(vec![job(&key, round)])).await.unwrap()[0].clone();
        assert!(first.created);
        assert_eq!(run_all(&stores[0], ReplyResult::Completed(json!({}))).await, 1);
        // The archiver moves the finished job while every other handle enqueues its key again.
        let archiving = tokio::spawn({
            let (store, leader) = (stores[0].clone(), leader.clone());
            async move { store.archive(archive_all(&leader)).await }
        });
        let again: Vec<_> = stores[1..]
            .iter()
            .map(|st| {
                let (st, key) = (st.clone(), key.clone());
                tokio::spawn(async move { st.enqueue_jobs(jobs(vec![job(&key, round)])).await })
            })
            .collect();
        assert_eq!(archiving.await.unwrap().unwrap().tasks, 1, "round {round}");
        for a in again {
            let got = a.await.unwrap().unwrap_or_else(|e| panic!("round {round}: {e}"));
            assert_eq!(got, vec![Submitted { task_id: first.task_id, created: false }], "round {round}");
        }
        assert_eq!(holders(&s, &key).await, 1, "round {round}: the key is held once");
        // Other params under the archived key are refused.
        let other = stores[1].enqueue_jobs(jobs(vec![job(&key, 999)])).await;
        assert!(matches!(other, Err(StoreError::Conflict(_))), "{other:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archiver_skips_a_task_another_transaction_holds() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let store = handles(&s, &clock, 1).await.remove(0);
    let done = store.enqueue_jobs(jobs(vec![job("held", 1)])).await.unwrap()[0].task_id;
    run_all(&store, ReplyResult::Completed(json!({}))).await;
    let leader = archiver(&store).await;
    // Another transaction holds the task's lock, as a decider would.
    let mut other = admin(&url).await;
    let tx = other.transaction().await.unwrap();
    tx.query_one(&format!("SELECT id FROM {}.tasks WHERE id = $1 FOR UPDATE", s.name), &[&done.0]).await.unwrap();
    let report = store.archive(archive_all(&leader)).await.unwrap();
    assert_eq!(report.tasks, 0, "a held task waits for the next pass: {report:?}");
    tx.commit().await.unwrap();
    assert_eq!(store.archive(archive_all(&leader)).await.unwrap().tasks, 1);
    let found = store.find_job(JobRef::Id(done)).await.unwrap().expect("archived job");
    assert!(found.archived);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_resubmits_bring_an_archived_job_back_once() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let stores = handles(&s, &clock, HANDLES).await;
    let given_up = stores[0].enqueue_jobs(jobs(vec![job("doomed", 1)])).await.unwrap()[0].task_id;
    run_all(&stores[0], ReplyResult::PermanentError("mailbox gone".into())).await;
    let leader = archiver(&stores[0]).await;
    assert_eq!(stores[0].archive(archive_all(&leader)).await.unwrap().tasks, 1);
    let runs: Vec<_> = stores
        .iter()
        .map(|st| {
            let st = st.clone();
            tokio::spawn(async move {
                let query = JobQuery { state: Some(shiftboss_core::jobs::JobState::GivenUp), ..Default::default() };
                let p = ResubmitJobs { query, dry_run: false, actor: "ops".into(), reason: "fixed".into() };
                st.resubmit_jobs(p).await
            })
        })
        .collect();
    let mut resubmitted = 0;
    for r in runs {
        resubmitted += r.await.unwrap().expect("resubmit").resubmitted;
    }
    assert_eq!(resubmitted, 1, "one resubmit brought it back");
    let back = stores[0].find_job(JobRef::Id(given_up)).await.unwrap().unwrap();
    assert!(!back.archived);
    assert_eq!(back.state, shiftboss_core::jobs::JobState::Pending);
    assert_eq!(holders(&s, "doomed").await, 1);
    let detail = stores[0].get_task(given_up).await.unwrap().unwrap();
    assert_eq!(count(&detail.events, event_kind::TASK_RESTORED), 1);
    assert_eq!(detail.task.state, TaskState::Running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_batch_is_one_call_and_a_refused_one_writes_nothing() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let store = handles(&s, &clock, 1).await.remove(0);
    let batch: Vec<EnqueueJob> = (0..MAX_ENQUEUE_BATCH as u32).map(|n| job(&format!("bulk-{n}"), n)).collect();
    let started = Instant::now();
    let out = store.enqueue_jobs(jobs(batch.clone())).await.unwrap();
    let took = started.elapsed();
    eprintln!("enqueued {} jobs in {took:?} ({:.0} jobs/s)", out.len(), out.len() as f64 / took.as_secs_f64());
    assert_eq!(out.len(), MAX_ENQUEUE_BATCH);
    assert!(out.iter().all(|s| s.created));
    assert!(out.windows(2).all(|w| w[0].task_id < w[1].task_id), "ids follow the batch's order");
    let c = admin(&url).await;
    let n = |table: &str| format!("SELECT count(*) FROM {}.{table}", s.name);
    for table in ["tasks", "steps", "events"] {
        let got: i64 = c.query_one(&n(table), &[]).await.unwrap().get(0);
        assert_eq!(got, MAX_ENQUEUE_BATCH as i64, "{table}");
    }
    // Again: every job is a repeat, in one call too.
    let again = store.enqueue_jobs(jobs(batch)).await.unwrap();
    assert!(again.iter().zip(&out).all(|(a, o)| a.task_id == o.task_id && !a.created));

    // A key given twice in a batch is one job; a batch with one conflict writes nothing.
    let twice = store.enqueue_jobs(jobs(vec![job("dup", 1), job("fresh", 2), job("dup", 1)])).await.unwrap();
    assert_eq!(twice[0].task_id, twice[2].task_id);
    assert!(twice[0].created && twice[1].created && !twice[2].created);
    let before: i64 = c.query_one(&n("tasks"), &[]).await.unwrap().get(0);
    let refused = store.enqueue_jobs(jobs(vec![job("new-1", 1), job("dup", 7)])).await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "{refused:?}");
    let refused = store.enqueue_jobs(jobs(vec![job("new-2", 1), job("new-2", 8)])).await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "{refused:?}");
    let after: i64 = c.query_one(&n("tasks"), &[]).await.unwrap().get(0);
    assert_eq!(after, before);
    let too_many = vec![job("x", 0); MAX_ENQUEUE_BATCH + 1];
    assert!(matches!(store.enqueue_jobs(jobs(too_many)).await, Err(StoreError::InvalidInput(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_in_a_callers_transaction_commits_with_it_and_a_conflict_leaves_it_as_it_was() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&url, &s.options(false)).await.unwrap();
    let mut app = admin(&url).await;
    app.batch_execute("CREATE TEMP TABLE orders (id TEXT PRIMARY KEY)").await.unwrap();

    let tx = app.transaction().await.unwrap();
    tx.execute("INSERT INTO orders VALUES ('o-1')", &[]).await.unwrap();
    let out = enqueue_jobs_in(&tx, &s.name, &jobs(vec![job("receipt-1", 1)])).await.unwrap();
    // The caller's own names still resolve as before.
    tx.execute("INSERT INTO orders VALUES ('o-2')", &[]).await.unwrap();
    tx.commit().await.unwrap();
    let found = store.find_job(JobRef::Key("receipt-1".into())).await.unwrap().expect("committed job");
    assert_eq!(found.id, out[0].task_id);

    let tx = app.transaction().await.unwrap();
    let refused = enqueue_jobs_in(&tx, &s.name, &jobs(vec![job("receipt-2", 2), job("receipt-1", 9)])).await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "{refused:?}");
    // The transaction goes on, and holds nothing of the refused call.
    tx.execute("INSERT INTO orders VALUES ('o-3')", &[]).await.unwrap();
    tx.commit().await.unwrap();
    assert!(store.find_job(JobRef::Key("receipt-2".into())).await.unwrap().is_none());
    let orders: i64 = app.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(orders, 3);

    let tx = app.transaction().await.unwrap();
    enqueue_jobs_in(&tx, &s.name, &jobs(vec![job("receipt-4", 4)])).await.unwrap();
    tx.rollback().await.unwrap();
    assert!(store.find_job(JobRef::Key("receipt-4".into())).await.unwrap().is_none());
}

/// The window the post-insert check closes: an archiver has moved the key's task to history but
/// not committed when an enqueue (or a submit) of the key begins. The INSERT waits on the moved row,
/// finds the key free once the archiver commits, and the check after it finds the key in history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_waiting_on_an_archiver_finds_the_key_in_history() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let store = handles(&s, &clock, 1).await.remove(0);
    for (round, by_submit) in [(0, false), (1, true)] {
        let key = format!("moving-{round}");
        let done = store.enqueue_jobs(jobs(vec![job(&key, round)])).await.unwrap()[0].task_id;
        run_all(&store, ReplyResult::Completed(json!({}))).await;
        let mut archiver = admin(&url).await;
        let tx = archiver.transaction().await.unwrap();
        for (table, column) in [("events", "task_id"), ("steps", "task_id"), ("tasks", "id")] {
            let sql = format!(
                "WITH moved AS (DELETE FROM {0}.{table} WHERE {column} = $1 RETURNING *)
                 INSERT INTO {0}.{table}_history SELECT * FROM moved",
                s.name
            );
            tx.execute(&sql, &[&done.0]).await.unwrap();
        }
        let again = tokio::spawn({
            let (store, key) = (store.clone(), key.clone());
            async move {
                if by_submit {
                    let p = SubmitTask {
                        domains: Default::default(),
                        correlation_id: None,
                        notify: None,
                        key: key.clone(),
                        workflow: "job:mail".into(),
                        version: Some(1),
                        input: json!({"n": round}),
                        priority: 0,
                        actor: "app".into(),
                    };
                    store.submit_task(p).await.map(|s| vec![s])
                } else {
                    store.enqueue_jobs(jobs(vec![job(&key, round)])).await
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        // A submit looks the key up first, and may find the task still live (the move is not
        // committed): the right answer too. An enqueue inserts first, so it must wait.
        assert!(by_submit || !again.is_finished(), "the insert waits for the archiver");
        tx.commit().await.unwrap();
        let got = again.await.unwrap().unwrap();
        assert_eq!(got, vec![Submitted { task_id: done, created: false }], "round {round}");
        assert_eq!(holders(&s, &key).await, 1);
    }
}

/// Issue 26: what a standby promoted without the last commits cannot repeat. A job's step calls
/// its handler with a key made from the job's key (the job enqueued again under its key after the
/// lost write sends the same one), and a first claim's lease token is not 1 (the token a claim
/// lost with the old primary's history most likely held), nor its neighbours' tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_keys_come_from_the_job_and_lease_tokens_are_not_counted() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&url, &s.options(false)).await.unwrap();
    store.enqueue_jobs(jobs((0..20).map(|n| job(&format!("mail-{n}"), n)).collect())).await.unwrap();
    let p = ClaimDueSteps {
        instance: id("server"),
        limit: 100,
        agents: vec![MAIL.into()],
        buckets: None,
        domains: vec![],
        limits: vec![],
    };
    let claimed = store.claim_due_steps(p).await.unwrap();
    assert_eq!(claimed.len(), 20);
    let mut tokens = std::collections::HashSet::new();
    for c in &claimed {
        let job = store.find_job(JobRef::Id(c.task_id)).await.unwrap().unwrap();
        assert_eq!(c.idempotency_key, shiftboss_core::idempotency::step_key(&job.key, "run", 0));
        tokens.insert(c.lease_token.0);
    }
    // Each is 1 plus a random number below 2^31: twenty of them meet, or one is 1, about once in
    // ten million runs.
    assert_eq!(tokens.len(), 20, "{tokens:?}");
    assert!(!tokens.contains(&1), "{tokens:?}");
}
