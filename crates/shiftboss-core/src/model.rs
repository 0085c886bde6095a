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
    /// The task's id, given by the store at submission.
    pub id: TaskId,
    /// The caller's own id for the task (the order id); submitting the same key twice gives back the same task.
    pub key: String,
    /// The name of the workflow the task runs.
    pub workflow: String,
    /// The version of that workflow it runs, fixed when the task was submitted.
    pub workflow_version: u32,
    /// Where the task stands: running, paused, completed, failed, ...
    pub state: TaskState,
    /// Added to each of its steps' own priority; a higher priority is claimed first.
    pub priority: i32,
    /// The load-balance bucket (M3): schedulers claim only the buckets they own.
    pub bucket: u16,
    /// The input given at submission; step templates read it as `${task.input}`.
    pub input: serde_json::Value,
    /// The task's output, set when it completes.
    pub output: Option<serde_json::Value>,
    /// When the task was submitted.
    pub created_at: Timestamp,
    /// When the task's row last changed.
    pub updated_at: Timestamp,
    /// For a sub-workflow's child task: the parent task.
    pub parent_task_id: Option<TaskId>,
    /// When the workflow's timeout ends the task, if it has one.
    pub deadline_at: Option<Timestamp>,
    /// The caller's label for related tasks (Conductor's correlationId): not unique, searchable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Its isolation domains by agent (agent or `*` to domain): where its steps that name none go.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub domains: std::collections::BTreeMap<String, String>,
    /// True when it was read from the history tables, where the archiver moves finished tasks.
    #[serde(default)]
    pub archived: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The step's id, given by the store when its row was created.
    pub id: StepId,
    /// The task the step belongs to.
    pub task_id: TaskId,
    /// The instance name: the definition's step name, plus `#n` per loop pass (`charge#2`).
    pub name: String,
    /// Agent calls are claimed; control steps (switch, fork, ...) only record the decider's progress.
    pub kind: StepKind,
    /// Empty for a control step.
    pub agent: String,
    /// Where the step stands: pending, processing, processed, error or cancelled.
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
    /// Its task's priority plus the step's own: the claim takes higher priorities first.
    pub priority: i32,
    /// The task's load-balance bucket.
    pub bucket: u16,
    /// Lease expiries, restarts and failed attempts counted against the retry policy (P13's FailureCount).
    pub failure_count: u32,
    /// Claims so far.
    pub attempts: u32,
    /// The reason of its latest failure (an error reply, a failed attempt, a lapsed lease).
    pub last_error: Option<String>,
    /// What the agent is called with (a sub-workflow: its child task), from the step's input template.
    pub input: serde_json::Value,
    /// The agent's result once processed, or what a control step records (a switch's case, a loop's pass).
    pub output: Option<serde_json::Value>,
    /// What the worker holding it last said of its progress (a heartbeat's report); cleared by
    /// the next claim.
    pub progress: Option<serde_json::Value>,
    /// The isolation domain it is routed to (Conductor's taskToDomain): only a worker or
    /// scheduler serving that domain claims it, until `fallback_at`.
    pub domain: Option<String>,
    /// When a step routed to a domain may be claimed by any instance; none for no fallback.
    pub fallback_at: Option<Timestamp>,
    /// Sent to the remote service on every attempt, so that it can drop duplicates (P4).
    pub idempotency_key: String,
    /// The complete-by window of one claim: the holder must reply within it.
    pub timeout: Duration,
    /// What the agent needs besides the input, from the definition (for the HTTP agent: method, url, headers).
    pub config: serde_json::Value,
    /// The retry policy written on the row (the step's, its workflow's or a job's); none: the agent's or the default.
    pub retry: Option<RetryPolicy>,
    /// When the step's row was created.
    pub created_at: Timestamp,
    /// When the step's row last changed.
    pub updated_at: Timestamp,
}

/// How much an event matters to an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventLevel {
    /// A transition worth keeping, with nothing for an operator to do.
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
    /// The store's id of the event, increasing as events are written.
    pub id: i64,
    /// The task the event is about.
    pub task_id: TaskId,
    /// The step the event is about, if it is about one.
    pub step_id: Option<StepId>,
    /// When it happened, by the store's clock.
    pub at: Timestamp,
    /// What happened, such as `step.processed` (see the `kind` constants in the store contract).
    pub kind: String,
    /// Whether an operator should look (an alert) or not.
    pub level: EventLevel,
    /// Who did it: an instance id, or an operator's name.
    pub actor: String,
    /// What else the kind records (the step's name, a reason, a count), as JSON.
    pub detail: serde_json::Value,
}
