//! Writing a task's step rows as the decider asks: create, move a control step, cancel. The caller
//! holds the task's lock.

use crate::advance::TaskRow;
use crate::children::{children_of, end_tree};
use crate::lock::lock_child;
use crate::rows::get;
use crate::tx::Tx;
use serde_json::{Value, json};
use shiftboss_core::decider::NewStep;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{StepId, StepState, TaskId, TaskState};
use shiftboss_store::{StoreError, decided, event_kind as ev};

/// Inserts a new step row; an agent step due now rings the due-work bell at commit. A step takes
/// its task's stored bucket (a task from before buckets keeps bucket 0 for all its steps).
pub async fn insert_step(
    t: &Tx<'_>,
    task_id: TaskId,
    task: &TaskRow,
    def: &WorkflowDef,
    n: &NewStep,
) -> Result<StepId, StoreError> {
    let new = decided::step_row(def, n, task.priority, t.now)?;
    let row = t
        .query_one(
            "INSERT INTO steps (task_id, name, agent, state, due_at, priority, input, output, idempotency_key,
                                timeout_ms, config, retry, created_at, updated_at, bucket, kind, compensates, domain,
                                fallback_at, response_timeout_ms, on_timeout)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13,
                     (SELECT bucket FROM tasks WHERE id = $1), $14, $15, $16, $17, $18, $19)
             RETURNING id",
            &[
                &task_id.0,
                &n.name,
                &new.agent,
                &n.state.as_str(),
                &new.due_at,
                &new.priority,
                &new.input,
                &new.output,
                &new.idempotency_key,
                &new.timeout_ms,
                &new.config,
                &new.retry,
                &t.now.0,
                &new.kind,
                &n.compensates,
                &new.domain,
                &new.fallback_at,
                &new.response_timeout_ms,
                &new.on_timeout,
            ],
        )
        .await?;
    if new.queues_work(n.state) {
        t.mark_queued();
    }
    Ok(StepId(get(&row, 0)?))
}

/// Moves a control step; returns its id (none if the task has no such row).
pub async fn update_step(
    t: &Tx<'_>,
    task_id: TaskId,
    name: &str,
    state: StepState,
    output: Option<&Value>,
    error: Option<&str>,
) -> Result<Option<StepId>, StoreError> {
    let row = t
        .query_opt(
            "UPDATE steps SET state = $3, output = $4, last_error = $5, updated_at = $6
             WHERE task_id = $1 AND name = $2 RETURNING id",
            &[&task_id.0, &name, &state.as_str(), &output.map(Value::to_string), &error, &t.now.0],
        )
        .await?;
    row.map(|r| get(&r, 0).map(StepId)).transpose()
}

/// Cancels one live step; a sub-workflow's child tasks are cancelled with it.
pub async fn cancel_step(t: &Tx<'_>, task_id: TaskId, name: &str, actor: &str) -> Result<(), StoreError> {
    // Cancelling clears the lease: a reply from the holder is then fenced off as stale. A claim of
    // this step that is committing is waited for, and the step cancelled all the same.
    let row = t
        .query_opt(
            "UPDATE steps SET state = 'cancelled', locked_by = NULL, complete_by = NULL, updated_at = $3
             WHERE task_id = $1 AND name = $2 AND state IN ('pending', 'processing') RETURNING id, kind",
            &[&task_id.0, &name, &t.now.0],
        )
        .await?;
    let Some(row) = row else { return Ok(()) };
    let id = StepId(get(&row, 0)?);
    t.event(task_id, Some(id), ev::STEP_CANCELLED, EventLevel::Info, actor, json!({"step": name})).await?;
    if get::<&str>(&row, 1)? == StepKind::SubWorkflow.as_str() {
        end_children(t, task_id, name, "its parent's step was cancelled", actor).await?;
    }
    Ok(())
}

/// Cancels the live child tasks (and theirs) that a parent's step started.
pub async fn end_children(t: &Tx<'_>, parent: TaskId, step: &str, why: &str, actor: &str) -> Result<(), StoreError> {
    for child in children_of(t, parent, step).await? {
        lock_child(t, child).await?;
        end_tree(t, child, TaskState::Cancelled, actor, json!({"reason": why})).await?;
    }
    Ok(())
}
