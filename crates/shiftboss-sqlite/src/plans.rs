//! The queries that must read a partial index do: a partial index serves only a query whose
//! condition implies the index's own, so rewriting one side alone (as migrations 7 and 9 did to
//! the indexes) would silently turn the read into a scan of the table.

use crate::{archive, claim, expire, next, open, query, reconcile, writes};

fn plan(sql: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let conn = open::open_connection(&dir.path().join("plans.db"), &open::OpenOptions::default()).unwrap();
    let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    // The plan does not depend on the values: the store prepares with the planner's stability
    // guarantee on.
    let nulls = rusqlite::params_from_iter(vec![rusqlite::types::Null; st.parameter_count()]);
    let details = st.query_map(nulls, |r| r.get::<_, String>(3)).unwrap().collect::<Result<Vec<_>, _>>().unwrap();
    details.join("; ")
}

#[test]
fn task_reads_use_their_partial_indexes() {
    for (sql, index) in [
        (archive::FINISHED_ROOTS, "tasks_finished"),
        (reconcile::LATE_TASKS, "tasks_deadline"),
        (reconcile::STALLED_TASKS, "tasks_stale"),
        (next::NEXT_DEADLINE, "tasks_deadline"),
    ] {
        let plan = plan(sql);
        assert!(plan.contains(&format!("USING INDEX {index}")), "{sql}\nreads {plan}, not {index}");
    }
}

#[test]
fn the_deciders_read_sorts_nothing() {
    // A sorter built and dropped on every run was most of the cost of this read, once per reply.
    let plan = plan(writes::STEP_VIEWS);
    assert!(plan.contains("USING INDEX"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
}

#[test]
fn reads_of_processing_steps_use_their_index() {
    // One index holds the processing steps (migration 10): the sweep, the next complete-by and a
    // limited agent's running count read it, never the whole table.
    for sql in [expire::expired_sql().as_str(), next::NEXT_COMPLETE_BY, claim::RUNNING_OF_AGENT] {
        let plan = plan(sql);
        assert!(plan.contains("INDEX steps_processing"), "{sql}\nreads {plan}");
    }
}

#[test]
fn the_queue_statistics_read_the_live_steps_only() {
    // A scrape of /metrics runs this: each state through its partial index (migration 21), not a
    // scan of every step, finished ones included.
    let plan = plan(query::QUEUE_STATS);
    for index in ["steps_processing", "steps_error"] {
        assert!(plan.contains(&format!("INDEX {index}")), "reads {plan}");
    }
    assert!(plan.contains("INDEX steps_due") || plan.contains("INDEX steps_next_due"), "reads {plan}");
    assert!(!plan.split("; ").any(|step| step.starts_with("SCAN steps") && !step.contains("INDEX")), "reads {plan}");
}
