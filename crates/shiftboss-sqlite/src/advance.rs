//! Moving a task on: run the decider on its current steps and write what it decides, inside the
//! transaction that changed a step.

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{OptionalExtension, params};
use serde_json::json;
use shiftboss_core::decider::{Decision, StepView, decide};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepDef, WorkflowDef};
use shiftboss_core::{StepState, TaskId, TaskState, time::duration_ms};
use shiftboss_store::{StoreError, event_kind as ev};

pub struct Advanced {
    pub state: TaskState,
    pub scheduled: u32,
}

pub fn advance_task(t: &Tx<'_>, task_id: TaskId, actor: &str) -> Result<Advanced, StoreError> {
    let row =
        t.tx.query_row(
            "SELECT state, workflow, workflow_version, input, priority FROM tasks WHERE id = ?1",
            [task_id.0],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i32>(4)?,
                ))
            },
        )
        .optional()
        .map_err(map_err)?
        .ok_or_else(|| StoreError::NotFound { what: "task", id: task_id.to_string() })?;
    let (state, workflow, version, input, priority) = row;
    let state: TaskState = state.parse().map_err(|e| StoreError::Incompatible(format!("tasks.state: {e}")))?;
    if state != TaskState::Running {
        return Ok(Advanced { state, scheduled: 0 });
    }
    let def = t.definition(&workflow, version)?;
    let steps = load_views(t, task_id)?;
    let views: Vec<StepView<'_>> =
        steps.iter().map(|(n, s, o)| StepView { name: n, state: *s, output: o.as_ref() }).collect();
    let (new_state, detail, level, kind) = match decide(&def, &views) {
        Decision::Wait => return Ok(Advanced { state, scheduled: 0 }),
        Decision::Schedule(indexes) => {
            for &i in &indexes {
                insert_step(t, task_id, &def, &def.steps[i], &input, priority, actor)?;
            }
            return Ok(Advanced { state, scheduled: indexes.len() as u32 });
        }
        Decision::Complete { output } => {
            t.tx.execute(
                "UPDATE tasks SET state = 'completed', output = ?2, updated_at = ?3 WHERE id = ?1",
                params![task_id.0, output.to_string(), t.now.0],
            )
            .map_err(map_err)?;
            (TaskState::Completed, json!({}), EventLevel::Info, ev::TASK_COMPLETED)
        }
        Decision::Fail { step } => {
            set_task_state(t, task_id, TaskState::Failed)?;
            (TaskState::Failed, json!({"step": step}), EventLevel::Alert, ev::TASK_FAILED)
        }
        Decision::Cancelled => {
            set_task_state(t, task_id, TaskState::Cancelled)?;
            (TaskState::Cancelled, json!({}), EventLevel::Info, ev::TASK_CANCELLED)
        }
    };
    t.event(task_id, None, kind, level, actor, detail)?;
    Ok(Advanced { state: new_state, scheduled: 0 })
}

pub fn set_task_state(t: &Tx<'_>, task_id: TaskId, state: TaskState) -> Result<(), StoreError> {
    t.tx.execute(
        "UPDATE tasks SET state = ?2, updated_at = ?3 WHERE id = ?1",
        params![task_id.0, state.as_str(), t.now.0],
    )
    .map_err(map_err)?;
    Ok(())
}

type View = (String, StepState, Option<serde_json::Value>);

fn load_views(t: &Tx<'_>, task_id: TaskId) -> Result<Vec<View>, StoreError> {
    let mut st =
        t.tx.prepare_cached("SELECT name, state, output FROM steps WHERE task_id = ?1 ORDER BY id").map_err(map_err)?;
    let rows = st
        .query_map([task_id.0], |r| {
            Ok((
                r.get::<_, String>(0)?,
                crate::rows::parsed::<StepState>(r, 1, "steps.state")?,
                crate::rows::opt_json(r, 2, "steps.output")?,
            ))
        })
        .map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

fn insert_step(
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
    t.tx.prepare_cached(
        "INSERT INTO steps (task_id, name, agent, state, due_at, priority, input, idempotency_key, timeout_ms, config, retry, created_at, updated_at, bucket)
         VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?4, ?4, (SELECT bucket FROM tasks WHERE id = ?1))",
    )
    .and_then(|mut st| {
        st.execute(params![
            task_id.0,
            step.name,
            step.agent,
            t.now.0,
            priority,
            input,
            key,
            duration_ms(step.timeout),
            step.config.to_string(),
            retry
        ])
    })
    .map_err(map_err)?;
    let step_id = shiftboss_core::StepId(t.tx.last_insert_rowid());
    t.event(task_id, Some(step_id), ev::STEP_SCHEDULED, EventLevel::Info, actor, json!({"step": step.name}))
}
