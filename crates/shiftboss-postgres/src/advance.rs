//! Moving a task on: run the decider on its current steps and write what it decides, inside the
//! transaction that changed a step. The caller holds the task's lock (see `lock`).
//!
//! A decide may start a child task (which decides at once), and a child that ends moves its
//! parent's step on in the same transaction (`children`). A parent whose decider is running when
//! that happens is not entered again: its flag in `Tx::advancing` is raised, and it decides once
//! more when its current round ends.

use crate::children::{start_child, tell_parent};
use crate::rows::{get, json, opt_json, parsed, step_kind};
use crate::steps::{cancel_step, insert_step, update_step};
use crate::tx::Tx;
use serde_json::{Value, json};
use shiftboss_core::decider::{Action, StepView, TaskMove, TaskView, decide, needs_compensation};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{TaskId, TaskState, Timestamp};
use shiftboss_store::{StoreError, decided, event_kind as ev};
use std::future::Future;
use std::pin::Pin;
use tokio_postgres::Row;

/// How many times one advance decides again after a child ended at once.
const MAX_ROUNDS: usize = 64;

/// A boxed future: the calls that recurse through child tasks (advance, end a tree) return one.
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

pub struct Advanced {
    pub state: TaskState,
    pub scheduled: u32,
}

/// What the decider and the writes need of a task row.
pub struct TaskRow {
    pub state: TaskState,
    pub workflow: String,
    pub version: u32,
    pub input: Value,
    pub key: String,
    pub priority: i32,
    pub depth: i32,
}

/// The columns [`task_row`] reads, in its order.
pub const TASK_ROW_COLUMNS: &str = "state, workflow, workflow_version, input, task_key, priority, depth";

pub async fn load_task(t: &Tx<'_>, task_id: TaskId) -> Result<TaskRow, StoreError> {
    let row = t
        .query_opt(&format!("SELECT {TASK_ROW_COLUMNS} FROM tasks WHERE id = $1"), &[&task_id.0])
        .await?
        .ok_or_else(|| StoreError::NotFound { what: "task", id: task_id.to_string() })?;
    task_row(&row, 0)
}

/// A [`TaskRow`] from [`TASK_ROW_COLUMNS`], starting at column `at`.
pub fn task_row(row: &Row, at: usize) -> Result<TaskRow, StoreError> {
    Ok(TaskRow {
        state: parsed(row, at, "tasks.state")?,
        workflow: get(row, at + 1)?,
        version: crate::rows::count(row, at + 2, "tasks.workflow_version")?,
        input: json(row, at + 3, "tasks.input")?,
        key: get(row, at + 4)?,
        priority: get(row, at + 5)?,
        depth: get(row, at + 6)?,
    })
}

/// Decides and writes until the task waits on something outside this transaction.
pub fn advance_task<'a>(t: &'a Tx<'_>, task_id: TaskId, actor: &'a str) -> Boxed<'a, Advanced> {
    Box::pin(async move {
        t.advancing.lock().unwrap_or_else(|p| p.into_inner()).push((task_id, false));
        let out = rounds(t, task_id, actor).await;
        t.advancing.lock().unwrap_or_else(|p| p.into_inner()).retain(|(id, _)| *id != task_id);
        out
    })
}

async fn rounds(t: &Tx<'_>, task_id: TaskId, actor: &str) -> Result<Advanced, StoreError> {
    let mut scheduled = 0;
    for _ in 0..MAX_ROUNDS {
        let task = load_task(t, task_id).await?;
        if !task.state.is_active() {
            return Ok(Advanced { state: task.state, scheduled });
        }
        let def = t.definition(&task.workflow, task.version).await?;
        let rows = load_views(t, task_id).await?;
        let view = TaskView { id: task_id.0, key: &task.key, state: task.state, input: &task.input, now: t.now };
        let decision = decide(&def, &view, &rows);
        for action in decision.actions {
            scheduled += apply(t, task_id, &task, &def, action, actor).await?;
        }
        let state = move_task(t, task_id, task.state, decision.task, actor).await?;
        // A child that ended at once (or could not start) changed a step of ours: decide again.
        if !take_again(t, task_id) {
            return Ok(Advanced { state, scheduled });
        }
    }
    Err(StoreError::Backend(format!("task {task_id}: still moving after {MAX_ROUNDS} decides in one transaction")))
}

/// Lowers the task's decide-again flag; true if it was raised.
fn take_again(t: &Tx<'_>, task_id: TaskId) -> bool {
    let mut advancing = t.advancing.lock().unwrap_or_else(|p| p.into_inner());
    advancing.iter_mut().find(|(id, _)| *id == task_id).is_some_and(|(_, again)| std::mem::take(again))
}

/// Raises the flag of a task whose decider is running; false when none is.
pub fn mark_again(t: &Tx<'_>, task_id: TaskId) -> bool {
    let mut advancing = t.advancing.lock().unwrap_or_else(|p| p.into_inner());
    match advancing.iter_mut().find(|(id, _)| *id == task_id) {
        Some(entry) => {
            entry.1 = true;
            true
        }
        None => false,
    }
}

