//! Operator actions: resubmit a failed step, cancel a task. Each is recorded with who and why.
//!
//! Both lock the task first, then read and write its steps under that lock (C7); the step writes
//! repeat the state they expect in their WHERE.

use crate::advance::{lock_tasks, set_task_state};
use crate::rows::{get, parsed};
use crate::tx::Tx;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::state::StepEvent;
use shiftboss_core::{StepId, StepState, TaskId, TaskState};
use shiftboss_store::{CancelTask, ResubmitStep, StoreError, event_kind as ev};

pub async fn resubmit_step(t: &Tx<'_>, p: &ResubmitStep) -> Result<(), StoreError> {
    let not_found = || StoreError::NotFound { what: "step", id: p.step_id.to_string() };
    let row = t.query_opt("SELECT task_id FROM steps WHERE id = $1", &[&p.step_id.0]).await?.ok_or_else(not_found)?;
    let task_id = TaskId(get(&row, 0)?);
    let (_, task_state) = lock_tasks(t, &[task_id]).await?.pop().ok_or_else(not_found)?;
    // Read again under the task's lock: the state seen before it may be stale.
    let row = t.query_one("SELECT state FROM steps WHERE id = $1", &[&p.step_id.0]).await?;
    let state: StepState = parsed(&row, 0, "steps.state")?;
    let next = state.on(StepEvent::Resubmit).map_err(|_| {
        StoreError::Conflict(format!("step {} is {state}; only a step in error can be resubmitted", p.step_id))
    })?;
    if task_state == TaskState::Cancelled {
        return Err(StoreError::Conflict(format!("task {task_id} is cancelled; its steps cannot be resubmitted")));
    }
    t.execute(
        "UPDATE steps SET state = $2, failure_count = 0, due_at = $3, locked_by = NULL, complete_by = NULL,
                updated_at = $3
         WHERE id = $1 AND state = 'error'",
        &[&p.step_id.0, &next.as_str(), &t.now.0],
    )
    .await?;
    t.mark_due_now();
    t.event(task_id, Some(p.step_id), ev::STEP_RESUBMITTED, EventLevel::Info, &p.actor, json!({"reason": p.reason}))
        .await?;
    if task_state == TaskState::Failed {
        set_task_state(t, task_id, TaskState::Running).await?;
        t.event(task_id, None, ev::TASK_RESUMED, EventLevel::Info, &p.actor, json!({"step": p.step_id.0})).await?;
    }
    Ok(())
}

pub async fn cancel_task(t: &Tx<'_>, p: &CancelTask) -> Result<(), StoreError> {
    let (_, state) = lock_tasks(t, &[p.task_id])
        .await?
        .pop()
        .ok_or_else(|| StoreError::NotFound { what: "task", id: p.task_id.to_string() })?;
    if matches!(state, TaskState::Completed | TaskState::Cancelled) {
        return Err(StoreError::Conflict(format!("task {} is already {state}", p.task_id)));
    }
    // Cancelling clears the lease: a reply from the holder is then fenced off as stale. A claim of
    // one of these steps that is committing is waited for, and its step cancelled all the same.
    let rows = t
        .query(
            "UPDATE steps SET state = 'cancelled', locked_by = NULL, complete_by = NULL, updated_at = $2
             WHERE task_id = $1 AND state IN ('pending', 'processing')
             RETURNING id",
            &[&p.task_id.0, &t.now.0],
        )
        .await?;
    let mut live = rows.iter().map(|r| get::<i64>(r, 0)).collect::<Result<Vec<_>, _>>()?;
    live.sort_unstable();
    for id in live {
        t.event(p.task_id, Some(StepId(id)), ev::STEP_CANCELLED, EventLevel::Info, &p.actor, json!({})).await?;
    }
    set_task_state(t, p.task_id, TaskState::Cancelled).await?;
    t.event(p.task_id, None, ev::TASK_CANCELLED, EventLevel::Info, &p.actor, json!({"reason": p.reason})).await
}
