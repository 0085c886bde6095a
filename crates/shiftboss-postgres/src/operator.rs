//! Operator actions (P16): resubmit a failed step, cancel, pause, resume, terminate, retry, rerun,
//! skip, signal. Each is recorded with who and why; what they do to the rows is planned by the
//! core (`decider::operator`), and the decider runs again in the same transaction.
//!
//! Each locks the task (with its ancestors, see `lock`) before it reads the task or its steps, so
//! that its checks and its writes see one state, and no decider runs on the task meanwhile (C7).

use crate::advance::{advance_task, load_task, load_views, set_task_state};
use crate::children::end_tree;
use crate::lock::lock_tasks;
use crate::rows::get;
use crate::steps::{cancel_step, end_children, update_step};
use crate::tx::Tx;
use serde_json::{Value, json};
use shiftboss_core::decider::needs_compensation;
use shiftboss_core::decider::operator::{
    Plan, RowChange, plan_rerun, plan_resubmit, plan_retry, plan_skip, waiting_for,
};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepId, StepState, TaskId, TaskState};
use shiftboss_store::{OperateTask, ResubmitStep, StoreError, TaskCommand, event_kind as ev};

/// Pending steps of a paused task wait here: no claim reaches them until the task resumes.
pub const HELD: i64 = i64::MAX;

pub async fn resubmit_step(t: &Tx<'_>, p: &ResubmitStep) -> Result<(), StoreError> {
    let not_found = || StoreError::NotFound { what: "step", id: p.step_id.to_string() };
    // A step's task never changes, so this read needs no lock.
    let row = t.query_opt("SELECT task_id FROM steps WHERE id = $1", &[&p.step_id.0]).await?.ok_or_else(not_found)?;
    let task_id = TaskId(get(&row, 0)?);
    lock_tasks(t, &[task_id]).await?;
    // Read again under the task's lock: a rerun may have removed the step meanwhile.
    let row = t.query_opt("SELECT name FROM steps WHERE id = $1", &[&p.step_id.0]).await?.ok_or_else(not_found)?;
    let name: String = get(&row, 0)?;
    let task = load_task(t, task_id).await?;
    let def = t.definition(&task.workflow, task.version).await?;
    let plan = plan_resubmit(&def, task.state, &load_views(t, task_id).await?, &name)
        .map_err(|why| StoreError::Conflict(format!("step {}: {why}", p.step_id)))?;
    let detail = json!({"reason": p.reason});
    t.event(task_id, Some(p.step_id), ev::STEP_RESUBMITTED, EventLevel::Info, &p.actor, detail).await?;
    carry_out(t, task_id, task.state, plan, &p.actor).await
}

