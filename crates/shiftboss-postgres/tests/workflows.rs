//! Workflows on PostgreSQL, beyond the conformance suite: races between handles that only a
//! database shared by many processes has (a child ending while its parent is cancelled, limits per
//! agent claimed at once), and the 0003 migration under existing data.

mod common;

use common::{TestSchema, admin, test_db};
use serde_json::json;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepState, TaskState};
use shiftboss_postgres::PostgresStore;
use shiftboss_store::*;
use shiftboss_store_conformance::support::StoreTestExt;
use shiftboss_store_conformance::support::*;
use std::sync::Arc;
use tokio_postgres::error::SqlState;

async fn handle(s: &TestSchema, clock: &Arc<ManualClock>) -> PostgresStore {
    PostgresStore::connect_with_clock(&s.url, &s.options(false), Clock::Manual(clock.clone())).await.expect("connect")
}

fn claim_params(instance: &str, limit: u32, limits: Vec<AgentLimit>) -> ClaimDueSteps {
    ClaimDueSteps { instance: id(instance), limit, agents: vec![WORKER.into()], buckets: None, domains: vec![], limits }
}

/// A child's reply (which ends the child and moves its parent on: child, then parent) races an
/// operator's cancel of the parent (which cancels the child: parent, then child). Locking each
/// task's ancestors before it makes both lock the parent first: neither call fails with a deadlock,
/// and each tree ends one way or the other, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_ending_while_its_parent_is_cancelled_never_deadlocks() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let (replier, operator) = (handle(&s, &clock).await, handle(&s, &clock).await);
    replier.register_workflow(&one_step()).await.unwrap();
    let parent = def(json!({"name": "parent", "steps": [{"name": "sub", "kind": "sub_workflow", "workflow": "one"}]}));
    replier.register_workflow(&parent).await.unwrap();
    const TREES: usize = 30;
    for round in 0..3 {
        let mut parents = Vec::new();
        for i in 0..TREES {
            parents
                .push(replier.submit_task(submit_params(&format!("p{round}-{i}"), "parent", 0)).await.unwrap().task_id);
        }
        let claimed = replier.claim_due_steps(claim_params("s1", TREES as u32, vec![])).await.unwrap();
        assert_eq!(claimed.len(), TREES, "each child's step is due");
        let replies: Vec<Reply> = claimed
            .iter()
            .rev()
            .map(|c| Reply { step_id: c.id, lease_token: c.lease_token, result: ReplyResult::Completed(json!({})) })
            .collect();
        let r = replier.clone();
        let reply = tokio::spawn(async move {
            r.record_replies(RecordReplies { instance: id("s1"), replies, policies: Default::default() }).await
        });
        let op = operator.clone();
        let to_cancel = parents.clone();
        let cancel = tokio::spawn(async move {
            let mut out = Vec::new();
            for task_id in to_cancel {
                let p = CancelTask { task_id, actor: "ops".into(), reason: "race".into() };
                out.push(op.cancel_task(p).await);
            }
            out
        });
        let replied = reply.await.unwrap().unwrap_or_else(|e| panic!("round {round}: the replies failed: {e}"));
        for (task_id, r) in parents.iter().zip(cancel.await.unwrap()) {
            assert!(matches!(r, Ok(()) | Err(StoreError::Conflict(_))), "round {round}, task {task_id}: {r:?}");
        }
        assert_eq!(replied.len(), TREES);
        for c in &claimed {
            let child = operator.get_task(c.task_id).await.unwrap().unwrap();
            let p = child.task.parent_task_id.expect("a child");
            let parent = operator.get_task(p).await.unwrap().unwrap();
            let states = (parent.task.state, child.task.state);
            assert!(
                matches!(
                    states,
                    (TaskState::Completed, TaskState::Completed) | (TaskState::Cancelled, TaskState::Cancelled)
                ),
                "round {round}: parent {p} and child {} ended {states:?}",
                c.task_id
            );
            let sub = &parent.steps[0];
            let want = if states.0 == TaskState::Completed { StepState::Processed } else { StepState::Cancelled };
            assert_eq!(sub.state, want, "the parent's step went with the tree");
        }
    }
}

/// Many handles claim one limited agent at once: the limits hold across all of them, since they
/// count under the agent's rate row lock one after another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_limits_hold_when_handles_claim_at_once() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let clock = ManualClock::new(T0);
    let mut stores = Vec::new();
    for _ in 0..6 {
        stores.push(handle(&s, &clock).await);
    }
    stores[0].register_workflow(&one_step()).await.unwrap();
    for i in 0..40 {
        stores[0].submit_task(submit_params(&format!("t{i}"), "one", 0)).await.unwrap();
    }
    let claim_all_at_once = async |limits: Vec<AgentLimit>| -> usize {
        let claims: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let (st, p) = (st.clone(), claim_params(&format!("s{i}"), 10, limits.clone()));
                tokio::spawn(async move { st.claim_due_steps(p).await })
            })
            .collect();
        let mut n = 0;
        for c in claims {
            n += c.await.unwrap().expect("claim").len();
        }
        n
    };
    let cap = vec![AgentLimit { agent: WORKER.into(), max_concurrent: Some(4), per_second: None }];
    assert_eq!(claim_all_at_once(cap.clone()).await, 4, "at most 4 running, across handles");
    assert_eq!(claim_all_at_once(cap).await, 0, "still 4 running");
    let rate = vec![AgentLimit { agent: WORKER.into(), max_concurrent: None, per_second: Some(5) }];
    assert_eq!(claim_all_at_once(rate.clone()).await, 5, "5 claims in this second, across handles");
    assert_eq!(claim_all_at_once(rate.clone()).await, 0, "none left in this second");
    clock.advance(secs(1));
    assert_eq!(claim_all_at_once(rate).await, 5, "a new second, 5 more");
}

