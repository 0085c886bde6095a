//! The work one call of the write path has left: tasks to decide and trees to end. A decide may
//! start a child, a child that ends moves its parent, a cancelled step ends its child's tree; each
//! of those adds to the agenda, and one loop (`decide::drain`) works it off.

use super::tx::WriteTx;
use crate::StoreError;
use serde_json::Value;
use shiftboss_core::{TaskId, TaskState};
use std::collections::{HashMap, VecDeque};

/// What the loop does next.
pub(super) enum Next {
    End(End),
    Decide(TaskId),
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
    /// Decides per task, against [`super::MAX_ROUNDS`].
    pub rounds: HashMap<TaskId, usize>,
    /// Each task's state as last written or read here.
    states: HashMap<TaskId, TaskState>,
    /// Agent steps scheduled, per task.
    pub scheduled: HashMap<TaskId, u32>,
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

    /// The next tree to end, before any task to decide: a task that is being ended must not be
    /// decided on first.
    pub fn next(&mut self) -> Option<Next> {
        match self.ends.pop() {
            Some(end) => Some(Next::End(end)),
            None => self.decide.pop_front().map(Next::Decide),
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
