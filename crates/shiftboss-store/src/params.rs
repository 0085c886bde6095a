//! Params and results of the store operations.

use crate::StoreError;
use shiftboss_core::model::{EventRecord, StepRecord, TaskRecord};
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::{InstanceId, LeaseToken, StepId, StepState, TaskId, TaskState, Timestamp};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterOutcome {
    /// The definition was new and is now registered.
    Created,
    /// The same definition was registered before.
    Unchanged,
}

#[derive(Debug, Clone, Default)]
pub struct SubmitTask {
    /// The caller's id for the task (the order id): submitting it again returns the same task.
    pub key: String,
    /// The name of the workflow the task runs.
    pub workflow: String,
    /// The newest registered version when none.
    pub version: Option<u32>,
    /// The task's input: a JSON object of at most `MAX_INPUT_BYTES` bytes.
    pub input: serde_json::Value,
    /// Added to each of its steps' own priority; a higher priority is claimed first.
    pub priority: i32,
    /// Who submits, for the event log.
    pub actor: String,
    /// The task's own status channel (P18): a webhook that gets its messages, written with it.
    pub notify: Option<crate::WebhookTarget>,
    /// Isolation domains by agent (Conductor's taskToDomain): a step whose definition names no
    /// domain goes to the domain of its agent, else of `"*"`; only schedulers and workers serving
    /// that domain claim it. Kept with the task; a sub-workflow's child takes its parent's.
    pub domains: TaskDomains,
    /// A label the caller gives related tasks (Conductor's correlationId): not unique, not part
    /// of what makes a repeated submission the same; tasks are listed by it. A sub-workflow's
    /// child takes its parent's.
    pub correlation_id: Option<String>,
}

/// Agent (or `"*"`) to isolation domain, for one task's steps; [`NO_DOMAIN`] keeps an agent's
/// steps out of the `"*"` domain.
pub type TaskDomains = std::collections::BTreeMap<String, String>;

/// The domain that is none (Conductor's word): the agent's steps go to any scheduler or worker.
pub const NO_DOMAIN: &str = "NO_DOMAIN";

/// The most entries a task's domain map may hold.
pub const MAX_TASK_DOMAINS: usize = 100;

/// The domain of a task's step of `agent`, by the task's map: its agent's entry, else `"*"`'s;
/// none for [`NO_DOMAIN`].
pub fn domain_for<'a>(domains: &'a TaskDomains, agent: &str) -> Option<&'a String> {
    domains.get(agent).or_else(|| domains.get("*")).filter(|d| d.as_str() != NO_DOMAIN)
}

/// The longest task key accepted.
pub const MAX_TASK_KEY_LEN: usize = 200;
/// The largest task input accepted, in bytes of JSON.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

impl SubmitTask {
    /// Checks what does not need the database; stores call it before they write.
    pub fn validate(&self) -> Result<(), crate::StoreError> {
        let bad = |m: String| Err(crate::StoreError::InvalidInput(m));
        if self.key.is_empty() || self.key.len() > MAX_TASK_KEY_LEN || self.key.chars().any(char::is_control) {
            return bad(format!("task key must be 1 to {MAX_TASK_KEY_LEN} bytes with no control characters"));
        }
        if !self.input.is_object() {
            return bad("task input must be a JSON object".into());
        }
        let size = serde_json::to_vec(&self.input).map(|v| v.len()).unwrap_or(usize::MAX);
        if size > MAX_INPUT_BYTES {
            return bad(format!("task input is {size} bytes; at most {MAX_INPUT_BYTES}"));
        }
        if let Some(n) = &self.notify {
            n.validate()?;
        }
        if let Some(c) = &self.correlation_id
            && (c.is_empty() || c.len() > MAX_TASK_KEY_LEN || c.chars().any(char::is_control))
        {
            return bad(format!("a correlation id must be 1 to {MAX_TASK_KEY_LEN} bytes with no control characters"));
        }
        if self.domains.len() > MAX_TASK_DOMAINS {
            return bad(format!("at most {MAX_TASK_DOMAINS} domains per task"));
        }
        let name = |what: &str, n: &str| {
            shiftboss_core::workflow::check_name(what, n)
                .map_err(|e| crate::StoreError::InvalidInput(format!("{}: {}", e.path, e.problem)))
        };
        for (agent, domain) in &self.domains {
            if agent != "*" {
                name("domains (an agent)", agent)?;
            }
            name(&format!("domains.{agent}"), domain)?;
        }
        Ok(())
    }
}

