//! Operator actions: resubmit a failed step, cancel a task. Each is recorded with who and why.

use crate::advance::set_task_state;
use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{OptionalExtension, params};
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::state::StepEvent;
use shiftboss_core::{StepId, StepState, TaskId, TaskState};
use shiftboss_store::{CancelTask, ResubmitStep, StoreError, event_kind as ev};

pub fn resubmit_step(t: &Tx<'_>, p: &ResubmitStep) -> Result<(), StoreError> {
    let row: Option<(i64, String, String)> =
        t.tx.query_row(
            "SELECT s.task_id, s.state, t.state FROM steps s JOIN tasks t ON t.id = s.task_id WHERE s.id = ?1",
            [p.step_id.0],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(map_err)?;
    let (task_id, state, task_state) =
        row.ok_or_else(|| StoreError::NotFound { what: "step", id: p.step_id.to_string() })?;
    let state: StepState = state.parse().map_err(|e| StoreError::Incompatible(format!("steps.state: {e}")))?;
    let next = state.on(StepEvent::Resubmit).map_err(|_| {
        StoreError::Conflict(format!("step {} is {state}; only a step in error can be resubmitted", p.step_id))
    })?;
    if task_state == TaskState::Cancelled.as_str() {
        return Err(StoreError::Conflict(format!("task {task_id} is cancelled; its steps cannot be resubmitted")));
    }
    t.tx.execute(
        "UPDATE steps SET state = ?2, failure_count = 0, due_at = ?3, locked_by = NULL, complete_by = NULL, updated_at = ?3
         WHERE id = ?1 AND state = 'error'",
        params![p.step_id.0, next.as_str(), t.now.0],
    )
    .map_err(map_err)?;
    let task_id = TaskId(task_id);
    t.event(task_id, Some(p.step_id), ev::STEP_RESUBMITTED, EventLevel::Info, &p.actor, json!({"reason": p.reason}))?;
    if task_state == TaskState::Failed.as_str() {
        set_task_state(t, task_id, TaskState::Running)?;
        t.event(task_id, None, ev::TASK_RESUMED, EventLevel::Info, &p.actor, json!({"step": p.step_id.0}))?;
    }
    Ok(())
}

pub fn cancel_task(t: &Tx<'_>, p: &CancelTask) -> Result<(), StoreError> {
    let state: Option<String> =
        t.tx.query_row("SELECT state FROM tasks WHERE id = ?1", [p.task_id.0], |r| r.get(0))
            .optional()
            .map_err(map_err)?;
    let state = state.ok_or_else(|| StoreError::NotFound { what: "task", id: p.task_id.to_string() })?;
    if state == TaskState::Completed.as_str() || state == TaskState::Cancelled.as_str() {
        return Err(StoreError::Conflict(format!("task {} is already {state}", p.task_id)));
    }
    let live: Vec<i64> = {
        let mut st =
            t.tx.prepare("SELECT id FROM steps WHERE task_id = ?1 AND state IN ('pending', 'processing')")
                .map_err(map_err)?;
        let ids = st.query_map([p.task_id.0], |r| r.get(0)).map_err(map_err)?;
        ids.collect::<Result<_, _>>().map_err(map_err)?
    };
    // Cancelling clears the lease: a reply from the holder is then fenced off as stale.
    t.tx.execute(
        "UPDATE steps SET state = 'cancelled', locked_by = NULL, complete_by = NULL, updated_at = ?2
         WHERE task_id = ?1 AND state IN ('pending', 'processing')",
        params![p.task_id.0, t.now.0],
    )
    .map_err(map_err)?;
    for id in live {
        t.event(p.task_id, Some(StepId(id)), ev::STEP_CANCELLED, EventLevel::Info, &p.actor, json!({}))?;
    }
    set_task_state(t, p.task_id, TaskState::Cancelled)?;
    t.event(p.task_id, None, ev::TASK_CANCELLED, EventLevel::Info, &p.actor, json!({"reason": p.reason}))
}