/// A store at schema version 2 with a step held by a scheduler migrates to 3 and goes on: the
/// held step is an agent's, its reply applies, and the task completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_store_with_live_work_migrates_and_goes_on() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::new(&url).await;
    let c = admin(&url).await;
    let schema = &s.name;
    c.batch_execute(&format!(
        "CREATE SCHEMA \"{schema}\"; SET search_path TO \"{schema}\";
         CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                                      applied_at BIGINT NOT NULL DEFAULT 0);
         {}
         {}
         INSERT INTO schema_version (version, name) VALUES (1, '0001_initial'), (2, '0002_buckets');",
        include_str!("../src/migrations/0001_initial.sql"),
        include_str!("../src/migrations/0002_buckets.sql"),
    ))
    .await
    .unwrap();
    let definition = serde_json::to_string(&one_step()).unwrap();
    let now = T0.0;
    c.batch_execute(&format!(
        "INSERT INTO workflows VALUES ('one', 1, '{definition}', {now});
         INSERT INTO tasks (task_key, workflow, workflow_version, state, input, created_at, updated_at)
             VALUES ('old', 'one', 1, 'running', '{{}}', {now}, {now});
         INSERT INTO steps (task_id, name, agent, state, locked_by, complete_by, lease_token, due_at, input,
                            idempotency_key, timeout_ms, created_at, updated_at)
             SELECT id, 'work', '{WORKER}', 'processing', 's1', {now} + 1000, 1, {now}, '{{}}', 'k-old', 1000,
                    {now}, {now} FROM tasks;
         RESET search_path;"
    ))
    .await
    .unwrap();

    let clock = ManualClock::new(T0);
    let store = PostgresStore::connect_with_clock(&url, &s.options(true), Clock::Manual(clock)).await.unwrap();
    let task = store.find_task_by_key("old").await.unwrap().expect("kept");
    assert_eq!((task.parent_task_id, task.deadline_at), (None, None));
    let d = store.get_task(task.id).await.unwrap().unwrap();
    let step = &d.steps[0];
    assert_eq!((step.kind, step.state, step.compensates.as_deref()), (StepKind::Agent, StepState::Processing, None));
    let reply = Reply { step_id: step.id, lease_token: step.lease_token, result: ReplyResult::Completed(json!(7)) };
    let out = store
        .record_replies(RecordReplies { instance: id("s1"), replies: vec![reply], policies: Default::default() })
        .await
        .unwrap();
    assert!(matches!(out[0], ReplyOutcome::Applied { task_state: TaskState::Completed, .. }), "{out:?}");
    assert_eq!(store.get_task(task.id).await.unwrap().unwrap().task.state, TaskState::Completed);

    // The lease rule now binds agent rows only: a control row is open without a holder, and never
    // has one; an agent row still holds a lease exactly while it is processing.
    let insert = |kind: &str, state: &str, holder: &str| {
        format!(
            "INSERT INTO \"{schema}\".steps (task_id, name, agent, kind, state, locked_by, complete_by, due_at, input,
                                            idempotency_key, timeout_ms, created_at, updated_at)
             VALUES ({}, '{kind}-{state}-{holder}', '', '{kind}', '{state}', {holder}, {holder}, 0, 'null',
                     '{kind}-{state}-{holder}', 1000, 0, 0)",
            task.id.0
        )
    };
    c.batch_execute(&insert("fork", "processing", "NULL")).await.expect("an open control step has no holder");
    for (kind, state, holder) in
        [("fork", "processing", "1"), ("agent", "processing", "NULL"), ("agent", "pending", "1")]
    {
        let e = c.batch_execute(&insert(kind, state, holder)).await.expect_err("refused");
        assert_eq!(e.code(), Some(&SqlState::CHECK_VIOLATION), "{kind} {state} {holder}: {e:?}");
    }
    let bad_state = format!("UPDATE \"{schema}\".tasks SET state = 'sleeping' WHERE id = {}", task.id.0);
    assert!(c.batch_execute(&bad_state).await.is_err(), "the task states are still checked");
    let paused = format!("UPDATE \"{schema}\".tasks SET state = 'paused' WHERE id = {}", task.id.0);
    c.batch_execute(&paused).await.expect("a new task state is allowed");
}
