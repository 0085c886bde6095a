//! Importing Netflix Conductor definitions: a Conductor `WorkflowDef` (JSON), and optionally the
//! `TaskDef`s of its tasks, become one of shiftboss-core's [`WorkflowDef`]s, checked by
//! [`WorkflowDef::validate`].
//!
//! A crate of its own over the core: the core holds the domain, and Conductor's vocabulary (and,
//! as they come, the mapping of its APIs) grows here without growing what every crate compiles.
//!
//! # API
//!
//! - [`from_conductor`] reads one JSON document: either a bare Conductor WorkflowDef, or a bundle
//!   `{"workflowDef": {...}, "taskDefs": [{...}, ...]}`.
//! - [`from_conductor_with_tasks`] reads the same, plus TaskDefs given apart: each text is one
//!   TaskDef object or a JSON array of them (the body of Conductor's `POST /metadata/taskdefs`).
//! - [`looks_like_conductor`] tells a CLI which reader to use.
//!
//! The result, a [`ConductorImport`], holds the definition, the per-agent limits the TaskDefs ask
//! for ([`AgentLimits`]: shiftboss sets these on agents, not on steps) and `notes`: one line for
//! everything dropped or approximated, so that a person can review them.
//!
//! Errors are [`DefinitionError`]s whose path names the place in the Conductor document:
//! `tasks[2].loopCondition`, `tasks[1].decisionCases.fedex[0].inputParameters.amount`,
//! `taskDefs[0].retryLogic` (TaskDefs are numbered in the order given, bundle first, arrays
//! flattened), or `line 3 column 7` for a JSON syntax error (`task_defs[1] line 3 column 7` for
//! the second separate TaskDef text).
//!
//! # What maps
//!
//! Workflow: `name`, `version` (1 when absent), `description`, `tasks`, `timeoutSeconds` (the
//! task's `timeout`; 0 means none), `outputParameters` (the `output` template; absent or empty: the
//! last step's output, as in Conductor), `timeoutPolicy` (TIME_OUT_WF; ALERT_ONLY drops the timeout
//! with a note, as shiftboss always fails a task past its timeout), `failureWorkflow` →
//! `on_failure` (started in the failing transaction; its input carries `workflowId`, `reason`,
//! `failureStatus` and `failedWorkflow.input`), `variables` (the initial task variables),
//! `inputTemplate` → `input_defaults`.
//!
//! Task types, each task's `taskReferenceName` becoming the step's name:
//! - SIMPLE: an agent step whose agent is the task's `name` (the Conductor task type is the agent).
//! - HTTP: an agent step of agent `http`; `http_request` (or, in newer Conductor, the input
//!   parameters themselves) gives `uri` → `url`, `method` (GET when absent), `headers`, `accept`
//!   (an `Accept` header), `contentType` → `content_type` in the step's static `config`, with
//!   `output: "conductor"` (the agent answers `{"response": {"statusCode", "headers", "body",
//!   "reasonPhrase"}}` as Conductor does); `body` becomes the step's input (the HTTP agent sends
//!   the input as its body). `connectionTimeOut` + `readTimeOut` become `timeout_ms`, a bound on
//!   the whole call (with a note). Other fields are dropped with a note. A `uri`, `method` or
//!   header with `${...}` is made at run time: the step's input becomes `{"url", "method",
//!   "headers", "body"}` (those that hold expressions, and the body) with the agent's
//!   `input: "request"`; the SSRF guard checks the url made. `${workflow.secrets.NAME}` in a
//!   header becomes the agent's `${secret.NAME}`, resolved at call time (such a header may hold
//!   no other expression, and a header made at run time names no secret: it is data).
//! - INLINE (`evaluatorType` `javascript`, `graaljs` or `value-param`), LAMBDA
//!   (`scriptExpression`, run as a function body) and JSON_JQ_TRANSFORM (`queryExpression`):
//!   agent steps of [`INLINE_AGENT`] and [`JQ_AGENT`] (provided by `shiftboss-scripts`, registered
//!   by `serve`) whose config holds the script and whose input is the task's input parameters;
//!   outputs `{result}` and `{result, resultList}` as in Conductor. A `${...}` in a script is
//!   refused (Conductor would substitute it before the script runs).
//! - SWITCH with evaluatorType `value-param` (`expression` names an input parameter whose value
//!   becomes the switch expression) or `javascript`/`graaljs` (see below); DECISION with
//!   `caseValueParam` or `caseExpression` likewise. `decisionCases` → cases, `defaultCase` → default.
//! - FORK_JOIN followed by its JOIN: `forkTasks` → branches. The JOIN's `joinOn` names the last
//!   tasks of the branches it waits for: all of them, or some (then the fork's `join_on`, and the
//!   others run on); the JOIN becomes nothing, and `${join.output.<ref>...}` reads become
//!   `${<ref>.output...}`.
//! - FORK_JOIN_DYNAMIC followed by its JOIN: a `fork_each` (see `dynamic_fork`); the JOIN's output
//!   reads as the fork_each's.
//! - DO_WHILE: `loopOver` → body; `loopCondition` (see below). A condition of the form
//!   `$.<loop>['iteration'] < N` (or `<= N`) is translated and also sets `max_iterations`; for
//!   other conditions a note says the default cap of 100 passes applies.
//! - SUB_WORKFLOW: `subWorkflowParam.name`/`version`; the input parameters are the child's input.
//! - WAIT: `duration` (`"10s"`, `"2 minutes"`, `"1d 2h"`), `until` (`"2024-12-25 09:00 UTC"`,
//!   `"2024-12-25"`, RFC 3339, or a `${...}` giving RFC 3339 or epoch milliseconds), or neither: a
//!   wait for the signal named after the task reference name.
//!   A `duration` computed by `${...}` becomes `duration_from` (words or milliseconds at run time).
//! - TERMINATE: `terminationStatus` COMPLETED or FAILED, `workflowOutput` → output,
//!   `terminationReason` → `reason` (a FAILED terminate's failure reason).
//! - SET_VARIABLE: a `set` step whose `variables` are the input parameters; NOOP: a `set` step that
//!   sets nothing (output `{}`).
//! - HUMAN: a wait for the signal named after the task reference name (the signal's payload is its
//!   output).
//! - EXCLUSIVE_JOIN: a `set` step whose output is the output of the first of `joinOn` (then
//!   `defaultExclusiveJoinTask`) that ran.
//! - START_WORKFLOW: a `start_workflow` step (`startWorkflow.name` outright or one `${...}`,
//!   `version`, `input`); its `output.workflowId` reads as `output.task_id`.
//! - DYNAMIC: an agent step whose agent is `${...}` of the parameter `dynamicTaskNameParam` names,
//!   chosen when the step starts (SIMPLE task types only).
//! - SUB_WORKFLOW's (and START_WORKFLOW's) name may be one `${...}`, and its `version` a `${...}`
//!   (`workflow_version_from`: a number or numeric text, null for the newest); a
//!   `workflowDefinition` given inline is imported with the same TaskDefs (errors and notes at its
//!   place) into [`ConductorImport::sub_workflows`], to register before the workflow.
//! - EVENT: a step of [`EVENT_AGENT`] (provided by `shiftboss-events`) with config `{sink}`:
//!   `nats:` as it is, `nats_stream:` as `jetstream:`, `jetstream:` and `webhook:`; the input
//!   parameters are the message.
//!
//! Expressions in input parameters: `${workflow.input...}` → `${task.input...}`,
//! `${workflow.variables...}` → `${task.variables...}`, `${workflow.workflowType}` →
//! `${task.workflow}`, `${workflow.version}` → `${task.version}`,
//! `${workflow.workflowId}` → `${task.id}` (a number in shiftboss), `${ref.output...}` and
//! `${ref.input...}` as they are (an HTTP task's output only under `response`); a SWITCH's
//! `${ref.output.evaluationResult[0]}` is `${ref.output.value}`; a DO_WHILE's
//! `${ref.output.iteration}` maps. Any other `${workflow.*}`, a read of a control task's input or
//! output that has no equivalent, and a read from outside a loop of a task inside it (shiftboss
//! gives null there) are refused. `$${` stays a literal `${` in both languages.
//!
//! JavaScript (SWITCH, DECISION and DO_WHILE): translated into our expression language only where
//! the result is always the one JavaScript gives: a SWITCH on `$.param` (one input parameter), a
//! loop condition `$.<loop>['iteration'] < N` (or `<=`, or inside `if (C) { true; } else
//! { false; }`). Anything else is evaluated in JavaScript by an added [`INLINE_AGENT`] step: for a
//! SWITCH, `<ref>_case` before it (input: the switch's input parameters; the switch reads its
//! `result`); for a DO_WHILE, `<ref>_condition` last in each pass (`"as": "bool"`; input: the
//! loop's input parameters, `<loop>: {iteration}` and each body task's output by reference name).
//! Each gets a note. `docs/conductor-scripts.md` says where this differs from Conductor.
//!
//! Per task: `optional` and `permissive` on tasks that fail on their own (agent steps and
//! sub-workflows; ignored with a note elsewhere; optional wins when both are set); `startDelay` →
//! `delay` on agent steps; `asyncComplete: true` is refused except on SIMPLE tasks, where
//! Conductor ignores it. A task's own
//! `retryCount` overrides its TaskDef's, and an inline `taskDefinition` comes before the TaskDefs
//! given. Fields that belong to another task type are ignored with a note when they are not empty
//! (Conductor's exports carry them all); fields the importer does not know are ignored with a note;
//! `description` and `rateLimited` are ignored.
//!
//! TaskDefs, matched by task `name` (SIMPLE and HTTP tasks):
//! - `retryCount` (default 3), `retryLogic` (default FIXED), `retryDelaySeconds` (default 60),
//!   `backoffScaleFactor` (default 1) → the step's retry policy: FIXED is an interval list of the
//!   delay `retryCount` times; LINEAR_BACKOFF an interval list `delay * factor * n`;
//!   EXPONENTIAL_BACKOFF our exponential policy with base the delay, factor 2, no jitter,
//!   `max_failures` = retryCount + 1, and a cap equal to the longest delay Conductor would use (at
//!   most 7 days, noted when that cuts it). `retryCount` 0: no retries.
//! - `timeoutSeconds` → the step's `timeout` (0: no timeout in Conductor; our default of 30 s
//!   applies, with a note); `responseTimeoutSeconds` → `response_timeout` when at most the timeout
//!   (else it could never fire: dropped with a note); `timeoutPolicy` RETRY → retry,
//!   TIME_OUT_WF (the default) → fail_task, ALERT_ONLY → alert_only. `pollTimeoutSeconds` →
//!   `claim_timeout` (a due attempt no worker claimed within it times out by the timeout policy:
//!   a failure counted and a retry, the task failed, or an alert once);
//!   `totalTimeoutSeconds` → `total_timeout` (no complete-by past the first due time plus it, no
//!   retry due at or after it). 0 is none for both.
//! - `concurrentExecLimit`, `rateLimitPerFrequency`/`rateLimitFrequencyInSeconds` → an
//!   [`AgentLimits`] of the SIMPLE task's agent (for HTTP tasks, whose agent is shared, a note).
//! - `inputTemplate`: its keys missing from the task's input parameters are added to the input.
//! - Ignored knowingly: `description`, `ownerEmail`, `ownerApp`, `inputKeys`, `outputKeys`,
//!   `createTime`, `updateTime`, `createdBy`, `updatedBy`. Ignored with a note when set:
//!   `isolationGroupId`, `executionNameSpace`, `inputSchema`, `outputSchema`, `enforceSchema`,
//!   `baseType`.
//! - A SIMPLE task without a TaskDef gets shiftboss's defaults (noted); a TaskDef that no task uses
//!   is noted.
//!
//! # What is refused
//!
//! Task types other than those above (KAFKA_PUBLISH, ...) with the path `tasks[i].type`; an EVENT
//! to another sink, at `tasks[i].sink`; a
//! JOIN whose `joinOn` names no branch's last task; a JOIN not right after its fork;
//! TERMINATED as a termination status; a `workflowDefinition` that is not an object; DO_WHILE over
//! `items`; a `taskReferenceName` that is not one of our names (1 to 100 of
//! `A-Z a-z 0-9 - _ . :`), is `task` (our expressions' root for the task), or that an expression
//! reads although it is not an expression name (letters, digits, `_`).
//!
//! Workflow fields ignored knowingly: `ownerEmail`, `schemaVersion` (read as 2), `inputParameters`
//! (documentation of the input), `createTime`, `updateTime`, `createdBy`, `updatedBy`, `ownerApp`,
//! `accessPolicy`, `tags`. Ignored with a note when set: `restartable: false` (operators can still
//! rerun), `workflowStatusListenerEnabled`, `workflowStatusListenerSink`, `rateLimitConfig`,
//! `inputSchema`, `outputSchema`, `enforceSchema`.
//!
//! # Layout
//!
//! `document` reads the JSON and its fields, `importer` holds the state and walks the WorkflowDef,
//! `tasks` maps one task (`http` and `control` the HTTP and control tasks, `system_tasks` the tasks
//! the engine does itself, `task_type` names the types, `scripts` the scripted tasks and the
//! evaluation steps), `task_def` applies TaskDefs,
//! `expressions` rewrites `${...}`, `javascript` translates the JavaScript that reads the same, `durations` reads WAIT times and `relocate` reports validation errors at
//! the Conductor place.

