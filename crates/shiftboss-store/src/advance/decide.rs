//! The decide loop: work off the agenda, deciding each task until it waits and writing what the
//! decider asks for; the workflow timeout; ending a tree from outside.

use super::MAX_ROUNDS;
use super::agenda::{Agenda, End, Next};
use super::children::{cancel_step, end_one, start_child, tell_parent};
use super::failure::start_failure_workflow;
use super::tx::{TaskRow, WriteTx};
use crate::StoreError;
use crate::decided;
use crate::event_kind as ev;
use serde_json::{Value, json};
use shiftboss_core::decider::{Action, Decision, StepView, TaskMove, TaskView, decide, needs_compensation};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{TaskId, TaskState};

/// What an advance did to its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advanced {
    /// The task's state after it.
    pub state: TaskState,
    /// How many agent steps of the task it scheduled.
    pub scheduled: u32,
}

/// Decides and ends until nothing is left on the agenda.
pub(super) async fn drain<T: WriteTx>(t: &T, agenda: &mut Agenda, actor: &str) -> Result<(), StoreError> {
    while let Some(next) = agenda.next() {
        match next {
            Next::End(end) => end_one(t, agenda, end, actor).await?,
            Next::Decide(task) => {
                let rounds = agenda.rounds.entry(task).or_default();
                *rounds += 1;
                if *rounds > MAX_ROUNDS {
                    return Err(StoreError::Backend(format!(
                        "task {task}: still moving after {MAX_ROUNDS} decides in one transaction"
                    )));
                }
                round(t, agenda, task, actor).await?;
            }
        }
    }
    Ok(())
}

/// Decides and writes until the task (and every task it moves) waits on something outside this
/// transaction.
pub async fn advance_task<T: WriteTx>(t: &T, task: TaskId, actor: &str) -> Result<Advanced, StoreError> {
    let mut agenda = Agenda::default();
    agenda.decide(task);
    finish(t, agenda, task, actor).await
}

/// Decides a task this transaction has just written, and everything that follows from it, as
/// [`advance_task`] does; its first decide starts from `task` and no steps, which the caller
/// knows, instead of reading them back.
pub async fn advance_new_task<T: WriteTx>(
    t: &T,
    task_id: TaskId,
    task: TaskRow,
    actor: &str,
) -> Result<Advanced, StoreError> {
    let mut agenda = decided_once(task_id, task.state);
    if task.state.is_active() {
        let def = t.definition(&task.workflow, task.version).await?;
        decide_and_write(t, &mut agenda, task_id, &task, &def, &[], actor).await?;
    }
    finish(t, agenda, task_id, actor).await
}

/// Writes a decide its caller ran on rows it read under the task's lock in this transaction (a
/// reply set reads and decides many tasks at once), and everything that follows from it, as
/// [`advance_task`] does; the rows are not read again.
pub async fn advance_decided<T: WriteTx>(
    t: &T,
    task_id: TaskId,
    task: &TaskRow,
    def: &WorkflowDef,
    decision: Decision,
    actor: &str,
) -> Result<Advanced, StoreError> {
    let mut agenda = decided_once(task_id, task.state);
    write_decision(t, &mut agenda, task_id, task, def, decision, actor).await?;
    finish(t, agenda, task_id, actor).await
}

/// The agenda of a call whose caller decides the task's first round itself, on a row it knows.
fn decided_once(task_id: TaskId, state: TaskState) -> Agenda {
    let mut agenda = Agenda::default();
    agenda.rounds.insert(task_id, 1);
    agenda.noted(task_id, state);
    agenda
}

/// Works off what is left on the agenda and tells what became of `task_id`.
async fn finish<T: WriteTx>(t: &T, mut agenda: Agenda, task_id: TaskId, actor: &str) -> Result<Advanced, StoreError> {
    drain(t, &mut agenda, actor).await?;
    let state = agenda.state_of(t, task_id).await?;
    Ok(Advanced { state, scheduled: agenda.scheduled.get(&task_id).copied().unwrap_or(0) })
}

/// One decide of one task, and its writes.
async fn round<T: WriteTx>(t: &T, agenda: &mut Agenda, task_id: TaskId, actor: &str) -> Result<(), StoreError> {
    let task = t.load_task(task_id).await?;
    agenda.noted(task_id, task.state);
    if !task.state.is_active() {
        return Ok(());
    }
    let def = t.definition(&task.workflow, task.version).await?;
    let rows = t.load_steps(task_id).await?;
    decide_and_write(t, agenda, task_id, &task, &def, &rows, actor).await
}

/// Runs the decider on a task's rows and writes its actions and its move.
async fn decide_and_write<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    task_id: TaskId,
    task: &TaskRow,
    def: &WorkflowDef,
    rows: &[StepView],
    actor: &str,
) -> Result<(), StoreError> {
    let view = TaskView {
        id: task_id.0,
        key: &task.key,
        state: task.state,
        input: &task.input,
        now: t.now(),
        correlation_id: task.correlation_id.as_deref(),
    };
    let decision = decide(def, &view, rows);
    write_decision(t, agenda, task_id, task, def, decision, actor).await
}

