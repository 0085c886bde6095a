//! Sub-workflows: a parent's step starts a child task, the child's end moves that step on, and a
//! task ended from outside ends its children with it. All in the transaction that caused it, under
//! the locks of `lock` (a parent before its child).

use crate::advance::{Boxed, TaskRow, advance_task, mark_again, set_task_state};
use crate::lock::{held, lock_tasks};
use crate::rows::get;
use crate::steps::{cancel_step, update_step};
use crate::tx::{Tx, pg_int};
use serde_json::{Value, json};
use shiftboss_core::buckets::bucket_of;
use shiftboss_core::decider::ChildTask;
use shiftboss_core::model::EventLevel;
use shiftboss_core::{StepId, StepState, TaskId, TaskState};
use shiftboss_store::{StoreError, decided, event_kind as ev};

/// How deep sub-workflows may nest: a workflow that starts itself stops here, with an error.
pub const MAX_CHILD_DEPTH: i32 = 16;

/// Starts the child task of a parent's new sub-workflow step, and lets it decide at once. A child
/// that cannot start fails the step, and the parent decides again.
pub async fn start_child(
    t: &Tx<'_>,
    parent: TaskId,
    task: &TaskRow,
    step_id: StepId,
    step: &str,
    child: &ChildTask,
    actor: &str,
) -> Result<(), StoreError> {
    let fail = async |why: String| child_failed(t, parent, step_id, step, &why, actor).await;
    if task.depth + 1 > MAX_CHILD_DEPTH {
        return fail(format!("sub-workflows nest at most {MAX_CHILD_DEPTH} deep")).await;
    }
    let version = match child.version {
        Some(v) => Some(v),
        None => crate::submit::latest_version(t, &child.workflow).await?,
    };
    let Some(version) = version else {
        return fail(format!("workflow {:?} is not registered", child.workflow)).await;
    };
    let def = match t.definition(&child.workflow, version).await {
        Ok(d) => d,
        // A missing or unreadable definition is the parent's step failing; anything else (the
        // database) is the whole call's.
        Err(e @ (StoreError::NotFound { .. } | StoreError::Incompatible(_))) => {
            return fail(format!("workflow {:?} version {version}: {e}", child.workflow)).await;
        }
        Err(e) => return Err(e),
    };
    // The step's row id makes the key unique even when a retry starts a new child.
    let key = format!("{}/{step}/{}", task.key, step_id.0);
    let deadline = def.timeout.map(|d| t.now.plus(d).0);
    let row = t
        .query_opt(
            "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at,
                                bucket, parent_task_id, parent_step, depth, deadline_at)
             VALUES ($1, $2, $3, 'running', $4, $5, $6, $6, $7, $8, $9, $10, $11)
             ON CONFLICT (task_key) DO NOTHING
             RETURNING id",
            &[
                &key,
                &child.workflow,
                &pg_int(version)?,
                &task.priority,
                &child.input.to_string(),
                &t.now.0,
                &i32::from(bucket_of(&key)),
                &parent.0,
                &step,
                &(task.depth + 1),
                &deadline,
            ],
        )
        .await?;
    // Someone submitted a task under this key by hand: the child cannot have it.
    let Some(row) = row else {
        return fail(format!("the child's task key {key:?} is taken by another task")).await;
    };
    let child_id = TaskId(get(&row, 0)?);
    held(t, child_id);
    update_step(t, parent, step, StepState::Processing, Some(&child_ref(child_id)), None).await?;
    t.event(parent, Some(step_id), ev::CHILD_STARTED, EventLevel::Info, actor, json!({"task_id": child_id.0})).await?;
    let detail = json!({"key": key, "workflow": child.workflow, "version": version, "parent": parent.0});
    t.event(child_id, None, ev::TASK_RECEIVED, EventLevel::Info, actor, detail).await?;
    advance_task(t, child_id, actor).await?;
    Ok(())
}

/// What a running sub-workflow step's output holds: its child.
fn child_ref(child: TaskId) -> Value {
    json!({"task_id": child.0})
}

