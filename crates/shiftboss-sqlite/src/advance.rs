//! Moving a task on: run the decider on its current steps and write what it decides, inside the
//! transaction that changed a step. A sub-workflow's child task is started here, and a child that
//! ends moves its parent's step on in the same transaction.

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};
use shiftboss_core::buckets::bucket_of;
use shiftboss_core::decider::{Action, ChildTask, NewStep, StepView, TaskMove, TaskView, decide};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{StepId, StepState, TaskId, TaskState};
use shiftboss_store::{StoreError, decided, event_kind as ev};
use std::sync::Arc;

/// How deep sub-workflows may nest: a workflow that starts itself stops here, with an error.
pub const MAX_CHILD_DEPTH: i64 = 16;
/// How many times one advance decides again after a child ended at once.
const MAX_ROUNDS: usize = 64;

pub struct Advanced {
    pub state: TaskState,
    pub scheduled: u32,
}

pub struct TaskRow {
    pub state: TaskState,
    pub workflow: String,
    pub version: u32,
    pub input: Value,
    pub key: String,
    pub priority: i32,
    pub depth: i64,
    /// Set for a sub-workflow's child task: its end moves the parent's step.
    pub is_child: bool,
}

pub fn load_task(t: &Tx<'_>, task_id: TaskId) -> Result<TaskRow, StoreError> {
    t.tx.prepare_cached(
        "SELECT state, workflow, workflow_version, input, task_key, priority, depth, parent_task_id IS NOT NULL
         FROM tasks WHERE id = ?1",
    )
    .and_then(|mut st| {
        st.query_row([task_id.0], |r| {
            Ok(TaskRow {
                state: crate::rows::parsed(r, 0, "tasks.state")?,
                workflow: r.get(1)?,
                version: r.get(2)?,
                input: crate::rows::json(r, 3, "tasks.input")?,
                key: r.get(4)?,
                priority: r.get(5)?,
                depth: r.get(6)?,
                is_child: r.get(7)?,
            })
        })
        .optional()
    })
    .map_err(map_err)?
    .ok_or_else(|| StoreError::NotFound { what: "task", id: task_id.to_string() })
}

/// Decides and writes until the task waits on something outside this transaction.
pub fn advance_task(t: &Tx<'_>, task_id: TaskId, actor: &str) -> Result<Advanced, StoreError> {
    t.advancing.borrow_mut().push((task_id, false));
    let out = advance_rounds(t, task_id, actor);
    t.advancing.borrow_mut().retain(|(id, _)| *id != task_id);
    out
}

fn advance_rounds(t: &Tx<'_>, task_id: TaskId, actor: &str) -> Result<Advanced, StoreError> {
    let mut scheduled = 0;
    for _ in 0..MAX_ROUNDS {
        let task = load_task(t, task_id)?;
        if !task.state.is_active() {
            return Ok(Advanced { state: task.state, scheduled });
        }
        let def = t.definition(&task.workflow, task.version)?;
        let rows = load_views(t, task_id)?;
        let view = TaskView { id: task_id.0, key: &task.key, state: task.state, input: &task.input, now: t.now };
        let decision = decide(&def, &view, &rows);
        for action in decision.actions {
            scheduled += apply(t, task_id, &task, &def, action, actor)?;
        }
        let state = move_task(t, task_id, &task, decision.task, actor)?;
        // A child that ended at once (or could not start) changed a step of ours: decide again.
        let again = t
            .advancing
            .borrow_mut()
            .iter_mut()
            .find(|(id, _)| *id == task_id)
            .is_some_and(|entry| std::mem::take(&mut entry.1));
        if !again {
            return Ok(Advanced { state, scheduled });
        }
    }
    Err(StoreError::Backend(format!("task {task_id}: still moving after {MAX_ROUNDS} decides in one transaction")))
}

pub fn set_task_state(t: &Tx<'_>, task_id: TaskId, state: TaskState) -> Result<(), StoreError> {
    t.tx.prepare_cached("UPDATE tasks SET state = ?2, updated_at = ?3 WHERE id = ?1")
        .and_then(|mut st| st.execute(params![task_id.0, state.as_str(), t.now.0]))
        .map_err(map_err)?;
    Ok(())
}

/// A task's steps, as the decider sees them; in no particular order.
pub(crate) const STEP_VIEWS: &str = "SELECT id, name, kind, state, input, output, last_error, updated_at, compensates
     FROM steps WHERE task_id = ?1";

