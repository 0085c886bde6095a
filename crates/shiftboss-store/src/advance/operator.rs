//! Operator actions (P16): resubmit a failed step, cancel, pause, resume, terminate, retry, rerun,
//! skip, signal. Each is recorded with who and why; what they do to the rows is planned by the
//! core (`decider::operator`), and the decider runs again in the same transaction.
//!
//! Each locks the task (with its ancestors) before it reads the task or its steps, so that its
//! checks and its writes see one state, and no decider runs on the task meanwhile (C7).

use super::HELD;
use super::agenda::{Agenda, End};
use super::children::{cancel_step, end_children};
use super::decide::drain;
use super::tx::WriteTx;
use crate::StoreError;
use crate::event_kind as ev;
use crate::{OperateTask, ResubmitStep, TaskCommand};
use serde_json::json;
use shiftboss_core::decider::needs_compensation;
use shiftboss_core::decider::operator::{
    Plan, RowChange, plan_rerun, plan_resubmit, plan_retry, plan_skip, waiting_for,
};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepState, TaskId, TaskState};

/// An operator sends a step in Error back to pending (P16).
pub async fn resubmit_step<T: WriteTx>(t: &T, p: &ResubmitStep) -> Result<(), StoreError> {
    p.validate()?;
    let not_found = || StoreError::NotFound { what: "step", id: p.step_id.to_string() };
    // A step's task never changes, so this read needs no lock.
    let (task_id, _) = t.find_step(p.step_id).await?.ok_or_else(not_found)?;
    t.lock_tasks(&[task_id]).await?;
    // Read again under the task's lock: a rerun may have removed the step meanwhile.
    let (_, name) = t.find_step(p.step_id).await?.ok_or_else(not_found)?;
    let task = t.load_task(task_id).await?;
    let def = t.definition(&task.workflow, task.version).await?;
    let plan = plan_resubmit(&def, task.state, &t.load_steps(task_id).await?, &name)
        .map_err(|why| StoreError::Conflict(format!("step {}: {why}", p.step_id)))?;
    let detail = json!({"reason": p.reason});
    t.event(task_id, Some(p.step_id), ev::STEP_RESUBMITTED, EventLevel::Info, &p.actor, detail).await?;
    carry_out(t, task_id, task.state, plan, &p.actor).await
}

