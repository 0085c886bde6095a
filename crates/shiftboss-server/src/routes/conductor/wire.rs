//! Conductor's JSON shapes, as its SDKs send and read them (camelCase, enum names in capitals,
//! times in epoch milliseconds), and their mapping from shiftboss's records: a Conductor
//! workflow is a shiftboss task, a Conductor task one claim of a shiftboss step.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shiftboss_core::model::{StepRecord, TaskRecord};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{LeaseToken, StepId, StepState, TaskState};
use shiftboss_store::ClaimedStep;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// `POST /api/token`'s body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequest {
    /// The shiftboss token's name.
    pub key_id: String,
    /// The shiftboss token's secret.
    pub key_secret: String,
}

/// `POST /api/token`'s answer: what the SDK sends as `X-Authorization`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenAnswer {
    pub token: String,
}

/// Conductor's Task, as a poll hands it out and a workflow lists it.
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
// Named apart in the OpenAPI document: the native API has a `Task` of its own.
#[schema(as = ConductorTask)]
pub struct Task {
    /// `<step id>-<lease token>`: one claim of a step, so that an update names the claim it
    /// answers (Conductor's TaskResult carries no lease token of its own).
    pub task_id: String,
    /// The agent type (a control step: its kind, such as `SWITCH`).
    pub task_type: String,
    pub task_def_name: String,
    /// The step's instance name.
    pub reference_task_name: String,
    /// SCHEDULED, IN_PROGRESS, COMPLETED, FAILED, CANCELED.
    pub status: &'static str,
    /// The shiftboss task's id.
    pub workflow_instance_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_type: Option<String>,
    pub input_data: Value,
    pub output_data: Value,
    /// Failed attempts so far (FailureCount).
    pub retry_count: u32,
    /// Claims so far.
    pub poll_count: u32,
    /// The claim's window in seconds: answer or extend the lease within it.
    pub response_timeout_seconds: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
    pub seq: u32,
    pub scheduled_time: i64,
    pub start_time: i64,
    pub update_time: i64,
    pub end_time: i64,
    pub callback_after_seconds: u64,
    pub workflow_priority: i32,
    /// The step's idempotency key, the same on every attempt (not a Conductor field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// The task id Conductor sees for a claim of a step: `<step id>-<lease token>`. Not `.`: the
/// SDKs read the answer of an update (the task id, as text) as JSON where they can, and
/// `12.2147483650` would come back as the number 12.214748365.
pub fn task_id(step: StepId, lease: LeaseToken) -> String {
    format!("{}-{}", step.0, lease.0)
}

/// A Conductor task id back to the claim it names; `None` when it is not one we handed out.
pub fn parse_task_id(id: &str) -> Option<(StepId, LeaseToken)> {
    let (step, lease) = id.split_once('-')?;
    let step = crate::wire::parse_id(step)?;
    let lease = lease.parse::<i64>().ok()?;
    Some((StepId(step), LeaseToken(lease)))
}

/// A claimed step as Conductor's poll hands it out.
pub fn polled(s: ClaimedStep, worker: &str) -> Task {
    let window = s.complete_by.since(s.claimed_at);
    Task {
        task_id: task_id(s.id, s.lease_token),
        task_type: s.agent.clone(),
        task_def_name: s.agent,
        reference_task_name: s.name,
        status: "IN_PROGRESS",
        workflow_instance_id: s.task_id.to_string(),
        workflow_type: None,
        input_data: object(Some(s.input)),
        // What an earlier poll's IN_PROGRESS update kept (Conductor hands a task polled again after
        // its callback out with its outputData).
        output_data: object(s.progress),
        retry_count: s.attempt.saturating_sub(1),
        poll_count: s.attempt,
        // Rounded down, at least 1: the SDK's lease tracker extends at 80% of it.
        response_timeout_seconds: window.as_secs().max(1),
        worker_id: Some(worker.to_owned()),
        reason_for_incompletion: None,
        seq: 0,
        scheduled_time: s.claimed_at.0,
        start_time: s.claimed_at.0,
        update_time: s.claimed_at.0,
        end_time: 0,
        callback_after_seconds: 0,
        workflow_priority: 0,
        idempotency_key: Some(s.idempotency_key),
    }
}

/// A step row as a workflow lists it.
pub fn listed(s: &StepRecord, seq: u32, workflow: &TaskRecord, def: Option<&WorkflowDef>) -> Task {
    let agent = s.kind == shiftboss_core::workflow::StepKind::Agent;
    let task_type = if agent { s.agent.clone() } else { s.kind.as_str().to_ascii_uppercase() };
    let ended = matches!(s.state, StepState::Processed | StepState::Error | StepState::Cancelled);
    Task {
        task_id: task_id(s.id, s.lease_token),
        task_def_name: task_type.clone(),
        task_type,
        reference_task_name: s.name.clone(),
        status: if optional(def, s) && s.state == StepState::Error {
            "COMPLETED_WITH_ERRORS"
        } else {
            step_status(s.state)
        },
        workflow_instance_id: s.task_id.to_string(),
        workflow_type: Some(workflow.workflow.clone()),
        input_data: object(Some(s.input.clone())),
        // While it runs: what its worker last reported (an IN_PROGRESS update's outputData).
        output_data: object(s.output.clone().or_else(|| s.progress.clone())),
        retry_count: s.failure_count,
        poll_count: s.attempts,
        response_timeout_seconds: s.timeout.as_secs(),
        worker_id: s.locked_by.as_deref().map(|w| w.strip_prefix("worker:").unwrap_or(w).to_owned()),
        reason_for_incompletion: s.last_error.clone(),
        seq,
        scheduled_time: s.created_at.0,
        start_time: if s.attempts > 0 { s.created_at.0 } else { 0 },
        update_time: s.updated_at.0,
        end_time: if ended { s.updated_at.0 } else { 0 },
        callback_after_seconds: 0,
        workflow_priority: workflow.priority,
        idempotency_key: None,
    }
}

/// Conductor's task status for a step state.
/// An optional step: its failure failed nothing (Conductor's COMPLETED_WITH_ERRORS).
fn optional(def: Option<&WorkflowDef>, s: &StepRecord) -> bool {
    def.and_then(|d| d.find(shiftboss_core::decider::base_name(&s.name))).is_some_and(|d| d.optional)
}

/// The task's variables (Conductor's `variables`): the definition's initial ones, then what each
/// set step set, in order.
fn variables(def: Option<&WorkflowDef>, steps: &[StepRecord]) -> Map<String, Value> {
    let mut vars = match def.and_then(|d| d.variables.as_ref()) {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    let set = shiftboss_core::workflow::StepKind::Set;
    for s in steps.iter().filter(|s| s.kind == set && s.state == StepState::Processed) {
        if let Value::Object(m) = &s.input {
            vars.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    vars
}

pub fn step_status(s: StepState) -> &'static str {
    match s {
        StepState::Pending => "SCHEDULED",
        StepState::Processing => "IN_PROGRESS",
        StepState::Processed => "COMPLETED",
        StepState::Error => "FAILED",
        StepState::Cancelled => "CANCELED",
    }
}

/// Conductor's workflow status for a task state. Compensating is still RUNNING (its
/// compensations run); compensated is FAILED (it failed, and what it did was undone); an
/// operator's cancel and terminate are both TERMINATED.
pub fn workflow_status(s: TaskState) -> &'static str {
    match s {
        TaskState::Running | TaskState::Compensating => "RUNNING",
        TaskState::Paused => "PAUSED",
        TaskState::Completed => "COMPLETED",
        TaskState::Failed | TaskState::Compensated => "FAILED",
        TaskState::Cancelled | TaskState::Terminated => "TERMINATED",
    }
}

/// Whether a Conductor status names a state the task is in (for search).
pub fn task_states(status: &str) -> Option<&'static [TaskState]> {
    Some(match status {
        "RUNNING" => &[TaskState::Running, TaskState::Compensating],
        "PAUSED" => &[TaskState::Paused],
        "COMPLETED" => &[TaskState::Completed],
        "FAILED" => &[TaskState::Failed, TaskState::Compensated],
        "TERMINATED" => &[TaskState::Cancelled, TaskState::Terminated],
        _ => return None,
    })
}

/// Conductor's maps are objects: anything else (a null output) reads as `{}`.
pub fn object(v: Option<Value>) -> Value {
    match v {
        Some(Value::Object(m)) => Value::Object(m),
        Some(Value::Null) | None => Value::Object(Map::new()),
        Some(other) => serde_json::json!({ "result": other }),
    }
}

/// Conductor's TaskResult: a worker's update of a task it polled.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    /// The `taskId` the poll handed out.
    pub task_id: String,
    #[serde(default)]
    pub workflow_instance_id: Option<String>,
    /// COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR or IN_PROGRESS.
    pub status: String,
    #[serde(default)]
    pub output_data: Option<Value>,
    #[serde(default)]
    pub reason_for_incompletion: Option<String>,
    /// With IN_PROGRESS and more than 0 (and no `extendLease`): the task goes back to the queue,
    /// polled again after that many seconds.
    #[serde(default)]
    pub callback_after_seconds: Option<i64>,
    /// With IN_PROGRESS: a heartbeat that extends the lease.
    #[serde(default)]
    pub extend_lease: bool,
    #[serde(default)]
    pub worker_id: Option<String>,
    /// TaskExecLogs (`{"log": "..."}` each): kept as the step's log lines once the update is taken.
    #[serde(default)]
    pub logs: Option<Value>,
    #[serde(default)]
    pub external_output_payload_storage_path: Option<String>,
    #[serde(default)]
    pub sub_workflow_id: Option<String>,
}

