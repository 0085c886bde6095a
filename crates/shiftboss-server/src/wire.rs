//! What the API says, as JSON: its own types, so that the wire stays stable when the store's
//! records change. Ids are strings (opaque to clients) and times RFC 3339.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiftboss_core::model::{EventRecord, StepRecord, TaskRecord};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{TaskId, Timestamp};
use shiftboss_store::{JobRecord, TaskDetail, WorkflowSummary};
use utoipa::ToSchema;

/// An RFC 3339 time with milliseconds, in UTC.
pub fn time(t: Timestamp) -> String {
    t.to_string()
}

/// A task: one whole process, such as one order.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Task {
    /// The task's id, given at submission (opaque: compare it, do not compute with it).
    pub id: String,
    /// The application's own id for the task, unique: submitting it again gives back this task.
    pub key: String,
    /// The workflow it runs.
    pub workflow: String,
    /// The workflow's version, fixed at submission.
    pub version: u32,
    /// running, paused, compensating, completed, failed, cancelled, compensated or terminated.
    pub state: String,
    /// Added to each of its steps' priority; higher is claimed first.
    pub priority: i32,
    /// The input given at submission.
    pub input: Value,
    /// The output, once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    pub created_at: String,
    pub updated_at: String,
    /// For a sub-workflow's child task: its parent's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// When the workflow's timeout ends the task, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<String>,
    /// Read from history: the archiver moved it there.
    pub archived: bool,
}

impl From<TaskRecord> for Task {
    fn from(t: TaskRecord) -> Self {
        Task {
            id: t.id.to_string(),
            key: t.key,
            workflow: t.workflow,
            version: t.workflow_version,
            state: t.state.as_str().to_owned(),
            priority: t.priority,
            input: t.input,
            output: t.output,
            created_at: time(t.created_at),
            updated_at: time(t.updated_at),
            parent_id: t.parent_task_id.map(|p| p.to_string()),
            deadline_at: t.deadline_at.map(time),
            archived: t.archived,
        }
    }
}

/// One step of a task: an agent call, or a control step's progress.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Step {
    pub id: String,
    /// The instance name: the definition's step name, plus `#n` per loop pass.
    pub name: String,
    /// agent, switch, fork, do_while, sub_workflow, wait, terminate, ...
    pub kind: String,
    /// The agent type that runs it (empty for a control step).
    pub agent: String,
    /// pending, processing, processed, error or cancelled.
    pub state: String,
    /// For a compensation: the step instance it undoes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compensates: Option<String>,
    /// The instance that holds its lease (LockedBy), while processing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_by: Option<String>,
    /// When the holder must have replied (CompleteBy), while processing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete_by: Option<String>,
    /// The fencing token of its latest claim.
    pub lease_token: String,
    /// When a pending step may be claimed.
    pub due_at: String,
    pub priority: i32,
    /// Failures counted against its retry policy (FailureCount).
    pub failure_count: u32,
    /// Claims so far.
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub input: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// What its worker last said of its progress (a heartbeat's report), kept for its next attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
    /// The isolation domain it is routed to: only a worker polling with it takes the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Sent to the service on every attempt, so that it can drop duplicates.
    pub idempotency_key: String,
    /// The complete-by window of one claim, in milliseconds.
    pub timeout_ms: u64,
    pub created_at: String,
    pub updated_at: String,
}

impl From<StepRecord> for Step {
    fn from(s: StepRecord) -> Self {
        Step {
            id: s.id.to_string(),
            name: s.name,
            kind: serde_json::to_value(s.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
            agent: s.agent,
            state: s.state.as_str().to_owned(),
            compensates: s.compensates,
            locked_by: s.locked_by,
            complete_by: s.complete_by.map(time),
            lease_token: s.lease_token.to_string(),
            due_at: time(s.due_at),
            priority: s.priority,
            failure_count: s.failure_count,
            attempts: s.attempts,
            last_error: s.last_error,
            input: s.input,
            output: s.output,
            progress: s.progress,
            domain: s.domain,
            idempotency_key: s.idempotency_key,
            timeout_ms: u64::try_from(s.timeout.as_millis()).unwrap_or(u64::MAX),
            created_at: time(s.created_at),
            updated_at: time(s.updated_at),
        }
    }
}

/// One entry of a task's event log.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Event {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    pub at: String,
    /// What happened, such as `step.processed` or `task.completed`.
    pub kind: String,
    /// info, or alert when an operator should look.
    pub level: String,
    /// Who did it: an instance id, or an operator's (a token's) name.
    pub actor: String,
    pub detail: Value,
}