impl SubmitTask {
    /// What a submission of a key that already names task `id` gets: the same task when the
    /// workflow and input match (a retry of the same submission), a `Conflict` otherwise (a
    /// caller's mistake that must not pass silently). `stored_input` is the task's input as stored.
    pub fn resubmission(&self, id: TaskId, workflow: &str, stored_input: &str) -> Result<Submitted, crate::StoreError> {
        let same_input = serde_json::from_str::<serde_json::Value>(stored_input).is_ok_and(|v| v == self.input);
        if workflow != self.workflow || !same_input {
            return Err(crate::StoreError::Conflict(format!(
                "task key {:?} was submitted before with another workflow or input (task {id})",
                self.key
            )));
        }
        Ok(Submitted { task_id: id, created: false })
    }
}

/// The most tasks one batch submission takes (`Store::submit_tasks`).
pub const MAX_SUBMIT_BATCH: usize = 10_000;

/// Checks a batch submission before anything is written: its size, and each task as
/// [`SubmitTask::validate`] does, an error naming the task's index in the batch.
pub fn validate_batch(tasks: &[SubmitTask]) -> Result<(), crate::StoreError> {
    if tasks.len() > MAX_SUBMIT_BATCH {
        return Err(crate::StoreError::InvalidInput(format!(
            "{} tasks in one batch; at most {MAX_SUBMIT_BATCH}",
            tasks.len()
        )));
    }
    for (i, t) in tasks.iter().enumerate() {
        t.validate().map_err(|e| match e {
            crate::StoreError::InvalidInput(m) => crate::StoreError::InvalidInput(format!("task {i}: {m}")),
            other => other,
        })?;
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// The task the key names.
    pub task_id: TaskId,
    /// False when the key was submitted before and the existing task is returned.
    pub created: bool,
}

#[derive(Debug, Clone)]
pub struct ClaimDueSteps {
    /// The claiming scheduler, written on each claimed step as its LockedBy.
    pub instance: InstanceId,
    /// At most this many steps.
    pub limit: u32,
    /// Only steps of these agents: an instance claims only what it can run.
    pub agents: Vec<String>,
    /// Only steps in these load-balance buckets (M3); `None` claims from every bucket.
    pub buckets: Option<Vec<u16>>,
    /// The isolation domains this instance serves: a step routed to a domain is claimed only by
    /// an instance serving it, until the step's fallback time has passed.
    pub domains: Vec<String>,
    /// Limits per agent type, across every instance of the store.
    pub limits: Vec<AgentLimit>,
}

/// How much of one agent type may run at once, and how fast it may start, across all instances.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentLimit {
    /// The agent type the limits apply to.
    pub agent: String,
    /// At most this many of its steps Processing at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u32>,
    /// At most this many claims of its steps per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u32>,
}

/// A scheduler says it is alive, and learns who else is, to compute its share of the buckets.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    /// The scheduler's instance id.
    pub instance: InstanceId,
    /// Its share of the machine power (M3); at least 1.
    pub weight: u32,
    /// How long it counts as alive without another heartbeat.
    pub ttl: Duration,
}

