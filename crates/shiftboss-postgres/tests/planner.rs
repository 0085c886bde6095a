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
    let args = "'me', 4611686018427387903, ARRAY['mail'], 100, 'step.claimed', NULL, ARRAY[]::text[], false";
    let generic = generic_plan_of(&c, shiftboss_postgres::claim_statement(), "", args).await;
    let custom = plan_of(
        &c,
        shiftboss_postgres::claim_statement(),
        &[&"me", &Some(i64::MAX / 2), &agents, &100i64, &"step.claimed", &buckets, &domains, &false],
    )
    .await;
    // The claim runs with its generic plan; the plan for these values is checked too, so that
    // the statement stays safe to plan either way.
    for plan in [generic, custom] {
        let plan: Vec<&str> = plan.lines().collect();
        let update = plan.iter().skip_while(|l| !l.contains("Update on steps")).take(8).cloned().collect::<Vec<_>>();
        assert!(update.iter().any(|l| l.contains("steps_pkey")), "the update does not look steps up by id: {plan:#?}");
        assert!(!plan.iter().any(|l| l.contains("Join Filter")), "a join compares every pair of rows: {plan:#?}");
    }
}

/// A claim from a floor (`claim_floor`) reads the steps due since the floor through
/// `steps_next_due`, from the floor on, whatever the statistics say (here they know of 2,000
/// pending steps, all due past the floor); and `steps_due` from its front only behind a one-time
/// filter, when nothing past the floor was taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_from_a_floor_starts_its_read_there() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&s.url, &s.options(false)).await.unwrap();
    enqueue_mail_jobs(&store, 2000).await;
    let c = admin(&s.url).await;
    c.batch_execute(&format!("SET search_path TO \"{}\"; ANALYZE steps;", s.name)).await.unwrap();
    let agents = vec!["mail".to_owned()];
    let (buckets, domains): (Option<Vec<i32>>, Vec<String>) = (None, Vec::new());
    let custom = plan_of(
        &c,
        shiftboss_postgres::claim_from_floor_statement(),
        &[&"me", &Some(i64::MAX / 2), &agents, &100i64, &"step.claimed", &buckets, &domains, &true, &0i64],
    )
    .await;
    let args = "'me', 4611686018427387903, ARRAY['mail'], 100, 'step.claimed', NULL, ARRAY[]::text[], true, 0";
    let generic = generic_plan_of(&c, shiftboss_postgres::claim_from_floor_statement(), ", bigint", args).await;
    // The claim runs with its generic plan (see the test above).
    for plan in [generic, custom] {
        let due: Vec<&str> =
            plan.lines().skip_while(|l| !l.contains("CTE due")).take_while(|l| !l.contains("CTE from_floor")).collect();
        assert!(
            due.iter().any(|l| l.contains("Index Scan using steps_next_due")),
            "the steps past the floor are not read by due time: {plan}"
        );
        assert!(
            due.iter().any(|l| l.contains("Index Cond: ((due_at >=")),
            "the read does not start at the floor: {plan}"
        );
        let front: Vec<&str> = plan
            .lines()
            .skip_while(|l| !l.contains("CTE from_front"))
            .take_while(|l| !l.contains("CTE picked"))
            .collect();
        assert!(
            front.iter().any(|l| l.contains("One-Time Filter")),
            "the front is read whatever the floor found: {plan}"
        );
        assert!(
            front.iter().any(|l| l.contains("Index Scan using steps_due on")),
            "the front is not read through steps_due, in its order: {plan}"
        );
    }
}

