//! Workflow definitions: named, versioned lists of steps, checked before anything runs.
//!
//! This first form runs steps one after the other; control steps (SWITCH, FORK, ...) extend
//! [`StepDef`] later, and the decider with them.

use crate::retry::RetryPolicy;
use crate::time::serde_duration;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::time::Duration;

/// The longest complete-by window a step may ask for.
pub const MAX_STEP_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most steps one definition may hold.
pub const MAX_STEPS: usize = 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDef {
    pub name: String,
    /// Definitions are immutable per version: a running task keeps the version it started with.
    #[serde(default = "one")]
    pub version: u32,
    /// The retry policy of steps that name none; when absent, the agent's or the deployment's applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    pub steps: Vec<StepDef>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDef {
    /// Unique within the workflow; shown to operators.
    pub name: String,
    /// The agent that runs this step (an agent registered with the engine, such as "http").
    pub agent: String,
    /// What the agent needs besides the step's input (for the HTTP agent: method, url, headers).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub config: serde_json::Value,
    /// The complete-by window of one claim: the agent must reply within it, or the step is retried.
    #[serde(with = "serde_duration", default = "default_timeout")]
    pub timeout: Duration,
    /// This step's own retry policy, before the workflow's, the agent's and the deployment's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// Added to the task's priority: higher runs first.
    #[serde(default)]
    pub priority: i32,
}

impl StepDef {
    /// The priority of this step in a task of `task_priority`: the sum, saturating.
    pub fn priority_in(&self, task_priority: i32) -> i32 {
        task_priority.saturating_add(self.priority)
    }
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

/// What is wrong with a definition, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct DefinitionError {
    /// Where in the definition, as `steps[2].timeout`.
    pub path: String,
    pub problem: String,
}

fn err(path: impl Into<String>, problem: impl Into<String>) -> DefinitionError {
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
    /// Checks everything a definition must satisfy before it is registered.
    pub fn validate(&self) -> Result<(), DefinitionError> {
        check_name("name", &self.name)?;
        if self.version == 0 {
            return Err(err("version", "must be 1 or more"));
        }
        if let Some(p) = &self.retry {
            p.validate().map_err(|e| err("retry", e.to_string()))?;
        }
        if self.steps.is_empty() {
            return Err(err("steps", "a workflow needs at least one step"));
        }
        if self.steps.len() > MAX_STEPS {
            return Err(err("steps", format!("at most {MAX_STEPS} steps")));
        }
        let mut names = HashSet::new();
        for (i, s) in self.steps.iter().enumerate() {
            let at = |field: &str| format!("steps[{i}].{field}");
            check_name(&at("name"), &s.name)?;
            if !names.insert(s.name.as_str()) {
                return Err(err(at("name"), format!("{:?} is used by an earlier step", s.name)));
            }
            check_name(&at("agent"), &s.agent)?;
            if s.timeout.is_zero() || s.timeout > MAX_STEP_TIMEOUT {
                return Err(err(at("timeout"), "must be more than 0 and at most 7 days"));
            }
            if let Some(p) = &s.retry {
                p.validate().map_err(|e| err(at("retry"), e.to_string()))?;
            }
        }
        Ok(())
    }

    /// Reads and checks a definition from JSON.
    pub fn from_json(text: &str) -> Result<WorkflowDef, DefinitionError> {
        let def: WorkflowDef = serde_json::from_str(text)
            .map_err(|e| err(format!("line {} column {}", e.line(), e.column()), e.to_string()))?;
        def.validate()?;
        Ok(def)
    }

    /// The retry policy a step of this workflow carries: its own, else the workflow's (the agent's
    /// or the deployment's apply when this is none).
    pub fn retry_for<'a>(&'a self, step: &'a StepDef) -> Option<&'a RetryPolicy> {
        step.retry.as_ref().or(self.retry.as_ref())
    }

    pub fn step(&self, name: &str) -> Option<(usize, &StepDef)> {
        self.steps.iter().enumerate().find(|(_, s)| s.name == name)
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
        assert_eq!(d.steps[0].timeout, Duration::from_secs(30));
        assert_eq!(d.steps[1].timeout, Duration::from_secs(5));
        assert_eq!(d.step("charge").unwrap().0, 1);
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
