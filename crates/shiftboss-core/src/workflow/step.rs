//! One step of a definition: an agent call, or a control step (switch, fork, loop, sub-workflow,
//! start of another workflow, wait, terminate, set) that does no work itself and that the decider
//! maps to the steps to run (C4).
//!
//! The step is one flat record, as definitions are written by hand in JSON or YAML: `kind` says
//! which fields apply, and validation refuses a field that does not belong to the kind, so that a
//! misplaced field is an error rather than silently ignored.

use crate::retry::RetryPolicy;
use crate::time::serde_duration;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// What a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A call to an agent: the only kind that does work.
    #[default]
    Agent,
    /// Picks one case by an expression on inputs and outputs; `default` when none matches.
    Switch,
    /// Runs its branches side by side; it ends when every branch has ended (the join).
    Fork,
    /// Runs its body, then again while the condition holds, at most `max_iterations` times.
    DoWhile,
    /// Starts a child task of another workflow and ends with the child's outcome and output.
    SubWorkflow,
    /// Waits for a duration, until a time, or for a signal.
    Wait,
    /// Ends the task with a status and an output.
    Terminate,
    /// Done as soon as it is reached: sets task variables and records an output, both templates.
    Set,
    /// Starts a task of another workflow and goes on at once (fire and forget); its output names
    /// the started task.
    StartWorkflow,
    /// Runs its body once per item of a list, side by side, and joins them all (a fork whose
    /// branches come from the data: Conductor's FORK_JOIN_DYNAMIC).
    ForkEach,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Agent => "agent",
            StepKind::Switch => "switch",
            StepKind::Fork => "fork",
            StepKind::DoWhile => "do_while",
            StepKind::SubWorkflow => "sub_workflow",
            StepKind::Wait => "wait",
            StepKind::Terminate => "terminate",
            StepKind::Set => "set",
            StepKind::StartWorkflow => "start_workflow",
            StepKind::ForkEach => "fork_each",
        }
    }

    pub fn parse(s: &str) -> Option<StepKind> {
        [
            StepKind::Agent,
            StepKind::Switch,
            StepKind::Fork,
            StepKind::DoWhile,
            StepKind::SubWorkflow,
            StepKind::Wait,
            StepKind::Terminate,
            StepKind::Set,
            StepKind::StartWorkflow,
            StepKind::ForkEach,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// What the supervisor does when a claim's complete-by passes (Conductor's timeoutPolicy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// Count a failure and run it again by the retry policy (P17).
    #[default]
    Retry,
    /// The step goes to Error at once, and the task fails.
    FailTask,
    /// Record an alert and leave the step to an operator: it stays Processing and is not retried.
    AlertOnly,
}

impl OnTimeout {
    pub fn as_str(self) -> &'static str {
        match self {
            OnTimeout::Retry => "retry",
            OnTimeout::FailTask => "fail_task",
            OnTimeout::AlertOnly => "alert_only",
        }
    }

    pub fn parse(s: &str) -> Option<OnTimeout> {
        [OnTimeout::Retry, OnTimeout::FailTask, OnTimeout::AlertOnly].into_iter().find(|k| k.as_str() == s)
    }
}

