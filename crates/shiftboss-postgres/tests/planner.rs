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
