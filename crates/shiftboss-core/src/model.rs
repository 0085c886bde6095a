//! The records a state store hands out: what operators and tools see of tasks, steps and events.

use crate::ids::{LeaseToken, StepId, TaskId};
use crate::retry::RetryPolicy;
use crate::state::{StepState, TaskState};
use crate::time::Timestamp;
use crate::workflow::StepKind;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: TaskId,
    /// The caller's own id for the task (the order id); submitting the same key twice gives back the same task.
    pub key: String,
    pub workflow: String,
    pub workflow_version: u32,
    pub state: TaskState,
    pub priority: i32,
    /// The load-balance bucket (M3): schedulers claim only the buckets they own.
    pub bucket: u16,
    pub input: serde_json::Value,
    pub output: Option<serde_json::Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// For a sub-workflow's child task: the parent task.
    pub parent_task_id: Option<TaskId>,
    /// When the workflow's timeout ends the task, if it has one.
    pub deadline_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub id: StepId,
    pub task_id: TaskId,
    /// The instance name: the definition's step name, plus `#n` per loop pass (`charge#2`).
    pub name: String,
    /// Agent calls are claimed; control steps (switch, fork, ...) only record the decider's progress.
    pub kind: StepKind,
    /// Empty for a control step.
    pub agent: String,
    pub state: StepState,
    /// For a compensation: the instance it undoes.
    pub compensates: Option<String>,
    /// The instance running it (P13's LockedBy); none unless Processing.
    pub locked_by: Option<String>,
    /// The time by which the holder must reply (P13's CompleteBy); none unless Processing.
    pub complete_by: Option<Timestamp>,
    /// The fencing token of the latest claim.
    pub lease_token: LeaseToken,
    /// When a Pending step may be claimed (later than now for a delayed retry).
    pub due_at: Timestamp,
    pub priority: i32,
    /// The task's load-balance bucket.
    pub bucket: u16,
    /// Lease expiries and restarts counted against the retry policy (P13's FailureCount).
    pub failure_count: u32,
    /// Claims so far.
    pub attempts: u32,
    pub last_error: Option<String>,
    pub input: serde_json::Value,
    pub output: Option<serde_json::Value>,
    /// Sent to the remote service on every attempt, so that it can drop duplicates (P4).
    pub idempotency_key: String,
    pub timeout: Duration,
    pub config: serde_json::Value,
    pub retry: Option<RetryPolicy>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// How much an event matters to an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventLevel {
    Info,
    /// Someone should look: a step or task failed for good, or a reply arrived too late.
    Alert,
}

impl EventLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            EventLevel::Info => "info",
            EventLevel::Alert => "alert",
        }
    }
}

/// One entry of the append-only event log: every transition, with its time, actor and reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub id: i64,
    pub task_id: TaskId,
    pub step_id: Option<StepId>,
    pub at: Timestamp,
    /// What happened, such as `step.processed` (see the `kind` constants in the store contract).
    pub kind: String,
    pub level: EventLevel,
    /// Who did it: an instance id, or an operator's name.
    pub actor: String,
    pub detail: serde_json::Value,
}