/// The claim's generic plan is asked for around the statement alone: the statement runs under
/// `force_generic_plan`, and the connection is back to its own setting after it, whether the
/// statement succeeded or failed, in a transaction or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generic_plan_is_asked_for_the_one_statement_only() {
    let Some(url) = test_db() else { return };
    let c = admin(&url).await;
    let mode = "SELECT current_setting('plan_cache_mode')";
    let rows = shiftboss_postgres::query_generic_on(&c, mode, &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "force_generic_plan", "the statement did not run under force_generic_plan");
    assert_eq!(plan_cache_mode(&c).await, "auto", "the setting was not reset after the statement");

    let failed = shiftboss_postgres::query_generic_on(&c, "SELECT 1 / (0 * $1::int)", &[&1i32]).await;
    assert!(failed.is_err(), "division by zero");
    assert_eq!(plan_cache_mode(&c).await, "auto", "the setting was not reset after a failed statement");

    c.batch_execute("BEGIN").await.unwrap();
    let rows = shiftboss_postgres::query_generic_on(&c, mode, &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "force_generic_plan");
    assert_eq!(plan_cache_mode(&c).await, "auto", "the setting was not reset inside the transaction");
    assert!(shiftboss_postgres::query_generic_on(&c, "SELECT 1 / (0 * $1::int)", &[&1i32]).await.is_err());
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(plan_cache_mode(&c).await, "auto", "a failed transaction left the setting behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generic_plan_alone_is_one_transaction_that_leaves_nothing_behind() {
    let Some(url) = test_db() else { return };
    let c = admin(&url).await;
    let sql = "SELECT current_setting('plan_cache_mode'), pg_current_xact_id()::text";
    let rows = shiftboss_postgres::query_generic_alone_on(&c, sql, &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "force_generic_plan", "the statement did not run under force_generic_plan");
    assert_eq!(plan_cache_mode(&c).await, "auto", "the setting outlived the transaction");
    let again = shiftboss_postgres::query_generic_alone_on(&c, sql, &[]).await.unwrap();
    assert_ne!(rows[0].get::<_, String>(1), again[0].get::<_, String>(1), "both ran in one transaction");
    assert_ended(&c).await;

    let failed = shiftboss_postgres::query_generic_alone_on(&c, "SELECT 1 / (0 * $1::int)", &[&1i32]).await;
    assert!(failed.is_err(), "division by zero");
    assert_eq!(plan_cache_mode(&c).await, "auto", "a failed statement left the setting behind");
    assert_ended(&c).await;
}

/// The connection is in no transaction block: two statements get two transaction ids.
async fn assert_ended(c: &tokio_postgres::Client) {
    let xid = "SELECT pg_current_xact_id()::text";
    let (a, b): (String, String) =
        (c.query_one(xid, &[]).await.unwrap().get(0), c.query_one(xid, &[]).await.unwrap().get(0));
    assert_ne!(a, b, "the connection was left inside a transaction");
}

/// The connection's `plan_cache_mode`.
async fn plan_cache_mode(c: &tokio_postgres::Client) -> String {
    c.query_one("SHOW plan_cache_mode", &[]).await.unwrap().get(0)
}

/// `n` jobs of the agent `mail`, enqueued 2,000 at a time.
async fn enqueue_mail_jobs(store: &PostgresStore, n: usize) {
    for start in (0..n).step_by(2000) {
        let jobs = (start..n.min(start + 2000)).map(|i| EnqueueJob::new("mail", json!({"n": i}))).collect::<Vec<_>>();
        store.enqueue_jobs(EnqueueJobs { jobs, actor: "app".into() }).await.unwrap();
    }
}