impl From<EventRecord> for Event {
    fn from(e: EventRecord) -> Self {
        Event {
            id: e.id.to_string(),
            step_id: e.step_id.map(|s| s.to_string()),
            at: time(e.at),
            kind: e.kind,
            level: e.level.as_str().to_owned(),
            actor: e.actor,
            detail: e.detail,
        }
    }
}

/// A task with its steps and a page of its events.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskView {
    #[serde(flatten)]
    pub task: Task,
    pub steps: Vec<Step>,
    /// The first page of its events, oldest first.
    pub events: Vec<Event>,
    /// When there are more events: the cursor for `GET /v1/tasks/{id}/events?after=`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_next: Option<String>,
}

impl TaskView {
    pub fn new(d: TaskDetail, events_limit: usize) -> Self {
        let more = d.events.len() > events_limit;
        let events: Vec<Event> = d.events.into_iter().take(events_limit).map(Event::from).collect();
        let events_next = if more { events.last().map(|e| e.id.clone()) } else { None };
        TaskView { task: d.task.into(), steps: d.steps.into_iter().map(Step::from).collect(), events, events_next }
    }
}

/// A page of tasks, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskPage {
    pub items: Vec<Task>,
    /// The cursor for the next page (`before=`), when there may be one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// A page of events, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    pub items: Vec<Event>,
    /// The cursor for the next page (`after=`), when there may be one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// A task to run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitTask {
    /// The application's own id for the task (1 to 200 bytes). The same key with the same
    /// workflow and input gives back the existing task; with another, 409.
    pub key: String,
    /// The workflow to run.
    pub workflow: String,
    /// The workflow's version; default the newest.
    #[serde(default)]
    pub version: Option<u32>,
    /// The task's input (at most 1 MiB of JSON); default `{}`.
    #[serde(default)]
    pub input: Option<Value>,
    /// Added to each step's priority; default 0.
    #[serde(default)]
    pub priority: Option<i32>,
    /// The task's own status channel: a webhook that gets its messages, written in the
    /// submission's transaction. Not part of what makes a repeated submission the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Webhook>,
    /// Isolation domains by agent type: a step whose definition names no domain goes only to
    /// schedulers and workers serving the domain of its agent type, else of `"*"` (Conductor's
    /// taskToDomain). A sub-workflow's child task takes its parent's. Names as workflow names.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub domains: std::collections::BTreeMap<String, String>,
}

/// Where a status channel's messages go (Standard Webhooks: each message signed with `secret`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// An `http` or `https` URL. Private, loopback and link-local addresses are refused at
    /// delivery unless the server's outbound allow-list opens them.
    pub url: String,
    /// The signing secret: `whsec_` and the base64 of 24 to 64 random bytes. Never shown again.
    pub secret: String,
    /// The message kinds to send (`task.received`, `step.completed`, `step.error`, `task.paused`,
    /// `task.resumed`, `task.compensating`, `task.completed`, `task.failed`, `task.compensated`,
    /// `task.cancelled`, `task.terminated`); default all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<String>>,
}

impl Webhook {
    /// The store's form, its message kinds checked.
    pub fn to_target(&self) -> Result<shiftboss_store::WebhookTarget, String> {
        let kinds = match &self.messages {
            None => Vec::new(),
            Some(names) => names
                .iter()
                .map(|n| shiftboss_store::MessageKind::parse(n).ok_or_else(|| format!("unknown message kind {n:?}")))
                .collect::<Result<_, _>>()?,
        };
        Ok(shiftboss_store::WebhookTarget { url: self.url.clone(), secret: self.secret.clone(), kinds })
    }
}