/// How a terminate step ends the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndStatus {
    /// The task completes, with the step's output as its own.
    #[default]
    Completed,
    /// The task fails (and compensates, if its workflow says so).
    Failed,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDef {
    /// Unique within the whole workflow, branches and loops included; expressions reach a step's
    /// input and output by this name (`${charge.output.id}`).
    pub name: String,
    /// What the step is: an agent call (the default) or a control step.
    #[serde(default, skip_serializing_if = "is_agent")]
    pub kind: StepKind,

    // --- agent steps ---
    /// The agent that runs this step (an agent registered with the engine, such as "http"), or
    /// one `${expression}` whose value, when the step starts, names it (a step whose agent is
    /// chosen at run time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// What the agent needs besides the step's input (for the HTTP agent: method, url, headers).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub config: Value,
    /// The step's input, a template over `task` and earlier steps (`${task.input.order_id}`).
    /// An agent step without one gets the task's input; a sub-workflow passes it to the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The complete-by window of one claim (30 s when absent): the agent must reply within it.
    #[serde(with = "serde_duration::option", default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// When set, the agent must report progress (a step heartbeat) within this window, each
    /// report moving complete-by on, never past the start plus `timeout`.
    #[serde(with = "serde_duration::option", default, skip_serializing_if = "Option::is_none")]
    pub response_timeout: Option<Duration>,
    /// How long a due attempt may wait for a claim (Conductor's pollTimeoutSeconds): past it, the
    /// supervisor times the attempt out by `on_timeout`, as if a claim's complete-by had passed.
    #[serde(with = "serde_duration::option", default, skip_serializing_if = "Option::is_none")]
    pub claim_timeout: Option<Duration>,
    /// How long all the step's attempts may take, from its first due time (Conductor's
    /// totalTimeoutSeconds): no claim's complete-by runs past it (a shorter total timeout than
    /// `timeout` cuts the first attempt short), and no retry is scheduled at or after it; the
    /// step then goes to Error.
    #[serde(with = "serde_duration::option", default, skip_serializing_if = "Option::is_none")]
    pub total_timeout: Option<Duration>,
    /// What the supervisor does when a claim's complete-by passes (retry by default).
    #[serde(default, skip_serializing_if = "is_retry")]
    pub on_timeout: OnTimeout,
    /// This step's own retry policy, before the workflow's, the agent's and the deployment's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// Added to the task's priority: higher runs first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// An isolation group: only schedulers serving this domain claim the step, until
    /// `domain_fallback` has passed, after which any scheduler of the agent may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// How long after the step is scheduled its `domain` stops binding it.
    #[serde(with = "serde_duration::option", default, skip_serializing_if = "Option::is_none")]
    pub domain_fallback: Option<Duration>,
    /// The agent step that undoes this one, run when the task is compensated (P7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensate: Option<Box<StepDef>>,
    /// How long after the step is reached its first attempt may be claimed.
    #[serde(with = "serde_duration::option", default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<Duration>,
    /// When the step fails for good (agent and sub-workflow steps), the task goes on as if it had
    /// completed with no output; the row stays in Error, for people to see.
    #[serde(default, skip_serializing_if = "is_false")]
    pub optional: bool,
    /// When the step fails for good, the task goes on with the steps after it, and fails once
    /// nothing is left to run.
    #[serde(default, skip_serializing_if = "is_false")]
    pub permissive: bool,

    // --- switch ---
    /// The expression whose value picks the case (switch), e.g. `${check.output.verdict}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// The steps of each case, by the expression's value as text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cases: BTreeMap<String, Vec<StepDef>>,
    /// The steps run when no case matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default: Vec<StepDef>,

    // --- fork ---
    /// The branches a fork runs side by side, each a list of steps in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<Vec<StepDef>>,
    /// The last steps of the branches the fork waits for; empty: every branch. The other branches
    /// run on after the fork has ended, and the task ends only once they have too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join_on: Vec<String>,

    // --- fork_each ---
    /// The list a fork_each runs its body for, one pass per item side by side: a template (one
    /// `${expression}`, or a JSON array whose elements may hold templates), rendered when the step
    /// starts (the row keeps the items as its input). In pass `n`, expressions read
    /// the item as `${<fork_each name>.item}`; instances are named as a loop's passes (`resize#2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Value>,
    /// A fork_each's output: an object keyed by this template (rendered in each pass, as text),
    /// instead of the list of each pass's last output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,

    // --- do_while ---
    /// Checked after each pass of the body; `${<loop name>.iteration}` counts passes from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// The steps of one pass of a do_while loop (or of a fork_each, per item).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<StepDef>,
    /// The most passes of the body; a condition still true after the last one fails the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,

    // --- sub_workflow, start_workflow ---
    /// The workflow a sub_workflow step starts as a child task (or a start_workflow step starts on
    /// its own), or one `${expression}` whose value names it when the step starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The child's version; the newest registered when the child starts, if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_version: Option<u32>,
    /// A template giving the child's version when the step starts: a number or numeric text, or
    /// null for the newest (in place of `workflow_version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_version_from: Option<String>,

    // --- wait ---
    /// How long a wait step waits, from when it starts.
    #[serde(with = "serde_duration::option", default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// A template giving how long to wait, from when the wait starts: words such as `10s` or
    /// `2 minutes`, or milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_from: Option<String>,
    /// A template giving the time to wait for: RFC 3339 text, or milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// The name of the signal that ends the wait (sent with `shiftboss tasks signal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,

    // --- terminate ---
    /// How a terminate step ends the task (completed when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EndStatus>,
    /// The task's output: a template (terminate steps; also the workflow's own `output`). For a
    /// set step, its own output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why a terminate step ends the task: a template of text, the failure's reason when it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    // --- set ---
    /// The task variables a set step sets, an object template: `${task.variables.NAME}` reads
    /// the latest value set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<Value>,
}

fn is_agent(k: &StepKind) -> bool {
    *k == StepKind::Agent
}
fn is_retry(k: &OnTimeout) -> bool {
    *k == OnTimeout::Retry
}
fn is_zero(p: &i32) -> bool {
    *p == 0
}
fn is_false(b: &bool) -> bool {
    !*b
}

/// A name field (an agent, a workflow) that is one `${expression}` evaluated when the step starts.
pub fn is_dynamic(name: &str) -> bool {
    name.trim_start().starts_with("${")
}

/// The complete-by window of a step that names none.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// The iteration cap of a loop that names none.
pub const DEFAULT_MAX_ITERATIONS: u32 = 100;

impl StepDef {
    /// An agent step.
    pub fn agent(name: impl Into<String>, agent: impl Into<String>) -> StepDef {
        StepDef { name: name.into(), agent: Some(agent.into()), ..StepDef::default() }
    }