pub fn load_views(t: &Tx<'_>, task_id: TaskId) -> Result<Vec<StepView>, StoreError> {
    // Read in the order of the (task_id, name) index and sorted by id here: `ORDER BY id` made
    // SQLite build and drop a sorter on every run, which was most of this read's cost.
    let mut st = t.tx.prepare_cached(STEP_VIEWS).map_err(map_err)?;
    let rows = st
        .query_map([task_id.0], |r| {
            Ok(StepView {
                id: r.get(0)?,
                name: r.get(1)?,
                kind: crate::rows::step_kind(r, 2)?,
                state: crate::rows::parsed::<StepState>(r, 3, "steps.state")?,
                input: crate::rows::json(r, 4, "steps.input")?,
                output: crate::rows::opt_json(r, 5, "steps.output")?,
                last_error: r.get(6)?,
                updated_at: shiftboss_core::Timestamp(r.get(7)?),
                compensates: r.get(8)?,
            })
        })
        .map_err(map_err)?;
    let mut views: Vec<StepView> = rows.collect::<Result<_, _>>().map_err(map_err)?;
    views.sort_unstable_by_key(|v| v.id);
    Ok(views)
}

/// Writes one action; returns how many agent steps it scheduled.
fn apply(
    t: &Tx<'_>,
    task_id: TaskId,
    task: &TaskRow,
    def: &Arc<WorkflowDef>,
    action: Action,
    actor: &str,
) -> Result<u32, StoreError> {
    match action {
        Action::Create(n) => {
            let step_id = insert_step(t, task_id, task, def, &n)?;
            let (kind, detail) = decided::created_event(&n);
            t.event(task_id, Some(step_id), kind, EventLevel::Info, actor, detail)?;
            if let Some(child) = &n.child {
                start_child(t, task_id, task, step_id, &n.name, child, actor)?;
            }
            Ok(u32::from(n.kind == StepKind::Agent))
        }
        Action::Update { name, state, output, error } => {
            let step_id = update_step(t, task_id, &name, state, output.as_ref(), error.as_deref())?;
            let (kind, level, detail) = decided::updated_event(&name, state, output.as_ref(), error.as_deref());
            t.event(task_id, step_id, kind, level, actor, detail)?;
            Ok(0)
        }
        Action::Cancel { name } => {
            cancel_step(t, task_id, &name, actor)?;
            Ok(0)
        }
    }
}

fn insert_step(
    t: &Tx<'_>,
    task_id: TaskId,
    task: &TaskRow,
    def: &WorkflowDef,
    n: &NewStep,
) -> Result<StepId, StoreError> {
    let row = decided::step_row(def, n, task.priority, t.now)?;
    insert_row(t, task_id, &n.name, n.state, n.compensates.as_deref(), &row)
}

/// Writes a step row; its bucket is its task's.
pub fn insert_row(
    t: &Tx<'_>,
    task_id: TaskId,
    name: &str,
    state: StepState,
    compensates: Option<&str>,
    row: &decided::StepRow,
) -> Result<StepId, StoreError> {
    t.tx.prepare_cached(
        "INSERT INTO steps (task_id, name, agent, state, due_at, priority, input, output, idempotency_key, timeout_ms,
                            config, retry, created_at, updated_at, bucket, kind, compensates, domain, fallback_at,
                            response_timeout_ms, on_timeout)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, (SELECT bucket FROM tasks WHERE id = ?1),
                 ?14, ?15, ?16, ?17, ?18, ?19)",
    )
    .and_then(|mut st| {
        st.execute(params![
            task_id.0,
            name,
            row.agent,
            state.as_str(),
            row.due_at,
            row.priority,
            row.input,
            row.output,
            row.idempotency_key,
            row.timeout_ms,
            row.config,
            row.retry,
            t.now.0,
            row.kind,
            compensates,
            row.domain,
            row.fallback_at,
            row.response_timeout_ms,
            row.on_timeout,
        ])
    })
    .map_err(map_err)?;
    Ok(StepId(t.tx.last_insert_rowid()))
}

/// Moves a control step; returns its id.
pub fn update_step(
    t: &Tx<'_>,
    task_id: TaskId,
    name: &str,
    state: StepState,
    output: Option<&Value>,
    error: Option<&str>,
) -> Result<Option<StepId>, StoreError> {
    t.tx.prepare_cached(
        "UPDATE steps SET state = ?3, output = ?4, last_error = ?5, updated_at = ?6
         WHERE task_id = ?1 AND name = ?2 RETURNING id",
    )
    .and_then(|mut st| {
        st.query_row(params![task_id.0, name, state.as_str(), output.map(Value::to_string), error, t.now.0], |r| {
            r.get(0)
        })
        .optional()
    })
    .map(|id| id.map(StepId))
    .map_err(map_err)
}