mod control;
mod document;
mod durations;
mod dynamic_fork;
mod expressions;
mod http;
mod importer;
mod javascript;
mod relocate;
mod scripts;
mod system_tasks;
mod task_def;
mod task_type;
mod tasks;
#[cfg(test)]
mod tests;

use document::{read_json, split_bundle};
use importer::Importer;
use serde::Serialize;
use serde_json::Value;
use shiftboss_core::workflow::parse::MAX_DEFINITION_BYTES;
use shiftboss_core::workflow::{DefinitionError, WorkflowDef};

pub use scripts::{INLINE_AGENT, JQ_AGENT};
pub use system_tasks::EVENT_AGENT;

/// An error at a place of the Conductor document (the core's constructor is its own).
pub(crate) fn err(path: impl Into<String>, problem: impl Into<String>) -> DefinitionError {
    DefinitionError { path: path.into(), problem: problem.into() }
}

/// A Conductor definition read into ours.
#[derive(Debug, Clone, PartialEq)]
pub struct ConductorImport {
    /// The definition, valid.
    pub workflow: WorkflowDef,
    /// The definitions its SUB_WORKFLOW tasks gave inline (and theirs, first), each valid: register
    /// them before `workflow`, which names them.
    pub sub_workflows: Vec<WorkflowDef>,
    /// Limits the TaskDefs set, per agent: set them on the agents (shiftboss has no per-step limits).
    pub limits: Vec<AgentLimits>,
    /// What was dropped or approximated, one line each, starting with the place (`tasks[2].x: ...`).
    pub notes: Vec<String>,
}

