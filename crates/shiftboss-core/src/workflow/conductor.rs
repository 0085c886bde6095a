//! Importing Netflix Conductor definitions: a Conductor `WorkflowDef` (JSON), and optionally the
//! `TaskDef`s of its tasks, become one of our [`WorkflowDef`]s, checked by
//! [`WorkflowDef::validate`].
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
//! with a note, as shiftboss always fails a task past its timeout).
//!
//! Task types, each task's `taskReferenceName` becoming the step's name:
//! - SIMPLE: an agent step whose agent is the task's `name` (the Conductor task type is the agent).
//! - HTTP: an agent step of agent `http`; `http_request` (or, in newer Conductor, the input
//!   parameters themselves) gives `uri` → `url`, `method` (GET when absent), `headers`, `accept`
//!   (an `Accept` header) in the step's static `config`; `body` becomes the step's input (the HTTP
//!   agent sends the input as its body). Dropped with a note: `contentType` other than JSON,
//!   `connectionTimeOut`, `readTimeOut` (the step's timeout bounds the call) and other fields. A
//!   `${...}` in `uri`, `method` or `headers` is refused: the config is not a template.
//! - SWITCH with evaluatorType `value-param` (`expression` names an input parameter whose value
//!   becomes the switch expression) or `javascript`/`graaljs` (see below); DECISION with
//!   `caseValueParam` or `caseExpression` likewise. `decisionCases` → cases, `defaultCase` → default.
//! - FORK_JOIN followed by its JOIN: `forkTasks` → branches. The JOIN's `joinOn` must name the last
//!   task of every branch (our fork joins all of them); the JOIN becomes nothing, and
//!   `${join.output.<ref>...}` reads become `${<ref>.output...}`.
//! - DO_WHILE: `loopOver` → body; `loopCondition` is translated (see below), where
//!   `$.<loop>['iteration']` is `${<loop>.output.iteration}`, `$.<body task>[...]` that task's output
//!   and `$.<name>` the loop's input parameter `<name>`. A condition of the form
//!   `iteration < N` (or `<= N`) also sets `max_iterations` so that the loop is not cut short by the
//!   default cap of 100 passes; for other conditions a note says the cap applies.
//! - SUB_WORKFLOW: `subWorkflowParam.name`/`version`; the input parameters are the child's input.
//! - WAIT: `duration` (`"10s"`, `"2 minutes"`, `"1d 2h"`), `until` (`"2024-12-25 09:00 UTC"`,
//!   `"2024-12-25"`, RFC 3339, or a `${...}` giving RFC 3339 or epoch milliseconds), or neither: a
//!   wait for the signal named after the task reference name.
//! - TERMINATE: `terminationStatus` COMPLETED or FAILED, `workflowOutput` → output;
//!   `terminationReason` is dropped with a note.
//!
//! Expressions in input parameters: `${workflow.input...}` → `${task.input...}`,
//! `${workflow.workflowId}` → `${task.id}` (a number in shiftboss), `${ref.output...}` and
//! `${ref.input...}` as they are, except: an HTTP task's `${ref.output.response.body...}` is
//! `${ref.output...}` (our HTTP agent's output is the response body); a SWITCH's
//! `${ref.output.evaluationResult[0]}` is `${ref.output.value}`; a DO_WHILE's
//! `${ref.output.iteration}` maps. Any other `${workflow.*}`, a read of a control task's input or
//! output that has no equivalent, and a read from outside a loop of a task inside it (shiftboss
//! gives null there) are refused. `$${` stays a literal `${` in both languages.
//!
//! JavaScript (SWITCH, DECISION and DO_WHILE): only the trivial forms are translated: `$` paths,
//! string, number and boolean literals, comparisons, `&& || !`, arithmetic, `? :`, `.length`
//! (→ `len()`), and the wrapper `if (C) { true; } else { false; }`. Anything else (calls,
//! variables, statements) is refused with the field's path. A note says that JavaScript's loose
//! equality and truthiness are not reproduced (`==` compares without type coercion; `&&`, `||`,
//! `!` and `? :` want booleans).
//!
//! Per task: `optional: true` and `startDelay > 0` are refused (no honest equivalent);
//! `asyncComplete: true` is refused except on SIMPLE tasks, where Conductor ignores it. A task's own
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
//!   TIME_OUT_WF (the default) → fail_task, ALERT_ONLY → alert_only.
//! - `concurrentExecLimit`, `rateLimitPerFrequency`/`rateLimitFrequencyInSeconds` → an
//!   [`AgentLimits`] of the SIMPLE task's agent (for HTTP tasks, whose agent is shared, a note).
//! - `inputTemplate`: its keys missing from the task's input parameters are added to the input.
//! - Ignored knowingly: `description`, `ownerEmail`, `ownerApp`, `inputKeys`, `outputKeys`,
//!   `pollTimeoutSeconds` (a claim in shiftboss does not wait for a poll), `createTime`,
//!   `updateTime`, `createdBy`, `updatedBy`. Ignored with a note when set: `totalTimeoutSeconds`,
//!   `isolationGroupId`, `executionNameSpace`, `inputSchema`, `outputSchema`, `enforceSchema`,
//!   `baseType`.
//! - A SIMPLE task without a TaskDef gets shiftboss's defaults (noted); a TaskDef that no task uses
//!   is noted.
//!
//! # What is refused
//!
//! `failureWorkflow` (unless empty: shiftboss compensates completed steps instead); task types
//! other than those above (EVENT, DYNAMIC, FORK_JOIN_DYNAMIC, INLINE, JSON_JQ_TRANSFORM,
//! KAFKA_PUBLISH, LAMBDA, SET_VARIABLE, HUMAN, EXCLUSIVE_JOIN, START_WORKFLOW, ...) with the path
//! `tasks[i].type`; a JOIN that joins only some branches; a JOIN not right after its FORK_JOIN;
//! TERMINATED as a termination status; an inline sub-workflow definition; a dynamic WAIT duration;
//! DO_WHILE over `items`; a `taskReferenceName` that is not one of our names (1 to 100 of
//! `A-Z a-z 0-9 - _ . :`), is `task` (our expressions' root for the task), or that an expression
//! reads although it is not an expression name (letters, digits, `_`).
//!
//! Workflow fields ignored knowingly: `ownerEmail`, `schemaVersion` (read as 2), `inputParameters`
//! (documentation of the input), `createTime`, `updateTime`, `createdBy`, `updatedBy`, `ownerApp`,
//! `accessPolicy`, `tags`. Ignored with a note when set: `restartable: false` (operators can still
//! rerun), `workflowStatusListenerEnabled`, `workflowStatusListenerSink`, `variables`,
//! `inputTemplate`, `rateLimitConfig`, `inputSchema`, `outputSchema`, `enforceSchema`.

use super::parse::MAX_DEFINITION_BYTES;
use super::{
    DefinitionError, EndStatus, MAX_STEP_TIMEOUT, MAX_TASK_TIMEOUT, OnTimeout, StepDef, StepKind, WorkflowDef,
    check_name, err,
};
use crate::expr::Expr;
use crate::retry::RetryPolicy;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// A Conductor definition read into ours.
#[derive(Debug, Clone, PartialEq)]
pub struct ConductorImport {
    /// The definition, valid.
    pub workflow: WorkflowDef,
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

fn read_json(text: &str, prefix: &str) -> Result<Value, DefinitionError> {
    if text.len() > MAX_DEFINITION_BYTES {
        return Err(err(format!("{prefix}document").trim_end(), format!("larger than {MAX_DEFINITION_BYTES} bytes")));
    }
    serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        let message = message.rfind(" at line ").map_or(message.as_str(), |i| &message[..i]).to_owned();
        err(format!("{prefix}line {} column {}", e.line(), e.column()), message)
    })
}

/// The workflow and the TaskDefs of a bundle; a bare WorkflowDef has none.
fn split_bundle(doc: Value) -> Result<(Value, Vec<Value>), DefinitionError> {
    let Value::Object(mut m) = doc else {
        return Err(err("document", "a Conductor definition is a JSON object"));
    };
    if !m.contains_key("workflowDef") {
        return Ok((Value::Object(m), Vec::new()));
    }
    if let Some(extra) = m.keys().find(|k| !matches!(k.as_str(), "workflowDef" | "taskDefs")) {
        return Err(err(extra.as_str(), "a bundle holds only `workflowDef` and `taskDefs`"));
    }
    let wf = m.remove("workflowDef").unwrap_or_default();
    let defs = match m.remove("taskDefs") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(err("taskDefs", "must be an array of TaskDefs")),
    };
    Ok((wf, defs))
}

/// The Conductor task types the importer maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Simple,
    Http,
    /// SWITCH, or the legacy DECISION.
    Switch,
    Fork,
    Join,
    DoWhile,
    SubWorkflow,
    Wait,
    Terminate,
}

