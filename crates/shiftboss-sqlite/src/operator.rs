//! Operator actions (P16): resubmit a failed step, cancel, pause, resume, terminate, retry, rerun,
//! skip, signal. Each is recorded with who and why; what they do to the rows is planned by the
//! core (`decider::operator`), and the decider runs again in the same transaction.

use crate::advance::{
    advance_task, cancel_step, children_of, end_tree, load_task, load_views, set_task_state, update_step,
};
use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};
use shiftboss_core::decider::needs_compensation;
use shiftboss_core::decider::operator::{
    Plan, RowChange, plan_rerun, plan_resubmit, plan_retry, plan_skip, waiting_for,
};
use shiftboss_core::model::EventLevel;
use shiftboss_core::{StepId, StepState, TaskId, TaskState};
use shiftboss_store::{OperateTask, ResubmitStep, StoreError, TaskCommand, event_kind as ev};

/// Pending steps of a paused task wait here: no claim reaches them until the task resumes.
const HELD: i64 = i64::MAX;

pub fn resubmit_step(t: &Tx<'_>, p: &ResubmitStep) -> Result<(), StoreError> {
    let row: Option<(i64, String)> =
        t.tx.query_row("SELECT task_id, name FROM steps WHERE id = ?1", [p.step_id.0], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(map_err)?;
    let (task_id, name) = row.ok_or_else(|| StoreError::NotFound { what: "step", id: p.step_id.to_string() })?;
    let task_id = TaskId(task_id);
    let task = load_task(t, task_id)?;
    let def = t.definition(&task.workflow, task.version)?;
    let plan = plan_resubmit(&def, task.state, &load_views(t, task_id)?, &name)
        .map_err(|why| StoreError::Conflict(format!("step {}: {why}", p.step_id)))?;
    let detail = json!({"reason": p.reason});
    t.event(task_id, Some(p.step_id), ev::STEP_RESUBMITTED, EventLevel::Info, &p.actor, detail)?;
    carry_out(t, task_id, task.state, plan, &p.actor)
}

pub fn operate_task(t: &Tx<'_>, p: &OperateTask) -> Result<(), StoreError> {
    let task = load_task(t, p.task_id)?;
    let id = p.task_id;
    let refuse = |why: String| StoreError::Conflict(format!("task {id}: {why}"));
    let detail = json!({"command": p.command.as_str(), "reason": p.reason});
    let def = t.definition(&task.workflow, task.version)?;
    match &p.command {
        TaskCommand::Pause => {
            if task.state != TaskState::Running {
                return Err(refuse(format!("only a running task can be paused; it is {}", task.state)));
            }
            t.tx.execute(
                "UPDATE steps SET due_at = ?2, updated_at = ?3 WHERE task_id = ?1 AND state = 'pending'",
                params![id.0, HELD, t.now.0],
            )
            .map_err(map_err)?;
            set_task_state(t, id, TaskState::Paused)?;
            t.event(id, None, ev::TASK_PAUSED, EventLevel::Info, &p.actor, detail)
        }
        TaskCommand::Resume => {
            if task.state != TaskState::Paused {
                return Err(refuse(format!("only a paused task can be resumed; it is {}", task.state)));
            }
            t.tx.execute(
                "UPDATE steps SET due_at = ?3, updated_at = ?3 WHERE task_id = ?1 AND state = 'pending' AND due_at = ?2",
                params![id.0, HELD, t.now.0],
            )
            .map_err(map_err)?;
            set_task_state(t, id, TaskState::Running)?;
            t.event(id, None, ev::TASK_RESUMED, EventLevel::Info, &p.actor, detail)?;
            advance_task(t, id, &p.actor).map(|_| ())
        }
        TaskCommand::Terminate => {
            if task.state.is_terminal() {
                return Err(refuse(format!("it has already ended ({})", task.state)));
            }
            end_tree(t, id, TaskState::Terminated, &p.actor, detail)
        }
        TaskCommand::Cancel => {
            if task.state.is_terminal() {
                return Err(refuse(format!("it has already ended ({})", task.state)));
            }
            let rows = load_views(t, id)?;
            if def.compensate_on_cancel && task.state != TaskState::Compensating && needs_compensation(&def, &rows) {
                // Stop what runs, then undo what is done.
                for r in rows.iter().filter(|r| r.is_live()) {
                    cancel_step(t, id, &r.name, &p.actor)?;
                }
                set_task_state(t, id, TaskState::Compensating)?;
                t.event(id, None, ev::TASK_COMPENSATING, EventLevel::Info, &p.actor, detail)?;
                return advance_task(t, id, &p.actor).map(|_| ());
            }
            end_tree(t, id, TaskState::Cancelled, &p.actor, detail)
        }
        TaskCommand::Retry => {
            let plan = plan_retry(&def, task.state, &load_views(t, id)?).map_err(refuse)?;
            t.event(id, None, ev::TASK_OPERATED, EventLevel::Info, &p.actor, detail)?;
            carry_out(t, id, task.state, plan, &p.actor)
        }
        TaskCommand::Rerun { from } => {
            let plan = plan_rerun(&def, task.state, &load_views(t, id)?, from).map_err(refuse)?;
            t.tx.execute("UPDATE tasks SET output = NULL WHERE id = ?1", [id.0]).map_err(map_err)?;
            let detail = json!({"command": "rerun", "from": from, "reason": p.reason});
            t.event(id, None, ev::TASK_OPERATED, EventLevel::Info, &p.actor, detail)?;
            carry_out(t, id, task.state, plan, &p.actor)
        }
        TaskCommand::Skip { step, output } => {
            let plan = plan_skip(&def, task.state, &load_views(t, id)?, step, output.clone()).map_err(refuse)?;
            let step_id = step_id(t, id, step)?;
            let detail = json!({"step": step, "output": output, "reason": p.reason});
            t.event(id, step_id, ev::STEP_SKIPPED, EventLevel::Info, &p.actor, detail)?;
            carry_out(t, id, task.state, plan, &p.actor)
        }
        TaskCommand::Signal { name, payload } => {
            if !matches!(task.state, TaskState::Running | TaskState::Paused) {
                return Err(refuse(format!("it is {}; only a running or paused task takes signals", task.state)));
            }
            let rows = load_views(t, id)?;
            let waiting = waiting_for(&def, &rows, name);
            let Some(wait) = waiting else {
                return Err(refuse(format!("no wait step is waiting for {name:?}")));
            };
            let step_id = update_step(t, id, &wait.name, StepState::Processed, Some(payload), None)?;
            let detail = json!({"step": wait.name, "signal": name, "payload": payload, "reason": p.reason});
            t.event(id, step_id, ev::WAIT_ENDED, EventLevel::Info, &p.actor, detail)?;
            advance_task(t, id, &p.actor).map(|_| ())
        }
    }
}

fn step_id(t: &Tx<'_>, task: TaskId, name: &str) -> Result<Option<StepId>, StoreError> {
    t.tx.query_row("SELECT id FROM steps WHERE task_id = ?1 AND name = ?2", params![task.0, name], |r| r.get(0))
        .optional()
        .map(|id| id.map(StepId))
        .map_err(map_err)
}

/// Writes an operator's plan, sets the task's state, and lets the decider go on.
fn carry_out(t: &Tx<'_>, task: TaskId, was: TaskState, plan: Plan, actor: &str) -> Result<(), StoreError> {
    for change in plan.changes {
        match change {
            RowChange::Reset { name } => {
                let due = if plan.task_state == TaskState::Paused { HELD } else { t.now.0 };
                t.tx.execute(
                    "UPDATE steps SET state = 'pending', failure_count = 0, due_at = ?3, locked_by = NULL,
                            complete_by = NULL, last_error = NULL, updated_at = ?4
                     WHERE task_id = ?1 AND name = ?2",
                    params![task.0, name, due, t.now.0],
                )
                .map_err(map_err)?;
            }
            RowChange::Reopen { name, output } => {
                update_step(t, task, &name, StepState::Processing, output.as_ref(), None)?;
            }
            RowChange::Delete { name } => {
                // A sub-workflow's child still running goes with its row: nothing waits for it now.
                for child in children_of(t, task, &name)? {
                    end_tree(t, child, TaskState::Cancelled, actor, json!({"reason": "its parent's step runs again"}))?;
                }
                t.tx.execute("DELETE FROM steps WHERE task_id = ?1 AND name = ?2", params![task.0, name])
                    .map_err(map_err)?;
            }
            RowChange::Finish { name, output } => {
                // A skipped step that was processing loses its lease: its holder's reply is fenced off.
                t.tx.execute(
                    "UPDATE steps SET state = 'processed', output = ?3, locked_by = NULL, complete_by = NULL,
                            updated_at = ?4
                     WHERE task_id = ?1 AND name = ?2",
                    params![task.0, name, Value::to_string(&output), t.now.0],
                )
                .map_err(map_err)?;
            }
        }
    }
    if plan.task_state != was {
        set_task_state(t, task, plan.task_state)?;
        if plan.task_state == TaskState::Running {
            t.event(task, None, ev::TASK_RESUMED, EventLevel::Info, actor, json!({"was": was.as_str()}))?;
        }
    }
    advance_task(t, task, actor).map(|_| ())
}