/// An operator's command on a task; a command that does not apply to its state is a `Conflict`
/// and changes nothing.
pub async fn operate_task<T: WriteTx>(t: &T, p: &OperateTask) -> Result<(), StoreError> {
    p.validate()?;
    let id = p.task_id;
    t.lock_tasks(&[id]).await?;
    let task = t.load_task(id).await?;
    let refuse = |why: String| StoreError::Conflict(format!("task {id}: {why}"));
    let detail = json!({"command": p.command.as_str(), "reason": p.reason});
    let def = t.definition(&task.workflow, task.version).await?;
    let mut agenda = Agenda::default();
    match &p.command {
        TaskCommand::Pause => {
            if task.state != TaskState::Running {
                return Err(refuse(format!("only a running task can be paused; it is {}", task.state)));
            }
            t.hold_pending_steps(id).await?;
            t.set_task_state(id, TaskState::Paused, None).await?;
            t.event(id, None, ev::TASK_PAUSED, EventLevel::Info, &p.actor, detail).await?;
        }
        TaskCommand::Resume => {
            if task.state != TaskState::Paused {
                return Err(refuse(format!("only a paused task can be resumed; it is {}", task.state)));
            }
            t.release_held_steps(id).await?;
            t.set_task_state(id, TaskState::Running, None).await?;
            t.event(id, None, ev::TASK_RESUMED, EventLevel::Info, &p.actor, detail).await?;
            agenda.decide(id);
        }
        TaskCommand::Terminate => {
            if task.state.is_terminal() {
                return Err(refuse(format!("it has already ended ({})", task.state)));
            }
            agenda.end(End { task: id, state: TaskState::Terminated, detail });
        }
        TaskCommand::Cancel => {
            if task.state.is_terminal() {
                return Err(refuse(format!("it has already ended ({})", task.state)));
            }
            let rows = t.load_steps(id).await?;
            if def.compensate_on_cancel && task.state != TaskState::Compensating && needs_compensation(&def, &rows) {
                // Stop what runs (children included), then undo what is done.
                for r in rows.iter().filter(|r| r.is_live()) {
                    cancel_step(t, &mut agenda, id, &r.name, &p.actor).await?;
                }
                t.set_task_state(id, TaskState::Compensating, None).await?;
                t.event(id, None, ev::TASK_COMPENSATING, EventLevel::Info, &p.actor, detail).await?;
                agenda.decide(id);
            } else {
                agenda.end(End { task: id, state: TaskState::Cancelled, detail });
            }
        }
        TaskCommand::Compensate => {
            if !matches!(task.state, TaskState::Failed | TaskState::Cancelled | TaskState::Terminated) {
                return Err(refuse(format!(
                    "only a failed, cancelled or terminated task can be compensated; it is {}",
                    task.state
                )));
            }
            // A child's end moved its parent once; its compensation is its parent's to run.
            if task.is_child {
                return Err(refuse("it is a sub-workflow's child: compensate its parent".into()));
            }
            let rows = t.load_steps(id).await?;
            if rows.iter().any(|r| r.compensates.is_some()) {
                return Err(refuse("its compensation ran already (a failed one is run again with retry)".into()));
            }
            if !needs_compensation(&def, &rows) {
                return Err(refuse("none of its completed steps has a compensation".into()));
            }
            t.set_task_state(id, TaskState::Compensating, None).await?;
            t.event(id, None, ev::TASK_COMPENSATING, EventLevel::Info, &p.actor, detail).await?;
            agenda.decide(id);
        }
        TaskCommand::Retry => {
            let plan = plan_retry(&def, task.state, &t.load_steps(id).await?).map_err(refuse)?;
            t.event(id, None, ev::TASK_OPERATED, EventLevel::Info, &p.actor, detail).await?;
            return carry_out(t, id, task.state, plan, &p.actor).await;
        }
        TaskCommand::Rerun { from } => {
            let plan = plan_rerun(&def, task.state, &t.load_steps(id).await?, from).map_err(refuse)?;
            t.clear_task_output(id).await?;
            let detail = json!({"command": "rerun", "from": from, "reason": p.reason});
            t.event(id, None, ev::TASK_OPERATED, EventLevel::Info, &p.actor, detail).await?;
            return carry_out(t, id, task.state, plan, &p.actor).await;
        }
        TaskCommand::Skip { step, output } => {
            let plan = plan_skip(&def, task.state, &t.load_steps(id).await?, step, output.clone()).map_err(refuse)?;
            let step_id = t.step_id(id, step).await?;
            let detail = json!({"step": step, "output": output, "reason": p.reason});
            t.event(id, step_id, ev::STEP_SKIPPED, EventLevel::Info, &p.actor, detail).await?;
            return carry_out(t, id, task.state, plan, &p.actor).await;
        }
        TaskCommand::Signal { name, payload } => {
            if !matches!(task.state, TaskState::Running | TaskState::Paused) {
                return Err(refuse(format!("it is {}; only a running or paused task takes signals", task.state)));
            }
            let rows = t.load_steps(id).await?;
            let Some(wait) = waiting_for(&def, &rows, name) else {
                return Err(refuse(format!("no wait step is waiting for {name:?}")));
            };
            let step_id = t.update_step(id, &wait.name, StepState::Processed, Some(payload), None).await?;
            let detail = json!({"step": wait.name, "signal": name, "payload": payload, "reason": p.reason});
            t.event(id, step_id, ev::WAIT_ENDED, EventLevel::Info, &p.actor, detail).await?;
            agenda.decide(id);
        }
    }
    drain(t, &mut agenda, &p.actor).await
}

/// Writes an operator's plan, sets the task's state, and lets the decider go on.
async fn carry_out<T: WriteTx>(t: &T, task: TaskId, was: TaskState, plan: Plan, actor: &str) -> Result<(), StoreError> {
    let mut agenda = Agenda::default();
    let paused = plan.task_state == TaskState::Paused;
    // Rows deleted here are written again by the decider: new work, so new idempotency keys. Rows
    // reset keep theirs (the same step tried again, whose first call's effect is unknown).
    if plan.changes.iter().any(|c| matches!(c, RowChange::Delete { .. })) {
        t.bump_generation(task).await?;
    }
    for change in plan.changes {
        match change {
            RowChange::Reset { name } => {
                let due = if paused { HELD } else { t.now().0 };
                t.reset_step(task, &name, due).await?;
            }
            RowChange::Reopen { name, output } => {
                t.update_step(task, &name, StepState::Processing, output.as_ref(), None).await?;
            }
            RowChange::Delete { name } => {
                // A sub-workflow that runs again starts a new child: the old one must not go on
                // working (it would also end a step that no longer waits for it).
                if t.delete_step(task, &name).await? == Some(StepKind::SubWorkflow) {
                    end_children(t, &mut agenda, task, &name, "its parent's step runs again").await?;
                }
            }
            RowChange::Finish { name, output } => {
                // A skipped step that was processing loses its lease: its holder's reply is fenced off.
                t.finish_step(task, &name, &output).await?;
            }
        }
    }
    if plan.task_state != was {
        t.set_task_state(task, plan.task_state, None).await?;
        if plan.task_state == TaskState::Running {
            t.event(task, None, ev::TASK_RESUMED, EventLevel::Info, actor, json!({"was": was.as_str()})).await?;
        }
    }
    agenda.decide(task);
    drain(t, &mut agenda, actor).await
}