impl Type {
    fn parse(at: &str, t: &Map<String, Value>) -> Result<Type, DefinitionError> {
        let path = format!("{at}.type");
        let name = opt_str(t, "type", at)?.unwrap_or("SIMPLE");
        Ok(match name {
            "SIMPLE" => Type::Simple,
            "HTTP" => Type::Http,
            "SWITCH" | "DECISION" => Type::Switch,
            "FORK_JOIN" => Type::Fork,
            "JOIN" => Type::Join,
            "DO_WHILE" => Type::DoWhile,
            "SUB_WORKFLOW" => Type::SubWorkflow,
            "WAIT" => Type::Wait,
            "TERMINATE" => Type::Terminate,
            other => {
                let hint = match other {
                    "DYNAMIC" | "FORK_JOIN_DYNAMIC" => ": shiftboss definitions are static; list the steps",
                    "INLINE" | "JSON_JQ_TRANSFORM" | "LAMBDA" => {
                        ": do the transformation in an agent, or in the input templates of the next step"
                    }
                    "EVENT" | "KAFKA_PUBLISH" => ": publish from an agent",
                    "HUMAN" => ": use a WAIT without duration (a wait for a signal)",
                    "SET_VARIABLE" => ": shiftboss has no workflow variables; read step outputs instead",
                    "START_WORKFLOW" => ": start the other workflow from an agent, or use SUB_WORKFLOW",
                    "EXCLUSIVE_JOIN" => ": shiftboss's switch needs no join",
                    _ => "",
                };
                return Err(err(path, format!("the Conductor task type {other:?} is not supported{hint}")));
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Type::Simple => "SIMPLE",
            Type::Http => "HTTP",
            Type::Switch => "SWITCH",
            Type::Fork => "FORK_JOIN",
            Type::Join => "JOIN",
            Type::DoWhile => "DO_WHILE",
            Type::SubWorkflow => "SUB_WORKFLOW",
            Type::Wait => "WAIT",
            Type::Terminate => "TERMINATE",
        }
    }
}

/// What the importer knows of a task reference name before it maps any task.
#[derive(Debug, Clone)]
struct RefInfo {
    ty: Type,
    /// The DO_WHILE loops the task runs in, outermost first.
    loops: Vec<String>,
}

/// One step of a path after its root: `.name`, `['name']` or `[3]`.
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Name(String),
    Index(u64),
}

/// A TaskDef and the place it was given at.
type PathedDef = (String, Map<String, Value>);

/// Gives our expression text for a JavaScript `$.root...` path, or why it cannot.
type Resolver<'a> = dyn FnMut(&str, &[Seg]) -> Result<String, String> + 'a;

struct TaskDefIn {
    path: String,
    def: Map<String, Value>,
    used: bool,
}

struct Importer {
    defs: Vec<TaskDefIn>,
    def_index: HashMap<String, usize>,
    refs: HashMap<String, RefInfo>,
    notes: Vec<String>,
    limits: Vec<AgentLimits>,
    /// Our path of each step made, with the Conductor path of its task: validation errors are
    /// reported at the Conductor place.
    places: Vec<(String, String)>,
    /// The Conductor path of each step by name.
    by_name: HashMap<String, String>,
    /// Task names already noted as having no TaskDef.
    missing_defs: BTreeSet<String>,
}

// Field lists: what the importer reads, what it ignores knowingly, what it notes when set.
const WF_READ: &[&str] = &[
    "name",
    "version",
    "description",
    "tasks",
    "timeoutSeconds",
    "timeoutPolicy",
    "outputParameters",
    "failureWorkflow",
];
const WF_IGNORED: &[&str] = &[
    "ownerEmail",
    "schemaVersion",
    "inputParameters",
    "createTime",
    "updateTime",
    "createdBy",
    "updatedBy",
    "ownerApp",
    "accessPolicy",
    "tags",
];
const WF_NOTED: &[&str] = &[
    "restartable",
    "workflowStatusListenerEnabled",
    "workflowStatusListenerSink",
    "variables",
    "inputTemplate",
    "rateLimitConfig",
    "inputSchema",
    "outputSchema",
    "enforceSchema",
];
const TASK_READ: &[&str] = &[
    "name",
    "taskReferenceName",
    "type",
    "inputParameters",
    "optional",
    "startDelay",
    "asyncComplete",
    "taskDefinition",
    "retryCount",
    "permissive",
    "onStateChange",
    "cacheConfig",
    "description",
    "rateLimited",
];
/// Fields of one task type (or of types the importer refuses: listed with none).
const TASK_TYPED: &[(&str, &[Type])] = &[
    ("evaluatorType", &[Type::Switch]),
    ("expression", &[Type::Switch]),
    ("caseValueParam", &[Type::Switch]),
    ("caseExpression", &[Type::Switch]),
    ("decisionCases", &[Type::Switch]),
    ("defaultCase", &[Type::Switch]),
    ("forkTasks", &[Type::Fork]),
    ("joinOn", &[Type::Join]),
    ("loopCondition", &[Type::DoWhile]),
    ("loopOver", &[Type::DoWhile]),
    ("subWorkflowParam", &[Type::SubWorkflow]),
    ("sink", &[]),
    ("dynamicTaskNameParam", &[]),
    ("dynamicForkTasksParam", &[]),
    ("dynamicForkTasksInputParamName", &[]),
    ("dynamicForkJoinTasksParam", &[]),
    ("defaultExclusiveJoinTask", &[]),
    ("scriptExpression", &[]),
];
const DEF_READ: &[&str] = &[
    "name",
    "retryCount",
    "retryLogic",
    "retryDelaySeconds",
    "backoffScaleFactor",
    "timeoutSeconds",
    "responseTimeoutSeconds",
    "timeoutPolicy",
    "concurrentExecLimit",
    "rateLimitPerFrequency",
    "rateLimitFrequencyInSeconds",
    "inputTemplate",
];
const DEF_IGNORED: &[&str] = &[
    "description",
    "ownerEmail",
    "ownerApp",
    "inputKeys",
    "outputKeys",
    "pollTimeoutSeconds",
    "createTime",
    "updateTime",
    "createdBy",
    "updatedBy",
];
const DEF_NOTED: &[&str] = &[
    "totalTimeoutSeconds",
    "isolationGroupId",
    "executionNameSpace",
    "inputSchema",
    "outputSchema",
    "enforceSchema",
    "baseType",
];

/// The most retries a TaskDef may ask for.
const MAX_RETRIES: u64 = 1000;

impl Importer {
    fn new(defs: Vec<Value>) -> Result<Importer, DefinitionError> {
        let mut me = Importer {
            defs: Vec::new(),
            def_index: HashMap::new(),
            refs: HashMap::new(),
            notes: Vec::new(),
            limits: Vec::new(),
            places: Vec::new(),
            by_name: HashMap::new(),
            missing_defs: BTreeSet::new(),
        };
        for (n, d) in defs.into_iter().enumerate() {
            let path = format!("taskDefs[{n}]");
            let Value::Object(def) = d else {
                return Err(err(path, "a TaskDef is a JSON object"));
            };
            let name = opt_str(&def, "name", &path)?
                .ok_or_else(|| err(format!("{path}.name"), "a TaskDef needs a name"))?
                .to_owned();
            if me.def_index.insert(name.clone(), me.defs.len()).is_some() {
                return Err(err(format!("{path}.name"), format!("another TaskDef is also named {name:?}")));
            }
            me.defs.push(TaskDefIn { path, def, used: false });
        }
        Ok(me)
    }

    fn note(&mut self, at: impl AsRef<str>, text: impl AsRef<str>) {
        self.notes.push(format!("{}: {}", at.as_ref(), text.as_ref()));
    }

    fn workflow(mut self, wf: &Value) -> Result<ConductorImport, DefinitionError> {
        let m = wf.as_object().ok_or_else(|| err("document", "a Conductor WorkflowDef is a JSON object"))?;
        for (k, v) in m {
            let k = k.as_str();
            if WF_READ.contains(&k) || WF_IGNORED.contains(&k) {
                continue;
            }
            let set = match k {
                "restartable" => v == &Value::Bool(false),
                _ => !is_empty(v),
            };
            if set {
                if k == "restartable" {
                    self.note(k, "ignored: shiftboss operators can always rerun a task");
                } else if WF_NOTED.contains(&k) {
                    self.note(k, "ignored: shiftboss has no equivalent");
                } else {
                    self.note(k, "ignored: not a WorkflowDef field the importer knows");
                }
            }
        }
        let name = opt_str(m, "name", "")?.ok_or_else(|| err("name", "a workflow needs a name"))?;
        check_name("name", name)?;
        let version = match opt_u64(m, "version", "")? {
            None => 1,
            Some(v) => u32::try_from(v).map_err(|_| err("version", "too large"))?,
        };
        if let Some(f) = opt_str(m, "failureWorkflow", "")?
            && !f.trim().is_empty()
        {
            return Err(err(
                "failureWorkflow",
                "a failure workflow is not supported: shiftboss runs the `compensate` steps of the completed steps \
                 instead",
            ));
        }
        let tasks = match m.get("tasks") {
            Some(Value::Array(t)) if !t.is_empty() => t,
            Some(Value::Array(_)) => return Err(err("tasks", "a workflow needs at least one task")),
            Some(_) => return Err(err("tasks", "must be an array of tasks")),
            None => return Err(err("tasks", "a workflow needs tasks")),
        };
        self.scan(tasks, "tasks", &[])?;
        let steps = self.list(tasks, "tasks", "steps", &[])?;
        let mut def = WorkflowDef::new(name, version, steps);
        def.description = opt_str(m, "description", "")?.filter(|d| !d.is_empty()).map(str::to_owned);
        let timeout = opt_u64(m, "timeoutSeconds", "")?.unwrap_or(0);
        if timeout > 0 {
            let t = Duration::from_secs(timeout);
            if t > MAX_TASK_TIMEOUT {
                return Err(err("timeoutSeconds", "at most 366 days in shiftboss"));
            }
            def.timeout = Some(t);
        }
        match opt_str(m, "timeoutPolicy", "")?.unwrap_or("TIME_OUT_WF") {
            "TIME_OUT_WF" => {}
            "ALERT_ONLY" => {
                if def.timeout.take().is_some() {
                    self.note(
                        "timeoutPolicy",
                        "ALERT_ONLY: shiftboss fails a task past its timeout and cannot only alert, so the workflow's \
                         timeout was dropped",
                    );
                }
            }
            other => return Err(err("timeoutPolicy", format!("{other:?} is neither TIME_OUT_WF nor ALERT_ONLY"))),
        }
        match m.get("outputParameters") {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) if o.is_empty() => {}
            Some(o @ Value::Object(_)) => def.output = Some(self.template(o, "outputParameters", &[])?),
            Some(_) => return Err(err("outputParameters", "must be an object")),
        }
        def.validate().map_err(|e| self.relocate(e))?;
        let unused: Vec<(String, String)> = self
            .defs
            .iter()
            .filter(|d| !d.used)
            .map(|d| (d.path.clone(), d.def.get("name").and_then(Value::as_str).unwrap_or("").to_owned()))
            .collect();
        for (path, name) in unused {
            self.note(path, format!("the TaskDef {name:?} is used by no task of this workflow"));
        }
        Ok(ConductorImport { workflow: def, limits: self.limits, notes: self.notes })
    }