pub async fn operate_task(t: &Tx<'_>, p: &OperateTask) -> Result<(), StoreError> {
    let id = p.task_id;
    lock_tasks(t, &[id]).await?;
    let task = load_task(t, id).await?;
    let refuse = |why: String| StoreError::Conflict(format!("task {id}: {why}"));
    let detail = json!({"command": p.command.as_str(), "reason": p.reason});
    let def = t.definition(&task.workflow, task.version).await?;
    match &p.command {
        TaskCommand::Pause => {
            if task.state != TaskState::Running {
                return Err(refuse(format!("only a running task can be paused; it is {}", task.state)));
            }
            t.execute(
                "UPDATE steps SET due_at = $2, updated_at = $3 WHERE task_id = $1 AND state = 'pending'",
                &[&id.0, &HELD, &t.now.0],
            )
            .await?;
            set_task_state(t, id, TaskState::Paused).await?;
            t.event(id, None, ev::TASK_PAUSED, EventLevel::Info, &p.actor, detail).await
        }
        TaskCommand::Resume => {
            if task.state != TaskState::Paused {
                return Err(refuse(format!("only a paused task can be resumed; it is {}", task.state)));
            }
            let released = t
                .execute(
                    "UPDATE steps SET due_at = $3, updated_at = $3
                     WHERE task_id = $1 AND state = 'pending' AND due_at = $2",
                    &[&id.0, &HELD, &t.now.0],
                )
                .await?;
            if released > 0 {
                t.mark_due_now();
            }
            set_task_state(t, id, TaskState::Running).await?;
            t.event(id, None, ev::TASK_RESUMED, EventLevel::Info, &p.actor, detail).await?;
            advance_task(t, id, &p.actor).await.map(|_| ())
        }
        TaskCommand::Terminate => {
            if task.state.is_terminal() {
                return Err(refuse(format!("it has already ended ({})", task.state)));
            }
            end_tree(t, id, TaskState::Terminated, &p.actor, detail).await
        }
        TaskCommand::Cancel => {
            if task.state.is_terminal() {
                return Err(refuse(format!("it has already ended ({})", task.state)));
            }
            let rows = load_views(t, id).await?;
            if def.compensate_on_cancel && task.state != TaskState::Compensating && needs_compensation(&def, &rows) {
                // Stop what runs (children included), then undo what is done.
                for r in rows.iter().filter(|r| r.is_live()) {
                    cancel_step(t, id, &r.name, &p.actor).await?;
                }
                set_task_state(t, id, TaskState::Compensating).await?;
                t.event(id, None, ev::TASK_COMPENSATING, EventLevel::Info, &p.actor, detail).await?;
                return advance_task(t, id, &p.actor).await.map(|_| ());
            }
            end_tree(t, id, TaskState::Cancelled, &p.actor, detail).await
        }
        TaskCommand::Retry => {
            let plan = plan_retry(&def, task.state, &load_views(t, id).await?).map_err(refuse)?;
            t.event(id, None, ev::TASK_OPERATED, EventLevel::Info, &p.actor, detail).await?;
            carry_out(t, id, task.state, plan, &p.actor).await
        }
        TaskCommand::Rerun { from } => {
            let plan = plan_rerun(&def, task.state, &load_views(t, id).await?, from).map_err(refuse)?;
            t.execute("UPDATE tasks SET output = NULL WHERE id = $1", &[&id.0]).await?;
            let detail = json!({"command": "rerun", "from": from, "reason": p.reason});
            t.event(id, None, ev::TASK_OPERATED, EventLevel::Info, &p.actor, detail).await?;
            carry_out(t, id, task.state, plan, &p.actor).await
        }
        TaskCommand::Skip { step, output } => {
            let plan = plan_skip(&def, task.state, &load_views(t, id).await?, step, output.clone()).map_err(refuse)?;
            let step_id = step_id(t, id, step).await?;
            let detail = json!({"step": step, "output": output, "reason": p.reason});
            t.event(id, step_id, ev::STEP_SKIPPED, EventLevel::Info, &p.actor, detail).await?;
            carry_out(t, id, task.state, plan, &p.actor).await
        }
        TaskCommand::Signal { name, payload } => {
            if !matches!(task.state, TaskState::Running | TaskState::Paused) {
                return Err(refuse(format!("it is {}; only a running or paused task takes signals", task.state)));
            }
            let rows = load_views(t, id).await?;
            let waiting = waiting_for(&def, &rows, name);
            let Some(wait) = waiting else {
                return Err(refuse(format!("no wait step is waiting for {name:?}")));
            };
            let step_id = update_step(t, id, &wait.name, StepState::Processed, Some(payload), None).await?;
            let detail = json!({"step": wait.name, "signal": name, "payload": payload, "reason": p.reason});
            t.event(id, step_id, ev::WAIT_ENDED, EventLevel::Info, &p.actor, detail).await?;
            advance_task(t, id, &p.actor).await.map(|_| ())
        }
    }
}

async fn step_id(t: &Tx<'_>, task: TaskId, name: &str) -> Result<Option<StepId>, StoreError> {
    let row = t.query_opt("SELECT id FROM steps WHERE task_id = $1 AND name = $2", &[&task.0, &name]).await?;
    row.map(|r| get(&r, 0).map(StepId)).transpose()
}

/// Writes an operator's plan, sets the task's state, and lets the decider go on.
async fn carry_out(t: &Tx<'_>, task: TaskId, was: TaskState, plan: Plan, actor: &str) -> Result<(), StoreError> {
    let paused = plan.task_state == TaskState::Paused;
    for change in plan.changes {
        match change {
            RowChange::Reset { name } => {
                let due = if paused { HELD } else { t.now.0 };
                t.execute(
                    "UPDATE steps SET state = 'pending', failure_count = 0, due_at = $3, locked_by = NULL,
                            complete_by = NULL, last_error = NULL, updated_at = $4
                     WHERE task_id = $1 AND name = $2",
                    &[&task.0, &name, &due, &t.now.0],
                )
                .await?;
                if !paused {
                    t.mark_due_now();
                }
            }
            RowChange::Reopen { name, output } => {
                update_step(t, task, &name, StepState::Processing, output.as_ref(), None).await?;
            }
            RowChange::Delete { name } => {
                let row = t
                    .query_opt("DELETE FROM steps WHERE task_id = $1 AND name = $2 RETURNING kind", &[&task.0, &name])
                    .await?;
                // A sub-workflow that runs again starts a new child: the old one must not go on
                // working (it would also end a step that no longer waits for it).
                if let Some(row) = row
                    && get::<&str>(&row, 0)? == StepKind::SubWorkflow.as_str()
                {
                    end_children(t, task, &name, "its parent's step runs again", actor).await?;
                }
            }
            RowChange::Finish { name, output } => {
                // A skipped step that was processing loses its lease: its holder's reply is fenced off.
                t.execute(
                    "UPDATE steps SET state = 'processed', output = $3, locked_by = NULL, complete_by = NULL,
                            updated_at = $4
                     WHERE task_id = $1 AND name = $2",
                    &[&task.0, &name, &Value::to_string(&output), &t.now.0],
                )
                .await?;
            }
        }
    }
    if plan.task_state != was {
        set_task_state(t, task, plan.task_state).await?;
        if plan.task_state == TaskState::Running {
            t.event(task, None, ev::TASK_RESUMED, EventLevel::Info, actor, json!({"was": was.as_str()})).await?;
        }
    }
    advance_task(t, task, actor).await.map(|_| ())
}
