//! Workflow definitions: named, versioned trees of steps, checked before anything runs.
//!
//! Layout: [`step`] holds the step record and its builder, [`validate`] every rule a definition
//! must satisfy (errors name the place, as `steps[1].branches[0][2].agent`), [`parse`] reading
//! JSON and YAML.

#[cfg(test)]
#[path = "tests.rs"]
mod format_tests;
pub mod parse;
pub mod step;
pub mod validate;

pub use step::{DEFAULT_MAX_ITERATIONS, DEFAULT_STEP_TIMEOUT, EndStatus, OnTimeout, StepDef, StepKind};

use crate::retry::RetryPolicy;
use crate::time::serde_duration;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest complete-by window a step may ask for.
pub const MAX_STEP_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest a task may be given to finish.
pub const MAX_TASK_TIMEOUT: Duration = Duration::from_secs(366 * 24 * 3600);
/// The most steps one definition may hold, nested ones and compensations included.
pub const MAX_STEPS: usize = 1000;
/// The most items a fork_each runs its body for.
pub const MAX_ITEMS: usize = 1000;
/// The deepest nesting of control steps.
pub const MAX_DEPTH: usize = 16;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDef {
    /// The workflow's name, which tasks are submitted under (names starting `job:` are reserved).
    pub name: String,
    /// Definitions are immutable per version: a running task keeps the version it started with.
    #[serde(default = "one")]
    pub version: u32,
    /// For people reading the definition; the engine does not use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The retry policy of steps that name none; when absent, the agent's or the deployment's applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// The most a task may take from its start; past it, the reconciler fails it.
    #[serde(with = "serde_duration::option", default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// When a task fails for good, run the compensations of its completed steps (P7). On by default.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub compensate_on_failure: bool,
    /// When an operator cancels a task, run the compensations of its completed steps. Off by default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub compensate_on_cancel: bool,
    /// The task's output, a template over `task` and the steps; the last step's output when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// The task variables' values before any set step runs: a JSON object (`${task.variables.x}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<serde_json::Value>,
    /// Defaults of the task's input: an object whose keys fill what the submitted input lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_defaults: Option<serde_json::Value>,
    /// A workflow started, in the same transaction, when a task of this one fails for good: its
    /// input names the failed task, its reason and its input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    /// The top-level steps, run in order.
    pub steps: Vec<StepDef>,
}

fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}
fn is_false(b: &bool) -> bool {
    !*b
}

fn one() -> u32 {
    1
}

/// What is wrong with a definition, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct DefinitionError {
    /// Where in the definition, as `steps[2].timeout`.
    pub path: String,
    /// What is wrong there, in words.
    pub problem: String,
}

pub(crate) fn err(path: impl Into<String>, problem: impl Into<String>) -> DefinitionError {
    DefinitionError { path: path.into(), problem: problem.into() }
}

/// Names of workflows, steps and agents: short, and safe in URLs, logs and headers.
pub fn check_name(path: &str, name: &str) -> Result<(), DefinitionError> {
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
    if name.is_empty() || name.len() > 100 || !ok_chars {
        return Err(err(path, format!("{name:?} is not a valid name: use 1 to 100 of A-Z a-z 0-9 - _ . :")));
    }
    Ok(())
}

impl WorkflowDef {
    /// The retry policy a step of this workflow carries: its own, else the workflow's (the agent's
    /// or the deployment's apply when this is none).
    pub fn retry_for<'a>(&'a self, step: &'a StepDef) -> Option<&'a RetryPolicy> {
        step.retry.as_ref().or(self.retry.as_ref())
    }

    /// A new definition with these top-level steps and every policy at its default.
    pub fn new(name: impl Into<String>, version: u32, steps: Vec<StepDef>) -> WorkflowDef {
        WorkflowDef {
            name: name.into(),
            version,
            description: None,
            retry: None,
            timeout: None,
            compensate_on_failure: true,
            compensate_on_cancel: false,
            output: None,
            variables: None,
            input_defaults: None,
            on_failure: None,
            steps,
        }
    }

    /// Every step of the definition (nested ones and compensations included), depth first.
    pub fn all_steps(&self) -> Vec<&StepDef> {
        let mut out = Vec::new();
        for s in &self.steps {
            s.walk(&mut out);
        }
        out
    }

    /// The step of this name, wherever it is nested. (Searched without collecting: the stores
    /// call it for every step they write.)
    pub fn find(&self, name: &str) -> Option<&StepDef> {
        fn in_list<'a>(steps: &'a [StepDef], name: &str) -> Option<&'a StepDef> {
            steps.iter().find_map(|s| {
                if s.name == name {
                    return Some(s);
                }
                if let Some(c) = s.compensate.as_deref().filter(|c| c.name == name) {
                    return Some(c);
                }
                s.children().into_iter().find_map(|list| in_list(list, name))
            })
        }
        in_list(&self.steps, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &str = r#"{
        "name": "order", "version": 2,
        "steps": [
            {"name": "reserve", "agent": "http", "config": {"url": "http://127.0.0.1:1/reserve"}},
            {"name": "charge", "agent": "http", "timeout": "5s",
             "retry": {"kind": "intervals", "intervals": ["1s", "2s"]}}
        ]
    }"#;

    #[test]
    fn a_good_definition_reads_with_defaults() {
        let d = WorkflowDef::from_json(ORDER).unwrap();
        assert_eq!(d.version, 2);
        assert_eq!(d.steps[0].timeout(), Duration::from_secs(30));
        assert_eq!(d.steps[1].timeout(), Duration::from_secs(5));
        assert_eq!(d.find("charge").unwrap().name, "charge");
        assert_eq!(d.retry_for(&d.steps[0]), None, "no policy of its own and none in the workflow");
        assert!(d.retry_for(&d.steps[1]).is_some());
        assert_eq!(d.steps[1].priority_in(i32::MAX), i32::MAX);
    }

    #[test]
    fn errors_name_the_place() {
        let dup = ORDER.replace("\"charge\"", "\"reserve\"");
        assert_eq!(WorkflowDef::from_json(&dup).unwrap_err().path, "steps[1].name");
        let zero = ORDER.replace("\"5s\"", "0");
        assert_eq!(WorkflowDef::from_json(&zero).unwrap_err().path, "steps[1].timeout");
        let bad_retry = ORDER.replace("[\"1s\", \"2s\"]", "[]");
        assert_eq!(WorkflowDef::from_json(&bad_retry).unwrap_err().path, "steps[1].retry");
        let bad_name = ORDER.replace("\"order\"", "\"my order\"");
        assert_eq!(WorkflowDef::from_json(&bad_name).unwrap_err().path, "name");
        let unknown = ORDER.replace("\"version\"", "\"versoin\"");
        assert!(WorkflowDef::from_json(&unknown).unwrap_err().problem.contains("versoin"));
        let empty = r#"{"name":"x","steps":[]}"#;
        assert_eq!(WorkflowDef::from_json(empty).unwrap_err().path, "steps");
        assert!(WorkflowDef::from_json("{").unwrap_err().path.starts_with("line 1"));
    }
}