    /// Records every task reference name (type and enclosing loops) before any task is mapped, so
    /// that expressions can be checked wherever they read.
    fn scan(&mut self, tasks: &[Value], path: &str, loops: &[String]) -> Result<(), DefinitionError> {
        for (i, t) in tasks.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let t = t.as_object().ok_or_else(|| err(&at, "a task is a JSON object"))?;
            let ty = Type::parse(&at, t)?;
            let rpath = format!("{at}.taskReferenceName");
            let name = opt_str(t, "taskReferenceName", &at)?.ok_or_else(|| err(&rpath, "a task needs one"))?;
            check_name(&rpath, name)?;
            if name == "task" {
                return Err(err(rpath, "\"task\" is the root of the task in shiftboss expressions: rename the task"));
            }
            if self.refs.insert(name.to_owned(), RefInfo { ty, loops: loops.to_vec() }).is_some() {
                return Err(err(rpath, format!("{name:?} is used by another task")));
            }
            match ty {
                Type::Switch => {
                    if let Some(Value::Object(cases)) = t.get("decisionCases") {
                        for (k, list) in cases {
                            self.scan(
                                list_of(list, &format!("{at}.decisionCases.{k}"))?,
                                &format!("{at}.decisionCases.{k}"),
                                loops,
                            )?;
                        }
                    }
                    if let Some(list) = t.get("defaultCase").filter(|v| !v.is_null()) {
                        self.scan(list_of(list, &format!("{at}.defaultCase"))?, &format!("{at}.defaultCase"), loops)?;
                    }
                }
                Type::Fork => {
                    if let Some(Value::Array(branches)) = t.get("forkTasks") {
                        for (b, list) in branches.iter().enumerate() {
                            let bpath = format!("{at}.forkTasks[{b}]");
                            self.scan(list_of(list, &bpath)?, &bpath, loops)?;
                        }
                    }
                }
                Type::DoWhile => {
                    if let Some(list) = t.get("loopOver").filter(|v| !v.is_null()) {
                        let inner: Vec<String> = loops.iter().cloned().chain([name.to_owned()]).collect();
                        self.scan(list_of(list, &format!("{at}.loopOver"))?, &format!("{at}.loopOver"), &inner)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Maps a list of tasks; a FORK_JOIN takes the JOIN after it along.
    fn list(
        &mut self,
        tasks: &[Value],
        path: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<Vec<StepDef>, DefinitionError> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < tasks.len() {
            let at = format!("{path}[{i}]");
            let t = tasks[i].as_object().ok_or_else(|| err(&at, "a task is a JSON object"))?;
            let ty = Type::parse(&at, t)?;
            let our_at = format!("{ours}[{}]", out.len());
            match ty {
                Type::Join => {
                    return Err(err(format!("{at}.type"), "a JOIN must come right after its FORK_JOIN"));
                }
                Type::Fork => {
                    let step = self.task(t, ty, &at, &our_at, loops)?;
                    let join_at = format!("{path}[{}]", i + 1);
                    let join = tasks.get(i + 1).and_then(Value::as_object);
                    let join = match join {
                        Some(j) if Type::parse(&join_at, j)? == Type::Join => j,
                        _ => return Err(err(&at, "a FORK_JOIN must be followed by its JOIN")),
                    };
                    self.join(t, &at, join, &join_at)?;
                    out.push(step);
                    i += 2;
                }
                _ => {
                    out.push(self.task(t, ty, &at, &our_at, loops)?);
                    i += 1;
                }
            }
        }
        Ok(out)
    }

    /// Checks a JOIN: it must wait for the last task of every branch, as our fork does.
    fn join(
        &mut self,
        fork: &Map<String, Value>,
        fork_at: &str,
        join: &Map<String, Value>,
        at: &str,
    ) -> Result<(), DefinitionError> {
        self.common(join, Type::Join, at)?;
        let mut ends = BTreeSet::new();
        if let Some(Value::Array(branches)) = fork.get("forkTasks") {
            for b in branches {
                if let Some(last) = b.as_array().and_then(|l| l.last()).and_then(|t| t.get("taskReferenceName")) {
                    ends.insert(last.as_str().unwrap_or_default().to_owned());
                }
            }
        }
        let joined: BTreeSet<String> = match join.get("joinOn") {
            None | Some(Value::Null) => BTreeSet::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    v.as_str().map(str::to_owned).ok_or_else(|| err(format!("{at}.joinOn[{k}]"), "must be a string"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err(format!("{at}.joinOn"), "must be an array of task reference names")),
        };
        if joined != ends {
            let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
            return Err(err(
                format!("{at}.joinOn"),
                format!(
                    "joins [{}] but the branches of {fork_at} end with [{}]: a shiftboss fork joins all its branches, \
                     so joinOn must name the last task of every branch",
                    list(&joined),
                    list(&ends)
                ),
            ));
        }
        for field in ["expression", "evaluatorType"] {
            if join.get(field).is_some_and(|v| !is_empty(v)) {
                return Err(err(format!("{at}.{field}"), "a JOIN with a script is not supported"));
            }
        }
        if let Some(name) = join.get("taskReferenceName").and_then(Value::as_str) {
            self.by_name.insert(name.to_owned(), at.to_owned());
        }
        Ok(())
    }

    /// The checks every task gets: fields of other types, and per-task flags with no equivalent.
    fn common(&mut self, t: &Map<String, Value>, ty: Type, at: &str) -> Result<(), DefinitionError> {
        for (k, v) in t {
            let k = k.as_str();
            if TASK_READ.contains(&k) {
                continue;
            }
            match TASK_TYPED.iter().find(|(f, _)| *f == k) {
                Some((_, types)) if types.contains(&ty) => {}
                Some(_) if is_empty(v) => {}
                Some(_) => self.note(format!("{at}.{k}"), format!("ignored: a {} task does not use it", ty.name())),
                None if is_empty(v) => {}
                None => self.note(format!("{at}.{k}"), "ignored: not a task field the importer knows"),
            }
        }
        if opt_bool(t, "optional", at)? == Some(true) {
            return Err(err(
                format!("{at}.optional"),
                "an optional task (the workflow goes on when it fails) has no shiftboss equivalent",
            ));
        }
        if opt_u64(t, "startDelay", at)?.unwrap_or(0) > 0 {
            return Err(err(format!("{at}.startDelay"), "not supported: put a WAIT with a duration before the task"));
        }
        if opt_bool(t, "asyncComplete", at)? == Some(true) {
            if ty == Type::Simple {
                self.note(format!("{at}.asyncComplete"), "ignored, as Conductor does for SIMPLE tasks");
            } else {
                return Err(err(
                    format!("{at}.asyncComplete"),
                    "a task completed from outside is not supported: use a WAIT (a signal) after it",
                ));
            }
        }
        if opt_bool(t, "permissive", at)? == Some(true) {
            self.note(format!("{at}.permissive"), "ignored: a failed step fails the task in shiftboss");
        }
        for (field, why) in [
            ("onStateChange", "shiftboss sends no state-change events"),
            ("cacheConfig", "shiftboss caches no results"),
        ] {
            if t.get(field).is_some_and(|v| !is_empty(v)) {
                self.note(format!("{at}.{field}"), format!("ignored: {why}"));
            }
        }
        if !matches!(ty, Type::Simple | Type::Http) {
            for field in ["retryCount", "taskDefinition"] {
                if t.get(field).is_some_and(|v| !is_empty(v)) {
                    self.note(format!("{at}.{field}"), format!("ignored: a {} task is no agent step", ty.name()));
                }
            }
        }
        Ok(())
    }

    fn task(
        &mut self,
        t: &Map<String, Value>,
        ty: Type,
        at: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        self.common(t, ty, at)?;
        let name = opt_str(t, "taskReferenceName", at)?.unwrap_or_default().to_owned();
        self.places.push((ours.to_owned(), at.to_owned()));
        self.by_name.insert(name.clone(), at.to_owned());
        let mut step = match ty {
            Type::Simple => self.simple(t, at, loops)?,
            Type::Http => self.http(t, at, loops)?,
            Type::Switch => self.switch(t, at, ours, loops)?,
            Type::Fork => self.fork(t, at, ours, loops)?,
            Type::DoWhile => self.do_while(t, &name, at, ours, loops)?,
            Type::SubWorkflow => self.sub_workflow(t, at, loops)?,
            Type::Wait => self.wait(t, &name, at, loops)?,
            Type::Terminate => self.terminate(t, at, loops)?,
            Type::Join => unreachable!("a JOIN is handled with its FORK_JOIN"),
        };
        step.name = name;
        Ok(step)
    }

    /// The task's `inputParameters`, rewritten; an object (empty when absent).
    fn input_parameters(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<Value, DefinitionError> {
        match t.get("inputParameters") {
            None | Some(Value::Null) => Ok(json!({})),
            Some(v @ Value::Object(_)) => self.template(v, &format!("{at}.inputParameters"), loops),
            Some(_) => Err(err(format!("{at}.inputParameters"), "must be an object")),
        }
    }

    fn simple(&mut self, t: &Map<String, Value>, at: &str, loops: &[String]) -> Result<StepDef, DefinitionError> {
        let agent =
            opt_str(t, "name", at)?.ok_or_else(|| err(format!("{at}.name"), "a SIMPLE task names its task type"))?;
        check_name(&format!("{at}.name"), agent)?;
        // Conductor hands a worker exactly the input parameters, `{}` when there are none; without
        // an input template a shiftboss agent would get the task's input instead.
        let mut step = StepDef::agent("", agent).with_input(self.input_parameters(t, at, loops)?);
        self.apply_task_def(&mut step, t, at, Some(agent), loops)?;
        Ok(step)
    }

    fn http(&mut self, t: &Map<String, Value>, at: &str, loops: &[String]) -> Result<StepDef, DefinitionError> {
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p,
            _ => return Err(err(format!("{at}.inputParameters"), "an HTTP task needs http_request")),
        };
        let (req, rpath) = match params.get("http_request") {
            Some(Value::Object(r)) => (r, format!("{at}.inputParameters.http_request")),
            Some(_) => return Err(err(format!("{at}.inputParameters.http_request"), "must be an object")),
            None if params.contains_key("uri") => (params, format!("{at}.inputParameters")),
            None => return Err(err(format!("{at}.inputParameters.http_request"), "an HTTP task needs http_request")),
        };
        let static_str = |key: &str| -> Result<Option<&str>, DefinitionError> {
            let v = opt_str(req, key, &rpath)?;
            if v.is_some_and(|s| s.contains("${")) {
                return Err(err(
                    format!("{rpath}.{key}"),
                    "the HTTP agent's config is static in shiftboss: no `${...}` here (the body may use them)",
                ));
            }
            Ok(v)
        };
        let uri = static_str("uri")?.ok_or_else(|| err(format!("{rpath}.uri"), "an HTTP task needs a uri"))?;
        let method = static_str("method")?.unwrap_or("GET").to_ascii_uppercase();
        let mut headers = Map::new();
        match req.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(h)) => {
                for (k, v) in h {
                    match v {
                        Value::String(s) if s.contains("${") => {
                            return Err(err(
                                format!("{rpath}.headers.{k}"),
                                "the HTTP agent's config is static in shiftboss: no `${...}` in headers",
                            ));
                        }
                        Value::String(_) => {
                            headers.insert(k.clone(), v.clone());
                        }
                        _ => return Err(err(format!("{rpath}.headers.{k}"), "a header value must be a string")),
                    }
                }
            }
            Some(_) => return Err(err(format!("{rpath}.headers"), "must be an object")),
        }
        if let Some(accept) = static_str("accept")?
            && !headers.keys().any(|k| k.eq_ignore_ascii_case("accept"))
        {
            headers.insert("Accept".into(), Value::String(accept.to_owned()));
        }
        if let Some(ct) = static_str("contentType")?
            && !ct.eq_ignore_ascii_case("application/json")
        {
            self.note(format!("{rpath}.contentType"), format!("dropped: the HTTP agent always sends JSON, not {ct}"));
        }
        for (key, v) in req {
            match key.as_str() {
                "uri" | "method" | "headers" | "accept" | "contentType" | "body" => {}
                "connectionTimeOut" | "readTimeOut" => {
                    self.note(format!("{rpath}.{key}"), "dropped: the step's timeout bounds the whole call")
                }
                "asyncComplete" if v == &Value::Bool(true) => {
                    return Err(err(
                        format!("{rpath}.asyncComplete"),
                        "a call completed from outside is not supported",
                    ));
                }
                _ if is_empty(v) => {}
                _ => self.note(format!("{rpath}.{key}"), "dropped: the HTTP agent has no such setting"),
            }
        }
        if !std::ptr::eq(req, params) {
            for key in params.keys().filter(|k| k.as_str() != "http_request") {
                self.note(
                    format!("{at}.inputParameters.{key}"),
                    "dropped: the HTTP agent's input is the request body (http_request.body)",
                );
            }
        }
        if uri.starts_with("https://") {
            self.note(
                format!("{rpath}.uri"),
                "the HTTP agent of this build speaks only http://: the engine refuses this url until it does",
            );
        }
        let mut config = json!({"url": uri, "method": method});
        if !headers.is_empty() {
            config["headers"] = Value::Object(headers);
        }
        // The agent sends the step's input as the body; a request without one sends `{}`.
        let body = match req.get("body") {
            None | Some(Value::Null) => {
                self.note(format!("{rpath}.body"), "none given: the HTTP agent sends `{}` as the JSON body");
                json!({})
            }
            Some(b) => self.template(b, &format!("{rpath}.body"), loops)?,
        };
        let mut step = StepDef::agent("", "http").with_config(config).with_input(body);
        self.apply_task_def(&mut step, t, at, None, loops)?;
        Ok(step)
    }

    fn switch(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let legacy = opt_str(t, "type", at)? == Some("DECISION");
        let (js, field) = if legacy {
            if t.get("caseValueParam").is_some_and(|v| !is_empty(v)) {
                (false, "caseValueParam")
            } else if t.get("caseExpression").is_some_and(|v| !is_empty(v)) {
                (true, "caseExpression")
            } else {
                return Err(err(format!("{at}.caseValueParam"), "a DECISION needs caseValueParam or caseExpression"));
            }
        } else {
            match opt_str(t, "evaluatorType", at)? {
                Some("value-param") => (false, "expression"),
                Some("javascript" | "graaljs") => (true, "expression"),
                Some(other) => {
                    return Err(err(
                        format!("{at}.evaluatorType"),
                        format!("{other:?} is not supported: use value-param, or a simple javascript expression"),
                    ));
                }
                None => return Err(err(format!("{at}.evaluatorType"), "a SWITCH needs an evaluatorType")),
            }
        };
        let fpath = format!("{at}.{field}");
        let text = opt_str(t, field, at)?.ok_or_else(|| err(&fpath, "missing"))?;
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let expression = if js {
            let mut resolve = |root: &str, segs: &[Seg]| self.param_path(&params, root, segs, at, loops);
            let out = translate_js(text, &mut resolve).map_err(|e| err(&fpath, e))?;
            if out.js {
                self.note(&fpath, js_note(&out.text));
            }
            out.text
        } else {
            if !params.contains_key(text) {
                return Err(err(&fpath, format!("{text:?} names no input parameter of the task")));
            }
            self.param_path(&params, text, &[], at, loops).map_err(|e| err(&fpath, e))?
        };
        let mut step = StepDef::switch("", wrap_expr(&expression));
        match t.get("decisionCases") {
            None | Some(Value::Null) => {}
            Some(Value::Object(cases)) => {
                for (k, list) in cases {
                    let cpath = format!("{at}.decisionCases.{k}");
                    let steps = self.list(list_of(list, &cpath)?, &cpath, &format!("{ours}.cases.{k}"), loops)?;
                    step.cases.insert(k.clone(), steps);
                }
            }
            Some(_) => return Err(err(format!("{at}.decisionCases"), "must be an object of task lists")),
        }
        if step.cases.is_empty() {
            return Err(err(format!("{at}.decisionCases"), "a shiftboss switch needs at least one case"));
        }
        if let Some(list) = t.get("defaultCase").filter(|v| !v.is_null()) {
            let dpath = format!("{at}.defaultCase");
            step.default = self.list(list_of(list, &dpath)?, &dpath, &format!("{ours}.default"), loops)?;
        }
        Ok(step)
    }

    /// The expression text for `$.<root><segs>` where `root` is an input parameter of a control
    /// task (a switch's value, a loop's input): the parameter's one reference or literal.
    fn param_path(
        &self,
        params: &Map<String, Value>,
        root: &str,
        segs: &[Seg],
        at: &str,
        loops: &[String],
    ) -> Result<String, String> {
        let Some(v) = params.get(root) else {
            return Err(format!("`$.{root}` names no input parameter of the task"));
        };
        let ppath = format!("{at}.inputParameters.{root}");
        match v {
            Value::String(s) => {
                let trimmed = s.trim();
                if let Some(inner) = trimmed.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
                    && !inner.contains("${")
                    && !inner.contains('}')
                {
                    let (r, mut path) = parse_ref(inner).map_err(|e| format!("{ppath}: {e}"))?;
                    path.extend_from_slice(segs);
                    return self.resolve(&r, &path, loops, &ppath).map_err(|e| format!("{}: {}", e.path, e.problem));
                }
                if s.contains("${") {
                    return Err(format!("{ppath}: only a single `${{...}}` or a literal can be used here"));
                }
                if !segs.is_empty() {
                    return Err(format!("{ppath} is a literal; it has no fields"));
                }
                Ok(string_literal(s))
            }
            Value::Number(_) | Value::Bool(_) | Value::Null if segs.is_empty() => Ok(v.to_string()),
            _ => Err(format!("{ppath}: only a single `${{...}}` or a literal can be used here")),
        }
    }

    fn fork(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let branches = match t.get("forkTasks") {
            Some(Value::Array(b)) if !b.is_empty() => b,
            _ => return Err(err(format!("{at}.forkTasks"), "a FORK_JOIN needs at least one branch")),
        };
        let mut out = Vec::new();
        for (b, list) in branches.iter().enumerate() {
            let bpath = format!("{at}.forkTasks[{b}]");
            let list = list_of(list, &bpath)?;
            if list.is_empty() {
                return Err(err(bpath, "a branch needs at least one task"));
            }
            out.push(self.list(list, &bpath, &format!("{ours}.branches[{b}]"), loops)?);
        }
        if t.get("inputParameters").is_some_and(|v| !is_empty(v)) {
            self.note(format!("{at}.inputParameters"), "ignored: a fork has no input in shiftboss");
        }
        Ok(StepDef::fork("", out))
    }

    fn do_while(
        &mut self,
        t: &Map<String, Value>,
        name: &str,
        at: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        if params.contains_key("items") {
            return Err(err(format!("{at}.inputParameters.items"), "a DO_WHILE over a list of items is not supported"));
        }
        let body = match t.get("loopOver") {
            Some(Value::Array(b)) if !b.is_empty() => b,
            _ => return Err(err(format!("{at}.loopOver"), "a DO_WHILE needs at least one task in loopOver")),
        };
        let inner: Vec<String> = loops.iter().cloned().chain([name.to_owned()]).collect();
        let body = self.list(body, &format!("{at}.loopOver"), &format!("{ours}.body"), &inner)?;
        let cpath = format!("{at}.loopCondition");
        let text = opt_str(t, "loopCondition", at)?.ok_or_else(|| err(&cpath, "a DO_WHILE needs a loopCondition"))?;
        let mut resolve = |root: &str, segs: &[Seg]| -> Result<String, String> {
            if root == name {
                return match segs {
                    [Seg::Name(f)] if f == "iteration" => Ok(format!("{name}.output.iteration")),
                    _ => Err(format!("only `$.{name}['iteration']` of the loop itself can be read")),
                };
            }
            if self.refs.get(root).is_some_and(|r| r.loops.contains(&name.to_owned())) {
                let mut path = vec![Seg::Name("output".into())];
                path.extend_from_slice(segs);
                return self.resolve(root, &path, &inner, &cpath).map_err(|e| e.problem);
            }
            if params.contains_key(root) {
                return self.param_path(&params, root, segs, at, loops);
            }
            Err(format!("`$.{root}` is neither the loop, a task of its loopOver, nor one of its input parameters"))
        };
        let out = translate_js(text, &mut resolve).map_err(|e| err(&cpath, e))?;
        let mut step = StepDef::do_while("", wrap_expr(&out.text), super::DEFAULT_MAX_ITERATIONS, body);
        match out.bound {
            Some(JsBound { root, inclusive, n }) if root == name => {
                let passes = if inclusive { n.saturating_add(1) } else { n }.max(1);
                if passes > i64::from(super::validate::MAX_ITERATIONS_CAP) {
                    return Err(err(
                        cpath,
                        format!("more than {} passes: shiftboss caps loops there", super::validate::MAX_ITERATIONS_CAP),
                    ));
                }
                step.max_iterations = Some(passes as u32);
            }
            _ => self.note(
                &cpath,
                format!(
                    "the loop stops with an error after {} passes in shiftboss (Conductor has no cap): set \
                     max_iterations if it needs more",
                    super::DEFAULT_MAX_ITERATIONS
                ),
            ),
        }
        if out.js {
            self.note(&cpath, js_note(&out.text));
        }
        Ok(step)
    }

    fn sub_workflow(&mut self, t: &Map<String, Value>, at: &str, loops: &[String]) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.subWorkflowParam");
        let p = match t.get("subWorkflowParam") {
            Some(Value::Object(p)) => p,
            _ => return Err(err(&ppath, "a SUB_WORKFLOW needs subWorkflowParam")),
        };
        if p.get("workflowDefinition").is_some_and(|v| !is_empty(v)) {
            return Err(err(
                format!("{ppath}.workflowDefinition"),
                "an inline sub-workflow definition is not supported: import and register it, then name it",
            ));
        }
        let name = opt_str(p, "name", &ppath)?.ok_or_else(|| err(format!("{ppath}.name"), "missing"))?;
        check_name(&format!("{ppath}.name"), name)?;
        let mut step = StepDef::sub_workflow("", name);
        if let Some(v) = opt_u64(p, "version", &ppath)?
            && v > 0
        {
            step.workflow_version = Some(u32::try_from(v).map_err(|_| err(format!("{ppath}.version"), "too large"))?);
        }
        for (k, v) in p {
            if !matches!(k.as_str(), "name" | "version" | "workflowDefinition") && !is_empty(v) {
                self.note(format!("{ppath}.{k}"), "ignored: shiftboss has no equivalent");
            }
        }
        step.input = Some(self.input_parameters(t, at, loops)?);
        Ok(step)
    }

    fn wait(
        &mut self,
        t: &Map<String, Value>,
        name: &str,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p.clone(),
            None | Some(Value::Null) => Map::new(),
            Some(_) => return Err(err(format!("{at}.inputParameters"), "must be an object")),
        };
        let ppath = format!("{at}.inputParameters");
        let duration = params.get("duration").filter(|v| !is_empty(v));
        let until = params.get("until").filter(|v| !is_empty(v));
        let mut step = StepDef { kind: StepKind::Wait, ..StepDef::default() };
        match (duration, until) {
            (Some(_), Some(_)) => return Err(err(ppath, "a WAIT has a duration or an until, not both")),
            (Some(d), None) => {
                let dpath = format!("{ppath}.duration");
                let text = d.as_str().ok_or_else(|| err(&dpath, "must be text such as \"10s\" or \"2 minutes\""))?;
                if text.contains("${") {
                    return Err(err(dpath, "a duration computed at run time is not supported: use `until`"));
                }
                let d = parse_duration(text).map_err(|e| err(&dpath, e))?;
                if d.is_zero() || d > MAX_TASK_TIMEOUT {
                    return Err(err(dpath, "must be more than 0 and at most 366 days"));
                }
                step.duration = Some(d);
            }
            (None, Some(u)) => {
                let upath = format!("{ppath}.until");
                let text = u.as_str().ok_or_else(|| err(&upath, "must be a date and time"))?;
                if text.contains("${") {
                    let v = self.template(&Value::String(text.to_owned()), &upath, loops)?;
                    step.until = v.as_str().map(str::to_owned);
                    self.note(upath, "computed at run time: it must give RFC 3339 text or epoch milliseconds");
                } else {
                    step.until = Some(parse_until(text).map_err(|e| err(&upath, e))?);
                }
            }
            (None, None) => {
                step.signal = Some(name.to_owned());
                self.note(at, format!("waits for the signal {name:?} (send it with `shiftboss tasks signal`)"));
            }
        }
        for k in params.keys().filter(|k| !matches!(k.as_str(), "duration" | "until")) {
            self.note(format!("{ppath}.{k}"), "dropped: a wait has no input in shiftboss");
        }
        Ok(step)
    }

    fn terminate(&mut self, t: &Map<String, Value>, at: &str, loops: &[String]) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.inputParameters");
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p,
            _ => return Err(err(format!("{ppath}.terminationStatus"), "a TERMINATE needs a terminationStatus")),
        };
        let spath = format!("{ppath}.terminationStatus");
        let status = match opt_str(params, "terminationStatus", &ppath)? {
            Some("COMPLETED") => EndStatus::Completed,
            Some("FAILED") => EndStatus::Failed,
            Some(other) => {
                return Err(err(spath, format!("{other:?} is not supported: use COMPLETED or FAILED")));
            }
            None => return Err(err(spath, "a TERMINATE needs a terminationStatus")),
        };
        let output = match params.get("workflowOutput") {
            None | Some(Value::Null) => json!({}),
            Some(o) => self.template(o, &format!("{ppath}.workflowOutput"), loops)?,
        };
        for (k, v) in params {
            match k.as_str() {
                "terminationStatus" | "workflowOutput" => {}
                "terminationReason" if !is_empty(v) => self.note(
                    format!("{ppath}.terminationReason"),
                    "dropped: shiftboss records no termination reason (a FAILED terminate fails the task with \
                     \"terminated as failed: <output>\")",
                ),
                _ if is_empty(v) => {}
                _ => self.note(format!("{ppath}.{k}"), "dropped: a terminate step has no input"),
            }
        }
        Ok(StepDef::terminate("", status, output))
    }

    /// The TaskDef of an agent task: its inline `taskDefinition`, else the one of its name.
    fn find_task_def(&mut self, t: &Map<String, Value>, at: &str) -> Result<Option<PathedDef>, DefinitionError> {
        match t.get("taskDefinition") {
            None | Some(Value::Null) => {}
            Some(Value::Object(d)) => return Ok(Some((format!("{at}.taskDefinition"), d.clone()))),
            Some(_) => return Err(err(format!("{at}.taskDefinition"), "must be an object")),
        }
        let Some(name) = opt_str(t, "name", at)? else {
            return Ok(None);
        };
        Ok(self.def_index.get(name).map(|&i| {
            self.defs[i].used = true;
            (self.defs[i].path.clone(), self.defs[i].def.clone())
        }))
    }

    /// Retries, timeouts, limits and default input from the task's TaskDef.
    fn apply_task_def(
        &mut self,
        step: &mut StepDef,
        t: &Map<String, Value>,
        at: &str,
        limits_agent: Option<&str>,
        loops: &[String],
    ) -> Result<(), DefinitionError> {
        let retry_override = opt_u64(t, "retryCount", at)?;
        let Some((dpath, d)) = self.find_task_def(t, at)? else {
            match retry_override {
                Some(n) => {
                    let r = retry_policy(n, "FIXED", 60, 1).map_err(|(f, p)| err(format!("{at}.{f}"), p))?;
                    step.retry = Some(r.0);
                    self.note(at, "no TaskDef: retries every 60 s (Conductor's default delay); 30 s step timeout")
                }
                None => {
                    let name = opt_str(t, "name", at)?.unwrap_or_default();
                    if self.missing_defs.insert(name.to_owned()) {
                        self.note(
                            at,
                            format!(
                                "no TaskDef named {name:?}: shiftboss's defaults apply (a 30 s timeout; the agent's or \
                                 the deployment's retry policy)"
                            ),
                        );
                    }
                }
            }
            return Ok(());
        };
        for (k, v) in &d {
            let k = k.as_str();
            if DEF_READ.contains(&k) || DEF_IGNORED.contains(&k) || is_empty(v) {
                continue;
            }
            if DEF_NOTED.contains(&k) {
                self.note(format!("{dpath}.{k}"), "ignored: shiftboss has no equivalent");
            } else {
                self.note(format!("{dpath}.{k}"), "ignored: not a TaskDef field the importer knows");
            }
        }
        let count = match retry_override {
            Some(n) => n,
            None => opt_u64(&d, "retryCount", &dpath)?.unwrap_or(3),
        };
        let logic = opt_str(&d, "retryLogic", &dpath)?.unwrap_or("FIXED");
        let delay = opt_u64(&d, "retryDelaySeconds", &dpath)?.unwrap_or(60);
        let scale = opt_u64(&d, "backoffScaleFactor", &dpath)?.unwrap_or(1);
        let (policy, note) = retry_policy(count, logic, delay, scale).map_err(|(f, p)| {
            let place = if f == "retryCount" && retry_override.is_some() { at } else { dpath.as_str() };
            err(format!("{place}.{f}"), p)
        })?;
        step.retry = Some(policy);
        if let Some(n) = note {
            self.note(format!("{dpath}.retryLogic"), n);
        }

        let timeout = opt_u64(&d, "timeoutSeconds", &dpath)?.unwrap_or(0);
        if timeout > 0 {
            let t = Duration::from_secs(timeout);
            if t > MAX_STEP_TIMEOUT {
                return Err(err(format!("{dpath}.timeoutSeconds"), "at most 7 days (604800 s) in shiftboss"));
            }
            step.timeout = Some(t);
        } else {
            self.note(
                format!("{dpath}.timeoutSeconds"),
                "0 (no timeout) in Conductor; every shiftboss step has one: the default 30 s applies",
            );
        }
        if let Some(r) = opt_u64(&d, "responseTimeoutSeconds", &dpath)?.filter(|r| *r > 0) {
            let r = Duration::from_secs(r);
            if r <= step.timeout() {
                step.response_timeout = Some(r);
            } else {
                self.note(
                    format!("{dpath}.responseTimeoutSeconds"),
                    format!(
                        "dropped: longer than the step's timeout ({}s), so it could never fire",
                        step.timeout().as_secs()
                    ),
                );
            }
        }
        step.on_timeout = match opt_str(&d, "timeoutPolicy", &dpath)?.unwrap_or("TIME_OUT_WF") {
            "RETRY" => OnTimeout::Retry,
            "TIME_OUT_WF" => OnTimeout::FailTask,
            "ALERT_ONLY" => OnTimeout::AlertOnly,
            other => {
                return Err(err(
                    format!("{dpath}.timeoutPolicy"),
                    format!("{other:?} is none of RETRY, TIME_OUT_WF, ALERT_ONLY"),
                ));
            }
        };

        let concurrent = opt_u64(&d, "concurrentExecLimit", &dpath)?.filter(|n| *n > 0);
        let per = opt_u64(&d, "rateLimitPerFrequency", &dpath)?.filter(|n| *n > 0);
        let every = opt_u64(&d, "rateLimitFrequencyInSeconds", &dpath)?.unwrap_or(1).max(1);
        if concurrent.is_some() || per.is_some() {
            match limits_agent {
                Some(agent) => {
                    let limit = AgentLimits {
                        agent: agent.to_owned(),
                        max_concurrent: concurrent.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                        per_second: per.map(|n| n as f64 / every as f64),
                    };
                    if !self.limits.iter().any(|l| l.agent == agent) {
                        self.limits.push(limit);
                    }
                }
                None => self.note(
                    &dpath,
                    "concurrentExecLimit and rate limits dropped: shiftboss sets limits per agent, and the http \
                     agent is shared by every HTTP step",
                ),
            }
        }

        if let Some(tmpl) = d.get("inputTemplate").filter(|v| !is_empty(v)) {
            let tpath = format!("{dpath}.inputTemplate");
            let Value::Object(defaults) = tmpl else {
                return Err(err(tpath, "must be an object"));
            };
            match (limits_agent, step.input.as_mut()) {
                (Some(_), Some(Value::Object(input))) => {
                    for (k, v) in defaults {
                        if !input.contains_key(k) {
                            let v = self.template(v, &format!("{tpath}.{k}"), loops)?;
                            input.insert(k.clone(), v);
                        }
                    }
                }
                _ => self.note(tpath, "dropped: an HTTP step's input is its request body"),
            }
        }
        Ok(())
    }

    /// A Conductor input template with its `${...}` rewritten to ours.
    fn template(&mut self, v: &Value, path: &str, loops: &[String]) -> Result<Value, DefinitionError> {
        Ok(match v {
            Value::String(s) => Value::String(self.text(s, path, loops)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.template(item, &format!("{path}[{i}]"), loops))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(fields) => {
                let mut out = Map::new();
                for (k, item) in fields {
                    out.insert(k.clone(), self.template(item, &format!("{path}.{k}"), loops)?);
                }
                Value::Object(out)
            }
            scalar => scalar.clone(),
        })
    }

    /// One string: text is kept as it is (both languages read `$${` as a literal `${`), each
    /// `${ref}` is rewritten.
    fn text(&mut self, s: &str, path: &str, loops: &[String]) -> Result<String, DefinitionError> {
        let mut out = String::with_capacity(s.len());
        let mut done = 0;
        while let Some(offset) = s[done..].find('$') {
            let dollar = done + offset;
            let rest = &s[dollar..];
            if rest.starts_with("$${") {
                out.push_str(&s[done..dollar + 3]);
                done = dollar + 3;
            } else if rest.starts_with("${") {
                out.push_str(&s[done..dollar]);
                let Some(len) = rest.find('}') else {
                    return Err(err(path, "`${` has no closing `}`"));
                };
                let inner = &rest[2..len];
                let (root, segs) = parse_ref(inner).map_err(|e| err(path, e))?;
                out.push_str("${");
                out.push_str(&self.resolve(&root, &segs, loops, path)?);
                out.push('}');
                done = dollar + len + 1;
            } else {
                out.push_str(&s[done..=dollar]);
                done = dollar + 1;
            }
        }
        out.push_str(&s[done..]);
        Ok(out)
    }

    /// A Conductor reference `root.segs`, read at a place inside `loops`, as our expression text.
    fn resolve(&self, root: &str, segs: &[Seg], loops: &[String], path: &str) -> Result<String, DefinitionError> {
        let shown = || render_conductor(root, segs);
        if root == "workflow" {
            return match segs {
                [Seg::Name(f), rest @ ..] if f == "input" => {
                    Ok(render("task", &[&[Seg::Name("input".into())], rest].concat()))
                }
                [Seg::Name(f)] if f == "workflowId" => Ok("task.id".into()),
                [Seg::Name(f), ..] if f == "correlationId" => Err(err(
                    path,
                    format!("`${{{}}}` has no shiftboss equivalent (the caller's key is `${{task.key}}`)", shown()),
                )),
                _ => Err(err(
                    path,
                    format!(
                        "`${{{}}}` has no shiftboss equivalent: only workflow.input and workflow.workflowId map",
                        shown()
                    ),
                )),
            };
        }
        let Some(info) = self.refs.get(root) else {
            return Err(err(
                path,
                format!("`${{{}}}`: {root:?} is neither `workflow` nor a task of this workflow", shown()),
            ));
        };
        if !is_root_name(root) {
            return Err(err(
                path,
                format!(
                    "`${{{}}}`: shiftboss expressions read only names of letters, digits and `_`: rename the task \
                     {root:?}",
                    shown()
                ),
            ));
        }
        if !loops.starts_with(&info.loops) {
            let lp = info.loops.last().map(String::as_str).unwrap_or_default();
            return Err(err(
                path,
                format!(
                    "`${{{}}}` reads a task of the loop {lp:?} from outside it: shiftboss gives null there (read \
                     `${{{lp}.output.output}}`, the last pass's output, instead)",
                    shown()
                ),
            ));
        }
        let no = |what: &str| Err(err(path, format!("`${{{}}}`: {what}", shown())));
        let (first, rest) = match segs.split_first() {
            Some((Seg::Name(f), rest)) if f == "input" || f == "output" => (f.as_str(), rest),
            _ => return no("only the input and output of a task can be read"),
        };
        match (info.ty, first) {
            (Type::Simple | Type::SubWorkflow, _) | (Type::Wait, "output") => Ok(render(root, segs)),
            (Type::Http, "output") => match rest {
                [Seg::Name(r), Seg::Name(b), more @ ..] if r == "response" && b == "body" => {
                    Ok(render(root, &[&[Seg::Name("output".into())], more].concat()))
                }
                _ => no("the HTTP agent's output is the response body: only output.response.body… can be read"),
            },
            (Type::Switch, "output") => match rest {
                [Seg::Name(e), Seg::Index(0)] if e == "evaluationResult" => Ok(format!("{root}.output.value")),
                _ => no("only output.evaluationResult[0] of a switch can be read"),
            },
            (Type::DoWhile, "output") => match rest {
                [Seg::Name(i)] if i == "iteration" => Ok(format!("{root}.output.iteration")),
                _ => no("only output.iteration of a loop can be read"),
            },
            (Type::Join, "output") => match rest {
                [Seg::Name(inner), more @ ..] => {
                    self.resolve(inner, &[&[Seg::Name("output".into())], more].concat(), loops, path)
                }
                _ => no("read the output of a joined task instead: output.<taskReferenceName>…"),
            },
            (Type::Http, _) => no("the input of an HTTP step is its request body; read the body's source instead"),
            (ty, _) => no(&format!("a {} task's {first} has no shiftboss equivalent", ty.name())),
        }
    }

    /// A validation error of the mapped definition, at the Conductor place it came from.
    fn relocate(&self, e: DefinitionError) -> DefinitionError {
        let shiftboss = e.path.clone();
        let (base, field) = if let Some(rest) = e.path.strip_prefix("step \"") {
            match rest.split_once("\".") {
                Some((name, field)) => (self.by_name.get(name).cloned(), field.to_owned()),
                None => (None, String::new()),
            }
        } else {
            let found = self
                .places
                .iter()
                .filter(|(ours, _)| {
                    e.path == *ours || e.path.strip_prefix(ours.as_str()).is_some_and(|r| r.starts_with('.'))
                })
                .max_by_key(|(ours, _)| ours.len());
            match found {
                Some((ours, conductor)) => {
                    (Some(conductor.clone()), e.path[ours.len()..].trim_start_matches('.').to_owned())
                }
                None => (None, e.path.clone()),
            }
        };
        let field = match field.as_str() {
            "name" => "taskReferenceName",
            "agent" => "name",
            "input" => "inputParameters",
            "config" => "inputParameters.http_request",
            "cases" => "decisionCases",
            "default" => "defaultCase",
            "branches" => "forkTasks",
            "condition" => "loopCondition",
            "body" => "loopOver",
            "max_iterations" => "loopCondition",
            "workflow" => "subWorkflowParam.name",
            "workflow_version" => "subWorkflowParam.version",
            "duration" | "until" | "signal" => "inputParameters",
            "timeout" if base.is_none() => "timeoutSeconds",
            // The TaskDef the value came from is not tracked here: our field name stays, and the
            // problem says where it is in the shiftboss definition.
            "output" if base.is_none() => "outputParameters",
            "output" => "inputParameters.workflowOutput",
            "steps" => "tasks",
            other => other,
        };
        let path = match base {
            Some(b) if field.is_empty() => b,
            Some(b) => format!("{b}.{field}"),
            None => field.to_owned(),
        };
        err(path, format!("{} (in the shiftboss definition: {shiftboss})", e.problem))
    }
}