/// The plan of `sql` (run as `EXPLAIN`, so nothing changes) with `params`.
async fn plan_of(
    c: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> String {
    let rows = c.query(&format!("EXPLAIN {sql}"), params).await.unwrap();
    rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
}

/// The generic plan of a claim statement (the one the store runs, see `Conn::query_generic`),
/// prepared with the claim's eight parameter types and `more` after them, and explained for
/// `args`. PostgreSQL 15 has no `EXPLAIN (GENERIC_PLAN)`: a prepared statement under
/// `force_generic_plan` is planned without its arguments' values.
async fn generic_plan_of(c: &tokio_postgres::Client, sql: &str, more: &str, args: &str) -> String {
    c.batch_execute(&format!(
        "PREPARE claim(text, bigint, text[], bigint, text, int[], text[], boolean{more}) AS {sql};
         SET plan_cache_mode = force_generic_plan;"
    ))
    .await
    .unwrap();
    let rows = c.query(&format!("EXPLAIN EXECUTE claim({args})"), &[]).await.unwrap();
    c.batch_execute("RESET plan_cache_mode; DEALLOCATE claim;").await.unwrap();
    let plan = rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n");
    // Planned for the arguments, the agent types would show as a constant ('{mail}').
    assert!(plan.contains("agent = ANY ($3)"), "not the generic plan: {plan}");
    plan
}

/// A fenced write finds its row by id whatever the statistics say (see the store's `fence`
/// module). Here the statistics were taken of 20,000 steps with nothing processing and of 20,000
/// deliveries with none pending, then 1,500 steps were claimed and 1,500 deliveries written: the partial indexes on those states
/// look empty to the planner, and a plan through them would walk every processing step (or
/// pending delivery) once per reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_find_their_rows_by_id_whatever_the_statistics() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&s.url, &s.options(false)).await.unwrap();
    let c = admin(&s.url).await;
    enqueue_mail_jobs(&store, 20_000).await;
    c.batch_execute(&format!(
        "SET search_path TO \"{0}\";
         INSERT INTO subscriptions (url, secret, state, created_at, updated_at)
              VALUES ('https://h.example/x', 'whsec_x', 'active', 0, 0);
         INSERT INTO deliveries (subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version,
                                 task_state, state, due_at, created_at, updated_at)
         SELECT (SELECT min(id) FROM subscriptions), id, 1, 1, 'task.received', 0, task_key, workflow,
                workflow_version, state, 'delivered', 0, 0, 0
           FROM tasks;
         ANALYZE steps; ANALYZE deliveries;
         UPDATE steps SET state = 'processing', locked_by = 'w', complete_by = 1, lease_token = 7
          WHERE id IN (SELECT id FROM steps ORDER BY id LIMIT 1500);
         INSERT INTO deliveries (subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version,
                                 task_state, state, due_at, created_at, updated_at)
         SELECT subscription_id, task_id, 2, 2, kind, at, task_key, workflow, version, task_state, 'pending', 0, 0, 0
           FROM deliveries LIMIT 1500;",
        s.name
    ))
    .await
    .unwrap();
    let ids: Vec<i64> = (1..=100).collect();
    let tokens = vec![7i64; ids.len()];
    let texts = vec![String::from("processed"); ids.len()];
    let [set, one, record] = shiftboss_postgres::fenced_statements();
    let no_text: Vec<Option<String>> = vec![None; ids.len()];
    let no_i32: Vec<Option<i32>> = vec![None; ids.len()];
    let no_i64: Vec<Option<i64>> = vec![None; ids.len()];
    let plans = [
        (
            set.0,
            plan_of(&c, set.1, &[&ids, &tokens, &texts, &no_text, &no_text, &texts, &texts, &texts, &1i64, &"w"]).await,
        ),
        (one.0, plan_of(&c, one.1, &[&1i64, &7i64, &"processed", &None::<String>, &None::<String>, &1i64]).await),
        (
            record.0,
            plan_of(
                &c,
                record.1,
                &[
                    &ids,
                    &tokens,
                    &vec![String::from("delivered"); ids.len()],
                    &tokens,
                    &vec![0i32; ids.len()],
                    &no_i32,
                    &no_text,
                    &no_i64,
                    &1i64,
                ],
            )
            .await,
        ),
    ];
    for (what, plan) in plans {
        assert!(plan.contains("_pkey"), "{what}: not found by id:\n{plan}");
        assert!(!plan.contains("Join Filter"), "{what}: compares every pair of rows:\n{plan}");
        for partial in ["steps_processing", "steps_deadline", "deliveries_due"] {
            assert!(!plan.contains(partial), "{what}: found through {partial}:\n{plan}");
        }
    }
}

/// The queue statistics (each `/metrics` scrape, the console's queues) read the live steps through
/// their partial indexes, not the whole table: here 20,000 finished steps beside 300 live ones,
/// analyzed. As one query over the three live states it was a scan of every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_statistics_read_the_live_steps_only() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&s.url, &s.options(false)).await.unwrap();
    let c = admin(&s.url).await;
    enqueue_mail_jobs(&store, 20_000).await;
    c.batch_execute(&format!(
        "SET search_path TO \"{0}\";
         UPDATE steps SET state = 'processed' WHERE id > 300;
         UPDATE steps SET state = 'processing', locked_by = 'w', complete_by = 1 WHERE id <= 100;
         UPDATE steps SET state = 'error' WHERE id > 100 AND id <= 200;
         ANALYZE steps;",
        s.name
    ))
    .await
    .unwrap();
    let plan = plan_of(&c, shiftboss_postgres::QUEUE_STATS, &[&0i64]).await;
    assert!(!plan.contains("Seq Scan on steps"), "{plan}");
    assert!(plan.contains("steps_error"), "{plan}");
    // And the counts are right.
    let stats = store.queue_stats().await.unwrap();
    let mail = stats.agents.iter().find(|a| a.agent == "mail").expect("mail's queue");
    assert_eq!((mail.processing, mail.error, mail.due + mail.later), (100, 100, 100), "{mail:?}");
}