/// A step claimed by an instance: everything its agent needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedStep {
    /// The step's id.
    pub id: StepId,
    /// The task it belongs to.
    pub task_id: TaskId,
    /// That task's key (the application's own id), read by the claim, so that a remote worker's
    /// poll hands it out without another read.
    pub task_key: String,
    /// The step's instance name (`charge`, `charge#2`).
    pub name: String,
    /// The agent that runs it.
    pub agent: String,
    /// The fencing token of this claim: the reply and every progress report must carry it.
    pub lease_token: LeaseToken,
    /// When the lease lapses unless the holder replies or reports progress first.
    pub complete_by: Timestamp,
    /// The store's clock when the claim was made, so that the holder can measure its window.
    pub claimed_at: Timestamp,
    /// 1 for the first claim.
    pub attempt: u32,
    /// What the agent is called with.
    pub input: serde_json::Value,
    /// What the agent needs besides the input, from the definition.
    pub config: serde_json::Value,
    /// Sent to the remote service on every attempt, so that it can drop duplicates (P4).
    pub idempotency_key: String,
    /// What the step's agent last reported of its progress (a heartbeat's, a postponement's), on
    /// an earlier attempt: where this one may go on from. None when no attempt reported any.
    pub progress: Option<serde_json::Value>,
}

#[derive(Debug, Clone)]
pub struct RecordReplies {
    /// The replying instance, the actor of the events written (the lease token is the fence).
    pub instance: InstanceId,
    /// The replies, each applied or refused on its own.
    pub replies: Vec<Reply>,
    /// For a reply that reports a failed attempt: the policies that set its next try.
    pub policies: Arc<RetryPolicies>,
}

#[derive(Debug, Clone)]
pub struct Reply {
    /// The step replied to.
    pub step_id: StepId,
    /// The token of the claim the reply answers: a reply under an older lease is refused.
    pub lease_token: LeaseToken,
    /// What the agent reports.
    pub result: ReplyResult,
}

#[derive(Debug, Clone)]
pub enum ReplyResult {
    /// The agent finished: the step is Processed with this output (P15).
    Completed(serde_json::Value),
    /// The agent met a fault that will not pass: the step goes to Error at once (P16).
    PermanentError(String),
    /// The attempt failed with this reason (a retry job's handler failure, M5): the step runs
    /// again after its retry policy's next interval, its failure count one up, or goes to Error
    /// when the policy has no try left.
    Failed(String),
    /// The agent hands the step back unfinished (Conductor's IN_PROGRESS with
    /// `callbackAfterSeconds`; a worker that cannot take it now): the step is claimed again after
    /// this delay, at most [`MAX_POSTPONE`], with no failure counted. A delay that ends at or past
    /// the step's total timeout sends it to Error.
    Postponed(std::time::Duration),
}

/// The longest a reply may postpone its step.
pub const MAX_POSTPONE: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

#[derive(Debug, Clone, PartialEq)]
pub enum ReplyOutcome {
    /// Recorded; `task_state` is the task's state after the decider ran, `scheduled` the steps it created.
    Applied {
        /// The task's state after the decider ran.
        task_state: TaskState,
        /// How many agent steps the decider scheduled.
        scheduled: u32,
    },
    /// Not applied: the lease was lapsed or the step had moved on. Recorded as a `reply.rejected`
    /// event of the step's task (a reply naming no existing step has no task to record it on).
    /// A reply that arrives after complete-by but before any sweep or re-claim is applied: its
    /// token still matches, so no newer state exists for it to overwrite.
    Rejected {
        /// Why it was refused.
        reason: String,
    },
    /// The identical repeat of a reply that was applied under the same lease (sent again because
    /// the answer to its commit was lost): nothing changes and nothing is recorded.
    AlreadyApplied {
        /// The task's state now.
        task_state: TaskState,
    },
}

#[derive(Debug, Clone)]
pub struct ExpireLeases {
    /// The supervisor's leader term: the sweep is refused if it no longer holds.
    pub leader: LeaderTerm,
    /// At most this many steps in one transaction.
    pub limit: u32,
    /// The retry policies that set each lapsed step's next try, or its Error.
    pub policies: Arc<RetryPolicies>,
}