/// A WAIT duration in Conductor's units: `10s`, `2 minutes`, `1d 2h`, `1 days 30 mins`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration such as \"10s\", \"2 minutes\" or \"1d 2h\"");
    let mut total: u64 = 0;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = rest[digits..].trim_start();
        let letters = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit = match &rest[..letters] {
            "d" | "day" | "days" => 86_400,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "s" | "sec" | "secs" | "second" | "seconds" => 1,
            _ => return Err(bad()),
        };
        total = n.checked_mul(unit).and_then(|s| total.checked_add(s)).ok_or_else(bad)?;
        rest = rest[letters..].trim_start_matches([' ', ',']);
    }
    Ok(Duration::from_secs(total))
}

/// A Conductor `until` (`yyyy-MM-dd HH:mm z`, `yyyy-MM-dd HH:mm`, `yyyy-MM-dd`, or RFC 3339) as
/// RFC 3339 text. Times without a zone are read as UTC; only UTC, GMT and Z zones are known.
fn parse_until(text: &str) -> Result<String, String> {
    let t = text.trim();
    if humantime::parse_rfc3339_weak(t).is_ok() && (t.ends_with('Z') || t.ends_with('z')) {
        return Ok(t.to_owned());
    }
    let bad = |why: &str| format!("{text:?}: {why}");
    let (rest, zone) = match t.rsplit_once(' ') {
        Some((r, z)) if z.chars().all(|c| c.is_ascii_alphabetic()) => (r, Some(z)),
        _ => (t, None),
    };
    if let Some(z) = zone
        && !matches!(z, "UTC" | "GMT" | "Z")
    {
        return Err(bad("only UTC times are understood: write it in UTC or as RFC 3339 with Z"));
    }
    let (date, time) = match rest.split_once([' ', 'T']) {
        Some((d, tm)) => (d, tm),
        None => (rest, "00:00"),
    };
    let time = match time.len() {
        5 => format!("{time}:00"),
        8 => time.to_owned(),
        _ => return Err(bad("not a time as yyyy-MM-dd HH:mm")),
    };
    let out = format!("{date}T{time}Z");
    humantime::parse_rfc3339(&out).map_err(|_| bad("not a date as yyyy-MM-dd HH:mm z"))?;
    Ok(out)
}

