//! Sub-workflows and ends: a parent's step starts a child task, the child's end moves that step on,
//! and a task ended from outside ends its children with it. A start_workflow step's task is started
//! the same way but left to itself: the step is done at once, and that task's end tells no one.
//! All in the transaction that caused it; a store that locks tasks locks a parent before its child.

use super::MAX_CHILD_DEPTH;
use super::agenda::{Agenda, End};
use super::tx::{NewTask, TaskRow, WriteTx};
use crate::StoreError;
use crate::decided;
use crate::event_kind as ev;
use serde_json::{Value, json};
use shiftboss_core::decider::ChildTask;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepId, StepState, TaskId, TaskState};

/// What a running sub-workflow step's output holds: its child.
pub fn child_ref(child: TaskId) -> Value {
    json!({"task_id": child.0})
}

/// Starts the child task of a parent's new sub-workflow step; the child decides next. A child that
/// cannot start fails the step, and the parent decides again.
#[allow(clippy::too_many_arguments)]
pub(super) async fn start_child<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    parent: TaskId,
    task: &TaskRow,
    step_id: StepId,
    step: &str,
    child: &ChildTask,
    actor: &str,
) -> Result<(), StoreError> {
    let why = match child_start(t, parent, task, step_id, step, child, actor).await? {
        Ok(child_id) => {
            agenda.noted(child_id, TaskState::Running);
            agenda.decide(child_id);
            if child.detached {
                // Started is all a start_workflow step waits for: it is done, and its task goes on.
                let output = json!({"task_id": child_id.0});
                t.update_step(parent, step, StepState::Processed, Some(&output), None).await?;
                let detail = json!({"step": step, "output": output});
                t.event(parent, Some(step_id), ev::STEP_PROCESSED, EventLevel::Info, actor, detail).await?;
                agenda.decide(parent);
            }
            return Ok(());
        }
        Err(why) => why,
    };
    t.update_step(parent, step, StepState::Error, None, Some(&why)).await?;
    let detail = json!({"step": step, "error": why});
    t.event(parent, Some(step_id), ev::STEP_ERROR, EventLevel::Alert, actor, detail).await?;
    agenda.decide(parent);
    Ok(())
}

/// Writes the child task; `Err(why)` when it cannot start (the parent's step fails with `why`).
async fn child_start<T: WriteTx>(
    t: &T,
    parent: TaskId,
    task: &TaskRow,
    step_id: StepId,
    step: &str,
    child: &ChildTask,
    actor: &str,
) -> Result<Result<TaskId, String>, StoreError> {
    if task.depth + 1 > MAX_CHILD_DEPTH {
        return Ok(Err(format!("sub-workflows nest at most {MAX_CHILD_DEPTH} deep")));
    }
    let version = match child.version {
        Some(v) => Some(v),
        None => t.latest_version(&child.workflow).await?,
    };
    let Some(version) = version else {
        return Ok(Err(format!("workflow {:?} is not registered", child.workflow)));
    };
    let def = match t.definition(&child.workflow, version).await {
        Ok(d) => d,
        // A missing or unreadable definition is the parent's step failing; anything else (the
        // database) is the whole call's.
        Err(e @ (StoreError::NotFound { .. } | StoreError::Incompatible(_))) => {
            return Ok(Err(format!("workflow {:?} version {version}: {e}", child.workflow)));
        }
        Err(e) => return Err(e),
    };
    // Made from what identifies the work, as a step's idempotency key is: a child started again
    // after its parent's row was lost gets the same key (and so its steps the same idempotency
    // keys); a rerun or a retry that starts it again bumps the generation, and gets a new one.
    let key = format!("{}/{step}/{}", task.key, task.generation);
    let new = NewTask {
        key: &key,
        workflow: &child.workflow,
        version,
        priority: task.priority,
        input: &child.input,
        // A started task is no child: its end moves nothing of the task that started it.
        parent: (!child.detached).then_some((parent, step)),
        depth: task.depth + 1,
        deadline_at: def.timeout.map(|d| t.now().plus(d).0),
        // A sub-workflow's child runs in its parent's domains (as Conductor's does); a started task
        // is on its own.
        domains: if child.detached { None } else { super::tx::domains_text(&task.domains) },
        correlation_id: if child.detached { None } else { task.correlation_id.clone() },
    };
    // Someone submitted a task under this key by hand: the child cannot have it.
    let Some(child_id) = t.insert_task(&new).await? else {
        return Ok(Err(format!("the child's task key {key:?} is taken by another task")));
    };
    t.update_step(parent, step, StepState::Processing, Some(&child_ref(child_id)), None).await?;
    t.event(parent, Some(step_id), ev::CHILD_STARTED, EventLevel::Info, actor, child_ref(child_id)).await?;
    let link = if child.detached { "started_by" } else { "parent" };
    let detail = json!({"key": key, "workflow": child.workflow, "version": version, link: parent.0, "step": step});
    t.event(child_id, None, ev::TASK_RECEIVED, EventLevel::Info, actor, detail).await?;
    Ok(Ok(child_id))
}