    /// A switch on `expression`; add cases with [`StepDef::case`] and [`StepDef::otherwise`].
    pub fn switch(name: impl Into<String>, expression: impl Into<String>) -> StepDef {
        StepDef { name: name.into(), kind: StepKind::Switch, expression: Some(expression.into()), ..StepDef::default() }
    }

    /// A fork over these branches, joined when all have ended.
    pub fn fork(name: impl Into<String>, branches: Vec<Vec<StepDef>>) -> StepDef {
        StepDef { name: name.into(), kind: StepKind::Fork, branches, ..StepDef::default() }
    }

    /// A loop that runs `body`, then again while `condition` holds, at most `max_iterations` times.
    pub fn do_while(
        name: impl Into<String>,
        condition: impl Into<String>,
        max_iterations: u32,
        body: Vec<StepDef>,
    ) -> StepDef {
        StepDef {
            name: name.into(),
            kind: StepKind::DoWhile,
            condition: Some(condition.into()),
            max_iterations: Some(max_iterations),
            body,
            ..StepDef::default()
        }
    }

    /// A child task of `workflow` (newest version unless [`StepDef::workflow_version`] is set).
    pub fn sub_workflow(name: impl Into<String>, workflow: impl Into<String>) -> StepDef {
        StepDef {
            name: name.into(),
            kind: StepKind::SubWorkflow,
            workflow: Some(workflow.into()),
            ..StepDef::default()
        }
    }

    /// A wait for a named signal.
    pub fn wait_for_signal(name: impl Into<String>, signal: impl Into<String>) -> StepDef {
        StepDef { name: name.into(), kind: StepKind::Wait, signal: Some(signal.into()), ..StepDef::default() }
    }

    /// A wait of a fixed duration.
    pub fn wait_for(name: impl Into<String>, duration: Duration) -> StepDef {
        StepDef { name: name.into(), kind: StepKind::Wait, duration: Some(duration), ..StepDef::default() }
    }

    /// Ends the task with `status` and `output` (a template).
    pub fn terminate(name: impl Into<String>, status: EndStatus, output: Value) -> StepDef {
        StepDef {
            name: name.into(),
            kind: StepKind::Terminate,
            status: Some(status),
            output: Some(output),
            ..StepDef::default()
        }
    }

    pub fn case(mut self, value: impl Into<String>, steps: Vec<StepDef>) -> StepDef {
        self.cases.insert(value.into(), steps);
        self
    }

    pub fn otherwise(mut self, steps: Vec<StepDef>) -> StepDef {
        self.default = steps;
        self
    }

    pub fn with_input(mut self, input: Value) -> StepDef {
        self.input = Some(input);
        self
    }

    pub fn with_config(mut self, config: Value) -> StepDef {
        self.config = config;
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> StepDef {
        self.timeout = Some(timeout);
        self
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> StepDef {
        self.retry = Some(retry);
        self
    }

    pub fn compensated_by(mut self, step: StepDef) -> StepDef {
        self.compensate = Some(Box::new(step));
        self
    }

    /// The agent of an agent step; empty for control steps (they are never claimed). For an agent
    /// chosen at run time, the expression that chooses it (the step row holds the agent chosen).
    pub fn agent_name(&self) -> &str {
        self.agent.as_deref().unwrap_or("")
    }

    /// A set step: records `output` and sets the task `variables` (both templates) when reached.
    pub fn set(name: impl Into<String>, variables: Option<Value>, output: Option<Value>) -> StepDef {
        StepDef { name: name.into(), kind: StepKind::Set, variables, output, ..StepDef::default() }
    }

    /// Starts a task of `workflow` and goes on at once.
    pub fn start_workflow(name: impl Into<String>, workflow: impl Into<String>) -> StepDef {
        StepDef {
            name: name.into(),
            kind: StepKind::StartWorkflow,
            workflow: Some(workflow.into()),
            ..StepDef::default()
        }
    }

    /// The complete-by window of one claim.
    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_STEP_TIMEOUT)
    }

    /// The priority of this step in a task of `task_priority`: the sum, saturating.
    pub fn priority_in(&self, task_priority: i32) -> i32 {
        task_priority.saturating_add(self.priority)
    }

    /// The step lists nested directly in this step, in definition order.
    pub fn children(&self) -> Vec<&[StepDef]> {
        let mut out: Vec<&[StepDef]> = Vec::new();
        out.extend(self.cases.values().map(Vec::as_slice));
        if !self.default.is_empty() {
            out.push(&self.default);
        }
        out.extend(self.branches.iter().map(Vec::as_slice));
        if !self.body.is_empty() {
            out.push(&self.body);
        }
        out
    }

    /// This step, its compensation and every step nested in it, depth first.
    pub fn walk<'a>(&'a self, out: &mut Vec<&'a StepDef>) {
        out.push(self);
        if let Some(c) = &self.compensate {
            out.push(c);
        }
        for list in self.children() {
            for s in list {
                s.walk(out);
            }
        }
    }
}