/// A TaskDef's retry settings as a policy, and a note when it is approximated. Errors name the
/// TaskDef field.
fn retry_policy(
    count: u64,
    logic: &str,
    delay: u64,
    scale: u64,
) -> Result<(RetryPolicy, Option<String>), (&'static str, String)> {
    if count > MAX_RETRIES {
        return Err(("retryCount", format!("at most {MAX_RETRIES} retries")));
    }
    let secs = Duration::from_secs;
    if count == 0 {
        return Ok((RetryPolicy::Intervals { intervals: vec![secs(delay)], max_failures: Some(1) }, None));
    }
    Ok(match logic {
        "FIXED" => (RetryPolicy::Intervals { intervals: vec![secs(delay); count as usize], max_failures: None }, None),
        "LINEAR_BACKOFF" => {
            if scale == 0 {
                return Err(("backoffScaleFactor", "must be 1 or more".into()));
            }
            let intervals = (1..=count).map(|n| secs(delay.saturating_mul(scale).saturating_mul(n))).collect();
            (RetryPolicy::Intervals { intervals, max_failures: None }, None)
        }
        "EXPONENTIAL_BACKOFF" => {
            let longest = delay.saturating_mul(1u64.checked_shl((count - 1).min(63) as u32).unwrap_or(u64::MAX));
            let most = MAX_STEP_TIMEOUT.as_secs();
            let note = (longest > most)
                .then(|| format!("delays are capped at {} days (Conductor's would reach {longest} s)", most / 86_400));
            let cap = secs(longest.min(most).max(delay));
            let policy = RetryPolicy::Exponential {
                base: secs(delay),
                factor: 2.0,
                cap,
                jitter: 0.0,
                max_failures: count as u32 + 1,
            };
            (policy, note)
        }
        other => {
            return Err(("retryLogic", format!("{other:?} is none of FIXED, LINEAR_BACKOFF, EXPONENTIAL_BACKOFF")));
        }
    })
}

