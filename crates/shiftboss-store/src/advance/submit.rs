//! Submitting a task (P12): its row, its `task.received` event and its first decide, in the
//! caller's transaction. Idempotent by key: the same key with the same workflow and input gives
//! back the existing task, live or archived; with another, a `Conflict`.

use super::decide::advance_new_task;
use super::tx::{NewTask, TaskRow, WriteTx};
use crate::event_kind as ev;
use crate::{StoreError, SubmitTask, Submitted};
use serde_json::json;
use shiftboss_core::TaskState;
use shiftboss_core::model::EventLevel;

pub async fn submit_task<T: WriteTx>(t: &T, p: &SubmitTask) -> Result<Submitted, StoreError> {
    p.validate()?;
    if let Some((id, workflow, input)) = t.key_owner(&p.key).await? {
        return p.resubmission(id, &workflow, &input);
    }
    let version = match p.version {
        Some(v) => v,
        None => t
            .latest_version(&p.workflow)
            .await?
            .ok_or_else(|| StoreError::InvalidInput(format!("unknown workflow {:?}", p.workflow)))?,
    };
    // Loads (and checks) the definition before anything is written.
    let def = t.definition(&p.workflow, version).await.map_err(|e| match e {
        StoreError::NotFound { .. } => {
            StoreError::InvalidInput(format!("unknown workflow {:?} version {version}", p.workflow))
        }
        other => other,
    })?;
    let new = NewTask {
        key: &p.key,
        workflow: &p.workflow,
        version,
        priority: p.priority,
        input: &p.input,
        parent: None,
        depth: 0,
        deadline_at: def.timeout.map(|d| t.now().plus(d).0),
    };
    let Some(task_id) = t.insert_task(&new).await? else {
        // Another caller submitted the same key since our first look, and committed.
        return match t.key_owner(&p.key).await? {
            Some((id, workflow, input)) => p.resubmission(id, &workflow, &input),
            None => Err(StoreError::Unavailable(format!(
                "task key {:?} was taken and released concurrently; try again",
                p.key
            ))),
        };
    };
    if let Some((id, workflow, input)) = t.archived_owner(&p.key, task_id).await? {
        return p.resubmission(id, &workflow, &input);
    }
    let detail = json!({"key": p.key, "workflow": p.workflow, "version": version});
    t.event(task_id, None, ev::TASK_RECEIVED, EventLevel::Info, &p.actor, detail).await?;
    let row = TaskRow {
        state: TaskState::Running,
        workflow: p.workflow.clone(),
        version,
        input: p.input.clone(),
        key: p.key.clone(),
        priority: p.priority,
        depth: 0,
        is_child: false,
    };
    advance_new_task(t, task_id, row, &p.actor).await?;
    Ok(Submitted { task_id, created: true })
}