/// Cancels one live step; a sub-workflow's child task is cancelled with it.
pub fn cancel_step(t: &Tx<'_>, task_id: TaskId, name: &str, actor: &str) -> Result<(), StoreError> {
    // Cancelling clears the lease: a reply from the holder is then fenced off as stale.
    let row: Option<(i64, String)> =
        t.tx.prepare_cached(
            "UPDATE steps SET state = 'cancelled', locked_by = NULL, complete_by = NULL, updated_at = ?3
             WHERE task_id = ?1 AND name = ?2 AND state IN ('pending', 'processing') RETURNING id, kind",
        )
        .and_then(|mut st| st.query_row(params![task_id.0, name, t.now.0], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(map_err)?;
    let Some((id, kind)) = row else { return Ok(()) };
    t.event(task_id, Some(StepId(id)), ev::STEP_CANCELLED, EventLevel::Info, actor, json!({"step": name}))?;
    if kind == StepKind::SubWorkflow.as_str() {
        for child in children_of(t, task_id, name)? {
            end_tree(t, child, TaskState::Cancelled, actor, json!({"reason": "its parent's step was cancelled"}))?;
        }
    }
    Ok(())
}

/// The live child tasks a parent's step started.
pub fn children_of(t: &Tx<'_>, parent: TaskId, step: &str) -> Result<Vec<TaskId>, StoreError> {
    let mut st =
        t.tx.prepare_cached(
            "SELECT id FROM tasks WHERE parent_task_id = ?1 AND parent_step = ?2
             AND state IN ('running', 'paused', 'compensating')",
        )
        .map_err(map_err)?;
    let ids = st.query_map(params![parent.0, step], |r| r.get(0).map(TaskId)).map_err(map_err)?;
    ids.collect::<Result<_, _>>().map_err(map_err)
}

/// Ends a task from outside (cancel, terminate): its live steps are cancelled, children too.
/// The parent is not told: it is the one ending it, or an operator ends the whole tree.
pub fn end_tree(t: &Tx<'_>, task_id: TaskId, state: TaskState, actor: &str, detail: Value) -> Result<(), StoreError> {
    let live: Vec<String> = {
        let mut st =
            t.tx.prepare_cached(
                "SELECT name FROM steps WHERE task_id = ?1 AND state IN ('pending', 'processing') ORDER BY id",
            )
            .map_err(map_err)?;
        let names = st.query_map([task_id.0], |r| r.get(0)).map_err(map_err)?;
        names.collect::<Result<_, _>>().map_err(map_err)?
    };
    for name in live {
        cancel_step(t, task_id, &name, actor)?;
    }
    set_task_state(t, task_id, state)?;
    let kind = if state == TaskState::Terminated { ev::TASK_TERMINATED } else { ev::TASK_CANCELLED };
    t.event(task_id, None, kind, EventLevel::Info, actor, detail)?;
    // An operator ending a child fails its parent's step; a parent ending its child finds its
    // own step already cancelled, and nothing moves.
    tell_parent(t, task_id, state, None, actor)
}

fn start_child(
    t: &Tx<'_>,
    parent: TaskId,
    task: &TaskRow,
    step_id: StepId,
    step: &str,
    child: &ChildTask,
    actor: &str,
) -> Result<(), StoreError> {
    let fail = |why: String| -> Result<(), StoreError> {
        update_step(t, parent, step, StepState::Error, None, Some(&why))?;
        t.event(parent, Some(step_id), ev::STEP_ERROR, EventLevel::Alert, actor, json!({"step": step, "error": why}))?;
        mark_again(t, parent);
        Ok(())
    };
    if task.depth + 1 > MAX_CHILD_DEPTH {
        return fail(format!("sub-workflows nest at most {MAX_CHILD_DEPTH} deep"));
    }
    let version = match child.version {
        Some(v) => Some(v),
        None => crate::submit::latest_version(t, &child.workflow)?,
    };
    let Some(version) = version else {
        return fail(format!("workflow {:?} is not registered", child.workflow));
    };
    if let Err(e) = t.definition(&child.workflow, version) {
        return fail(format!("workflow {:?} version {version}: {e}", child.workflow));
    }
    // The step's row id makes the key unique even when a retry starts a new child.
    let key = format!("{}/{step}/{}", task.key, step_id.0);
    let def = t.definition(&child.workflow, version)?;
    let deadline = def.timeout.map(|d| t.now.plus(d).0);
    let inserted = t.tx.execute(
        "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at, bucket,
                            parent_task_id, parent_step, depth, deadline_at)
         VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (task_key) DO NOTHING",
        params![
            key,
            child.workflow,
            version,
            task.priority,
            child.input.to_string(),
            t.now.0,
            bucket_of(&key),
            parent.0,
            step,
            task.depth + 1,
            deadline
        ],
    )
    .map_err(map_err)?;
    if inserted == 0 {
        return fail(format!("the child's task key {key:?} is taken by another task"));
    }
    let child_id = TaskId(t.tx.last_insert_rowid());
    update_step(t, parent, step, StepState::Processing, Some(&json!({"task_id": child_id.0})), None)?;
    t.event(parent, Some(step_id), ev::CHILD_STARTED, EventLevel::Info, actor, json!({"task_id": child_id.0}))?;
    let detail = json!({"key": key, "workflow": child.workflow, "version": version, "parent": parent.0});
    t.event(child_id, None, ev::TASK_RECEIVED, EventLevel::Info, actor, detail)?;
    advance_task(t, child_id, actor)?;
    Ok(())
}

fn mark_again(t: &Tx<'_>, task_id: TaskId) -> bool {
    match t.advancing.borrow_mut().iter_mut().find(|(id, _)| *id == task_id) {
        Some(entry) => {
            entry.1 = true;
            true
        }
        None => false,
    }
}

/// A task ended: if it is a child, its parent's step ends with it and the parent moves on.
fn tell_parent(
    t: &Tx<'_>,
    child: TaskId,
    state: TaskState,
    output: Option<&Value>,
    actor: &str,
) -> Result<(), StoreError> {
    let link: Option<(Option<i64>, Option<String>)> =
        t.tx.prepare_cached("SELECT parent_task_id, parent_step FROM tasks WHERE id = ?1")
            .and_then(|mut st| st.query_row([child.0], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(map_err)?;
    let Some((Some(parent), Some(step))) = link else { return Ok(()) };
    let parent = TaskId(parent);
    let (step_state, error) = decided::child_result(child, state);
    let output = output.cloned().unwrap_or(Value::Null);
    // Only the step still waiting for this very child moves: a parent that moved on (or reran the
    // step, which started another child) ignores it.
    let id: Option<i64> =
        t.tx.query_row(
            "UPDATE steps SET state = ?3, output = ?4, last_error = ?5, updated_at = ?6
             WHERE task_id = ?1 AND name = ?2 AND state = 'processing' AND kind = 'sub_workflow'
               AND json_extract(output, '$.task_id') = ?7 RETURNING id",
            params![parent.0, step, step_state.as_str(), output.to_string(), error, t.now.0, child.0],
            |r| r.get(0),
        )
        .optional()
        .map_err(map_err)?;
    let Some(id) = id else { return Ok(()) };
    let (kind, level) = match step_state {
        StepState::Processed => (ev::STEP_PROCESSED, EventLevel::Info),
        _ => (ev::STEP_ERROR, EventLevel::Alert),
    };
    let detail = json!({"step": step, "child": child.0, "error": error});
    t.event(parent, Some(StepId(id)), kind, level, actor, detail)?;
    if !mark_again(t, parent) {
        advance_task(t, parent, actor)?;
    }
    Ok(())
}

/// Writes the task's own move; returns its state after.
fn move_task(t: &Tx<'_>, task_id: TaskId, task: &TaskRow, m: TaskMove, actor: &str) -> Result<TaskState, StoreError> {
    let Some(decided::TaskOutcome { state, kind, level, detail, output }) = decided::task_outcome(m) else {
        return Ok(task.state);
    };
    t.tx.prepare_cached("UPDATE tasks SET state = ?2, output = coalesce(?3, output), updated_at = ?4 WHERE id = ?1")
        .and_then(|mut st| {
            st.execute(params![task_id.0, state.as_str(), output.as_ref().map(Value::to_string), t.now.0])
        })
        .map_err(map_err)?;
    t.event(task_id, None, kind, level, actor, detail)?;
    // A top-level task (most of them) has no parent to tell: that saves a read per finished task.
    if state.is_terminal() && task.is_child {
        tell_parent(t, task_id, state, output.as_ref(), actor)?;
    }
    Ok(state)
}

/// The workflow's timeout passed: live steps are cancelled, and the task fails (compensating
/// first when its workflow says so).
/// Returns false when the task was not running or paused (a compensating task runs its
/// compensations to the end whatever its deadline).
pub fn time_out(t: &Tx<'_>, task_id: TaskId, actor: &str) -> Result<bool, StoreError> {
    let task = load_task(t, task_id)?;
    if !matches!(task.state, TaskState::Running | TaskState::Paused) {
        return Ok(false);
    }
    let def = t.definition(&task.workflow, task.version)?;
    for r in load_views(t, task_id)?.into_iter().filter(StepView::is_live) {
        cancel_step(t, task_id, &r.name, actor)?;
    }
    t.event(task_id, None, ev::TASK_TIMED_OUT, EventLevel::Alert, actor, json!({"timeout": def.timeout}))?;
    let reason = "the workflow's timeout passed".to_owned();
    let rows = load_views(t, task_id)?;
    if def.compensate_on_failure && shiftboss_core::decider::needs_compensation(&def, &rows) {
        move_task(t, task_id, &task, TaskMove::Compensate { step: String::new(), reason }, actor)?;
        advance_task(t, task_id, actor)?;
    } else {
        move_task(t, task_id, &task, TaskMove::Fail { step: String::new(), reason }, actor)?;
    }
    Ok(true)
}