#[derive(Debug, Clone)]
pub struct ReleaseInstanceClaims {
    /// The restarted instance whose held steps are taken back.
    pub instance: InstanceId,
    /// The retry policies that set each taken-back step's next try, or its Error.
    pub policies: Arc<RetryPolicies>,
}

/// What a sweep or a release did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpiryReport {
    /// Steps sent back to Pending.
    pub retried: u32,
    /// Steps that reached the threshold and went to Error.
    pub gave_up: u32,
}

/// What [`crate::Store::submit_tasks_and_claim`] did: the submissions, as `submit_tasks` answers
/// them, and what each claim took, in the order of the claims.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmittedAndClaimed {
    pub submitted: Vec<Submitted>,
    pub claimed: Vec<Vec<ClaimedStep>>,
}

/// What a claim took, and when this claimer should look again if nothing wakes it sooner.
#[derive(Debug, Clone)]
pub struct ClaimedWork {
    /// The steps claimed, each under a new lease.
    pub steps: Vec<ClaimedStep>,
    /// The store's time of the claim.
    pub now: Timestamp,
    /// When the claim took fewer steps than its limit: the earliest due time after `now` of a
    /// pending step of the claim's agents and buckets (a delayed retry, a job due later), so that
    /// the scheduler can sleep until then. `None` when there is none, or when the claim filled its
    /// limit (more may be due now). Steps of a paused task are not counted.
    pub next_due: Option<Timestamp>,
}

/// A sweep's report, and what the supervisor needs to know to sleep until its next sweep.
#[derive(Debug, Clone)]
pub struct Swept {
    /// What the sweep did.
    pub report: ExpiryReport,
    /// The store's time of the sweep.
    pub now: Timestamp,
    /// The earliest complete-by of a step still Processing (of any holder) after the sweep.
    pub next_complete_by: Option<Timestamp>,
    /// The earliest due time of a pending agent step (of any agent; it may be `now` or earlier
    /// when work waits to be claimed): a claim, and a complete-by, may follow from then on.
    pub next_due: Option<Timestamp>,
}

/// A reconciler pass's report, and when the next timed repair falls due.
#[derive(Debug, Clone)]
pub struct Reconciled {
    /// What the pass repaired.
    pub report: ReconcileReport,
    /// The store's time of the pass.
    pub now: Timestamp,
    /// The earliest wake time of a timed wait, or deadline of a live task, still ahead.
    pub next_at: Option<Timestamp>,
}

#[derive(Debug, Clone)]
pub struct ElectLeader {
    /// The leader lease's name, such as "supervisor".
    pub name: String,
    /// The instance asking to hold (or go on holding) the lease.
    pub holder: InstanceId,
    /// How long the lease holds without being renewed.
    pub ttl: Duration,
}

/// A leader lease held: a term grows each time the lease changes hands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderTerm {
    /// The leader lease's name.
    pub name: String,
    /// The instance that holds it.
    pub holder: InstanceId,
    /// Grows each time the lease changes hands; work fenced by an older term is refused.
    pub term: i64,
    /// By the store's clock.
    pub expires_at: Timestamp,
}

#[derive(Debug, Clone)]
pub struct ResubmitStep {
    /// The step in Error to run again.
    pub step_id: StepId,
    /// Who resubmits, for the event log.
    pub actor: String,
    /// Why, for the event log.
    pub reason: String,
}

impl ResubmitStep {
    /// Refuses an actor or reason that no store should write (see [`OperateTask::validate`]).
    pub fn validate(&self) -> Result<(), crate::StoreError> {
        check_actor_and_reason(&self.actor, &self.reason)
    }
}

#[derive(Debug, Clone)]
pub struct CancelTask {
    /// The task to cancel.
    pub task_id: TaskId,
    /// Who cancels, for the event log.
    pub actor: String,
    /// Why, for the event log.
    pub reason: String,
}

impl From<CancelTask> for OperateTask {
    /// A cancel is the operator command `Cancel`, validated and carried out as every command is.
    fn from(p: CancelTask) -> OperateTask {
        OperateTask { task_id: p.task_id, actor: p.actor, reason: p.reason, command: TaskCommand::Cancel }
    }
}