/// Conductor's TaskExecLog: one log line of a task.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskExecLog {
    pub log: String,
    pub task_id: String,
    /// When the line was written, in epoch milliseconds.
    pub created_time: i64,
}

/// The log lines of a TaskResult's `logs`: each entry's `log` text (a bare string is taken as
/// one); entries with neither are skipped.
pub fn log_lines(logs: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(items)) = logs else { return Vec::new() };
    items
        .iter()
        .filter_map(|i| match i {
            Value::String(s) => Some(s.clone()),
            Value::Object(m) => m.get("log").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// Conductor's StartWorkflowRequest.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StartWorkflowRequest {
    /// The workflow's name (start and wait takes it from its path).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: Option<u32>,
    #[serde(default)]
    pub correlation_id: Option<String>,
    #[serde(default)]
    pub input: Option<Value>,
    /// Task type (or `*`) to domain, or `NO_DOMAIN`: the workflow's steps of that type go only to
    /// workers polling with that domain. One domain per type (a comma list is refused).
    #[serde(default)]
    pub task_to_domain: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub priority: Option<i32>,
    /// The shiftboss task's key: starting again with the same key and input gives the same id.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// RETURN_EXISTING (what shiftboss does), or FAIL (a key that exists is a 409).
    #[serde(default)]
    pub idempotency_strategy: Option<String>,
    /// An inline definition is refused: register it first.
    #[serde(default)]
    pub workflow_def: Option<Value>,
    #[serde(default)]
    pub external_input_payload_storage_path: Option<String>,
    #[serde(default)]
    pub created_by: Option<String>,
}

/// Conductor's Workflow (an execution).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
// Named apart in the OpenAPI document: the native API has a `Workflow` of its own.
#[schema(as = ConductorWorkflow)]
pub struct Workflow {
    pub workflow_id: String,
    pub workflow_name: String,
    pub workflow_version: u32,
    /// RUNNING, PAUSED, COMPLETED, FAILED, TERMINATED.
    pub status: &'static str,
    pub input: Value,
    pub output: Value,
    /// The shiftboss task's key.
    pub idempotency_key: String,
    pub priority: i32,
    pub create_time: i64,
    pub start_time: i64,
    pub update_time: i64,
    pub end_time: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_workflow_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
    pub failed_reference_task_names: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    pub task_to_domain: Map<String, Value>,
    pub variables: Map<String, Value>,
    pub tasks: Vec<Task>,
}

impl Workflow {
    /// `def`, the task's definition when it could be read, tells optional steps and the initial
    /// variables.
    pub fn new(
        t: &TaskRecord,
        steps: Option<&[StepRecord]>,
        all_steps: &[StepRecord],
        def: Option<&WorkflowDef>,
    ) -> Workflow {
        let ended = t.state.is_terminal();
        let failed: Vec<&StepRecord> =
            all_steps.iter().filter(|s| s.state == StepState::Error && !optional(def, s)).collect();
        Workflow {
            workflow_id: t.id.to_string(),
            workflow_name: t.workflow.clone(),
            workflow_version: t.workflow_version,
            status: workflow_status(t.state),
            input: object(Some(t.input.clone())),
            output: object(t.output.clone()),
            idempotency_key: t.key.clone(),
            priority: t.priority,
            create_time: t.created_at.0,
            start_time: t.created_at.0,
            update_time: t.updated_at.0,
            end_time: if ended { t.updated_at.0 } else { 0 },
            parent_workflow_id: t.parent_task_id.map(|p| p.to_string()),
            reason_for_incompletion: failed.first().and_then(|s| s.last_error.clone()),
            failed_reference_task_names: failed.iter().map(|s| s.name.clone()).collect(),
            correlation_id: t.correlation_id.clone(),
            task_to_domain: t.domains.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect(),
            variables: variables(def, all_steps),
            tasks: steps
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, s)| listed(s, u32::try_from(i + 1).unwrap_or(u32::MAX), t, def))
                .collect(),
        }
    }
}

