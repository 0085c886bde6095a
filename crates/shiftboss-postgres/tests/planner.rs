//! The planner's statistics after a bulk enqueue: the store analyzes the tables itself once the
//! rows it enqueued outgrow what the planner last counted, so the claim reads the due-steps index
//! in order instead of sorting every pending row.

mod common;

use common::{TestSchema, admin, test_db};
use serde_json::json;
use shiftboss_postgres::PostgresStore;
use shiftboss_store::*;
use std::time::{Duration, Instant};

/// The planner's row count of `steps`, or -1 if the table was never analyzed.
async fn reltuples(s: &TestSchema) -> f32 {
    let c = admin(&s.url).await;
    let sql = format!("SELECT reltuples FROM pg_class WHERE oid = '\"{}\".steps'::regclass", s.name);
    c.query_one(&sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_enqueue_refreshes_the_planners_statistics() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&s.url, &s.options(false)).await.unwrap();
    assert!(reltuples(&s).await <= 0.0, "a new table has no statistics yet");
    // Fewer rows than the threshold: nothing is analyzed.
    let few = (0..10).map(|i| EnqueueJob::new("mail", json!({"n": i}))).collect();
    store.enqueue_jobs(EnqueueJobs { jobs: few, actor: "app".into() }).await.unwrap();
    let many = (0..2000).map(|i| EnqueueJob::new("mail", json!({"n": i}))).collect();
    store.enqueue_jobs(EnqueueJobs { jobs: many, actor: "app".into() }).await.unwrap();
    // The analyze runs after the commit, on its own connection: wait for its result.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = reltuples(&s).await;
        if n >= 2000.0 {
            break;
        }
        assert!(Instant::now() < deadline, "steps still counted {n} rows 30 s after a bulk enqueue of 2,010");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And the claim now reads the index in its order (the plan that stays cheap as the queue grows).
    let c = admin(&s.url).await;
    let plan: Vec<String> = c
        .query(
            &format!(
                "EXPLAIN SELECT id FROM \"{}\".steps WHERE state = 'pending' AND due_at <= 9000000000000000
                   AND agent = 'mail' ORDER BY priority DESC, due_at, id LIMIT 100",
                s.name
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(plan.iter().any(|l| l.contains("Index Scan using steps_due")), "{plan:#?}");
}

/// The claim's update finds the rows it picked by id, whatever the statistics say. Joined to the
/// picked rows instead, it was planned from statistics that counted many finished steps and no
/// pending one (a store whose archiver is off, analyzed before a backlog came in): the planner then
/// scanned every pending step once per picked step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_looks_picked_steps_up_by_id_whatever_the_statistics() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&s.url, &s.options(false)).await.unwrap();
    let c = admin(&s.url).await;
    // 20,000 finished jobs, analyzed: the statistics know of no pending step.
    let done = (0..2000).map(|i| EnqueueJob::new("mail", json!({"n": i}))).collect::<Vec<_>>();
    store.enqueue_jobs(EnqueueJobs { jobs: done, actor: "app".into() }).await.unwrap();
    c.batch_execute(&format!(
        "SET search_path TO \"{0}\";
         INSERT INTO tasks (task_key, workflow, workflow_version, state, input, created_at, updated_at)
         SELECT 'done-' || g, workflow, workflow_version, 'completed', '{{}}', 0, 0
           FROM generate_series(1, 18000) g, (SELECT workflow, workflow_version FROM tasks LIMIT 1) w;
         INSERT INTO steps (task_id, name, agent, state, due_at, input, idempotency_key, timeout_ms, created_at,
                            updated_at)
         SELECT id, 'run', 'mail', 'processed', 0, '{{}}', 'done-' || id, 1000, 0, 0
           FROM tasks WHERE task_key LIKE 'done-%';
         UPDATE steps SET state = 'processed' WHERE state = 'pending';
         ANALYZE tasks; ANALYZE steps;",
        s.name
    ))
    .await
    .unwrap();
    // Then a backlog the statistics have not seen (fewer than the store's own analyze waits for).
    let backlog = (0..500).map(|i| EnqueueJob::new("mail", json!({"n": i}))).collect::<Vec<_>>();
    store.enqueue_jobs(EnqueueJobs { jobs: backlog, actor: "app".into() }).await.unwrap();
    let agents = vec!["mail".to_owned()];
    let (buckets, domains): (Option<Vec<i32>>, Vec<String>) = (None, Vec::new());
    // EXPLAIN plans the statement without running it: nothing is claimed.
    c.batch_execute(&format!("SET search_path TO \"{}\"", s.name)).await.unwrap();
    let plan: Vec<String> = c
        .query(
            &format!("EXPLAIN {}", shiftboss_postgres::claim_statement()),
            &[&"me", &Some(i64::MAX / 2), &agents, &100i64, &"step.claimed", &buckets, &domains, &false],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let update = plan.iter().skip_while(|l| !l.contains("Update on steps")).take(8).cloned().collect::<Vec<_>>();
    assert!(update.iter().any(|l| l.contains("steps_pkey")), "the update does not look steps up by id: {plan:#?}");
    assert!(!plan.iter().any(|l| l.contains("Join Filter")), "a join compares every pair of rows: {plan:#?}");
}