/// The longest actor, reason, step name or signal name an operator action takes, in bytes.
pub const MAX_OPERATOR_TEXT: usize = 1000;

/// An operator action's actor (1 to [`MAX_OPERATOR_TEXT`] bytes) and reason (at most that), with no
/// NUL: PostgreSQL's text cannot keep one, and the stores must accept the same input.
pub(crate) fn check_actor_and_reason(actor: &str, reason: &str) -> Result<(), crate::StoreError> {
    let ok = |s: &str| s.len() <= MAX_OPERATOR_TEXT && !s.contains('\0');
    if actor.is_empty() || !ok(actor) || !ok(reason) {
        return Err(crate::StoreError::InvalidInput(format!(
            "actor (1 to {MAX_OPERATOR_TEXT} bytes) and reason (at most {MAX_OPERATOR_TEXT}) must not hold NUL characters"
        )));
    }
    Ok(())
}

/// An operator's command on a task (P16), recorded as an event with who and why.
#[derive(Debug, Clone)]
pub struct OperateTask {
    /// The task to act on.
    pub task_id: TaskId,
    /// Who acts, for the event log (1 to `MAX_OPERATOR_TEXT` bytes).
    pub actor: String,
    /// Why, for the event log (at most `MAX_OPERATOR_TEXT` bytes).
    pub reason: String,
    /// What to do.
    pub command: TaskCommand,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TaskCommand {
    /// No new step is scheduled or claimed until it is resumed; running steps finish.
    Pause,
    /// A paused task runs again: its held steps may be claimed.
    Resume,
    /// End the task at once, without compensation: its live steps are cancelled.
    Terminate,
    /// Run the steps in Error again (a failed compensation: in the compensating phase).
    Retry,
    /// Run again from this step instance: it and every step started after it.
    Rerun {
        /// The step instance to run again from.
        from: String,
    },
    /// This step instance counts as processed with this output, without running.
    Skip {
        /// The step instance to skip.
        step: String,
        /// The output it is recorded with.
        output: serde_json::Value,
    },
    /// End a wait: the wait step of this name, or waiting for a signal of this name.
    Signal {
        /// The wait step's instance name, or the signal's name.
        name: String,
        /// The wait step's output once it ends.
        payload: serde_json::Value,
    },
    /// Cancel the task: its live steps are cancelled, and its completed steps compensated when
    /// the workflow says so.
    Cancel,
    /// Undo a failed, cancelled or terminated top-level task that was not compensated (its
    /// workflow does not compensate on failure, or it was terminated): its completed steps'
    /// compensations run, newest first, and it ends compensated.
    Compensate,
}

impl OperateTask {
    /// Refuses what no store should write: an empty actor, text with NUL (PostgreSQL cannot keep
    /// it), or a payload larger than a task's input may be.
    pub fn validate(&self) -> Result<(), crate::StoreError> {
        let bad = |m: String| Err(crate::StoreError::InvalidInput(m));
        let text_ok = |s: &str| s.len() <= MAX_OPERATOR_TEXT && !s.contains('\0');
        check_actor_and_reason(&self.actor, &self.reason)?;
        let (name, value) = match &self.command {
            TaskCommand::Rerun { from } => (Some(from), None),
            TaskCommand::Skip { step, output } => (Some(step), Some(output)),
            TaskCommand::Signal { name, payload } => (Some(name), Some(payload)),
            _ => (None, None),
        };
        if let Some(n) = name
            && (n.is_empty() || !text_ok(n))
        {
            return bad(format!("a step or signal name must be 1 to {MAX_OPERATOR_TEXT} bytes with no NUL"));
        }
        if let Some(v) = value {
            let size = serde_json::to_vec(v).map(|v| v.len()).unwrap_or(usize::MAX);
            if size > MAX_INPUT_BYTES || v.to_string().contains("\\u0000") {
                return bad(format!("the payload must be at most {MAX_INPUT_BYTES} bytes of JSON without NUL"));
            }
        }
        Ok(())
    }
}

impl TaskCommand {
    pub fn as_str(&self) -> &'static str {
        match self {
            TaskCommand::Pause => "pause",
            TaskCommand::Resume => "resume",
            TaskCommand::Terminate => "terminate",
            TaskCommand::Retry => "retry",
            TaskCommand::Rerun { .. } => "rerun",
            TaskCommand::Skip { .. } => "skip",
            TaskCommand::Signal { .. } => "signal",
            TaskCommand::Cancel => "cancel",
            TaskCommand::Compensate => "compensate",
        }
    }
}

