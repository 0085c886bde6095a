//! Tasks without progress (P17), found by the store in one read for the operator alerts: running
//! tasks whose last move (the task's last change, or the last end of one of its steps) is at or
//! before a cutoff, and that do not wait on purpose (an open wait or sub-workflow step: a child is
//! looked at on its own). Oldest move first, so that a backlog of stalled tasks is reported from its
//! oldest, and tasks that wait on purpose, however many, never hide one that is stuck.

use crate::StoreError;
use shiftboss_core::Timestamp;
use shiftboss_core::model::TaskRecord;

/// The most tasks one read returns.
pub const MAX_STALLED: u32 = 1_000;

#[derive(Debug, Clone)]
pub struct StalledTasks {
    /// Tasks whose last move is at or before this (the store's time) are stalled.
    pub cutoff: Timestamp,
    pub limit: u32,
}

impl StalledTasks {
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.limit == 0 || self.limit > MAX_STALLED {
            return Err(StoreError::InvalidInput(format!("a limit of 1 to {MAX_STALLED} stalled tasks")));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct StalledTask {
    pub task: TaskRecord,
    /// Its last move: the task's last change of state or its last step's end, whichever is later.
    pub since: Timestamp,
}