/// Cancels one live step; a sub-workflow's child tasks are ended with it.
pub(super) async fn cancel_step<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    task: TaskId,
    name: &str,
    actor: &str,
) -> Result<(), StoreError> {
    let Some((id, kind)) = t.cancel_live_step(task, name).await? else { return Ok(()) };
    t.event(task, Some(id), ev::STEP_CANCELLED, EventLevel::Info, actor, json!({"step": name})).await?;
    if kind == StepKind::SubWorkflow {
        end_children(t, agenda, task, name, "its parent's step was cancelled").await?;
    }
    Ok(())
}

/// Ends the live child tasks (and theirs) that a parent's step started.
pub(super) async fn end_children<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    parent: TaskId,
    step: &str,
    why: &str,
) -> Result<(), StoreError> {
    for child in t.children_of(parent, step).await? {
        t.lock_child(child).await?;
        agenda.end(End { task: child, state: TaskState::Cancelled, detail: json!({"reason": why}) });
    }
    Ok(())
}

/// Ends one task of a tree; its children wait in the agenda.
pub(super) async fn end_one<T: WriteTx>(t: &T, agenda: &mut Agenda, end: End, actor: &str) -> Result<(), StoreError> {
    let End { task, state, detail } = end;
    for r in t.load_steps(task).await?.into_iter().filter(|r| r.is_live()) {
        cancel_step(t, agenda, task, &r.name, actor).await?;
    }
    t.set_task_state(task, state, None).await?;
    agenda.noted(task, state);
    let kind = if state == TaskState::Terminated { ev::TASK_TERMINATED } else { ev::TASK_CANCELLED };
    t.event(task, None, kind, EventLevel::Info, actor, detail).await?;
    // An operator ending a child fails its parent's step; a parent ending its child finds its own
    // step already cancelled, and nothing moves.
    tell_parent(t, agenda, task, state, None, actor).await
}

/// A task ended: if it is a child, its parent's step ends with it and the parent decides again.
pub(super) async fn tell_parent<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    child: TaskId,
    state: TaskState,
    output: Option<&Value>,
    actor: &str,
) -> Result<(), StoreError> {
    let Some((parent, step)) = t.parent_of(child).await? else { return Ok(()) };
    // Held already: whoever locked the child locked its ancestors first. This costs nothing then.
    t.lock_tasks(&[parent]).await?;
    let (step_state, error) = decided::child_result(child, state);
    let output = output.cloned().unwrap_or(Value::Null);
    // Only the step still waiting for this very child moves: a parent that moved on (or reran the
    // step, which started another child under the same name) ignores it.
    let Some(id) = t.end_child_step(parent, &step, child, step_state, &output, error.as_deref()).await? else {
        return Ok(());
    };
    let (kind, level) = match step_state {
        StepState::Processed => (ev::STEP_PROCESSED, EventLevel::Info),
        _ => (ev::STEP_ERROR, EventLevel::Alert),
    };
    let detail = json!({"step": step, "child": child.0, "error": error});
    t.event(parent, Some(id), kind, level, actor, detail).await?;
    agenda.decide(parent);
    Ok(())
}