/// The reconciler's pass (C6), leader-only.
#[derive(Debug, Clone)]
pub struct Reconcile {
    /// The supervisor's leader term: the pass is refused if it no longer holds.
    pub leader: LeaderTerm,
    /// A running task with nothing live that has not changed for this long is decided again.
    pub stale_after: Duration,
    /// At most this many tasks of each kind of repair per pass.
    pub limit: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Timed waits that ended.
    pub waits_ended: u32,
    /// Tasks failed by their workflow's timeout.
    pub timed_out: u32,
    /// Stalled tasks decided again.
    pub redecided: u32,
}

/// An agent reports progress on a claimed step: complete-by moves on by the step's response
/// timeout, never past the claim's start plus its timeout.
#[derive(Debug, Clone)]
pub struct ExtendLease {
    /// The step the agent works on.
    pub step_id: StepId,
    /// The token of the agent's claim: a report under an older lease is refused.
    pub lease_token: LeaseToken,
    /// What the agent says of its work so far (JSON, at most [`MAX_PROGRESS_BYTES`]), kept on
    /// the step, and handed to its next attempt's claim; none leaves what an earlier heartbeat said.
    pub progress: Option<serde_json::Value>,
}

/// The largest progress report a heartbeat may carry, in bytes of its JSON text.
pub const MAX_PROGRESS_BYTES: usize = 64 * 1024;

impl ExtendLease {
    pub fn validate(&self) -> Result<(), StoreError> {
        if let Some(p) = &self.progress {
            let len = p.to_string().len();
            if len > MAX_PROGRESS_BYTES {
                return Err(StoreError::InvalidInput(format!(
                    "a progress report of {len} bytes; at most {MAX_PROGRESS_BYTES}"
                )));
            }
        }
        Ok(())
    }
}

/// One registered definition, as `workflows list` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowSummary {
    /// The workflow's name.
    pub name: String,
    /// The definition's version.
    pub version: u32,
    /// The definition's description, if it has one.
    pub description: Option<String>,
    /// When this version was registered.
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskDetail {
    /// The task's row.
    pub task: TaskRecord,
    /// Its step rows, in the order they were created.
    pub steps: Vec<StepRecord>,
    /// Its events, in the order they were written.
    pub events: Vec<EventRecord>,
}

/// Counts across the store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// How many tasks are in each state.
    pub tasks: Vec<(TaskState, u64)>,
    /// How many steps are in each state.
    pub steps: Vec<(StepState, u64)>,
    /// Lease expiries the supervisor recorded.
    pub expiries: u64,
    /// Steps returned by restarted schedulers.
    pub releases: u64,
    /// Late or stale replies refused.
    pub rejected_replies: u64,
    /// Steps claimed more than once.
    pub steps_retried: u64,
    /// Steps that expired at least once and were then processed.
    pub recovered_after_expiry: u64,
    /// Steps in Error, grouped by their last error.
    pub errors: Vec<(String, u64)>,
}

impl Summary {
    pub fn tasks_in(&self, s: TaskState) -> u64 {
        self.tasks.iter().find(|(t, _)| *t == s).map_or(0, |(_, n)| *n)
    }

    pub fn steps_in(&self, s: StepState) -> u64 {
        self.steps.iter().find(|(t, _)| *t == s).map_or(0, |(_, n)| *n)
    }
}
