//! The decider (C3): from a workflow definition and the current steps of a task, what happens next.
//!
//! It is a pure function, so that a store can run it inside the same transaction that records a
//! step's result: the result and the work it causes are written together or not at all. Control
//! steps do no work (C4): the decider turns them into the steps to run and records their own
//! progress (a switch's case, a loop's pass) as rows of their own, so that every later decide
//! sees the same choices.
//!
//! Steps are found by instance name: a step's name, plus `#n` for each loop pass it runs in
//! (`charge#2`); `#` is not allowed in names, so instance names never collide.
//!
//! Layout: this file holds the types; `walk` the running phase, `compensate` the undoing
//! phase, `scope` what expressions see, [`operator`] the plans of operator actions.

mod compensate;
pub mod memory;
pub use compensate::needs_compensation;
pub mod operator;
mod scope;
mod walk;

use crate::state::{StepState, TaskState};
use crate::time::Timestamp;
use crate::workflow::{StepKind, WorkflowDef};
use serde_json::Value;

/// What the decider sees of the task.
#[derive(Debug, Clone, Copy)]
pub struct TaskView<'a> {
    /// The task's id, which expressions read as `${task.id}`.
    pub id: i64,
    /// The caller's key of the task (`${task.key}`).
    pub key: &'a str,
    /// Its state: only a running or compensating task is moved on.
    pub state: TaskState,
    /// Its input (`${task.input}`).
    pub input: &'a Value,
    /// The store's clock, for waits.
    pub now: Timestamp,
    /// The caller's correlation id, if any (`${task.correlation_id}`, null when none).
    pub correlation_id: Option<&'a str>,
}

/// What the decider sees of one existing step row.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    /// The row's id; orders rows by creation.
    pub id: i64,
    /// The instance name (`charge`, or `charge#2` in a loop's second pass).
    pub name: String,
    /// What the step is: an agent call or a control step.
    pub kind: StepKind,
    /// Where the row stands.
    pub state: StepState,
    /// The input it was given.
    pub input: Value,
    /// What it produced; a control step's record (a switch's case, a loop's pass).
    pub output: Option<Value>,
    /// Why it last failed; for a row in Error, the reason the task's failure gives.
    pub last_error: Option<String>,
    /// When the row last changed: for a processed step, when it finished.
    pub updated_at: Timestamp,
    /// For a compensation: the instance it undoes.
    pub compensates: Option<String>,
}

/// A step row to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewStep {
    /// The instance name of the new row.
    pub name: String,
    /// The definition's step (its agent, config, timeout and policies).
    pub def_name: String,
    /// What the step is, from its definition.
    pub kind: StepKind,
    /// Pending for an agent step; Processing for a control step that waits on something;
    /// Processed for one that is done as soon as it is decided (a switch, a terminate).
    pub state: StepState,
    /// The step's input template rendered; without one, the task's input (a compensation: its step's).
    pub input: Value,
    /// What a step done at once records (a switch's case, a terminate's status and output); a loop's pass.
    pub output: Option<Value>,
    /// For a timed wait: when it ends.
    pub wake_at: Option<Timestamp>,
    /// For a compensation: the instance it undoes.
    pub compensates: Option<String>,
    /// For a sub-workflow or a start_workflow step: the task to start with the row.
    pub child: Option<ChildTask>,
    /// For an agent step whose agent is chosen at run time: the agent chosen.
    pub agent: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChildTask {
    /// The child's workflow.
    pub workflow: String,
    /// The child's workflow version; none for the newest registered when the child starts.
    pub version: Option<u32>,
    /// The child task's input.
    pub input: Value,
    /// A start_workflow step's task: started and left to itself. The step is done once it has
    /// started, and the task's end tells no one.
    pub detached: bool,
}

/// One change to the task's step rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A new step row.
    Create(NewStep),
    /// A control step moves on: to Processed or Error, or stays Processing with a new output
    /// (a loop's next pass).
    Update {
        /// The instance name of the row.
        name: String,
        /// Its new state.
        state: StepState,
        /// Its new output, which replaces the old.
        output: Option<Value>,
        /// Its new `last_error`, which replaces the old.
        error: Option<String>,
    },
    /// A live step (pending or processing) is cancelled (C1): a fork's other branches once one
    /// has failed, or every live step when the task ends early.
    Cancel {
        /// The instance name of the row.
        name: String,
    },
}

/// What happens to the task itself.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskMove {
    /// It stays as it is (work is pending, or it is not running).
    Stay,
    /// The task completes: every step is done, or a terminate step ended it as completed.
    Complete {
        /// The task's output: the workflow's output template, else the last step's or a terminate's.
        output: Value,
    },
    /// It fails for good, with nothing to compensate.
    Fail {
        /// The instance that failed (`output` when the workflow's output template did).
        step: String,
        /// Why it failed.
        reason: String,
    },
    /// It failed (or was cancelled) and now compensates its completed steps, newest first.
    Compensate {
        /// The instance whose failure started the compensation.
        step: String,
        /// Why it failed.
        reason: String,
    },
    /// Every compensation has run.
    Compensated,
    /// A compensation failed for good: the task fails and someone must look.
    CompensationFailed {
        /// The compensation instance that failed or could not start.
        step: String,
    },
    /// A step was cancelled from outside: the task is cancelled.
    Cancelled,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The changes to the task's step rows, in the order they are written.
    pub actions: Vec<Action>,
    /// What happens to the task itself.
    pub task: TaskMove,
}

/// The most actions one decide may produce; beyond it the definition is running away (a loop of
/// control steps only) and the task fails rather than the store filling up.
pub const MAX_ACTIONS: usize = 20_000;

/// Decides the next move of a task.
pub fn decide(def: &WorkflowDef, task: &TaskView<'_>, steps: &[StepView]) -> Decision {
    let mut w = walk::Working::new(def, task, steps);
    let task_move = match task.state {
        TaskState::Running => w.run(),
        TaskState::Compensating => w.compensate(),
        _ => TaskMove::Stay,
    };
    Decision { actions: w.into_actions(), task: task_move }
}

/// The definition step an instance runs: `charge#2` → `charge`.
pub fn base_name(instance: &str) -> &str {
    instance.split('#').next().unwrap_or(instance)
}

/// The loop-pass suffix of an instance: `charge#2` → `#2`.
pub fn suffix_of(instance: &str) -> &str {
    instance.find('#').map(|i| &instance[i..]).unwrap_or("")
}

impl StepView {
    pub fn is_live(&self) -> bool {
        matches!(self.state, StepState::Pending | StepState::Processing)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vocabulary_tests;