/// A step list of the document: an array of tasks.
fn list_of<'v>(v: &'v Value, path: &str) -> Result<&'v [Value], DefinitionError> {
    match v {
        Value::Array(items) => Ok(items),
        _ => Err(err(path, "must be an array of tasks")),
    }
}

/// Null, false, 0, "", [] and {}: what Conductor's exports write for fields not in use.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn opt_str<'m>(m: &'m Map<String, Value>, key: &str, at: &str) -> Result<Option<&'m str>, DefinitionError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(err(field_path(at, key), "must be a string")),
    }
}

fn opt_u64(m: &Map<String, Value>, key: &str, at: &str) -> Result<Option<u64>, DefinitionError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_u64().map(Some).ok_or_else(|| err(field_path(at, key), "must be a whole number"))
        }
        Some(_) => Err(err(field_path(at, key), "must be a number")),
    }
}

fn opt_bool(m: &Map<String, Value>, key: &str, at: &str) -> Result<Option<bool>, DefinitionError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(err(field_path(at, key), "must be true or false")),
    }
}

fn field_path(at: &str, key: &str) -> String {
    if at.is_empty() { key.to_owned() } else { format!("{at}.{key}") }
}

/// A root our expressions can read: an identifier that is no keyword.
fn is_root_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(name, "null" | "true" | "false")
}

