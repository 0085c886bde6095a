//! The decide loop: an [`Agenda`] of tasks to decide and trees to end, drained in one loop.

use super::MAX_ROUNDS;
use super::children::{cancel_step, end_one, start_child, tell_parent};
use super::tx::{TaskRow, WriteTx};
use crate::StoreError;
use crate::decided;
use crate::event_kind as ev;
use serde_json::{Value, json};
use shiftboss_core::decider::{Action, StepView, TaskMove, TaskView, decide, needs_compensation};
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{TaskId, TaskState};
use std::collections::{HashMap, VecDeque};

/// What an advance did to its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advanced {
    /// The task's state after it.
    pub state: TaskState,
    /// How many agent steps of the task it scheduled.
    pub scheduled: u32,
}

/// A tree to end from outside (cancel, terminate, its parent's step cancelled).
pub(super) struct End {
    pub task: TaskId,
    pub state: TaskState,
    pub detail: Value,
}

/// The work one call has left: tasks to decide (each once in the queue), trees to end, and what
/// it learned of each task's state.
#[derive(Default)]
pub(super) struct Agenda {
    decide: VecDeque<TaskId>,
    ends: Vec<End>,
    rounds: HashMap<TaskId, usize>,
    /// Each task's state as last written or read here.
    states: HashMap<TaskId, TaskState>,
    /// Agent steps scheduled, per task.
    scheduled: HashMap<TaskId, u32>,
}

impl Agenda {
    /// Asks for `task` to be decided (again); a task waiting already is not queued twice.
    pub fn decide(&mut self, task: TaskId) {
        if !self.decide.contains(&task) {
            self.decide.push_back(task);
        }
    }

    pub fn end(&mut self, end: End) {
        self.ends.push(end);
    }

    pub fn noted(&mut self, task: TaskId, state: TaskState) {
        self.states.insert(task, state);
    }

    /// Decides and ends until nothing is left. Trees to end go first: a task that is being ended
    /// must not be decided on first.
    pub async fn drain<T: WriteTx>(&mut self, t: &T, actor: &str) -> Result<(), StoreError> {
        loop {
            if let Some(end) = self.ends.pop() {
                end_one(t, self, end, actor).await?;
            } else if let Some(task) = self.decide.pop_front() {
                let rounds = self.rounds.entry(task).or_default();
                *rounds += 1;
                if *rounds > MAX_ROUNDS {
                    return Err(StoreError::Backend(format!(
                        "task {task}: still moving after {MAX_ROUNDS} decides in one transaction"
                    )));
                }
                round(t, self, task, actor).await?;
            } else {
                return Ok(());
            }
        }
    }

    /// A task's state as this call last saw it, or as stored.
    pub async fn state_of<T: WriteTx>(&self, t: &T, task: TaskId) -> Result<TaskState, StoreError> {
        match self.states.get(&task) {
            Some(s) => Ok(*s),
            None => Ok(t.load_task(task).await?.state),
        }
    }
}

/// Decides and writes until the task (and every task it moves) waits on something outside this
/// transaction.
pub async fn advance_task<T: WriteTx>(t: &T, task: TaskId, actor: &str) -> Result<Advanced, StoreError> {
    let mut agenda = Agenda::default();
    agenda.decide(task);
    agenda.drain(t, actor).await?;
    let state = agenda.state_of(t, task).await?;
    Ok(Advanced { state, scheduled: agenda.scheduled.get(&task).copied().unwrap_or(0) })
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
    let view = TaskView { id: task_id.0, key: &task.key, state: task.state, input: &task.input, now: t.now() };
    let decision = decide(&def, &view, &rows);
    for action in decision.actions {
        let scheduled = apply(t, agenda, task_id, &task, &def, action, actor).await?;
        *agenda.scheduled.entry(task_id).or_default() += scheduled;
    }
    move_task(t, agenda, task_id, &task, decision.task, actor).await?;
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
            let row = decided::step_row(def, &n, task.priority, t.now())?;
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
    t.event(task_id, None, kind, level, actor, detail).await?;
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
    agenda.drain(t, actor).await?;
    Ok(true)
}