/// What a submission did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Submitted {
    /// The task's id.
    pub id: String,
    pub key: String,
    /// False when the key existed with the same workflow and input: nothing new was written.
    pub created: bool,
}

/// An operator's action that takes only a reason.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// Why, for the event log (at most 1,000 bytes).
    pub reason: String,
}

/// Run again from a step instance: it and every step started after it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rerun {
    /// The step instance to run again from.
    pub from: String,
    pub reason: String,
}

/// A step instance counts as processed with this output, without running.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Skip {
    pub step: String,
    /// The step's output; `{}` when left out (an explicit `null` stays null).
    #[serde(default = "empty_object")]
    pub output: Value,
    pub reason: String,
}

/// Ends a wait: the wait step of this name, or waiting for a signal of this name.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Signal {
    pub name: String,
    /// The wait step's output; `{}` when left out (an explicit `null` stays null).
    #[serde(default = "empty_object")]
    pub payload: Value,
    pub reason: String,
}

/// A JSON value left out of a request: `{}`. A field defaulted this way, rather than as an
/// `Option`, keeps an explicit `null` apart from a missing field, as the CLI's direct path does.
fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// What an operator's action did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Acted {
    /// The task acted on.
    pub id: String,
    /// The action: cancel, pause, resume, terminate, retry, rerun, skip, signal, resubmit.
    pub action: String,
    /// The task's state after the action.
    pub state: String,
}

/// A registered workflow version.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Workflow {
    pub name: String,
    pub version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub created_at: String,
}

impl From<WorkflowSummary> for Workflow {
    fn from(w: WorkflowSummary) -> Self {
        Workflow { name: w.name, version: w.version, description: w.description, created_at: time(w.created_at) }
    }
}

/// What registering (or only checking) a definition did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Registered {
    pub name: String,
    pub version: u32,
    /// created, unchanged (the same name, version and content were registered), or valid (a dry run).
    pub outcome: String,
    /// What the importer of a Conductor definition noted (options mapped or dropped).
    pub notes: Vec<String>,
    /// The definition as shiftboss keeps it.
    #[schema(value_type = Object)]
    pub definition: Value,
}

impl Registered {
    /// What registering `def` did (`outcome`: created, unchanged or valid), with the importer's notes.
    pub fn new(def: &WorkflowDef, outcome: &str, notes: Vec<String>) -> Registered {
        Registered {
            name: def.name.clone(),
            version: def.version,
            outcome: outcome.to_owned(),
            notes,
            definition: serde_json::to_value(def).unwrap_or_default(),
        }
    }
}

/// A retry job (M1): a one-step task of its handler.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: String,
    pub key: String,
    pub handler: String,
    /// pending, running, succeeded, given_up or cancelled.
    pub state: String,
    /// Its load-balance bucket (0 to 255): the servers that own it claim it.
    pub bucket: u16,
    pub priority: i32,
    pub params: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    pub created_at: String,
    pub due_at: String,
    pub updated_at: String,
    /// Retries so far.
    pub retries: u32,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Read from history.
    pub archived: bool,
}

impl From<JobRecord> for Job {
    fn from(j: JobRecord) -> Self {
        Job {
            id: j.id.to_string(),
            key: j.key,
            handler: j.handler,
            state: j.state.as_str().to_owned(),
            bucket: j.bucket,
            priority: j.priority,
            params: j.params,
            output: j.output,
            created_at: time(j.created_at),
            due_at: time(j.due_at),
            updated_at: time(j.updated_at),
            retries: j.retries,
            attempts: j.attempts,
            last_error: j.last_error,
            archived: j.archived,
        }
    }
}

/// A page of jobs, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobPage {
    pub items: Vec<Job>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Parses a task (or job, or step) id from a path or cursor: ids are opaque to clients, but
/// this version issues integers.
pub fn parse_id(s: &str) -> Option<i64> {
    s.parse::<i64>().ok().filter(|n| *n > 0)
}

pub fn task_id(s: &str) -> Option<TaskId> {
    parse_id(s).map(TaskId)
}

/// What an operator's action on a step did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StepActed {
    /// The step acted on.
    pub id: String,
    pub action: String,
}