async fn child_failed(
    t: &Tx<'_>,
    parent: TaskId,
    step_id: StepId,
    step: &str,
    why: &str,
    actor: &str,
) -> Result<(), StoreError> {
    update_step(t, parent, step, StepState::Error, None, Some(why)).await?;
    let detail = json!({"step": step, "error": why});
    t.event(parent, Some(step_id), ev::STEP_ERROR, EventLevel::Alert, actor, detail).await?;
    mark_again(t, parent);
    Ok(())
}

/// The live child tasks a parent's step started.
pub async fn children_of(t: &Tx<'_>, parent: TaskId, step: &str) -> Result<Vec<TaskId>, StoreError> {
    let rows = t
        .query(
            "SELECT id FROM tasks WHERE parent_task_id = $1 AND parent_step = $2
             AND state IN ('running', 'paused', 'compensating') ORDER BY id",
            &[&parent.0, &step],
        )
        .await?;
    rows.iter().map(|r| get(r, 0).map(TaskId)).collect()
}

/// Ends a task from outside (cancel, terminate, its parent's step cancelled): its live steps are
/// cancelled, children too. The caller holds the task's lock.
pub fn end_tree<'a>(t: &'a Tx<'_>, task_id: TaskId, state: TaskState, actor: &'a str, detail: Value) -> Boxed<'a, ()> {
    Box::pin(async move {
        let live = t
            .query(
                "SELECT name FROM steps WHERE task_id = $1 AND state IN ('pending', 'processing') ORDER BY id",
                &[&task_id.0],
            )
            .await?;
        for r in &live {
            cancel_step(t, task_id, get(r, 0)?, actor).await?;
        }
        set_task_state(t, task_id, state).await?;
        let kind = if state == TaskState::Terminated { ev::TASK_TERMINATED } else { ev::TASK_CANCELLED };
        t.event(task_id, None, kind, EventLevel::Info, actor, detail).await?;
        // An operator ending a child fails its parent's step; a parent ending its child finds its
        // own step already cancelled, and nothing moves.
        tell_parent(t, task_id, state, None, actor).await
    })
}

/// A task ended: if it is a child, its parent's step ends with it and the parent moves on.
pub async fn tell_parent(
    t: &Tx<'_>,
    child: TaskId,
    state: TaskState,
    output: Option<&Value>,
    actor: &str,
) -> Result<(), StoreError> {
    let link = t.query_opt("SELECT parent_task_id, parent_step FROM tasks WHERE id = $1", &[&child.0]).await?;
    let Some(link) = link else { return Ok(()) };
    let (Some(parent), Some(step)) = (get::<Option<i64>>(&link, 0)?, get::<Option<String>>(&link, 1)?) else {
        return Ok(());
    };
    let parent = TaskId(parent);
    // Held already: whoever locked the child locked its ancestors first. This costs nothing then.
    lock_tasks(t, &[parent]).await?;
    let (step_state, error) = decided::child_result(child, state);
    let output = output.cloned().unwrap_or(Value::Null);
    // Only the step still waiting for this very child moves: a parent that moved on (or reran the
    // step, which started another child under the same name) ignores it.
    let row = t
        .query_opt(
            "UPDATE steps SET state = $3, output = $4, last_error = $5, updated_at = $6
             WHERE task_id = $1 AND name = $2 AND state = 'processing' AND kind = 'sub_workflow' AND output = $7
             RETURNING id",
            &[
                &parent.0,
                &step,
                &step_state.as_str(),
                &output.to_string(),
                &error,
                &t.now.0,
                &child_ref(child).to_string(),
            ],
        )
        .await?;
    let Some(row) = row else { return Ok(()) };
    let (kind, level) = match step_state {
        StepState::Processed => (ev::STEP_PROCESSED, EventLevel::Info),
        _ => (ev::STEP_ERROR, EventLevel::Alert),
    };
    let detail = json!({"step": step, "child": child.0, "error": error});
    t.event(parent, Some(StepId(get(&row, 0)?)), kind, level, actor, detail).await?;
    if !mark_again(t, parent) {
        advance_task(t, parent, actor).await?;
    }
    Ok(())
}