/// One workflow in a search's results (Conductor's WorkflowSummary).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSummary {
    pub workflow_id: String,
    pub workflow_type: String,
    pub version: u32,
    pub status: &'static str,
    pub start_time: String,
    pub update_time: String,
    pub input: String,
    pub output: String,
    pub priority: i32,
}

impl From<&TaskRecord> for WorkflowSummary {
    fn from(t: &TaskRecord) -> Self {
        WorkflowSummary {
            workflow_id: t.id.to_string(),
            workflow_type: t.workflow.clone(),
            version: t.workflow_version,
            status: workflow_status(t.state),
            start_time: crate::wire::time(t.created_at),
            update_time: crate::wire::time(t.updated_at),
            input: t.input.to_string(),
            output: t.output.as_ref().map(Value::to_string).unwrap_or_default(),
            priority: t.priority,
        }
    }
}

/// A search's page (Conductor's SearchResult).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    /// The hits on this page plus one if more follow: shiftboss does not count a whole listing.
    pub total_hits: u64,
    pub results: Vec<WorkflowSummary>,
}

/// Conductor's SkipTaskRequest.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkipTaskRequest {
    #[serde(default)]
    pub task_input: Option<Value>,
    #[serde(default)]
    pub task_output: Option<Value>,
}

/// Conductor's RerunWorkflowRequest.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RerunWorkflowRequest {
    #[serde(default)]
    pub re_run_from_workflow_id: Option<String>,
    /// The task (a `taskId` from the workflow's tasks) to run again from; the first step when absent.
    #[serde(default)]
    pub re_run_from_task_id: Option<String>,
    #[serde(default)]
    pub workflow_input: Option<Value>,
    #[serde(default)]
    pub task_input: Option<Value>,
    #[serde(default)]
    pub correlation_id: Option<String>,
}
