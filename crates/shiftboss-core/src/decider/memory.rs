//! One task held in memory and moved by the decider the way a store moves it: each decision's
//! actions written into its rows, its task move into its state. For trying a definition without a
//! database (what runs, in which order, with which inputs) and for the decider's own tests.

use super::operator::{Plan, RowChange};
use super::{Action, ChildTask, StepView, TaskMove, TaskView, decide};
use crate::state::{StepState, TaskState};
use crate::time::Timestamp;
use crate::workflow::{StepKind, WorkflowDef};
use serde_json::Value;
use std::time::Duration;

/// What the memory task refuses: a step that does not exist or is not in the state the call
/// needs, or a decision a store would refuse too (a sign of a decider bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MemoryError(pub String);

#[derive(Debug, Clone)]
pub struct MemoryTask {
    /// The definition the task runs.
    pub def: WorkflowDef,
    /// The task's step rows, in the order they were created.
    pub rows: Vec<StepView>,
    /// The task's state, moved by each decision's task move.
    pub state: TaskState,
    /// The task's input.
    pub input: Value,
    /// The task's output, once it completes.
    pub output: Option<Value>,
    /// The task's clock: moved by [`MemoryTask::tick`] and by each agent reply.
    pub now: Timestamp,
    /// The child tasks sub-workflow steps started, in order.
    pub children: Vec<ChildTask>,
    /// The wait steps begun, with their wake times (none: a signal).
    pub waits: Vec<(String, Option<Timestamp>)>,
    next_id: i64,
}

impl MemoryTask {
    pub fn new(def: WorkflowDef, input: Value, now: Timestamp) -> MemoryTask {
        MemoryTask {
            def,
            rows: Vec::new(),
            state: TaskState::Running,
            input,
            output: None,
            now,
            children: Vec::new(),
            waits: Vec::new(),
            next_id: 1,
        }
    }

    /// Runs the decider once and writes what it decides.
    pub fn decide(&mut self) -> Result<TaskMove, MemoryError> {
        let task = TaskView {
            id: 1,
            key: "memory",
            state: self.state,
            input: &self.input,
            now: self.now,
            correlation_id: None,
        };
        let d = decide(&self.def, &task, &self.rows);
        let started = self.children.len();
        for action in d.actions {
            self.write(action)?;
        }
        // A start_workflow step is done once its task has started, as a store writes it: the walk
        // goes on past it in the next decide.
        if self.children[started..].iter().any(|c| c.detached) && d.task == TaskMove::Stay {
            return self.decide();
        }
        self.state = match &d.task {
            TaskMove::Stay => self.state,
            TaskMove::Complete { output } => {
                self.output = Some(output.clone());
                TaskState::Completed
            }
            TaskMove::Fail { .. } | TaskMove::CompensationFailed { .. } => TaskState::Failed,
            TaskMove::Compensate { .. } => TaskState::Compensating,
            TaskMove::Compensated => TaskState::Compensated,
            TaskMove::Cancelled => TaskState::Cancelled,
        };
        Ok(d.task)
    }

    fn write(&mut self, action: Action) -> Result<(), MemoryError> {
        match action {
            Action::Create(n) => {
                if self.rows.iter().any(|r| r.name == n.name) {
                    return Err(MemoryError(format!("{} is created twice", n.name)));
                }
                let mut n = n;
                if let Some(c) = n.child.clone() {
                    if c.detached {
                        n.state = StepState::Processed;
                        n.output = Some(serde_json::json!({"task_id": self.children.len() + 2}));
                    }
                    self.children.push(c);
                }
                if n.kind == StepKind::Wait && n.state == StepState::Processing {
                    self.waits.push((n.name.clone(), n.wake_at));
                }
                self.rows.push(StepView {
                    id: self.next_id,
                    name: n.name,
                    kind: n.kind,
                    state: n.state,
                    input: n.input,
                    output: n.output,
                    last_error: None,
                    updated_at: self.now,
                    compensates: n.compensates,
                });
                self.next_id += 1;
            }
            Action::Update { name, state, output, error } => {
                let r = self.row_mut(&name)?;
                if r.kind == StepKind::Agent {
                    return Err(MemoryError(format!("the decider moved agent step {name} itself")));
                }
                (r.state, r.output, r.last_error) = (state, output, error);
            }
            Action::Cancel { name } => {
                let r = self.row_mut(&name)?;
                if !r.is_live() {
                    return Err(MemoryError(format!("{name} is cancelled but was {}", r.state)));
                }
                r.state = StepState::Cancelled;
            }
        }
        Ok(())
    }

    pub fn tick(&mut self, d: Duration) {
        self.now = self.now.plus(d);
    }

    /// A pending agent step finishes with `output` (one second later); then the decider runs.
    pub fn finish(&mut self, name: &str, output: Value) -> Result<TaskMove, MemoryError> {
        self.tick(Duration::from_secs(1));
        let now = self.now;
        let r = self.pending_row(name)?;
        (r.state, r.output, r.updated_at) = (StepState::Processed, Some(output), now);
        self.decide()
    }

    /// A pending agent step fails for good with `error`; then the decider runs.
    pub fn fail(&mut self, name: &str, error: &str) -> Result<TaskMove, MemoryError> {
        self.tick(Duration::from_secs(1));
        let r = self.pending_row(name)?;
        (r.state, r.last_error) = (StepState::Error, Some(error.to_owned()));
        self.decide()
    }

    /// A waiting control step ends from outside (its child task, its timer, a signal).
    pub fn end_control(&mut self, name: &str, output: Value) -> Result<TaskMove, MemoryError> {
        let r = self.row_mut(name)?;
        if r.state != StepState::Processing {
            return Err(MemoryError(format!("{name} is {}, not waiting", r.state)));
        }
        (r.state, r.output) = (StepState::Processed, Some(output));
        self.decide()
    }

    /// Writes an operator's plan (see [`super::operator`]); the caller then decides.
    pub fn apply(&mut self, plan: Plan) -> Result<(), MemoryError> {
        for change in plan.changes {
            match change {
                RowChange::Reset { name } => self.row_mut(&name)?.state = StepState::Pending,
                RowChange::Reopen { name, output } => {
                    let r = self.row_mut(&name)?;
                    (r.state, r.output) = (StepState::Processing, output);
                }
                RowChange::Delete { name } => self.rows.retain(|r| r.name != name),
                RowChange::Finish { name, output } => {
                    let r = self.row_mut(&name)?;
                    (r.state, r.output) = (StepState::Processed, Some(output));
                }
            }
        }
        self.state = plan.task_state;
        Ok(())
    }

    pub fn row(&self, name: &str) -> Option<&StepView> {
        self.rows.iter().find(|r| r.name == name)
    }

    fn row_mut(&mut self, name: &str) -> Result<&mut StepView, MemoryError> {
        self.rows.iter_mut().find(|r| r.name == name).ok_or_else(|| MemoryError(format!("no step {name}")))
    }

    fn pending_row(&mut self, name: &str) -> Result<&mut StepView, MemoryError> {
        let r = self.row_mut(name)?;
        if r.state != StepState::Pending {
            return Err(MemoryError(format!("{name} is {}, not pending", r.state)));
        }
        Ok(r)
    }

    /// The agent steps waiting to run, in the order they were scheduled.
    pub fn pending(&self) -> Vec<&str> {
        self.rows.iter().filter(|r| r.state == StepState::Pending).map(|r| r.name.as_str()).collect()
    }

    /// Every row's instance name, in creation order.
    pub fn names(&self) -> Vec<&str> {
        self.rows.iter().map(|r| r.name.as_str()).collect()
    }
}