/// Parses the inside of a Conductor `${...}`: a root, then `.name`, `['name']`, `["name"]`, `[n]`.
fn parse_ref(text: &str) -> Result<(String, Vec<Seg>), String> {
    let t = text.trim();
    let bad = |why: &str| format!("`${{{text}}}` is not a Conductor reference: {why}");
    let end = t.find(['.', '[']).unwrap_or(t.len());
    let root = &t[..end];
    if root.is_empty() || !root.chars().all(name_char) {
        return Err(bad("it should start with `workflow` or a taskReferenceName"));
    }
    let mut segs = Vec::new();
    let mut rest = &t[end..];
    while let Some(c) = rest.chars().next() {
        if c == '.' {
            let body = &rest[1..];
            let end = body.find(['.', '[']).unwrap_or(body.len());
            let name = &body[..end];
            if name.is_empty() || !name.chars().all(name_char) {
                return Err(bad("expected a field name after `.`"));
            }
            segs.push(Seg::Name(name.to_owned()));
            rest = &body[end..];
        } else {
            let close = rest.find(']').ok_or_else(|| bad("`[` without `]`"))?;
            let inside = rest[1..close].trim();
            let quoted = inside
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inside.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            match quoted {
                Some(name) if !name.contains(['\\', '\'', '"']) => segs.push(Seg::Name(name.to_owned())),
                Some(_) => return Err(bad("quotes and backslashes in a field name are not supported")),
                None => {
                    let n = inside.parse().map_err(|_| bad("only [n], ['name'] and [\"name\"] are supported"))?;
                    segs.push(Seg::Index(n));
                }
            }
            rest = &rest[close + 1..];
        }
    }
    Ok((root.to_owned(), segs))
}

