//! What expressions see while the decider runs: `task` (its input, id and key) and every step of
//! the definition by name (its input, output and state). Inside a loop's pass, a step's name
//! means its instance of that pass, then of the enclosing passes, then outside any loop; outside
//! its loop, a loop body's step means its latest pass.

use super::{StepView, TaskView};
use crate::expr::Scope;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::HashSet;

pub struct StepScope<'a> {
    pub task: &'a TaskView<'a>,
    pub steps: &'a [StepView],
    /// Every step name of the definition: a known step that has not run reads as null.
    pub names: &'a HashSet<String>,
    /// The loop-pass suffix of the place being decided (`#2#1`), or empty.
    pub suffix: &'a str,
}

impl StepScope<'_> {
    fn row(&self, name: &str) -> Option<&StepView> {
        let mut suffix = self.suffix;
        loop {
            let instance = format!("{name}{suffix}");
            if let Some(r) = self.steps.iter().rev().find(|s| s.name == instance) {
                return Some(r);
            }
            if suffix.is_empty() {
                // Outside the loop that ran it, a step means its latest pass.
                return self.steps.iter().rev().find(|s| super::base_name(&s.name) == name);
            }
            suffix = &suffix[..suffix.rfind('#').unwrap_or(0)];
        }
    }
}

impl Scope for StepScope<'_> {
    fn root(&self, name: &str) -> Option<Cow<'_, Value>> {
        if name == "task" {
            let t = self.task;
            return Some(Cow::Owned(json!({"input": t.input, "id": t.id, "key": t.key})));
        }
        if !self.names.contains(name) {
            return None;
        }
        Some(Cow::Owned(match self.row(name) {
            Some(r) => json!({"input": r.input, "output": r.output, "state": r.state.as_str()}),
            None => Value::Null,
        }))
    }
}
