//! The reconciler (C6), leader-only: ends timed waits, fails tasks past their workflow's timeout,
//! and decides again live tasks that have nothing live and have not changed for a while (a decide
//! lost to a bug or a hand edit; every normal decide commits with the change that caused it).
//!
//! The candidates of all three repairs are read first, without locks; then their tasks are locked
//! together (ascending ids, ancestors first, see `lock`), and each repair checks its condition
//! again under the lock, since a reply or an operator may have moved the task meanwhile.

use crate::expire::check_leader;
use crate::lock::lock_tasks;
use crate::rows::get;
use crate::tx::Tx;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::time::duration_ms;
use shiftboss_core::{StepId, TaskId};
use shiftboss_store::advance::{advance_task, time_out};
use shiftboss_store::{Reconcile, ReconcileReport, StoreError, event_kind as ev};

/// A running task with no live step: the same test when picking candidates and under the lock.
const STALLED: &str = "state IN ('running', 'compensating') AND updated_at <= $1
     AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.task_id = tasks.id AND s.state IN ('pending', 'processing'))";

pub async fn reconcile(t: &Tx<'_>, p: &Reconcile) -> Result<ReconcileReport, StoreError> {
    check_leader(t, &p.leader).await?;
    let actor = format!("reconciler:{}", p.leader.holder);
    let limit = i64::from(p.limit);
    let stale_before = t.now.0.saturating_sub(duration_ms(p.stale_after));

    let waits = t
        .query(
            "SELECT id, task_id FROM steps WHERE kind = 'wait' AND state = 'processing' AND due_at <= $1
             ORDER BY due_at LIMIT $2",
            &[&t.now.0, &limit],
        )
        .await?;
    let waits = waits.iter().map(|r| Ok((StepId(get(r, 0)?), TaskId(get(r, 1)?)))).collect::<Result<Vec<_>, _>>()?;
    let late = ids(
        t,
        "SELECT id FROM tasks WHERE deadline_at <= $1 AND deadline_at IS NOT NULL
           AND state IN ('running', 'paused', 'compensating')
         ORDER BY deadline_at LIMIT $2",
        &[&t.now.0, &limit],
    )
    .await?;
    let stalled =
        ids(t, &format!("SELECT id FROM tasks WHERE {STALLED} ORDER BY updated_at LIMIT $2"), &[&stale_before, &limit])
            .await?;
    let all: Vec<TaskId> =
        waits.iter().map(|(_, task)| *task).chain(late.iter().copied()).chain(stalled.iter().copied()).collect();
    lock_tasks(t, &all).await?;

    let mut report = ReconcileReport::default();
    for (step, task) in waits {
        // The wait may have ended by a signal meanwhile, or its task moved on.
        let ended = t
            .query_opt(
                "UPDATE steps SET state = 'processed', output = $2, last_error = NULL, updated_at = $3
                 WHERE id = $1 AND kind = 'wait' AND (state = 'processing') IS TRUE AND due_at <= $3 RETURNING name",
                &[&step.0, &json!({}).to_string(), &t.now.0],
            )
            .await?;
        let Some(row) = ended else { continue };
        let name: String = get(&row, 0)?;
        t.event(task, Some(step), ev::WAIT_ENDED, EventLevel::Info, &actor, json!({"step": name})).await?;
        advance_task(t, task, &actor).await?;
        report.waits_ended += 1;
    }

    for task in late {
        // Cleared first, so that a task is timed out once; a task ended meanwhile is left alone.
        let due = t
            .execute(
                "UPDATE tasks SET deadline_at = NULL
                 WHERE id = $1 AND deadline_at <= $2 AND state IN ('running', 'paused', 'compensating')",
                &[&task.0, &t.now.0],
            )
            .await?;
        if due == 1 && time_out(t, task, &actor).await? {
            report.timed_out += 1;
        }
    }

    for task in stalled {
        let still = t
            .query_opt(&format!("SELECT id FROM tasks WHERE id = $2 AND {STALLED}"), &[&stale_before, &task.0])
            .await?;
        if still.is_none() {
            continue;
        }
        t.event(task, None, ev::TASK_REDECIDED, EventLevel::Alert, &actor, json!({})).await?;
        advance_task(t, task, &actor).await?;
        t.execute("UPDATE tasks SET updated_at = $2 WHERE id = $1", &[&task.0, &t.now.0]).await?;
        report.redecided += 1;
    }
    Ok(report)
}

async fn ids(t: &Tx<'_>, sql: &str, params: crate::tx::Params<'_>) -> Result<Vec<TaskId>, StoreError> {
    let rows = t.query(sql, params).await?;
    rows.iter().map(|r| get(r, 0).map(TaskId)).collect()
}