/// The limits a Conductor TaskDef asks for, for the agent its tasks became.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentLimits {
    pub agent: String,
    /// `concurrentExecLimit`: the most steps of the agent running at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u32>,
    /// `rateLimitPerFrequency / rateLimitFrequencyInSeconds`: the most starts per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_second: Option<f64>,
}

/// Reads a Conductor WorkflowDef, or a bundle `{"workflowDef": ..., "taskDefs": [...]}`.
pub fn from_conductor(text: &str) -> Result<ConductorImport, DefinitionError> {
    from_conductor_with_tasks(text, &[])
}

/// Reads a Conductor WorkflowDef (or bundle) with TaskDefs given apart: each text holds one TaskDef
/// or an array of them. TaskDefs are matched to tasks by name; a name given twice is an error.
pub fn from_conductor_with_tasks(workflow: &str, task_defs: &[&str]) -> Result<ConductorImport, DefinitionError> {
    let doc = read_json(workflow, "")?;
    let (wf, mut defs) = split_bundle(doc)?;
    for (k, text) in task_defs.iter().enumerate() {
        match read_json(text, &format!("task_defs[{k}] "))? {
            Value::Array(items) => defs.extend(items),
            other => defs.push(other),
        }
    }
    Importer::new(defs)?.workflow(&wf)
}

/// True when `text` looks like a Conductor definition rather than ours: a JSON object with
/// `workflowDef` (a bundle), or with a `tasks` array and no `steps`, or with `schemaVersion`.
pub fn looks_like_conductor(text: &str) -> bool {
    if text.len() > MAX_DEFINITION_BYTES || !text.trim_start().starts_with('{') {
        return false;
    }
    let Ok(Value::Object(m)) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    if m.get("workflowDef").is_some_and(Value::is_object) {
        return true;
    }
    !m.contains_key("steps") && (m.get("tasks").is_some_and(Value::is_array) || m.contains_key("schemaVersion"))
}
