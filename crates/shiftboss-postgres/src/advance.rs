//! Moving a task on: run the decider on its current steps and write what it decides, inside the
//! transaction that changed a step; and the task lock that keeps two deciders off one task (C7).

use crate::rows::{get, opt_json, parsed};
use crate::tx::Tx;
use serde_json::json;
use shiftboss_core::decider::{Decision, StepView, decide};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepDef, WorkflowDef};
use shiftboss_core::{StepId, StepState, TaskId, TaskState, time::duration_ms};
use shiftboss_store::{StoreError, event_kind as ev};

/// Locks the rows of these tasks until the transaction ends and returns their states (a task that
/// does not exist is left out).
///
/// Every operation that runs the decider or changes a step on a task's behalf calls this before it
/// reads the task's steps, so two deciders never interleave on one task, in this process or another.
/// Rows are locked in ascending id order: two calls that lock several tasks then never wait on each
/// other in a cycle (no deadlock between a sweep and a batch of replies).
pub async fn lock_tasks(t: &Tx<'_>, ids: &[TaskId]) -> Result<Vec<(TaskId, TaskState)>, StoreError> {
    let mut ids: Vec<i64> = ids.iter().map(|i| i.0).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    // The locking clause sits above the sort in the plan, so rows are locked in the ORDER BY's order.
    let rows = t.query("SELECT id, state FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE", &[&ids]).await?;
    rows.iter().map(|r| Ok((TaskId(get(r, 0)?), parsed(r, 1, "tasks.state")?))).collect()
}

pub struct Advanced {
    pub state: TaskState,
    pub scheduled: u32,
}

/// The caller holds the task's lock (see [`lock_tasks`]).
pub async fn advance_task(t: &Tx<'_>, task_id: TaskId, actor: &str) -> Result<Advanced, StoreError> {
    let row = t
        .query_opt("SELECT state, workflow, workflow_version, input, priority FROM tasks WHERE id = $1", &[&task_id.0])
        .await?
        .ok_or_else(|| StoreError::NotFound { what: "task", id: task_id.to_string() })?;
    let state: TaskState = parsed(&row, 0, "tasks.state")?;
    if state != TaskState::Running {
        return Ok(Advanced { state, scheduled: 0 });
    }
    let workflow: &str = get(&row, 1)?;
    let version = crate::rows::count(&row, 2, "tasks.workflow_version")?;
    let input: &str = get(&row, 3)?;
    let priority: i32 = get(&row, 4)?;
    let def = t.definition(workflow, version).await?;
    let steps = load_views(t, task_id).await?;
    let views: Vec<StepView<'_>> =
        steps.iter().map(|(n, s, o)| StepView { name: n, state: *s, output: o.as_ref() }).collect();
    let (new_state, detail, level, kind) = match decide(&def, &views) {
        Decision::Wait => return Ok(Advanced { state, scheduled: 0 }),
        Decision::Schedule(indexes) => {
            for &i in &indexes {
                insert_step(t, task_id, &def, &def.steps[i], input, priority, actor).await?;
            }
            return Ok(Advanced { state, scheduled: indexes.len() as u32 });
        }
        Decision::Complete { output } => {
            t.execute(
                "UPDATE tasks SET state = 'completed', output = $2, updated_at = $3 WHERE id = $1",
                &[&task_id.0, &output.to_string(), &t.now.0],
            )
            .await?;
            (TaskState::Completed, json!({}), EventLevel::Info, ev::TASK_COMPLETED)
        }
        Decision::Fail { step } => {
            set_task_state(t, task_id, TaskState::Failed).await?;
            (TaskState::Failed, json!({"step": step}), EventLevel::Alert, ev::TASK_FAILED)
        }
        Decision::Cancelled => {
            set_task_state(t, task_id, TaskState::Cancelled).await?;
            (TaskState::Cancelled, json!({}), EventLevel::Info, ev::TASK_CANCELLED)
        }
    };
    t.event(task_id, None, kind, level, actor, detail).await?;
    Ok(Advanced { state: new_state, scheduled: 0 })
}

pub async fn set_task_state(t: &Tx<'_>, task_id: TaskId, state: TaskState) -> Result<(), StoreError> {
    t.execute("UPDATE tasks SET state = $2, updated_at = $3 WHERE id = $1", &[&task_id.0, &state.as_str(), &t.now.0])
        .await?;
    Ok(())
}

type View = (String, StepState, Option<serde_json::Value>);

async fn load_views(t: &Tx<'_>, task_id: TaskId) -> Result<Vec<View>, StoreError> {
    let rows = t.query("SELECT name, state, output FROM steps WHERE task_id = $1 ORDER BY id", &[&task_id.0]).await?;
    rows.iter().map(|r| Ok((get(r, 0)?, parsed(r, 1, "steps.state")?, opt_json(r, 2, "steps.output")?))).collect()
}

async fn insert_step(
    t: &Tx<'_>,
    task_id: TaskId,
    def: &WorkflowDef,
    step: &StepDef,
    input: &str,
    task_priority: i32,
    actor: &str,
) -> Result<(), StoreError> {
    let retry = def.retry_for(step).map(|p| serde_json::to_string(p).expect("policy serializes"));
    let key = uuid::Uuid::new_v4().to_string();
    let priority = step.priority_in(task_priority);
    let row = t
        .query_one(
            "INSERT INTO steps (task_id, name, agent, state, due_at, priority, input, idempotency_key, timeout_ms,
                                config, retry, created_at, updated_at, bucket)
             VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7, $8, $9, $10, $4, $4,
                     (SELECT bucket FROM tasks WHERE id = $1))
             RETURNING id",
            &[
                &task_id.0,
                &step.name,
                &step.agent,
                &t.now.0,
                &priority,
                &input,
                &key,
                &duration_ms(step.timeout),
                &step.config.to_string(),
                &retry,
            ],
        )
        .await?;
    let step_id = StepId(get(&row, 0)?);
    t.mark_due_now();
    t.event(task_id, Some(step_id), ev::STEP_SCHEDULED, EventLevel::Info, actor, json!({"step": step.name})).await
}