pub async fn set_task_state(t: &Tx<'_>, task_id: TaskId, state: TaskState) -> Result<(), StoreError> {
    t.execute("UPDATE tasks SET state = $2, updated_at = $3 WHERE id = $1", &[&task_id.0, &state.as_str(), &t.now.0])
        .await?;
    Ok(())
}

/// The columns [`step_view`] reads, in its order.
pub const STEP_VIEW_COLUMNS: &str = "id, name, kind, state, input, output, last_error, updated_at, compensates";

/// The decider's view of the task's rows, in creation order.
pub async fn load_views(t: &Tx<'_>, task_id: TaskId) -> Result<Vec<StepView>, StoreError> {
    let rows = t
        .query(&format!("SELECT {STEP_VIEW_COLUMNS} FROM steps WHERE task_id = $1 ORDER BY id"), &[&task_id.0])
        .await?;
    rows.iter().map(|r| step_view(r, 0)).collect()
}

/// A [`StepView`] from [`STEP_VIEW_COLUMNS`], starting at column `at`.
pub fn step_view(r: &Row, at: usize) -> Result<StepView, StoreError> {
    Ok(StepView {
        id: get(r, at)?,
        name: get(r, at + 1)?,
        kind: step_kind(r, at + 2)?,
        state: parsed(r, at + 3, "steps.state")?,
        input: json(r, at + 4, "steps.input")?,
        output: opt_json(r, at + 5, "steps.output")?,
        last_error: get(r, at + 6)?,
        updated_at: Timestamp(get(r, at + 7)?),
        compensates: get(r, at + 8)?,
    })
}

/// Writes one action; returns how many agent steps it scheduled.
async fn apply(
    t: &Tx<'_>,
    task_id: TaskId,
    task: &TaskRow,
    def: &WorkflowDef,
    action: Action,
    actor: &str,
) -> Result<u32, StoreError> {
    match action {
        Action::Create(n) => {
            let step_id = insert_step(t, task_id, task, def, &n).await?;
            let (kind, detail) = decided::created_event(&n);
            t.event(task_id, Some(step_id), kind, EventLevel::Info, actor, detail).await?;
            if let Some(child) = &n.child {
                start_child(t, task_id, task, step_id, &n.name, child, actor).await?;
            }
            Ok(u32::from(n.kind == StepKind::Agent))
        }
        Action::Update { name, state, output, error } => {
            let step_id = update_step(t, task_id, &name, state, output.as_ref(), error.as_deref()).await?;
            let (kind, level, detail) = decided::updated_event(&name, state, output.as_ref(), error.as_deref());
            t.event(task_id, step_id, kind, level, actor, detail).await?;
            Ok(0)
        }
        Action::Cancel { name } => {
            cancel_step(t, task_id, &name, actor).await?;
            Ok(0)
        }
    }
}

/// Writes the task's own move; returns its state after. A task that ends tells its parent.
pub async fn move_task(
    t: &Tx<'_>,
    task_id: TaskId,
    now: TaskState,
    m: TaskMove,
    actor: &str,
) -> Result<TaskState, StoreError> {
    let Some(decided::TaskOutcome { state, kind, level, detail, output }) = decided::task_outcome(m) else {
        return Ok(now);
    };
    t.execute(
        "UPDATE tasks SET state = $2, output = coalesce($3, output), updated_at = $4 WHERE id = $1",
        &[&task_id.0, &state.as_str(), &output.as_ref().map(Value::to_string), &t.now.0],
    )
    .await?;
    t.event(task_id, None, kind, level, actor, detail).await?;
    if state.is_terminal() {
        tell_parent(t, task_id, state, output.as_ref(), actor).await?;
    }
    Ok(state)
}

/// The workflow's timeout passed: live steps are cancelled, and the task fails (compensating
/// first when its workflow says so). The caller holds the task's lock.
/// Returns false when the task was not running or paused (a compensating task runs its
/// compensations to the end whatever its deadline).
pub async fn time_out(t: &Tx<'_>, task_id: TaskId, actor: &str) -> Result<bool, StoreError> {
    let task = load_task(t, task_id).await?;
    if !matches!(task.state, TaskState::Running | TaskState::Paused) {
        return Ok(false);
    }
    let def = t.definition(&task.workflow, task.version).await?;
    for r in load_views(t, task_id).await?.into_iter().filter(StepView::is_live) {
        cancel_step(t, task_id, &r.name, actor).await?;
    }
    t.event(task_id, None, ev::TASK_TIMED_OUT, EventLevel::Alert, actor, json!({"timeout": def.timeout})).await?;
    let reason = "the workflow's timeout passed".to_owned();
    let rows = load_views(t, task_id).await?;
    if def.compensate_on_failure && needs_compensation(&def, &rows) {
        move_task(t, task_id, task.state, TaskMove::Compensate { step: String::new(), reason }, actor).await?;
        advance_task(t, task_id, actor).await?;
    } else {
        move_task(t, task_id, task.state, TaskMove::Fail { step: String::new(), reason }, actor).await?;
    }
    Ok(true)
}