fn name_char(c: char) -> bool {
    !c.is_whitespace() && !"${}()[]'\"*?@,!=<>&|+/\\".contains(c)
}

/// A path in our expression syntax.
fn render(root: &str, segs: &[Seg]) -> String {
    let mut out = root.to_owned();
    for s in segs {
        match s {
            Seg::Name(n) if is_root_name(n) || matches!(n.as_str(), "null" | "true" | "false") => {
                out.push('.');
                out.push_str(n);
            }
            Seg::Name(n) => {
                out.push('[');
                out.push_str(&string_literal(n));
                out.push(']');
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A path as Conductor writes it, for messages.
fn render_conductor(root: &str, segs: &[Seg]) -> String {
    let mut out = root.to_owned();
    for s in segs {
        match s {
            Seg::Name(n) => {
                out.push('.');
                out.push_str(n);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A string literal of our expression language.
fn string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `${expr}`, or the bare expression when it holds a `${` of its own (in a string literal).
fn wrap_expr(text: &str) -> String {
    if text.contains("${") || text.contains('}') { text.to_owned() } else { format!("${{{text}}}") }
}

fn js_note(translated: &str) -> String {
    format!(
        "JavaScript read as `{translated}`: `==` compares without type coercion, and `&&`, `||`, `!` and `? :` take \
         booleans only"
    )
}

/// What [`translate_js`] gives.
#[derive(Debug)]
struct JsOut {
    /// Our expression.
    text: String,
    /// True when the source was JavaScript beyond a plain path comparison (a note is due).
    js: bool,
    /// For `$.<root>['iteration'] < N` (or `<=`): the bound.
    bound: Option<JsBound>,
}

#[derive(Debug)]
struct JsBound {
    root: String,
    inclusive: bool,
    n: i64,
}

#[derive(Debug, Clone, PartialEq)]
enum Js {
    /// `$.root...`
    Path(String, Vec<Seg>),
    Num(String),
    Str(String),
    Word(String),
    Punct(&'static str),
}

const JS_PUNCT: &[&str] = &[
    "===", "!==", "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "{", "}", "?", ":", ";", "+", "-", "*",
    "/", "%",
];

fn js_tokens(src: &str) -> Result<Vec<Js>, String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'$' {
            i += 1;
            let mut segs = Vec::new();
            loop {
                match b.get(i) {
                    Some(b'.') if b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_' || *c == b'$') => {
                        let start = i + 1;
                        i = start;
                        while b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$') {
                            i += 1;
                        }
                        segs.push(Seg::Name(src[start..i].to_owned()));
                    }
                    Some(b'[') => {
                        let close = src[i..].find(']').ok_or("`[` without `]`")? + i;
                        let inside = src[i + 1..close].trim();
                        let q = inside.chars().next();
                        if matches!(q, Some('\'' | '"')) && inside.len() >= 2 && inside.ends_with(q.unwrap_or(' ')) {
                            let name = &inside[1..inside.len() - 1];
                            if name.contains(['\\', '\'', '"']) {
                                return Err("quotes and backslashes in a field name are not supported".into());
                            }
                            segs.push(Seg::Name(name.to_owned()));
                        } else {
                            let n = inside.parse().map_err(|_| format!("`[{inside}]` is not supported"))?;
                            segs.push(Seg::Index(n));
                        }
                        i = close + 1;
                    }
                    _ => break,
                }
            }
            match segs.split_first() {
                Some((Seg::Name(root), rest)) => out.push(Js::Path(root.clone(), rest.to_vec())),
                _ => return Err("`$` must be followed by `.name` or `['name']`".into()),
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
                i += 1;
            }
            let text = &src[start..i];
            if text.parse::<f64>().is_err() || text.ends_with('.') || b.get(i).is_some_and(|c| c.is_ascii_alphabetic())
            {
                return Err(format!("the number `{}` is not supported", &src[start..(i + 1).min(src.len())]));
            }
            out.push(Js::Num(text.to_owned()));
        } else if c == b'\'' || c == b'"' {
            let mut s = String::new();
            let mut chars = src[i + 1..].char_indices();
            let mut end = None;
            while let Some((k, ch)) = chars.next() {
                match ch {
                    ch if ch == char::from(c) => {
                        end = Some(i + 1 + k + 1);
                        break;
                    }
                    '\\' => match chars.next().map(|(_, e)| e) {
                        Some(e @ ('\\' | '\'' | '"')) => s.push(e),
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        _ => return Err("only the escapes \\\\ \\' \\\" \\n \\t are supported in strings".into()),
                    },
                    ch => s.push(ch),
                }
            }
            i = end.ok_or("a string has no closing quote")?;
            out.push(Js::Str(s));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
                i += 1;
            }
            out.push(Js::Word(src[start..i].to_owned()));
        } else {
            let p = JS_PUNCT
                .iter()
                .find(|p| src[i..].starts_with(**p))
                .ok_or_else(|| format!("`{}` is not supported", src[i..].chars().next().unwrap_or(' ')))?;
            out.push(Js::Punct(p));
            i += p.len();
        }
    }
    Ok(out)
}

/// Translates the trivial JavaScript of Conductor definitions into our expression language;
/// `resolve` gives our text for a `$.root...` path.
fn translate_js(src: &str, resolve: &mut Resolver<'_>) -> Result<JsOut, String> {
    let mut toks: Vec<Js> = js_tokens(src)?
        .into_iter()
        .filter(|t| !matches!(t, Js::Punct(";")) && t != &Js::Word("return".into()))
        .collect();
    // `if (C) { true; } else { false; }` is C; the other way round, !(C).
    if toks.first() == Some(&Js::Word("if".into())) {
        let shape = |t: &[Js]| -> Option<bool> {
            match t {
                [
                    Js::Punct("{"),
                    Js::Word(a),
                    Js::Punct("}"),
                    Js::Word(e),
                    Js::Punct("{"),
                    Js::Word(b),
                    Js::Punct("}"),
                ] if e == "else" => match (a.as_str(), b.as_str()) {
                    ("true", "false") => Some(true),
                    ("false", "true") => Some(false),
                    _ => None,
                },
                _ => None,
            }
        };
        let close = matching_paren(&toks, 1);
        let found = close.and_then(|c| shape(&toks[c + 1..]).map(|keep| (c, keep)));
        let Some((close, keep)) = found else {
            return Err("only `if (condition) { true; } else { false; }` is understood of `if`".into());
        };
        let mut inner: Vec<Js> = toks[2..close].to_vec();
        if !keep {
            inner.insert(0, Js::Punct("("));
            inner.insert(0, Js::Punct("!"));
            inner.push(Js::Punct(")"));
        }
        toks = inner;
    }
    if toks.is_empty() {
        return Err("the expression is empty".into());
    }
    let bound = match toks.as_slice() {
        [Js::Path(root, segs), Js::Punct(op @ ("<" | "<=")), Js::Num(n)]
            if segs.as_slice() == [Seg::Name("iteration".into())] =>
        {
            n.parse::<i64>().ok().map(|n| JsBound { root: root.clone(), inclusive: *op == "<=", n })
        }
        _ => None,
    };
    let plain =
        matches!(toks.as_slice(), [Js::Path(..)] | [Js::Path(..), Js::Punct("<" | "<=" | ">" | ">="), Js::Num(_)]);
    let mut parts: Vec<String> = Vec::with_capacity(toks.len());
    for (k, t) in toks.iter().enumerate() {
        parts.push(match t {
            Js::Path(root, segs) => {
                if toks.get(k + 1) == Some(&Js::Punct("(")) {
                    return Err(format!("calling `{}` is not supported", render_conductor(root, segs)));
                }
                match segs.split_last() {
                    Some((Seg::Name(l), init)) if l == "length" => format!("len({})", resolve(root, init)?),
                    _ => resolve(root, segs)?,
                }
            }
            Js::Num(n) => n.clone(),
            Js::Str(s) => string_literal(s),
            Js::Word(w) => match w.as_str() {
                "true" | "false" | "null" => w.clone(),
                "undefined" => "null".into(),
                other => return Err(format!("`{other}` is not supported: only `$` paths, literals and operators")),
            },
            Js::Punct(p) => match *p {
                "===" => "==".into(),
                "!==" => "!=".into(),
                "{" | "}" => return Err("blocks are not supported".into()),
                p => p.to_owned(),
            },
        });
    }
    let text = parts.join(" ");
    Expr::parse(&text).map_err(|e| format!("translated to `{text}`, which does not parse: {e}"))?;
    Ok(JsOut { text, js: !plain, bound })
}

fn matching_paren(toks: &[Js], open: usize) -> Option<usize> {
    if toks.get(open) != Some(&Js::Punct("(")) {
        return None;
    }
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t {
            Js::Punct("(") => depth += 1,
            Js::Punct(")") => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
#[path = "conductor_tests.rs"]
mod tests;
