//! One task's part of a bulk operator action (`crate::bulk`), inside its own transaction.

use super::operator::{operate_task, resubmit_step};
use super::tx::WriteTx;
use crate::StoreError;
use crate::bulk::{BulkCommand, BulkOperate};
use crate::params::{OperateTask, ResubmitStep, TaskCommand};
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepId, StepState, TaskId};

/// Carries out `p.command` on one task; a refusal is a `Conflict` and, as the caller's
/// transaction is then rolled back, changes nothing.
pub async fn bulk_act<T: WriteTx>(t: &T, task_id: TaskId, p: &BulkOperate) -> Result<(), StoreError> {
    let (actor, reason) = (p.actor.clone(), p.reason.clone());
    match p.command {
        BulkCommand::Cancel => {
            operate_task(t, &OperateTask { task_id, actor, reason, command: TaskCommand::Cancel }).await
        }
        BulkCommand::Retry => {
            operate_task(t, &OperateTask { task_id, actor, reason, command: TaskCommand::Retry }).await
        }
        BulkCommand::Resubmit => resubmit_errors(t, task_id, actor, reason).await,
    }
}

/// Resubmits each agent step of the task in Error, oldest first, as `resubmit_step` does one.
async fn resubmit_errors<T: WriteTx>(t: &T, task_id: TaskId, actor: String, reason: String) -> Result<(), StoreError> {
    t.lock_tasks(&[task_id]).await?;
    let errors: Vec<StepId> = t
        .load_steps(task_id)
        .await?
        .iter()
        .filter(|s| s.state == StepState::Error && s.kind == StepKind::Agent)
        .map(|s| StepId(s.id))
        .collect();
    if errors.is_empty() {
        return Err(StoreError::Conflict(format!("task {task_id}: no step is in error")));
    }
    for step_id in errors {
        resubmit_step(t, &ResubmitStep { step_id, actor: actor.clone(), reason: reason.clone() }).await?;
    }
    Ok(())
}