/// Writes a decide's actions and its task's move.
async fn write_decision<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    task_id: TaskId,
    task: &TaskRow,
    def: &WorkflowDef,
    decision: Decision,
    actor: &str,
) -> Result<(), StoreError> {
    for action in decision.actions {
        let scheduled = apply(t, agenda, task_id, task, def, action, actor).await?;
        *agenda.scheduled.entry(task_id).or_default() += scheduled;
    }
    move_task(t, agenda, task_id, task, decision.task, actor).await?;
    Ok(())
}

/// Writes one action; returns how many agent steps it scheduled.
async fn apply<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    task_id: TaskId,
    task: &TaskRow,
    def: &WorkflowDef,
    action: Action,
    actor: &str,
) -> Result<u32, StoreError> {
    match action {
        Action::Create(n) => {
            let row = decided::step_row(def, &n, task, t.now())?;
            let step_id = t.insert_step(task_id, &n.name, n.state, n.compensates.as_deref(), &row).await?;
            let (kind, detail) = decided::created_event(&n);
            t.event(task_id, Some(step_id), kind, EventLevel::Info, actor, detail).await?;
            if let Some(child) = &n.child {
                start_child(t, agenda, task_id, task, step_id, &n.name, child, actor).await?;
            }
            Ok(u32::from(n.kind == StepKind::Agent))
        }
        Action::Update { name, state, output, error } => {
            let step_id = t.update_step(task_id, &name, state, output.as_ref(), error.as_deref()).await?;
            let (kind, level, detail) = decided::updated_event(&name, state, output.as_ref(), error.as_deref());
            t.event(task_id, step_id, kind, level, actor, detail).await?;
            Ok(0)
        }
        Action::Cancel { name } => {
            cancel_step(t, agenda, task_id, &name, actor).await?;
            Ok(0)
        }
    }
}

/// Writes the task's own move. A task that ends tells its parent.
pub(super) async fn move_task<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    task_id: TaskId,
    task: &TaskRow,
    m: TaskMove,
    actor: &str,
) -> Result<(), StoreError> {
    let Some(decided::TaskOutcome { state, kind, level, detail, output }) = decided::task_outcome(m) else {
        return Ok(());
    };
    t.set_task_state(task_id, state, output.as_ref()).await?;
    agenda.noted(task_id, state);
    let why = (state == TaskState::Failed).then(|| detail.clone());
    t.event(task_id, None, kind, level, actor, detail).await?;
    if let Some(why) = why {
        start_failure_workflow(t, agenda, task_id, task, &why, actor).await?;
    }
    if state.is_terminal() && task.is_child {
        tell_parent(t, agenda, task_id, state, output.as_ref(), actor).await?;
    }
    Ok(())
}

/// The workflow's timeout passed: live steps are cancelled, and the task fails (compensating
/// first when its workflow says so). The caller holds the task's lock.
/// Returns false when the task was not running or paused (a compensating task runs its
/// compensations to the end whatever its deadline).
pub async fn time_out<T: WriteTx>(t: &T, task_id: TaskId, actor: &str) -> Result<bool, StoreError> {
    let task = t.load_task(task_id).await?;
    if !matches!(task.state, TaskState::Running | TaskState::Paused) {
        return Ok(false);
    }
    let mut agenda = Agenda::default();
    let def = t.definition(&task.workflow, task.version).await?;
    for r in t.load_steps(task_id).await?.into_iter().filter(StepView::is_live) {
        cancel_step(t, &mut agenda, task_id, &r.name, actor).await?;
    }
    t.event(task_id, None, ev::TASK_TIMED_OUT, EventLevel::Alert, actor, json!({"timeout": def.timeout})).await?;
    let reason = "the workflow's timeout passed".to_owned();
    let rows = t.load_steps(task_id).await?;
    if def.compensate_on_failure && needs_compensation(&def, &rows) {
        move_task(t, &mut agenda, task_id, &task, TaskMove::Compensate { step: String::new(), reason }, actor).await?;
        agenda.decide(task_id);
    } else {
        move_task(t, &mut agenda, task_id, &task, TaskMove::Fail { step: String::new(), reason }, actor).await?;
    }
    drain(t, &mut agenda, actor).await?;
    Ok(true)
}

/// Ends a task from outside (an operator's cancel or terminate): its live steps are cancelled,
/// children too, and its parent, if it has one, is told. The caller holds the task's lock.
pub async fn end_tree<T: WriteTx>(
    t: &T,
    task: TaskId,
    state: TaskState,
    actor: &str,
    detail: Value,
) -> Result<(), StoreError> {
    let mut agenda = Agenda::default();
    agenda.end(End { task, state, detail });
    drain(t, &mut agenda, actor).await
}
